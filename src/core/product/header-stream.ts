/**
 * The headers of an unpaged `product.list` read in creation order, a batch at a time (issue 32: `product.list` of
 * 100,000 stored products): the authority's `listTextsByCreation` hands over the stored texts already in the list's
 * order, so no header is held after its batch is handed on and nothing is sorted here. Holding every text until a
 * sort was done made garbage collection most of a list's time.
 *
 * Each text is cut (header-entry.ts) or parsed (header-text.ts) as `listHeaderEntries` does (header-list.ts), with
 * the same `dropped`. The store orders by its creation key (`creationKeyOf`) and the record id; the list orders by the
 * header's `createdAt` and `productId` (UTF-16 code units). They agree for every header in the form the server
 * writes. A valid header where they might not (no creation key, a key that is not its `createdAt`, a record id that
 * is not its `productId`, a key holding a surrogate: byte and code-unit order differ there) is out of place: the read
 * says so and the caller lists through `listHeaderEntries` instead, after discarding what it was handed.
 * Never writes.
 */
import { creationKeyOf } from "../creation-order.js";
import type { RunStateAuthority } from "../ports.js";
import { cutHeaderEntry } from "./header-entry.js";
import type { EntryOrHeader, HeaderQuery } from "./header-list.js";
import { parseHeaderText } from "./header-text.js";
import { INDEX_PROJECT } from "./records.js";

/** Receives the headers of one batch (valid ones, in list order); awaited before the next batch is read. */
export type HeaderBatchSink = (headers: EntryOrHeader[]) => void | Promise<void>;

/** A UTF-16 surrogate (byte order and code-unit order of two strings may differ where one holds it). */
const SURROGATE = /[\ud800-\udfff]/;

/**
 * The headers `query` names, valid ones only, oldest first, handed to `onBatch` a batch at a time (awaited before the
 * next is read): `dropped` counts the texts read that do not parse, as `listHeaderEntries`. `undefined` when the
 * authority has no ordered read (`listTextsByCreation`), or when a header was out of place (see the module): then what
 * `onBatch` was given is not the list, and the caller lists otherwise. Rejects with what the read or `onBatch` throws.
 */
export async function streamHeaderEntries(
  authority: RunStateAuthority,
  query: Omit<HeaderQuery, "page">,
  onBatch: HeaderBatchSink,
): Promise<{ dropped: number } | undefined> {
  const read = authority.listTextsByCreation?.bind(authority);
  if (read === undefined) return undefined;
  const { projectId, phase } = query;
  let dropped = 0;
  let outOfPlace = false;
  const options = {
    ...(projectId !== undefined ? { projectId } : { exceptProjectId: INDEX_PROJECT }),
    ...(phase !== undefined ? { containing: `"phase":${JSON.stringify(phase)}` } : {}),
  };
  await read("product", options, async ({ keyed, texts, ids }) => {
    if (outOfPlace) return;
    const headers: EntryOrHeader[] = [];
    for (let i = 0; i < texts.length; i++) {
      const text = texts[i] as string;
      const id = ids[i] as string;
      const cut = cutHeaderEntry(text);
      // A cut header's creation key is its `createdAt` (the form has one "createdAt" and no escapes), surrogate-free.
      const header = cut ?? parseHeaderText(text);
      if (header === undefined) {
        dropped++;
        continue;
      }
      const placed = cut !== undefined ? keyed && cut.productId === id : inPlace(keyed, header, text, id);
      if (!placed) {
        outOfPlace = true;
        return;
      }
      if (phase === undefined || header.phase === phase) headers.push(header);
    }
    await onBatch(headers);
  });
  return outOfPlace ? undefined : { dropped };
}

/** True when a header read at its store position (`keyed`, `text`, `id`) is at its place in the list (the module). */
function inPlace(keyed: boolean, header: EntryOrHeader, text: string, id: string): boolean {
  const { createdAt, productId } = header;
  if (!keyed || productId !== id || creationKeyOf(text) !== createdAt) return false;
  return !SURROGATE.test(createdAt) && !SURROGATE.test(productId);
}
