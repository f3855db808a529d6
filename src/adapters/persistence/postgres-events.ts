/**
 * The PostgreSQL backend's event rows (schema version 2, issue 34: WAL bytes per task): the statements that append,
 * read and prune the `events` table, where one row holds the events of ONE append.
 *
 * A row covers the contiguous sequence numbers `seq - n + 1 … seq` (`seq` is the row's LAST event, the primary key
 * stays `(project_id, stream, seq)`): a single event is stored as its JSON text in `event` (`n` = 1, the only form a
 * version 1 store holds), two or more as a `text[]` in `events` (`n` = its length, `event` NULL). One heap tuple and
 * one index entry per append instead of one per event, and the batch is compressed as one value (lz4, the session
 * setting of postgres-schema.ts) once it passes the table's `toast_tuple_target`. Each array element is the event's
 * own text, so an element that is not JSON still comes back as its raw text (guarantee 4). Pruning the middle of a
 * row splits it into the rows of the kept parts, so every row stays contiguous.
 *
 * Owns the SQL only; postgres-authority.ts validates arguments, runs the statements and maps errors.
 */
import type pg from "pg";
import { parseStored } from "./authority-checks.js";
import type { StoredEvent } from "../../core/ports.js";

/**
 * The `INSERT … SELECT` of one append, for a statement whose parameters are `$1` project, `$2` stream, `$3` the new
 * last sequence number, `$4` the expected one and `$5` the events' texts (`text[]`, at least one; `$3` = `$4` + their
 * count); inserts only when the CTE `head` returned a row (the head row moved). One row keyed by the last sequence
 * number: `event` for one event, `events` for more.
 */
export const INSERT_APPENDED = `INSERT INTO events (project_id, stream, seq, n, event, events)
  SELECT $1, $2, $4::bigint + cardinality($5::text[]), cardinality($5::text[]),
         CASE WHEN cardinality($5::text[]) = 1 THEN ($5::text[])[1] END,
         CASE WHEN cardinality($5::text[]) > 1 THEN $5::text[] END
  WHERE EXISTS (SELECT 1 FROM head)`;

/**
 * The read of `readEvents`: every event of stream `$2` of project `$1` with a sequence number above `$3`, oldest
 * first, each row's array unnested in the database (at most `$4` when `limited`). An index range on
 * `(project_id, stream, seq)`: a row whose last event is above `$3` holds at least one event above it.
 */
export function readEventsSql(limited: boolean): string {
  return `SELECT x.seq, x.event FROM events e
    CROSS JOIN LATERAL (
      SELECT e.seq AS seq, e.event AS event WHERE e.events IS NULL
      UNION ALL
      SELECT e.seq - e.n + u.o, u.t FROM unnest(e.events) WITH ORDINALITY AS u(t, o)
    ) x
    WHERE e.project_id = $1 AND e.stream = $2 AND e.seq > $3 AND x.seq > $3
    ORDER BY e.seq, x.seq${limited ? " LIMIT $4" : ""}`;
}

/** Turns the rows of `readEventsSql` into stored events (text that is not JSON stays raw text). */
export function toStoredEvents(rows: readonly { seq: string; event: string }[]): StoredEvent[] {
  return rows.map((row) => ({ seq: Number(row.seq), event: parseStored(row.event) }));
}

interface EventRow {
  seq: string;
  n: number;
  event: string | null;
  events: string[] | null;
}

/** The texts of one row, oldest first. */
function textsOf(row: EventRow): string[] {
  return row.events ?? (row.event === null ? [] : [row.event]);
}

/**
 * Deletes the events with `afterSeq < seq < beforeSeq` of one stream, inside the caller's transaction on `client`
 * (which already holds the stream's head row `FOR UPDATE`), and returns how many were deleted. Rows wholly inside
 * the range go; the at most two rows that straddle a bound are replaced by the rows of their kept parts (the part
 * at or below `afterSeq` keyed by `afterSeq`, the part at or above `beforeSeq` by its old key).
 */
export async function pruneEventRows(
  client: pg.PoolClient,
  projectId: string,
  stream: string,
  afterSeq: number,
  beforeSeq: number,
): Promise<number> {
  if (beforeSeq <= afterSeq + 1) return 0;
  const key = [projectId, stream];
  const pick = async (sql: string, bound: number): Promise<EventRow | undefined> =>
    (
      await client.query<EventRow>(
        `SELECT seq, n, event, events FROM events WHERE project_id = $1 AND stream = $2 AND ${sql} ORDER BY seq LIMIT 1`,
        [...key, bound],
      )
    ).rows[0];
  // The row holding afterSeq + 1 and the row holding beforeSeq - 1 (the same row when one spans the whole range).
  const low = await pick("seq > $3", afterSeq);
  const high = await pick("seq >= $3", beforeSeq - 1);
  const kept: { seq: number; texts: string[] }[] = [];
  let removed = 0;
  const bounds = [low, high].filter((r): r is EventRow => r !== undefined);
  const straddling = bounds.filter((r, i) => i === 0 || r.seq !== bounds[0]?.seq);
  for (const r of straddling) {
    const last = Number(r.seq);
    const first = last - r.n + 1;
    if (first > beforeSeq - 1 || last < afterSeq + 1) continue; // wholly outside: untouched
    if (first > afterSeq && last < beforeSeq) continue; // wholly inside: the range delete below removes it
    const texts = textsOf(r);
    if (first <= afterSeq) kept.push({ seq: afterSeq, texts: texts.slice(0, afterSeq - first + 1) });
    if (last >= beforeSeq) kept.push({ seq: last, texts: texts.slice(beforeSeq - first) });
    const deleted = await client.query("DELETE FROM events WHERE project_id = $1 AND stream = $2 AND seq = $3", [
      ...key,
      last,
    ]);
    removed += (deleted.rowCount ?? 0) > 0 ? r.n : 0;
  }
  const inside = await client.query<{ n: string | null }>(
    `WITH gone AS (DELETE FROM events WHERE project_id = $1 AND stream = $2 AND seq > $3 AND seq < $4 RETURNING n)
     SELECT sum(n) AS n FROM gone`,
    [...key, afterSeq, beforeSeq],
  );
  removed += Number(inside.rows[0]?.n ?? 0);
  for (const part of kept) {
    await client.query(
      `INSERT INTO events (project_id, stream, seq, n, event, events)
       VALUES ($1, $2, $3, $4, CASE WHEN $4 = 1 THEN ($5::text[])[1] END, CASE WHEN $4 > 1 THEN $5::text[] END)`,
      [...key, part.seq, part.texts.length, part.texts],
    );
    removed -= part.texts.length;
  }
  return removed;
}
