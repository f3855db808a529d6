/**
 * Reading product headers for `product.list` (PROTOCOL.md section 5), all of them or one page, in creation order
 * (oldest first: `createdAt`, then product id). A page comes from the authority's `listByCreation` when it has one
 * (SQLite, PostgreSQL: one indexed read of `limit + 1` headers, issue 32), else from every header sorted in memory
 * (memory and host authorities). All of them come from the authority's `listTexts` when it has one (PostgreSQL,
 * SQLite: one unordered read of every header's text, sorted here), else through the product index. Headers that do
 * not parse are skipped and counted (guarantee 4). Never writes.
 */
import type { ListPosition } from "../../../protocol/product.js";
import type { Phase } from "../../../protocol/common.js";
import { compareCreation, pageOf, type CreationKey } from "../creation-order.js";
import { listIndexedRecords } from "../indexed-records.js";
import type { RunStateAuthority } from "../ports.js";
import { cutHeaderEntry, type HeaderEntry } from "./header-entry.js";
import { parseHeaderText } from "./header-text.js";
import { INDEX_PROJECT, ProductHeaderRecord } from "./records.js";

/** Which headers to read: a project (else every one), a phase, and a page (else all). */
export interface HeaderQuery {
  projectId?: string;
  phase?: Phase;
  /** At most `limit` headers after `after` (exclusive). */
  page?: { limit: number; after?: ListPosition };
}

/** Headers read, how many records did not parse, and where the next page starts when one remains. */
export interface HeaderList {
  headers: ProductHeaderRecord[];
  dropped: number;
  next?: ListPosition;
}

const keyOf = (h: ProductHeaderRecord): CreationKey => ({ createdAt: h.createdAt, id: h.productId });

/**
 * The valid headers `query` names, oldest first. Without a page: every header, `dropped` counting the invalid ones
 * read. Where the authority has `listTexts` (PostgreSQL, SQLite) that read is every project's headers and nothing else
 * (no product-index record is read: an invalid one hides nothing, so it is not counted), and with `phase` only the
 * headers whose stored text names it; elsewhere (memory, host) every header and every product-index record
 * (the index names the projects), each invalid one counted. With a page: at most `limit` of them, `dropped` counting
 * the invalid ones among those this page read, and `next` set when more follow (with `phase`, a page may hold fewer
 * than `limit` even then).
 */
export async function listProductHeaders(authority: RunStateAuthority, query: HeaderQuery): Promise<HeaderList> {
  const { projectId, phase, page } = query;
  if (page !== undefined && authority.listByCreation) {
    const after = page.after && { createdAt: page.after.createdAt, id: page.after.productId };
    const rows = await authority.listByCreation("product", {
      limit: page.limit + 1,
      ...(after ? { after } : {}),
      ...(projectId !== undefined ? { projectId } : {}),
      ...(phase !== undefined ? { containing: `"phase":${JSON.stringify(phase)}` } : {}),
    });
    const read = rows.slice(0, page.limit);
    const headers: ProductHeaderRecord[] = [];
    let dropped = 0;
    for (const row of read) {
      if (row.projectId === INDEX_PROJECT) continue;
      const parsed = ProductHeaderRecord.safeParse(row.value);
      if (!parsed.success) dropped++;
      else if (phase === undefined || parsed.data.phase === phase) headers.push(parsed.data);
    }
    const last = read.at(-1);
    const next = rows.length > page.limit && last ? { createdAt: last.createdAt, productId: last.id } : undefined;
    return { headers, dropped, ...(next ? { next } : {}) };
  }
  if (page === undefined && authority.listTexts) return readAllTexts(authority, query);
  const { records, dropped } = await listIndexedRecords(authority, {
    ...(projectId !== undefined ? { projectId } : {}),
    ...{ indexKind: "product-index", kind: "product", schema: ProductHeaderRecord },
  });
  const headers = phase === undefined ? records : records.filter((h) => h.phase === phase);
  if (page === undefined) return { headers: headers.sort((a, b) => compareCreation(keyOf(a), keyOf(b))), dropped };
  const after = page.after && { createdAt: page.after.createdAt, id: page.after.productId };
  const { page: slice, more } = pageOf(headers, keyOf, { limit: page.limit, ...(after ? { after } : {}) });
  const last = slice.at(-1);
  return {
    headers: slice,
    dropped,
    ...(more && last ? { next: { createdAt: last.createdAt, productId: last.productId } } : {}),
  };
}

/**
 * Every valid header `query` names (no page), oldest first, from the authority's `listTexts` (PostgreSQL, SQLite: one
 * statement, issue 32): no index pass, the phase as a pre-filter on the stored text, each text parsed once
 * (header-text.ts), then sorted (the read is unordered). `dropped` counts the texts read that do not parse.
 */
async function readAllTexts(authority: RunStateAuthority, query: HeaderQuery): Promise<HeaderList> {
  const texts = await readHeaderTexts(authority, query);
  const headers: ProductHeaderRecord[] = [];
  let dropped = 0;
  for (let i = 0; i < texts.length; i++) {
    const header = parseHeaderText(texts[i] as string);
    if (header === undefined) dropped++;
    else if (query.phase === undefined || header.phase === query.phase) headers.push(header);
  }
  return { headers: headers.sort(byCreation), dropped };
}

/** Every header of `listHeaderEntries`: cut from its text (`HeaderEntry`, has `membersEnd`), or parsed (has `v`). */
export type EntryOrHeader = HeaderEntry | ProductHeaderRecord;

/**
 * The headers `listProductHeaders` lists without a page, in its order and with its `dropped`, for an answer written
 * from the stored texts (issue 32: `product.list` of 100,000 stored products): a header in the written form comes as
 * its list entry cut from the text (header-entry.ts), any other as `parseHeaderText` returns it. `undefined` when the
 * authority has no `listTexts` (memory, host): the caller lists the headers as objects. Never writes.
 */
export async function listHeaderEntries(
  authority: RunStateAuthority,
  query: Omit<HeaderQuery, "page">,
): Promise<{ headers: EntryOrHeader[]; dropped: number } | undefined> {
  if (!authority.listTexts) return undefined;
  const texts = await readHeaderTexts(authority, query);
  const headers: EntryOrHeader[] = [];
  let dropped = 0;
  for (let i = 0; i < texts.length; i++) {
    const text = texts[i] as string;
    const header = cutHeaderEntry(text) ?? parseHeaderText(text);
    if (header === undefined) dropped++;
    else if (query.phase === undefined || header.phase === query.phase) headers.push(header);
  }
  return { headers: headers.sort(byCreation), dropped };
}

/** The stored header texts `query` names (a project or all; `phase` as a pre-filter) through `listTexts`. */
function readHeaderTexts(authority: RunStateAuthority, query: HeaderQuery): Promise<string[]> {
  const { projectId, phase } = query;
  return (authority.listTexts as NonNullable<RunStateAuthority["listTexts"]>)("product", {
    ...(projectId !== undefined ? { projectId } : { exceptProjectId: INDEX_PROJECT }),
    ...(phase !== undefined ? { containing: `"phase":${JSON.stringify(phase)}` } : {}),
  });
}

/** What `byCreation` compares. */
type CreationOf = { createdAt: string; productId: string };

/** Creation order of two headers (creation-order.ts `compareCreation`, without a key object per comparison). */
export function byCreation(a: CreationOf, b: CreationOf): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1;
  return a.productId < b.productId ? -1 : a.productId > b.productId ? 1 : 0;
}
