/**
 * The statement of one event append alone on PostgreSQL: a compare-and-swap on its stream's head row (the head moves,
 * or is created, only at the append's expected sequence number) and its events inserted only when it did. Several
 * appends go together through group commit (postgres-write-batch.ts, issue 32).
 *
 * Owns the append's request shape and its statement alone. postgres-authority.ts validates arguments, packs the rows
 * (postgres-events.ts) and maps errors.
 */
import type pg from "pg";
import { INSERT_APPENDED } from "./postgres-events.js";

/** One append as postgres-authority.ts asks for it: the stream's compare-and-swap and the row to insert. */
export interface AppendRequest {
  projectId: string;
  stream: string;
  /** The stream's last sequence number after this append (`expectedSeq` + its events). */
  lastSeq: number;
  /** 0 for a new stream. */
  expectedSeq: number;
  /** `appendedRow`'s `[n, event, batch, packed]` (postgres-events.ts). */
  row: unknown[];
  /** The change feed's `notifySql` for this append, its payload as parameter 9 (postgres-feed.ts). */
  notify: { sql: string; params: string[]; name: string };
}

/**
 * The statement of one append alone (one round trip, one implicit transaction): the head row moves (or is created)
 * only at the expected sequence number, the events are inserted only when it did, and the notification is sent only
 * then. Resolves `true` when it was applied.
 */
export async function appendAlone(pool: pg.Pool, a: AppendRequest): Promise<boolean> {
  const head =
    a.expectedSeq === 0
      ? "INSERT INTO streams (project_id, stream, last_seq) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1"
      : "UPDATE streams SET last_seq = $3 WHERE project_id = $1 AND stream = $2 AND last_seq = $4 RETURNING 1";
  const result = await pool.query({
    name: `${a.expectedSeq === 0 ? "acp-append-new" : "acp-append-next"}${a.notify.name}`,
    text: `WITH head AS (${head}), inserted AS (${INSERT_APPENDED}) SELECT ${a.notify.sql} FROM head`,
    values: [a.projectId, a.stream, a.lastSeq, a.expectedSeq, ...a.row, ...a.notify.params],
  });
  return (result.rowCount ?? 0) === 1;
}
