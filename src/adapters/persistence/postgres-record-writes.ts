/**
 * The statements of one record write alone on PostgreSQL: a creation (`INSERT … ON CONFLICT DO NOTHING`), an update
 * at an expected revision, or a delete (at an expected revision, or whatever it is), each a compare-and-swap on its
 * own row. Several go together through group commit (postgres-write-batch.ts, issue 32).
 *
 * Owns the requests' shapes and their statements alone. postgres-authority.ts validates arguments, serialises the
 * value, maps errors and reads the current revision of a refused write for its conflict.
 */
import type pg from "pg";

/** One put as postgres-authority.ts asks for it. */
export interface PutRequest {
  projectId: string;
  kind: string;
  id: string;
  /** The value's JSON text. */
  json: string;
  /** ISO-8601 UTC. */
  updatedAt: string;
  /** `null`: create only when the record does not exist; a number: update only the row at that revision. */
  expectedRevision: number | null;
  /** The change feed's `notifySql` for this put, its payload as parameter 6 (postgres-feed.ts). */
  notify: { sql: string; params: string[]; name: string };
}

/** The statement of one put alone; resolves with the new revision, or `null` when its check failed. */
export async function putAlone(pool: pg.Pool, r: PutRequest): Promise<number | null> {
  const { notify } = r;
  const result =
    r.expectedRevision === null
      ? await pool.query<{ revision: string }>({
          name: `acp-put-new${notify.name}`,
          text: `WITH written AS (
             INSERT INTO records (project_id, kind, id, value, revision, updated_at)
             VALUES ($1, $2, $3, $4, 1, $5) ON CONFLICT DO NOTHING RETURNING revision)
           SELECT revision, ${notify.sql} FROM written`,
          values: [r.projectId, r.kind, r.id, r.json, r.updatedAt, ...notify.params],
        })
      : await pool.query<{ revision: string }>({
          name: `acp-put-next${notify.name}`,
          text: `WITH written AS (
             UPDATE records SET value = $4, revision = revision + 1, updated_at = $5
             WHERE project_id = $1 AND kind = $2 AND id = $3 AND revision = $7 RETURNING revision)
           SELECT revision, ${notify.sql} FROM written`,
          values: [r.projectId, r.kind, r.id, r.json, r.updatedAt, ...notify.params, r.expectedRevision],
        });
  const row = result.rows[0];
  return row ? Number(row.revision) : null;
}

/** One delete as postgres-authority.ts asks for it. */
export interface DeleteRequest {
  projectId: string;
  kind: string;
  id: string;
  /** Delete only the row at this revision; `undefined`: whatever its revision. */
  expectedRevision: number | undefined;
  /** The change feed's `notifySql` for this delete, its payload as parameter 4 (postgres-feed.ts). */
  notify: { sql: string; params: string[]; name: string };
}

/**
 * The statement of one delete alone (prepared, as every write of a run's hot path: a lease is deleted once per
 * product); resolves `true` when the row was deleted, `false` when there was none (at `expectedRevision`).
 */
export async function deleteAlone(pool: pg.Pool, d: DeleteRequest): Promise<boolean> {
  const at = d.expectedRevision !== undefined;
  const result = await pool.query({
    name: `acp-delete${at ? "-at" : ""}${d.notify.name}`,
    text: `WITH gone AS (
       DELETE FROM records WHERE project_id = $1 AND kind = $2 AND id = $3 ${at ? "AND revision = $5" : ""} RETURNING 1)
     SELECT ${d.notify.sql} FROM gone`,
    values: [d.projectId, d.kind, d.id, ...d.notify.params, ...(at ? [d.expectedRevision] : [])],
  });
  return (result.rowCount ?? 0) > 0;
}
