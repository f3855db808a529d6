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
import { DomainError, notFound } from "../errors.js";
import {
  INDEX_PROJECT,
  ProductEvent,
  ProductHeaderRecord,
  ProductIndexRecord,
  SnapshotRecord,
  productStream,
  type ProductState,
} from "./records.js";
import { applyEvent, emptyState, modelOf, progressOfModel, type ProductModel } from "./state.js";

/** A model loaded from the authority, with what had to be skipped. */
export interface LoadedProduct {
  model: ProductModel;
  /** Records (events or snapshot) that failed validation and were skipped (guarantee 4). */
  dropped: number;
}

/** Write snapshots so that loading replays at most about this many events, or the task count if larger. */
const SNAPSHOT_EVERY_EVENTS = 500;

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
    let model = modelOf(emptyState(), this.checkpointHistory);
    const snap = await this.authority.get(projectId, "snapshot", productId);
    if (snap) {
      const parsed = SnapshotRecord.safeParse(snap.value);
      if (parsed.success) model = modelOf(parsed.data.state, this.checkpointHistory);
      else dropped++;
    }
    const events = await this.authority.readEvents(projectId, productStream(productId), model.state.seq);
    for (const { seq, event } of events) {
      const parsed = ProductEvent.safeParse(event);
      if (!parsed.success) {
        dropped++;
        model.state.seq = seq;
        continue;
      }
      applyEvent(model, parsed.data, seq);
    }
    if (model.state.productId !== productId) throw notFound("product", productId);
    return { model, dropped };
  }

  /**
   * Rebuilds the state as it was right after event `seq` (for rollback), replaying from the start of the stream.
   * Invalid events are skipped and counted, as in `load`.
   */
  async stateAt(projectId: string, productId: string, seq: number): Promise<LoadedProduct> {
    const model = modelOf(emptyState(), this.checkpointHistory);
    let dropped = 0;
    const events = await this.authority.readEvents(projectId, productStream(productId), 0);
    for (const { seq: s, event } of events) {
      if (s > seq) break;
      const parsed = ProductEvent.safeParse(event);
      if (!parsed.success) {
        dropped++;
        continue;
      }
      applyEvent(model, parsed.data, s);
    }
    return { model, dropped };
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
  }

  private readonly eventsSinceSnapshot = new Map<string, number>();
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
    const since = this.eventsSinceSnapshot.get(s.productId) ?? 0;
    if (since >= Math.max(SNAPSHOT_EVERY_EVENTS, s.tasks.length)) await this.writeSnapshot(model);
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

  /** Forgets cached revisions of a product (after another process may have written it). */
  forget(productId: string): void {
    this.headerRevisions.delete(productId);
    this.snapshotRevisions.delete(productId);
    this.eventsSinceSnapshot.delete(productId);
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
    await this.authority.delete(INDEX_PROJECT, "product-index", productId);
    this.forget(productId);
    return had;
  }

  /**
   * Lists product headers, of one project or of every project the index knows. Invalid headers are skipped and
   * counted. Never writes.
   */
  async listHeaders(projectId?: string, phase?: Phase): Promise<{ headers: ProductHeaderRecord[]; dropped: number }> {
    const projects = new Set<string>();
    if (projectId !== undefined) projects.add(projectId);
    else {
      const index = await this.authority.list(INDEX_PROJECT, "product-index");
      for (const info of index) {
        const rec = await this.authority.get(INDEX_PROJECT, "product-index", info.id);
        const parsed = rec ? ProductIndexRecord.safeParse(rec.value) : undefined;
        if (parsed?.success) projects.add(parsed.data.projectId);
      }
    }
    const headers: ProductHeaderRecord[] = [];
    let dropped = 0;
    for (const p of [...projects].sort()) {
      for (const info of await this.authority.list(p, "product")) {
        const rec = await this.authority.get(p, "product", info.id);
        if (!rec) continue;
        const parsed = ProductHeaderRecord.safeParse(rec.value);
        if (!parsed.success) {
          dropped++;
          continue;
        }
        if (phase === undefined || parsed.data.phase === phase) headers.push(parsed.data);
      }
    }
    headers.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
    return { headers, dropped };
  }
}

/** True when the error means another owner wrote first (guarantee 6). */
export function isConflict(err: unknown): err is AuthorityConflict {
  return err instanceof AuthorityConflict;
}

export type { ProductState };
export { DomainError };
