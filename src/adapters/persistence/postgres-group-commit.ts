/**
 * Group commit on PostgreSQL (issue 32, "no contention collapse": 8 servers on one database at least as fast as 1):
 * a queue of writes of which at most a set number of statements (one by default) are in flight per process; the
 * writes asked for meanwhile wait, and go together in the next statement: one round trip, one transaction, one WAL
 * flush for all of them. Each keeps its own compare-and-swap, decided by the statement per row, so a write whose
 * check failed is refused to its own caller alone while the others commit (guarantee 6 per record and per stream).
 *
 * Why: on a machine whose cores are shared by many server processes and PostgreSQL's backends, every statement wakes
 * a backend that preempts some process, and a preempted process loses its caches: CPU per task grows with statements
 * per task. A queue that drains as fast as the database commits sends one statement per write when writes are rare
 * (an agent's task takes seconds), and fewer, larger ones exactly when many are due at once.
 *
 * Owns the queueing rule and what a failed batch means for each write in it; the statements are the caller's
 * (postgres-write-batch.ts).
 */

/** Most writes in one statement; more waiting together go in several. */
export const MAX_BATCH = 16;

/**
 * Most bytes of writes (`GroupStatements.bytes`) in one statement of several: a write that would take a batch past it
 * waits for the next statement (a write larger than this goes alone). PostgreSQL refuses a message past 1 GB by
 * dropping the connection, which would fail every write of the batch where each alone would have succeeded; and a
 * batch this size already takes tens of milliseconds to send.
 */
export const MAX_BATCH_BYTES = 8 * 1024 * 1024;

/**
 * The `VALUES` list of `size` rows of `types.length` parameters each, numbered from `$first`; the first row's
 * parameters are cast to `types` and the other rows take their types from it. Its row count is known to the planner,
 * so a prepared batch statement keeps its generic plan instead of being planned again on every call.
 */
export function valuesList(size: number, types: readonly string[], first = 1): string {
  const rows: string[] = [];
  for (let r = 0; r < size; r += 1) {
    const b = first + r * types.length;
    rows.push(`(${types.map((t, c) => (r === 0 ? `$${b + c}::${t}` : `$${b + c}`)).join(", ")})`);
  }
  return rows.join(", ");
}

/** The statements of the writes of one queue. */
export interface GroupStatements<T, R> {
  /** The row the write changes: two writes of one key never share a statement (the later one waits). */
  key(write: T): string;
  /** The bytes the write adds to a statement's message (its texts and binary values; default 0). */
  bytes?(write: T): number;
  /** The statement of one write alone. */
  alone(write: T): Promise<R>;
  /** One statement for 2 … `MAX_BATCH` writes on distinct keys; their outcomes, in order. */
  together(writes: readonly T[]): Promise<R[]>;
}

interface Queued<T, R> {
  write: T;
  settle: (outcome: R) => void;
  fail: (error: unknown) => void;
}

/**
 * One queue of writes of one authority. A write asked for while fewer than `maxInFlight` statements are in flight
 * goes out on the next turn of the event loop (`setImmediate`: the writes of one turn share it); one asked for while
 * they all are waits for one of them to end, and so does a write whose key is in a statement in flight. A statement
 * carries one write (`alone`) or up to `MAX_BATCH` on distinct keys and of at most `MAX_BATCH_BYTES` (`together`).
 * When the database refuses a batch and rolls it back (SQLSTATE class 22, 23, 40, 54 or 55: bad data, a damaged
 * row, a deadlock, a value past a limit such as an id too long for its index, a row locked by another transaction
 * past `lock_timeout`; nothing of it was written), each write in it is sent again alone, in order, so only the one at
 * fault fails; any other error (connection lost, timeout, closed pool) fails every write in the batch with that
 * error, as it would each of them alone.
 */
export class GroupCommit<T, R> {
  #queue: Queued<T, R>[] = [];
  #scheduled = false;
  #inFlight = 0;
  /** The keys of the writes of the statements in flight: a later write of one of them waits for its statement. */
  readonly #busy = new Set<string>();
  #drainWaiters: (() => void)[] = [];

  constructor(
    private readonly statements: GroupStatements<T, R>,
    /** Statements in flight at once (default 1); a key is never in two of them. */
    private readonly maxInFlight = 1,
  ) {}

  /** Queues `write`; resolves with its outcome once its statement has run, rejects with the database's error. */
  submit(write: T): Promise<R> {
    return new Promise((settle, fail) => {
      this.#queue.push({ write, settle, fail });
      this.#schedule();
    });
  }

  /** Resolves once no write is queued and no statement is in flight (the authority's `close` waits for it). */
  drained(): Promise<void> {
    if (this.#inFlight === 0 && this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.maxInFlight || this.#queue.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#inFlight >= this.maxInFlight) return;
    const batch: Queued<T, R>[] = [];
    const later: Queued<T, R>[] = [];
    const keys: string[] = [];
    const held = new Set<string>();
    let bytes = 0;
    for (const q of this.#queue) {
      const key = this.statements.key(q.write);
      const size = this.statements.bytes?.(q.write) ?? 0;
      const full = batch.length === MAX_BATCH || (batch.length > 0 && bytes + size > MAX_BATCH_BYTES);
      if (this.#busy.has(key) || held.has(key) || full) {
        // A write left for later holds its key back for this statement: a later write of that key never overtakes it.
        held.add(key);
        later.push(q);
      } else {
        this.#busy.add(key);
        keys.push(key);
        batch.push(q);
        bytes += size;
      }
    }
    this.#queue = later;
    if (batch.length === 0) return;
    this.#inFlight += 1;
    void this.#send(batch).finally(() => {
      this.#inFlight -= 1;
      for (const key of keys) this.#busy.delete(key);
      this.#schedule();
      if (this.#queue.length > 0 || this.#inFlight > 0) return;
      for (const resolve of this.#drainWaiters.splice(0)) resolve();
    });
    // More than one statement's worth waiting, and a statement slot still free: the rest goes now too.
    this.#schedule();
  }

  /** Runs the statement of `batch` and settles each write in it. Never rejects. */
  async #send(batch: readonly Queued<T, R>[]): Promise<void> {
    if (batch.length === 1) {
      const q = batch[0] as Queued<T, R>;
      await this.statements.alone(q.write).then(q.settle, q.fail);
      return;
    }
    let outcomes: R[];
    try {
      outcomes = await this.statements.together(batch.map((q) => q.write));
    } catch (error) {
      if (!rolledBack(error)) {
        for (const q of batch) q.fail(error);
        return;
      }
      // Nothing was written: each goes again alone, in order, still as this statement in flight.
      for (const q of batch) await this.statements.alone(q.write).then(q.settle, q.fail);
      return;
    }
    batch.forEach((q, i) => q.settle(outcomes[i] as R));
  }
}

/**
 * True when PostgreSQL refused a statement and rolled its transaction back for what it wrote or met: SQLSTATE class
 * 22 (data exception), 23 (integrity constraint violation, e.g. a duplicate event row of a damaged stream), 40
 * (transaction rollback: a deadlock with another server's batch, a serialization failure) or 54 (program limit
 * exceeded: e.g. 54000, an id whose index entry passes btree's 2704-byte limit; such an id fails alone too, and must
 * not fail the writes that shared its statement) or 55 (e.g. 55P03, lock not available: one row of the batch held by
 * another transaction past the pool's `lock_timeout`, postgres-authority.ts). Nothing of it was written.
 */
function rolledBack(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^(22|23|40|54|55)/.test(code);
}
