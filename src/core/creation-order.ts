/**
 * Creation order (issue 32, `product.list` paging): records sorted by the text of their value's top-level `createdAt`
 * then by id, and the page after a position. The shapes of the authority port's `listByCreation`, and the same page
 * computed in memory for an authority without it (memory, host: PROTOCOL.md section 7 has no ordered read).
 *
 * Pure: no I/O, no clock. Never writes.
 */
import type { ProjectRecord } from "./ports.js";

/** A record with the creation key `listByCreation` ordered it by (its value's `createdAt` text). */
export type CreationRecord = ProjectRecord & { createdAt: string };

/**
 * What `RunStateAuthority.listByCreation` reads: up to `limit` (a positive integer) records of every project (or of
 * `projectId`) whose value has a text `createdAt`, by that text then id (byte order), after `after` (exclusive: a
 * record equal to it is not returned); with `containing`, records whose stored JSON text lacks it may be left out (a
 * pre-filter, as in `listAcrossProjects`). A kind other than `product` throws `AuthorityFailure`.
 */
export interface CreationPageOptions {
  limit: number;
  after?: CreationKey;
  projectId?: string;
  containing?: string;
}

/** A position in creation order. */
export interface CreationKey {
  createdAt: string;
  id: string;
}

/**
 * One batch of `RunStateAuthority.listTextsByCreation` (issue 32: `product.list` of 100,000 stored products, read
 * without holding every text at once): stored texts and their record ids (`texts[i]` is the value of `ids[i]`). The
 * batches of one read are one snapshot of the records `listTexts` returns for the same options, each exactly once:
 * first those without a creation key (`keyed` false, in no order), then the others by creation key, then id (byte
 * order, as `listByCreation`), `keyed` true. A text's creation key is `creationKeyOf` it.
 */
export interface CreationTexts {
  keyed: boolean;
  texts: string[];
  ids: string[];
}

/** Receives the batches in order: the next is read once it returned (or its promise resolved); a throw ends the read. */
export type CreationTextsSink = (batch: CreationTexts) => void | Promise<void>;

/** The text of the first `"createdAt":"…"` in `text` holding no `"` or `\` (PostgreSQL's `created_key`). */
const CREATION_KEY = /"createdAt":"([^"\\]*)"/;

/**
 * A stored product text's creation key, as the store computes it (PostgreSQL's generated column `created_key`,
 * postgres-schema.ts version 3, the same regular expression), or `undefined` when it has none. For a header in the
 * form the server writes, its `createdAt`.
 */
export function creationKeyOf(text: string): string | undefined {
  return CREATION_KEY.exec(text)?.[1];
}

/** Orders two positions: creation text first, then id (code-unit order). Negative when `a` comes first. */
export function compareCreation(a: CreationKey, b: CreationKey): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * The page of `items` (any order) after `after`, at most `limit` long, in creation order, and whether more follow.
 * Does not modify `items`.
 */
export function pageOf<T>(
  items: readonly T[],
  keyOf: (item: T) => CreationKey,
  options: { limit: number; after?: CreationKey },
): { page: T[]; more: boolean } {
  const after = options.after;
  const rest = after === undefined ? [...items] : items.filter((i) => compareCreation(keyOf(i), after) > 0);
  rest.sort((a, b) => compareCreation(keyOf(a), keyOf(b)));
  return { page: rest.slice(0, options.limit), more: rest.length > options.limit };
}
