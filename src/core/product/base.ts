/**
 * The shared state of one product's orchestrator and what every part of it builds on: serialisation (`exclusive`),
 * persistence (write before act, guarantee 1; a failed write pauses, guarantee 2; a refused write fences, guarantee
 * 6), phase and integrity checks (guarantee 4), ownership through the product's lease (lease.ts, guarantee 6), and
 * stopping running workers. The parts of `ProductOrchestrator` (orchestrator.ts) extend it in layers: inputs.ts,
 * planning.ts, execution.ts, control.ts, history.ts, status.ts.
 *
 * This file must never import I/O: time comes from the Clock, cancellation is AbortSignal, the rest are ports.
 */
import type { Phase, TaskState, TaskWorkspace } from "../../../protocol/common.js";
import { TerminalPhases } from "../../../protocol/common.js";
import type { Scheduler } from "../dag/scheduler.js";
import { DomainError, conflict, invalidPhase, notFound, persistenceFailed } from "../errors.js";
import type { RefusedPermission, WorkerResult } from "../ports.js";
import { AuthorityConflict, AuthorityFailure } from "../ports.js";
import type { ProductContext } from "./context.js";
import { ProductLease, holderDetails, type LeaseLoss } from "./lease.js";
import type { ProductEvent } from "./records.js";
import type { ProductModel } from "./state.js";

/** Events as the orchestrator builds them: `v` and `at` are stamped on append. */
export type NewEvent = ProductEvent extends infer E ? (E extends ProductEvent ? Omit<E, "v" | "at"> : never) : never;

export interface RunningTask {
  controller: AbortController;
  attempt: number;
  startedMs: number;
  briefChars: number;
  reportedUsage: boolean;
  /** Permission requests refused during this attempt (kept on the task when it settles). */
  refusals: RefusedPermission[];
  /** Hash of the input this attempt was given (guarantee 7), recorded with its completion. */
  inputHash: string;
  /** The attempt's worktree (isolation `worktree`), removed once its result was written. */
  workspace?: TaskWorkspace;
}

export interface SettledResult {
  /** The attempt's launch record: a result counts only if it belongs to the task's latest launch. */
  entry: RunningTask;
  taskId: string;
  attempt: number;
  result: WorkerResult;
  briefChars: number;
  reportedUsage: boolean;
  inputHash: string;
}

/** Why running workers are being stopped; decides what their tasks become. */
export type StopReason = "pause" | "cancel" | "shutdown" | "reset" | "fenced";

/** The interruption note a task gets when its worker is stopped, by reason. */
export const INTERRUPTION: Record<StopReason, string> = {
  pause: "The product was paused while this task was running; it will run again on resume.",
  cancel: "The product was cancelled while this task was running.",
  shutdown: "The server shut down while this task was running; it will run again on resume.",
  reset: "The task was reset while it was running.",
  fenced: "Another owner took over the product while this task was running.",
};

/** The shared state and the persistence, ownership and stopping of workers every part of the orchestrator uses. */
export abstract class OrchestratorBase {
  /** Records that failed validation when this product was loaded (guarantee 4). */
  dropped = 0;
  /** Events lost when loading (invalid or missing): the product must not run again (guarantee 4). */
  lost = 0;
  /**
   * The domain rule the stored state breaks as a whole, when it does (guarantee 15): the product must not run again.
   * Set on load, on catching up with the authority, and when execution could not start on the stored state.
   */
  invalid: string | undefined = undefined;
  /** True when this orchestrator was built from stored state (not created in this process). */
  loadedFromStore = false;
  /** Set when catching up found that another process deleted the product: every later read or write is `not_found`. */
  deletedElsewhere = false;
  /** True while this process drives execution (holds the product). */
  protected driving = false;
  /** Set when a write was refused: this instance never writes again (guarantee 6). */
  protected fenced = false;
  protected leaderTurn: string | null = null;
  /** Aborts the running leader turn (planning, message or consultation) on cancel, delete and shutdown. */
  protected leaderController: AbortController | null = null;
  protected planningStarted = false;
  protected scheduler: Scheduler | null = null;
  protected readonly running = new Map<string, RunningTask>();
  /** The latest launch of each task whose result has not been taken yet. */
  protected readonly latestLaunch = new Map<string, RunningTask>();
  protected readonly settled: SettledResult[] = [];
  protected pumpScheduled = false;
  protected consultations = 0;
  protected consultQueue: Promise<void> = Promise.resolve();
  protected executingSinceMs: number | null = null;
  protected cancelTimers: (() => void)[] = [];
  protected lock: Promise<unknown> = Promise.resolve();
  protected idleWaiters: (() => void)[] = [];
  /** This product's lease in the authority (guarantee 6): held while this process drives execution. */
  protected readonly lease: ProductLease;
  /** Bumped on every lease acquisition, so a delayed release meant for an earlier holding does nothing. */
  protected leaseEpoch = 0;
  /** A git HEAD probe in flight while driving (the recorded fingerprint follows the workspace). */
  protected headProbe: Promise<void> | null = null;
  protected stopReason: StopReason | null = null;
  /** Set when driving starts: the next wave first prunes leftover worktrees and verifies the branch (guarantee 11). */
  protected pruneBeforeStart = false;
  /** Set once `product.ownershipLost` was sent for this instance. */
  private ownershipLostAnnounced = false;
  /**
   * Bumped by every change of what `product.status` shows that no event records (a failed write pausing the run in
   * memory, guarantee 2): part of the answer version (status.ts `inspectVersioned`).
   */
  protected statusEpoch = 0;
  /** Exclusive sections queued or running (see `exclusive`). */
  private exclusiveSections = 0;

  constructor(
    readonly model: ProductModel,
    protected readonly ctx: ProductContext,
  ) {
    const o = ctx.options;
    this.lease = new ProductLease(
      ctx.store,
      ctx.clock,
      ctx.logger,
      model.state.projectId,
      model.state.productId,
      { owner: o.ownerId ?? "local", ttlMs: o.leaseTtlMs ?? 30_000, renewMs: o.leaseRenewMs ?? 10_000 },
      (loss) => this.onLeaseLost(loss),
      ctx.liveness,
    );
  }

  get productId(): string {
    return this.model.state.productId;
  }

  get phase(): Phase {
    return this.model.state.phase;
  }

  /** True while this process drives the product's execution. */
  get isDriving(): boolean {
    return this.driving;
  }

  /**
   * True once a write of this instance was refused or its lease was taken (guarantee 6): it never writes again. The
   * service replaces a fenced instance with one freshly loaded from the authority on the next write request.
   */
  get isFenced(): boolean {
    return this.fenced;
  }

  /**
   * Re-checks the held lease now, e.g. because another server wrote it or this product's stream (fleet.ts): a
   * take-over fences this instance at once instead of at the next heartbeat. Does nothing when no lease is held.
   */
  async verifyLease(): Promise<void> {
    if (this.lease.held) await this.lease.renewNow();
  }

  /**
   * This server lost its liveness (docs/FLEET.md): drops the lease without writing, stops driving and stops every
   * worker at once (not behind a renewal in flight); the client hears `product.ownershipLost` only once another owner
   * shows (`reportOwnershipLost`). Returns false (and does nothing) when no lease is held.
   */
  fenceNow(): boolean {
    return this.lease.fence();
  }

  /**
   * Sends `product.ownershipLost` for a self-fenced instance once its lease names `newOwner` or is gone (only an
   * owner deletes its lease: another one took over). At most once per instance.
   */
  reportOwnershipLost(newOwner: string | undefined): void {
    if (this.fenced) this.announceOwnershipLost(newOwner);
  }

  /** Resolves once no worker of this instance is running and every settled result was handled. */
  whenStopped(): Promise<void> {
    return this.whenIdle();
  }

  // -------------------------------------------------------------------------------------------------------------
  // Serialisation and persistence

  /** Runs `fn` after every earlier exclusive section of this product finished; errors propagate to the caller only. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    this.exclusiveSections += 1;
    const next = this.lock.then(fn, fn).finally(() => {
      this.exclusiveSections -= 1;
    });
    this.lock = next.catch(() => undefined);
    return next;
  }

  /**
   * True when nothing of this product is going on in this process, so that dropping this instance from memory loses
   * nothing (guarantee 14: memory holds the products being driven or recently read): it does not drive execution,
   * holds no lease, has no worker, settled result, leader turn, timer, probe or operation in flight, nobody waits for
   * it to go idle, and it is not in `planning` (whose leader turn may be about to start). Everything such an instance
   * holds is in the authority: a fresh load rebuilds it. Read-only.
   */
  get isIdle(): boolean {
    return (
      !this.driving &&
      !this.lease.held &&
      this.running.size === 0 &&
      this.latestLaunch.size === 0 &&
      this.settled.length === 0 &&
      !this.pumpScheduled &&
      this.leaderTurn === null &&
      this.leaderController === null &&
      this.cancelTimers.length === 0 &&
      this.idleWaiters.length === 0 &&
      this.headProbe === null &&
      this.exclusiveSections === 0 &&
      this.model.state.phase !== "planning"
    );
  }

  protected now(): string {
    return new Date(this.ctx.clock.now()).toISOString();
  }

  /**
   * Appends events (write before act, guarantee 1). On an authority failure the product pauses with a recorded
   * cause and the client is told (guarantee 2); on a conflict this owner stops for good (guarantee 6). Either way a
   * DomainError is thrown so the caller acts on nothing.
   */
  protected async commit(events: NewEvent[], opts: { header?: boolean } = {}): Promise<void> {
    if (this.fenced) throw conflict({}, `Product ${this.productId}`);
    const at = this.now();
    const stamped = events.map((e) => ({ v: 1, at, ...e }) as ProductEvent);
    const phaseBefore = this.model.state.phase;
    try {
      await this.ctx.store.append(this.model, stamped);
      if (opts.header) await this.ctx.store.writeHeader(this.model);
    } catch (err) {
      throw this.onWriteError(err);
    } finally {
      if (this.model.state.phase !== phaseBefore) this.ctx.onPhaseChange?.(this.productId, this.model.state.phase);
    }
  }

  /** Writes a snapshot now and compacts behind it (store.ts `writeSnapshot`), a write like any other (guarantee 2). */
  protected async compactNow(): Promise<void> {
    if (this.fenced) throw conflict({}, `Product ${this.productId}`);
    try {
      await this.ctx.store.writeSnapshot(this.model);
    } catch (err) {
      throw this.onWriteError(err);
    }
  }

  protected async writeHeader(): Promise<void> {
    try {
      await this.ctx.store.writeHeader(this.model);
    } catch (err) {
      throw this.onWriteError(err);
    }
  }

  protected onWriteError(err: unknown): DomainError {
    if (err instanceof AuthorityConflict) {
      const wasDriving = this.driving || this.lease.held || this.running.size > 0;
      this.fenced = true;
      this.ctx.logger.error({ productId: this.productId, err: err.message }, "write refused: another owner");
      this.stopWorkers("fenced");
      // The other owner's records are the truth now, elapsed time included: this instance's clock stops with it.
      this.stopDriving();
      this.lease.drop();
      if (wasDriving) this.announceOwnershipLost(err.details.owner);
      return conflict(err.details, `Product ${this.productId}`);
    }
    const cause = err instanceof Error ? err.message : String(err);
    if (err instanceof DomainError) return err;
    this.ctx.logger.error({ productId: this.productId, err: cause }, "run-state authority write failed");
    if (!(err instanceof AuthorityFailure)) {
      this.ctx.logger.error({ err }, "unexpected error while persisting");
    }
    const wasActive = !TerminalPhases.includes(this.model.state.phase);
    if (wasActive) {
      this.statusEpoch += 1;
      // Guarantee 2: stop scheduling and pause, in memory, with the cause; the next successful write records it.
      // The run's clock stops with it: the time executed so far is kept in memory, as a pause would record it.
      this.model.state.usage.elapsedMs = this.liveElapsedMs();
      this.stopDriving();
      this.stopWorkers("pause");
      this.releaseWhenIdle();
      if (this.model.state.phase === "executing") {
        this.model.state.phase = "paused";
        this.ctx.onPhaseChange?.(this.productId, "paused");
      }
      this.model.state.recovery = {
        cause: `The run-state authority failed a write: ${cause}`,
        resumable: true,
        remediation:
          "Check the state store (disk space, permissions, the host's run-state service), then call product.resume.",
      };
      this.ctx.notifier.notify("product.persistenceError", {
        productId: this.productId,
        projectId: this.model.state.projectId,
        error: cause,
      });
    }
    return persistenceFailed(cause);
  }

  /**
   * Guarantee 4 (fail closed): a product with stored records that failed validation (or are missing) is never run
   * again — its state could make it repeat completed work or skip work. It can still be read, listed, cancelled and
   * deleted. Throws `invalid_phase` with no allowed phase.
   */
  protected requireIntact(operation: string): void {
    if (this.invalid !== undefined) {
      throw new DomainError(
        "invalid_phase",
        `Product ${this.productId} cannot run: its stored state is not whole (${stripDot(this.invalid)}), so ` +
          `${operation} is refused. Restore the state store from a backup, or delete the product.`,
        { phase: this.phase, allowed: [] },
      );
    }
    if (this.lost === 0) return;
    throw new DomainError(
      "invalid_phase",
      `Product ${this.productId} has ${this.lost} stored ${this.lost === 1 ? "event" : "events"} that failed ` +
        `validation or ${this.lost === 1 ? "is" : "are"} missing, so ${operation} is refused: running it could ` +
        "repeat or skip work. Restore the state store from a backup, or delete the product.",
      { phase: this.phase, allowed: [] },
    );
  }

  protected requirePhase(allowed: readonly Phase[], operation: string): void {
    if (!allowed.includes(this.phase)) {
      throw invalidPhase(this.phase, allowed, { subject: `Product ${this.productId}`, operation });
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Ownership (guarantee 6) and freshness

  /**
   * Applies events other processes appended since this model was read (only while this instance drives nothing, so
   * it never races its own writes). Read-only; invalid events are skipped and counted in `dropped` (guarantee 4).
   * `mark`: the store's `changeMark()` taken before the call (see `ProductStore.catchUp`).
   */
  protected async catchUpNow(mark?: string): Promise<void> {
    if (this.deletedElsewhere) throw notFound("product", this.productId);
    if (this.driving || this.running.size > 0) return;
    const { dropped, invalid, deleted } = await this.ctx.store.catchUp(this.model, mark);
    if (deleted) {
      // Another process deleted it (guarantee 14: a deleted product leaves nothing behind): from now on this
      // instance answers what a server that loads it now would, and the service drops it from memory.
      this.deletedElsewhere = true;
      throw notFound("product", this.productId);
    }
    this.dropped += dropped;
    this.lost += dropped;
    if (invalid !== undefined) this.invalid ??= invalid;
  }

  /**
   * Before a write by an instance that does not drive the product: catch up with the authority and refuse when
   * another process holds a live lease (`conflict` with its owner). Read-only. Call inside `exclusive`.
   */
  protected async syncForWrite(): Promise<void> {
    if (this.driving || this.running.size > 0) return;
    await this.catchUpNow();
    const holder = await this.lease.holder();
    if (holder && holder.live && !holder.mine) throw conflict(holderDetails(holder), `Product ${this.productId}`);
  }

  /** The lease's holder as `product.status` and `product.list` show it (`Owner`, PROTOCOL.md section 5). Read-only. */
  async owner(): Promise<{ ownerId: string; expiresAt: string; live: boolean } | undefined> {
    const holder = await this.lease.holder();
    return holder ? { ownerId: holder.owner, expiresAt: holder.expiresAt, live: holder.live } : undefined;
  }

  /**
   * Tells the client that another server took the product over and this one stopped driving it (guarantee 13,
   * `product.ownershipLost {productId, ownerId, error}`; `ownerId` is the id this server held the lease under). Sent
   * once per instance: a fenced instance never drives again.
   */
  protected announceOwnershipLost(newOwner: string | undefined): void {
    if (this.ownershipLostAnnounced) return;
    this.ownershipLostAnnounced = true;
    const by = newOwner !== undefined && newOwner !== this.lease.owner ? ` (owner ${newOwner})` : "";
    this.ctx.notifier.notify("product.ownershipLost", {
      productId: this.productId,
      ownerId: this.lease.owner,
      error:
        `Another server process${by} took product ${this.productId} over, so this server stopped driving it; ` +
        "follow it through that process, or with product.status.",
    });
  }

  /**
   * Public form of `syncForWrite` for the service (e.g. before `product.delete`): refuses with `conflict` when another
   * process drives the product. Read-only.
   */
  async assertWritable(): Promise<void> {
    await this.exclusive(() => this.syncForWrite());
  }

  /**
   * Takes the product's lease (or renews it when held) before execution starts; returns the holding's epoch for
   * `releaseLease`. Throws `conflict` (with the owner) when another live owner holds it, `persistence_failed` when
   * the authority failed. A fenced instance never takes it again.
   */
  protected async takeLease(): Promise<number> {
    if (this.fenced) throw conflict({}, `Product ${this.productId}`);
    await this.lease.acquire();
    return ++this.leaseEpoch;
  }

  /** Releases the lease unless it was taken again since `epoch` (default: the current holding) or execution runs. */
  protected async releaseLease(epoch = this.leaseEpoch): Promise<void> {
    if (epoch !== this.leaseEpoch || this.driving || !this.lease.held) return;
    await this.lease.release();
  }

  /** Releases the lease once running workers have stopped and their results were written (pause, failures). */
  protected releaseWhenIdle(): void {
    const epoch = this.leaseEpoch;
    this.whenIdle()
      .then(() => this.releaseLease(epoch))
      .catch(() => undefined);
  }

  /**
   * True when the lease is held and fresh enough to start workers; renews it first when the clock says it may have
   * lapsed (e.g. a stalled event loop). A lost lease fences this instance through `onLeaseLost`.
   */
  protected async leaseReady(): Promise<boolean> {
    if (!this.lease.isFresh()) await this.lease.renewNow();
    return this.lease.held && this.lease.isFresh() && !this.fenced;
  }

  /**
   * The lease was lost: taken by another owner (this instance is fenced and stops its workers, guarantee 6), or its
   * renewal failed (a persistence failure: the product pauses and the client is told, guarantee 2).
   */
  protected onLeaseLost(loss: LeaseLoss): void {
    if (loss.kind === "taken" || loss.kind === "fenced") {
      if (this.fenced) return;
      this.fenced = true;
      const owner = loss.kind === "taken" ? loss.owner : undefined;
      this.ctx.logger.error({ productId: this.productId, owner, loss: loss.kind }, "lease lost; stopping");
      if (loss.kind === "fenced") this.model.state.usage.elapsedMs = this.liveElapsedMs();
      this.stopDriving();
      this.stopWorkers("fenced");
      if (loss.kind === "taken") this.announceOwnershipLost(owner);
      else this.reportLivenessLoss();
      return;
    }
    const error = loss.error instanceof Error ? loss.error : new AuthorityFailure(String(loss.error));
    this.onWriteError(error instanceof AuthorityConflict ? new AuthorityFailure(error.message) : error);
  }

  /**
   * Self-fenced (docs/FLEET.md): told like a persistence failure (guarantee 2: paused in memory with a recorded cause,
   * `product.persistenceError`); `product.ownershipLost` follows once a new owner shows (reportOwnershipLost). This
   * instance writes nothing more; a resume goes to a freshly loaded one.
   */
  private reportLivenessLoss(): void {
    if (TerminalPhases.includes(this.model.state.phase)) return;
    const cause = "this server lost its liveness lock in the shared store, so it stopped driving the product";
    this.statusEpoch += 1;
    if (this.model.state.phase === "executing") {
      this.model.state.phase = "paused";
      this.ctx.onPhaseChange?.(this.productId, "paused");
    }
    this.model.state.recovery = {
      cause: `The run-state authority failed: ${cause}.`,
      resumable: true,
      remediation: "Check the connection to the database, then call product.resume (another server may take it over).",
    };
    this.ctx.notifier.notify("product.persistenceError", {
      productId: this.productId,
      projectId: this.model.state.projectId,
      error: cause,
    });
  }

  // -------------------------------------------------------------------------------------------------------------
  // Tasks, elapsed time and stopping workers

  protected task(taskId: string): TaskState | undefined {
    const i = this.model.index.get(taskId);
    return i === undefined ? undefined : this.model.state.tasks[i];
  }

  protected elapsedMs(): number {
    const base = this.model.state.usage.elapsedMs;
    if (this.executingSinceMs === null) return base;
    const now = this.ctx.clock.now();
    const add = Math.max(0, now - this.executingSinceMs);
    this.executingSinceMs = now;
    return base + add;
  }

  protected liveElapsedMs(): number {
    const base = this.model.state.usage.elapsedMs;
    return this.executingSinceMs === null ? base : base + Math.max(0, this.ctx.clock.now() - this.executingSinceMs);
  }

  protected disarmTimers(): void {
    for (const cancel of this.cancelTimers.splice(0)) cancel();
  }

  protected stopDriving(): void {
    this.driving = false;
    this.disarmTimers();
    this.executingSinceMs = null;
  }

  protected stopWorkers(reason: StopReason, only?: ReadonlySet<string>): void {
    this.stopReason = reason;
    for (const [taskId, r] of this.running) {
      if (only && !only.has(taskId)) continue;
      r.controller.abort(new Error(INTERRUPTION[reason]));
    }
  }

  /** Resolves once no worker is running and every settled result was written. */
  protected whenIdle(): Promise<void> {
    if (this.running.size === 0 && this.settled.length === 0 && !this.pumpScheduled) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  protected resolveIdle(): void {
    if (this.running.size > 0 || this.settled.length > 0) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Pauses inside the exclusive section: persists the phase, stops scheduling, aborts workers. */
  protected async pauseInside(
    recovery: { cause: string; resumable: boolean; remediation: string },
    reason: StopReason,
  ) {
    const elapsedMs = this.elapsedMs();
    this.stopDriving();
    await this.commit(
      [
        { type: "elapsed", elapsedMs },
        { type: "phase", phase: "paused", recovery },
      ],
      { header: true },
    );
    this.stopWorkers(reason);
    this.releaseWhenIdle();
  }
}

function stripDot(text: string): string {
  return text.endsWith(".") ? text.slice(0, -1) : text;
}
