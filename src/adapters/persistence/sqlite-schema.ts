/**
 * The schema of the SQLite run-state authority's file (sqlite-authority.ts): its tables (`meta` with the schema
 * version, `records`, `events`), the migrations that bring a file to `SQLITE_SCHEMA_VERSION` (each applied at most
 * once, in order, inside one immediate transaction), and the prepared statements a connection runs against it.
 * Reading the version never writes; migrating refuses a file newer than this code (`AuthorityFailure`).
 */
import type Database from "better-sqlite3";
import { AuthorityFailure } from "../../core/ports.js";

/**
 * A product header's creation key as SQL over a `records` row (issue 32): its value's text `createdAt`, NULL for every
 * other kind and for a value that is not JSON. Schema version 2 stores it as the virtual column `created_key`; a
 * read-only connection to a version-1 file computes it in the query instead (`readCreationPage`).
 */
// Its text (whitespace included) is the one migration 2 was released with: sqlite_master keeps it as written.
export const CREATED_KEY_SQL = `
        CASE WHEN kind = 'product' AND json_valid(value) AND json_type(value, '$.createdAt') = 'text'
             THEN json_extract(value, '$.createdAt') END`;

/** The oldest schema version a read-only connection reads (the operator's commands; sqlite-authority.ts). */
export const SQLITE_READABLE_FROM_VERSION = 1;

/** One schema migration, applied at most once, in version order, inside one immediate transaction. */
interface Migration {
  version: number;
  sql: string;
}

/**
 * The schema, one entry per version. Never edit a released entry: add a new version. Tables are `STRICT`, so a
 * revision or sequence number read back is always an integer.
 */
const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE records (
        project_id TEXT NOT NULL,
        kind       TEXT NOT NULL,
        id         TEXT NOT NULL,
        value      TEXT NOT NULL,
        revision   INTEGER NOT NULL CHECK (revision >= 1),
        updated_at TEXT NOT NULL,
        PRIMARY KEY (project_id, kind, id)
      ) STRICT;
      CREATE TABLE events (
        project_id TEXT NOT NULL,
        stream     TEXT NOT NULL,
        seq        INTEGER NOT NULL CHECK (seq >= 1),
        event      TEXT NOT NULL,
        PRIMARY KEY (project_id, stream, seq)
      ) STRICT;
    `,
  },
  {
    // Issue 32 (`product.list` pages at 100,000 stored products): a product header's creation key, its value's text
    // `createdAt` (NULL for every other kind and for a value that is not JSON), as a virtual column (nothing stored,
    // no table rewrite) indexed with the id, whole-store and per project, for product headers only.
    version: 2,
    sql: `
      ALTER TABLE records ADD COLUMN created_key TEXT GENERATED ALWAYS AS (${CREATED_KEY_SQL}) VIRTUAL;
      CREATE INDEX records_by_creation ON records (kind, created_key, id) WHERE created_key IS NOT NULL;
      CREATE INDEX records_project_by_creation ON records (project_id, kind, created_key, id)
        WHERE created_key IS NOT NULL;
    `,
  },
];

/** The schema version this code writes and understands. */
export const SQLITE_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;

export interface RecordRow {
  value: string;
  revision: number;
  updated_at: string;
}

export interface RecordInfoRow {
  id: string;
  revision: number;
  updated_at: string;
}

export interface EventRow {
  seq: number;
  event: string;
}

/**
 * The prepared statements, created once per connection so that `put` and `appendEvents` cost one transaction each
 * and nothing else.
 */
export interface Statements {
  getRecord: Database.Statement<[string, string, string], RecordRow>;
  getRevision: Database.Statement<[string, string, string], number>;
  insertRecord: Database.Statement<[string, string, string, string, number, string]>;
  updateRecord: Database.Statement<[string, number, string, string, string, string]>;
  deleteRecord: Database.Statement<[string, string, string]>;
  listRecords: Database.Statement<[string, string, string, string], RecordInfoRow>;
  listProjects: Database.Statement<[], string>;
  /** Records of one kind in every project whose value contains a text (`''`: every one), by project then id. */
  listAcross: Database.Statement<[string, string], RecordRow & { project_id: string; id: string }>;
  lastSeq: Database.Statement<[string, string], number | null>;
  insertEvent: Database.Statement<[string, string, number, string]>;
  readEvents: Database.Statement<[string, string, number, number], EventRow>;
  deleteStream: Database.Statement<[string, string]>;
  pruneEvents: Database.Statement<[string, string, number, number]>;
}

/** Reads the schema version, 0 for a database without a `meta` table. Never writes. */
export function readSchemaVersion(db: Database.Database): number {
  const hasMeta = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").pluck().get();
  if (hasMeta === undefined) return 0;
  const text = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get();
  const version = typeof text === "string" ? Number(text) : 0;
  if (!Number.isSafeInteger(version) || version < 0) {
    throw new AuthorityFailure(`The state file has an unreadable schema version (${String(text)}).`);
  }
  return version;
}

/**
 * The schema version of a file opened read-only, when this code can read it as it is (the operator's commands never
 * migrate): from `SQLITE_READABLE_FROM_VERSION` to `SQLITE_SCHEMA_VERSION`. Throws `AuthorityFailure` naming
 * `location` otherwise. Never writes.
 */
export function readableSchemaVersion(db: Database.Database, location: string): number {
  const seen = readSchemaVersion(db);
  if (seen < SQLITE_READABLE_FROM_VERSION || seen > SQLITE_SCHEMA_VERSION) {
    throw new AuthorityFailure(
      `The state file ${location} has schema version ${seen}, not ${SQLITE_READABLE_FROM_VERSION}–${SQLITE_SCHEMA_VERSION}; open it once with this acp-orchestrator's server (or upgrade acp-orchestrator).`,
    );
  }
  return seen;
}

/**
 * Brings the schema to `SQLITE_SCHEMA_VERSION`: pending migrations run in order inside one immediate transaction
 * (so two processes opening a new file at once apply them once). A database already up to date is not written.
 */
export function migrate(db: Database.Database): void {
  const tooNew = (version: number): AuthorityFailure =>
    new AuthorityFailure(
      `The state file has schema version ${version}, newer than this acp-orchestrator understands (${SQLITE_SCHEMA_VERSION}); upgrade acp-orchestrator.`,
    );
  const seen = readSchemaVersion(db);
  if (seen > SQLITE_SCHEMA_VERSION) throw tooNew(seen);
  if (seen === SQLITE_SCHEMA_VERSION) return;
  const apply = db.transaction(() => {
    db.exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT");
    const current = readSchemaVersion(db);
    if (current > SQLITE_SCHEMA_VERSION) throw tooNew(current);
    const setVersion = db.prepare(
      "INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    );
    for (const migration of MIGRATIONS) {
      if (migration.version <= current) continue;
      db.exec(migration.sql);
      setVersion.run(String(migration.version));
    }
  });
  apply.immediate();
}

/**
 * The project ids of `records` as a recursive CTE `projects`: from each project id the next one by one probe of the
 * primary key (a loose index scan), so listing projects does not read every record. Its last row is NULL.
 */
export const PROJECTS = `WITH RECURSIVE projects(project_id) AS (
    SELECT MIN(project_id) FROM records
    UNION ALL
    SELECT (SELECT MIN(r.project_id) FROM records r WHERE r.project_id > p.project_id)
    FROM projects p WHERE p.project_id IS NOT NULL)`;

export function prepareStatements(db: Database.Database): Statements {
  return {
    getRecord: db.prepare(
      "SELECT value, revision, updated_at FROM records WHERE project_id = ? AND kind = ? AND id = ?",
    ),
    getRevision: db
      .prepare<
        [string, string, string],
        number
      >("SELECT revision FROM records WHERE project_id = ? AND kind = ? AND id = ?")
      .pluck(),
    insertRecord: db.prepare(
      "INSERT INTO records (project_id, kind, id, value, revision, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
    ),
    updateRecord: db.prepare(
      "UPDATE records SET value = ?, revision = ?, updated_at = ? WHERE project_id = ? AND kind = ? AND id = ?",
    ),
    deleteRecord: db.prepare("DELETE FROM records WHERE project_id = ? AND kind = ? AND id = ?"),
    // X'FF' never occurs in UTF-8, so `prefix || X'FF'` is above every id that starts with `prefix` (including ids
    // that continue with characters beyond U+FFFF) and below every larger id that does not.
    listRecords: db.prepare(
      "SELECT id, revision, updated_at FROM records WHERE project_id = ? AND kind = ? AND id >= ? AND id < (? || CAST(X'FF' AS TEXT)) ORDER BY id",
    ),
    listProjects: db
      .prepare<
        [],
        string
      >(`${PROJECTS} SELECT project_id FROM projects WHERE project_id IS NOT NULL ORDER BY project_id`)
      .pluck(),
    listAcross: db.prepare(
      `${PROJECTS} SELECT r.project_id, r.id, r.value, r.revision, r.updated_at FROM projects p
       JOIN records r ON r.project_id = p.project_id AND r.kind = ? AND instr(r.value, ?) > 0
       ORDER BY r.project_id, r.id`,
    ),
    lastSeq: db
      .prepare<[string, string], number | null>("SELECT MAX(seq) FROM events WHERE project_id = ? AND stream = ?")
      .pluck(),
    insertEvent: db.prepare("INSERT INTO events (project_id, stream, seq, event) VALUES (?, ?, ?, ?)"),
    readEvents: db.prepare(
      "SELECT seq, event FROM events WHERE project_id = ? AND stream = ? AND seq > ? ORDER BY seq LIMIT ?",
    ),
    deleteStream: db.prepare("DELETE FROM events WHERE project_id = ? AND stream = ?"),
    pruneEvents: db.prepare("DELETE FROM events WHERE project_id = ? AND stream = ? AND seq > ? AND seq < ?"),
  };
}

/** The connection settings in force, as SQLite reports them (for diagnostics and tests). */
export interface SqliteSettings {
  /** `wal` for a file database (`memory` for `:memory:`). */
  journalMode: string;
  /** 2 = FULL: every commit is fsynced. */
  synchronous: number;
  busyTimeoutMs: number;
  foreignKeys: boolean;
  schemaVersion: number;
}
