/**
 * PostgresAuthority: the shared `RunStateAuthority` on PostgreSQL (DESIGN.md, Persistence backends: `postgres`), for
 * hosts that run many server processes on many machines against one store (issue 14).
 *
 * Owns the database schema (its own PostgreSQL schema, `acp_orchestrator` by default: `schema_version`, `records`,
 * `streams`, `events`), its versioned migrations, the connection pool, statement timeouts, and the change feed
 * (`LISTEN/NOTIFY`) that tells a server at once when another server wrote a record or a stream it cares about.
 * Every compare-and-swap is ONE conditional statement (`INSERT … ON CONFLICT DO NOTHING`, `UPDATE … WHERE revision =
 * $expected`), and an append moves the stream's head row by a conditional update in the same transaction that
 * inserts the events, so two servers can never both win (guarantee 6); the primary keys enforce the same thing a
 * second time. It must never write on a read path (guarantee 3), never coerce a stored value it cannot parse (the raw
 * text goes back to the caller, whose schema check fails closed: guarantee 4), and never let a database error escape
 * as anything but `AuthorityConflict` / `AuthorityFailure` (guarantee 2).
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import {
  AuthorityConflict,
  AuthorityFailure,
  type AuthorityChange,
  type Clock,
  type RecordInfo,
  type RunStateAuthority,
  type StoredEvent,
  type StoredRecord,
} from "../../core/ports.js";
import {
  checkKey,
  checkName,
  checkPrefix,
  checkPruneBound,
  checkRevision,
  checkRevisionMatches,
  checkSeq,
} from "./authority-checks.js";
import { redact } from "./postgres-url.js";

/** One schema migration, applied at most once, in version order, under an advisory lock. Never edit a released one. */
interface Migration {
  version: number;
  sql: string;
}

/**
 * The schema, one entry per version. Ids use the `C` collation so that `ORDER BY id` is code-point order (UTF-8
 * byte order), as PROTOCOL.md section 7 requires. Values and events are stored as text, not `jsonb`: `jsonb` refuses
 * `\u0000` and lone surrogates that JSON.stringify writes, and rewrites key order and number spelling.
 */
const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE records (
        project_id TEXT COLLATE "C" NOT NULL,
        kind       TEXT COLLATE "C" NOT NULL,
        id         TEXT COLLATE "C" NOT NULL,
        value      TEXT NOT NULL,
        revision   BIGINT NOT NULL CHECK (revision >= 1),
        updated_at TEXT NOT NULL,
        PRIMARY KEY (project_id, kind, id)
      );
      CREATE TABLE streams (
        project_id TEXT COLLATE "C" NOT NULL,
        stream     TEXT COLLATE "C" NOT NULL,
        last_seq   BIGINT NOT NULL CHECK (last_seq >= 1),
        PRIMARY KEY (project_id, stream)
      );
      CREATE TABLE events (
        project_id TEXT COLLATE "C" NOT NULL,
        stream     TEXT COLLATE "C" NOT NULL,
        seq        BIGINT NOT NULL CHECK (seq >= 1),
        event      TEXT NOT NULL,
        PRIMARY KEY (project_id, stream, seq)
      );
    `,
  },
];

/** The schema version this code writes and understands. */
export const POSTGRES_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;

/** The default PostgreSQL schema (namespace) that holds the tables. */
export const DEFAULT_POSTGRES_SCHEMA = "acp_orchestrator";

/** Arbitrary constant for `pg_advisory_xact_lock`: serialises migrations of every server on one database. */
const MIGRATION_LOCK = 0x0ac9_0001;

/**
 * Run on every new pooled connection before its first query: large values (a 10,000-task plan or snapshot is
 * megabytes of JSON) are compressed with lz4 instead of the default pglz, which costs about three times as much CPU per
 * write (issue 14: 27 → 9 ms for a 1.6 MB value on this machine). A session setting, not a schema change, so stores
 * stay readable by every version and no DDL lock is taken; where the server has no lz4 (PostgreSQL 12 and 13, or a
 * build without it) the error is swallowed inside the block and pglz stays.
 */
const PREFER_LZ4 = `DO $$ BEGIN EXECUTE 'SET default_toast_compression = lz4'; EXCEPTION WHEN OTHERS THEN NULL; END $$`;

/** `NOTIFY` channel of the change feed. */
const CHANNEL = "acp_orchestrator_changes";

/** PostgreSQL limits a NOTIFY payload to 8000 bytes; changes with longer keys are announced without their id. */
const MAX_PAYLOAD_BYTES = 7_900;

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
   */
  announce?: (change: { kind?: string; stream?: string }) => boolean;
  /** Where connection problems of the change feed are reported (it reconnects by itself). Default: ignored. */
  onFeedError?: (error: Error) => void;
}

interface RecordRow {
  value: string;
  revision: string;
  updated_at: string;
}

/** The wire payload of one change on the channel (short keys: it travels with every write). */
interface ChangePayload {
  /** Writer: the `writerId` of the authority that made the change. */
  w: string;
  /** Schema, so two schemas on one database do not hear each other. */
  n: string;
  p: string;
  k?: string;
  i?: string;
  s?: string;
}

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
  readonly #options: PostgresAuthorityOptions;
  readonly #connectionString: string;
  readonly #listeners = new Set<(change: AuthorityChange) => void>();
  #feed: pg.Client | null = null;
  #feedStarting: Promise<void> | null = null;
  #feedRetry: NodeJS.Timeout | null = null;
  #closed = false;

  private constructor(connectionString: string, pool: pg.Pool, schema: string, options: PostgresAuthorityOptions) {
    this.#connectionString = connectionString;
    this.#pool = pool;
    this.#schema = schema;
    this.#options = options;
    const clock = options.clock;
    this.#now = clock ? () => clock.now() : Date.now;
  }

  /**
   * Connects to the database at `url` (`postgres://` or `postgresql://`; a `schema` query parameter overrides
   * `options.schema`), checks that it is PostgreSQL 12 or later with UTF8 encoding, creates the schema when missing
   * and applies pending migrations under an advisory lock (so servers starting together migrate once). Throws
   * `AuthorityFailure` with a plain sentence when the URL is invalid, the server cannot be reached, the database is
   * not UTF8, or its schema version is newer than this code understands (upgrade acp-orchestrator); the pool is
   * closed again in that case.
   */
  static async open(url: string, options: PostgresAuthorityOptions = {}): Promise<PostgresAuthority> {
    const { connectionString, schema } = parseUrl(url, options.schema);
    const statementTimeoutMs = positive(options.statementTimeoutMs ?? 15_000, "statementTimeoutMs");
    const pool = new pg.Pool({
      connectionString,
      max: positive(options.maxConnections ?? 10, "maxConnections"),
      connectionTimeoutMillis: positive(options.connectionTimeoutMs ?? 10_000, "connectionTimeoutMs"),
      statement_timeout: statementTimeoutMs,
      idle_in_transaction_session_timeout: statementTimeoutMs * 2,
      application_name: "acp-orchestrator",
      options: `-c search_path=${quoteIdent(schema)}`,
    });
    // An idle client that loses its connection must not crash the process: the next query fails instead.
    pool.on("error", () => undefined);
    pool.on("connect", (client) => {
      client.query(PREFER_LZ4).catch(() => undefined);
    });
    const authority = new PostgresAuthority(connectionString, pool, schema, options);
    try {
      await authority.#migrate();
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
      const notify = this.#notifySql({ p: projectId, k: kind, i: id }, 6);
      const result =
        expectedRevision === null
          ? await this.#pool.query<{ revision: string }>({
              name: `acp-put-new${notify.name}`,
              text: `WITH written AS (
                 INSERT INTO records (project_id, kind, id, value, revision, updated_at)
                 VALUES ($1, $2, $3, $4, 1, $5) ON CONFLICT DO NOTHING RETURNING revision)
               SELECT revision, ${notify.sql} FROM written`,
              values: [projectId, kind, id, json, updatedAt, ...notify.params],
            })
          : await this.#pool.query<{ revision: string }>({
              name: `acp-put-next${notify.name}`,
              text: `WITH written AS (
                 UPDATE records SET value = $4, revision = revision + 1, updated_at = $5
                 WHERE project_id = $1 AND kind = $2 AND id = $3 AND revision = $7 RETURNING revision)
               SELECT revision, ${notify.sql} FROM written`,
              values: [projectId, kind, id, json, updatedAt, ...notify.params, expectedRevision],
            });
      const row = result.rows[0];
      if (row) return { revision: Number(row.revision) };
      throw await this.#conflict(projectId, kind, id, expectedRevision);
    });
  }

  /**
   * Deletes one record in one statement. Returns `false` when it does not exist (whatever `expectedRevision` says),
   * `true` when it was removed. With `expectedRevision`, deletes only the row at that revision and throws
   * `AuthorityConflict` (with the current revision) when it exists at another one. Event streams are never touched.
   */
  async delete(projectId: string, kind: string, id: string, expectedRevision?: number): Promise<boolean> {
    return this.#run("delete", async () => {
      checkKeyText(projectId, kind, id);
      if (expectedRevision !== undefined) checkRevision(expectedRevision);
      const notify = this.#notifySql({ p: projectId, k: kind, i: id }, 4);
      const result = await this.#pool.query(
        `WITH gone AS (
           DELETE FROM records WHERE project_id = $1 AND kind = $2 AND id = $3
           ${expectedRevision === undefined ? "" : "AND revision = $5"} RETURNING 1)
         SELECT ${notify.sql} FROM gone`,
        [projectId, kind, id, ...notify.params, ...(expectedRevision === undefined ? [] : [expectedRevision])],
      );
      if ((result.rowCount ?? 0) > 0) return true;
      if (expectedRevision === undefined) return false;
      const current = await this.#revisionOf(projectId, kind, id);
      if (current === undefined) return false;
      throw await this.#conflict(projectId, kind, id, expectedRevision, current);
    });
  }

  /**
   * Lists the records of one kind in one project whose id starts with `prefix`, ordered by id (code-point order).
   * The prefix is matched literally through an index range (`id >= prefix AND id < successor(prefix)`), so `%` and
   * `_` are ordinary characters. Never writes.
   */
  async list(projectId: string, kind: string, prefix = ""): Promise<RecordInfo[]> {
    return this.#run("list", async () => {
      checkNameText(projectId, "projectId");
      checkNameText(kind, "kind");
      checkPrefix(prefix);
      if (prefix.includes("\u0000")) return [];
      const upper = successor(prefix);
      const result = await this.#pool.query<{ id: string; revision: string; updated_at: string }>(
        `SELECT id, revision, updated_at FROM records
         WHERE project_id = $1 AND kind = $2 AND id >= $3 ${upper === null ? "" : "AND id < $4"} ORDER BY id`,
        upper === null ? [projectId, kind, prefix] : [projectId, kind, prefix, upper],
      );
      return result.rows.map((row) => ({ id: row.id, revision: Number(row.revision), updatedAt: row.updated_at }));
    });
  }

  /**
   * Appends events when the stream's last sequence number equals `expectedSeq` (0 for a new stream), in ONE
   * statement (one round trip, one transaction): the stream's head row is created (`ON CONFLICT DO NOTHING`) or moved
   * by a conditional update, and the events are inserted with `expectedSeq + 1 …` only when it was. Resolves with the new last sequence number once committed.
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
      // One statement, one round trip, one implicit transaction: the head row moves (or is created) only at the
      // expected sequence number, the events are inserted only when it did, and the notification is sent only then.
      const notify = this.#notifySql({ p: projectId, s: stream }, 6);
      const head =
        expectedSeq === 0
          ? "INSERT INTO streams (project_id, stream, last_seq) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1"
          : "UPDATE streams SET last_seq = $3 WHERE project_id = $1 AND stream = $2 AND last_seq = $4 RETURNING 1";
      const result = await this.#pool.query({
        name: `${expectedSeq === 0 ? "acp-append-new" : "acp-append-next"}${notify.name}`,
        text: `WITH head AS (${head}),
                 inserted AS (
                   INSERT INTO events (project_id, stream, seq, event)
                   SELECT $1, $2, $4::bigint + ordinality, event
                   FROM unnest($5::text[]) WITH ORDINALITY AS e(event, ordinality)
                   WHERE EXISTS (SELECT 1 FROM head))
               SELECT ${notify.sql} FROM head`,
        values: [projectId, stream, lastSeq, expectedSeq, texts, ...notify.params],
      });
      if ((result.rowCount ?? 0) !== 1) throw mismatch();
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
      const result = await this.#pool.query<{ seq: string; event: string }>({
        name: limit === undefined ? "acp-read-events" : "acp-read-events-limit",
        text: `SELECT seq, event FROM events WHERE project_id = $1 AND stream = $2 AND seq > $3 ORDER BY seq
         ${limit === undefined ? "" : "LIMIT $4"}`,
        values: limit === undefined ? [projectId, stream, afterSeq] : [projectId, stream, afterSeq, limit],
      });
      return result.rows.map((row) => ({ seq: Number(row.seq), event: parseStored(row.event) }));
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
          const notify = this.#notifySql({ p: projectId, s: stream }, 1);
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
        const deleted = await client.query(
          "DELETE FROM events WHERE project_id = $1 AND stream = $2 AND seq > $3 AND seq < $4",
          [projectId, stream, afterSeq, beforeSeq],
        );
        return deleted.rowCount ?? 0;
      });
    });
  }

  /** Project ids that hold at least one record (event streams alone do not count), in code-point order. Never writes. */
  async listProjects(): Promise<string[]> {
    return this.#run("listProjects", async () => {
      const result = await this.#pool.query<{ project_id: string }>(
        "SELECT DISTINCT project_id FROM records ORDER BY project_id",
      );
      return result.rows.map((row) => row.project_id);
    });
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
    this.#listeners.add(listener);
    this.#ensureFeed();
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** Resolves once the change feed is listening (for tests that must not miss the first change). */
  async feedReady(): Promise<void> {
    this.#ensureFeed();
    while (this.#feed === null && !this.#closed) {
      await (this.#feedStarting ?? new Promise((resolve) => setTimeout(resolve, 50)));
    }
  }

  /**
   * Closes the pool and the change feed. Idempotent. Every later call fails with `AuthorityFailure`. Does NOT
   * delete data.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#listeners.clear();
    if (this.#feedRetry) clearTimeout(this.#feedRetry);
    const feed = this.#feed;
    this.#feed = null;
    await feed?.end().catch(() => undefined);
    try {
      await this.#pool.end();
    } catch (error) {
      throw new AuthorityFailure(`Closing the PostgreSQL pool failed: ${messageOf(error)}`, { cause: error });
    }
  }

  // -------------------------------------------------------------------------------------------------------------

  /** Runs one operation, turning every error other than a conflict into `AuthorityFailure`. */
  async #run<T>(op: string, work: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new AuthorityFailure(`The PostgreSQL authority is closed (${op}).`);
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
  async #transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((rollbackError: unknown) => {
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      });
      throw error;
    } finally {
      client.release(broken);
    }
  }

  async #lastSeq(db: pg.Pool | pg.PoolClient, projectId: string, stream: string): Promise<number> {
    const result = await db.query<{ last_seq: string }>(
      "SELECT last_seq FROM streams WHERE project_id = $1 AND stream = $2",
      [projectId, stream],
    );
    return Number(result.rows[0]?.last_seq ?? 0);
  }

  async #revisionOf(projectId: string, kind: string, id: string): Promise<number | undefined> {
    const result = await this.#pool.query<{ revision: string }>(
      "SELECT revision FROM records WHERE project_id = $1 AND kind = $2 AND id = $3",
      [projectId, kind, id],
    );
    const row = result.rows[0];
    return row ? Number(row.revision) : undefined;
  }

  /** The conflict a failed CAS reports, with the revision it found (read after the refusal, for the message only). */
  async #conflict(
    projectId: string,
    kind: string,
    id: string,
    expected: number | null,
    known?: number,
  ): Promise<AuthorityConflict> {
    const current = known ?? (await this.#revisionOf(projectId, kind, id));
    try {
      checkRevisionMatches(projectId, kind, id, current, expected);
    } catch (error) {
      if (error instanceof AuthorityConflict) return error;
      throw error;
    }
    // The record changed back between the refusal and this read: still a conflict (another writer was first).
    return new AuthorityConflict(`The ${kind} "${id}" of project "${projectId}" was changed by another writer.`);
  }

  /**
   * A `pg_notify` call announcing one change (delivered only if the surrounding transaction commits), with its
   * payload as parameter number `index` of the statement, and the suffix of a prepared statement's name; a change
   * that `options.announce` leaves out gets a column that sends nothing (suffix `-quiet`).
   */
  #notifySql(change: Omit<ChangePayload, "w" | "n">, index: number): { sql: string; params: string[]; name: string } {
    const announce = this.#options.announce;
    if (
      announce &&
      !announce({
        ...(change.k !== undefined ? { kind: change.k } : {}),
        ...(change.s !== undefined ? { stream: change.s } : {}),
      })
    ) {
      // The parameter stays (typed, unused) so the statement keeps its shape; a prepared one gets its own name.
      return { sql: `$${index}::text AS unannounced`, params: [""], name: "-quiet" };
    }
    let text = JSON.stringify({ w: this.writerId, n: this.#schema, ...change } satisfies ChangePayload);
    if (Buffer.byteLength(text) > MAX_PAYLOAD_BYTES) {
      const short: ChangePayload = { w: this.writerId, n: this.#schema, p: change.p.slice(0, 1000) };
      if (change.k !== undefined) short.k = change.k.slice(0, 1000);
      text = JSON.stringify(short);
    }
    return { sql: `pg_notify('${CHANNEL}', $${index}::text)`, params: [text], name: "" };
  }

  /** Opens the LISTEN connection when someone listens and none is open; retries after errors. */
  #ensureFeed(): void {
    if (this.#closed || this.#feed !== null || this.#feedStarting !== null || this.#listeners.size === 0) return;
    this.#feedStarting = this.#startFeed().finally(() => {
      this.#feedStarting = null;
    });
  }

  async #startFeed(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.#connectionString,
      connectionTimeoutMillis: this.#options.connectionTimeoutMs ?? 10_000,
      application_name: "acp-orchestrator-feed",
      keepAlive: true,
    });
    const retry = (error: Error): void => {
      if (this.#feed === client) this.#feed = null;
      client.end().catch(() => undefined);
      if (this.#closed) return;
      this.#options.onFeedError?.(error);
      if (this.#feedRetry === null) {
        this.#feedRetry = setTimeout(() => {
          this.#feedRetry = null;
          this.#ensureFeed();
        }, 1_000);
        this.#feedRetry.unref();
      }
    };
    client.on("error", retry);
    client.on("end", () => {
      if (this.#feed === client) retry(new Error("the change feed connection ended"));
    });
    client.on("notification", (message) => this.#deliver(message.payload));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      if (this.#closed) {
        await client.end();
        return;
      }
      this.#feed = client;
    } catch (error) {
      retry(error instanceof Error ? error : new Error(String(error)));
    }
  }

  #deliver(text: string | undefined): void {
    if (text === undefined) return;
    let payload: ChangePayload;
    try {
      payload = JSON.parse(text) as ChangePayload;
    } catch {
      return;
    }
    if (payload.w === this.writerId || payload.n !== this.#schema || typeof payload.p !== "string") return;
    const change: AuthorityChange =
      payload.s !== undefined
        ? { projectId: payload.p, stream: payload.s }
        : {
            projectId: payload.p,
            ...(payload.k !== undefined ? { kind: payload.k } : {}),
            ...(payload.i !== undefined ? { id: payload.i } : {}),
          };
    for (const listener of this.#listeners) {
      try {
        listener(change);
      } catch {
        // listeners must not throw; one that does cannot stop the others
      }
    }
  }

  /**
   * Creates the schema when missing and applies pending migrations, all in one transaction under an advisory lock.
   * A database already up to date is not written. Refuses a database whose schema version is newer.
   */
  async #migrate(): Promise<void> {
    const client = await this.#pool.connect();
    try {
      const info = await client.query<{ encoding: string; version: string }>(
        "SELECT current_setting('server_encoding') AS encoding, current_setting('server_version_num') AS version",
      );
      const { encoding, version } = info.rows[0] ?? { encoding: "", version: "0" };
      if (encoding !== "UTF8") {
        throw new AuthorityFailure(
          `The PostgreSQL database uses the ${encoding} encoding; acp-orchestrator needs a UTF8 database.`,
        );
      }
      if (Number(version) < 120_000) {
        throw new AuthorityFailure(`PostgreSQL ${version} is too old; acp-orchestrator needs PostgreSQL 12 or later.`);
      }
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(this.#schema)}`);
      await client.query(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
      );
      const seen = await client.query<{ v: number | null }>("SELECT max(version) AS v FROM schema_version");
      const current = Number(seen.rows[0]?.v ?? 0);
      if (current > POSTGRES_SCHEMA_VERSION) {
        throw new AuthorityFailure(
          `The PostgreSQL state store (schema ${this.#schema}) has schema version ${current}, newer than this ` +
            `acp-orchestrator understands (${POSTGRES_SCHEMA_VERSION}); upgrade acp-orchestrator.`,
        );
      }
      for (const migration of MIGRATIONS) {
        if (migration.version <= current) continue;
        await client.query(migration.sql);
        await client.query("INSERT INTO schema_version (version) VALUES ($1)", [migration.version]);
      }
      await client.query("COMMIT");
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }
}

/** Splits our own `schema` query parameter off the URL; everything else goes to node-postgres as is. */
function parseUrl(url: string, schemaOption: string | undefined): { connectionString: string; schema: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new AuthorityFailure("The PostgreSQL state URL is not a valid URL (expected postgres://user@host/db).");
  }
  if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
    throw new AuthorityFailure(`The PostgreSQL state URL must start with postgres://, got ${parsed.protocol}//.`);
  }
  const schema = parsed.searchParams.get("schema") ?? schemaOption ?? DEFAULT_POSTGRES_SCHEMA;
  parsed.searchParams.delete("schema");
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new AuthorityFailure(
      `The PostgreSQL schema name "${schema}" is not allowed: use lower-case letters, digits and _ (at most 63).`,
    );
  }
  return { connectionString: parsed.toString(), schema };
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function positive(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new AuthorityFailure(`${what} must be a positive integer, got ${String(value)}.`);
  }
  return value;
}

/**
 * The smallest string above every string that starts with `prefix` in code-point order, or `null` when there is
 * none (the prefix is empty or made only of U+10FFFF). Surrogate code points are skipped: they never occur in ids.
 */
function successor(prefix: string): string | null {
  const points = [...prefix].map((c) => c.codePointAt(0) ?? 0);
  while (points.length > 0) {
    const last = points.pop() ?? 0;
    if (last < 0x10ffff) {
      const next = last === 0xd7ff ? 0xe000 : last + 1;
      return String.fromCodePoint(...points, next);
    }
  }
  return null;
}

/** PostgreSQL text cannot hold U+0000: such ids are refused (as invalid arguments) instead of failing in the driver. */
function checkNameText(value: string, what: string): void {
  checkName(value, what);
  if (value.includes("\u0000")) throw new AuthorityFailure(`${what} must not contain the character U+0000.`);
}

function checkKeyText(projectId: string, kind: string, id: string): void {
  checkKey(projectId, kind, id);
  checkNameText(projectId, "projectId");
  checkNameText(kind, "kind");
  checkNameText(id, "id");
}

/** Parses stored JSON; text that does not parse is returned as is, for the caller's validation to reject. */
function parseStored(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function toJson(value: unknown, what: string): string {
  if (typeof value !== "object" || value === null)
    throw new AuthorityFailure(`${what} must be a JSON object or array.`);
  let json: unknown;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new AuthorityFailure(`${what} cannot be serialised to JSON: ${messageOf(error)}`, { cause: error });
  }
  if (typeof json !== "string") throw new AuthorityFailure(`${what} cannot be serialised to JSON.`);
  return json;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
