/**
 * `product.list` entries for ProductService (PROTOCOL.md section 5): the stored headers, oldest first, a product this
 * process has in memory shown as memory has it, and an executing product's owner (guarantee 13).
 *
 * `listProducts` gives every entry as an object, all of them or one page. `listProductEntries` gives the same entries
 * of an unpaged list, in the same order, where each entry nothing changes (not in memory, not executing) is cut from
 * its stored header's text (header-entry.ts `HeaderEntry`: its JSON text is two ranges of it) and the others are objects, so that the server writes the answer
 * without parsing 100,000 headers and serialising them again (issue 32); `JSON.stringify` of each object and
 * `entryJson` of each cut entry are the same bytes the object path gives. `streamProductEntries` gives them a batch at
 * a time where the store reads the headers in order (PostgreSQL, header-stream.ts). Never writes.
 */
import type { Phase } from "../../../protocol/common.js";
import type { HeaderEntry } from "./header-entry.js";
import type { EntryOrHeader, HeaderQuery } from "./header-list.js";
import { parseHeaderText } from "./header-text.js";
import type { ProductOrchestrator } from "./orchestrator.js";
import type { ProductHeaderRecord } from "./records.js";
import type { progressOfModel } from "./state.js";
import type { ProductStore } from "./store.js";

/** An executing product's lease holder (`Owner`, PROTOCOL.md section 5). */
export type ListedOwner = { ownerId: string; expiresAt: string; live: boolean };

/** One `product.list` entry (PROTOCOL.md section 5). */
export interface ListedProduct {
  productId: string;
  projectId: string;
  name: string;
  phase: Phase;
  progress: ReturnType<typeof progressOfModel>;
  updatedAt: string;
  owner?: ListedOwner;
}

/** What the list reads besides the store: products in memory and leases (ProductService). */
export interface ListSources {
  store: ProductStore;
  /** The product's instance in memory, if any (does not load it). */
  loaded(productId: string): ProductOrchestrator | undefined;
  /** The owner of a product's lease as this process sees it now, or `undefined`. Read-only. */
  ownerOf(projectId: string, productId: string): Promise<ListedOwner | undefined>;
}

/** `product.list` with entries as objects, all or one page (header-list.ts), and `next` when more remain. */
export async function listProducts(
  sources: ListSources,
  projectId?: string,
  phase?: Phase,
  page?: HeaderQuery["page"],
) {
  const query = { ...(projectId !== undefined ? { projectId } : {}), ...(phase !== undefined ? { phase } : {}) };
  const { headers, dropped, next } = await sources.store.listHeaders({ ...query, ...(page ? { page } : {}) });
  const products = headers.map((h) => entryOf(sources, h));
  await addOwners(sources, products);
  const listed = phase === undefined ? products : products.filter((p) => p.phase === phase);
  return { products: listed, dropped, ...(next ? { next } : {}) };
}

/**
 * `product.list` without a page, each entry an object or its JSON text (see the module), or `undefined` when the
 * store has no text read (memory, host: `listProducts` then). Same entries, order and `dropped` as `listProducts`.
 */
export async function listProductEntries(
  sources: ListSources,
  projectId?: string,
  phase?: Phase,
): Promise<{ products: (ListedProduct | HeaderEntry)[]; dropped: number } | undefined> {
  const query = { ...(projectId !== undefined ? { projectId } : {}), ...(phase !== undefined ? { phase } : {}) };
  const read = await sources.store.listHeaderEntries(query);
  if (read === undefined) return undefined;
  const { products, dropped, rewritten } = entriesOf(sources, read.headers, phase);
  await addOwners(sources, rewritten);
  return { products, dropped: read.dropped + dropped };
}

/**
 * The entries of `listProductEntries`, in its order, handed to `sink` a batch at a time as the store reads them in
 * order (header-stream.ts, issue 32: no header outlives its batch), and `dropped`; `undefined` when the store has no
 * ordered read or found a header out of place (header-stream.ts): then what `sink` was given is not the list (the
 * caller discards it and uses `listProductEntries`). An executing product's `owner` is set on its entry object after
 * the read is done (the read holds a connection: a lookup during it could wait for one forever), before this
 * resolves: the sink serialises object entries only then. Rejects with what the read or `sink` throws.
 */
export async function streamProductEntries(
  sources: ListSources,
  projectId: string | undefined,
  phase: Phase | undefined,
  sink: (entries: (ListedProduct | HeaderEntry)[]) => void | Promise<void>,
): Promise<{ dropped: number } | undefined> {
  const query = { ...(projectId !== undefined ? { projectId } : {}), ...(phase !== undefined ? { phase } : {}) };
  let rewrittenDropped = 0;
  const owned: ListedProduct[] = [];
  const read = await sources.store.streamHeaderEntries(query, async (headers) => {
    const { products, dropped, rewritten } = entriesOf(sources, headers, phase);
    rewrittenDropped += dropped;
    for (const entry of rewritten) if (entry.phase === "executing") owned.push(entry);
    await sink(products);
  });
  if (read === undefined) return undefined;
  await addOwners(sources, owned);
  return { dropped: read.dropped + rewrittenDropped };
}

/**
 * The list entries of `headers` (in order): a cut one nothing changes (not in memory, not executing) as it is, any
 * other as the object path makes it (`rewritten`: the caller adds owners, `addOwners`), those whose phase is not
 * `phase` left out; `dropped` counts cut texts that did not parse after all (none: header-entry.ts).
 */
function entriesOf(sources: ListSources, headers: readonly EntryOrHeader[], phase: Phase | undefined) {
  let dropped = 0;
  const products: (ListedProduct | HeaderEntry)[] = [];
  const rewritten: ListedProduct[] = [];
  for (const item of headers) {
    if (isCut(item) && item.phase !== "executing" && sources.loaded(item.productId) === undefined) {
      products.push(item);
      continue;
    }
    // Memory or an owner changes this entry: as the object path makes it (a cut text parses, header-entry.ts).
    const header = isCut(item) ? parseHeaderText(item.text) : item;
    if (header === undefined) {
      dropped++;
      continue;
    }
    const entry = entryOf(sources, header);
    products.push(entry);
    rewritten.push(entry);
  }
  if (phase === undefined) return { products, dropped, rewritten };
  return { products: products.filter((p) => isCut(p) || p.phase === phase), dropped, rewritten };
}

/** True for a header cut from its text (header-entry.ts), false for a parsed header or an entry object. */
export function isCut(item: EntryOrHeader | ListedProduct): item is HeaderEntry {
  return "membersEnd" in item;
}

/** The entry of `h`: memory is the truth for what this process drives (not for a stale copy of another's product). */
function entryOf(sources: ListSources, h: ProductHeaderRecord): ListedProduct {
  const loaded = sources.loaded(h.productId);
  const live = loaded && (loaded.isDriving || loaded.model.state.updatedAt >= h.updatedAt) ? loaded : undefined;
  return {
    productId: h.productId,
    projectId: h.projectId,
    name: h.name,
    phase: live ? live.phase : h.phase,
    progress: live ? live.progress() : h.progress,
    updatedAt: live ? live.model.state.updatedAt : h.updatedAt,
  };
}

/**
 * Guarantee 13: an executing product shows who drives it and whether that owner is live (a lease exists only while a
 * product executes, so only those are read; no promise for the others: 100,000 of them, issue 32).
 */
async function addOwners(sources: ListSources, products: ListedProduct[]): Promise<void> {
  await Promise.all(
    products
      .filter((p) => p.phase === "executing")
      .map(async (p) => {
        const owner = await sources.ownerOf(p.projectId, p.productId);
        if (owner) p.owner = owner;
      }),
  );
}
