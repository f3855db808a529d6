/**
 * ProductStore: how a product's state reaches and comes back from the run-state authority.
 *
 * Owns the storage layout described in records.ts. Every write is compare-and-swap (event appends on the stream's
 * sequence number, records on their revision), so a second writer is refused, never merged (DESIGN.md guarantee 6).
 * Every record read back is parsed by its zod schema; one that does not parse is skipped and counted in `dropped`
 * (guarantee 4). Reading never writes (guarantee 3). This class never decides what to do next: the orchestrator does.
 */
import type { Phase } from "../../../protocol/common.js";
import type { RunStateAuthority } from "../ports.js";
import { AuthorityConflict } from "../ports.js";
import { notFound } from "../errors.js";
import { listIndexedRecords } from "../indexed-records.js";
import {
  INDEX_PROJECT,
  LeaseRecord,
  ProductEvent,
  ProductHeaderRecord,
  ProductIndexRecord,
  SnapshotRecord,
  productStream,
} from "./records.js";
import { applyEvent, emptyState, modelOf, progressOfModel, type ProductModel } from "./state.js";

/** A model loaded from the authority, with what had to be skipped. */
export interface LoadedProduct {
  model: ProductModel;
  /** Records (events or snapshot) that failed validation and were skipped (guarantee 4). */
  dropped: number;
  /**
   * Of those, the events that were lost (invalid or missing from the sequence): state they carried is unknown, so the
   * product must not run again (fail closed). An invalid snapshot loses nothing: the events are replayed instead.
   */
  lost: number;
}

/**
 * Compaction policy (issue 4 item 6: checkpoint storage grows with what changed, not with the DAG). A snapshot is
 * written once at least `SNAPSHOT_MIN_EVENTS` events AND at least `SNAPSHOT_BYTES_FACTOR` times the snapshot's own
 * size in event bytes were appended since the last one. Snapshots then cost at most about 1/SNAPSHOT_BYTES_FACTOR of
 * the event bytes whatever the DAG size, and loading replays a tail of at most about that factor times the state's
 * size. (A count-only threshold, `max(500, tasks)` events, wrote a full O(tasks) snapshot every O(tasks) events: a
 * 5,000-task run wrote 2.2 times the bytes per completion of a 100-task one; test/core/product/storage-growth.test.ts.)
 */
const SNAPSHOT_MIN_EVENTS = 500;
const SNAPSHOT_BYTES_FACTOR = 4;

/** Length of a value's JSON text in UTF-16 code units: the compaction policy's measure of bytes. */
function jsonLength(value: unknown): number {
  return JSON.stringify(value)?.length ?? 0;
}

export class ProductStore {
  constructor(
    private readonly authority: RunStateAuthority,
    private readonly checkpointHistory: number,
  ) {}

  /** The authority's backend name (`memory`, `sqlite`, `host`…). */
  get backend(): string {
    return this.authority.name;
  }

  /**
   * Records a new product: its index entry and its first events. Throws `AuthorityConflict` if the id exists.
   */
  async create(projectId: string, productId: string, events: ProductEvent[]): Promise<ProductModel> {
    await this.authority.put(INDEX_PROJECT, "product-index", productId, { v: 1, projectId }, null);
    const model = modelOf(emptyState(), this.checkpointHistory);
    await this.append(model, events);
    await this.writeHeader(model);
    return model;
  }

  /** Which project owns `productId`, or `undefined` when no valid index record exists. */
  async projectOf(productId: string): Promise<string | undefined> {
    const rec = await this.authority.get(INDEX_PROJECT, "product-index", productId);
    if (!rec) return undefined;
    const parsed = ProductIndexRecord.safeParse(rec.value);
    return parsed.success ? parsed.data.projectId : undefined;
  }

  /**
   * Loads a product: the latest valid snapshot plus every later event, each validated.
   * Throws `DomainError(not_found)` when the product does not exist (or its header was deleted).
   */
  async load(productId: string): Promise<LoadedProduct> {
    const projectId = await this.projectOf(productId);
    if (!projectId) throw notFound("product", productId);
    const header = await this.authority.get(projectId, "product", productId);
    if (!header) throw notFound("product", productId);
    let dropped = 0;
    let lost = 0;
    let model = modelOf(emptyState(), this.checkpointHistory);
    const snap = await this.authority.get(projectId, "snapshot", productId);
    if (snap) {
      const parsed = SnapshotRecord.safeParse(snap.value);
      if (parsed.success) model = modelOf(parsed.data.state, this.checkpointHistory);
      else dropped++;
    }
    const events = await this.authority.readEvents(projectId, productStream(productId), model.state.seq);
    for (const { seq, event } of events) {
      // A gap in the sequence is a lost record: counted like one that does not parse (guarantee 4).
      const missing = missingBefore(model.state.seq, seq);
      dropped += missing;
      lost += missing;
      const parsed = ProductEvent.safeParse(event);
      if (!parsed.success) {
        dropped++;
        lost++;
        model.state.seq = seq;
        continue;
      }
      applyEvent(model, parsed.data, seq);
    }
    if (model.state.productId !== productId) throw notFound("product", productId);
    // Revisions cached from earlier writes of this process may be stale: another process may have written since.
    this.forgetRevisions(productId);
    // The tail just replayed counts toward the next compaction, so crash after crash cannot grow it without bound.
    this.eventsSinceSnapshot.set(productId, events.length);
    this.bytesSinceSnapshot.set(
      productId,
      events.reduce((n, e) => n + jsonLength(e.event), 0),
    );
    if (snap) this.snapshotBytes.set(productId, jsonLength(snap.value));
    return { model, dropped, lost };
  }

  /**
   * Rebuilds the state as it was right after event `seq` (for rollback), replaying from the start of the stream.
   * Invalid events are skipped and counted, as in `load`.
   */
  async stateAt(projectId: string, productId: string, seq: number): Promise<LoadedProduct> {
    const model = modelOf(emptyState(), this.checkpointHistory);
    let dropped = 0;
    const events = await this.authority.readEvents(projectId, productStream(productId), 0);
    let last = 0;
    for (const { seq: s, event } of events) {
      if (s > seq) break;
      dropped += missingBefore(last, s);
      last = s;
      const parsed = ProductEvent.safeParse(event);
      if (!parsed.success) {
        dropped++;
        continue;
      }
      applyEvent(model, parsed.data, s);
    }
    return { model, dropped, lost: dropped };
  }

  /**
   * Brings a loaded model up to date with events other processes appended since it was read (validated one by one;
   * invalid ones are skipped and counted, as in `load`). When anything new was found, the cached header and snapshot
   * revisions of the product are forgotten, since their writers may have changed them too. Never writes.
   * Returns how many events were applied and dropped.
   */
  async catchUp(model: ProductModel): Promise<{ applied: number; dropped: number }> {
    const s = model.state;
    const events = await this.authority.readEvents(s.projectId, productStream(s.productId), s.seq);
    let applied = 0;
    let dropped = 0;
    for (const { seq, event } of events) {
      if (seq <= model.state.seq) continue;
      dropped += missingBefore(model.state.seq, seq);
      const parsed = ProductEvent.safeParse(event);
      if (!parsed.success) {
        dropped++;
        model.state.seq = seq;
        continue;
      }
      applyEvent(model, parsed.data, seq);
      applied++;
    }
    if (events.length > 0) this.forgetRevisions(s.productId);
    return { applied, dropped };
  }

  // -------------------------------------------------------------------------------------------------------------
  // Leases (guarantee 6; the policy is in lease.ts)

  /**
   * Reads a product's lease. `lease` is `null` when there is no record or when the record does not parse (an invalid
   * lease proves no live owner; `invalid` says which); `revision` is the record's revision either way, for a CAS
   * take-over. Never writes.
   */
  async readLease(
    projectId: string,
    productId: string,
  ): Promise<{ lease: LeaseRecord | null; revision: number | null; invalid: boolean }> {
    const rec = await this.authority.get(projectId, "lease", productId);
    if (!rec) return { lease: null, revision: null, invalid: false };
    const parsed = LeaseRecord.safeParse(rec.value);
    return parsed.success
      ? { lease: parsed.data, revision: rec.revision, invalid: false }
      : { lease: null, revision: rec.revision, invalid: true };
  }

  /**
   * Writes a product's lease by compare-and-swap (`expectedRevision: null` = must not exist) and returns the new
   * revision. Throws `AuthorityConflict` when someone else wrote it first, `AuthorityFailure` when the write failed.
   */
  async putLease(projectId: string, productId: string, lease: LeaseRecord, expectedRevision: number | null): Promise<number> {
    const { revision } = await this.authority.put(projectId, "lease", productId, lease, expectedRevision);
    return revision;
  }

  /** Deletes a product's lease if it is still at `expectedRevision`; `false` when it was gone or changed. */
  async deleteLease(projectId: string, productId: string, expectedRevision: number): Promise<boolean> {
    try {
      return await this.authority.delete(projectId, "lease", productId, expectedRevision);
    } catch (err) {
      if (err instanceof AuthorityConflict) return false;
      throw err;
    }
  }

  /**
   * Appends events at the model's current sequence number (CAS) and, only once they are durable, applies them to
   * the model. Throws `AuthorityConflict` when someone else wrote first (the caller must stop driving the product)
   * and `AuthorityFailure` when the write failed (guarantee 2). On any throw the model is unchanged.
   */
  async append(model: ProductModel, events: ProductEvent[]): Promise<void> {
    if (events.length === 0) return;
    const projectId = events[0]?.type === "created" ? events[0].projectId : model.state.projectId;
    const productId = events[0]?.type === "created" ? events[0].productId : model.state.productId;
    const from = model.state.seq;
    await this.authority.appendEvents(projectId, productStream(productId), events, from);
    events.forEach((e, i) => applyEvent(model, e, from + i + 1));
    this.eventsSinceSnapshot.set(productId, (this.eventsSinceSnapshot.get(productId) ?? 0) + events.length);
    this.bytesSinceSnapshot.set(productId, (this.bytesSinceSnapshot.get(productId) ?? 0) + jsonLength(events));
  }

  private readonly eventsSinceSnapshot = new Map<string, number>();
  /** JSON length of the events appended since the last snapshot, and of that snapshot (compaction policy). */
  private readonly bytesSinceSnapshot = new Map<string, number>();
  private readonly snapshotBytes = new Map<string, number>();
  private readonly headerRevisions = new Map<string, number>();
  private readonly snapshotRevisions = new Map<string, number>();

  /**
   * Writes the product header used by `product.list`, and a snapshot when enough events accumulated (amortised O(1)
   * per event). Called at quiescent points (after each settled wave) and on phase changes.
   */
  async writeHeader(model: ProductModel): Promise<void> {
    const s = model.state;
    const header: ProductHeaderRecord = {
      v: 1,
      productId: s.productId,
      projectId: s.projectId,
      name: s.name,
      phase: s.phase,
      progress: progressOfModel(model),
      createdAt: s.createdAt,
      updatedAt: s.updatedAt,
      ...(s.sessionId !== undefined ? { sessionId: s.sessionId } : {}),
    };
    this.headerRevisions.set(
      s.productId,
      await this.putTracked(s.projectId, "product", s.productId, header, this.headerRevisions),
    );
    if ((this.eventsSinceSnapshot.get(s.productId) ?? 0) < SNAPSHOT_MIN_EVENTS) return;
    // The last snapshot's size; before the first one, the state's size now (measured once, then kept: amortised O(1)).
    let size = this.snapshotBytes.get(s.productId);
    if (size === undefined) {
      size = jsonLength({ v: 1, state: s });
      this.snapshotBytes.set(s.productId, size);
    }
    if ((this.bytesSinceSnapshot.get(s.productId) ?? 0) >= SNAPSHOT_BYTES_FACTOR * size)
      await this.writeSnapshot(model);
  }

  /** Writes a full snapshot of the model (compaction point). */
  async writeSnapshot(model: ProductModel): Promise<void> {
    const s = model.state;
    const value = { v: 1 as const, state: s };
    this.snapshotRevisions.set(
      s.productId,
      await this.putTracked(s.projectId, "snapshot", s.productId, value, this.snapshotRevisions),
    );
    this.eventsSinceSnapshot.set(s.productId, 0);
    this.bytesSinceSnapshot.set(s.productId, 0);
    this.snapshotBytes.set(s.productId, jsonLength(value));
  }

  /**
   * Puts a record whose only writer is the product's owner. The revision we last wrote is tracked; if unknown (first
   * write by this process) it is read once. A conflict means another process wrote it: rethrown (guarantee 6).
   */
  private async putTracked(
    projectId: string,
    kind: string,
    id: string,
    value: object,
    revisions: Map<string, number>,
  ): Promise<number> {
    let expected = revisions.get(id);
    if (expected === undefined) {
      const current = await this.authority.get(projectId, kind, id);
      expected = current ? current.revision : 0;
    }
    const { revision } = await this.authority.put(projectId, kind, id, value, expected === 0 ? null : expected);
    return revision;
  }

  /**
   * Forgets the cached header and snapshot revisions of a product (another process may have written them), so the
   * next write reads the current revision once. Keeps the compaction counters.
   */
  forgetRevisions(productId: string): void {
    this.headerRevisions.delete(productId);
    this.snapshotRevisions.delete(productId);
  }

  /** Forgets cached revisions of a product (after another process may have written it). */
  forget(productId: string): void {
    this.forgetRevisions(productId);
    this.headerRevisions.delete(productId);
    this.snapshotRevisions.delete(productId);
    this.eventsSinceSnapshot.delete(productId);
    this.bytesSinceSnapshot.delete(productId);
    this.snapshotBytes.delete(productId);
  }

  /**
   * Deletes a product's header, snapshot and index records. The event stream cannot be deleted through the
   * authority port (PROTOCOL.md section 7 has no such method); without its header the product no longer exists.
   */
  async delete(productId: string): Promise<boolean> {
    const projectId = await this.projectOf(productId);
    if (!projectId) return false;
    const had = await this.authority.delete(projectId, "product", productId);
    await this.authority.delete(projectId, "snapshot", productId);
    await this.authority.delete(projectId, "lease", productId);
    await this.authority.delete(INDEX_PROJECT, "product-index", productId);
    this.forget(productId);
    return had;
  }

  /**
   * Lists product headers, of one project or of every project the index knows. Invalid headers are skipped and
   * counted. Never writes.
   */
  async listHeaders(projectId?: string, phase?: Phase): Promise<{ headers: ProductHeaderRecord[]; dropped: number }> {
    const { records, dropped } = await listIndexedRecords(this.authority, {
      ...(projectId !== undefined ? { projectId } : {}),
      indexKind: "product-index",
      kind: "product",
      schema: ProductHeaderRecord,
    });
    const headers = phase === undefined ? records : records.filter((h) => h.phase === phase);
    headers.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
    return { headers, dropped };
  }
}

/** How many sequence numbers are missing between the last applied event `previous` and the next one read, `seq`. */
function missingBefore(previous: number, seq: number): number {
  return seq > previous + 1 ? seq - previous - 1 : 0;
}
