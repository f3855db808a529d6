/**
 * SqliteAuthority: the embedded `RunStateAuthority` on one SQLite file (DESIGN.md, Persistence backends: `sqlite`).
 *
 * Owns the database file (its schema, migrations and statements are sqlite-schema.ts's) and the connection settings
 * that make the durability guarantees hold: WAL, `synchronous=FULL` (a write resolves only once committed with
 * fsync), a busy timeout so several processes on one file wait for each other instead of failing, and
 * compare-and-swap inside `BEGIN IMMEDIATE` transactions (guarantee 6).
 * It must never write on a read path (guarantee 3), never coerce or drop a stored row it cannot parse (guarantee 4:
 * the raw text goes back to the caller, whose schema check fails closed), and never let a SQLite error escape as
 * anything but `AuthorityFailure` (guarantee 2). It also never reports a write as done when the file it went to is no
 * longer the file at its path: the identity (device, inode) of the database file and its `-wal` is taken at open and
 * compared after every write (lease heartbeats included); a file that was deleted or replaced under the running
 * server fails that write and every later one (guarantee 2), since what they commit would be lost at the next restart.
 */
import { mkdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import {
  AuthorityConflict,
  AuthorityFailure,
  type Clock,
  type AppendedEvents,
  type CreationPageOptions,
  type CreationRecord,
  type ProjectRecord,
  type RecordInfo,
  type RunStateAuthority,
  type StoredEvent,
  type StoredRecord,
  type TextListOptions,
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
  messageOf,
  parseStored,
  toJson,
} from "./authority-checks.js";
import {
  SQLITE_SCHEMA_VERSION,
  migrate,
  prepareStatements,
  readableSchemaVersion,
  readSchemaVersion,
  type SqliteSettings,
  type Statements,
} from "./sqlite-schema.js";
import { readAcross, readCreationPage, readTexts } from "./sqlite-across.js";
import { WAL_INDEX_HEADER_BYTES, WalIndexHeader } from "./wal-index.js";
export { SQLITE_SCHEMA_VERSION, type SqliteSettings };

export interface SqliteAuthorityOptions {
  /** How long a write waits for another connection's lock before failing, in milliseconds. Default 5000. */
  busyTimeoutMs?: number;
  /** Source of `updatedAt` timestamps (milliseconds since the epoch). Default: `Date.now`. */
  clock?: Pick<Clock, "now">;
  /**
   * Open an existing file for reading only (the operator commands, guarantee 3): SQLite itself refuses every write,
   * no directory or file is created, no schema is migrated: a file of an older schema version (from
   * `SQLITE_READABLE_FROM_VERSION`) is read as it is, a newer one is refused.
   */
  readOnly?: boolean;
}

/**
 * A run-state authority on one SQLite file, shared safely by several connections and processes.
 *
 * Implements the `RunStateAuthority` contract of `src/core/ports.ts` (PROTOCOL.md section 7). Methods return
 * promises but do their work synchronously on the calling thread (better-sqlite3), so a resolved write is committed
 * and fsynced. Values are stored as JSON text; reading a row whose text is not JSON returns that raw string as the
 * value (or event) instead of throwing, so the caller's schema validation rejects it and counts it as dropped
 * (guarantee 4) while the other rows stay readable. Ids are ordered by Unicode code point (UTF-8 byte order).
 * Create instances with `SqliteAuthority.open`.
 */
export class SqliteAuthority implements RunStateAuthority {
  readonly name = "sqlite";
  readonly #db: Database.Database;
  readonly #schemaVersion: number;
  readonly #statements: Statements;
  readonly #now: () => number;
  readonly #putTransaction: Database.Transaction<
    (projectId: string, kind: string, id: string, json: string, expected: number | null, updatedAt: string) => number
  >;
  readonly #deleteTransaction: Database.Transaction<
    (projectId: string, kind: string, id: string, expected: number | undefined) => boolean
  >;
  readonly #appendTransaction: Database.Transaction<
    (projectId: string, stream: string, events: string[], expectedSeq: number) => number
  >;
  readonly #pruneTransaction: Database.Transaction<
    (projectId: string, stream: string, beforeSeq: number, afterSeq: number) => number
  >;
  /** Identity of the database file and its `-wal` at open (absent for `:memory:`). */
  readonly #identity: FileIdentity | null;
  /** Set once the file was found deleted or replaced: every later write fails with this. */
  #lostFile: AuthorityFailure | null = null;
  /**
   * Known event stream heads (`projectId NUL stream` → an upper bound of the highest `seq` in it), valid while the
   * connection's `PRAGMA data_version` is `#headsVersion` (it changes when any other connection commits; this
   * connection's own commits update the map). Lets `readEvents` answer an empty tail without the query: the catch-up
   * read of every `product.status` on a product this process does not drive (issue 16, request path).
   */
  readonly #heads = new Map<string, number>();
  #headsVersion: unknown = undefined;
  readonly #dataVersion: Database.Statement<[], unknown>;
  /** Writes attempted through this connection (its own commits do not move `PRAGMA data_version`); see `changeMark`. */
  #writes = 0;
  /** `#db.open`, kept here: `#run` asks on every call, and the addon's getter is a native call (issue 34). */
  #open = true;
  /** The last mark `changeMark` made, with what it was made of. */
  #markText: { version: unknown; writes: number; mark: string } | undefined;
  /** See `shareChangeMarks`: the input counter, and the data version read at its value `epoch`. */
  #markEpoch: (() => number) | undefined;
  #sharedVersion: { epoch: number; version: unknown } | undefined;
  /** See `#readDataVersion`: the `-shm` reader (null: not opened yet), the header bytes last seen and read now. */
  #wal: WalIndexHeader | undefined | null = null;
  #walSeen = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  #walNow = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  /** The data version SQLite gave when `#walSeen` was read, or `NO_WAL_VERSION`. */
  #walVersion: unknown = NO_WAL_VERSION;

  private constructor(
    /** Absolute path of the database file (or `:memory:`). */
    readonly path: string,
    db: Database.Database,
    options: SqliteAuthorityOptions,
    /** The file's schema version: `SQLITE_SCHEMA_VERSION`, or an older one on a read-only connection. */
    schemaVersion = SQLITE_SCHEMA_VERSION,
  ) {
    this.#db = db;
    this.#schemaVersion = schemaVersion;
    const clock = options.clock;
    this.#now = clock ? () => clock.now() : Date.now;
    this.#statements = prepareStatements(db);
    this.#dataVersion = db.prepare<[], unknown>("PRAGMA data_version").pluck();
    this.#identity = path === ":memory:" ? null : identityOf(path);
    const s = this.#statements;

    this.#putTransaction = db.transaction((projectId, kind, id, json, expected, updatedAt) => {
      const current = s.getRevision.get(projectId, kind, id);
      checkRevisionMatches(projectId, kind, id, current, expected);
      if (current === undefined) {
        s.insertRecord.run(projectId, kind, id, json, 1, updatedAt);
        return 1;
      }
      s.updateRecord.run(json, current + 1, updatedAt, projectId, kind, id);
      return current + 1;
    });

    this.#deleteTransaction = db.transaction((projectId, kind, id, expected) => {
      const current = s.getRevision.get(projectId, kind, id);
      if (current === undefined) return false;
      if (expected !== undefined) checkRevisionMatches(projectId, kind, id, current, expected);
      s.deleteRecord.run(projectId, kind, id);
      return true;
    });

    this.#appendTransaction = db.transaction((projectId, stream, events, expectedSeq) => {
      const lastSeq = s.lastSeq.get(projectId, stream) ?? 0;
      if (lastSeq !== expectedSeq) {
        throw new AuthorityConflict(
          `Event stream "${stream}" of project "${projectId}" is at sequence ${lastSeq}, not the expected ${expectedSeq}.`,
        );
      }
      let seq = lastSeq;
      for (const event of events) {
        seq += 1;
        s.insertEvent.run(projectId, stream, seq, event);
      }
      return seq;
    });

    this.#pruneTransaction = db.transaction((projectId, stream, beforeSeq, afterSeq) => {
      checkPruneBound(stream, beforeSeq, s.lastSeq.get(projectId, stream) ?? 0);
      return s.pruneEvents.run(projectId, stream, afterSeq, beforeSeq).changes;
    });
  }

  /**
   * Opens (creating when missing, with its parent directories) the database at `path`, applies the connection
   * settings (WAL, `synchronous=FULL`, busy timeout, `foreign_keys=ON`) and any pending schema migration inside one
   * immediate transaction. Several processes may open the same file at once. `:memory:` opens a private in-memory
   * database (no WAL). Throws `AuthorityFailure` when the file cannot be opened, is not a database, or was written
   * by a newer schema version; the connection is closed again in that case.
   */
  static open(path: string, options: SqliteAuthorityOptions = {}): SqliteAuthority {
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
      throw new AuthorityFailure(`busyTimeoutMs must be a non-negative integer, got ${String(busyTimeoutMs)}.`);
    }
    const inMemory = path === ":memory:";
    const location = inMemory ? path : resolve(path);
    let db: Database.Database | undefined;
    try {
      if (options.readOnly) {
        db = new Database(location, { timeout: busyTimeoutMs, readonly: true, fileMustExist: true, ...addon() });
        db.pragma(`busy_timeout = ${busyTimeoutMs}`);
        const seen = readableSchemaVersion(db, location);
        return new SqliteAuthority(location, db, options, seen);
      }
      if (!inMemory) makeParentFolders(dirname(location));
      db = new Database(location, { timeout: busyTimeoutMs, ...addon() });
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = FULL");
      db.pragma("fullfsync = ON");
      db.pragma("checkpoint_fullfsync = ON");
      db.pragma("foreign_keys = ON");
      migrate(db);
      return new SqliteAuthority(location, db, options);
    } catch (error) {
      db?.close();
      if (error instanceof AuthorityFailure) throw error;
      throw new AuthorityFailure(`Cannot open the SQLite state file ${location}: ${messageOf(error)}`, {
        cause: error,
      });
    }
  }

  /** Reads one record; `null` when it does not exist. A value that is not valid JSON comes back as its raw text. Never writes. */
  async get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    return this.#run("get", () => {
      checkKey(projectId, kind, id);
      const row = this.#statements.getRecord.get(projectId, kind, id);
      if (!row) return null;
      return { value: parseStored(row.value), revision: row.revision, updatedAt: row.updated_at };
    });
  }

  /**
   * Creates or replaces one record by compare-and-swap inside `BEGIN IMMEDIATE`. `expectedRevision: null` requires
   * that the record does not exist; a number requires it to be the current revision. Resolves with the new
   * revision (1 on creation) once committed and fsynced. Throws `AuthorityConflict` (with `details.revision` = the
   * current revision, absent when the record does not exist) on a mismatch, `AuthorityFailure` on an invalid
   * argument, a value that cannot be serialised to JSON, or any SQLite error (lock wait beyond the busy timeout,
   * disk full, closed). A failed call changes nothing.
   */
  async put(
    projectId: string,
    kind: string,
    id: string,
    value: object,
    expectedRevision: number | null,
  ): Promise<{ revision: number }> {
    return this.#write("put", () => {
      checkKey(projectId, kind, id);
      if (expectedRevision !== null) checkRevision(expectedRevision);
      const json = toJson(value, "value");
      const updatedAt = new Date(this.#now()).toISOString();
      const revision = this.#putTransaction.immediate(projectId, kind, id, json, expectedRevision, updatedAt);
      return { revision };
    });
  }

  /**
   * Deletes one record inside `BEGIN IMMEDIATE`. Returns `false` when it does not exist (whatever
   * `expectedRevision` says), `true` when it was removed. With `expectedRevision`, throws `AuthorityConflict` (with
   * the current revision) when the record exists at another revision, and removes nothing. Event streams are never
   * touched.
   */
  async delete(projectId: string, kind: string, id: string, expectedRevision?: number): Promise<boolean> {
    return this.#write("delete", () => {
      checkKey(projectId, kind, id);
      if (expectedRevision !== undefined) checkRevision(expectedRevision);
      return this.#deleteTransaction.immediate(projectId, kind, id, expectedRevision);
    });
  }

  /**
   * Lists the records of one kind in one project whose id starts with `prefix`, ordered by id (code-point order).
   * The prefix is matched literally through an index range (`id >= prefix AND id < prefix || x'FF'`), so `%` and `_`
   * are ordinary characters. Never writes.
   */
  async list(projectId: string, kind: string, prefix = ""): Promise<RecordInfo[]> {
    return this.#run("list", () => {
      checkName(projectId, "projectId");
      checkName(kind, "kind");
      checkPrefix(prefix);
      return this.#statements.listRecords
        .all(projectId, kind, prefix, prefix)
        .map((row) => ({ id: row.id, revision: row.revision, updatedAt: row.updated_at }));
    });
  }

  /**
   * Appends events inside `BEGIN IMMEDIATE` when the stream's last sequence number equals `expectedSeq` (0 for a
   * new stream); the events get `expectedSeq + 1 …` and the new last sequence number is returned once committed.
   * An empty `events` array appends nothing and returns `expectedSeq` once the check passes. Throws
   * `AuthorityConflict` on a mismatch (nothing appended), `AuthorityFailure` on an invalid argument or SQLite error.
   */
  async appendEvents(
    projectId: string,
    stream: string,
    events: object[],
    expectedSeq: number,
  ): Promise<AppendedEvents> {
    return this.#write("appendEvents", () => {
      checkName(projectId, "projectId");
      checkName(stream, "stream");
      checkSeq(expectedSeq, "expectedSeq");
      if (!Array.isArray(events)) throw new AuthorityFailure("events must be an array.");
      const texts = events.map((event, index) => toJson(event, `events[${index}]`));
      const lastSeq = this.#appendTransaction.immediate(projectId, stream, texts, expectedSeq);
      this.#heads.set(headKey(projectId, stream), lastSeq);
      return appendedEvents(lastSeq, texts);
    });
  }

  /**
   * Events of one stream with `seq > afterSeq`, oldest first, at most `limit` of them when given; `[]` for an
   * unknown stream. An event whose text is not valid JSON comes back as its raw text. Never writes.
   */
  async readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    return this.#run("readEvents", () => {
      checkName(projectId, "projectId");
      checkName(stream, "stream");
      checkSeq(afterSeq, "afterSeq");
      checkLimit(limit);
      const version = this.#readDataVersion();
      if (version !== this.#headsVersion) {
        this.#heads.clear();
        this.#headsVersion = version;
      }
      const key = headKey(projectId, stream);
      const head = this.#heads.get(key);
      if (head !== undefined && head <= afterSeq) return [];
      const rows = this.#statements.readEvents.all(projectId, stream, afterSeq, limit ?? -1);
      // A complete tail tells where the stream ends: its last seq, or (empty) nothing beyond afterSeq.
      if (limit === undefined || rows.length < limit) this.#heads.set(key, rows.at(-1)?.seq ?? afterSeq);
      return rows.map((row) => storedEvent(row.seq, parseStored(row.event), row.event.length));
    });
  }

  /** Deletes every event of one stream in one transaction; `true` when there was one. Records are not touched. */
  async deleteStream(projectId: string, stream: string): Promise<boolean> {
    return this.#write("deleteStream", () => {
      checkName(projectId, "projectId");
      checkName(stream, "stream");
      this.#heads.delete(headKey(projectId, stream));
      return this.#statements.deleteStream.run(projectId, stream).changes > 0;
    });
  }

  /**
   * Deletes the events with `afterSeq < seq < beforeSeq` inside `BEGIN IMMEDIATE` (compaction) and returns how many were
   * deleted; the numbering goes on. Refuses (`AuthorityFailure`, nothing deleted) a `beforeSeq` above the last
   * sequence number (0 and 1 always pass). Freed pages are reused by later writes, so the file stops growing.
   */
  async pruneEvents(projectId: string, stream: string, beforeSeq: number, afterSeq = 0): Promise<number> {
    return this.#write("pruneEvents", () => {
      checkName(projectId, "projectId");
      checkName(stream, "stream");
      checkSeq(beforeSeq, "beforeSeq");
      checkSeq(afterSeq, "afterSeq");
      return this.#pruneTransaction.immediate(projectId, stream, beforeSeq, afterSeq);
    });
  }

  /**
   * `PRAGMA data_version` (moved by every commit of another connection, other processes' included) and the number of
   * writes through this connection: equal marks mean nothing was committed in between. Never writes.
   */
  changeMark(): string {
    return this.#run("changeMark", this.#readMark);
  }

  /** The text of the mark, made anew only when the mark moved (issue 16, request path: one per `product.status`). */
  readonly #readMark = (): string => {
    const version = this.#markVersion();
    const text = this.#markText;
    if (text !== undefined && text.version === version && text.writes === this.#writes) return text.mark;
    const mark = `${String(version)}:${this.#writes}`;
    this.#markText = { version, writes: this.#writes, mark };
    return mark;
  };

  /**
   * Lets `changeMark` reuse the `PRAGMA data_version` it read while `epoch()` still returns what it returned then (a
   * `NaN` epoch never reuses and is never kept); this connection's own writes still move the mark at once. `epoch`
   * must move whenever input that may carry a request was read and be `NaN` outside the delivery of such input (the
   * server's reader, framed-reader.ts `dispatchEpoch`): then every request that uses a reused value arrived before the
   * value was read, so its answer still reflects every commit made before it arrived (a batch of pipelined
   * `product.status` requests pays for one pragma instead of one each, issue 16). Calling it again replaces `epoch`.
   */
  shareChangeMarks(epoch: () => number): void {
    this.#markEpoch = epoch;
    this.#sharedVersion = undefined;
  }

  #markVersion(): unknown {
    const epochOf = this.#markEpoch;
    if (epochOf === undefined) return this.#readDataVersion();
    const epoch = epochOf();
    const shared = this.#sharedVersion;
    if (shared !== undefined && shared.epoch === epoch) return shared.version;
    const version = this.#readDataVersion();
    this.#sharedVersion = Number.isNaN(epoch) ? undefined : { epoch, version };
    return version;
  }

  /**
   * `PRAGMA data_version`, asked of SQLite only when the wal-index header changed since it was last asked (wal-index.ts:
   * equal header bytes mean no connection committed in between, so the answer is the one given then; issue 16,
   * request path: one `pread` instead of a read transaction's locks). The header is read before the pragma, so a
   * commit that lands between the two changes the header again and the next call asks anew.
   */
  #readDataVersion(): unknown {
    const wal = this.#walIndex();
    const seen = this.#walVersion === NO_WAL_VERSION ? undefined : this.#walSeen;
    const header = wal === undefined ? "unreadable" : wal.readSince(this.#walNow, seen);
    if (header === "same") return this.#walVersion;
    // A throwing pragma leaves no version kept: the next call asks SQLite again.
    this.#walVersion = NO_WAL_VERSION;
    const version = this.#dataVersion.get();
    if (header === "unreadable") return version;
    [this.#walSeen, this.#walNow] = [this.#walNow, this.#walSeen];
    this.#walVersion = version;
    return version;
  }

  /** The `-shm` reader, opened on first use; `undefined` for an in-memory database or when it cannot be opened. */
  #walIndex(): WalIndexHeader | undefined {
    if (this.#wal === null) {
      this.#wal = this.path === ":memory:" ? undefined : WalIndexHeader.open(this.path);
    }
    return this.#wal;
  }

  /** Project ids that hold at least one record (event streams alone do not count), in code-point order. Never writes. */
  async listProjects(): Promise<string[]> {
    return this.#run("listProjects", () => this.#statements.listProjects.all());
  }

  /** `kind` in every project by project then id, one statement; `containing` matched by `instr`. Never writes. */
  async listAcrossProjects(kind: string, options: { containing?: string } = {}): Promise<ProjectRecord[]> {
    return this.#run("list", () => readAcross(this.#statements, kind, options));
  }

  /** `product` records in creation order, one statement on the creation index (sqlite-across.ts). Never writes. */
  async listByCreation(kind: string, options: CreationPageOptions): Promise<CreationRecord[]> {
    return this.#run("list", () => readCreationPage(this.#db, kind, options, this.#schemaVersion));
  }

  /** Stored texts of `kind` in one statement, unordered, unparsed (sqlite-across.ts `readTexts`). Never writes. */
  async listTexts(kind: string, options: TextListOptions): Promise<string[]> {
    return this.#run("list", () => readTexts(this.#db, kind, options));
  }

  /** Reports the connection settings in force. Never writes. Throws `AuthorityFailure` when closed. */
  settings(): SqliteSettings {
    return this.#run("settings", () => ({
      journalMode: String(this.#db.pragma("journal_mode", { simple: true })),
      synchronous: Number(this.#db.pragma("synchronous", { simple: true })),
      busyTimeoutMs: Number(this.#db.pragma("busy_timeout", { simple: true })),
      foreignKeys: Number(this.#db.pragma("foreign_keys", { simple: true })) === 1,
      schemaVersion: readSchemaVersion(this.#db),
    }));
  }

  /** Closes the connection (the last connection to close checkpoints the WAL). Idempotent. Does NOT delete data. */
  async close(): Promise<void> {
    if (!this.#db.open) return;
    this.#wal?.close();
    try {
      this.#db.close();
      this.#open = false;
    } catch (error) {
      throw new AuthorityFailure(`Closing the SQLite state file failed: ${messageOf(error)}`, { cause: error });
    }
  }

  /**
   * Runs one write like `#run`, refusing it when the file was lost earlier and checking afterwards that the database
   * file and its `-wal` are still the ones opened (guarantee 2): a write into a deleted or replaced file is lost at the
   * next restart, so it fails, and so does every later write of this connection.
   */
  #write<T>(op: string, work: () => T): T {
    this.#writes += 1;
    if (this.#lostFile) throw this.#lostFile;
    this.#checkIdentity(op);
    const result = this.#run(op, work);
    this.#checkIdentity(op);
    return result;
  }

  /** Throws (and remembers) `AuthorityFailure` when the database file or its `-wal` is not the one opened. */
  #checkIdentity(op: string): void {
    const opened = this.#identity;
    if (opened === null || this.#lostFile) {
      if (this.#lostFile) throw this.#lostFile;
      return;
    }
    let now: FileIdentity;
    try {
      now = identityOf(this.path);
    } catch (error) {
      throw new AuthorityFailure(`SQLite ${op} failed: cannot check the state file ${this.path}: ${messageOf(error)}`, {
        cause: error,
      });
    }
    const changed = (which: "db" | "wal"): boolean =>
      opened[which] !== null &&
      (now[which] === null || now[which].dev !== opened[which].dev || now[which].ino !== opened[which].ino);
    const lost = changed("db") ? this.path : changed("wal") ? `${this.path}-wal` : null;
    if (lost === null) return;
    const gone = (lost === this.path ? now.db : now.wal) === null;
    this.#lostFile = new AuthorityFailure(
      `SQLite ${op} failed: the state file ${lost} was ${gone ? "deleted" : "replaced"} while the server was running, ` +
        "so nothing written now would survive a restart; restore the file and restart the server.",
    );
    throw this.#lostFile;
  }

  /** Runs one operation, turning every error other than a conflict into `AuthorityFailure`. */
  #run<T>(op: string, work: () => T): T {
    if (!this.#open) throw new AuthorityFailure(`The SQLite authority is closed (${op}).`);
    try {
      return work();
    } catch (error) {
      if (error instanceof AuthorityConflict || error instanceof AuthorityFailure) throw error;
      throw new AuthorityFailure(`SQLite ${op} failed: ${messageOf(error)}`, { cause: error });
    }
  }
}

/** `#walVersion` when no data version goes with the header bytes last seen. */
const NO_WAL_VERSION: unique symbol = Symbol("no data version");

/** Where better-sqlite3's compiled addon is, once looked up (`null`: not at its build path). */
let addonPath: string | null | undefined;

/**
 * better-sqlite3's `nativeBinding` option naming its addon at the path its install builds it to
 * (`build/Release/better_sqlite3.node`), so that opening the first database does not run the `bindings` package's
 * search (it tries several candidate paths, failing `require`s included: a few milliseconds of every cold start,
 * issue 16). Empty when the addon is not there (a differently built install): better-sqlite3 then searches as usual.
 */
function addon(): { nativeBinding?: string } {
  if (addonPath === undefined) {
    try {
      addonPath = createRequire(import.meta.url).resolve("better-sqlite3/build/Release/better_sqlite3.node");
    } catch {
      addonPath = null;
    }
  }
  return addonPath === null ? {} : { nativeBinding: addonPath };
}

/** The key of one event stream in `#heads`. */
function headKey(projectId: string, stream: string): string {
  return `${projectId}\u0000${stream}`;
}

/** Device and inode of the database file and of its `-wal` (`null` for a file that does not exist). */
interface FileIdentity {
  db: { dev: number; ino: number } | null;
  wal: { dev: number; ino: number } | null;
}

function identityOf(path: string): FileIdentity {
  const one = (file: string): { dev: number; ino: number } | null => {
    const st = statSync(file, { throwIfNoEntry: false });
    return st ? { dev: st.dev, ino: st.ino } : null;
  };
  return { db: one(path), wal: one(`${path}-wal`) };
}

/**
 * Creates `dir` and its missing ancestors, one level at a time from the nearest existing one. Throws the first
 * `mkdir` error. Node 20's `mkdirSync(…, {recursive: true})` never returns for a folder that a pseudo-filesystem
 * refuses with ENOENT although its parent exists (`--state /proc/nope/x.db` hung the server), so it is not used here.
 */
function makeParentFolders(dir: string): void {
  const missing: string[] = [];
  for (let d = resolve(dir); ; d = dirname(d)) {
    try {
      statSync(d);
      break;
    } catch {
      missing.push(d);
      if (dirname(d) === d) break;
    }
  }
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d);
    } catch (err) {
      if ((err as { code?: string }).code !== "EEXIST") throw err; // another process made it first
    }
  }
}
