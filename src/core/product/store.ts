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
import { STORED_TEXT_LENGTH } from "../ports.js";
import { notFound } from "../errors.js";
import { listMatchingRecords } from "../indexed-records.js";
import { byCreation, listHeaderEntries, listProductHeaders, type HeaderList, type HeaderQuery } from "./header-list.js";
import { streamHeaderEntries, type HeaderBatchSink } from "./header-stream.js";
import { checkProductState } from "./integrity.js";
import {
  INDEX_PROJECT,
  ProductEvent,
  ProductHeaderRecord,
  ProductIndexRecord,
  SnapshotRecord,
  productStream,
} from "./records.js";
import { compactStream, hasGap, missingBefore, snapshotId } from "./compaction.js";
import { LIVE_OUTPUT_KIND } from "./live-output.js";
import { LeaseRecords, type LeaseRead } from "./lease-records.js";
import { evolve } from "./evolve.js";
import { foldStored } from "./event-journal.js";
import { emptyState, modelOf, progressOfModel, resetModel, type ProductModel } from "./state.js";
import type { CheckpointRef, ProductState, LeaseRecord } from "./records.js";

export type { LeaseRead } from "./lease-records.js";

/** A model loaded from the authority, with what had to be skipped. */
export interface LoadedProduct {
  model: ProductModel;
  /** Records (events or snapshot) that failed validation and were skipped (guarantee 4). */
  dropped: number;
  /**
   * Of those, the events that were lost (invalid or missing from the sequence): state they carried is unknown, so the
   * product must not run again (fail closed). An invalid snapshot loses nothing while the events it covers are still
   * stored (they are replayed instead); once they were compacted away, they count as missing.
   */
  lost: number;
  /**
   * The domain rule the loaded state breaks as a whole (guarantee 15: a dependency on an unknown task, duplicate ids,
   * a cycle, a task event for a task the plan does not have), in one sentence; absent when the state is whole. A
   * product with one is never run again (fail closed), like one that lost events.
   */
  invalid?: string;
}

/** The state of a product at one of its checkpoints, rebuilt for a rollback, with what it could not read. */
export interface CheckpointState {
  model: ProductModel;
  /** Events the checkpoint needs that did not parse or are missing (rollback refuses when non-zero). */
  dropped: number;
  /** The rule the rebuilt state breaks as a whole (guarantee 15); absent when whole. */
  invalid?: string;
}

/** A parsed snapshot and what it cost to store. */
type Snapshot = { state: ProductState; bytes: number };

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
  /** Where each model's last `catchUp` with a change mark left it (issue 16: skip the read while nothing changed). */
  private readonly caughtUp = new WeakMap<ProductModel, { mark: string; seq: number }>();
  /** Lease records (guarantee 6; the policy is in lease.ts). */
  private readonly leases: LeaseRecords;

  constructor(
    private readonly authority: RunStateAuthority,
    private readonly checkpointHistory: number,
  ) {
    this.leases = new LeaseRecords(authority);
  }

  /** The authority's backend name (`memory`, `sqlite`, `host`…). */
  get backend(): string {
    return this.authority.name;
  }

  /** Records a new product: its index entry and its first events. Throws `AuthorityConflict` if the id exists. */
  async create(projectId: string, productId: string, events: ProductEvent[]): Promise<ProductModel> {
    await this.authority.put(INDEX_PROJECT, "product-index", productId, { v: 1, projectId }, null);
    const model = modelOf(emptyState(), this.checkpointHistory);
    await this.append(model, events);
    // No header can exist: its index record was just created, and a delete removes the index record last. The header
    // is created without reading it first (issue 32: one statement fewer per product).
    this.headerRevisions.set(productId, 0);
    await this.writeHeader(model);
    return model;
  }

  /**
   * Which project owns `productId`: the one its index record names, or, when that record is missing or does not
   * parse, the project whose event stream starts with the product's `created` event (the product stays reachable
   * through its events: an index record is only an index). `undefined` when neither finds it. Never writes.
   */
  async projectOf(productId: string): Promise<string | undefined> {
    const rec = await this.authority.get(INDEX_PROJECT, "product-index", productId);
    if (rec) {
      const parsed = ProductIndexRecord.safeParse(rec.value);
      if (parsed.success) return parsed.data.projectId;
    }
    for (const projectId of await this.candidateProjects()) {
      const [first] = await this.authority.readEvents(projectId, productStream(productId), 0, 1);
      const parsed = first ? ProductEvent.safeParse(first.event) : undefined;
      if (parsed?.success && parsed.data.type === "created" && parsed.data.productId === productId) {
        if (parsed.data.projectId === projectId) return projectId;
      }
    }
    return undefined;
  }

  /**
   * Projects that may hold a product: every project the authority knows (`listProjects`), else (a host) every
   * project a valid product or goal index record names. Never writes.
   */
  private async candidateProjects(): Promise<string[]> {
    if (this.authority.listProjects) {
      return (await this.authority.listProjects()).filter((p) => p !== INDEX_PROJECT);
    }
    const projects = new Set<string>();
    for (const kind of ["product-index", "goal-index"]) {
      for (const info of await this.authority.list(INDEX_PROJECT, kind)) {
        const rec = await this.authority.get(INDEX_PROJECT, kind, info.id);
        const parsed = rec ? ProductIndexRecord.safeParse(rec.value) : undefined;
        if (parsed?.success) projects.add(parsed.data.projectId);
      }
    }
    return [...projects].sort();
  }

  /**
   * Loads a product: the latest valid snapshot plus every later event, each validated (guarantee 4), then the state
   * as a whole (guarantee 15: `invalid`). Throws `DomainError(not_found)` when the product does not exist (no event
   * stream starting with its `created` event). The header record is not needed: it is only an index.
   */
  async load(productId: string): Promise<LoadedProduct> {
    const projectId = await this.projectOf(productId);
    if (!projectId) throw notFound("product", productId);
    const model = modelOf(emptyState(), this.checkpointHistory);
    const { dropped, lost, events, bytes, snapshotBytes } = await this.readInto(model, projectId, productId);
    if (model.state.productId !== productId) throw notFound("product", productId);
    // Revisions cached from earlier writes of this process may be stale: another process may have written since.
    this.forgetRevisions(productId);
    // The tail just replayed counts toward the next compaction, so crash after crash cannot grow it without bound.
    this.eventsSinceSnapshot.set(productId, events);
    this.bytesSinceSnapshot.set(productId, bytes);
    if (snapshotBytes !== undefined) this.snapshotBytes.set(productId, snapshotBytes);
    const invalid = checkProductState(model.state, productId);
    return { model, dropped, lost, ...(invalid !== undefined ? { invalid } : {}) };
  }

  /**
   * Brings `model` up to date: starts from the latest valid snapshot when the model is behind it, then applies every
   * later event, validated one by one (gaps and events that do not parse are counted as dropped and lost). When the
   * events right after the model's position were compacted away meanwhile, it starts again from the snapshot that
   * covers them. Never writes.
   */
  private async readInto(
    model: ProductModel,
    projectId: string,
    productId: string,
  ): Promise<{ dropped: number; lost: number; events: number; bytes: number; snapshotBytes?: number }> {
    let dropped = 0;
    let lost = 0;
    let snapshotBytes: number | undefined;
    let snapshotDropped = false;
    const fromSnapshot = async (): Promise<boolean> => {
      const found = await this.latestSnapshot(projectId, productId, Number.MAX_SAFE_INTEGER);
      if (found.invalid > 0 && !snapshotDropped) {
        dropped += found.invalid;
        snapshotDropped = true;
      }
      const snap = found.snapshot;
      if (!snap || snap.state.seq <= model.state.seq) return false;
      resetModel(model, snap.state);
      snapshotBytes = snap.bytes;
      return true;
    };
    if (model.state.seq === 0) await fromSnapshot();
    let events = await this.authority.readEvents(projectId, productStream(productId), model.state.seq);
    // Events after this position were compacted away (a snapshot covers them): start from the snapshot. Compaction
    // may keep events a kept checkpoint needs, so the gap is not always right after this position.
    if (hasGap(events, model.state.seq) && (await fromSnapshot())) {
      events = await this.authority.readEvents(projectId, productStream(productId), model.state.seq);
    }
    let applied = 0;
    let bytes = 0;
    for (const stored of events) {
      const { seq, event } = stored;
      if (seq <= model.state.seq) continue;
      // A gap in the sequence is a lost record: counted like one that does not parse (guarantee 4).
      const missing = missingBefore(model.state.seq, seq);
      dropped += missing;
      lost += missing;
      applied++;
      bytes += stored[STORED_TEXT_LENGTH] ?? jsonLength(event);
      const parsed = ProductEvent.safeParse(event);
      if (!parsed.success) {
        dropped++;
        lost++;
        model.state.seq = seq;
        continue;
      }
      evolve(model, parsed.data, seq);
    }
    return { dropped, lost, events: applied, bytes, ...(snapshotBytes !== undefined ? { snapshotBytes } : {}) };
  }

  /**
   * Rebuilds the state of a product at one of its kept checkpoints (for rollback): from the latest snapshot at or
   * before the checkpoint (compaction keeps one for every kept checkpoint that needs it), else from the start of the
   * stream, plus the events up to the checkpoint. Reads only what the checkpoint needs, never the whole history. Every
   * event it needs that does not parse or is missing is counted in `dropped` (the caller refuses to roll back then),
   * and the state is checked as a whole (`invalid`, guarantee 15). Never writes.
   */
  async stateAtCheckpoint(projectId: string, productId: string, ref: CheckpointRef): Promise<CheckpointState> {
    const model = modelOf(emptyState(), this.checkpointHistory);
    const base = await this.latestSnapshot(projectId, productId, ref.seq);
    if (base.snapshot) resetModel(model, base.snapshot.state);
    const dropped = await this.replayUpTo(model, projectId, productId, ref.seq, () => undefined);
    const invalid = checkProductState(model.state, productId);
    return { model, dropped, ...(invalid !== undefined ? { invalid } : {}) };
  }

  /**
   * The newest valid snapshot of a product whose sequence number is at most `maxSeq`, and how many newer candidates
   * did not parse (they are skipped: the events they cover are replayed instead). Never writes.
   */
  private async latestSnapshot(
    projectId: string,
    productId: string,
    maxSeq: number,
  ): Promise<{ snapshot?: Snapshot; invalid: number }> {
    const ids = (await this.authority.list(projectId, "snapshot", `${productId}/`)).map((info) => info.id).reverse();
    ids.push(productId); // the record of the days before compaction, oldest of all
    let invalid = 0;
    for (const id of ids) {
      const seq = id === productId ? undefined : Number(id.slice(productId.length + 1));
      if (seq !== undefined && !(seq <= maxSeq)) continue;
      const rec = await this.authority.get(projectId, "snapshot", id);
      if (!rec) continue;
      const parsed = SnapshotRecord.safeParse(rec.value);
      const state = parsed.success ? parsed.data.state : undefined;
      if (!state || state.productId !== productId || (seq !== undefined && state.seq !== seq)) {
        invalid++;
        continue;
      }
      if (state.seq > maxSeq) continue;
      return { snapshot: { state, bytes: jsonLength(rec.value) }, invalid };
    }
    return { invalid };
  }

  /**
   * Applies the events `(model.state.seq, upTo]` to `model`, calling `at(seq)` after each one applied, and returns
   * how many of them did not parse or are missing (a state that skipped them is unknown). Never writes.
   */
  private async replayUpTo(
    model: ProductModel,
    projectId: string,
    productId: string,
    upTo: number,
    at: (seq: number) => void,
  ): Promise<number> {
    if (upTo <= model.state.seq) return 0;
    const events = await this.authority.readEvents(
      projectId,
      productStream(productId),
      model.state.seq,
      upTo - model.state.seq,
    );
    let dropped = foldStored<ProductEvent>(
      events.filter((e) => e.seq <= upTo),
      {
        position: () => model.state.seq,
        parse: (raw) => {
          const parsed = ProductEvent.safeParse(raw);
          return parsed.success ? parsed.data : undefined;
        },
        apply: (event, seq) => {
          evolve(model, event, seq);
          at(seq);
        },
        skip: (seq) => {
          model.state.seq = seq;
          at(seq);
        },
      },
    );
    dropped += Math.max(0, upTo - model.state.seq);
    return dropped;
  }

  /**
   * Brings a loaded model up to date with events other processes appended since it was read (validated one by one;
   * invalid ones are skipped and counted, as in `load`; events compacted away meanwhile are taken from the snapshot
   * that covers them). When anything new was found, the cached header and snapshot revisions of the product are
   * forgotten, since their writers may have changed them too. Never writes. Returns how many events were applied and
   * dropped, and the rule the state now breaks as a whole, if any (guarantee 15). With `mark` (`changeMark()`, taken
   * before the call): when the last catch-up of this model was at the same mark and left it at the sequence number it
   * has now, nothing can have been appended since, so the authority is not read and the state is not checked again
   * (issue 16): `invalid` is then absent, the earlier call having reported it. With `mark`, when nothing new was found
   * and the product is no longer in the store (another process deleted it: its index record and its created event are
   * gone, as `load` would find), `deleted` is true and the model is left as it was; authorities without change marks
   * are not asked (see the note in the body).
   */
  async catchUp(
    model: ProductModel,
    mark?: string,
  ): Promise<{ applied: number; dropped: number; invalid?: string; deleted?: true }> {
    const s = model.state;
    const before = s.seq;
    const last = mark === undefined ? undefined : this.caughtUp.get(model);
    if (last === undefined || last.mark !== mark || last.seq !== before) {
      const { dropped, events } = await this.readInto(model, s.projectId, s.productId);
      // Only where the store tells that something changed (the mark moved): there the look is one read per change
      // anywhere in the store; without marks it would be one more request on every status (and a host authority's
      // recorded runState/* sequence would change).
      const looked = mark !== undefined && events === 0 && model.state.seq === before;
      if (looked && (await this.projectOf(s.productId)) === undefined) {
        this.forget(s.productId);
        return { applied: 0, dropped, deleted: true };
      }
      if (events > 0 || model.state.seq !== before) this.forgetRevisions(model.state.productId);
      if (mark !== undefined) this.caughtUp.set(model, { mark, seq: model.state.seq });
      const invalid = checkProductState(model.state, model.state.productId);
      return { applied: events, dropped, ...(invalid !== undefined ? { invalid } : {}) };
    }
    // The state is the one the last catch-up checked as a whole (only events change its structure, and they move the
    // sequence number), and that verdict was returned then.
    return { applied: 0, dropped: 0 };
  }

  /** The authority's `changeMark` now, `undefined` when it has none (then `catchUp` and `readLease` always read). */
  changeMark(): string | undefined {
    return this.authority.changeMark?.();
  }

  // -------------------------------------------------------------------------------------------------------------
  // Leases (guarantee 6; the policy is in lease.ts)

  /** Reads a product's lease (lease-records.ts `LeaseRecords.read`). Never writes. */
  readLease(projectId: string, productId: string, mark?: string): Promise<LeaseRead> {
    return this.leases.read(projectId, productId, mark);
  }

  /** Writes a product's lease by compare-and-swap (lease-records.ts `LeaseRecords.put`); resolves to its revision. */
  putLease(projectId: string, productId: string, lease: LeaseRecord, expectedRevision: number | null): Promise<number> {
    return this.leases.put(projectId, productId, lease, expectedRevision);
  }

  /** Deletes a lease still at `expectedRevision` (lease-records.ts `LeaseRecords.delete`). */
  deleteLease(projectId: string, productId: string, expectedRevision: number, announce = true): Promise<boolean> {
    return this.leases.delete(projectId, productId, expectedRevision, announce);
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
    const appended = await this.authority.appendEvents(projectId, productStream(productId), events, from);
    events.forEach((e, i) => evolve(model, e, from + i + 1));
    // The JSON of the list is its items' texts, a comma between each two and the brackets (issue 34: from the texts the
    // authority stored when it says how long they were, not by serialising the batch again).
    const texts = appended[STORED_TEXT_LENGTH];
    const bytes = texts !== undefined ? texts + events.length + 1 : jsonLength(events);
    this.eventsSinceSnapshot.set(productId, (this.eventsSinceSnapshot.get(productId) ?? 0) + events.length);
    this.bytesSinceSnapshot.set(productId, (this.bytesSinceSnapshot.get(productId) ?? 0) + bytes);
  }

  private readonly eventsSinceSnapshot = new Map<string, number>();
  /** JSON length of the events appended since the last snapshot, and of that snapshot (compaction policy). */
  private readonly bytesSinceSnapshot = new Map<string, number>();
  private readonly snapshotBytes = new Map<string, number>();
  private readonly headerRevisions = new Map<string, number>();
  private readonly headerTexts = new Map<string, string>(); // the JSON written at that revision
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
    // The header last written at the revision known is not written again (issue 34: the end of a run wrote it twice).
    const text = JSON.stringify(header);
    if (!this.headerRevisions.has(s.productId) || this.headerTexts.get(s.productId) !== text) {
      const put = this.putTracked(s.projectId, "product", s.productId, header, this.headerRevisions);
      this.headerRevisions.set(s.productId, await put);
      this.headerTexts.set(s.productId, text);
    }
    await this.compactIfDue(model);
  }

  /**
   * Writes a snapshot and compacts behind it (`writeSnapshot`) once enough was appended since the last one: at least
   * `SNAPSHOT_MIN_EVENTS` events and `SNAPSHOT_BYTES_FACTOR` times the last snapshot's size (guarantee 14: a load
   * replays a bounded tail). Nothing otherwise. Throws what the authority throws.
   */
  async compactIfDue(model: ProductModel): Promise<void> {
    const s = model.state;
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

  /**
   * Writes a full snapshot of the model (record `snapshot/<productId>/<seq>`) and compacts behind it (guarantee 14):
   * what a load or a kept checkpoint still needs is kept — the new snapshot, for each kept checkpoint the latest
   * snapshot at or before it and the events from there up to the checkpoint — and every other snapshot and event is
   * deleted. A rollback therefore reads one snapshot and the events up to its checkpoint, never the whole history.
   * When the authority cannot prune (a host), only the snapshot is written. Throws what the authority throws.
   */
  async writeSnapshot(model: ProductModel): Promise<void> {
    const s = model.state;
    const id = snapshotId(s.productId, s.seq);
    const value = { v: 1 as const, state: s };
    if (!(await this.authority.get(s.projectId, "snapshot", id))) {
      await this.authority.put(s.projectId, "snapshot", id, value, null);
    }
    this.eventsSinceSnapshot.set(s.productId, 0);
    this.bytesSinceSnapshot.set(s.productId, 0);
    this.snapshotBytes.set(s.productId, jsonLength(value));
    const prune = this.authority.pruneEvents;
    if (prune)
      await compactStream(this.authority, model, (before, after) =>
        prune.call(this.authority, s.projectId, productStream(s.productId), before, after),
      );
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
   * Before the lease holder writes its header over a header it did not write (journal.ts): true when the header exists
   * and the stream holds no event past `model`'s, i.e. the header found indexes events this model covers (an earlier
   * owner's late write); the next `writeHeader` then writes over the revision found. False, changing nothing, when
   * the header is gone (a delete, which removes the header first) or another process appended events (its header is
   * the truth, guarantee 6). Two reads; throws what the authority throws.
   */
  async adoptHeaderRevision(model: ProductModel): Promise<boolean> {
    const { projectId, productId, seq } = model.state;
    const header = await this.authority.get(projectId, "product", productId);
    if (!header) return false;
    if ((await this.authority.readEvents(projectId, productStream(productId), seq, 1)).length > 0) return false;
    this.headerRevisions.set(productId, header.revision);
    this.headerTexts.delete(productId);
    return true;
  }

  /** Forgets a product's cached header and snapshot revisions (another may have written them); keeps counters. */
  forgetRevisions(productId: string): void {
    this.headerRevisions.delete(productId);
    this.headerTexts.delete(productId);
    this.snapshotRevisions.delete(productId);
  }

  /** Forgets cached revisions of a product (after another process may have written it). */
  forget(productId: string): void {
    this.forgetRevisions(productId);
    this.eventsSinceSnapshot.delete(productId);
    this.bytesSinceSnapshot.delete(productId);
    this.snapshotBytes.delete(productId);
  }

  /**
   * Deletes everything a product stored (guarantee 14: a deleted product leaves nothing behind): its header, event
   * stream, snapshots, lease and, last, its index record, so a delete cut short by a crash can be
   * repeated. Returns `false` when none of them existed.
   */
  async delete(productId: string): Promise<boolean> {
    const projectId = await this.projectOf(productId);
    if (!projectId) return false;
    let had = await this.authority.delete(projectId, "product", productId);
    had = (await this.authority.deleteStream(projectId, productStream(productId))) || had;
    had = (await this.authority.delete(projectId, "snapshot", productId)) || had;
    for (const info of await this.authority.list(projectId, "snapshot", `${productId}/`))
      had = (await this.authority.delete(projectId, "snapshot", info.id)) || had;
    await this.authority.delete(projectId, "lease", productId);
    for (const info of await this.authority.list(projectId, LIVE_OUTPUT_KIND, `${productId}/`))
      await this.authority.delete(projectId, LIVE_OUTPUT_KIND, info.id);
    had = (await this.authority.delete(INDEX_PROJECT, "product-index", productId)) || had;
    this.forget(productId);
    return had;
  }

  /** Product headers for `product.list`, all or one page, oldest first (header-list.ts). Never writes. */
  listHeaders(query: HeaderQuery = {}): Promise<HeaderList> {
    return listProductHeaders(this.authority, query);
  }

  /** Every header for `product.list`'s answer text, or `undefined` (header-list.ts `listHeaderEntries`). Never writes. */
  listHeaderEntries(query: Omit<HeaderQuery, "page">): ReturnType<typeof listHeaderEntries> {
    return listHeaderEntries(this.authority, query);
  }
  /** The same in order, a batch at a time, or `undefined` (header-stream.ts `streamHeaderEntries`). Never writes. */
  streamHeaderEntries(query: Omit<HeaderQuery, "page">, onBatch: HeaderBatchSink) {
    return streamHeaderEntries(this.authority, query, onBatch);
  }

  /**
   * The valid headers whose phase is `phase`, oldest first (the recovery pass's read, issue 32): where the authority
   * filters (`listAcrossProjects`), only headers whose text holds `"phase":"<phase>"` (as every version wrote them)
   * are read, so a pass costs what the executing products cost, not what every stored one does. Never writes.
   */
  async headersInPhase(phase: Phase): Promise<ProductHeaderRecord[]> {
    const containing = `"phase":${JSON.stringify(phase)}`;
    const { records } = await listMatchingRecords(this.authority, {
      ...{ indexKind: "product-index", kind: "product", schema: ProductHeaderRecord, containing },
      matches: (h) => h.phase === phase,
    });
    return records.sort(byCreation);
  }

  /** One product's stored header (one read), or null when it has none or it does not parse. Never writes. */
  async headerOf(projectId: string, productId: string): Promise<ProductHeaderRecord | null> {
    const parsed = ProductHeaderRecord.safeParse((await this.authority.get(projectId, "product", productId))?.value);
    return parsed.success ? parsed.data : null;
  }
}
