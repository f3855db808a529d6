/**
 * `listByCreation` and `listTexts` on PostgreSQL (issue 32: `product.list` at 100,000 stored products). A page is one
 * statement on the creation index of schema version 3 (postgres-schema.ts: the stored column `created_key`, indexed
 * with the id, whole store and per project), so a page costs its own rows, not the store's. One named statement per
 * shape (with or without a project, with or without a position), each naming the partial index's condition as written
 * there so that its generic plan uses it. Never writes.
 */
import type pg from "pg";
import type { CreationPageOptions, CreationRecord } from "../../core/creation-order.js";
import { AuthorityFailure, type TextListOptions } from "../../core/ports.js";
import { checkCreationPage, parseStored } from "./authority-checks.js";
import { checkNameText } from "./postgres-text.js";

interface CreationRow {
  project_id: string;
  id: string;
  value: string;
  revision: string;
  updated_at: string;
  created_key: string;
}

/**
 * Up to `options.limit` records of `kind` (`product`) in creation order after `options.after` (ports.ts
 * `listByCreation`), read through `pool`. Throws `AuthorityFailure` on an invalid argument; a database error is
 * thrown as it came (the authority's `#run` maps it). Never writes.
 */
export async function readCreationPage(
  pool: pg.Pool,
  kind: string,
  options: CreationPageOptions,
): Promise<CreationRecord[]> {
  checkCreationPage(kind, options);
  const { projectId, after } = options;
  if (projectId !== undefined) checkNameText(projectId, "projectId");
  if (after !== undefined) checkNameText(after.id, "after.id");
  const containing = options.containing ?? "";
  if (`${after?.createdAt ?? ""}${containing}`.includes("\u0000"))
    throw new AuthorityFailure("after.createdAt and containing must not contain the character U+0000.");
  const values: unknown[] = [kind, containing, options.limit];
  const where = ["kind = $1", "created_key IS NOT NULL", "strpos(value, $2) > 0"];
  if (projectId !== undefined) where.push(`project_id = $${values.push(projectId)}`);
  if (after !== undefined)
    where.push(`(created_key, id) > ($${values.push(after.createdAt)}, $${values.push(after.id)})`);
  const result = await pool.query<CreationRow>({
    name: `acp-by-creation${projectId !== undefined ? "-p" : ""}${after !== undefined ? "-a" : ""}`,
    text: `SELECT project_id, id, value, revision, updated_at, created_key FROM records
           WHERE ${where.join(" AND ")} ORDER BY created_key, id LIMIT $3`,
    values,
  });
  return result.rows.map((r) => ({
    projectId: r.project_id,
    id: r.id,
    value: parseStored(r.value),
    revision: Number(r.revision),
    updatedAt: r.updated_at,
    createdAt: r.created_key,
  }));
}

/**
 * The stored texts of `kind` in one project or in every project but one (ports.ts `listTexts`), read through `pool`
 * in one statement: a project's records by its primary-key range, every project's by one scan of the table, with no
 * ORDER BY (the caller orders them; a sort of 100,000 values here spilled to disk and took longer than the scan, issue
 * 32). Only the value column, as arrays, not row objects. Throws `AuthorityFailure` on an invalid argument; a
 * database error is thrown as it came. Never writes.
 */
export async function readTexts(pool: pg.Pool, kind: string, options: TextListOptions): Promise<string[]> {
  checkNameText(kind, "kind");
  if (typeof options !== "object" || options === null) throw new AuthorityFailure("options must be an object.");
  const containing = options.containing ?? "";
  if (typeof containing !== "string") throw new AuthorityFailure("containing must be a string.");
  if (containing.includes("\u0000")) throw new AuthorityFailure("containing must not contain the character U+0000.");
  const own = "projectId" in options;
  const project = own ? options.projectId : options.exceptProjectId;
  checkNameText(project, own ? "projectId" : "exceptProjectId");
  const filter = containing === "" ? "" : "AND strpos(value, $3) > 0";
  const result = await pool.query<[string]>({
    name: `acp-texts${own ? "-p" : ""}${containing === "" ? "" : "-c"}`,
    text: `SELECT value FROM records WHERE kind = $1 AND project_id ${own ? "=" : "<>"} $2 ${filter}`,
    values: containing === "" ? [kind, project] : [kind, project, containing],
    rowMode: "array",
  });
  const texts: string[] = new Array<string>(result.rows.length);
  for (let i = 0; i < texts.length; i++) texts[i] = (result.rows[i] as [string])[0];
  return texts;
}
