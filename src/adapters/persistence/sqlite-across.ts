/**
 * The SQLite authority's reads across projects (issue 32, 100,000 stored products): `listAcrossProjects` (one
 * statement over every project), `listTexts` (one statement, the value column only) and `listByCreation`, one statement on the creation index of schema version 2
 * (sqlite-schema.ts: the virtual column `created_key`, indexed with the id, whole store and per project), so a page
 * costs its own rows, not the store's. Its statements are prepared once per connection and shape (with or without a
 * project, with or without a position). Never writes.
 */
import type Database from "better-sqlite3";
import type { CreationPageOptions, CreationRecord } from "../../core/creation-order.js";
import { AuthorityFailure, type ProjectRecord, type TextListOptions } from "../../core/ports.js";
import { checkCreationPage, checkName, parseStored } from "./authority-checks.js";
import { CREATED_KEY_SQL, PROJECTS, SQLITE_SCHEMA_VERSION, type Statements } from "./sqlite-schema.js";

/** `kind` in every project by project then id (`Statements.listAcross`); `containing` matched by `instr`. */
export function readAcross(statements: Statements, kind: string, options: { containing?: string }): ProjectRecord[] {
  checkName(kind, "kind");
  const containing = options.containing ?? "";
  if (typeof containing !== "string") throw new AuthorityFailure("containing must be a string.");
  return statements.listAcross.all(kind, containing).map((r) => ({
    projectId: r.project_id,
    id: r.id,
    value: parseStored(r.value),
    revision: r.revision,
    updatedAt: r.updated_at,
  }));
}

interface CreationRow {
  project_id: string;
  id: string;
  value: string;
  revision: number;
  updated_at: string;
  created_key: string;
}

/** The prepared statements of each connection, by shape (`p` project, `a` after). */
const prepared = new WeakMap<Database.Database, Map<string, Database.Statement<unknown[], CreationRow>>>();

/**
 * The SQL of one shape; `created_key IS NOT NULL` names the partial index's condition as it is written there. `key`
 * is null for the stored column, or on a version-1 file (read-only) the expression it stands for (a scan: such a
 * file has no creation index).
 */
function creationSql(project: boolean, after: boolean, key: string | null): string {
  const from = key === null ? "records" : `(SELECT *, ${key} AS created_key FROM records)`;
  return `SELECT project_id, id, value, revision, updated_at, created_key FROM ${from}
    WHERE kind = ? AND created_key IS NOT NULL ${project ? "AND project_id = ?" : ""}
      ${after ? "AND (created_key, id) > (?, ?)" : ""} AND instr(value, ?) > 0
    ORDER BY created_key, id LIMIT ?`;
}

/**
 * Up to `options.limit` records of `kind` (`product`) in creation order after `options.after` (ports.ts
 * `listByCreation`); `schemaVersion` is the file's (a read-only connection may read an older one). Throws `AuthorityFailure` on an invalid argument; a SQLite error is thrown as it came (the
 * authority's `#run` turns it into `AuthorityFailure`). Never writes.
 */
export function readCreationPage(
  db: Database.Database,
  kind: string,
  options: CreationPageOptions,
  schemaVersion = SQLITE_SCHEMA_VERSION,
): CreationRecord[] {
  checkCreationPage(kind, options);
  const { projectId, after } = options;
  const shape = `${projectId !== undefined ? "p" : ""}${after !== undefined ? "a" : ""}`;
  let statements = prepared.get(db);
  if (statements === undefined) prepared.set(db, (statements = new Map()));
  let statement = statements.get(shape);
  if (statement === undefined) {
    const key = schemaVersion >= 2 ? null : `(${CREATED_KEY_SQL})`;
    statement = db.prepare<unknown[], CreationRow>(creationSql(projectId !== undefined, after !== undefined, key));
    statements.set(shape, statement);
  }
  const args: unknown[] = [kind];
  if (projectId !== undefined) args.push(projectId);
  if (after !== undefined) args.push(after.createdAt, after.id);
  args.push(options.containing ?? "", options.limit);
  return statement.all(...args).map((r) => ({
    projectId: r.project_id,
    id: r.id,
    value: parseStored(r.value),
    revision: r.revision,
    updatedAt: r.updated_at,
    createdAt: r.created_key,
  }));
}

/** The prepared `readTexts` statements of each connection, by shape (`p` one project, `x` every project but one). */
const preparedTexts = new WeakMap<Database.Database, Map<string, Database.Statement<unknown[], string>>>();

/**
 * The stored texts of `kind` in one project or in every project but one (ports.ts `listTexts`), in one statement: a
 * project's records by its primary-key range, every project's by one probe per project (`PROJECTS`, a loose index
 * scan) and each one's range, with no ORDER BY (the caller orders them), the value column only and each row as its
 * text (`pluck`). `containing` is matched by `instr`. Throws `AuthorityFailure` on an invalid argument; a SQLite error
 * is thrown as it came. Never writes.
 */
export function readTexts(db: Database.Database, kind: string, options: TextListOptions): string[] {
  checkName(kind, "kind");
  if (typeof options !== "object" || options === null) throw new AuthorityFailure("options must be an object.");
  const containing = options.containing ?? "";
  if (typeof containing !== "string") throw new AuthorityFailure("containing must be a string.");
  const own = "projectId" in options;
  const project = own ? options.projectId : options.exceptProjectId;
  checkName(project, own ? "projectId" : "exceptProjectId");
  let statements = preparedTexts.get(db);
  if (statements === undefined) preparedTexts.set(db, (statements = new Map()));
  const shape = own ? "p" : "x";
  let statement = statements.get(shape);
  if (statement === undefined) {
    const sql = own
      ? "SELECT value FROM records WHERE project_id = ? AND kind = ? AND instr(value, ?) > 0"
      : `${PROJECTS} SELECT r.value FROM projects p JOIN records r ON r.project_id = p.project_id AND r.kind = ?
         AND instr(r.value, ?) > 0 WHERE p.project_id <> ?`;
    statement = db.prepare<unknown[], string>(sql).pluck();
    statements.set(shape, statement);
  }
  return own ? statement.all(project, kind, containing) : statement.all(kind, containing, project);
}
