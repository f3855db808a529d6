/**
 * Compaction of a product's journal (guarantee 14: storage stays proportional to live data) and the sequence rules
 * the store reads it by: which snapshots and events a load and the kept checkpoints still need (everything else is
 * deleted), the ids of snapshot records, and how a gap in the stored sequence is recognised. Used by store.ts only.
 */
import type { RunStateAuthority } from "../ports.js";
import type { ProductModel } from "./state.js";

/** The record id of the snapshot of `productId` at `seq` (sorted by sequence as text). */
export const snapshotId = (productId: string, seq: number): string => `${productId}/${String(seq).padStart(16, "0")}`;

/** Deletes the snapshots and events that neither the latest snapshot nor any kept checkpoint needs. */
export async function compactStream(
  authority: RunStateAuthority,
  model: ProductModel,
  prune: (beforeSeq: number, afterSeq: number) => Promise<number>,
): Promise<void> {
  const s = model.state;
  const seqs = (await authority.list(s.projectId, "snapshot", `${s.productId}/`))
    .map((info) => Number(info.id.slice(s.productId.length + 1)))
    .filter((seq) => Number.isSafeInteger(seq) && seq <= s.seq)
    .sort((a, b) => a - b);
  const baseOf = (seq: number): number => {
    let base = 0;
    for (const candidate of seqs) if (candidate <= seq) base = candidate;
    return base;
  };
  const needed = [...s.checkpoints].sort((a, b) => a.seq - b.seq).map((c) => ({ from: baseOf(c.seq), to: c.seq }));
  const keepSnapshots = new Set([s.seq, ...needed.map((n) => n.from)]);
  for (const seq of seqs) {
    if (!keepSnapshots.has(seq)) await authority.delete(s.projectId, "snapshot", snapshotId(s.productId, seq));
  }
  await authority.delete(s.projectId, "snapshot", s.productId);
  // Events needed: (from, to] for every kept checkpoint, and the last one (a stream never loses its last event).
  let cursor = 0;
  for (const { from, to } of needed.sort((a, b) => a.from - b.from)) {
    if (from > cursor) await prune(Math.min(from + 1, s.seq), cursor);
    cursor = Math.max(cursor, to);
  }
  if (s.seq > cursor + 1) await prune(s.seq, cursor);
}

/** True when the stored events after `seq` skip a sequence number (missing or compacted away). */
export function hasGap(events: readonly { seq: number }[], seq: number): boolean {
  let previous = seq;
  for (const e of events) {
    if (e.seq <= previous) continue;
    if (e.seq > previous + 1) return true;
    previous = e.seq;
  }
  return false;
}

export function missingBefore(previous: number, seq: number): number {
  return seq > previous + 1 ? seq - previous - 1 : 0;
}
