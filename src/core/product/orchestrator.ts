/**
 * ProductOrchestrator: the life of one product — planning dialogue, confirmation, DAG execution on workers, retries,
 * leader consultation, mutations, budgets, pause/resume/cancel, checkpoints, rollback and replay.
 *
 * Every change is an event appended to the product's stream through the ProductStore BEFORE it is acted on or
 * announced (DESIGN.md guarantee 1). A failed write pauses the product and tells the client (guarantee 2); a refused
 * write (someone else owns the product) stops this owner for good (guarantee 6). Execution runs only under the
 * product's lease (lease.ts), taken before the first task starts and given back when execution stops; a completed
 * task is recorded with a hash of its input and drift of the run's inputs is detected from a fingerprint
 * (fingerprint.ts; guarantee 7 and issue 4). Operations on one product are
 * serialised through `exclusive`; workers and leader turns run outside it so a long turn never blocks pause/cancel.
 *
 * This file must never import I/O: time comes from the Clock, cancellation is AbortSignal, the rest are ports.
 */
import type { Budget, Instance, Mutation, Phase, Plan, Task, TaskState } from "../../../protocol/common.js";
import { TerminalPhases } from "../../../protocol/common.js";
import { downstreamOf, validatePlanGraph } from "../dag/graph.js";
import { applyMutations } from "../dag/mutations.js";
import { Scheduler } from "../dag/scheduler.js";
import {
  DomainError,
  busy,
  conflict,
  invalidInput,
  invalidMutation,
  invalidPhase,
  invalidPlan,
  notFound,
  persistenceFailed,
} from "../errors.js";
import type { AgentInfo, DraftPlan, LeaderPort, WorkerResult } from "../ports.js";
import { AuthorityConflict, AuthorityFailure } from "../ports.js";
import type { ProductContext } from "./context.js";
import { agentsHash, compareFingerprints, planHash, taskInputHash, type Drift, type TaskInput } from "./fingerprint.js";
import { ProductLease, type LeaseLoss } from "./lease.js";
import type { Fingerprint, ProductEvent } from "./records.js";
import { attemptsUsed, inputHashOf, progressOfModel, type ProductModel } from "./state.js";

/** Events as the orchestrator builds them: `v` and `at` are stamped on append. */
type NewEvent = ProductEvent extends infer E ? (E extends ProductEvent ? Omit<E, "v" | "at"> : never) : never;

interface RunningTask {
  controller: AbortController;
  attempt: number;
  startedMs: number;
  briefChars: number;
  reportedUsage: boolean;
  /** Hash of the input this attempt was given (guarantee 7), recorded with its completion. */
  inputHash: string;
}

interface SettledResult {
  /** The attempt's launch record: a result counts only if it belongs to the task's latest launch. */
  entry: RunningTask;
  taskId: string;
  attempt: number;
  result: WorkerResult;
  briefChars: number;
  reportedUsage: boolean;
  inputHash: string;
}

/** What `inspect()` adds to a recovery when the run's inputs drifted (issue 4, drift detection). */
export interface DriftRecovery {
  cause: string;
  resumable: boolean;
  remediation: string;
  /** True: an automatic resume must not continue; only an explicit `product.resume` acknowledges the drift. */
  needsExplicitResume: true;
  drift: { what: Drift["what"]; from: string | null; to: string | null }[];
}

/** Why running workers are being stopped; decides what their tasks become. */
type StopReason = "pause" | "cancel" | "shutdown" | "reset" | "fenced";

const INTERRUPTION: Record<StopReason, string> = {
  pause: "The product was paused while this task was running; it will run again on resume.",
  cancel: "The product was cancelled while this task was running.",
  shutdown: "The server shut down while this task was running; it will run again on resume.",
  reset: "The task was reset while it was running.",
  fenced: "Another owner took over the product while this task was running.",
};

/** Rough token estimate when a worker reports no usage: 4 characters per token (issue 2, budgets). */
export const estimateTokens = (chars: number): number => Math.ceil(chars / 4);

export class ProductOrchestrator {
  /** Records that failed validation when this product was loaded (guarantee 4). */
  dropped = 0;
  /** Events lost when loading (invalid or missing): the product must not run again (guarantee 4). */
  lost = 0;
  /** True when this orchestrator was built from stored state (not created in this process). */
  loadedFromStore = false;
  /** True while this process drives execution (holds the product). */
  private driving = false;
  /** Set when a write was refused: this instance never writes again (guarantee 6). */
  private fenced = false;
  private leaderTurn: string | null = null;
  /** Aborts the running leader turn (planning, message or consultation) on cancel, delete and shutdown. */
  private leaderController: AbortController | null = null;
  private planningStarted = false;
  private scheduler: Scheduler | null = null;
  private readonly running = new Map<string, RunningTask>();
  /** The latest launch of each task whose result has not been taken yet. */
  private readonly latestLaunch = new Map<string, RunningTask>();
  private readonly settled: SettledResult[] = [];
  private pumpScheduled = false;
  private consultations = 0;
  private consultQueue: Promise<void> = Promise.resolve();
  private executingSinceMs: number | null = null;
  private cancelTimers: (() => void)[] = [];
  private lock: Promise<unknown> = Promise.resolve();
  private idleWaiters: (() => void)[] = [];
  /** This product's lease in the authority (guarantee 6): held while this process drives execution. */
  private readonly lease: ProductLease;
  /** Bumped on every lease acquisition, so a delayed release meant for an earlier holding does nothing. */
  private leaseEpoch = 0;
  /** A git HEAD probe in flight while driving (the recorded fingerprint follows the workspace). */
  private headProbe: Promise<void> | null = null;

  constructor(
    readonly model: ProductModel,
    private readonly ctx: ProductContext,
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

  /** Resolves once no worker of this instance is running and every settled result was handled. */
  whenStopped(): Promise<void> {
    return this.whenIdle();
  }

  // -------------------------------------------------------------------------------------------------------------
  // Serialisation and persistence

  /** Runs `fn` after every earlier exclusive section of this product finished; errors propagate to the caller only. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.lock.then(fn, fn);
    this.lock = next.catch(() => undefined);
    return next;
  }

  private now(): string {
    return new Date(this.ctx.clock.now()).toISOString();
  }

  /**
   * Appends events (write before act, guarantee 1). On an authority failure the product pauses with a recorded
   * cause and the client is told (guarantee 2); on a conflict this owner stops for good (guarantee 6). Either way a
   * DomainError is thrown so the caller acts on nothing.
   */
  private async commit(events: NewEvent[], opts: { header?: boolean } = {}): Promise<void> {
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

  private async writeHeader(): Promise<void> {
    try {
      await this.ctx.store.writeHeader(this.model);
    } catch (err) {
      throw this.onWriteError(err);
    }
  }

  private onWriteError(err: unknown): DomainError {
    if (err instanceof AuthorityConflict) {
      this.fenced = true;
      this.ctx.logger.error({ productId: this.productId, err: err.message }, "write refused: another owner");
      this.stopWorkers("fenced");
      this.driving = false;
      this.lease.drop();
      this.disarmTimers();
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
      // Guarantee 2: stop scheduling and pause, in memory, with the cause; the next successful write records it.
      this.driving = false;
      this.stopWorkers("pause");
      this.releaseWhenIdle();
      if (this.model.state.phase === "executing") {
        this.model.state.phase = "paused";
        this.ctx.onPhaseChange?.(this.productId, "paused");
      }
      this.model.state.recovery = {
        cause: `The run-state authority failed a write: ${cause}`,
        resumable: true,
        remediation: "Check the state store (disk space, permissions, the host's run-state service), then call product.resume.",
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
  private requireIntact(operation: string): void {
    if (this.lost === 0) return;
    throw new DomainError(
      "invalid_phase",
      `Product ${this.productId} has ${this.lost} stored ${this.lost === 1 ? "event" : "events"} that failed ` +
        `validation or ${this.lost === 1 ? "is" : "are"} missing, so ${operation} is refused: running it could ` +
        "repeat or skip work. Restore the state store from a backup, or delete the product.",
      { phase: this.phase, allowed: [] },
    );
  }

  private requirePhase(allowed: readonly Phase[], operation: string): void {
    if (!allowed.includes(this.phase)) {
      throw invalidPhase(this.phase, allowed, { subject: `Product ${this.productId}`, operation });
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Ownership (guarantee 6) and freshness

  /**
   * Applies events other processes appended since this model was read (only while this instance drives nothing, so
   * it never races its own writes). Read-only; invalid events are skipped and counted in `dropped` (guarantee 4).
   */
  private async catchUpNow(): Promise<void> {
    if (this.driving || this.running.size > 0) return;
    const { dropped } = await this.ctx.store.catchUp(this.model);
    this.dropped += dropped;
    this.lost += dropped;
  }

  /**
   * Before a write by an instance that does not drive the product: catch up with the authority and refuse when
   * another process holds a live lease (`conflict` with its owner). Read-only. Call inside `exclusive`.
   */
  private async syncForWrite(): Promise<void> {
    if (this.driving || this.running.size > 0) return;
    await this.catchUpNow();
    const holder = await this.lease.holder();
    if (holder && holder.live && !holder.mine) throw conflict({ owner: holder.owner }, `Product ${this.productId}`);
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
  private async takeLease(): Promise<number> {
    if (this.fenced) throw conflict({}, `Product ${this.productId}`);
    await this.lease.acquire();
    return ++this.leaseEpoch;
  }

  /** Releases the lease unless it was taken again since `epoch` (default: the current holding) or execution runs. */
  private async releaseLease(epoch = this.leaseEpoch): Promise<void> {
    if (epoch !== this.leaseEpoch || this.driving || !this.lease.held) return;
    await this.lease.release();
  }

  /** Releases the lease once running workers have stopped and their results were written (pause, failures). */
  private releaseWhenIdle(): void {
    const epoch = this.leaseEpoch;
    this.whenIdle()
      .then(() => this.releaseLease(epoch))
      .catch(() => undefined);
  }

  /**
   * True when the lease is held and fresh enough to start workers; renews it first when the clock says it may have
   * lapsed (e.g. a stalled event loop). A lost lease fences this instance through `onLeaseLost`.
   */
  private async leaseReady(): Promise<boolean> {
    if (!this.lease.isFresh()) await this.lease.renewNow();
    return this.lease.held && this.lease.isFresh() && !this.fenced;
  }

  /**
   * The lease was lost: taken by another owner (this instance is fenced and stops its workers, guarantee 6), or its
   * renewal failed (a persistence failure: the product pauses and the client is told, guarantee 2).
   */
  private onLeaseLost(loss: LeaseLoss): void {
    if (loss.kind === "taken") {
      if (this.fenced) return;
      this.fenced = true;
      this.ctx.logger.error({ productId: this.productId, owner: loss.owner }, "lease taken by another owner; stopping");
      this.stopDriving();
      this.stopWorkers("fenced");
      return;
    }
    const error = loss.error instanceof Error ? loss.error : new AuthorityFailure(String(loss.error));
    this.onWriteError(error instanceof AuthorityConflict ? new AuthorityFailure(error.message) : error);
  }

  // -------------------------------------------------------------------------------------------------------------
  // Fingerprints (guarantee 7 and drift detection)

  /** The input a task attempt is (or was) given: definition, assignee as planned, dependency outputs now. */
  private inputOf(task: TaskState): TaskInput {
    const instance = this.model.state.plan?.instances.find((i) => i.instanceId === task.instanceId);
    return {
      title: task.title,
      description: task.description,
      acceptance: task.acceptance,
      instanceId: task.instanceId,
      agentId: instance?.agentId ?? this.ctx.options.fallbackWorkerAgentId,
      dependencyOutputs: task.dependsOn.map((id) => ({ taskId: id, output: this.task(id)?.output ?? "" })),
    };
  }

  private async gitHead(): Promise<string | null> {
    const probe = this.ctx.workspace;
    if (!probe) return null;
    try {
      return await probe.gitHead(this.model.state.cwd);
    } catch {
      return null;
    }
  }

  private agentsFingerprint(): string {
    const custom = this.ctx.options.agentsFingerprint;
    return custom ? custom() : agentsHash(this.ctx.agents.list());
  }

  /** The fingerprint of the run's inputs now (`plan` defaults to the current plan). Reads the workspace only. */
  private async currentFingerprint(plan: Plan | undefined = this.model.state.plan): Promise<Fingerprint> {
    const promptVersion = this.ctx.options.leaderPromptVersion ?? "heuristic-1";
    return {
      promptVersion,
      planHash: planHash(plan, promptVersion),
      gitHead: await this.gitHead(),
      agentsHash: this.agentsFingerprint(),
    };
  }

  /**
   * What changed since the fingerprint recorded with the run (plan/prompt version, git HEAD, agent definitions), in
   * plain words; `[]` while this process drives it, before confirmation, or for runs recorded without a fingerprint.
   * Read-only.
   */
  async drift(): Promise<Drift[]> {
    const recorded = this.model.state.fingerprint;
    if (!recorded || this.driving) return [];
    return compareFingerprints(recorded, await this.currentFingerprint());
  }

  /** A `fingerprint` event when the current fingerprint differs from the recorded one; `acknowledged` says why. */
  private async fingerprintEvents(plan: Plan | undefined, acknowledged: Drift[]): Promise<NewEvent[]> {
    const current = await this.currentFingerprint(plan);
    const recorded = this.model.state.fingerprint;
    if (recorded && compareFingerprints(recorded, current).length === 0 && recorded.planHash === current.planHash) return [];
    return [
      {
        type: "fingerprint",
        fingerprint: current,
        ...(acknowledged.length > 0 ? { acknowledged: acknowledged.map((d) => d.text).slice(0, 10) } : {}),
      },
    ];
  }

  /**
   * Re-checks, on resume, that every completed task's result was made from the input it would get now (guarantee
   * 7). A task whose recorded input hash no longer matches goes back to pending with an interruption note, and so
   * does every task downstream of it that consumed its result. Tasks completed without a recorded hash are trusted.
   * Returns the changed task states keyed by id (applied over `base`, the states already being changed).
   */
  private rebind(base: Map<string, TaskState>): Map<string, TaskState> {
    const s = this.model.state;
    const out = new Map(base);
    const stale: string[] = [];
    for (const t of s.tasks) {
      if (t.status !== "completed") continue;
      const recorded = inputHashOf(s, t.taskId);
      if (recorded !== undefined && recorded !== taskInputHash(this.inputOf(t))) stale.push(t.taskId);
    }
    for (const id of stale) {
      for (const d of downstreamOf(s.tasks, id)) {
        const t = out.get(d) ?? this.task(d);
        if (!t || !["completed", "failed", "skipped", "running"].includes(t.status)) continue;
        const note =
          d === id
            ? "Its input changed since it completed (its description, assignee or a dependency's output differs); it will run again."
            : `Task ${id} it depends on will run again, so this task will run again too.`;
        const fresh: TaskState = { ...t, status: "pending", interruption: note };
        for (const k of ["output", "error", "endedAt", "question"] as const) delete fresh[k];
        out.set(d, fresh);
      }
    }
    return out;
  }

  /** While driving: records the workspace's git HEAD when it moved (workers may commit), off the execution path. */
  private refreshHead(): void {
    if (!this.ctx.workspace || this.headProbe || !this.model.state.fingerprint) return;
    this.headProbe = this.gitHead()
      .then((head) =>
        this.exclusive(async () => {
          const fp = this.model.state.fingerprint;
          if (!fp || fp.gitHead === head || !this.driving || this.fenced) return;
          await this.commit([{ type: "fingerprint", fingerprint: { ...fp, gitHead: head } }]);
        }),
      )
      .catch(() => undefined)
      .finally(() => {
        this.headProbe = null;
      });
  }

  // -------------------------------------------------------------------------------------------------------------
  // Planning

  private leader(): LeaderPort {
    return this.ctx.leader(this.model.state.leaderAgentId);
  }

  /** Agents the plan may use: `allowedAgents` is presence-based (omitted = every ready agent, [] = the leader alone). */
  roster(): AgentInfo[] {
    const all = this.ctx.agents.list();
    const allowed = this.model.state.allowedAgents;
    if (allowed === undefined) return all;
    const set = new Set(allowed);
    return all.filter((a) => set.has(a.agentId));
  }

  /** Starts the first planning turn (asynchronously; `product.plan` has answered already). */
  startPlanning(): void {
    if (this.planningStarted) return;
    this.planningStarted = true;
    this.runLeaderPlanning(undefined).catch((err: unknown) => {
      this.ctx.logger.error({ productId: this.productId, err }, "planning turn failed");
    });
  }

  /**
   * One planning turn: asks the leader for a plan (or questions), validates it, persists and announces it.
   * Returns the leader's message and the plan when one was produced.
   */
  private async runLeaderPlanning(answers: { askId: string; content: string } | undefined): Promise<{
    response: string;
    plan?: Plan;
  }> {
    if (this.leaderTurn) throw busy(this.productId);
    this.leaderTurn = "plan";
    const controller = new AbortController();
    this.leaderController = controller;
    try {
      const s = this.model.state;
      let result;
      try {
        result = await this.leader().plan({
          productId: s.productId,
          goal: s.goal,
          cwd: s.cwd,
          roster: this.roster(),
          dialogue: s.dialogue.map((d) => ({ ...d })),
          ...(s.plan ? { previousPlan: s.plan } : {}),
          ...(answers ? { answers } : {}),
          signal: controller.signal,
          onText: (text) => this.ctx.notifier.notify("product.planningDelta", { productId: s.productId, text }),
        });
      } catch (err) {
        // A turn aborted by cancel, delete or shutdown is not a planning failure: the product keeps its phase and a
        // later product.message plans again.
        if (controller.signal.aborted) return { response: "The leader's turn was cancelled." };
        const error = `The leader could not plan: ${err instanceof Error ? err.message : String(err)}`;
        return await this.exclusive(async () => {
          await this.commit([{ type: "planFailed", error }], { header: true });
          this.ctx.notifier.notify("product.planFailed", { productId: this.productId, error });
          return { response: error };
        });
      }
      return await this.exclusive(async () => {
        if (TerminalPhases.includes(this.phase)) return { response: result.message };
        if (result.kind === "ask") {
          const askId = this.ctx.ids("ask");
          await this.commit(
            [
              { type: "dialogue", role: "leader", text: result.message },
              { type: "asked", askId, questions: result.questions },
            ],
            { header: true },
          );
          this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message: result.message });
          this.ctx.notifier.notify("product.leaderAsk", {
            productId: this.productId,
            askId,
            questions: result.questions,
          });
          return { response: result.message };
        }
        const plan = this.completePlan(result.plan);
        const check = validatePlanGraph(plan.instances, plan.tasks);
        if (!check.ok) {
          const error = `The leader's plan is invalid: ${check.reason}`;
          await this.commit([{ type: "planFailed", error }], { header: true });
          this.ctx.notifier.notify("product.planFailed", { productId: this.productId, error });
          return { response: error };
        }
        await this.commit(
          [
            { type: "dialogue", role: "leader", text: result.message },
            { type: "planProposed", plan },
          ],
          { header: true },
        );
        this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message: result.message });
        this.ctx.notifier.notify("product.planReady", { productId: this.productId, plan });
        return { response: result.message, plan };
      });
    } finally {
      this.leaderTurn = null;
      if (this.leaderController === controller) this.leaderController = null;
    }
  }

  /**
   * Aborts the running leader turn, if any (its `signal` fires; a model-backed leader sends `session/cancel`).
   * Used by cancel, delete and shutdown, and by the ACP session adapter when `session/cancel` arrives during planning.
   * An aborted planning turn records nothing. Does NOT wait for the turn to end.
   */
  abortLeaderTurn(): void {
    this.leaderController?.abort(new Error("The leader's turn was cancelled."));
  }

  /** True while a leader turn (planning, message or consultation) runs for this product. */
  get leaderBusy(): boolean {
    return this.leaderTurn !== null;
  }

  private completePlan(draft: DraftPlan): Plan {
    const version = (this.model.state.plan?.version ?? 0) + 1;
    const budget = { ...this.model.state.budget, ...(draft.budget ?? {}) };
    const plan: Plan = { ...draft, productId: this.productId, version };
    if (Object.keys(budget).length > 0) plan.budget = budget;
    else delete plan.budget;
    return plan;
  }

  /**
   * `product.message`: a revision during planning, an answer to a leader question, or a message to the leader during
   * execution (whose answer may carry mutations). Throws busy while another leader turn runs.
   */
  async message(content: string, askId?: string): Promise<{ response: string; plan?: Plan; mutations?: Mutation[] }> {
    if (!this.driving) await this.exclusive(() => this.syncForWrite());
    this.requirePhase(["planning", "awaiting_confirmation", "executing", "paused"], "product.message");
    if (this.leaderTurn) throw busy(this.productId);
    if (this.phase === "planning" || this.phase === "awaiting_confirmation") {
      const pending = this.model.state.pendingAsk;
      if (askId !== undefined && pending?.askId !== askId) {
        throw invalidInput(`askId ${askId} does not match the pending question of product ${this.productId}.`);
      }
      this.leaderTurn = "reserved";
      try {
        await this.exclusive(() => this.commit([{ type: "dialogue", role: "user", text: content }]));
      } finally {
        this.leaderTurn = null;
      }
      this.planningStarted = true;
      return this.runLeaderPlanning(askId !== undefined ? { askId, content } : undefined);
    }
    return this.leaderMessageDuringRun(content);
  }

  private async leaderMessageDuringRun(content: string): Promise<{ response: string; mutations?: Mutation[] }> {
    this.leaderTurn = "message";
    try {
      await this.exclusive(() => this.commit([{ type: "dialogue", role: "user", text: content }]));
      const waiting = this.model.state.tasks.find((t) => t.status === "waiting");
      if (waiting) {
        // Guarantee 8: a waiting task is answered by the next user message and becomes runnable again.
        await this.exclusive(async () => {
          const task: TaskState = {
            ...waiting,
            status: "pending",
            description: `${waiting.description}\n\nAnswer to "${waiting.question ?? ""}": ${content}`,
          };
          delete task.question;
          await this.commit([{ type: "task", task }]);
          this.notifyTask(task);
          this.scheduler?.rebuild(this.model.state.tasks);
        });
        this.pump();
        const response = `Passed your answer to task ${waiting.taskId}; it will run again.`;
        await this.exclusive(() => this.commit([{ type: "dialogue", role: "leader", text: response }]));
        return { response };
      }
      const s = this.model.state;
      if (!s.plan) throw invalidPhase(this.phase, ["executing", "paused"]);
      const controller = new AbortController();
      this.leaderController = controller;
      const answer = await this.leader().message({
        productId: s.productId,
        goal: s.goal,
        content,
        plan: s.plan,
        tasks: s.tasks,
        roster: this.roster(),
        signal: controller.signal,
        onText: (text) => this.ctx.notifier.notify("product.planningDelta", { productId: s.productId, text }),
      });
      let applied: Mutation[] | undefined;
      await this.exclusive(async () => {
        await this.commit([{ type: "dialogue", role: "leader", text: answer.response }]);
        this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message: answer.response });
        if (answer.mutations && answer.mutations.length > 0 && !TerminalPhases.includes(this.phase)) {
          const outcome = applyMutations(this.model.state.plan as Plan, this.model.state.tasks, answer.mutations);
          if (outcome.ok) {
            await this.applyMutationOutcome(answer.mutations, outcome.plan, "leader");
            applied = answer.mutations;
          } else {
            this.ctx.logger.warn({ productId: this.productId, reason: outcome.reason }, "leader mutations rejected");
          }
        }
      });
      this.pump();
      return { response: answer.response, ...(applied ? { mutations: applied } : {}) };
    } finally {
      this.leaderTurn = null;
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Confirmation and execution

  /**
   * `product.confirm`: persists the (possibly edited) plan and starts execution after the answer is sent.
   * Throws invalid_phase outside awaiting_confirmation and invalid_plan for an edited plan that is not a valid DAG.
   */
  async confirm(edit: { instances?: Instance[]; tasks?: Task[]; budget?: Budget }): Promise<void> {
    await this.exclusive(async () => {
      await this.catchUpNow();
      this.requirePhase(["awaiting_confirmation"], "product.confirm");
      this.requireIntact("product.confirm");
      const current = this.model.state.plan;
      if (!current) throw invalidPhase(this.phase, ["awaiting_confirmation"]);
      const edited = edit.instances !== undefined || edit.tasks !== undefined;
      const plan: Plan = {
        ...current,
        instances: edit.instances ?? current.instances,
        tasks: edit.tasks ?? current.tasks,
        version: edited ? current.version + 1 : current.version,
      };
      if (edit.budget) plan.budget = { ...(current.budget ?? {}), ...edit.budget };
      const check = validatePlanGraph(plan.instances, plan.tasks);
      if (!check.ok) {
        const error = invalidPlan(check.reason, check.index);
        // The list `index` points into, for the -32602 issue path (error-mapping.ts reads it; `tasks` when absent).
        if (check.list === "instances") (error.details as { list?: "tasks" | "instances" }).list = "instances";
        throw error;
      }
      if (plan.tasks.length === 0) throw invalidPlan("The plan has no tasks to run.");
      // Drift detection: what the run depends on outside its stream, as of confirmation.
      const fingerprint = await this.currentFingerprint(plan);
      // Guarantee 6: the lease is taken before the first task can start.
      const epoch = await this.takeLease();
      try {
        await this.commit([{ type: "confirmed", plan, fingerprint }], { header: true });
      } catch (err) {
        await this.releaseLease(epoch);
        throw err;
      }
    });
    this.ctx.defer(() => this.startDriving());
  }

  /** Begins (or resumes) driving execution in this process. Announces the team and the DAG. */
  private startDriving(): void {
    if (this.driving || this.fenced || this.phase !== "executing") return;
    if (!this.lease.held) {
      this.ctx.logger.warn({ productId: this.productId }, "not starting execution: this process holds no lease");
      return;
    }
    this.driving = true;
    this.executingSinceMs = this.ctx.clock.now();
    this.scheduler = new Scheduler(
      this.model.state.tasks.map((t) => ({ ...t })),
      this.ctx.options.maxParallelTasks,
    );
    this.announceTeam();
    this.announceTopology();
    this.armTimers();
    this.reconsultUnsettledFailures();
    this.pump();
  }

  /**
   * A task that failed for good while its consultation was interrupted (cancel, shutdown, crash) still has pending
   * dependents that can never become ready: consult the leader again for each such task.
   */
  private reconsultUnsettledFailures(): void {
    if (this.consultations > 0) return; // consultations of this process are still queued or running
    const tasks = this.model.state.tasks;
    const failedWithPending = new Set<string>();
    const failed = new Set(tasks.filter((t) => t.status === "failed").map((t) => t.taskId));
    if (failed.size === 0) return;
    for (const t of tasks) {
      if (t.status !== "pending") continue;
      for (const d of t.dependsOn) if (failed.has(d)) failedWithPending.add(d);
    }
    for (const id of failedWithPending) this.consult(id);
  }

  private announceTeam(): void {
    const plan = this.model.state.plan;
    if (!plan) return;
    const seen = new Set<string>();
    const agents: { agentId: string; role: string; name: string }[] = [];
    for (const inst of plan.instances) {
      const key = `${inst.agentId}\u0000${inst.role}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const info = this.ctx.agents.get(inst.agentId);
      agents.push({ agentId: inst.agentId, role: inst.role, name: inst.name ?? info?.name ?? inst.agentId });
    }
    this.ctx.notifier.notify("product.teamRoster", { productId: this.productId, agents });
  }

  private announceTopology(): void {
    this.ctx.notifier.notify("product.dagTopology", {
      productId: this.productId,
      nodes: this.model.state.tasks.map((t) => ({
        id: t.taskId,
        title: t.title,
        instanceId: t.instanceId,
        dependsOn: [...t.dependsOn],
        status: t.status,
      })),
    });
  }

  private notifyTask(t: TaskState): void {
    this.ctx.notifier.notify("product.taskStatus", {
      productId: this.productId,
      taskId: t.taskId,
      status: t.status,
      attempt: t.attempts,
      ...(t.error !== undefined && (t.status === "failed" || t.status === "pending") ? { error: t.error } : {}),
      ...(t.question !== undefined ? { question: t.question } : {}),
    });
  }

  /** Schedules one execution wave (settle finished attempts, then start ready tasks) on the product's queue. */
  private pump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    // The wave runs after the current turn of the event loop (ctx.defer), not on the next microtask: every result that
    // settles in the same turn (worker answers arrive in I/O callbacks) is then written in one wave, one transaction,
    // instead of one wave and its fsyncs per result. Nothing is acted on or announced before it is written.
    this.ctx.defer(() => {
      this.exclusive(async () => {
        this.pumpScheduled = false;
        await this.wave();
      })
        .catch((err: unknown) => {
          if (!(err instanceof DomainError)) this.ctx.logger.error({ productId: this.productId, err }, "execution wave failed");
        })
        .finally(() => this.resolveIdle());
    });
  }

  private task(taskId: string): TaskState | undefined {
    const i = this.model.index.get(taskId);
    return i === undefined ? undefined : this.model.state.tasks[i];
  }

  /**
   * One wave, inside the exclusive section: everything that settled since the last wave is written in one append
   * (results, usage, automatic checkpoints), then the tasks that became ready are marked running in a second append,
   * and only then are workers called (guarantee 1).
   */
  private async wave(): Promise<void> {
    const results = this.settled.splice(0);
    const events: NewEvent[] = [];
    const announce: TaskState[] = [];
    const finalFailures: string[] = [];
    let completedNow = 0;
    for (const r of results) {
      const current = this.task(r.taskId);
      // Stale results (task reset, removed or re-run since) are ignored. Attempt numbers alone cannot tell: a replay
      // restarts them, so an old worker's late answer could carry the new attempt's number.
      if (this.latestLaunch.get(r.taskId) !== r.entry) continue;
      this.latestLaunch.delete(r.taskId);
      if (!current || current.status !== "running" || current.attempts !== r.attempt) continue;
      const task: TaskState = { ...current, endedAt: this.now() };
      const res = r.result;
      if (res.outcome === "completed") {
        task.status = "completed";
        task.output = res.output;
        delete task.error;
        delete task.interruption;
        completedNow++;
      } else if (res.outcome === "waiting") {
        task.status = "waiting";
        task.question = res.question;
      } else if (res.outcome === "cancelled" || (!this.driving && this.stopReason !== null)) {
        // A worker stopped by pause/cancel/shutdown may report cancelled or failed; both mean "interrupted".
        const reason = this.stopReason ?? "pause";
        if (reason === "cancel") task.status = "cancelled";
        else {
          task.status = "pending";
          task.interruption = INTERRUPTION[reason];
        }
      } else {
        task.error = res.outcome === "failed" ? res.error : "The worker stopped.";
        const max = task.maxAttempts ?? this.ctx.options.defaultMaxAttempts;
        // Interrupted attempts (pause, shutdown, crash) do not use up retries: only failed ones count.
        if (attemptsUsed(this.model.state, task) < max && this.driving) task.status = "pending";
        else {
          task.status = "failed";
          finalFailures.push(task.taskId);
        }
      }
      events.push(task.status === "completed" ? { type: "task", task, inputHash: r.inputHash } : { type: "task", task });
      if (!r.reportedUsage) {
        const outputChars = res.outcome === "completed" ? res.output.length : 0;
        events.push({
          type: "usage",
          taskId: task.taskId,
          inputTokens: estimateTokens(r.briefChars),
          outputTokens: estimateTokens(outputChars),
          estimated: true,
        });
      }
      if (task.status === "completed") {
        const done = this.model.counts.completed + completedNow;
        events.push({
          type: "checkpoint",
          checkpointId: this.ctx.ids("ckp"),
          completed: Math.min(done, this.model.state.tasks.length),
          total: this.model.state.tasks.length,
        });
      }
      announce.push(task);
    }
    if (results.length > 0 || this.driving) events.push({ type: "elapsed", elapsedMs: this.elapsedMs() });
    if (events.length > 0) await this.commit(events);
    const sched = this.scheduler;
    for (const t of announce) {
      this.notifyTask(t);
      sched?.settle(t.taskId, t.status === "running" ? "pending" : t.status);
    }
    for (const e of events) {
      if (e.type === "checkpoint") {
        const ref = this.model.state.checkpoints.find((c) => c.checkpointId === e.checkpointId);
        if (ref) this.ctx.notifier.notify("product.checkpoint", { productId: this.productId, checkpointId: ref.checkpointId, at: ref.at });
      }
    }
    if (results.length > 0) this.announceBudget();
    if (completedNow > 0) this.refreshHead();
    for (const id of finalFailures) this.consult(id);
    if (this.driving && (await this.checkBudget())) {
      await this.writeHeader();
      this.resolveIdle();
      return;
    }
    if (this.driving && this.phase === "executing" && sched && (await this.leaseReady())) {
      const ready = sched.next();
      if (ready.length > 0) {
        const started: TaskState[] = [];
        const startEvents: NewEvent[] = [];
        for (const r of ready) {
          const current = this.task(r.taskId);
          if (!current) continue;
          const task: TaskState = { ...current, status: "running", attempts: current.attempts + 1, startedAt: this.now() };
          delete task.endedAt;
          delete task.question;
          delete task.output;
          started.push(task);
          startEvents.push({ type: "task", task });
        }
        await this.commit(startEvents);
        for (const t of started) {
          this.notifyTask(t);
          this.launch(t);
        }
      }
      if (this.running.size === 0 && this.consultations === 0 && !sched.hasRunnable()) await this.finishIfDone();
    }
    if (results.length > 0 || events.length > 0) await this.writeHeader();
    this.resolveIdle();
  }

  private stopReason: StopReason | null = null;

  private elapsedMs(): number {
    const base = this.model.state.usage.elapsedMs;
    if (this.executingSinceMs === null) return base;
    const now = this.ctx.clock.now();
    const add = Math.max(0, now - this.executingSinceMs);
    this.executingSinceMs = now;
    return base + add;
  }

  private liveElapsedMs(): number {
    const base = this.model.state.usage.elapsedMs;
    return this.executingSinceMs === null ? base : base + Math.max(0, this.ctx.clock.now() - this.executingSinceMs);
  }

  /** Calls the worker for a task already persisted as running. Never throws; the result is queued for a wave. */
  private launch(task: TaskState): void {
    const plan = this.model.state.plan as Plan;
    const instance = plan.instances.find((i) => i.instanceId === task.instanceId) ?? {
      instanceId: task.instanceId,
      agentId: this.ctx.options.fallbackWorkerAgentId,
      role: "worker",
    };
    const agentId = this.workerAgentFor(instance.agentId);
    const dependencyOutputs = task.dependsOn.map((id) => {
      const dep = this.task(id);
      return { taskId: id, title: dep?.title ?? id, output: dep?.output ?? "" };
    });
    const briefChars =
      task.title.length +
      task.description.length +
      (task.acceptance?.length ?? 0) +
      dependencyOutputs.reduce((n, d) => n + d.output.length + d.title.length, 0);
    const controller = new AbortController();
    const entry: RunningTask = {
      controller,
      attempt: task.attempts,
      startedMs: this.ctx.clock.now(),
      briefChars,
      reportedUsage: false,
      inputHash: taskInputHash({
        ...this.inputOf(task),
        dependencyOutputs: dependencyOutputs.map((d) => ({ taskId: d.taskId, output: d.output })),
      }),
    };
    this.running.set(task.taskId, entry);
    this.latestLaunch.set(task.taskId, entry);
    const taskDef: Task = {
      taskId: task.taskId,
      title: task.title,
      description: task.description,
      instanceId: task.instanceId,
      dependsOn: task.dependsOn,
      ...(task.acceptance !== undefined ? { acceptance: task.acceptance } : {}),
      ...(task.maxAttempts !== undefined ? { maxAttempts: task.maxAttempts } : {}),
    };
    const finish = (result: WorkerResult): void => {
      if (this.running.get(task.taskId) === entry) this.running.delete(task.taskId);
      this.settled.push({
        entry,
        taskId: task.taskId,
        attempt: entry.attempt,
        result,
        briefChars: entry.briefChars,
        reportedUsage: entry.reportedUsage,
        inputHash: entry.inputHash,
      });
      this.pump();
    };
    this.ctx.workers
      .runTask(
        {
          productId: this.productId,
          task: taskDef,
          instance: { ...instance, agentId },
          cwd: this.model.state.cwd,
          attempt: task.attempts,
          dependencyOutputs,
          signal: controller.signal,
        },
        {
          onText: (text) => {
            if (!controller.signal.aborted || this.stopReason !== "reset") {
              this.ctx.notifier.notify("product.taskOutputDelta", { productId: this.productId, taskId: task.taskId, text });
            }
          },
          onActivity: (toolName) =>
            this.ctx.notifier.notify("product.agentActivity", { productId: this.productId, taskId: task.taskId, toolName }),
          onUsage: (usage) => {
            entry.reportedUsage = true;
            this.recordUsage(task.taskId, usage.inputTokens, usage.outputTokens);
          },
        },
      )
      .then(finish, (err: unknown) =>
        finish({ outcome: "failed", error: `The worker failed unexpectedly: ${err instanceof Error ? err.message : String(err)}` }),
      );
  }

  /** Resolves which agent runs an instance: the pseudo-agent `leader` runs on the leader's agent, else the fallback. */
  private workerAgentFor(agentId: string): string {
    if (agentId !== "leader") return agentId;
    const leaderAgent = this.model.state.leaderAgentId;
    return leaderAgent && this.ctx.agents.get(leaderAgent) ? leaderAgent : this.ctx.options.fallbackWorkerAgentId;
  }

  private recordUsage(taskId: string, inputTokens: number, outputTokens: number): void {
    const clean = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.floor(n) : 0);
    this.exclusive(async () => {
      await this.commit([
        { type: "usage", taskId, inputTokens: clean(inputTokens), outputTokens: clean(outputTokens), estimated: false },
      ]);
      this.announceBudget();
      if (this.driving && (await this.checkBudget())) this.resolveIdle();
    }).catch(() => undefined);
  }

  private announceBudget(): void {
    const s = this.model.state;
    this.ctx.notifier.notify("product.budgetUpdate", {
      productId: this.productId,
      inputTokens: s.usage.inputTokens,
      outputTokens: s.usage.outputTokens,
      elapsedMs: this.liveElapsedMs(),
      ...(s.budget.maxTotalTokens !== undefined ? { maxTotalTokens: s.budget.maxTotalTokens } : {}),
    });
  }

  /**
   * Budget check (guarantee 9): one warning at 80 % of a limit, and on exceed the product pauses (not fails) and the
   * client is told which limit tripped. Returns true when the product was paused. Runs inside `exclusive`.
   */
  private async checkBudget(): Promise<boolean> {
    const s = this.model.state;
    const used = s.usage.inputTokens + s.usage.outputTokens;
    const elapsed = this.liveElapsedMs();
    const maxTokens = s.budget.maxTotalTokens;
    const maxMs = s.budget.maxDurationMs;
    let exceeded: string | null = null;
    if (maxTokens !== undefined && used >= maxTokens) {
      exceeded = `The token budget is spent: ${used} of ${maxTokens} tokens used.`;
    } else if (maxMs !== undefined && elapsed >= maxMs) {
      exceeded = `The time budget is spent: ${elapsed} ms of ${maxMs} ms elapsed.`;
    }
    const base = {
      productId: this.productId,
      usedTokens: used,
      ...(maxTokens !== undefined ? { maxTotalTokens: maxTokens } : {}),
    };
    if (exceeded) {
      await this.pauseInside(
        {
          cause: exceeded,
          resumable: true,
          remediation: "Call product.resume with additionalBudget to continue; work done so far is kept.",
        },
        "pause",
      );
      this.ctx.notifier.notify("product.budgetExceeded", { ...base, reason: exceeded });
      return true;
    }
    if (!s.budgetWarned) {
      const ratio = this.ctx.options.budgetWarningRatio;
      let reason: string | null = null;
      if (maxTokens !== undefined && used >= ratio * maxTokens) {
        reason = `${Math.round((used / maxTokens) * 100)} % of the token budget is used (${used} of ${maxTokens}).`;
      } else if (maxMs !== undefined && elapsed >= ratio * maxMs) {
        reason = `${Math.round((elapsed / maxMs) * 100)} % of the time budget is used (${elapsed} of ${maxMs} ms).`;
      }
      if (reason) {
        await this.commit([{ type: "budgetWarned", reason }]);
        this.ctx.notifier.notify("product.budgetWarning", { ...base, reason });
      }
    }
    return false;
  }

  /** Asks the leader what to do about a task that failed its last attempt; runs outside the exclusive section. */
  private consult(taskId: string): void {
    this.consultations++;
    const s = this.model.state;
    const failedTask = this.task(taskId);
    const plan = s.plan;
    const done = (): void => {
      this.consultations--;
      this.pump();
    };
    if (!failedTask || !plan) {
      done();
      return;
    }
    const skip = async (message: string): Promise<void> => {
      await this.exclusive(async () => {
        await this.commit([{ type: "dialogue", role: "leader", text: message }]);
        this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message });
        await this.skipDependents(taskId);
      });
    };
    const run = async (): Promise<void> => {
      if (this.leaderTurn) {
        await skip(`Task ${taskId} failed; the leader was busy, so its dependents are skipped.`);
        return;
      }
      this.leaderTurn = "consult";
      const controller = new AbortController();
      this.leaderController = controller;
      let decision;
      try {
        decision = await this.leader().consultOnFailure({
          productId: s.productId,
          goal: s.goal,
          failedTask: { ...failedTask },
          plan: s.plan ?? plan,
          tasks: s.tasks,
          roster: this.roster(),
          signal: controller.signal,
        });
      } catch (err) {
        decision = { kind: "giveUp" as const, message: `The leader could not be consulted: ${String(err)}` };
      } finally {
        this.leaderTurn = null;
        if (this.leaderController === controller) this.leaderController = null;
      }
      // Aborted by cancel or shutdown: decide nothing now. The dependents stay pending and a resume consults again.
      if (controller.signal.aborted) return;
      if (decision.kind === "mutate" && !TerminalPhases.includes(this.phase)) {
        const mutations = decision.mutations;
        const message = decision.message;
        const applied = await this.exclusive(async () => {
          const outcome = applyMutations(this.model.state.plan as Plan, this.model.state.tasks, mutations);
          if (!outcome.ok) return false;
          await this.commit([{ type: "dialogue", role: "leader", text: message }]);
          this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message });
          await this.applyMutationOutcome(mutations, outcome.plan, "leader");
          return true;
        });
        if (applied) return;
      }
      await skip(decision.message);
    };
    // Consultations run one at a time: a failure that arrives while another is being discussed waits its turn
    // instead of finding the leader busy and being given up unheard.
    const turn = this.consultQueue.then(run);
    this.consultQueue = turn.catch(() => undefined);
    turn
      .catch((err: unknown) => this.ctx.logger.warn({ productId: this.productId, err }, "leader consultation failed"))
      .finally(done);
  }

  /** Marks every pending transitive dependent of a finally failed task `skipped`. Inside `exclusive`. */
  private async skipDependents(taskId: string): Promise<void> {
    const ids = downstreamOf(this.model.state.tasks, taskId).filter((id) => id !== taskId);
    const events: NewEvent[] = [];
    const skipped: TaskState[] = [];
    for (const id of ids) {
      const t = this.task(id);
      if (!t || (t.status !== "pending" && t.status !== "waiting")) continue;
      const task: TaskState = { ...t, status: "skipped", error: `Skipped because task ${taskId} failed.` };
      events.push({ type: "task", task });
      skipped.push(task);
    }
    if (events.length === 0) return;
    await this.commit(events);
    for (const t of skipped) {
      this.scheduler?.settle(t.taskId, "skipped");
      this.notifyTask(t);
    }
  }

  /** Ends the product when nothing is left to run: completed if every task completed, else failed. */
  private async finishIfDone(): Promise<void> {
    const tasks = this.model.state.tasks;
    const counts = this.model.counts;
    if (counts.pending > 0 || counts.running > 0) return;
    if (counts.waiting > 0) return; // guarantee 8: waiting is not failing
    const failed = tasks.filter((t) => t.status !== "completed");
    const phase = failed.length === 0 ? "completed" : "failed";
    const summary =
      phase === "completed"
        ? `All ${tasks.length} tasks completed.`
        : `${tasks.length - failed.length} of ${tasks.length} tasks completed; ${failed
            .map((t) => `${t.taskId} ${t.status}`)
            .join(", ")}.`;
    const recovery =
      phase === "failed"
        ? {
            cause: summary,
            resumable: false,
            remediation:
              "Replay a failed task with product.replayTask, roll back with product.rollback, or mutate the plan and replay.",
          }
        : null;
    await this.commit([
      { type: "elapsed", elapsedMs: this.elapsedMs() },
      { type: "phase", phase, recovery },
      { type: "dialogue", role: "leader", text: summary },
    ]);
    this.stopDriving();
    try {
      await this.writeHeader();
    } finally {
      // Nothing runs any more: give the lease back before telling the client, so it may act on the outcome at once.
      await this.releaseLease().catch(() => undefined);
      // The terminal phase is already in the event stream; a failed header (an index) must not hide the outcome.
      this.ctx.notifier.notify("product.completed", {
        productId: this.productId,
        projectId: this.model.state.projectId,
        phase,
        summary,
      });
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Timers

  private armTimers(): void {
    this.disarmTimers();
    const maxMs = this.model.state.budget.maxDurationMs;
    if (maxMs !== undefined) {
      const left = Math.max(0, maxMs - this.liveElapsedMs());
      this.cancelTimers.push(this.ctx.clock.setTimer(left + 1, () => this.pump()));
      const warnAt = this.ctx.options.budgetWarningRatio * maxMs - this.liveElapsedMs();
      if (warnAt > 0) this.cancelTimers.push(this.ctx.clock.setTimer(warnAt + 1, () => this.pump()));
    }
    this.scheduleSafetyCheckpoint();
  }

  private scheduleSafetyCheckpoint(): void {
    const ageMs = this.ctx.clock.now() - Date.parse(this.model.state.createdAt);
    const period =
      ageMs > 48 * 3_600_000 ? this.ctx.options.longRunSafetyCheckpointMs : this.ctx.options.safetyCheckpointMs;
    this.cancelTimers.push(
      this.ctx.clock.setTimer(period, () => {
        if (!this.driving) return;
        this.checkpoint()
          .catch(() => undefined)
          .finally(() => {
            if (this.driving) this.scheduleSafetyCheckpoint();
          });
      }),
    );
  }

  private disarmTimers(): void {
    for (const cancel of this.cancelTimers.splice(0)) cancel();
  }

  private stopDriving(): void {
    this.driving = false;
    this.disarmTimers();
    this.executingSinceMs = null;
  }

  // -------------------------------------------------------------------------------------------------------------
  // Stopping workers

  private stopWorkers(reason: StopReason, only?: ReadonlySet<string>): void {
    this.stopReason = reason;
    for (const [taskId, r] of this.running) {
      if (only && !only.has(taskId)) continue;
      r.controller.abort(new Error(INTERRUPTION[reason]));
    }
  }

  /** Resolves once no worker is running and every settled result was written. */
  private whenIdle(): Promise<void> {
    if (this.running.size === 0 && this.settled.length === 0 && !this.pumpScheduled) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private resolveIdle(): void {
    if (this.running.size > 0 || this.settled.length > 0) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Pauses inside the exclusive section: persists the phase, stops scheduling, aborts workers. */
  private async pauseInside(recovery: { cause: string; resumable: boolean; remediation: string }, reason: StopReason) {
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

  // -------------------------------------------------------------------------------------------------------------
  // Lifecycle operations

  /** `product.pause`: idempotent on paused; waits until running workers have stopped and their state is written. */
  async pause(): Promise<void> {
    let epoch: number | undefined;
    await this.exclusive(async () => {
      await this.syncForWrite();
      this.requirePhase(["executing", "paused"], "product.pause");
      if (this.phase === "paused") return;
      await this.pauseInside(
        { cause: "The product was paused by the client.", resumable: true, remediation: "Call product.resume to continue." },
        "pause",
      );
      epoch = this.leaseEpoch;
    });
    await this.whenIdle();
    // The lease is given back before the answer (unless a resume took it again meanwhile).
    if (epoch !== undefined) await this.releaseLease(epoch);
  }

  /**
   * `product.resume`: from paused, or from executing when no process drives it (after a restart). Tasks persisted
   * as running go back to pending with an interruption note, their attempt counted (guarantee 7).
   */
  async resume(additionalBudget?: Budget, opts: { automatic?: boolean } = {}): Promise<void> {
    await this.exclusive(async () => {
      const alreadyRunning = () =>
        invalidPhase(this.phase, ["paused"], {
          subject: `Product ${this.productId}`,
          operation: "product.resume (it is already running)",
        });
      if (this.phase === "executing" && this.driving) throw alreadyRunning();
      await this.catchUpNow();
      this.requirePhase(["paused", "executing"], "product.resume");
      this.requireIntact("product.resume");
      const refuseDrift = (drift: Drift[]): void => {
        if (!opts.automatic || drift.length === 0) return;
        throw new DomainError(
          "invalid_phase",
          `Product ${this.productId} needs an explicit product.resume: since its last checkpoint ${drift.map((d) => d.text).join("; ")}.`,
          { phase: this.phase, allowed: [] },
        );
      };
      // An automatic resume never continues past drift; refused before anything is written.
      refuseDrift(await this.drift());
      // Guarantee 6: a live lease of another process refuses (conflict with its owner); the lease is ours from here.
      const epoch = await this.takeLease();
      try {
        await this.catchUpNow();
        this.requirePhase(["paused", "executing"], "product.resume");
        const drift = await this.drift();
        refuseDrift(drift);
        const events: NewEvent[] = [];
        if (additionalBudget && Object.keys(additionalBudget).length > 0) {
          events.push({ type: "budgetAdded", budget: additionalBudget });
        }
        // Guarantee 7: work that was running is interrupted (attempt counted); completed work whose input changed
        // since it completed is not trusted.
        const changed = new Map<string, TaskState>();
        for (const t of this.model.state.tasks) {
          if (t.status === "running" && !this.running.has(t.taskId)) {
            changed.set(t.taskId, { ...t, status: "pending", interruption: t.interruption ?? INTERRUPTION.shutdown });
          }
        }
        for (const task of this.rebind(changed).values()) events.push({ type: "task", task });
        // Drift is acknowledged by this explicit resume: the current fingerprint becomes the recorded one.
        if (this.model.state.fingerprint) events.push(...(await this.fingerprintEvents(this.model.state.plan, drift)));
        events.push({ type: "phase", phase: "executing", recovery: null });
        await this.commit(events, { header: true });
      } catch (err) {
        await this.releaseLease(epoch);
        throw err;
      }
      this.stopReason = null;
    });
    this.ctx.defer(() => this.startDriving());
  }

  /** `product.cancel`: terminal; running workers are stopped and every unfinished task is marked cancelled. */
  async cancel(): Promise<void> {
    await this.exclusive(async () => {
      await this.syncForWrite();
      this.requirePhase(["planning", "awaiting_confirmation", "executing", "paused"], "product.cancel");
      this.abortLeaderTurn();
      const elapsedMs = this.elapsedMs();
      this.stopDriving();
      this.stopWorkers("cancel");
      const events: NewEvent[] = [{ type: "elapsed", elapsedMs }];
      for (const t of this.model.state.tasks) {
        if (t.status === "pending" || t.status === "waiting" || (t.status === "running" && !this.running.has(t.taskId))) {
          events.push({ type: "task", task: { ...t, status: "cancelled" } });
        }
      }
      events.push({ type: "phase", phase: "cancelled", recovery: null });
      await this.commit(events, { header: true });
    });
    const epoch = this.leaseEpoch;
    await this.whenIdle();
    await this.releaseLease(epoch);
  }

  /**
   * Stops execution in this process without changing the persisted phase (server shutdown, delete): running tasks
   * are written back as interrupted, then the lease is released so another process may resume at once.
   */
  async shutdown(): Promise<void> {
    this.abortLeaderTurn();
    await this.stopExecution();
    await this.releaseLease();
  }

  /** Stops scheduling and running workers and waits until their results are written. Keeps the lease. */
  private async stopExecution(): Promise<void> {
    if (this.driving || this.running.size > 0) {
      this.stopDriving();
      this.stopWorkers("shutdown");
      await this.whenIdle();
    }
  }

  /** `product.checkpoint`: records a manual checkpoint of the current state. */
  async checkpoint(): Promise<{ checkpointId: string; at: string }> {
    return this.exclusive(async () => {
      await this.syncForWrite();
      this.requirePhase(["executing", "paused", "completed", "failed"], "product.checkpoint");
      const tasks = this.model.state.tasks;
      const checkpointId = this.ctx.ids("ckp");
      await this.commit([
        {
          type: "checkpoint",
          checkpointId,
          completed: this.model.counts.completed,
          total: tasks.length,
        },
      ]);
      const ref = this.model.state.checkpoints.find((c) => c.checkpointId === checkpointId);
      const at = ref?.at ?? this.now();
      this.ctx.notifier.notify("product.checkpoint", { productId: this.productId, checkpointId, at });
      return { checkpointId, at };
    });
  }

  /**
   * `product.rollback`: restores a kept checkpoint as the latest state and resumes through the normal resume path.
   * Tasks that were running at the checkpoint become pending again; spent budget counters are kept.
   */
  async rollback(checkpointId?: string): Promise<{ checkpointId: string; phase: Phase }> {
    // Another process may drive it: catch up and refuse before stopping anything here (guarantee 6).
    if (!this.driving) await this.assertWritable();
    this.requirePhase(["executing", "paused", "completed", "failed"], "product.rollback");
    this.requireIntact("product.rollback");
    const refs = this.model.state.checkpoints;
    const ref = checkpointId === undefined ? refs[refs.length - 1] : refs.find((c) => c.checkpointId === checkpointId);
    if (!ref) throw notFound("checkpoint", checkpointId ?? "(latest)");
    await this.stopExecution();
    await this.exclusive(async () => {
      const epoch = await this.takeLease();
      try {
        const { model: past } = await this.ctx.store.stateAt(this.model.state.projectId, this.productId, ref.seq);
        const tasks = past.state.tasks.map((t) =>
          t.status === "running" ? { ...t, status: "pending" as const, interruption: INTERRUPTION.reset } : t,
        );
        const inputHashes = past.state.inputHashes;
        const fingerprint = this.model.state.fingerprint
          ? await this.fingerprintEvents(past.state.plan, await this.drift())
          : [];
        await this.commit(
          [
            {
              type: "restored",
              checkpointId: ref.checkpointId,
              ...(past.state.plan ? { plan: past.state.plan } : {}),
              tasks,
              ...(inputHashes ? { inputHashes } : {}),
            },
            ...fingerprint,
            { type: "phase", phase: "executing", recovery: null },
          ],
          { header: true },
        );
      } catch (err) {
        await this.releaseLease(epoch);
        throw err;
      }
      this.stopReason = null;
    });
    this.ctx.defer(() => this.startDriving());
    return { checkpointId: ref.checkpointId, phase: "executing" };
  }

  /** `product.replayTask`: resets the task and everything downstream of it to pending and runs them again. */
  async replayTask(taskId: string): Promise<string[]> {
    const reset = await this.exclusive(async () => {
      await this.syncForWrite();
      this.requirePhase(["executing", "paused", "completed", "failed"], "product.replayTask");
      this.requireIntact("product.replayTask");
      const task = this.task(taskId);
      if (!task) throw notFound("task", taskId);
      if (!["completed", "failed", "skipped"].includes(task.status)) {
        throw invalidPhase(task.status, ["completed", "failed", "skipped"], {
          subject: `Task ${taskId}`,
          operation: "product.replayTask",
        });
      }
      const ids = downstreamOf(this.model.state.tasks, taskId);
      const idSet = new Set(ids);
      this.stopWorkers("reset", idSet);
      const events: NewEvent[] = [];
      for (const id of ids) {
        const t = this.task(id);
        if (!t) continue;
        const fresh: TaskState = { ...t, status: "pending", attempts: 0 };
        for (const k of ["output", "error", "startedAt", "endedAt", "question", "interruption"] as const) delete fresh[k];
        events.push({ type: "task", task: fresh });
      }
      const wasTerminal = this.phase === "completed" || this.phase === "failed";
      // A terminal product starts executing again here: take the lease first (guarantee 6).
      const epoch = wasTerminal && !this.driving ? await this.takeLease() : undefined;
      try {
        if (wasTerminal && this.model.state.fingerprint) {
          events.push(...(await this.fingerprintEvents(this.model.state.plan, await this.drift())));
        }
        if (wasTerminal) events.push({ type: "phase", phase: "executing", recovery: null });
        await this.commit(events, { header: true });
      } catch (err) {
        if (epoch !== undefined) await this.releaseLease(epoch);
        throw err;
      }
      for (const e of events) if (e.type === "task") this.notifyTask(e.task);
      if (this.driving) {
        this.scheduler?.rebuild(this.model.state.tasks);
        this.announceTopology();
        this.pump();
      } else if (wasTerminal) {
        this.stopReason = null;
        this.ctx.defer(() => this.startDriving());
      }
      return ids;
    });
    return reset;
  }

  /** `product.mutate` (by the user): validated as a batch, applied atomically, persisted, then announced. */
  async mutate(mutations: Mutation[]): Promise<{ applied: number; version: number }> {
    return this.exclusive(async () => {
      await this.syncForWrite();
      this.requirePhase(["awaiting_confirmation", "executing", "paused"], "product.mutate");
      this.requireIntact("product.mutate");
      const plan = this.model.state.plan;
      if (!plan) throw invalidPhase(this.phase, ["awaiting_confirmation", "executing", "paused"]);
      const states = this.phase === "awaiting_confirmation" ? [] : this.model.state.tasks;
      const outcome = applyMutations(plan, states, mutations);
      if (!outcome.ok) throw invalidMutation(outcome.index, outcome.reason);
      await this.applyMutationOutcome(mutations, outcome.plan, "user");
      this.pump();
      return { applied: mutations.length, version: outcome.plan.version };
    });
  }

  /** Persists an already validated mutation batch and announces it. Inside `exclusive`. */
  private async applyMutationOutcome(mutations: Mutation[], plan: Plan, by: "leader" | "user"): Promise<void> {
    if (this.phase === "awaiting_confirmation") {
      await this.commit([{ type: "planProposed", plan }], { header: true });
    } else {
      // The plan fingerprint follows recorded mutations, so only an unrecorded change reads as drift.
      const fp = this.model.state.fingerprint;
      const refreshed: NewEvent[] = fp
        ? [{ type: "fingerprint", fingerprint: { ...fp, planHash: planHash(plan, fp.promptVersion) } }]
        : [];
      await this.commit([{ type: "mutated", mutations, by, plan }, ...refreshed], { header: true });
      this.scheduler?.rebuild(this.model.state.tasks);
    }
    for (const mutation of mutations) this.ctx.notifier.notify("product.dagMutated", { productId: this.productId, mutation, by });
    if (this.phase === "awaiting_confirmation") {
      this.ctx.notifier.notify("product.planReady", { productId: this.productId, plan });
    } else {
      this.announceTopology();
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Status

  /** The `product.status` result (PROTOCOL.md section 5), computed from memory; never writes (guarantee 3). */
  status(): Record<string, unknown> {
    const s = this.model.state;
    const used = s.usage.inputTokens + s.usage.outputTokens;
    const last = s.checkpoints[s.checkpoints.length - 1];
    const recovery = this.recovery();
    return {
      productId: s.productId,
      projectId: s.projectId,
      name: s.name,
      phase: s.phase,
      ...(s.plan ? { plan: s.plan } : {}),
      tasks: s.tasks,
      progress: progressOfModel(this.model),
      budget: {
        usedTokens: used,
        inputTokens: s.usage.inputTokens,
        outputTokens: s.usage.outputTokens,
        elapsedMs: this.liveElapsedMs(),
        ...(s.budget.maxTotalTokens !== undefined ? { maxTotalTokens: s.budget.maxTotalTokens } : {}),
        ...(s.budget.maxDurationMs !== undefined ? { maxDurationMs: s.budget.maxDurationMs } : {}),
        tokenSource:
          used === 0 ? "none" : s.usage.estimatedTokens === 0 ? "reported" : s.usage.estimatedTokens >= used ? "estimated" : "mixed",
      },
      checkpoints: s.checkpoints.length,
      ...(last ? { lastCheckpointAt: last.at } : {}),
      dropped: this.dropped,
      ...(recovery ? { recovery } : {}),
    };
  }

  /**
   * `product.status` with what only the authority and the workspace know (guarantee 10, issue 4): for a product this
   * process does not drive, its state is first brought up to date with the authority; a live lease of another
   * process is reported as such; and a paused or ownerless run whose inputs drifted since its last checkpoint (plan
   * or leader prompt version, workspace git HEAD, agent definitions) says which changed, old → new, and that it needs
   * an explicit `product.resume` (`recovery.needsExplicitResume`). Never writes (guarantee 3).
   */
  async inspect(): Promise<Record<string, unknown>> {
    if (!this.driving && this.running.size === 0) await this.exclusive(() => this.catchUpNow());
    const status = this.status();
    const phase = this.model.state.phase;
    // A product that lost events stays refused whatever else changed (guarantee 4 outranks drift).
    if (this.lost > 0 || this.driving || (phase !== "executing" && phase !== "paused")) return status;
    const holder = await this.lease.holder();
    if (holder && holder.live && !holder.mine) {
      status.recovery = {
        cause: `Another server process (owner ${holder.owner}) is executing this product; its lease runs until ${holder.expiresAt}.`,
        resumable: false,
        remediation: "Use that process, or wait until its lease expires (it stopped renewing) and then call product.resume.",
      };
      return status;
    }
    const drift = await this.drift();
    if (drift.length === 0) return status;
    const base = this.recovery();
    const recovery: DriftRecovery = {
      cause: `${base ? `${base.cause} ` : ""}Since its last checkpoint ${drift.map((d) => d.text).join("; ")}.`,
      resumable: true,
      remediation:
        "Check that the workspace and the agents are as the run expects, then call product.resume to continue " +
        "explicitly (completed tasks are kept); an automatic resume will not continue on its own.",
      needsExplicitResume: true,
      drift: drift.map((d) => ({ what: d.what, from: d.from, to: d.to })),
    };
    status.recovery = recovery;
    return status;
  }

  /** Guarantee 10: a paused, failed or ownerless run explains its cause and remedy in plain words. */
  recovery(): { cause: string; resumable: boolean; remediation: string } | undefined {
    const s = this.model.state;
    if (this.lost > 0 && !TerminalPhases.includes(s.phase)) {
      return {
        cause: `${this.lost} stored ${this.lost === 1 ? "event" : "events"} of this product failed validation or ${
          this.lost === 1 ? "is" : "are"
        } missing (guarantee 4); its state cannot be trusted to run.`,
        resumable: false,
        remediation: "Restore the state store from a backup, or delete the product; it can still be read and listed.",
      };
    }
    if (s.phase === "paused" || s.phase === "failed") {
      return (
        s.recovery ?? {
          cause: s.phase === "paused" ? "The product is paused." : "The product failed.",
          resumable: s.phase === "paused",
          remediation: s.phase === "paused" ? "Call product.resume to continue." : "Replay a failed task or roll back.",
        }
      );
    }
    if (s.phase === "executing" && !this.driving) {
      return {
        cause: "No process is driving this product (the server that ran it stopped).",
        resumable: true,
        remediation: "Call product.resume to continue; tasks that were running will run again.",
      };
    }
    const waiting = s.tasks.find((t) => t.status === "waiting");
    if (s.phase === "executing" && waiting) {
      return {
        cause: `Task ${waiting.taskId} is waiting for an answer: ${waiting.question ?? "(no question given)"}`,
        resumable: true,
        remediation: "Answer with product.message; the task will then run again.",
      };
    }
    if (s.phase === "planning" && this.loadedFromStore && !this.planningStarted && !s.plan && !s.pendingAsk && !s.planError) {
      return {
        cause: "Planning did not finish: the server that ran the leader's turn stopped.",
        resumable: true,
        remediation: "Send product.message (e.g. \"plan again\") to ask the leader to plan.",
      };
    }
    if (s.phase === "planning" && s.planError) {
      return { cause: s.planError, resumable: true, remediation: "Send product.message to ask the leader to plan again." };
    }
    return undefined;
  }
}
