/**
 * HostAuthority: the run-state authority owned by the client (the host), reached through `runState/*` requests sent
 * back over the server's own JSON-RPC connection (PROTOCOL.md section 7; DESIGN.md, Persistence backends).
 *
 * Owns: the translation of each `RunStateAuthority` call into one server → client request, the validation of the
 * arguments before sending (protocol/host.ts params schemas) and of every answer (its result schemas plus the
 * invariants the port promises), and the mapping of every way a request can go wrong to the port's two errors:
 * host error `-32012` → `AuthorityConflict`; any other host error, a timeout, a closed connection or a malformed
 * answer → `AuthorityFailure` (DESIGN.md guarantee 2 turns it into a pause). It must never retry (a timed-out write
 * may have been applied: only the owner can decide what that means), never cache, and never close the connection
 * (the server owns it).
 */
import { ResponseError } from "vscode-jsonrpc/node";
import type { z } from "zod";
import { ErrorCodes } from "../../../protocol/errors.js";
import {
  RunStateAppendEventsParams,
  RunStateAppendEventsResult,
  RunStateDeleteParams,
  RunStateDeleteResult,
  RunStateDeleteStreamParams,
  RunStateDeleteStreamResult,
  RunStateGetParams,
  RunStateGetResult,
  RunStateListParams,
  RunStateListResult,
  RunStatePutParams,
  RunStatePutResult,
  RunStateReadEventsParams,
  RunStateReadEventsResult,
} from "../../../protocol/host.js";
import {
  AuthorityConflict,
  AuthorityFailure,
  type Logger,
  type RecordInfo,
  type RunStateAuthority,
  type StoredEvent,
  type StoredRecord,
  storedEvent,
} from "../../core/ports.js";
import { ConnectionClosedError, RequestTimeoutError, type HostRequester } from "./host-requester.js";
import { compareCodePoints } from "./memory-authority.js";

/** Default time the host has to answer one `runState/*` request, in milliseconds. */
export const DEFAULT_HOST_TIMEOUT_MS = 30_000;

/**
 * Most events asked of the host in one `runState/readEvents` (its `limit`), so that one answer stays a bounded
 * message however long the stream; longer reads are paged (PROTOCOL.md section 7).
 */
export const HOST_READ_PAGE_EVENTS = 500;

/**
 * Most JSON text one `runState/readEvents` answer's events may hold together, in UTF-16 code units (8 Mi): a host
 * answers fewer events than asked (with `more: true`) rather than a larger page; one event larger than this may come
 * alone in its page (PROTOCOL.md section 7). A page over it is the host's fault: the read fails. (An answer over
 * 32 MiB on the wire is dropped unread by the server's reader before this is checked: src/server/framing.ts.)
 */
export const HOST_READ_PAGE_CHARS = 8 * 1024 * 1024;

/**
 * Most events one `readEvents` call (one load of a product, say) reads from the host across all its pages. A load
 * reads the events after the product's latest snapshot, which compaction keeps far below this; a host that keeps
 * answering `more: true` with valid events past it fails that read instead of exhausting the server (issue 31).
 */
export const HOST_READ_MAX_EVENTS = 100_000;

/** Most JSON text, in UTF-16 code units, one `readEvents` call reads from the host across all its pages (64 Mi). */
export const HOST_READ_MAX_CHARS = 64 * 1024 * 1024;

/** Longest piece of a host's error message quoted in our own messages, in characters. */
const MAX_QUOTED_MESSAGE = 300;

export interface HostAuthorityOptions {
  connection: HostRequester;
  /** Milliseconds the host has to answer each request before the call fails. Default `DEFAULT_HOST_TIMEOUT_MS`. */
  timeoutMs?: number;
  /** Where failures are logged (debug: the caller logs and acts on them). Optional. */
  logger?: Logger;
  /** Bounds of one `readEvents` call; defaults `HOST_READ_PAGE_CHARS`, `HOST_READ_MAX_EVENTS`, `HOST_READ_MAX_CHARS`. */
  readBounds?: Partial<HostReadBounds>;
}

/** What one `readEvents` call accepts from the host (see the constants of the same names). */
export interface HostReadBounds {
  pageChars: number;
  maxEvents: number;
  maxChars: number;
}

/** The seven requests of PROTOCOL.md section 7, by bare name. */
type HostMethod =
  | "runState/get"
  | "runState/put"
  | "runState/delete"
  | "runState/list"
  | "runState/appendEvents"
  | "runState/readEvents"
  | "runState/deleteStream";

/**
 * A `RunStateAuthority` whose store is the client (PROTOCOL.md section 7). Used when the client declares
 * `runStateAuthority: true` in `initialize` (see `DelegatingAuthority`).
 *
 * Every call is exactly one `runState/*` request with a timeout; a write resolves only once the host acknowledged
 * it. Arguments are checked against the wire schemas before anything is sent (an invalid one — empty id, revision
 * 0, a value that is not a JSON object, a lone surrogate in an address — is an `AuthorityFailure`, and nothing is
 * sent). Answers are untrusted: a result that fails its schema, or breaks the port's invariants (a `put` revision not
 * above the expected one, an `appendEvents` `lastSeq` other than `expectedSeq + events.length`, events out of
 * sequence), is an `AuthorityFailure`. `list` results are re-sorted by id in code-point order, so the port's ordering
 * holds whatever the host's collation.
 *
 * Does NOT implement `listProjects` (section 7 has no such request: the product store lists products through its
 * index records) nor `pruneEvents` (no such request either: a host's streams are never compacted), does NOT retry,
 * and `close` does NOT close the connection.
 */
export class HostAuthority implements RunStateAuthority {
  readonly name = "host";
  readonly timeoutMs: number;
  readonly #connection: HostRequester;
  readonly #logger: Logger | undefined;
  readonly #bounds: HostReadBounds;
  #closed = false;

  /** Throws `RangeError` when `timeoutMs` is not a positive integer. Sends nothing. */
  constructor(options: HostAuthorityOptions) {
    const timeoutMs = options.timeoutMs ?? DEFAULT_HOST_TIMEOUT_MS;
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) {
      throw new RangeError(`timeoutMs must be a positive integer of milliseconds, got ${String(timeoutMs)}.`);
    }
    this.timeoutMs = timeoutMs;
    this.#connection = options.connection;
    this.#logger = options.logger;
    this.#bounds = {
      pageChars: options.readBounds?.pageChars ?? HOST_READ_PAGE_CHARS,
      maxEvents: options.readBounds?.maxEvents ?? HOST_READ_MAX_EVENTS,
      maxChars: options.readBounds?.maxChars ?? HOST_READ_MAX_CHARS,
    };
  }

  /** `runState/get`: one record, or `null` when the host has none. Never writes. */
  async get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    checkAddress({ projectId, kind, id });
    const result = await this.#call("runState/get", RunStateGetParams, { projectId, kind, id }, RunStateGetResult);
    const record = result.record;
    return record === null ? null : { value: record.value, revision: record.revision, updatedAt: record.updatedAt };
  }

  /**
   * `runState/put`: compare-and-swap write (`expectedRevision: null` = must not exist). Resolves with the new
   * revision once the host acknowledged it; `AuthorityConflict` when the host answered `-32012`.
   */
  async put(
    projectId: string,
    kind: string,
    id: string,
    value: object,
    expectedRevision: number | null,
  ): Promise<{ revision: number }> {
    checkAddress({ projectId, kind, id });
    const params = { projectId, kind, id, value, expectedRevision };
    const { revision } = await this.#call("runState/put", RunStatePutParams, params, RunStatePutResult);
    if (revision <= (expectedRevision ?? 0)) {
      throw malformed("runState/put", `revision ${revision} is not above the expected ${String(expectedRevision)}`);
    }
    return { revision };
  }

  /** `runState/delete`: `true` when the host removed the record, `false` when it had none. */
  async delete(projectId: string, kind: string, id: string, expectedRevision?: number): Promise<boolean> {
    checkAddress({ projectId, kind, id });
    const params = { projectId, kind, id, ...(expectedRevision !== undefined ? { expectedRevision } : {}) };
    const result = await this.#call("runState/delete", RunStateDeleteParams, params, RunStateDeleteResult);
    return result.deleted;
  }

  /** `runState/list`: the records of one kind, ordered by id (code-point order), `prefix` literal. Never writes. */
  async list(projectId: string, kind: string, prefix?: string): Promise<RecordInfo[]> {
    checkAddress({ projectId, kind, ...(prefix !== undefined ? { prefix } : {}) });
    const params = { projectId, kind, ...(prefix !== undefined && prefix !== "" ? { prefix } : {}) };
    const result = await this.#call("runState/list", RunStateListParams, params, RunStateListResult);
    return result.records
      .map((r) => ({ id: r.id, revision: r.revision, updatedAt: r.updatedAt }))
      .sort((a, b) => compareCodePoints(a.id, b.id));
  }

  /**
   * `runState/appendEvents`: appends when the stream's last sequence number is `expectedSeq`; resolves with the new
   * last one once acknowledged, `AuthorityConflict` when the host answered `-32012`.
   */
  async appendEvents(
    projectId: string,
    stream: string,
    events: object[],
    expectedSeq: number,
  ): Promise<{ lastSeq: number }> {
    checkAddress({ projectId, stream });
    const params = { projectId, stream, events, expectedSeq };
    const { lastSeq } = await this.#call(
      "runState/appendEvents",
      RunStateAppendEventsParams,
      params,
      RunStateAppendEventsResult,
    );
    const expected = expectedSeq + (Array.isArray(events) ? events.length : 0);
    if (lastSeq !== expected) {
      throw malformed("runState/appendEvents", `lastSeq ${lastSeq} is not the expected ${expected}`);
    }
    return { lastSeq };
  }

  /**
   * `runState/readEvents`: events with `seq > afterSeq`, oldest first, at most `limit` of them when given. Pages:
   * each request asks for at most `HOST_READ_PAGE_EVENTS` events, and the next one starts after the last event
   * received, until the host answers `more: false` or `limit` events were read. Each answer must hold at most the
   * events asked for, numbered `afterSeq + 1`, `afterSeq + 2`, … without gaps (section 7 can only delete a whole
   * stream, so a gap means the host lost some), and `more: true` must come with at least one event.
   *
   * Bounded whatever the host answers (issue 31): a page whose events' JSON exceeds `pageChars` (unless it is one
   * event), or a read that would pass `maxEvents` events or `maxChars` of JSON in all, fails with an
   * `AuthorityFailure` that names the host's fault; nothing read so far is returned, so memory stays within the bounds.
   */
  async readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    checkAddress({ projectId, stream });
    if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) {
      throw new AuthorityFailure(`limit must be a positive integer, got ${String(limit)}.`);
    }
    const events: StoredEvent[] = [];
    let after = afterSeq;
    let chars = 0;
    for (;;) {
      const want = Math.min(HOST_READ_PAGE_EVENTS, limit === undefined ? HOST_READ_PAGE_EVENTS : limit - events.length);
      const params = { projectId, stream, afterSeq: after, limit: want };
      const page = await this.#call("runState/readEvents", RunStateReadEventsParams, params, RunStateReadEventsResult);
      if (page.events.length > want) {
        throw malformed("runState/readEvents", `${page.events.length} events answered for a limit of ${want}`);
      }
      page.events.forEach((e, index) => {
        if (e.seq !== after + index + 1) {
          throw malformed("runState/readEvents", `event ${index} has seq ${e.seq}, expected ${after + index + 1}`);
        }
      });
      chars += this.#measured(page.events, events, stream, chars);
      if (!page.more || (limit !== undefined && events.length >= limit)) return events;
      if (page.events.length === 0) throw malformed("runState/readEvents", "more is true but no event was answered");
      after += page.events.length;
    }
  }

  /**
   * Appends one checked page to `into` (each event with its JSON length) and returns the page's JSON length; throws
   * when the page or the whole read (`before` chars so far) passes a bound.
   */
  #measured(page: { seq: number; event: unknown }[], into: StoredEvent[], stream: string, before: number): number {
    const { pageChars, maxEvents, maxChars } = this.#bounds;
    if (into.length + page.length > maxEvents) {
      throw bounded(stream, `more than ${maxEvents} events for one read (it keeps answering more: true)`);
    }
    let pageTotal = 0;
    const measured: StoredEvent[] = [];
    for (const e of page) {
      const length = jsonTextLength(e.event);
      pageTotal += length;
      if (page.length > 1 && pageTotal > pageChars) {
        throw bounded(stream, `a page of ${page.length} events over ${mebi(pageChars)} of JSON`);
      }
      if (before + pageTotal > maxChars) {
        throw bounded(stream, `more than ${mebi(maxChars)} of JSON for one read`);
      }
      measured.push(storedEvent(e.seq, e.event, length));
    }
    for (const e of measured) into.push(e);
    return pageTotal;
  }
  /** `runState/deleteStream`: deletes a whole event stream; `true` when it held at least one event. */
  async deleteStream(projectId: string, stream: string): Promise<boolean> {
    checkAddress({ projectId, stream });
    const params = { projectId, stream };
    const result = await this.#call(
      "runState/deleteStream",
      RunStateDeleteStreamParams,
      params,
      RunStateDeleteStreamResult,
    );
    return result.deleted;
  }

  /** Makes every later call fail with `AuthorityFailure`. Idempotent. Does NOT close the connection or touch data. */
  async close(): Promise<void> {
    this.#closed = true;
  }

  /** Validates the params, sends one request with the timeout, validates the result, maps every error. */
  async #call<P extends z.ZodType, R extends z.ZodType>(
    method: HostMethod,
    paramsSchema: P,
    params: object,
    resultSchema: R,
  ): Promise<z.infer<R>> {
    if (this.#closed) throw new AuthorityFailure(`The host run-state authority is closed (${method}).`);
    const checked = paramsSchema.safeParse(params);
    if (!checked.success) {
      throw new AuthorityFailure(`Invalid arguments for ${method}: ${summarizeIssues(checked.error)}.`);
    }
    let answer: unknown;
    try {
      answer = await this.#connection.request(method, checked.data as object, { timeoutMs: this.timeoutMs });
    } catch (error) {
      const mapped = toAuthorityError(method, error);
      this.#logger?.debug({ method, err: mapped.message }, "host run-state request failed");
      throw mapped;
    }
    const parsed = resultSchema.safeParse(answer);
    if (!parsed.success) throw malformed(method, summarizeIssues(parsed.error));
    return parsed.data;
  }
}

/**
 * Maps a rejection of `RpcConnection.request` to the port's errors: `-32012` → `AuthorityConflict` with
 * `{owner?, revision?}` taken from `data` when well-formed; anything else → `AuthorityFailure` with it as `cause`.
 */
function toAuthorityError(method: HostMethod, error: unknown): AuthorityConflict | AuthorityFailure {
  if (error instanceof RequestTimeoutError) {
    return new AuthorityFailure(`The host did not answer ${method} within ${error.timeoutMs} ms.`, { cause: error });
  }
  if (error instanceof ConnectionClosedError) {
    return new AuthorityFailure(`The connection to the host closed before it answered ${method}.`, { cause: error });
  }
  if (error instanceof ResponseError && isOversizeAnswer(error.data)) {
    return new AuthorityFailure(
      `The host's answer to ${method} was larger than the ${mebibytes(error.data.maxResponseBytes)} the server ` +
        "accepts and was dropped unread. The host is at fault (PROTOCOL.md section 7): it must page its answers.",
      { cause: error, operation: "read" },
    );
  }
  if (error instanceof ResponseError) {
    const text = quote(error.message);
    if (error.code === ErrorCodes.Conflict) {
      return new AuthorityConflict(`The host refused ${method} as a conflict: ${text}`, conflictDetails(error.data));
    }
    return new AuthorityFailure(`The host failed ${method} (error ${error.code}): ${text}`, { cause: error });
  }
  const reason = error instanceof Error ? error.message : String(error);
  return new AuthorityFailure(`${method} could not be sent to the host: ${quote(reason)}`, { cause: error });
}

/** The local error the server's reader puts in place of an oversize answer (src/server/framed-reader.ts). */
function isOversizeAnswer(data: unknown): data is { maxResponseBytes: number } {
  return (
    typeof data === "object" &&
    data !== null &&
    typeof (data as { maxResponseBytes?: unknown }).maxResponseBytes === "number"
  );
}

function mebibytes(bytes: number): string {
  return `${Math.round(bytes / (1024 * 1024))} MiB`;
}

/** `{owner?, revision?}` of a `-32012` answer; fields that are absent or malformed are left out. */
function conflictDetails(data: unknown): { owner?: string; revision?: number } {
  if (typeof data !== "object" || data === null) return {};
  const { owner, revision } = data as { owner?: unknown; revision?: unknown };
  const details: { owner?: string; revision?: number } = {};
  if (typeof owner === "string" && owner.length > 0) details.owner = owner;
  if (typeof revision === "number" && Number.isSafeInteger(revision) && revision >= 1) details.revision = revision;
  return details;
}

/** The host broke a read bound: the read fails, naming the host's fault and what to do. */
function bounded(stream: string, what: string): AuthorityFailure {
  return new AuthorityFailure(
    `The host's answers to runState/readEvents for ${stream} exceed the server's bounds: ${what}. ` +
      "The host is at fault (PROTOCOL.md section 7): fix its readEvents paging; nothing of this read was used.",
    { operation: "read" },
  );
}

/** Length of `value`'s JSON text in UTF-16 code units (0 when it has none, e.g. `undefined`). */
function jsonTextLength(value: unknown): number {
  return JSON.stringify(value)?.length ?? 0;
}

function mebi(chars: number): string {
  return `${Math.round((chars / (1024 * 1024)) * 10) / 10} Mi characters`;
}

function malformed(method: HostMethod, what: string): AuthorityFailure {
  return new AuthorityFailure(`The host answered ${method} with a malformed result: ${what}.`);
}

/** Rejects addresses the wire schemas allow but JSON text cannot carry as valid Unicode (lone surrogates). */
function checkAddress(fields: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === "string" && /\p{Cs}/u.test(value)) {
      throw new AuthorityFailure(`${name} must be well-formed Unicode (no lone surrogates).`);
    }
  }
}

function summarizeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(root)"}: ${issue.message}`)
    .join("; ");
}

function quote(text: string): string {
  const trimmed = text.length > MAX_QUOTED_MESSAGE ? `${text.slice(0, MAX_QUOTED_MESSAGE)}…` : text;
  return trimmed.endsWith(".") || trimmed.endsWith("…") ? trimmed : `${trimmed}.`;
}
