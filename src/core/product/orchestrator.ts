/**
 * ProductOrchestrator: the life of one product — planning dialogue, confirmation, DAG execution on workers, retries,
 * leader consultation, mutations, budgets, pause/resume/cancel, checkpoints, rollback and replay.
 *
 * Every change is an event appended to the product's stream through the journal BEFORE it is acted on or announced
 * (DESIGN.md guarantee 1); `evolve` (evolve.ts) is what the events mean and `decide` (decide.ts) what to do next. A
 * failed write pauses the product and tells the client (guarantee 2); a refused write (someone else owns the
 * product) stops this owner for good (guarantee 6). Execution runs only under the product's lease (ownership.ts),
 * taken before the first task starts and given back when execution stops; a completed task is recorded with a hash of
 * its input and drift of the run's inputs is detected from a fingerprint (run-inputs.ts; guarantee 7 and issue 4).
 * Operations on one product are serialised (sections.ts); workers and leader turns run outside a section so a long
 * turn never blocks pause/cancel.
 *
 * This file composes the collaborators (parts.ts) and reacts to the failures that concern them all (a failed or
 * refused write, a lost lease). It must never import I/O: time comes from the Clock, cancellation is AbortSignal,
 * the rest are ports.
 */
import type { AttachmentRef } from "./agent-inputs.js";
import type { Budget, Instance, Mutation, Phase, Plan, Progress, Task } from "../../../protocol/common.js";
import { TerminalPhases } from "../../../protocol/common.js";
import { DomainError, conflict, persistenceFailed } from "../errors.js";
import { AuthorityConflict, AuthorityFailure, type AgentInfo } from "../ports.js";
import { ProductAccess } from "./access.js";
import type { ProductContext } from "./context.js";
import { ExecutionLoop } from "./execution.js";
import type { Drift } from "./fingerprint.js";
import { ProductHistory } from "./history.js";
import { ProductJournal } from "./journal.js";
import { LeaderChannel } from "./leader-channel.js";
import type { LeaseLoss } from "./lease.js";
import { Lifecycle } from "./lifecycle.js";
import { productOwnership } from "./ownership.js";
import type { ProductHealth, ProductParts } from "./parts.js";
import { RunInputs } from "./run-inputs.js";
import { ExclusiveSections } from "./sections.js";
import type { ProductModel } from "./state.js";
import { StatusView, type VersionedStatus } from "./status.js";
import { RunTimers } from "./timers.js";
import { WorkerPool } from "./worker-pool.js";
import { ProductVerification } from "./product-verification.js";
import { WorkspaceCoordinator } from "./workspace-coordinator.js";

export { estimateTokens } from "./decide.js";
export type { DriftRecovery } from "./status.js";

type Writable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * The one public face of a product's orchestrator, composed of collaborators that each own their state (parts.ts);
 * construct it with `new ProductOrchestrator(model, ctx, instance)` (`instance`: its number among the orchestrators
 * of its service, part of status answer versions).
 */
export class ProductOrchestrator {
  readonly #p: ProductParts;
  readonly #status: StatusView;

  constructor(
    readonly model: ProductModel,
    ctx: ProductContext,
    instance = 0,
  ) {
    const health: ProductHealth = {
      dropped: 0,
      lost: 0,
      invalid: undefined,
      loadedFromStore: false,
      deletedElsewhere: false,
      statusEpoch: 0,
    };
    const p = { model, ctx, health } as Writable<ProductParts>;
    p.sections = new ExclusiveSections();
    p.journal = new ProductJournal(
      model,
      ctx,
      (err) => this.onWriteError(err),
      (fn) => p.sections.run(fn),
      async () => {
        if (!p.ownership.held) return false;
        await p.ownership.verify();
        return p.ownership.held;
      },
    );
    p.ownership = productOwnership(model, ctx, (loss) => this.onLeaseLost(loss));
    p.pool = new WorkerPool(ctx.workers);
    p.timers = new RunTimers(model, ctx.clock, ctx.options);
    p.inputs = new RunInputs(p);
    p.workspaces = new WorkspaceCoordinator(p);
    p.verification = new ProductVerification(p);
    p.leader = new LeaderChannel(p);
    p.run = new ExecutionLoop(p);
    p.access = new ProductAccess(p);
    p.lifecycle = new Lifecycle(p);
    p.history = new ProductHistory(p);
    this.#p = p;
    this.#status = new StatusView(p, instance);
  }

  get productId(): string {
    return this.model.state.productId;
  }

  get phase(): Phase {
    return this.model.state.phase;
  }

  /** Records that failed validation when this product was loaded (guarantee 4). */
  get dropped(): number {
    return this.#p.health.dropped;
  }
  set dropped(n: number) {
    this.#p.health.dropped = n;
  }

  /** Events lost when loading (invalid or missing): the product must not run again (guarantee 4). */
  get lost(): number {
    return this.#p.health.lost;
  }
  set lost(n: number) {
    this.#p.health.lost = n;
  }

  /** The domain rule the stored state breaks as a whole, when it does (guarantee 15). */
  get invalid(): string | undefined {
    return this.#p.health.invalid;
  }
  set invalid(rule: string | undefined) {
    this.#p.health.invalid = rule;
  }

  /** True when this orchestrator was built from stored state (not created in this process). */
  get loadedFromStore(): boolean {
    return this.#p.health.loadedFromStore;
  }
  set loadedFromStore(loaded: boolean) {
    this.#p.health.loadedFromStore = loaded;
  }

  /** Set when catching up found that another process deleted the product. */
  get deletedElsewhere(): boolean {
    return this.#p.health.deletedElsewhere;
  }

  /** True while this process drives the product's execution. */
  get isDriving(): boolean {
    return this.#p.run.driving;
  }

  /**
   * True once a write of this instance was refused or its lease was taken (guarantee 6): it never writes again. The
   * service replaces a fenced instance with one freshly loaded from the authority on the next write request.
   */
  get isFenced(): boolean {
    return this.#p.journal.fenced;
  }

  /**
   * True when nothing of this product is going on in this process, so that dropping this instance from memory loses
   * nothing (guarantee 14: memory holds the products being driven or recently read): it does not drive execution,
   * holds no lease, has no worker, settled result, leader turn, timer, held-back header, probe or operation in
   * flight, nobody waits for it to go idle, and it is not in `planning` (whose leader turn may be about to start).
   * Read-only.
   */
  get isIdle(): boolean {
    const p = this.#p;
    return (
      !p.run.driving &&
      !p.ownership.held &&
      p.pool.empty &&
      !p.run.waveQueued &&
      p.leader.idle &&
      !p.timers.armed &&
      !p.journal.headerPending &&
      !p.inputs.probing &&
      p.sections.active === 0 &&
      this.model.state.phase !== "planning"
    );
  }

  /**
   * Re-checks the held lease now, e.g. because another server wrote it or this product's stream (fleet.ts): a
   * take-over fences this instance at once instead of at the next heartbeat. Does nothing when no lease is held.
   */
  verifyLease(): Promise<void> {
    return this.#p.ownership.verify();
  }

  /**
   * This server lost its liveness (docs/FLEET.md): drops the lease without writing, stops driving and stops every
   * worker at once (not behind a renewal in flight); the client hears `product.ownershipLost` only once another owner
   * shows (`reportOwnershipLost`). Returns false (and does nothing) when no lease is held.
   */
  fenceNow(): boolean {
    return this.#p.ownership.lease.fence();
  }

  /**
   * Sends `product.ownershipLost` for a self-fenced instance once its lease names `newOwner` or is gone (only an
   * owner deletes its lease: another one took over). At most once per instance.
   */
  reportOwnershipLost(newOwner: string | undefined): void {
    if (this.#p.journal.fenced) this.#p.ownership.announceLost(newOwner);
  }

  /** Resolves once no worker of this instance is running and every settled result was handled. */
  whenStopped(): Promise<void> {
    return this.#p.run.whenIdle();
  }

  /** Runs `fn` after every earlier exclusive section of this product finished; errors propagate to the caller only. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.#p.sections.run(fn);
  }

  /** The lease's holder as `product.status` and `product.list` show it (`Owner`, PROTOCOL.md section 5). Read-only. */
  async owner(): Promise<{ ownerId: string; expiresAt: string; live: boolean; renewedAt?: string } | undefined> {
    const holder = await this.#p.ownership.holder();
    if (!holder) return undefined;
    const { owner: ownerId, expiresAt, live, renewedAt } = holder;
    return { ownerId, expiresAt, live, ...(renewedAt !== undefined ? { renewedAt } : {}) };
  }

  /** Refuses with `conflict` when another process drives the product (e.g. before `product.delete`). Read-only. */
  async assertWritable(): Promise<void> {
    await this.#p.sections.run(() => this.#p.access.syncForWrite());
  }

  /** What changed since the fingerprint recorded with the run, in plain words (run-inputs.ts). Read-only. */
  drift(): Promise<Drift[]> {
    return this.#p.inputs.drift();
  }

  // -------------------------------------------------------------------------------------------------------------
  // The leader channel (leader-channel.ts)

  /** Starts the first planning turn (asynchronously; `product.plan` has answered already). */
  startPlanning(): void {
    this.#p.leader.startPlanning();
  }

  /** Aborts the running leader turn, if any. Does NOT wait for the turn to end. */
  abortLeaderTurn(): void {
    this.#p.leader.abortLeaderTurn();
  }

  /** True while a leader turn (planning, message or consultation) runs for this product. */
  get leaderBusy(): boolean {
    return this.#p.leader.leaderBusy;
  }

  /** Agents the plan may use. */
  roster(): AgentInfo[] {
    return this.#p.leader.roster();
  }

  /**
   * `product.message` (leader-channel.ts), with the message's attachments by reference (an ACP session's images and
   * binary resources, issue 31). Throws busy while another leader turn runs.
   */
  message(
    content: string,
    askId?: string,
    attachments?: AttachmentRef[],
  ): Promise<{ response: string; plan?: Plan; mutations?: Mutation[] }> {
    return this.#p.leader.message(content, askId, attachments);
  }

  // -------------------------------------------------------------------------------------------------------------
  // Lifecycle (lifecycle.ts) and history (history.ts)

  /** `product.confirm`: persists the (possibly edited) plan and starts execution after the answer is sent. */
  confirm(edit: { instances?: Instance[]; tasks?: Task[]; budget?: Budget }): Promise<void> {
    return this.#p.lifecycle.confirm(edit);
  }

  /** `product.pause`: idempotent on paused; waits until running workers have stopped and their state is written. */
  pause(): Promise<void> {
    return this.#p.lifecycle.pause();
  }

  /** `product.resume`: from paused, or from executing when no process drives it (after a restart). */
  resume(additionalBudget?: Budget, opts: { automatic?: boolean } = {}): Promise<void> {
    return this.#p.lifecycle.resume(additionalBudget, opts);
  }

  /** `product.cancel`: terminal; running workers are stopped and every unfinished task is marked cancelled. */
  cancel(): Promise<void> {
    return this.#p.lifecycle.cancel();
  }

  /** Stops execution in this process without changing the persisted phase (server shutdown, delete). */
  shutdown(): Promise<void> {
    return this.#p.lifecycle.shutdown();
  }

  /** `product.mutate` (by the user): validated as a batch, applied atomically, persisted, then announced. */
  mutate(mutations: Mutation[]): Promise<{ applied: number; version: number }> {
    return this.#p.lifecycle.mutate(mutations);
  }

  /** `product.checkpoint`: records a manual checkpoint of the current state. */
  checkpoint(): Promise<{ checkpointId: string; at: string }> {
    return this.#p.history.checkpoint();
  }

  /** `product.rollback`: restores a kept checkpoint as the latest state and resumes (history.ts). */
  rollback(checkpointId?: string): Promise<{ checkpointId: string; phase: Phase }> {
    return this.#p.history.rollback(checkpointId);
  }

  /** `product.replayTask`: resets the task and everything downstream of it to pending and runs them again. */
  replayTask(taskId: string): Promise<string[]> {
    return this.#p.history.replayTask(taskId);
  }

  /** Removes every worktree, the integration branch and the product's refs (`product.delete`). Best effort. */
  removeWorkspaces(): Promise<void> {
    return this.#p.workspaces.removeWorkspaces();
  }

  // -------------------------------------------------------------------------------------------------------------
  // Status (status.ts); never writes (guarantee 3)

  status(): Record<string, unknown> {
    return this.#status.status();
  }

  progress(): Progress {
    return this.#status.progress();
  }

  inspect(): Promise<Record<string, unknown>> {
    return this.#status.inspect();
  }

  inspectVersioned(mark?: string): Promise<VersionedStatus> {
    return this.#status.inspectVersioned(mark);
  }

  keptAnswer(mark: string | undefined): VersionedStatus | undefined {
    return this.#status.keptAnswer(mark);
  }

  recovery(): { cause: string; resumable: boolean; remediation: string } | undefined {
    return this.#status.recovery();
  }

  // -------------------------------------------------------------------------------------------------------------
  // Failures that concern every part

  /**
   * A write failed. On a conflict (another owner wrote) this instance is fenced for good and stops (guarantee 6);
   * on an authority failure the product pauses in memory with the cause and the client is told (guarantee 2).
   * Returns the DomainError the caller throws, so it acts on nothing.
   */
  private onWriteError(err: unknown): DomainError {
    const p = this.#p;
    if (err instanceof AuthorityConflict) {
      const wasDriving = p.run.driving || p.ownership.held || p.pool.size > 0;
      p.journal.fence();
      p.ctx.logger.error({ productId: this.productId, err: err.message }, "write refused: another owner");
      p.pool.stop("fenced");
      // The other owner's records are the truth now, elapsed time included: this instance's clock stops with it.
      p.run.stopDriving();
      p.ownership.drop();
      if (wasDriving) this.announceTakeover(err.details.owner);
      return conflict(err.details, `Product ${this.productId}`);
    }
    const cause = err instanceof Error ? err.message : String(err);
    if (err instanceof DomainError) return err;
    p.ctx.logger.error({ productId: this.productId, err: cause }, "run-state authority write failed");
    if (!(err instanceof AuthorityFailure)) p.ctx.logger.error({ err }, "unexpected error while persisting");
    if (!TerminalPhases.includes(this.model.state.phase)) this.pauseInMemory(cause);
    return persistenceFailed(cause);
  }

  /**
   * Sends `product.ownershipLost` after a refused write, naming the new owner: the one the refusal named, else (a
   * refused header or event append names nobody) the lease's holder read now, when it is another owner.
   */
  private announceTakeover(owner: string | undefined): void {
    const ownership = this.#p.ownership;
    if (owner !== undefined) return ownership.announceLost(owner);
    ownership.holder().then(
      (holder) => ownership.announceLost(holder && !holder.mine ? holder.owner : undefined),
      () => ownership.announceLost(undefined),
    );
  }

  /** Guarantee 2: stop scheduling and pause, in memory, with the cause; the next successful write records it. */
  private pauseInMemory(cause: string): void {
    const p = this.#p;
    const s = this.model.state;
    p.health.statusEpoch += 1;
    // The run's clock stops with it: the time executed so far is kept in memory, as a pause would record it.
    s.usage.elapsedMs = p.timers.liveElapsedMs();
    p.run.stopDriving();
    p.pool.stop("pause");
    p.journal.dropHeldHeader();
    p.access.releaseWhenIdle();
    if (s.phase === "executing") {
      s.phase = "paused";
      p.ctx.onPhaseChange?.(this.productId, "paused");
    }
    s.recovery = {
      cause: `The run-state authority failed a write: ${cause}`,
      resumable: true,
      remediation:
        "Check the state store (disk space, permissions, the host's run-state service), then call product.resume.",
    };
    p.ctx.notifier.notify("product.persistenceError", {
      productId: this.productId,
      projectId: s.projectId,
      error: cause,
    });
  }

  /**
   * The lease was lost: taken by another owner (this instance is fenced and stops its workers, guarantee 6), or its
   * renewal failed (a persistence failure: the product pauses and the client is told, guarantee 2).
   */
  private onLeaseLost(loss: LeaseLoss): void {
    const p = this.#p;
    if (loss.kind === "taken" || loss.kind === "fenced") {
      if (p.journal.fenced) return;
      p.journal.fence();
      const owner = loss.kind === "taken" ? loss.owner : undefined;
      p.ctx.logger.error({ productId: this.productId, owner, loss: loss.kind }, "lease lost; stopping");
      if (loss.kind === "fenced") this.model.state.usage.elapsedMs = p.timers.liveElapsedMs();
      p.run.stopDriving();
      p.pool.stop("fenced");
      if (loss.kind === "taken") p.ownership.announceLost(owner);
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
    const s = this.model.state;
    if (TerminalPhases.includes(s.phase)) return;
    const cause = "this server lost its liveness lock in the shared store, so it stopped driving the product";
    this.#p.health.statusEpoch += 1;
    if (s.phase === "executing") {
      s.phase = "paused";
      this.#p.ctx.onPhaseChange?.(this.productId, "paused");
    }
    s.recovery = {
      cause: `The run-state authority failed: ${cause}.`,
      resumable: true,
      remediation: "Check the connection to the database, then call product.resume (another server may take it over).",
    };
    this.#p.ctx.notifier.notify("product.persistenceError", {
      productId: this.productId,
      projectId: s.projectId,
      error: cause,
    });
  }
}
