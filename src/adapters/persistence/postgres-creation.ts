/**
 * `listByCreation` and `listTexts` on PostgreSQL (issue 32: `product.list` at 100,000 stored products). A page is one
 * statement on the creation index of schema version 3 (postgres-schema.ts: the stored column `created_key`, indexed
 * with the id, whole store and per project), so a page costs its own rows, not the store's. One named statement per
 * shape (with or without a project, with or without a position), each naming the partial index's condition as written
 * there so that its generic plan uses it. Never writes.
 */
import pg from "pg";
import type {
  CreationPageOptions,
  CreationRecord,
  CreationTexts,
  CreationTextsSink,
} from "../../core/creation-order.js";
import { AuthorityFailure, type TextListOptions } from "../../core/ports.js";
import { checkCreationPage, parseStored } from "./authority-checks.js";
import { checkNameText } from "./postgres-text.js";
import { inTransaction } from "./postgres-transaction.js";

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
  const { own, project, containing } = checkTextList(kind, options);
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

/** `listTexts`' arguments checked: one project (`own`) or every project but one, and the pre-filter (`""`: none). */
function checkTextList(kind: string, options: TextListOptions) {
  checkNameText(kind, "kind");
  if (typeof options !== "object" || options === null) throw new AuthorityFailure("options must be an object.");
  const containing = options.containing ?? "";
  if (typeof containing !== "string") throw new AuthorityFailure("containing must be a string.");
  if (containing.includes("\u0000")) throw new AuthorityFailure("containing must not contain the character U+0000.");
  const own = "projectId" in options;
  const project = own ? options.projectId : options.exceptProjectId;
  checkNameText(project, own ? "projectId" : "exceptProjectId");
  return { own, project, containing };
}

/** Rows per `FETCH` of `readTextsByCreation`: ~0.5 MB of header texts, garbage once handed on (issue 32). */
export const CREATION_TEXTS_BATCH = 2_000;

/**
 * What `readTexts` reads, in one snapshot (a read-only repeatable-read transaction on one pooled connection), in
 * batches (ports.ts `listTextsByCreation`, creation-order.ts `CreationTexts`): first the headers without a creation
 * key (the partial index of schema version 5, empty in a store the server wrote), then the others through a cursor
 * on the creation index in its order, `batch` rows per `FETCH`, each batch handed to `onBatch` and awaited before the
 * next is fetched, so only one batch of texts is held at a time (issue 32: holding 100,000 texts for a sort made most
 * of a list's time garbage collection). `product` only. Throws `AuthorityFailure` on an invalid argument; a database
 * error, or what `onBatch` throws, is thrown as it came after the transaction was rolled back. Never writes.
 */
export async function readTextsByCreation(
  pool: pg.Pool,
  kind: string,
  options: TextListOptions,
  onBatch: CreationTextsSink,
  batch = CREATION_TEXTS_BATCH,
): Promise<void> {
  const { own, project, containing } = checkTextList(kind, options);
  if (kind !== "product") throw new AuthorityFailure(`listTextsByCreation reads product records only, not "${kind}".`);
  // The partial indexes' conditions as written there (`kind = 'product'`), so that the planner uses them.
  const where = `kind = 'product' AND project_id ${own ? "=" : "<>"} $1${containing === "" ? "" : " AND strpos(value, $2) > 0"}`;
  const values = containing === "" ? [project] : [project, containing];
  await inTransaction(pool, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", async (client) => {
    const unkeyed = await client.query<[string, string]>({
      text: `SELECT value, id FROM records WHERE ${where} AND created_key IS NULL`,
      values,
      rowMode: "array",
    });
    for (let at = 0; at < unkeyed.rows.length; at += batch)
      await onBatch(batchOf(unkeyed.rows.slice(at, at + batch), false));
    await client.query({
      text: `DECLARE acp_by_creation NO SCROLL CURSOR FOR SELECT value, id FROM records
             WHERE ${where} AND created_key IS NOT NULL ORDER BY created_key, id`,
      values,
    });
    const fetch = () => {
      const rows = fetchTexts(client, `FETCH ${batch} FROM acp_by_creation`);
      rows.catch(() => undefined); // awaited below; this only keeps a failure meanwhile from going unhandled
      return rows;
    };
    // The next batch is fetched while this one is handed on: PostgreSQL reads and sends it meanwhile.
    for (let next = fetch(); ; ) {
      const { texts, ids } = await next;
      const more = texts.length === batch;
      if (more) next = fetch();
      try {
        if (texts.length > 0) await onBatch({ keyed: true, texts, ids });
      } catch (error) {
        // The FETCH already sent is waited for, so that the ROLLBACK finds the connection free of it.
        if (more) await next.catch(() => undefined);
        throw error;
      }
      if (!more) break;
    }
  });
}

/**
 * One statement whose rows are `value, id` (text), each row's two strings put straight into `texts` and `ids` as pg
 * hands its DataRow message over. pg's own `Query` builds a row array per row and keeps it in its `Result`'s `rows`,
 * which V8 keeps alive through young-generation collections until the next full one: measured on a `FETCH` loop over
 * 100,000 headers (issue 32), nearly every row survived each scavenge and was promoted (7-10 MB per scavenge, a mark-
 * compact every two), and the read took ~2x the CPU of this one, where ~0.7 MB survive. Everything else (the protocol,
 * errors, the client's query queue and timeout) is pg's `Query`.
 */
class FetchTexts extends pg.Query {
  readonly texts: string[] = [];
  readonly ids: string[] = [];

  /** pg's hook for each DataRow message of this statement (replaces `Query`'s: no row array, no `Result` row). */
  handleDataRow(message: { fields: (string | null)[] }): void {
    this.texts.push(message.fields[0] as string);
    this.ids.push(message.fields[1] as string);
  }
}

/** Runs `text` (rows of `value, id`) on `client`; resolves with its rows' columns in order, rejects with its error. */
function fetchTexts(client: pg.PoolClient, text: string): Promise<FetchTexts> {
  return new Promise((resolve, reject) => {
    const query: FetchTexts = new FetchTexts({ text }, (error: Error | undefined) =>
      error ? reject(error) : resolve(query),
    );
    client.query(query);
  });
}

/** Rows of `[value, id]` as a `CreationTexts` batch. */
function batchOf(rows: [string, string][], keyed: boolean): CreationTexts {
  const texts = new Array<string>(rows.length);
  const ids = new Array<string>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as [string, string];
    texts[i] = row[0];
    ids[i] = row[1];
  }
  return { keyed, texts, ids };
}
