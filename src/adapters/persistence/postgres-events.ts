/**
 * The PostgreSQL backend's event rows (issue 34: WAL bytes per task): the statements that append, read and prune the
 * `events` table, where one row holds the events of ONE append.
 *
 * A row covers the contiguous sequence numbers `seq - n + 1 … seq` (`seq` is the row's LAST event, the primary key
 * stays `(project_id, stream, seq)`), in one of three forms, every one readable forever:
 * - `packed` (schema version 4, what this server writes): the texts compressed together by this process with a
 *   preset dictionary (postgres-packed.ts), `event` and `batch` NULL. PostgreSQL compresses nothing below about
 *   2 KB a row, and a commit of a few tasks is 1-2 KB of JSON; packed, it is a few hundred bytes of WAL.
 * - `event` (`n` = 1): one event's JSON text, the only form a version 1 store holds.
 * - `batch` (`n` ≥ 2): the texts as a `text[]` (schema version 2, when the column was named `events`), compressed by
 *   PostgreSQL (lz4, postgres-schema.ts) past the row's toast threshold; written now only for texts that cannot
 *   pack (a `\n` or a lone surrogate, which JSON.stringify never writes).
 * One heap tuple and one index entry per append instead of one per event. Each event's text comes back as it was
 * stored, so one that is not JSON still comes back as its raw text (guarantee 4). Pruning the middle of a row splits
 * it into the rows of the kept parts, so every row stays contiguous.
 *
 * Owns the SQL and the row forms; postgres-authority.ts validates arguments, runs the statements and maps errors.
 */
import type pg from "pg";
import { parseStored } from "./authority-checks.js";
import { packTexts, unpackTexts } from "./postgres-packed.js";
import type { StoredEvent } from "../../core/ports.js";

/** The columns of one event row as written: `n` and exactly one of `event`, `batch`, `packed`. */
interface EventRowForm {
  n: number;
  event: string | null;
  batch: string[] | null;
  packed: Buffer | null;
}

/** The form this server writes for `texts` (at least one): packed when they pack, else the plain form. */
async function rowForm(texts: readonly string[]): Promise<EventRowForm> {
  const packed = await packTexts(texts);
  if (packed !== null) return { n: texts.length, event: null, batch: null, packed };
  return texts.length === 1
    ? { n: 1, event: texts[0] ?? null, batch: null, packed: null }
    : { n: texts.length, event: null, batch: [...texts], packed: null };
}

/** The parameters `$5 … $8` of `INSERT_APPENDED` for `texts` (at least one): the row this server writes. */
export async function appendedRow(texts: readonly string[]): Promise<unknown[]> {
  const form = await rowForm(texts);
  return [form.n, form.event, form.batch, form.packed];
}

/**
 * The `INSERT … SELECT` of one append, for a statement whose parameters are `$1` project, `$2` stream, `$3` the new
 * last sequence number, `$4` the expected one, `$5 … $8` the row's `n`, `event`, `batch` and `packed`
 * (`appendParams`; `$3` = `$4` + `n`); inserts only when the CTE `head` returned a row (the head row moved).
 */
export const INSERT_APPENDED = `INSERT INTO events (project_id, stream, seq, n, event, batch, packed)
  SELECT $1, $2, $4::bigint + $5::integer, $5::integer, $6::text, $7::text[], $8::bytea
  WHERE EXISTS (SELECT 1 FROM head)`;

/**
 * The read of `readEvents`: the events of `stream` of `projectId` above `afterSeq`, oldest first, at most `limit`, in
 * one statement on `pool`. Reads the rows holding such an event (an index range on `(project_id, stream, seq)`; at
 * most `limit` rows: each holds at least one such event) and unpacks them here. Text that is not JSON stays raw
 * text; a packed row that does not unpack throws `AuthorityFailure`. Never writes.
 */
export async function readStoredEvents(
  pool: pg.Pool,
  projectId: string,
  stream: string,
  afterSeq: number,
  limit?: number,
): Promise<StoredEvent[]> {
  const result = await pool.query<EventRow>({
    name: limit === undefined ? "acp-read-events" : "acp-read-events-limit",
    text: `SELECT seq, n, event, batch, packed FROM events WHERE project_id = $1 AND stream = $2 AND seq > $3
      ORDER BY seq${limit === undefined ? "" : " LIMIT $4"}`,
    values: limit === undefined ? [projectId, stream, afterSeq] : [projectId, stream, afterSeq, limit],
  });
  return toStoredEvents(result.rows, afterSeq, limit);
}

/** One stored row as read (`seq` as node-postgres returns a `bigint`). */
interface EventRow {
  seq: string;
  n: number;
  event: string | null;
  batch: string[] | null;
  packed: Buffer | null;
}

/**
 * The events of `rows` (as `readStoredEvents` reads them) above `afterSeq`, oldest first, at most `limit` (text that is not JSON
 * stays raw text). Throws `AuthorityFailure` for a packed row that does not unpack.
 */
function toStoredEvents(rows: readonly EventRow[], afterSeq: number, limit?: number): StoredEvent[] {
  const out: StoredEvent[] = [];
  for (const row of rows) {
    const texts = textsOf(row);
    const first = Number(row.seq) - texts.length + 1;
    for (let i = Math.max(0, afterSeq + 1 - first); i < texts.length; i += 1) {
      if (limit !== undefined && out.length >= limit) return out;
      out.push({ seq: first + i, event: parseStored(texts[i] ?? "") });
    }
  }
  return out;
}

/** The texts of one row, oldest first, whichever its form. */
function textsOf(row: EventRow): string[] {
  if (row.packed !== null) return unpackTexts(row.packed, row.n);
  return row.batch ?? (row.event === null ? [] : [row.event]);
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
        `SELECT seq, n, event, batch, packed FROM events WHERE project_id = $1 AND stream = $2 AND ${sql} ORDER BY seq LIMIT 1`,
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
    const form = await rowForm(part.texts);
    await client.query(
      "INSERT INTO events (project_id, stream, seq, n, event, batch, packed) VALUES ($1, $2, $3, $4, $5, $6, $7)",
      [...key, part.seq, form.n, form.event, form.batch, form.packed],
    );
    removed -= part.texts.length;
  }
  return removed;
}
