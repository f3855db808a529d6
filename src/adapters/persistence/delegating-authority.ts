/**
 * DelegatingAuthority: one `RunStateAuthority` object whose backend can be switched once the server knows where state
 * lives — the embedded store by default, the host's (`HostAuthority`) when the client declares `runStateAuthority` in
 * `initialize` (PROTOCOL.md section 7).
 *
 * Owns: which backend is current, and closing every backend it was ever given. It must never copy, merge or migrate
 * data between backends, and never decide when to switch (the server's `initialize` handler does).
 */
import {
  type DeleteOptions,
  AuthorityFailure,
  type AuthorityChange,
  type ListedRecord,
  type RecordInfo,
  type RunStateAuthority,
  type StoredEvent,
  type StoredRecord,
} from "../../core/ports.js";
import { listRecordValues } from "../../core/indexed-records.js";

/**
 * Forwards every call to the current backend, chosen at call time: a call already running when `use` switches
 * finishes on the backend it started on. `name`, `listProjects`, `listAcrossProjects`, `listByCreation`, `listTexts`, `listTextsByCreation`
 * and `pruneEvents` follow the current backend (each is `undefined` while the current backend has none, e.g. the host).
 *
 * Meant to be switched before anything is persisted (the server refuses every request before `initialize`); it
 * does NOT move records from one backend to another. `close` closes every backend it was given.
 *
 * It may start with no backend while the embedded store is still being opened (`serve` opens its SQLite file after
 * answering `initialize`, issue 34: cold start): until `attach` or `use` gives it one, every call fails with
 * `AuthorityFailure` and the optional methods are `undefined` (the server holds every request but `initialize` until
 * the store is open, so nothing calls it meanwhile).
 */
export class DelegatingAuthority implements RunStateAuthority {
  #current: RunStateAuthority | undefined;
  /** The function `changeMark` last returned, for the backend and method it reads (see `changeMark`). */
  #markReader: { backend: RunStateAuthority; changeMark: () => string; read: () => string } | undefined;
  /** Every backend ever current, in order, so `close` releases them all. */
  readonly #backends: RunStateAuthority[] = [];
  #closed = false;
  /** Why the store could not be opened (`openFailed`); every call fails with it while there is no backend. */
  #openFailure: unknown;
  #markEpoch: (() => number) | undefined;

  /** Starts with `initial` as the current backend, or with none until `attach` or `use` gives it one. */
  constructor(initial?: RunStateAuthority) {
    if (initial !== undefined) {
      this.#current = initial;
      this.#backends.push(initial);
    }
  }

  /** The current backend's name (`sqlite`, then `host` after a switch; `none` before it has a backend). */
  get name(): string {
    return this.#current?.name ?? "none";
  }

  /** The backend calls go to now; `undefined` before it has one. */
  get current(): RunStateAuthority | undefined {
    return this.#current;
  }

  /**
   * Adds the embedded store once it is open: it becomes current unless a backend was switched in meanwhile (the
   * host's, at `initialize`), and is closed by `close` either way. Throws `AuthorityFailure` after `close` (the store
   * would never be closed: the caller closes it).
   */
  attach(store: RunStateAuthority): void {
    if (this.#closed) throw new AuthorityFailure("The run-state authority is closed; the store cannot be attached.");
    if (this.#current === undefined) this.use(store);
    else if (!this.#backends.includes(store)) {
      this.#backends.push(store);
      if (this.#markEpoch !== undefined) store.shareChangeMarks?.(this.#markEpoch);
    }
  }

  /**
   * Makes `backend` current for every later call. The previous backend stays open until `close`.
   * Throws `AuthorityFailure` after `close` (the new backend would never be closed).
   */
  use(backend: RunStateAuthority): void {
    if (this.#closed) throw new AuthorityFailure("The run-state authority is closed; no backend can be switched in.");
    this.#current = backend;
    if (!this.#backends.includes(backend)) {
      this.#backends.push(backend);
      if (this.#markEpoch !== undefined) backend.shareChangeMarks?.(this.#markEpoch);
    }
  }

  /** Forwards to the current backend's `get`. */
  async get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    return this.#target("get").get(projectId, kind, id);
  }

  /** Forwards to the current backend's `put` (compare-and-swap). */
  async put(
    projectId: string,
    kind: string,
    id: string,
    value: object,
    expectedRevision: number | null,
  ): Promise<{ revision: number }> {
    return this.#target("put").put(projectId, kind, id, value, expectedRevision);
  }

  /** Forwards to the current backend's `delete`. */
  async delete(
    projectId: string,
    kind: string,
    id: string,
    expectedRevision?: number,
    options?: DeleteOptions,
  ): Promise<boolean> {
    return this.#target("delete").delete(projectId, kind, id, expectedRevision, options);
  }

  /** Forwards to the current backend's `list`. */
  async list(projectId: string, kind: string, prefix?: string): Promise<RecordInfo[]> {
    return this.#target("list").list(projectId, kind, prefix);
  }

  /** The current backend's `listValues`, or its `list` then a `get` of each id when it has none. */
  async listValues(projectId: string, kind: string, prefix?: string): Promise<ListedRecord[]> {
    return listRecordValues(this.#target("list"), projectId, kind, prefix);
  }

  /** Forwards to the current backend's `appendEvents` (compare-and-swap on the sequence number). */
  async appendEvents(
    projectId: string,
    stream: string,
    events: object[],
    expectedSeq: number,
  ): Promise<{ lastSeq: number }> {
    return this.#target("appendEvents").appendEvents(projectId, stream, events, expectedSeq);
  }

  /** Forwards to the current backend's `readEvents` (with `limit` only when given). */
  async readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    const target = this.#target("readEvents");
    return limit === undefined
      ? target.readEvents(projectId, stream, afterSeq)
      : target.readEvents(projectId, stream, afterSeq, limit);
  }

  /** Forwards to the current backend's `deleteStream`. */
  async deleteStream(projectId: string, stream: string): Promise<boolean> {
    return this.#target("deleteStream").deleteStream(projectId, stream);
  }

  /** The current backend's `pruneEvents`, bound to it; `undefined` when that backend has none (the host). */
  get pruneEvents():
    | ((projectId: string, stream: string, beforeSeq: number, afterSeq?: number) => Promise<number>)
    | undefined {
    const backend = this.#current;
    const pruneEvents = backend?.pruneEvents;
    if (pruneEvents === undefined) return undefined;
    return (projectId, stream, beforeSeq, afterSeq) =>
      this.#closed
        ? Promise.reject(closedError("pruneEvents"))
        : pruneEvents.call(backend, projectId, stream, beforeSeq, afterSeq);
  }

  /** The current backend's `listProjects`, bound to it; `undefined` when that backend has none. */
  get listProjects(): (() => Promise<string[]>) | undefined {
    const backend = this.#current;
    const listProjects = backend?.listProjects;
    if (listProjects === undefined) return undefined;
    return () => (this.#closed ? Promise.reject(closedError("listProjects")) : listProjects.call(backend));
  }

  /** The current backend's `listAcrossProjects`, bound to it; `undefined` when that backend has none. */
  get listAcrossProjects(): RunStateAuthority["listAcrossProjects"] {
    const backend = this.#current;
    const listAcross = backend?.listAcrossProjects;
    if (listAcross === undefined) return undefined;
    return (kind, options) =>
      this.#closed ? Promise.reject(closedError("list")) : listAcross.call(backend, kind, options);
  }

  /** The current backend's `listByCreation`, bound to it; `undefined` when that backend has none. */
  get listByCreation(): RunStateAuthority["listByCreation"] {
    const backend = this.#current;
    const listByCreation = backend?.listByCreation;
    if (listByCreation === undefined) return undefined;
    return (kind, options) =>
      this.#closed ? Promise.reject(closedError("list")) : listByCreation.call(backend, kind, options);
  }

  /** The current backend's `listTexts`, bound to it; `undefined` when that backend has none. */
  get listTexts(): RunStateAuthority["listTexts"] {
    const backend = this.#current;
    const listTexts = backend?.listTexts;
    if (listTexts === undefined) return undefined;
    return (kind, options) =>
      this.#closed ? Promise.reject(closedError("list")) : listTexts.call(backend, kind, options);
  }

  /** The current backend's `listTextsByCreation`, bound to it; `undefined` when that backend has none. */
  get listTextsByCreation(): RunStateAuthority["listTextsByCreation"] {
    const backend = this.#current;
    const list = backend?.listTextsByCreation;
    if (list === undefined) return undefined;
    return (kind, options, onBatch) =>
      this.#closed ? Promise.reject(closedError("list")) : list.call(backend, kind, options, onBatch);
  }

  /**
   * The current backend's `changeMark`, bound to it and prefixed with the backend's index (a switch moves the mark);
   * `undefined` when that backend has none.
   */
  get changeMark(): (() => string) | undefined {
    const backend = this.#current;
    const changeMark = backend?.changeMark;
    if (backend === undefined || changeMark === undefined) return undefined;
    const known = this.#markReader;
    if (known !== undefined && known.backend === backend && known.changeMark === changeMark) return known.read;
    const index = this.#backends.indexOf(backend);
    // The same function while the backend is the same, and the same text while its mark is (issue 16, request path:
    // one `changeMark` per `product.status`, compared with the kept answer's).
    let inner: string | undefined;
    let mark = "";
    const read = (): string => {
      if (this.#closed) throw closedError("changeMark");
      const now = changeMark.call(backend);
      if (now !== inner) {
        inner = now;
        mark = `${index}/${now}`;
      }
      return mark;
    };
    this.#markReader = { backend, changeMark, read };
    return read;
  }

  /** Records why the store could not be opened: every later call without a backend fails with `failure`. */
  openFailed(failure: unknown): void {
    this.#openFailure = failure;
  }

  /** Hands `epoch` to every backend given so far and to each one given later (see `RunStateAuthority.shareChangeMarks`). */
  shareChangeMarks(epoch: () => number): void {
    this.#markEpoch = epoch;
    for (const backend of this.#backends) backend.shareChangeMarks?.(epoch);
  }

  /** The current backend's change feed (`watch`), bound to it; `undefined` when that backend has none. */
  get watch(): ((listener: (change: AuthorityChange) => void) => () => void) | undefined {
    const backend = this.#current;
    const watch = backend?.watch;
    if (watch === undefined) return undefined;
    return (listener) => {
      if (this.#closed) throw closedError("watch");
      return watch.call(backend, listener);
    };
  }

  /**
   * Closes every backend it was given (each once, even when one fails), then rejects with `AuthorityFailure` if any
   * close failed. Idempotent. Every later call fails with `AuthorityFailure`. Does NOT delete data.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const results = await Promise.allSettled(this.#backends.map((backend) => backend.close()));
    const failed = results.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
    if (failed.length > 0) {
      throw new AuthorityFailure(`${failed.length} run-state backend(s) failed to close.`, { cause: failed[0] });
    }
  }

  /** The backend for one call. Throws `AuthorityFailure` after `close` (the async callers turn it into a rejection). */
  #target(op: string): RunStateAuthority {
    if (this.#closed) throw closedError(op);
    if (this.#current === undefined) {
      if (this.#openFailure !== undefined) throw this.#openFailure;
      throw new AuthorityFailure(`The run-state store is not open yet (${op}).`);
    }
    return this.#current;
  }
}

function closedError(op: string): AuthorityFailure {
  return new AuthorityFailure(`The run-state authority is closed (${op}).`);
}
