/**
 * Group commit of event appends on PostgreSQL (issue 32, "no contention collapse": 8 servers on one database at
 * least as fast as 1). At most ONE append statement of this process is in flight; the appends asked for meanwhile
 * wait, and go together in the next statement: one round trip, one transaction, one WAL flush for all of them. Each
 * keeps its own compare-and-swap: its stream's head row moves only at its expected sequence number, its events are
 * inserted only when it did, and an append whose check failed is refused to its own caller alone while the others
 * commit (guarantee 6 per stream, as before).
 *
 * Why: on a machine whose cores are shared by many server processes and PostgreSQL's backends, every statement wakes
 * a backend that preempts some process, and a preempted process loses its caches: CPU per task grows with statements
 * per task. A queue that drains as fast as the database commits sends one statement per append when appends are
 * rare (an agent's task takes seconds), and fewer, larger ones exactly when many are due at once.
 *
 * Owns the append statements (one alone, and the batch), the batching rule and what a failed batch means for each
 * append in it. postgres-authority.ts validates arguments, packs the rows (postgres-events.ts) and maps errors.
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

/** An append waiting in the queue, and where its outcome goes. */
interface QueuedAppend extends AppendRequest {
  settle: (applied: boolean) => void;
  fail: (error: unknown) => void;
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

/** Most appends in one batch statement; more waiting together go in several. */
export const MAX_BATCH = 16;

/** The batch statement of `size` appends, by size (each size its own prepared statement, planned once per connection). */
const batchSql = new Map<number, string>();

/**
 * The batch statement of `size` appends: seven parameters per append (project, stream, new last sequence number,
 * expected one, count, single event, packed row) as a `VALUES` list, whose row count the planner knows, so the
 * prepared statement gets its generic plan and is not planned again on every call; every head row that is at its
 * expected number moves, the rows of exactly those appends are inserted, and their (project, stream) pairs come back.
 */
export function batchStatement(size: number): string {
  let sql = batchSql.get(size);
  if (sql !== undefined) return sql;
  const rows: string[] = [];
  for (let r = 0; r < size; r += 1) {
    const b = r * 7;
    rows.push(
      r === 0
        ? "($1::text, $2::text, $3::bigint, $4::bigint, $5::integer, $6::text, $7::bytea)"
        : `($${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6}, $${b + 7})`,
    );
  }
  sql = `WITH input (project_id, stream, last_seq, expected, n, event, packed) AS (VALUES ${rows.join(", ")}),
  head AS (
    UPDATE streams s SET last_seq = i.last_seq FROM input i
    WHERE s.project_id = i.project_id COLLATE "C" AND s.stream = i.stream COLLATE "C" AND s.last_seq = i.expected
    RETURNING s.project_id, s.stream),
  inserted AS (
    INSERT INTO events (project_id, stream, seq, n, event, batch, packed)
    SELECT i.project_id, i.stream, i.last_seq, i.n, i.event, NULL, i.packed FROM input i
    JOIN head h ON h.project_id = i.project_id COLLATE "C" AND h.stream = i.stream COLLATE "C")
  SELECT project_id, stream FROM head`;
  batchSql.set(size, sql);
  return sql;
}

/**
 * The queue of one authority's appends. An append asked for while no statement is in flight goes out on the next
 * turn of the event loop (`setImmediate`: the appends of one turn share it); one asked for meanwhile waits for the
 * statement in flight to end. A statement carries one append as before (`sendAlone`) or up to `MAX_BATCH` on distinct
 * streams as a batch: two appends to one stream never share one (the later one waits), so a batch moves each head
 * row at most once. When the database refuses a batch for its data (SQLSTATE class 22 or 23: the transaction rolled
 * back, nothing of it was written), each append in it is sent again alone, so only the one at fault fails; any other
 * error (connection lost, timeout, closed pool) fails every append in the batch with that error, as it would each of
 * them alone.
 */
export class AppendBatcher {
  #queue: QueuedAppend[] = [];
  #scheduled = false;
  #inFlight = 0;

  constructor(
    private readonly pool: pg.Pool,
    /** Statements in flight at once (1: a batch forms from whatever waited for the one before). */
    private readonly maxInFlight = 1,
  ) {}

  /**
   * Appends `a` and resolves `true` once committed, `false` when its stream was not at `expectedSeq` (nothing
   * written); rejects with the database's error. What a batch cannot carry goes alone at once, outside the queue: a
   * stream's first append (its head row is created, not moved), an announced one (its own `pg_notify`) and a row in
   * the plain `batch` form.
   */
  append(a: AppendRequest): Promise<boolean> {
    if (a.expectedSeq === 0 || a.notify.name !== "-quiet" || a.row[2] !== null) return sendAlone(this.pool, a);
    return new Promise((settle, fail) => {
      this.#queue.push({ ...a, settle, fail });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#queue.length === 0 || this.#inFlight >= this.maxInFlight) return;
    this.#scheduled = true;
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#inFlight >= this.maxInFlight) return;
    const queue = this.#queue;
    const batch: QueuedAppend[] = [];
    const later: QueuedAppend[] = [];
    const streams = new Set<string>();
    for (const a of queue) {
      const key = `${a.projectId}\u0000${a.stream}`;
      if (streams.has(key) || batch.length === MAX_BATCH) {
        later.push(a); // a later statement: one batch moves each head row at most once
        continue;
      }
      streams.add(key);
      batch.push(a);
    }
    this.#queue = later;
    this.#inFlight += 1;
    const done = (): void => {
      this.#inFlight -= 1;
      this.#schedule();
    };
    if (batch.length === 1) {
      const a = batch[0] as QueuedAppend;
      sendAlone(this.pool, a).then(
        (applied) => {
          done();
          a.settle(applied);
        },
        (error: unknown) => {
          done();
          a.fail(error);
        },
      );
      return;
    }
    this.#send(batch, done);
    this.#schedule();
  }

  #send(batch: readonly QueuedAppend[], done: () => void): void {
    const values: unknown[] = [];
    for (const a of batch) values.push(a.projectId, a.stream, a.lastSeq, a.expectedSeq, a.row[0], a.row[1], a.row[3]);
    this.pool
      .query<{ project_id: string; stream: string }>({
        name: `acp-append-batch-${batch.length}`,
        text: batchStatement(batch.length),
        values,
      })
      .then(
        (result) => {
          done();
          const applied = new Set(result.rows.map((r) => `${r.project_id}\u0000${r.stream}`));
          for (const a of batch) a.settle(applied.has(`${a.projectId}\u0000${a.stream}`));
        },
        (error: unknown) => {
          if (!rolledBackForData(error)) {
            done();
            for (const a of batch) a.fail(error);
            return;
          }
          // Nothing was written: each goes again alone, in order, still counted as this statement in flight.
          void (async () => {
            for (const a of batch) await sendAlone(this.pool, a).then(a.settle, a.fail);
            done();
          })();
        },
      );
  }
}

/**
 * True when PostgreSQL refused a statement for its data (SQLSTATE class 22, data exception, or 23, integrity
 * constraint violation, e.g. a duplicate event row of a damaged stream): the statement's transaction rolled back.
 */
function rolledBackForData(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("22") || code.startsWith("23"));
}
