/**
 * The append statements on PostgreSQL: one append alone, and several on distinct streams as one statement for group
 * commit (postgres-group-commit.ts, issue 32). Each append is a compare-and-swap on its stream's head row: the head
 * moves only at the append's expected sequence number, and its events are inserted only when it did.
 *
 * Owns the append statements and which appends may be sent together. postgres-authority.ts validates arguments,
 * packs the rows (postgres-events.ts) and maps errors.
 */
import type pg from "pg";
import { INSERT_APPENDED } from "./postgres-events.js";
import { bySize, GroupCommit, valuesList } from "./postgres-group-commit.js";

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
async function sendAlone(pool: pg.Pool, a: AppendRequest): Promise<boolean> {
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

/**
 * The batch statement of `size` appends: seven parameters per append (project, stream, new last sequence number,
 * expected one, count, single event, packed row) as a `VALUES` list; every head row that is at its expected number
 * moves, the rows of exactly those appends are inserted, and their (project, stream) pairs come back.
 */
const batchStatement = bySize(
  (size) => `WITH input (project_id, stream, last_seq, expected, n, event, packed) AS (
    VALUES ${valuesList(size, ["text", "text", "bigint", "bigint", "integer", "text", "bytea"])}),
  head AS (
    UPDATE streams s SET last_seq = i.last_seq FROM input i
    WHERE s.project_id = i.project_id COLLATE "C" AND s.stream = i.stream COLLATE "C" AND s.last_seq = i.expected
    RETURNING s.project_id, s.stream),
  inserted AS (
    INSERT INTO events (project_id, stream, seq, n, event, batch, packed)
    SELECT i.project_id, i.stream, i.last_seq, i.n, i.event, NULL, i.packed FROM input i
    JOIN head h ON h.project_id = i.project_id COLLATE "C" AND h.stream = i.stream COLLATE "C")
  SELECT project_id, stream FROM head`,
);

/** The appends of one authority, through group commit. */
export class AppendBatcher {
  readonly #group: GroupCommit<AppendRequest, boolean>;

  constructor(private readonly pool: pg.Pool) {
    this.#group = new GroupCommit({
      key: (a) => `${a.projectId}\u0000${a.stream}`,
      alone: (a) => sendAlone(pool, a),
      together: (appends) => sendTogether(pool, appends),
    });
  }

  /**
   * Appends `a` and resolves `true` once committed, `false` when its stream was not at `expectedSeq` (nothing
   * written); rejects with the database's error. What a batch cannot carry goes alone at once, outside the queue: a
   * stream's first append (its head row is created, not moved), an announced one (its own `pg_notify`) and a row in
   * the plain `batch` form.
   */
  append(a: AppendRequest): Promise<boolean> {
    if (a.expectedSeq === 0 || a.notify.name !== "-quiet" || a.row[2] !== null) return sendAlone(this.pool, a);
    return this.#group.submit(a);
  }

  /** Resolves once no append is queued or in flight. */
  drained(): Promise<void> {
    return this.#group.drained();
  }
}

/** The statement of 2 … `MAX_BATCH` appends on distinct streams; whether each was applied, in order. */
async function sendTogether(pool: pg.Pool, appends: readonly AppendRequest[]): Promise<boolean[]> {
  const values: unknown[] = [];
  for (const a of appends) values.push(a.projectId, a.stream, a.lastSeq, a.expectedSeq, a.row[0], a.row[1], a.row[3]);
  const result = await pool.query<{ project_id: string; stream: string }>({
    name: `acp-append-batch-${appends.length}`,
    text: batchStatement(appends.length),
    values,
  });
  const applied = new Set(result.rows.map((r) => `${r.project_id}\u0000${r.stream}`));
  return appends.map((a) => applied.has(`${a.projectId}\u0000${a.stream}`));
}
