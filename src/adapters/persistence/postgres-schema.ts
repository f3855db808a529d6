/**
 * The PostgreSQL backend's schema: its versioned migrations, the one session setting every pooled connection gets,
 * and the start-up check that applies pending migrations (postgres-authority.ts opens the store through it).
 *
 * Owns the table definitions and the migration lock. It never changes a released migration and never writes to a
 * database whose schema is already up to date.
 */
import type pg from "pg";
import { AuthorityFailure } from "../../core/ports.js";
import { quoteIdent } from "./postgres-url.js";

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
  {
    // Issue 34 (WAL bytes per task): one event row per append (postgres-events.ts). Version 1 rows are the `n` = 1
    // form as they stand: adding a column with a constant default and dropping NOT NULL rewrite nothing, and the
    // check is NOT VALID so a large store is not scanned under the lock (its old rows satisfy it anyway).
    version: 2,
    sql: `
      ALTER TABLE events ALTER COLUMN event DROP NOT NULL;
      ALTER TABLE events ADD COLUMN n INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE events ADD COLUMN events TEXT[];
      ALTER TABLE events ADD CONSTRAINT events_one_form CHECK (
        CASE WHEN events IS NULL THEN event IS NOT NULL AND n = 1
             ELSE event IS NULL AND n >= 2 AND cardinality(events) = n AND array_position(events, NULL) IS NULL END
      ) NOT VALID;
    `,
  },
  {
    // Issue 32 (`product.list` pages at 100,000 stored products): a product header's creation key, the text of its
    // value's top-level "createdAt" as JSON.stringify writes it (a regular expression: no JSON parse that a stored
    // text could make fail, NULL for every other kind), stored and indexed with the id, whole store and per project,
    // for product headers only. A stored generated column keeps updates HOT: the index reads no column a header
    // update changes unless the key itself changes, which it never does (an index on \`value\` would disable HOT for
    // every record update, leases included). Adding it rewrites the table once, under the migration lock.
    version: 3,
    sql: `
      ALTER TABLE records ADD COLUMN created_key TEXT COLLATE "C" GENERATED ALWAYS AS (
        CASE WHEN kind = 'product' THEN substring(value from '"createdAt":"([^"\\\\]*)"') END) STORED;
      CREATE INDEX records_by_creation ON records (kind, created_key, id) WHERE created_key IS NOT NULL;
      CREATE INDEX records_project_by_creation ON records (project_id, kind, created_key, id)
        WHERE created_key IS NOT NULL;
    `,
  },
  {
    // Issue 34 (WAL bytes per task): event rows packed by the server (postgres-events.ts, postgres-packed.ts). The
    // text[] column is renamed so that a server of version 3 or older still running on the migrated store fails its
    // event reads and appends with a database error (a persistence failure: its product pauses) instead of reading a
    // packed row as no events; starting it again is refused (schema newer than it understands). Rows written before
    // keep their form and stay readable. Renaming, adding a nullable column and a NOT VALID check rewrite nothing.
    // The packed bytes are compressed already: EXTERNAL storage keeps PostgreSQL from compressing them again.
    version: 4,
    sql: `
      ALTER TABLE events RENAME COLUMN events TO batch;
      ALTER TABLE events ADD COLUMN packed BYTEA;
      ALTER TABLE events ALTER COLUMN packed SET STORAGE EXTERNAL;
      ALTER TABLE events DROP CONSTRAINT events_one_form;
      ALTER TABLE events ADD CONSTRAINT events_one_form_4 CHECK (
        CASE WHEN packed IS NOT NULL THEN event IS NULL AND batch IS NULL AND n >= 1
             WHEN batch IS NULL THEN event IS NOT NULL AND n = 1
             ELSE event IS NULL AND n >= 2 AND cardinality(batch) = n AND array_position(batch, NULL) IS NULL END
      ) NOT VALID;
    `,
  },
  {
    // Issue 32 (`product.list` of 100,000 stored products, read in creation order through records_by_creation,
    // postgres-creation.ts): the product headers that index leaves out (no creation key: a header not in the form the
    // server writes, or not a header at all) are found by this partial index, empty in a store the server wrote, so
    // the list need not scan the table for them. Its condition reads columns a header update never changes (the kind
    // and the creation key), so updates stay HOT.
    version: 5,
    sql: `
      CREATE INDEX records_without_creation ON records (project_id, id) WHERE kind = 'product' AND created_key IS NULL;
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
 * Run on every new pooled connection before its first query, and awaited (the pool's `onConnect` hook: a query sent
 * from the `connect` event would overlap the first real one on the same client, issue 34): large values (a 10,000-task plan or snapshot is
 * megabytes of JSON) are compressed with lz4 instead of the default pglz, which costs about three times as much CPU per
 * write (issue 14: 27 → 9 ms for a 1.6 MB value on this machine). A session setting, not a schema change, so stores
 * stay readable by every version and no DDL lock is taken; where the server has no lz4 (PostgreSQL 12 and 13, or a
 * build without it) the error is swallowed inside the block and pglz stays.
 */
export const PREFER_LZ4 = `DO $$ BEGIN EXECUTE 'SET default_toast_compression = lz4'; EXCEPTION WHEN OTHERS THEN NULL; END $$`;

/**
 * Checks the server on `client` (UTF8 encoding, PostgreSQL 12 or later), then creates `schema` when missing and
 * applies pending migrations, all in one transaction under an advisory lock, so servers starting together migrate
 * once. A database already up to date is not written. Throws `AuthorityFailure` with a plain sentence for a wrong
 * encoding, a server that is too old, or a schema version newer than this code understands; any other database
 * error is thrown as it came. Does NOT release `client`.
 */
export async function migrate(client: pg.ClientBase, schema: string): Promise<void> {
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
  try {
    await client.query("BEGIN");
    // Servers starting together wait here for one of them to migrate: bounded by the statement timeout alone, not the
    // pool's shorter lock_timeout (postgres-authority.ts), which is for rows a write finds locked.
    await client.query("SET LOCAL lock_timeout = 0");
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
    await client.query(
      "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    );
    const seen = await client.query<{ v: number | null }>("SELECT max(version) AS v FROM schema_version");
    const current = Number(seen.rows[0]?.v ?? 0);
    if (current > POSTGRES_SCHEMA_VERSION) {
      throw new AuthorityFailure(
        `The PostgreSQL state store (schema ${schema}) has schema version ${current}, newer than this ` +
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
  }
}
