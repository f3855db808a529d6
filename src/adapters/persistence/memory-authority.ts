/**
 * MemoryAuthority: the in-memory `RunStateAuthority` (DESIGN.md, Persistence backends: `memory` — tests).
 *
 * Owns a process-local store of records and event streams with the same contract as every other backend
 * (compare-and-swap on revisions and sequence numbers, code-point id order, reads that never write), plus fault
 * injection so tests can make a write fail on purpose (DESIGN.md guarantee 2).
 * It must never share object references with its callers: values are deep-copied on the way in and on the way out,
 * so mutating an object after `put` or after `get` cannot change what is stored. It never touches the filesystem.
 */
import {
  AuthorityConflict,
  AuthorityFailure,
  type AppendedEvents,
  type Clock,
  type RecordInfo,
  type RunStateAuthority,
  type StoredEvent,
  type StoredRecord,
  storedEvent,
} from "../../core/ports.js";
import {
  appendedEvents,
  checkKey,
  checkLimit,
  checkName,
  checkPrefix,
  checkPruneBound,
  checkRevision,
  checkRevisionMatches,
  checkSeq,
  checkStream,
  checkValue,
} from "./authority-checks.js";

/** The operations of `RunStateAuthority` that fault injection can target. */
export type AuthorityOperation =
  | "get"
  | "put"
  | "delete"
  | "list"
  | "appendEvents"
  | "readEvents"
  | "deleteStream"
  | "pruneEvents"
  | "listProjects";

/** Operations that change stored data. */
const WRITE_OPERATIONS: ReadonlySet<AuthorityOperation> = new Set([
  "put",
  "delete",
  "appendEvents",
  "deleteStream",
  "pruneEvents",
]);

/** One call as fault-injection predicates see it. Fields that do not apply to the operation are absent. */
export interface AuthorityCall {
  op: AuthorityOperation;
  projectId?: string;
  kind?: string;
  id?: string;
  stream?: string;
}

/**
 * Decides whether a call fails. Return `true` to fail with a generic `AuthorityFailure`, an `Error` to fail with
 * that error (see `MemoryAuthority.failNext` for how it is thrown), anything falsy to let the call through.
 */
export type FailurePredicate = (call: AuthorityCall) => boolean | Error | undefined | null;

export interface MemoryAuthorityOptions {
  /** Source of `updatedAt` timestamps (milliseconds since the epoch). Default: `Date.now`. */
  clock?: Pick<Clock, "now">;
}

interface StoredEntry {
  /** The value's JSON text. */
  value: string;
  revision: number;
  updatedAt: string;
}

/**
 * One event stream: `events[i]` has sequence number `pruned + i + 1` (the first `pruned` were compacted away);
 * `undefined` marks an event pruned from the middle. The first and the last entries are never `undefined`. Each event
 * is kept as its JSON text.
 */
interface StoredStream {
  pruned: number;
  events: (string | undefined)[];
}

interface PendingFailure {
  op: AuthorityOperation | "write" | "any";
  error: Error | undefined;
}

/**
 * An in-memory run-state authority for tests and for the `memory` backend.
 *
 * Implements the full `RunStateAuthority` contract of `src/core/ports.ts` (PROTOCOL.md section 7): `put`, `delete`
 * and `appendEvents` are compare-and-swap and atomic (each call completes synchronously before its promise settles,
 * so calls raced with `Promise.all` are serialised and exactly one CAS wins). Values and events are kept as their JSON
 * text, like the SQLite, host and PostgreSQL backends keep them: what is read back is a fresh parse, with JSON's
 * semantics (`undefined` fields are dropped, `NaN` reads as `null`, a `Date` as its ISO string), and a value JSON
 * cannot hold (a `BigInt`, a cycle) is refused. Text is also several times smaller than the objects it describes
 * (issue 16: a 50,000-task run appends about 200,000 events). Does NOT persist anything beyond the life of the object.
 */
export class MemoryAuthority implements RunStateAuthority {
  readonly name = "memory";

  /** projectId → kind → id → entry. */
  readonly #records = new Map<string, Map<string, Map<string, StoredEntry>>>();
  /** projectId → stream → its events. */
  readonly #streams = new Map<string, Map<string, StoredStream>>();
  readonly #now: () => number;
  readonly #pending: PendingFailure[] = [];
  #predicate: FailurePredicate | null = null;
  #writeCount = 0;
  #closed = false;

  constructor(options: MemoryAuthorityOptions = {}) {
    const clock = options.clock;
    this.#now = clock ? () => clock.now() : Date.now;
  }

  /**
   * Makes the next call matching `op` throw. `op` is an operation name, `"write"` (the next `put`, `delete` or
   * `appendEvents`) or `"any"`. Each call to `failNext` queues one failure, consumed by exactly one matching call;
   * the failed call changes nothing. `error` defaults to an `AuthorityFailure`; an `AuthorityFailure` or
   * `AuthorityConflict` is thrown as given, any other error is wrapped in an `AuthorityFailure` with it as `cause`.
   */
  failNext(op: AuthorityOperation | "write" | "any", error?: Error): void {
    this.#pending.push({ op, error });
  }

  /**
   * Installs a predicate consulted on every call (after the `failNext` queue) until replaced; `null` removes it.
   * A call for which it returns `true` or an `Error` throws as described in `failNext` and changes nothing.
   */
  setFailure(predicate: FailurePredicate | null): void {
    this.#predicate = predicate;
  }

  /**
   * Number of writes that changed the store: `put`, `delete` that removed a record, non-empty `appendEvents`,
   * `deleteStream` of a non-empty stream, `pruneEvents` that deleted something.
   */
  get writeCount(): number {
    return this.#writeCount;
  }

  /** Reads one record; `null` when it does not exist. The returned value is a fresh copy. Never writes. */
  async get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    this.#enter({ op: "get", projectId, kind, id });
    checkKey(projectId, kind, id);
    const entry = this.#records.get(projectId)?.get(kind)?.get(id);
    if (!entry) return null;
    return { value: fromText(entry.value), revision: entry.revision, updatedAt: entry.updatedAt };
  }

  /**
   * Creates or replaces one record by compare-and-swap. `expectedRevision: null` requires that the record does not
   * exist; a number requires it to be the current revision. Returns the new revision (1 on creation).
   * Throws `AuthorityConflict` (with `details.revision` = the current revision, absent when the record does not
   * exist) on a mismatch, `AuthorityFailure` on an invalid argument, a value that cannot be copied, or an injected
   * failure. A failed call changes nothing.
   */
  async put(
    projectId: string,
    kind: string,
    id: string,
    value: object,
    expectedRevision: number | null,
  ): Promise<{ revision: number }> {
    this.#enter({ op: "put", projectId, kind, id });
    checkKey(projectId, kind, id);
    checkValue(value, "value");
    if (expectedRevision !== null) checkRevision(expectedRevision);
    const copy = toText(value);
    const byKind = this.#records.get(projectId)?.get(kind);
    const current = byKind?.get(id);
    checkRevisionMatches(projectId, kind, id, current?.revision, expectedRevision);
    const revision = current ? current.revision + 1 : 1;
    const entry: StoredEntry = { value: copy, revision, updatedAt: new Date(this.#now()).toISOString() };
    getOrCreate(
      getOrCreate(this.#records, projectId, () => new Map()),
      kind,
      () => new Map(),
    ).set(id, entry);
    this.#writeCount += 1;
    return { revision };
  }

  /**
   * Deletes one record. Returns `false` when it does not exist (whatever `expectedRevision` says), `true` when it
   * was removed. With `expectedRevision`, throws `AuthorityConflict` (with the current revision) when the record
   * exists at another revision, and removes nothing. Event streams are never touched.
   */
  async delete(projectId: string, kind: string, id: string, expectedRevision?: number): Promise<boolean> {
    this.#enter({ op: "delete", projectId, kind, id });
    checkKey(projectId, kind, id);
    if (expectedRevision !== undefined) checkRevision(expectedRevision);
    const byProject = this.#records.get(projectId);
    const byKind = byProject?.get(kind);
    const current = byKind?.get(id);
    if (!byProject || !byKind || !current) return false;
    if (expectedRevision !== undefined) checkRevisionMatches(projectId, kind, id, current.revision, expectedRevision);
    byKind.delete(id);
    if (byKind.size === 0) byProject.delete(kind);
    if (byProject.size === 0) this.#records.delete(projectId);
    this.#writeCount += 1;
    return true;
  }

  /**
   * Lists the records of one kind in one project whose id starts with `prefix` (literally: no wildcard characters),
   * ordered by id in Unicode code-point order (the byte order of UTF-8, the order SQLite and PostgreSQL `COLLATE "C"`
   * use). Never writes.
   */
  async list(projectId: string, kind: string, prefix = ""): Promise<RecordInfo[]> {
    this.#enter({ op: "list", projectId, kind });
    checkName(projectId, "projectId");
    checkName(kind, "kind");
    checkPrefix(prefix);
    const byKind = this.#records.get(projectId)?.get(kind);
    if (!byKind) return [];
    const result: RecordInfo[] = [];
    for (const [id, entry] of byKind) {
      if (id.startsWith(prefix)) result.push({ id, revision: entry.revision, updatedAt: entry.updatedAt });
    }
    return result.sort((a, b) => compareCodePoints(a.id, b.id));
  }

  /**
   * Appends events to a stream when its last sequence number equals `expectedSeq` (0 for a new stream); the events
   * get `expectedSeq + 1 …` and the new last sequence number is returned. An empty `events` array appends nothing
   * and returns `expectedSeq` once the check passes. Throws `AuthorityConflict` on a mismatch (nothing appended),
   * `AuthorityFailure` on an invalid argument or an injected failure. Events are deep-copied.
   */
  async appendEvents(
    projectId: string,
    stream: string,
    events: object[],
    expectedSeq: number,
  ): Promise<AppendedEvents> {
    this.#enter({ op: "appendEvents", projectId, stream });
    checkStream(projectId, stream);
    checkSeq(expectedSeq, "expectedSeq");
    if (!Array.isArray(events)) throw new AuthorityFailure("events must be an array");
    events.forEach((event, index) => checkValue(event, `events[${index}]`));
    const copies = events.map((event) => toText(event));
    const existing = this.#streams.get(projectId)?.get(stream);
    const lastSeq = existing ? existing.pruned + existing.events.length : 0;
    if (lastSeq !== expectedSeq) {
      throw new AuthorityConflict(
        `Event stream "${stream}" of project "${projectId}" is at sequence ${lastSeq}, not the expected ${expectedSeq}.`,
      );
    }
    if (copies.length === 0) return { lastSeq };
    const target =
      existing ??
      getOrCreate(
        getOrCreate(this.#streams, projectId, () => new Map()),
        stream,
        () => ({ pruned: 0, events: [] }),
      );
    target.events.push(...copies);
    this.#writeCount += 1;
    return appendedEvents(target.pruned + target.events.length, copies);
  }

  /**
   * Events of one stream with `seq > afterSeq`, oldest first, as fresh copies; at most `limit` of them when given;
   * `[]` for an unknown stream. Pruned events are skipped. Never writes.
   */
  async readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    this.#enter({ op: "readEvents", projectId, stream });
    checkStream(projectId, stream);
    checkSeq(afterSeq, "afterSeq");
    checkLimit(limit);
    const stored = this.#streams.get(projectId)?.get(stream);
    if (!stored) return [];
    const result: StoredEvent[] = [];
    for (let index = Math.max(afterSeq - stored.pruned, 0); index < stored.events.length; index += 1) {
      if (limit !== undefined && result.length >= limit) break;
      const event = stored.events[index];
      if (event !== undefined) result.push(storedEvent(stored.pruned + index + 1, fromText(event), event.length));
    }
    return result;
  }

  /** Deletes a whole stream; `true` when it held events. Its numbering starts again at 1. Records are not touched. */
  async deleteStream(projectId: string, stream: string): Promise<boolean> {
    this.#enter({ op: "deleteStream", projectId, stream });
    checkStream(projectId, stream);
    const byProject = this.#streams.get(projectId);
    const stored = byProject?.get(stream);
    if (!byProject || !stored) return false;
    byProject.delete(stream);
    if (byProject.size === 0) this.#streams.delete(projectId);
    this.#writeCount += 1;
    return stored.events.some((event) => event !== undefined);
  }

  /**
   * Deletes the events with `afterSeq < seq < beforeSeq` (compaction; `afterSeq` default 0) and returns how many were
   * deleted; the numbering goes on. Refuses (`AuthorityFailure`, nothing deleted) a `beforeSeq` above the last
   * sequence number (0 and 1 always pass).
   */
  async pruneEvents(projectId: string, stream: string, beforeSeq: number, afterSeq = 0): Promise<number> {
    this.#enter({ op: "pruneEvents", projectId, stream });
    checkStream(projectId, stream);
    checkSeq(beforeSeq, "beforeSeq");
    checkSeq(afterSeq, "afterSeq");
    const stored = this.#streams.get(projectId)?.get(stream);
    checkPruneBound(stream, beforeSeq, stored ? stored.pruned + stored.events.length : 0);
    if (!stored) return 0;
    let count = 0;
    const from = Math.max(afterSeq - stored.pruned, 0);
    const to = Math.min(beforeSeq - 1 - stored.pruned, stored.events.length);
    for (let index = from; index < to; index += 1) {
      if (stored.events[index] === undefined) continue;
      stored.events[index] = undefined;
      count += 1;
    }
    let lead = 0;
    while (lead < stored.events.length - 1 && stored.events[lead] === undefined) lead += 1;
    if (lead > 0) {
      stored.events.splice(0, lead);
      stored.pruned += lead;
    }
    if (count > 0) this.#writeCount += 1;
    return count;
  }

  /** Project ids that hold at least one record (event streams alone do not count), in code-point order. Never writes. */
  async listProjects(): Promise<string[]> {
    this.#enter({ op: "listProjects" });
    return [...this.#records.keys()].sort(compareCodePoints);
  }

  /** Marks the authority closed: every later call throws `AuthorityFailure`. Idempotent. Does NOT clear the data. */
  async close(): Promise<void> {
    this.#closed = true;
  }

  /** Common entry of every operation: refuses calls after `close`, then applies injected failures. */
  #enter(call: AuthorityCall): void {
    if (this.#closed) throw new AuthorityFailure(`The memory authority is closed (${call.op}).`);
    const index = this.#pending.findIndex(
      (p) => p.op === call.op || p.op === "any" || (p.op === "write" && WRITE_OPERATIONS.has(call.op)),
    );
    if (index >= 0) {
      const [pending] = this.#pending.splice(index, 1);
      throw toInjectedError(call, pending?.error);
    }
    const verdict = this.#predicate?.(call);
    if (verdict) throw toInjectedError(call, verdict instanceof Error ? verdict : undefined);
  }
}

/**
 * Compares two strings by Unicode code point (equivalently, by their UTF-8 bytes), unlike `<` on JS strings, which
 * compares UTF-16 code units and puts U+10000… before U+E000…U+FFFF. Returns a negative number, 0 or a positive one.
 */
export function compareCodePoints(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i += 1) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return fixUp(x) - fixUp(y);
  }
  return a.length - b.length;
}

/** Maps a UTF-16 code unit so that surrogates sort above U+E000…U+FFFF (code-point order). */
function fixUp(unit: number): number {
  if (unit >= 0xe000) return unit - 0x800;
  if (unit >= 0xd800) return unit + 0x2000;
  return unit;
}

function toInjectedError(call: AuthorityCall, error: Error | undefined): Error {
  if (error instanceof AuthorityFailure || error instanceof AuthorityConflict) return error;
  const message = `Injected failure on ${call.op}${error ? `: ${error.message}` : ""}.`;
  return new AuthorityFailure(message, error ? { cause: error } : undefined);
}

/**
 * The JSON text kept for `value`, as one flat string. Throws `AuthorityFailure` when JSON cannot hold it (a `BigInt`,
 * a cycle).
 *
 * V8's `JSON.stringify` returns a longer text as a tree of concatenated parts, kept as such until something reads its
 * characters; a store that keeps every event's text for the life of the process kept every tree (issue 16: at 50,000
 * tasks, 200,000 event texts were 554,000 concatenation nodes and their parts, 30 % more heap than the flat texts, and
 * the heap's growth before each full collection scales with what is live). Converting the text to a number (a
 * `NaN` here, discarded) makes V8 flatten it in place.
 */
function toText(value: object): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new AuthorityFailure("The value cannot be stored: it cannot be serialised to JSON.", { cause: error });
  }
  if (typeof text !== "string") throw new AuthorityFailure("The value cannot be stored: it is not JSON data.");
  flatten(text);
  return text;
}

/** Makes V8 flatten a concatenated string in place (its `ToNumber` does); the number itself is not used. */
function flatten(text: string): void {
  void Number(text);
}

/** A fresh copy of a stored value. */
function fromText(text: string): object {
  return JSON.parse(text) as object;
}

function getOrCreate<K, V>(map: Map<K, V>, key: K, create: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = create();
    map.set(key, value);
  }
  return value;
}
