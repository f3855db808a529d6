/**
 * One transaction on one pooled PostgreSQL connection, for the backend's statements that need more than one round
 * trip (postgres-authority.ts `deleteStream` / `pruneEvents`, postgres-creation.ts's cursor read of issue 32).
 * Owns the BEGIN … COMMIT / ROLLBACK bracket and the connection's return to the pool only.
 */
import type pg from "pg";

/**
 * Runs `work` between `begin` (a BEGIN statement, e.g. `"BEGIN"` or `"BEGIN ISOLATION LEVEL REPEATABLE READ READ
 * ONLY"`) and COMMIT on one connection of `pool`, and resolves with its result once committed. On any error it rolls
 * back and rethrows the error as it came; a connection whose ROLLBACK failed is destroyed, not returned to the pool.
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  begin: string,
  work: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(begin);
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch((rollbackError: unknown) => {
      broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
    });
    throw error;
  } finally {
    client.release(broken);
  }
}
