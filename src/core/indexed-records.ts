/**
 * Listing records of one kind across projects through an index (products and goal runs are looked up by id alone,
 * so an index record `<indexKind>/<id>` in project `_` names the project that holds each one).
 *
 * Read-only (guarantee 3); every record read back is validated and the invalid ones are skipped and counted
 * (guarantee 4). This file must never perform I/O except through the authority port.
 */
import type { z } from "zod";
import type { ListedRecord, ProjectRecord, RunStateAuthority } from "./ports.js";
import { INDEX_PROJECT, ProductIndexRecord } from "./product/records.js";

/**
 * Reads every valid record of `kind` in `projectId`, or, without a project, in every project that `indexKind`'s index
 * records name. Projects are visited in sorted order, records in id order. Never writes.
 */
export async function listIndexedRecords<T>(
  authority: RunStateAuthority,
  options: { projectId?: string; indexKind: string; kind: string; schema: z.ZodType<T> },
): Promise<{ records: T[]; dropped: number }> {
  const projects = new Set<string>();
  let dropped = 0;
  if (options.projectId === undefined && authority.listAcrossProjects) {
    // Every project's records in one read (issue 32); the index is read only to count its records that do not parse.
    for (const rec of await listRecordValues(authority, INDEX_PROJECT, options.indexKind)) {
      if (!ProductIndexRecord.safeParse(rec.value).success) dropped++;
    }
    const across = await authority.listAcrossProjects(options.kind);
    const { records, dropped: invalid } = parseAll(across, options.schema);
    return { records, dropped: dropped + invalid };
  }
  if (options.projectId !== undefined) projects.add(options.projectId);
  else {
    for (const rec of await listRecordValues(authority, INDEX_PROJECT, options.indexKind)) {
      const parsed = ProductIndexRecord.safeParse(rec.value);
      if (parsed.success) projects.add(parsed.data.projectId);
      else dropped++; // an index record that does not parse is counted (guarantee 4)
    }
    // A bad index record must not hide its product: every project the authority knows is listed too.
    if (authority.listProjects) {
      for (const p of await authority.listProjects()) if (p !== INDEX_PROJECT) projects.add(p);
    }
  }
  const records: T[] = [];
  for (const p of [...projects].sort()) {
    for (const rec of await listRecordValues(authority, p, options.kind)) {
      const parsed = options.schema.safeParse(rec.value);
      if (parsed.success) records.push(parsed.data);
      else dropped++;
    }
  }
  return { records, dropped };
}

/**
 * Every record of `kind` in `projectId` whose id starts with `prefix`, with its value, in id order: the authority's
 * `listValues` when it has one (one read), else its `list` then a `get` of each id (a record deleted in between is
 * left out). The one fallback of the optional port method: wrappers of an authority forward through it. Never writes.
 */
export async function listRecordValues(
  authority: RunStateAuthority,
  projectId: string,
  kind: string,
  prefix?: string,
): Promise<ListedRecord[]> {
  if (authority.listValues) return authority.listValues(projectId, kind, prefix);
  const out: ListedRecord[] = [];
  for (const info of await authority.list(projectId, kind, prefix)) {
    const rec = await authority.get(projectId, kind, info.id);
    if (rec) out.push({ id: info.id, ...rec });
  }
  return out;
}

/**
 * The valid records of `kind` across every project whose stored JSON text contains `containing`, through the
 * authority's pre-filter when it has `listAcrossProjects` (a read of those records only: the recovery pass on
 * 100,000 stored products, issue 32), else through `listIndexedRecords` and `matches`. Either way every record
 * returned satisfies `matches` (the pre-filter may let others through). Records that do not parse are skipped and
 * counted in `dropped` — only those read, so it is not `product.list`'s count. Never writes.
 */
export async function listMatchingRecords<T>(
  authority: RunStateAuthority,
  options: {
    indexKind: string;
    kind: string;
    schema: z.ZodType<T>;
    containing: string;
    matches: (record: T) => boolean;
  },
): Promise<{ records: T[]; dropped: number }> {
  const { records, dropped } = authority.listAcrossProjects
    ? parseAll(await authority.listAcrossProjects(options.kind, { containing: options.containing }), options.schema)
    : await listIndexedRecords(authority, options);
  return { records: records.filter(options.matches), dropped };
}

/** The values of `listed` outside the index project that parse with `schema`, and how many did not. */
function parseAll<T>(listed: readonly ProjectRecord[], schema: z.ZodType<T>): { records: T[]; dropped: number } {
  const records: T[] = [];
  let dropped = 0;
  for (const rec of listed) {
    if (rec.projectId === INDEX_PROJECT) continue;
    const parsed = schema.safeParse(rec.value);
    if (parsed.success) records.push(parsed.data);
    else dropped++;
  }
  return { records, dropped };
}
