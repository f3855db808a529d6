/**
 * PostgresAuthority: the shared `RunStateAuthority` on PostgreSQL (DESIGN.md, Persistence backends: `postgres`), for
 * hosts that run many server processes on many machines against one store (issue 14).
 *
 * Owns the connection pool, statement timeouts and the statements of every authority operation, on the tables of its
 * own PostgreSQL schema (`acp_orchestrator` by default; definitions and migrations in postgres-schema.ts), and
 * composes the change feed (`LISTEN/NOTIFY`, postgres-feed.ts) that tells a server at once when another server wrote
 * a record or a stream it cares about.
 * Every compare-and-swap is ONE conditional statement (`INSERT … ON CONFLICT DO NOTHING`, `UPDATE … WHERE revision =
 * $expected`), and an append moves the stream's head row by a conditional update in the same transaction that
 * inserts the events, so two servers can never both win (guarantee 6); the primary keys enforce the same thing a
 * second time. A server's concurrent appends, record creations and record updates are committed in groups, each row
 * still its own compare-and-swap (postgres-group-commit.ts). It must never write on a read path (guarantee 3), never
 * coerce a stored value it cannot parse (the raw text goes back to the caller, whose schema check fails closed:
 * guarantee 4), and never let a database error escape as anything but `AuthorityConflict` / `AuthorityFailure`
 * (guarantee 2).
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import {
  type DeleteOptions,
  AuthorityConflict,
  AuthorityFailure,
  type AuthorityChange,
  type Clock,
  type CreationPageOptions,
  type CreationRecord,
  type CreationTextsSink,
  type ListedRecord,
  type ProjectRecord,
  type RecordInfo,
  type RunStateAuthority,
  type StoredEvent,
  type StoredRecord,
  type TextListOptions,
} from "../../core/ports.js";
import {
  checkPrefix,
  checkPruneBound,
  checkRevision,
  checkSeq,
  messageOf,
  parseStored,
  toJson,
} from "./authority-checks.js";
import { readCreationPage, readTexts, readTextsByCreation } from "./postgres-creation.js";
import { type AnnounceFilter, ChangeFeed } from "./postgres-feed.js";
import { appendedRow, pruneEventRows, readStoredEvents } from "./postgres-events.js";
import { refusalConflict, revisionOf } from "./postgres-record-writes.js";
import { WriteBatcher } from "./postgres-write-batch.js";
import { DEFAULT_POSTGRES_SCHEMA, migrate, PREFER_LZ4 } from "./postgres-schema.js";
import { checkKeyText, checkNameText, positive, successor } from "./postgres-text.js";
import { inTransaction } from "./postgres-transaction.js";
import { parsePostgresUrl, quoteIdent, redact } from "./postgres-url.js";

export { DEFAULT_POSTGRES_SCHEMA, POSTGRES_SCHEMA_VERSION } from "./postgres-schema.js";

export interface PostgresAuthorityOptions {
  /** The PostgreSQL schema (namespace) holding the tables; created when missing. Default `acp_orchestrator`. */
  schema?: string;
  /** Most connections the pool opens. Default 10. */
  maxConnections?: number;
  /** Longest a statement may run before the server cancels it (a persistence failure), ms. Default 15000. */
  statementTimeoutMs?: number;
  /** Longest to wait for a connection (from the pool or the server), ms. Default 10000. */
  connectionTimeoutMs?: number;
  /** Source of `updatedAt` timestamps (milliseconds since the epoch). Default: `Date.now`. */
  clock?: Pick<Clock, "now">;
  /**
   * Which writes are announced on the change feed (`NOTIFY`). Default: every record and stream write. A transaction
   * that notifies holds PostgreSQL's database-wide notify lock through its commit, so the commits of notifying writes
   * are serialised across every server: announce only what some `watch` listener reacts to (the server passes the
   * fleet's `fleetWatches`). An unannounced write is still committed, read and conflict-checked the same way.
   * `created` is set for a put that creates its record (`expectedRevision: null`).
   */
  announce?: AnnounceFilter;
  /** Where connection problems of the change feed are reported (it reconnects by itself). Default: ignored. */
  onFeedError?: (error: Error) => void;
}

/**
 * The project ids of `records` as a recursive CTE `projects` (a loose index scan: one probe of the primary key per
 * project, not a read of every record). Its last row is NULL.
 */
const PROJECTS = `WITH RECURSIVE projects(project_id) AS (
    (SELECT project_id FROM records ORDER BY project_id LIMIT 1)
    UNION ALL
    SELECT (SELECT r.project_id FROM records r WHERE r.project_id > p.project_id ORDER BY r.project_id LIMIT 1)
    FROM projects p WHERE p.project_id IS NOT NULL)`;

interface RecordRow {
  value: string;
  revision: string;
  updated_at: string;
}

/** The operations `close` waits for. */
const WRITES = new Set(["put", "delete", "appendEvents", "deleteStream", "pruneEvents"]);

/**
 * A run-state authority on a PostgreSQL database, shared by any number of server processes and machines.
 *
 * Implements the `RunStateAuthority` contract of `src/core/ports.ts` (PROTOCOL.md section 7). Each write is one
 * transaction (autocommit for a single statement) that resolves once committed, so it is as durable as the server's
 * `synchronous_commit` makes it. Errors: `AuthorityConflict` on a revision or sequence mismatch (with
 * `details.revision` = the current revision when the record exists), `AuthorityFailure` for invalid arguments and
 * every database or connection error (timeout, server gone, closed). Create instances with
 * `PostgresAuthority.open`, which connects, checks the server and migrates the schema.
 */
export class PostgresAuthority implements RunStateAuthority {
  readonly name = "postgres";
  /** Identifies this authority's writes in the change feed, so `watch` listeners hear only other writers. */
  readonly writerId = randomUUID();
  readonly #pool: pg.Pool;
  readonly #schema: string;
  readonly #now: () => number;
  readonly #feed: ChangeFeed;
  readonly #batch: WriteBatcher;
  /** The writes under way (checked, not yet settled): `close` waits for them. */
  readonly #writes = new Set<Promise<unknown>>();
  #closed = false;

  private constructor(connectionString: string, pool: pg.Pool, schema: string, options: PostgresAuthorityOptions) {
    this.#pool = pool;
    this.#batch = new WriteBatcher(pool);
    this.#schema = schema;
    const clock = options.clock;
    this.#now = clock ? () => clock.now() : Date.now;
    this.#feed = new ChangeFeed({
      connectionString,
      connectionTimeoutMs: options.connectionTimeoutMs ?? 10_000,
      schema,
      writerId: this.writerId,
      ...(options.announce ? { announce: options.announce } : {}),
      ...(options.onFeedError ? { onFeedError: options.onFeedError } : {}),
    });
  }

  /**
   * Connects to the database at `url` (`postgres://` or `postgresql://`; a `schema` query parameter overrides
   * `options.schema`), checks that it is PostgreSQL 12 or later with UTF8 encoding, creates the schema when missing
   * and applies pending migrations under an advisory lock (so servers starting together migrate once). Throws
   * `AuthorityFailure` with a plain sentence (the pool closed again) when the URL is invalid, the server cannot be
   * reached, the database is not UTF8, or its schema version is newer than this code understands (upgrade).
   */
  static async open(url: string, options: PostgresAuthorityOptions = {}): Promise<PostgresAuthority> {
    const { connectionString, schema } = parsePostgresUrl(url, options.schema, DEFAULT_POSTGRES_SCHEMA);
    const statementTimeoutMs = positive(options.statementTimeoutMs ?? 15_000, "statementTimeoutMs");
    const pool = new pg.Pool({
      connectionString,
      max: positive(options.maxConnections ?? 10, "maxConnections"),
      connectionTimeoutMillis: positive(options.connectionTimeoutMs ?? 10_000, "connectionTimeoutMs"),
      statement_timeout: statementTimeoutMs,
      // A row lock waited for past half the statement timeout fails with 55P03 (nothing written): a group commit batch
      // blocked on ONE row another transaction holds is then sent again write by write, so only that row's write fails
      // (postgres-group-commit.ts) instead of every write of the batch at the statement timeout.
      lock_timeout: Math.max(1, Math.floor(statementTimeoutMs / 2)),
      idle_in_transaction_session_timeout: statementTimeoutMs * 2,
      application_name: "acp-orchestrator",
      options: `-c search_path=${quoteIdent(schema)}`,
      // Awaited by the pool before the connection serves its first query (issue 34: one query at a time per client).
      onConnect: (client) =>
        client.query(PREFER_LZ4).then(
          () => undefined,
          () => undefined,
        ),
    });
    // An idle client that loses its connection must not crash the process: the next query fails instead.
    pool.on("error", () => undefined);
    const authority = new PostgresAuthority(connectionString, pool, schema, options);
    try {
      const client = await pool.connect();
      try {
        await migrate(client, schema);
      } finally {
        client.release();
      }
      return authority;
    } catch (error) {
      await pool.end().catch(() => undefined);
      if (error instanceof AuthorityFailure) throw error;
      throw new AuthorityFailure(`Cannot open the PostgreSQL state store ${redact(url)}: ${messageOf(error)}`, {
        cause: error,
      });
    }
  }

  /** The PostgreSQL schema holding this authority's tables. */
  get schema(): string {
    return this.#schema;
  }

  /** The schema version stored in the database. Never writes. */
  async schemaVersion(): Promise<number> {
    return this.#run("schemaVersion", async () => {
      const result = await this.#pool.query<{ v: string | null }>("SELECT max(version) AS v FROM schema_version");
      return Number(result.rows[0]?.v ?? 0);
    });
  }

  /** Reads one record; `null` when it does not exist. A value that is not valid JSON comes back as its raw text. Never writes. */
  async get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    return this.#run("get", async () => {
      checkKeyText(projectId, kind, id);
      const result = await this.#pool.query<RecordRow>({
        name: "acp-get",
        text: "SELECT value, revision, updated_at FROM records WHERE project_id = $1 AND kind = $2 AND id = $3",
        values: [projectId, kind, id],
      });
      const row = result.rows[0];
      if (!row) return null;
      return { value: parseStored(row.value), revision: Number(row.revision), updatedAt: row.updated_at };
    });
  }

  /**
   * Creates or replaces one record by compare-and-swap in one statement: `expectedRevision: null` inserts only when
   * the record does not exist (`ON CONFLICT DO NOTHING`), a number updates only the row at that revision. Resolves
   * with the new revision (1 on creation) once committed. Throws `AuthorityConflict` (with `details.revision` = the
   * current revision, absent when the record does not exist) on a mismatch, `AuthorityFailure` on an invalid
   * argument, a value that cannot be serialised, or any database error. A failed call changes nothing.
   */
  async put(
    projectId: string,
    kind: string,
    id: string,
    value: object,
    expectedRevision: number | null,
  ): Promise<{ revision: number }> {
    return this.#run("put", async () => {
      checkKeyText(projectId, kind, id);
      if (expectedRevision !== null) checkRevision(expectedRevision);
      const json = toJson(value, "value");
      const updatedAt = new Date(this.#now()).toISOString();
      const notify = this.#feed.notifySql({ p: projectId, k: kind, i: id }, 6, { created: expectedRevision === null });
      const put = await this.#batch.put({ projectId, kind, id, json, updatedAt, expectedRevision, notify });
      if (put.applied) return { revision: put.revision };
      throw await refusalConflict(this.#pool, { projectId, kind, id }, expectedRevision, put.current);
    });
  }

  /**
   * Deletes one record in one statement. Returns `false` when it does not exist (whatever `expectedRevision` says),
   * `true` when it was removed. With `expectedRevision`, deletes only the row at that revision and throws
   * `AuthorityConflict` (with the current revision) when it exists at another one. Event streams are never touched.
   */
  async delete(
    projectId: string,
    kind: string,
    id: string,
    expectedRevision?: number,
    options?: DeleteOptions,
  ): Promise<boolean> {
    return this.#run("delete", async () => {
      checkKeyText(projectId, kind, id);
      if (expectedRevision !== undefined) checkRevision(expectedRevision);
      const notify = this.#feed.notifySql({ p: projectId, k: kind, i: id, d: 1 }, 4, {
        quiet: options?.announce === false,
      });
      const deleted = await this.#batch.delete({ projectId, kind, id, expectedRevision, notify });
      if (deleted.applied) return true;
      // Refused: there was no record (false, whatever `expectedRevision` says), or one at another revision, as the
      // delete's own statement saw it; or one at the expected revision that a concurrent write changed meanwhile.
      if (expectedRevision === undefined || deleted.current === undefined) return false;
      const key = { projectId, kind, id };
      const current = deleted.current === expectedRevision ? await revisionOf(this.#pool, key) : deleted.current;
      if (current === undefined) return false;
      throw await refusalConflict(this.#pool, key, expectedRevision, current);
    });
  }

  /**
   * Lists the records of one kind in one project whose id starts with `prefix`, ordered by id (code-point order).
   * The prefix is matched literally through an index range (`id >= prefix AND id < successor(prefix)`), so `%` and
   * `_` are ordinary characters. Never writes.
   */
  async list(projectId: string, kind: string, prefix = ""): Promise<RecordInfo[]> {
    return this.#run("list", async () => {
      const rows = await this.#listRows<Omit<RecordRow, "value">>("id, revision, updated_at", projectId, kind, prefix);
      return rows.map((row) => ({ id: row.id, revision: Number(row.revision), updatedAt: row.updated_at }));
    });
  }

  /**
   * `list` with each record's value, in one statement (the same index range and order). Values are parsed as `get`
   * parses them. Never writes.
   */
  async listValues(projectId: string, kind: string, prefix = ""): Promise<ListedRecord[]> {
    return this.#run("list", async () => {
      const rows = await this.#listRows<RecordRow>("id, value, revision, updated_at", projectId, kind, prefix);
      return rows.map((row) => ({
        id: row.id,
        value: parseStored(row.value),
        revision: Number(row.revision),
        updatedAt: row.updated_at,
      }));
    });
  }

  /**
   * The rows (`columns`) of the records of one kind in one project whose id starts with `prefix`, by id: the index
   * range of `list` and `listValues`. Checks the arguments first; an id never holds NUL, so such a prefix lists none.
   */
  async #listRows<R>(
    columns: string,
    projectId: string,
    kind: string,
    prefix: string,
  ): Promise<(R & { id: string })[]> {
    checkNameText(projectId, "projectId");
    checkNameText(kind, "kind");
    checkPrefix(prefix);
    if (prefix.includes("\u0000")) return [];
    const upper = successor(prefix);
    const result = await this.#pool.query<R & { id: string }>(
      `SELECT ${columns} FROM records
       WHERE project_id = $1 AND kind = $2 AND id >= $3 ${upper === null ? "" : "AND id < $4"} ORDER BY id`,
      upper === null ? [projectId, kind, prefix] : [projectId, kind, prefix, upper],
    );
    return result.rows;
  }

  /**
   * Appends events when the stream's last sequence number equals `expectedSeq` (0 for a new stream), in ONE
   * statement (one round trip, one transaction): the stream's head row is created (`ON CONFLICT DO NOTHING`) or moved
   * by a conditional update, and the events (`expectedSeq + 1 …`) are inserted as ONE row only when it was
   * (postgres-events.ts: one heap tuple and index entry per append, packed together by this process). Resolves with the new last sequence number once committed.
   * An empty `events` array writes nothing and returns `expectedSeq` once the check passes. Throws
   * `AuthorityConflict` on a mismatch (nothing appended), `AuthorityFailure` on an invalid argument or database error.
   */
  async appendEvents(
    projectId: string,
    stream: string,
    events: object[],
    expectedSeq: number,
  ): Promise<{ lastSeq: number }> {
    return this.#run("appendEvents", async () => {
      checkNameText(projectId, "projectId");
      checkNameText(stream, "stream");
      checkSeq(expectedSeq, "expectedSeq");
      if (!Array.isArray(events)) throw new AuthorityFailure("events must be an array.");
      const texts = events.map((event, index) => toJson(event, `events[${index}]`));
      const mismatch = (): AuthorityConflict =>
        new AuthorityConflict(
          `Event stream "${stream}" of project "${projectId}" is not at the expected sequence number ${expectedSeq}.`,
        );
      if (texts.length === 0) {
        const last = await this.#lastSeq(this.#pool, projectId, stream);
        if (last !== expectedSeq) throw mismatch();
        return { lastSeq: expectedSeq };
      }
      const lastSeq = expectedSeq + texts.length;
      const row = await appendedRow(texts);
      const notify = this.#feed.notifySql({ p: projectId, s: stream }, 9);
      const applied = await this.#batch.append({ projectId, stream, lastSeq, expectedSeq, row, notify });
      if (!applied) throw mismatch();
      return { lastSeq };
    });
  }

  /**
   * Events of one stream with `seq > afterSeq`, oldest first (at most `limit` when given); `[]` for an unknown
   * stream. An event whose text is not valid JSON comes back as its raw text. Never writes.
   */
  async readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    return this.#run("readEvents", async () => {
      checkNameText(projectId, "projectId");
      checkNameText(stream, "stream");
      checkSeq(afterSeq, "afterSeq");
      if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) {
        throw new AuthorityFailure(`limit must be a positive integer, got ${String(limit)}.`);
      }
      return readStoredEvents(this.#pool, projectId, stream, afterSeq, limit);
    });
  }

  /**
   * Deletes a whole event stream (its events and its head) in one transaction; `true` when it existed. A stream
   * appended again afterwards starts at sequence number 1.
   */
  async deleteStream(projectId: string, stream: string): Promise<boolean> {
    return this.#run("deleteStream", async () => {
      checkNameText(projectId, "projectId");
      checkNameText(stream, "stream");
      return this.#transaction(async (client) => {
        const head = await client.query("DELETE FROM streams WHERE project_id = $1 AND stream = $2", [
          projectId,
          stream,
        ]);
        const events = await client.query("DELETE FROM events WHERE project_id = $1 AND stream = $2", [
          projectId,
          stream,
        ]);
        const existed = (head.rowCount ?? 0) > 0 || (events.rowCount ?? 0) > 0;
        if (existed) {
          const notify = this.#feed.notifySql({ p: projectId, s: stream }, 1);
          await client.query(`SELECT ${notify.sql}`, notify.params);
        }
        return existed;
      });
    });
  }

  /**
   * Compaction: deletes the events with `afterSeq < seq < beforeSeq` (`afterSeq` default 0) in one transaction that locks the stream's head row, and
   * returns how many were deleted; the numbering (the head's `last_seq`) is unchanged. Refuses (`AuthorityFailure`,
   * nothing deleted) a `beforeSeq` above the last sequence number (0 and 1 always pass), so the last event is kept.
   */
  async pruneEvents(projectId: string, stream: string, beforeSeq: number, afterSeq = 0): Promise<number> {
    return this.#run("pruneEvents", async () => {
      checkNameText(projectId, "projectId");
      checkNameText(stream, "stream");
      checkSeq(beforeSeq, "beforeSeq");
      checkSeq(afterSeq, "afterSeq");
      return this.#transaction(async (client) => {
        const head = await client.query<{ last_seq: string }>(
          "SELECT last_seq FROM streams WHERE project_id = $1 AND stream = $2 FOR UPDATE",
          [projectId, stream],
        );
        checkPruneBound(stream, beforeSeq, Number(head.rows[0]?.last_seq ?? 0));
        return pruneEventRows(client, projectId, stream, afterSeq, beforeSeq);
      });
    });
  }

  /**
   * Project ids that hold at least one record (event streams alone do not count), in code-point order: one index
   * probe per project (`PROJECTS`), not a scan of every record. Never writes.
   */
  async listProjects(): Promise<string[]> {
    return this.#run("listProjects", async () => {
      const result = await this.#pool.query<{ project_id: string }>({
        name: "acp-list-projects",
        text: `${PROJECTS} SELECT project_id FROM projects WHERE project_id IS NOT NULL ORDER BY project_id`,
      });
      return result.rows.map((row) => row.project_id);
    });
  }

  /**
   * The records of `kind` in every project, by project then id, in one statement: the projects by one index probe
   * each, then each project's index range of `kind`; with `containing`, only those whose stored text contains it
   * (`strpos`, literal). Values are parsed as `get` parses them. Never writes.
   */
  async listAcrossProjects(kind: string, options: { containing?: string } = {}): Promise<ProjectRecord[]> {
    return this.#run("list", async () => {
      checkNameText(kind, "kind");
      const containing = options.containing;
      if (containing !== undefined && typeof containing !== "string")
        throw new AuthorityFailure("containing must be a string.");
      const filter = containing === undefined ? "" : "AND strpos(r.value, $2) > 0";
      const result = await this.#pool.query<RecordRow & { project_id: string; id: string }>({
        name: containing === undefined ? "acp-list-across" : "acp-list-across-containing",
        text: `${PROJECTS} SELECT r.project_id, r.id, r.value, r.revision, r.updated_at
               FROM projects p JOIN records r ON r.project_id = p.project_id AND r.kind = $1 ${filter}
               ORDER BY r.project_id, r.id`,
        values: containing === undefined ? [kind] : [kind, containing],
      });
      return result.rows.map((row) => ({
        projectId: row.project_id,
        id: row.id,
        value: parseStored(row.value),
        revision: Number(row.revision),
        updatedAt: row.updated_at,
      }));
    });
  }

  /** `product` records in creation order, one statement on the creation index (postgres-creation.ts). Never writes. */
  async listByCreation(kind: string, options: CreationPageOptions): Promise<CreationRecord[]> {
    return this.#run("list", () => readCreationPage(this.#pool, kind, options));
  }

  /** Stored texts of `kind` in one statement, unordered (postgres-creation.ts `readTexts`). Never writes. */
  async listTexts(kind: string, options: TextListOptions): Promise<string[]> {
    return this.#run("list", () => readTexts(this.#pool, kind, options));
  }
  /** The same texts in creation order, in batches, one snapshot (postgres-creation.ts). Never writes. */
  async listTextsByCreation(kind: string, options: TextListOptions, onBatch: CreationTextsSink): Promise<void> {
    return this.#run("list", () => readTextsByCreation(this.#pool, kind, options, onBatch));
  }

  /**
   * Calls `listener` for every record or stream change committed by ANOTHER authority instance on this database and
   * schema (another server, or another connection of this process), as soon as PostgreSQL delivers the `NOTIFY`
   * (milliseconds). The first subscription opens a dedicated `LISTEN` connection; it reconnects by itself after an
   * error (changes made while it was down are not replayed: callers keep their periodic checks). A change whose key
   * was too long for a notification is delivered without its `id`/`stream`. Returns the unsubscribe function.
   * Does NOT deliver this instance's own writes. Listeners must not throw.
   */
  watch(listener: (change: AuthorityChange) => void): () => void {
    if (this.#closed) throw new AuthorityFailure("The PostgreSQL authority is closed (watch).");
    return this.#feed.watch(listener);
  }

  /** Resolves once the change feed is listening (for tests that must not miss the first change). */
  async feedReady(): Promise<void> {
    if (!this.#closed) await this.#feed.ready();
  }

  /**
   * Closes the pool and the change feed, once every write asked for before it (put, delete, appendEvents,
   * deleteStream, pruneEvents) has settled: such a write is sent and gets its own outcome, never a closed pool's
   * failure. Idempotent. Every later call fails with `AuthorityFailure`. Does NOT delete data.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // A write may still be packing its row or its conflict may still read the revision: it reaches the group commit
    // queues (or the pool) only after this call began, so waiting for the queues alone is not enough.
    await Promise.allSettled([...this.#writes]);
    await this.#batch.drained();
    await this.#feed.close();
    try {
      await this.#pool.end();
    } catch (error) {
      throw new AuthorityFailure(`Closing the PostgreSQL pool failed: ${messageOf(error)}`, { cause: error });
    }
  }

  // -------------------------------------------------------------------------------------------------------------

  /**
   * Runs one operation, turning every error other than a conflict into `AuthorityFailure`; a write is kept in
   * `#writes` until it settles (`close` waits for it).
   */
  async #run<T>(op: string, work: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new AuthorityFailure(`The PostgreSQL authority is closed (${op}).`);
    if (!WRITES.has(op)) return this.#mapped(op, work);
    const running = this.#mapped(op, work);
    this.#writes.add(running);
    try {
      return await running;
    } finally {
      this.#writes.delete(running);
    }
  }

  async #mapped<T>(op: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof AuthorityConflict || error instanceof AuthorityFailure) throw error;
      // A unique violation can only come from a racing writer (the head row should have stopped it first).
      if ((error as { code?: unknown }).code === "23505") {
        throw new AuthorityConflict(`PostgreSQL ${op} lost a race with another writer.`);
      }
      throw new AuthorityFailure(`PostgreSQL ${op} failed: ${messageOf(error)}`, { cause: error });
    }
  }

  /** Runs `work` inside BEGIN … COMMIT on one pooled connection; rolls back on any error. */
  #transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.#pool, "BEGIN", work);
  }

  async #lastSeq(db: pg.Pool | pg.PoolClient, projectId: string, stream: string): Promise<number> {
    const result = await db.query<{ last_seq: string }>(
      "SELECT last_seq FROM streams WHERE project_id = $1 AND stream = $2",
      [projectId, stream],
    );
    return Number(result.rows[0]?.last_seq ?? 0);
  }
}
