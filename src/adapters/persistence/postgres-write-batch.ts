/**
 * Group commit of every unannounced write of one PostgreSQL authority in ONE queue (issue 32, "no contention
 * collapse"; postgres-group-commit.ts): event appends (a stream's first one too), record creations, updates and
 * deletes asked for while statements are in flight go together in the next one, whatever their sort. A product's
 * writes come one after another (each waits for the one before), so with several products in flight the next writes
 * due are mostly of different sorts: one queue per sort sent them as up to three statements, one queue as one.
 *
 * A statement of several writes is one `WITH` of up to five parts, one per sort present, each a `VALUES` list of its
 * writes and a compare-and-swap decided per row, exactly as each write alone decides it (postgres-append.ts,
 * postgres-record-writes.ts):
 * - next appends: the stream's head row moves only at its expected sequence number; its events row is inserted only
 *   when it did;
 * - first appends: the head row is created only when there is none (`ON CONFLICT DO NOTHING`), the events row only
 *   when it was;
 * - creations: the record is created only when there is none;
 * - updates: the record moves to its next revision only at its expected one;
 * - deletes: the record is deleted only at its expected revision (or whatever it is, without one).
 * Each write is refused (or fails) to its own caller alone; two writes of one stream or one record never share a
 * statement (the key below), so no row is written twice by one statement.
 *
 * Owns the batch statement and which writes the queue takes. postgres-authority.ts validates, packs, maps errors.
 */
import type pg from "pg";
import { appendAlone, type AppendRequest } from "./postgres-append.js";
import { GroupCommit, valuesList } from "./postgres-group-commit.js";
import {
  deleteAlone,
  putAlone,
  putOutcome,
  refused,
  type DeleteOutcome,
  type DeleteRequest,
  type PutOutcome,
  type PutRequest,
} from "./postgres-record-writes.js";

/** A write of the queue: an append, a put or a delete. */
type Write =
  | { append: AppendRequest; put?: never; del?: never }
  | { put: PutRequest; append?: never; del?: never }
  | { del: DeleteRequest; append?: never; put?: never };

/** An append's outcome (applied or not), or a put's or a delete's (postgres-record-writes.ts). */
type Outcome = boolean | PutOutcome | DeleteOutcome;

/** The five parts of a batch statement, in the order their parameters are numbered. */
const enum Part {
  NextAppends = 0,
  FirstAppends = 1,
  Creations = 2,
  Updates = 3,
  Deletes = 4,
}

const PARTS = 5;

/** The result rows giving each record write's revision as the statement saw it (refused writes report it). */
const SEEN = 5;

const partOf = (w: Write): Part => {
  if (w.append) return w.append.expectedSeq === 0 ? Part.FirstAppends : Part.NextAppends;
  if (w.put) return w.put.expectedRevision === null ? Part.Creations : Part.Updates;
  return Part.Deletes;
};

/** The record (`r`) or stream (`s`) a write changes: two writes of one never share a statement. */
const keyOf = (w: Write): string => {
  if (w.append) return `s\u0000${w.append.projectId}\u0000${w.append.stream}`;
  const r = w.put ?? w.del;
  return `r\u0000${r.projectId}\u0000${r.kind}\u0000${r.id}`;
};

/** The parameter types of one row of each part (postgres-events.ts `appendedRow` gives `n`, `event`, `packed`). */
const TYPES: readonly (readonly string[])[] = [
  ["text", "text", "bigint", "bigint", "integer", "text", "bytea"],
  ["text", "text", "bigint", "integer", "text", "bytea"],
  ["text", "text", "text", "text", "text"],
  ["text", "text", "text", "text", "text", "bigint"],
  ["text", "text", "text", "bigint"],
];

/**
 * The `WITH` clause `name` inserting the events rows of the appends of `input` whose stream is among `heads` (the
 * streams whose head row moved or was created by this statement).
 */
const insertEvents = (name: string, input: string, heads: string): string =>
  `${name} AS (INSERT INTO events (project_id, stream, seq, n, event, batch, packed)
    SELECT i.project_id, i.stream, i.last_seq, i.n, i.event, NULL, i.packed FROM ${input} i
    JOIN ${heads} h ON h.project_id = i.project_id COLLATE "C" AND h.stream = i.stream COLLATE "C")`;

/** The result rows of an appends part: one per stream of `heads`. */
const streamRows = (part: Part, heads: string): string =>
  `SELECT ${part} AS part, project_id, stream AS a, NULL::text AS b, NULL::bigint AS revision FROM ${heads}`;

/**
 * The text of the statement of a batch with `sizes[part]` writes of each part: the parts' `WITH` clauses, then one
 * row per write that took effect: `part`, `project_id`, `a` (stream, or record kind), `b` (record id), `revision`
 * (every `SELECT` names its columns: the first one present names the result's); and one row per record write, part
 * `SEEN`, with the record's revision in the statement's snapshot (NULL: none).
 */
function batchText(sizes: readonly number[]): string {
  const withs: string[] = [];
  const rows: string[] = [];
  let first = 1;
  const input = (part: Part, name: string, columns: string): string => {
    const size = sizes[part] ?? 0;
    const text = `${name} (${columns}) AS (VALUES ${valuesList(size, TYPES[part] as string[], first)})`;
    first += size * (TYPES[part] as string[]).length;
    return text;
  };
  if ((sizes[Part.NextAppends] ?? 0) > 0) {
    withs.push(
      input(Part.NextAppends, "an", "project_id, stream, last_seq, expected, n, event, packed"),
      `hn AS (UPDATE streams s SET last_seq = i.last_seq FROM an i
        WHERE s.project_id = i.project_id COLLATE "C" AND s.stream = i.stream COLLATE "C" AND s.last_seq = i.expected
        RETURNING s.project_id, s.stream)`,
      insertEvents("en", "an", "hn"),
    );
    rows.push(streamRows(Part.NextAppends, "hn"));
  }
  if ((sizes[Part.FirstAppends] ?? 0) > 0) {
    withs.push(
      input(Part.FirstAppends, "af", "project_id, stream, last_seq, n, event, packed"),
      `hf AS (INSERT INTO streams (project_id, stream, last_seq) SELECT project_id, stream, last_seq FROM af
        ON CONFLICT DO NOTHING RETURNING project_id, stream)`,
      insertEvents("ef", "af", "hf"),
    );
    rows.push(streamRows(Part.FirstAppends, "hf"));
  }
  if ((sizes[Part.Creations] ?? 0) > 0) {
    withs.push(
      input(Part.Creations, "rc", "project_id, kind, id, value, updated_at"),
      `c AS (INSERT INTO records (project_id, kind, id, value, revision, updated_at)
        SELECT project_id, kind, id, value, 1, updated_at FROM rc ON CONFLICT DO NOTHING
        RETURNING project_id, kind, id, revision)`,
    );
    rows.push(`SELECT 2 AS part, project_id, kind AS a, id AS b, revision FROM c`);
  }
  if ((sizes[Part.Updates] ?? 0) > 0) {
    withs.push(
      input(Part.Updates, "ru", "project_id, kind, id, value, updated_at, expected"),
      `u AS (UPDATE records r SET value = i.value, revision = r.revision + 1, updated_at = i.updated_at FROM ru i
        WHERE r.project_id = i.project_id COLLATE "C" AND r.kind = i.kind COLLATE "C" AND r.id = i.id COLLATE "C"
          AND r.revision = i.expected
        RETURNING r.project_id, r.kind, r.id, r.revision)`,
    );
    rows.push(`SELECT 3 AS part, project_id, kind AS a, id AS b, revision FROM u`);
  }
  if ((sizes[Part.Deletes] ?? 0) > 0) {
    withs.push(
      input(Part.Deletes, "rd", "project_id, kind, id, expected"),
      `d AS (DELETE FROM records r USING rd i
        WHERE r.project_id = i.project_id COLLATE "C" AND r.kind = i.kind COLLATE "C" AND r.id = i.id COLLATE "C"
          AND (i.expected IS NULL OR r.revision = i.expected)
        RETURNING r.project_id, r.kind, r.id)`,
    );
    rows.push(`SELECT 4 AS part, project_id, kind AS a, id AS b, NULL::bigint AS revision FROM d`);
  }
  // Every record write's row as the statement's snapshot holds it (all its parts read that one snapshot): a refused
  // write reports that revision (postgres-record-writes.ts says why it is read here, not after).
  for (const [part, input] of [
    [Part.Creations, "rc"],
    [Part.Updates, "ru"],
    [Part.Deletes, "rd"],
  ] as const) {
    if ((sizes[part] ?? 0) === 0) continue;
    rows.push(`SELECT ${SEEN} AS part, i.project_id, i.kind AS a, i.id AS b,
      (SELECT r.revision FROM records r WHERE r.project_id = i.project_id COLLATE "C" AND r.kind = i.kind COLLATE "C"
        AND r.id = i.id COLLATE "C") AS revision FROM ${input} i`);
  }
  return `WITH ${withs.join(",\n")}\n${rows.join("\nUNION ALL ")}`;
}

/** A write's parameters in its part's row, in `TYPES` order. */
function paramsOf(w: Write, values: unknown[]): void {
  if (w.append) {
    const a = w.append;
    if (a.expectedSeq === 0) values.push(a.projectId, a.stream, a.lastSeq, a.row[0], a.row[1], a.row[3]);
    else values.push(a.projectId, a.stream, a.lastSeq, a.expectedSeq, a.row[0], a.row[1], a.row[3]);
    return;
  }
  if (w.del) {
    values.push(w.del.projectId, w.del.kind, w.del.id, w.del.expectedRevision ?? null);
    return;
  }
  const r = w.put;
  values.push(r.projectId, r.kind, r.id, r.json, r.updatedAt);
  if (r.expectedRevision !== null) values.push(r.expectedRevision);
}

/** A write's row key in a batch's result: its part, project, stream or kind, and record id. */
const resultKey = (part: number, projectId: string, a: string, b: string | null): string =>
  `${part}\u0000${projectId}\u0000${a}\u0000${b ?? ""}`;

const resultKeyOf = (w: Write): string => {
  if (w.append) return resultKey(partOf(w), w.append.projectId, w.append.stream, null);
  const r = w.put ?? w.del;
  return resultKey(partOf(w), r.projectId, r.kind, r.id);
};

/**
 * Batch statements are named (prepared once per connection) for at most this many distinct mixes of sizes per
 * authority, whose texts are kept; a rarer mix past it is built and sent unnamed (planned on each call), so a server
 * with many products in flight keeps neither thousands of prepared statements in every backend nor their texts.
 */
const NAMED_MIXES = 160;

/**
 * The bytes a write adds to a batch's message: its texts and packed rows (the rest of a row is a few dozen bytes).
 * Binary (`Buffer`) and text lengths are close enough to bound a message (postgres-group-commit.ts `MAX_BATCH_BYTES`).
 */
const bytesOf = (w: Write): number => {
  if (w.append) {
    const [, event, , packed] = w.append.row as [unknown, string | null, unknown, Buffer | null];
    return (event?.length ?? 0) + (packed?.length ?? 0);
  }
  return w.put ? w.put.json.length : 0;
};

/**
 * Statements of the queue in flight at once: while one commits, the next is already sent with what was asked for
 * meanwhile, and what is asked for after that waits for either to end. Measured with the fleet bench (issue 32, 4
 * products of instant tasks in flight per server): with ONE in flight a lone server was latency-bound on commits and
 * ran 22 % slower (1,207 against 1,557 tasks/s), while 8 servers on 2 cores ran the same (1,624 against 1,644).
 */
const IN_FLIGHT = 2;

/** The unannounced writes of one authority, through one group commit queue. */
export class WriteBatcher {
  readonly #group: GroupCommit<Write, Outcome>;
  /** The texts of the named batch statements by mix of sizes (`n-f-c-u-d`), at most `NAMED_MIXES`. */
  readonly #named = new Map<string, string>();

  constructor(private readonly pool: pg.Pool) {
    this.#group = new GroupCommit<Write, Outcome>(
      {
        key: keyOf,
        bytes: bytesOf,
        alone: (w) =>
          w.append ? appendAlone(pool, w.append) : w.put ? putAlone(pool, w.put) : deleteAlone(pool, w.del),
        together: (writes) => this.#sendTogether(writes),
      },
      IN_FLIGHT,
    );
  }

  /**
   * Appends `a` and resolves `true` once committed, `false` when its stream was not at `expectedSeq` (nothing
   * written); rejects with the database's error. What a batch cannot carry goes alone at once, outside the queue: an
   * announced append (its own `pg_notify`) and a row in the plain `batch` form.
   */
  append(a: AppendRequest): Promise<boolean> {
    if (a.notify.name !== "-quiet" || a.row[2] !== null) return appendAlone(this.pool, a);
    return this.#group.submit({ append: a }) as Promise<boolean>;
  }

  /**
   * Writes `r` and resolves once committed with `applied` and the record's new revision (1 on creation), or refused
   * (nothing written) with the revision the statement found; rejects with the database's error. An announced put goes
   * alone at once (its own `pg_notify`).
   */
  put(r: PutRequest): Promise<PutOutcome> {
    if (r.notify.name !== "-quiet") return putAlone(this.pool, r);
    return this.#group.submit({ put: r }) as Promise<PutOutcome>;
  }

  /**
   * Deletes as `d` says and resolves once committed with `applied`, or refused (no row deleted: none, or not at
   * `expectedRevision`) with the revision the statement found; rejects with the database's error. An announced delete
   * goes alone at once.
   */
  delete(d: DeleteRequest): Promise<DeleteOutcome> {
    if (d.notify.name !== "-quiet") return deleteAlone(this.pool, d);
    return this.#group.submit({ del: d }) as Promise<DeleteOutcome>;
  }

  /** Resolves once no write is queued or in flight. */
  drained(): Promise<void> {
    return this.#group.drained();
  }

  /** The statement of 2 … `MAX_BATCH` writes on distinct rows; each one's outcome, in order. */
  async #sendTogether(writes: readonly Write[]): Promise<Outcome[]> {
    const byPart: Write[][] = Array.from({ length: PARTS }, () => []);
    for (const w of writes) (byPart[partOf(w)] as Write[]).push(w);
    const sizes = byPart.map((p) => p.length);
    const mix = sizes.join("-");
    let text = this.#named.get(mix);
    const named = text !== undefined || this.#named.size < NAMED_MIXES;
    if (text === undefined) {
      text = batchText(sizes);
      if (named) this.#named.set(mix, text);
    }
    const values: unknown[] = [];
    for (const part of byPart) for (const w of part) paramsOf(w, values);
    const result = await this.pool.query<{
      part: number;
      project_id: string;
      a: string;
      b: string | null;
      revision: string | null;
    }>({
      ...(named ? { name: `acp-write-${mix}` } : {}),
      text,
      values,
    });
    const done = new Map(result.rows.map((r) => [resultKey(r.part, r.project_id, r.a, r.b), r.revision]));
    return writes.map((w): Outcome => {
      const key = resultKeyOf(w);
      if (w.append) return done.has(key);
      const r = w.put ?? w.del;
      const seen = done.get(resultKey(SEEN, r.projectId, r.kind, r.id));
      if (!done.has(key)) return refused(seen);
      return w.put ? putOutcome(done.get(key), seen) : { applied: true };
    });
  }
}
