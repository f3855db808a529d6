/**
 * GoalLoopCoordinator: the `x/goal` loop (PROTOCOL.md section 6, issue 5). `GoalRun` drives one goal run; `GoalService`
 * (service.ts) is the facade behind every `x/goal.*` method.
 *
 * A goal run repeats: the leader derives acceptance criteria; for each phase the leader plans a product from the goal,
 * the criteria, the progress so far and the user messages handed over at the last boundary; the product runs
 * (confirmed automatically, with what is left of the goal's budget); the leader assesses which criteria now pass. It
 * ends when every criterion passes, `noProgressLimit` phases in a row pass nothing new, a budget or `maxPhases` is
 * spent, or the user stops it.
 *
 * Guarantees kept here:
 * - Write before act: every step is an event appended to the goal's stream before it takes effect (records.ts); the
 *   phase's product id is recorded (`phase_started`) before the product is created.
 * - It cannot run away: a paused, blocked, budget-limited or stopped goal starts no phase and no leader turn, ever,
 *   until resumed. The check re-reads the persisted events right before each phase start and each leader turn, so a
 *   status written by another process counts too.
 * - Operations on one goal run are serialised (`exclusive`); leader turns run outside the lock so `x/goal.pause` and
 *   `x/goal.stop` answer at once. A turn that was in flight when the goal paused may finish; its result is recorded
 *   only when nothing newer contradicts it, and it never leads to a start.
 * - Edits and queued messages take effect at the next phase boundary (a `boundary` event), in order, exactly once:
 *   the messages go to the next phase that starts, and only to it.
 *
 * Decisions:
 * - After a server restart a goal run is NOT driven until `x/goal.resume` (nothing is started behind the user's back;
 *   its persisted status stays `running` and `x/goal.status` says it waits for a resume). The resume re-attaches to
 *   the running phase's product and resumes it — completed tasks are not run again (the product's guarantee 7), the
 *   phase is never started again from scratch, and progress is only what an assessment recorded. A phase whose
 *   product cannot be found (deleted, or the server died between recording the phase and creating it) is recorded as
 *   a phase that passed nothing, never as progress.
 * - `no_progress` leaves the goal `blocked`, and `budget` / `max_phases` leave it `budget_limited` (records.ts,
 *   `STATUS_AFTER_END`); both are resumable, with spent counters kept. `stopped` is terminal: resume is refused.
 *
 * This file never performs I/O except through ports and the ProductService, and never imports a `node:` module.
 */
import type { GoalEndReason, GoalStatus } from "../../../protocol/goal.js";
import { TerminalPhases, type Budget, type Phase } from "../../../protocol/common.js";
import { validatePlanGraph } from "../dag/graph.js";
import { DomainError, conflict, invalidPhase, isDomainError, persistenceFailed } from "../errors.js";
import type {
  AcceptanceCriterion,
  AgentDirectory,
  Clock,
  IdGenerator,
  LeaderResolver,
  Logger,
  Notifier,
  OwnerLiveness,
  RunStateAuthority,
} from "../ports.js";
import { AgentConfigurationError, AuthorityConflict, remediationThen } from "../ports.js";
import type { ProductOrchestrator } from "../product/orchestrator.js";
import { ProductLease, type LeaseSettings, type LeaseStore } from "../product/lease.js";
import type { ProductService } from "../product/service.js";
import type { GoalHeaderRecord } from "./records.js";
import {
  GoalEvent,
  TERMINAL_GOAL_STATUSES,
  applyGoalEvent,
  goalStream,
  type GoalBudget,
  type GoalState,
} from "./records.js";

/** Events as the coordinator builds them: `v` and `at` are stamped on append. */
type NewGoalEvent = GoalEvent extends infer E ? (E extends GoalEvent ? Omit<E, "v" | "at"> : never) : never;

export interface GoalContext {
  authority: RunStateAuthority;
  products: ProductService;
  leader: LeaderResolver;
  agents: AgentDirectory;
  notifier: Notifier;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  /** Runs `fn` after the current request was answered (`x/goal.start` answers at once). */
  defer(fn: () => void): void;
  /**
   * One driver per goal run across processes (guarantee 6, many servers on one store): while a process drives a goal
   * run it holds the lease record `lease/<goalRunId>` in the goal's project (the product lease's policy, lease.ts),
   * so `x/goal.resume` elsewhere is refused while it is live and `serve --recover` can tell an orphaned run from a
   * driven one. Without it (tests, read-only views) no lease is taken.
   */
  lease?: { store: LeaseStore; settings: LeaseSettings; liveness?: OwnerLiveness };
}

export interface GoalStartParams {
  goal: string;
  cwd: string;
  projectId: string;
  sessionId?: string;
  budget?: GoalBudget;
  noProgressLimit?: number;
}

/** Product phases at which a follower stops waiting: the product ended or paused. */
const PRODUCT_SETTLED: readonly Phase[] = ["completed", "failed", "cancelled", "paused"];

/** The default of `noProgressLimit` (PROTOCOL.md section 6). */
export const DEFAULT_NO_PROGRESS_LIMIT = 3;

/** Marks the error of a leader turn or a wait that ended because the goal was paused, stopped or shut down. */
const INTERRUPTED = Symbol("LoopInterrupted");

/** A leader turn or a wait ended because the goal was paused, stopped or shut down: nothing is recorded. */
function loopInterrupted(what: string): Error {
  return Object.assign(new Error(what), { name: "LoopInterrupted", [INTERRUPTED]: true });
}

function isLoopInterrupted(err: unknown): boolean {
  return err instanceof Error && INTERRUPTED in err;
}

/** What the driver does next (decided inside the lock, done outside it). */
type Step = "stop" | "follow" | "derive" | "plan";

/** One goal run loaded in this process. */
export class GoalRun {
  private lock: Promise<unknown> = Promise.resolve();
  private driving = false;
  private rerun = false;
  /** A write was refused (another writer appended to the stream): this instance never writes again. */
  private fenced = false;
  /** The server shuts down: this instance never starts anything again. */
  private closed = false;
  /** Aborted by pause, stop, shutdown and fencing: ends leader turns and waits in flight. Renewed by resume. */
  private controller = new AbortController();
  private wakeUp: (() => void) | null = null;
  /** Products this instance launched or resumed, so a follower never resumes one a second time. */
  private readonly attached = new Set<string>();
  private headerRevision: number | null | undefined = undefined;
  /** The driver's lease (GoalContext.lease), made on first use. */
  private driverLease: ProductLease | null = null;

  constructor(
    readonly state: GoalState,
    private readonly ctx: GoalContext,
    /** True when the run was loaded from the authority (not started in this process). */
    readonly loadedFromStore: boolean,
  ) {}

  get id(): string {
    return this.state.goalRunId;
  }

  /** True while this process drives the loop. */
  get isDriving(): boolean {
    return this.driving;
  }

  /** True once a write of this instance was refused; the service replaces it with a fresh load. */
  get isFenced(): boolean {
    return this.fenced;
  }

  /** The driver's lease, or null when the context has none. */
  private lease(): ProductLease | null {
    const settings = this.ctx.lease;
    if (!settings) return null;
    this.driverLease ??= new ProductLease(
      settings.store,
      this.ctx.clock,
      this.ctx.logger,
      this.state.projectId,
      this.id,
      settings.settings,
      (loss) => {
        // Another process took the run over (or the store failed the renewal): this instance never drives again.
        this.ctx.logger.error({ goalRunId: this.id, loss: loss.kind }, "goal run lease lost; it stops driving here");
        this.fenced = true;
        this.controller.abort();
        this.wake();
      },
      settings.liveness,
      `Goal run ${this.id}`,
    );
    return this.driverLease;
  }

  /**
   * Takes the driver's lease (renews it when held). Throws `conflict` (with the owner) while another process's lease is live,
   * `persistence_failed` when the store failed; returns true when this call took it (false: held already, or no lease).
   */
  private async takeLease(): Promise<boolean> {
    const lease = this.lease();
    if (!lease) return false;
    const held = lease.held;
    // Always through acquire (renews a held lease): it queues behind a release still in flight, never races it.
    await lease.acquire();
    return !held;
  }

  /** Gives the driver's lease back (deleted when still ours). Never throws. */
  releaseLease(): Promise<void> {
    return this.driverLease?.release() ?? Promise.resolve();
  }

  /** Runs `fn` after every earlier exclusive section of this goal run finished; errors reach the caller only. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.lock.then(fn, fn);
    this.lock = next.catch(() => undefined);
    return next;
  }

  /** Wakes the driver when it waits for its phase's product (called on the product's phase changes). */
  wake(): void {
    this.wakeUp?.();
  }

  private now(): string {
    return new Date(this.ctx.clock.now()).toISOString();
  }

  /**
   * Appends events (compare-and-swap on the stream's sequence number), then applies them and announces status
   * changes. Call inside `exclusive`, after `refresh`. Throws `conflict` when someone else appended (this instance is
   * fenced), `persistence_failed` when the authority failed; nothing is applied then. An event that does not match
   * its schema is a bug: it throws before anything is written.
   */
  async commit(events: NewGoalEvent[]): Promise<void> {
    if (this.fenced) throw conflict({}, `Goal run ${this.id}`);
    const at = this.now();
    const stamped = events.map((e) => {
      const parsed = GoalEvent.safeParse({ v: 1, at, ...e });
      if (!parsed.success) throw new Error(`invalid goal event ${e.type}: ${parsed.error.message}`);
      return parsed.data;
    });
    const from = this.state.seq;
    try {
      await this.ctx.authority.appendEvents(this.state.projectId, goalStream(this.id), stamped, from);
    } catch (err) {
      if (err instanceof AuthorityConflict) {
        this.fenced = true;
        this.controller.abort();
        this.wake();
        throw conflict(err.details, `Goal run ${this.id}`);
      }
      throw persistenceFailed(err instanceof Error ? err.message : String(err));
    }
    // A concurrent `refresh` may already have applied some of them: each seq is applied once.
    stamped.forEach((e, i) => {
      if (from + i + 1 > this.state.seq) applyGoalEvent(this.state, e, from + i + 1);
    });
    for (const e of stamped) {
      if (e.type === "status" || e.type === "resumed" || e.type === "ended") {
        this.ctx.notifier.notify("x/goal.statusChanged", { goalRunId: this.id, status: this.state.status });
      }
    }
    await this.writeHeader().catch((err: unknown) => {
      this.headerRevision = undefined; // re-read it next time
      this.ctx.logger.warn({ err, goalRunId: this.id }, "goal header write failed");
    });
  }

  /** Writes the `x/goal.list` header from the current state (compare-and-swap on its revision). */
  private async writeHeader(): Promise<void> {
    const s = this.state;
    const header: GoalHeaderRecord = {
      v: 1,
      goalRunId: s.goalRunId,
      projectId: s.projectId,
      status: s.status,
      goal: s.goal,
      phaseIndex: currentPhaseIndex(s),
      startedAt: s.startedAt,
      updatedAt: s.updatedAt,
    };
    if (this.headerRevision === undefined) {
      const current = await this.ctx.authority.get(s.projectId, "goal", s.goalRunId);
      this.headerRevision = current ? current.revision : null;
    }
    const { revision } = await this.ctx.authority.put(s.projectId, "goal", s.goalRunId, header, this.headerRevision);
    this.headerRevision = revision;
  }

  /**
   * Applies events written since we last looked (by this process, another one, or before a restart). Reading never
   * writes; an event that does not parse, or a gap in the sequence, is skipped and counted in `dropped` (guarantee
   * 4), and a goal run with one is never driven again (PROTOCOL.md section 6: goal runs fail closed). Each seq is
   * applied once.
   */
  async refresh(): Promise<void> {
    const events = await this.ctx.authority.readEvents(this.state.projectId, goalStream(this.id), this.state.seq);
    for (const { seq, event } of events) {
      if (seq <= this.state.seq) continue;
      if (seq > this.state.seq + 1) this.state.dropped += seq - this.state.seq - 1;
      const parsed = GoalEvent.safeParse(event);
      if (parsed.success) applyGoalEvent(this.state, parsed.data, seq);
      else {
        this.state.dropped++;
        this.state.seq = seq;
      }
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // The loop

  /** Starts the driver unless it runs already (then it looks again when it ends). Never throws. */
  drive(): void {
    if (this.fenced || this.closed) return;
    if (this.driving) {
      this.rerun = true;
      return;
    }
    this.driving = true;
    this.rerun = false;
    if (this.controller.signal.aborted) this.controller = new AbortController();
    this.loop()
      .catch((err: unknown) => this.onLoopError(err))
      .finally(() => {
        this.driving = false;
        if (this.rerun && !this.fenced && !this.closed) {
          this.rerun = false;
          this.drive();
          return;
        }
        // Not driven here any more: another server may take it (serve --recover) without waiting for the expiry.
        void this.releaseLease();
      });
  }

  /**
   * The loop failed. An interrupted turn (pause, stop, shutdown) records nothing; a refused or failed write leaves
   * the persisted status as it is (the authority is the barrier, guarantee 2); anything else (a leader error, an
   * invalid phase plan) blocks the goal with the reason — but only a goal that is still running.
   */
  private async onLoopError(err: unknown): Promise<void> {
    if (isLoopInterrupted(err) || this.closed) return;
    if (isDomainError(err, "conflict") || isDomainError(err, "persistence_failed")) {
      this.ctx.logger.error({ err, goalRunId: this.id }, "goal loop stopped: its state could not be written");
      return;
    }
    this.ctx.logger.error({ err, goalRunId: this.id }, "goal loop failed");
    const reason = err instanceof Error ? err.message : String(err);
    await this.exclusive(async () => {
      await this.refresh();
      if (this.state.status !== "running" || this.fenced) return;
      await this.commit([{ type: "status", status: "blocked", reason: `The goal loop stopped: ${reason}` }]);
    }).catch((e: unknown) =>
      this.ctx.logger.error({ err: e, goalRunId: this.id }, "could not record the loop failure"),
    );
  }

  /** True when the persisted status allows starting something now. Re-reads the stream first; call inside the lock. */
  private async mayStart(): Promise<boolean> {
    await this.refresh();
    return this.state.status === "running" && !this.fenced && !this.closed && this.state.dropped === 0;
  }

  /**
   * Fail closed (PROTOCOL.md section 6, DESIGN.md guarantee 4): a goal run some of whose stored events did not parse
   * or are missing is never driven again — a lost `phase_started` would start its phase a second time. Returns the
   * recovery `x/goal.status` reports, or undefined when every event was read.
   */
  failClosedRecovery(): { cause: string; resumable: false; remediation: string } | undefined {
    const dropped = this.state.dropped;
    if (dropped === 0) return undefined;
    return {
      cause:
        `${dropped} stored ${dropped === 1 ? "event" : "events"} of this goal run failed validation or ` +
        `${dropped === 1 ? "is" : "are"} missing (guarantee 4); driving it again could start a phase twice.`,
      resumable: false,
      remediation: "Restore the state store from a backup, or start a new goal run; this one can still be read.",
    };
  }

  private leader() {
    return this.ctx.leader(undefined);
  }

  private async loop(): Promise<void> {
    try {
      await this.takeLease();
    } catch (err) {
      // Another process drives this goal run (its lease is live): this one does not.
      this.ctx.logger.warn({ goalRunId: this.id, err }, "goal run not driven here: another process holds it");
      throw loopInterrupted("driven elsewhere");
    }
    for (;;) {
      const step = await this.exclusive(() => this.decide());
      if (step === "stop") return;
      if (step === "follow") await this.followPhase();
      else if (step === "derive") await this.deriveCriteria();
      else await this.planAndStartPhase();
    }
  }

  /** Decides the next step from the persisted state; records a boundary or an end on the way. Inside the lock. */
  private async decide(): Promise<Step> {
    if (!(await this.mayStart())) return "stop";
    const s = this.state;
    if (s.productId !== undefined) return "follow";
    // Phase boundary: the goal edit and queued messages take effect now, in order, exactly once.
    if (s.pendingGoal !== undefined || s.queued.length > 0) {
      await this.commit([{ type: "boundary", goal: s.pendingGoal ?? s.goal, consumed: s.queued.length }]);
    }
    if (s.criteria.length === 0 || s.criteriaGoal !== s.goal) return "derive";
    const ending = this.endReasonNow();
    if (ending) {
      await this.end(ending.reason, ending.summary);
      return "stop";
    }
    return "plan";
  }

  /** Why the loop must end before the next phase, or null. Achievement first, then stalls, then limits. */
  private endReasonNow(): { reason: GoalEndReason; summary: string } | null {
    const s = this.state;
    const passed = s.criteria.filter((c) => c.passed).length;
    const of = `${passed} of ${s.criteria.length} criteria pass`;
    if (s.criteria.length > 0 && passed === s.criteria.length) {
      return {
        reason: "achieved",
        summary: `All ${s.criteria.length} acceptance criteria pass after ${s.phasesStarted} phase(s).`,
      };
    }
    if (s.noProgressCount >= s.noProgressLimit) {
      return {
        reason: "no_progress",
        summary: `${s.noProgressCount} phases in a row passed no new criterion (${of}). Edit the goal or send a message, then resume.`,
      };
    }
    if (s.budget.maxPhases !== undefined && s.phasesStarted >= s.budget.maxPhases) {
      return {
        reason: "max_phases",
        summary: `The limit of ${s.budget.maxPhases} phases is reached (${of}). Resume with additionalBudget.maxPhases to continue.`,
      };
    }
    if (s.budget.maxTotalTokens !== undefined && s.usedTokens >= s.budget.maxTotalTokens) {
      return {
        reason: "budget",
        summary: `The token budget is spent: ${s.usedTokens} of ${s.budget.maxTotalTokens} tokens used (${of}). Resume with additionalBudget to continue.`,
      };
    }
    if (s.budget.maxDurationMs !== undefined && s.elapsedMs >= s.budget.maxDurationMs) {
      return {
        reason: "budget",
        summary: `The time budget is spent: ${s.elapsedMs} of ${s.budget.maxDurationMs} ms used (${of}). Resume with additionalBudget to continue.`,
      };
    }
    return null;
  }

  /**
   * Records the end, then announces it (`statusChanged` comes from the commit, `ended` after it). `x/goal.ended` is
   * sent only when the status it leads to is final (`completed`, `stopped`, `failed`): a `blocked` or
   * `budget_limited` goal can resume, so it ends later, once (PROTOCOL.md section 6). Inside the lock.
   */
  private async end(reason: GoalEndReason, summary: string, failedReason?: string): Promise<void> {
    await this.commit([{ type: "ended", endReason: reason, summary, ...(failedReason ? { failedReason } : {}) }]);
    const status = this.state.status;
    if (status === "completed" || status === "stopped" || status === "failed") {
      this.ctx.notifier.notify("x/goal.ended", { goalRunId: this.id, endReason: reason, summary });
    }
  }

  /** Turns a leader failure into what the loop does with it: nothing when the goal was interrupted, else blocked. */
  private leaderFailure(what: string, err: unknown, signal: AbortSignal): Error {
    if (signal.aborted) return loopInterrupted(what);
    if (err instanceof AgentConfigurationError) {
      // Retrying cannot fix it (DESIGN.md "Processes"): the goal is blocked with the fix, no phase is spent on it.
      return new Error(
        `The leader could not ${what}: ${err.message} ${remediationThen(err.remediation, "call x/goal.resume")}`,
      );
    }
    return new Error(`The leader could not ${what}: ${err instanceof Error ? err.message : String(err)}`);
  }

  /** A leader turn: derives the acceptance criteria for the current goal (again after an edit). */
  private async deriveCriteria(): Promise<void> {
    const signal = this.controller.signal;
    // The leader turn starts only if the persisted status still allows it.
    if (!(await this.exclusive(() => this.mayStart()))) return;
    const goal = this.state.goal;
    let result;
    try {
      result = await this.leader().deriveChecklist({
        goalRunId: this.id,
        goal,
        cwd: this.state.cwd,
        roster: this.ctx.agents.list(),
        signal,
      });
    } catch (err) {
      throw this.leaderFailure("derive acceptance criteria", err, signal);
    }
    const criteria = cleanCriteria(result.criteria);
    if (criteria.length === 0) throw new Error("The leader derived no acceptance criteria from the goal.");
    await this.exclusive(async () => {
      await this.refresh();
      if (TERMINAL_GOAL_STATUSES.includes(this.state.status) || this.state.goal !== goal) return;
      const first = this.state.criteria.length === 0;
      await this.commit([{ type: "criteria_derived", criteria, message: clip(result.message, 20_000) }]);
      if (first) {
        this.ctx.notifier.notify("x/goal.started", {
          goalRunId: this.id,
          criteria: this.state.criteria.map((c) => ({ id: c.id, text: c.text })),
        });
      }
    });
  }

  /**
   * A leader turn, then a start: plans the next phase and launches its product. The status is re-read before the
   * turn and again right before the start; a pause during planning wins (the plan is dropped, nothing starts).
   */
  private async planAndStartPhase(): Promise<void> {
    const signal = this.controller.signal;
    if (!(await this.exclusive(() => this.mayStart()))) return;
    const s = this.state;
    const phaseIndex = s.phaseIndex;
    const goal = s.goal;
    let planned;
    try {
      planned = await this.leader().planPhase({
        goalRunId: this.id,
        goal,
        cwd: s.cwd,
        phaseIndex,
        criteria: s.criteria.map((c) => ({ ...c })),
        progressSummary: progressSummaryOf(s),
        messages: [...s.phaseMessages],
        roster: this.ctx.agents.list(),
        signal,
        onText: () => undefined,
      });
    } catch (err) {
      throw this.leaderFailure(`plan phase ${phaseIndex + 1}`, err, signal);
    }
    await this.exclusive(async () => {
      // Right before the phase starts: the persisted status must still be running and nothing moved on.
      if (!(await this.mayStart())) return;
      if (s.productId !== undefined || s.phaseIndex !== phaseIndex || s.goal !== goal) return;
      // A phase is started once: never again once its product was recorded.
      if (s.phases[phaseIndex]?.productId !== undefined) return;
      const plan = planned.plan;
      if (plan.tasks.length === 0) throw new Error(`The leader planned phase ${phaseIndex + 1} without tasks.`);
      const check = validatePlanGraph(plan.instances, plan.tasks);
      if (!check.ok) throw new Error(`The leader planned an invalid phase ${phaseIndex + 1}: ${check.reason}`);
      const known = new Set(s.criteria.map((c) => c.id));
      const targets = [...new Set(planned.targets.filter((t) => known.has(t)))];
      const productId = this.ctx.ids("prd");
      await this.commit([
        { type: "phase_planned", phaseIndex, targets, message: clip(planned.message, 20_000) },
        { type: "phase_started", phaseIndex, productId },
      ]);
      this.ctx.notifier.notify("x/goal.phaseStarted", { goalRunId: this.id, phaseIndex, productId });
      const budget = this.phaseBudget();
      this.attached.add(productId);
      await this.ctx.products.launch(
        {
          goal: s.goal,
          cwd: s.cwd,
          projectId: s.projectId,
          ...(s.sessionId !== undefined ? { sessionId: s.sessionId } : {}),
          name: clip(plan.name || `Phase ${phaseIndex + 1}`, 500),
          ...(budget ? { budget } : {}),
        },
        plan,
        planned.message,
        productId,
      );
    });
  }

  /** What is left of the goal's budget, given to the phase's product. */
  private phaseBudget(): Budget | undefined {
    const s = this.state;
    const out: Budget = {};
    if (s.budget.maxTotalTokens !== undefined) out.maxTotalTokens = Math.max(1, s.budget.maxTotalTokens - s.usedTokens);
    if (s.budget.maxDurationMs !== undefined) out.maxDurationMs = Math.max(1, s.budget.maxDurationMs - s.elapsedMs);
    return Object.keys(out).length > 0 ? out : undefined;
  }

  /**
   * Follows the running phase's product until it ends or pauses, then assesses it (a leader turn) or records why the
   * goal cannot go on (budget spent, product paused). Never resumes a product this instance already launched or
   * resumed; a phase whose product is gone is recorded as one that passed nothing.
   */
  private async followPhase(): Promise<void> {
    const productId = this.state.productId;
    if (productId === undefined) return;
    let product: ProductOrchestrator;
    try {
      product = await this.ctx.products.get(productId);
    } catch (err) {
      if (!isDomainError(err, "not_found")) throw err;
      await this.exclusive(() => this.abandonPhase(productId));
      return;
    }
    if (
      product.phase === "awaiting_confirmation" ||
      (product.phase === "executing" && !product.isDriving && !this.attached.has(productId))
    ) {
      // Created but never confirmed, or not driven by anyone here: continue it, if the goal may still start things.
      if (!(await this.exclusive(() => this.mayStart()))) return;
      this.attached.add(productId);
      if (product.phase === "awaiting_confirmation") await this.ctx.products.confirm(productId, {});
      else await this.ctx.products.resume(productId, undefined, { automatic: true });
    }
    await this.waitSettled(product);
    const next = await this.exclusive(async () => {
      // A paused or stopped goal assesses nothing now (an assessment is a leader turn); resume does it later.
      if (!(await this.mayStart()) || this.state.productId !== productId) return "none" as const;
      if (product.phase === "paused") {
        await this.onProductPaused(product);
        return "none" as const;
      }
      return TerminalPhases.includes(product.phase) ? ("assess" as const) : ("none" as const);
    });
    if (next === "assess") await this.assessPhase(productId);
  }

  /** Resolves once the product ended or paused, or the goal was interrupted (pause, stop, shutdown, fencing). */
  private async waitSettled(product: ProductOrchestrator): Promise<void> {
    while (!PRODUCT_SETTLED.includes(product.phase) && !this.controller.signal.aborted && !this.closed) {
      const signal = this.controller.signal;
      await new Promise<void>((resolve) => {
        const done = (): void => {
          signal.removeEventListener("abort", done);
          if (this.wakeUp === done) this.wakeUp = null;
          resolve();
        };
        this.wakeUp = done;
        signal.addEventListener("abort", done, { once: true });
        if (PRODUCT_SETTLED.includes(product.phase) || signal.aborted) done();
      });
    }
  }

  /**
   * The phase's product paused while the goal runs (its budget tripped, a persistence failure, or a client paused
   * the product itself): a spent budget ends the goal `budget` (budget-limited), anything else blocks it with the
   * product's cause. Either way no phase and no leader turn starts until `x/goal.resume`. Inside the lock.
   */
  private async onProductPaused(product: ProductOrchestrator): Promise<void> {
    const st = product.model.state;
    const used = st.usage.inputTokens + st.usage.outputTokens;
    const cause = st.recovery?.cause ?? "The phase's product paused.";
    // A configuration error's fix ends "…, then resume." (agent-errors): the goal's reason carries it.
    const remediation = st.recovery?.remediation;
    const fix = remediation !== undefined && /then resume\.?\s*$/iu.test(remediation) ? remediation : undefined;
    const spent =
      (st.budget.maxTotalTokens !== undefined && used >= st.budget.maxTotalTokens) ||
      (st.budget.maxDurationMs !== undefined && st.usage.elapsedMs >= st.budget.maxDurationMs) ||
      /budget/iu.test(cause);
    const phase = this.state.phaseIndex + 1;
    if (spent) {
      await this.end(
        "budget",
        `The budget is spent during phase ${phase}: ${cause} Resume with additionalBudget to continue the phase.`,
      );
    } else {
      await this.commit([
        {
          type: "status",
          status: "blocked",
          reason:
            `Phase ${phase}'s product paused: ${cause} ` +
            (fix !== undefined
              ? remediationThen(fix, "resume the goal to resume it")
              : "Resume the goal to resume it."),
        },
      ]);
    }
  }

  /** Records a phase whose product is gone as one that passed nothing (no fabricated progress). Inside the lock. */
  private async abandonPhase(productId: string): Promise<void> {
    await this.refresh();
    const s = this.state;
    if (s.productId !== productId || TERMINAL_GOAL_STATUSES.includes(s.status)) return;
    const passed = s.criteria.filter((c) => c.passed).map((c) => c.id);
    const phaseIndex = s.phaseIndex;
    await this.commit([
      {
        type: "phase_assessed",
        phaseIndex,
        passed,
        newlyPassed: [],
        regressed: [],
        phaseTokens: 0,
        phaseElapsedMs: 0,
        productPhase: "missing",
        message: `Phase ${phaseIndex + 1}'s product ${productId} was not found (deleted, or never created); it counts as a phase that passed nothing.`,
      },
    ]);
    this.ctx.notifier.notify("x/goal.phaseAssessed", {
      goalRunId: this.id,
      phaseIndex,
      passed: passed.length,
      total: s.criteria.length,
      newlyPassed: [],
      regressed: [],
    });
  }

  /**
   * A leader turn: asks which criteria pass after the phase's product ended, then records the settled tasks and the
   * assessment in one append. A failed assessment keeps the earlier verdicts (the phase passed nothing new).
   */
  private async assessPhase(productId: string): Promise<void> {
    const signal = this.controller.signal;
    if (!(await this.exclusive(() => this.mayStart()))) return;
    const product = await this.ctx.products.get(productId);
    const st = product.model.state;
    const s = this.state;
    const phaseIndex = s.phaseIndex;
    const before = s.criteria.filter((c) => c.passed).map((c) => c.id);
    let passedIds: string[];
    let message: string;
    try {
      const result = await this.leader().assess({
        goalRunId: this.id,
        goal: s.goal,
        phaseIndex,
        criteria: s.criteria.map((c) => ({ ...c })),
        plan: st.plan ?? { productId, version: 0, name: "", summary: "", instances: [], tasks: [] },
        tasks: st.tasks.map((t) => ({ ...t })),
        targets: [...s.targets],
        signal,
      });
      const known = new Set(s.criteria.map((c) => c.id));
      passedIds = [...new Set(result.passed.filter((id) => known.has(id)))];
      message = result.message;
    } catch (err) {
      if (signal.aborted) throw loopInterrupted("assess");
      passedIds = before;
      message = `The leader could not assess the phase: ${err instanceof Error ? err.message : String(err)}`;
    }
    await this.exclusive(async () => {
      await this.refresh();
      if (this.state.productId !== productId || TERMINAL_GOAL_STATUSES.includes(this.state.status)) return;
      const beforeSet = new Set(before);
      const after = new Set(passedIds);
      const newlyPassed = [...after].filter((id) => !beforeSet.has(id));
      const regressed = before.filter((id) => !after.has(id));
      await this.commit([
        ...st.tasks.map((t) => ({ type: "task_settled" as const, phaseIndex, taskId: t.taskId, status: t.status })),
        {
          type: "phase_assessed",
          phaseIndex,
          passed: [...after],
          newlyPassed,
          regressed,
          phaseTokens: st.usage.inputTokens + st.usage.outputTokens,
          phaseElapsedMs: st.usage.elapsedMs,
          productPhase: product.phase,
          message: clip(message, 20_000),
        },
      ]);
      this.ctx.notifier.notify("x/goal.phaseAssessed", {
        goalRunId: this.id,
        phaseIndex,
        passed: after.size,
        total: this.state.criteria.length,
        newlyPassed,
        regressed,
      });
    });
  }

  // -------------------------------------------------------------------------------------------------------------
  // Operations (each serialised with the loop's decisions)

  /**
   * `x/goal.pause`: records `paused` (no phase or leader turn starts from now on), interrupts a leader turn in
   * flight, then pauses the running phase's product and waits until its workers stopped. Idempotent on paused;
   * throws invalid_phase in any other status than running.
   */
  async pause(): Promise<GoalStatus> {
    await this.exclusive(async () => {
      await this.refresh();
      if (this.state.status === "paused") return;
      if (this.state.status !== "running") {
        throw invalidPhase(this.state.status, ["running", "paused"], {
          subject: `Goal run ${this.id}`,
          operation: "x/goal.pause",
        });
      }
      await this.commit([{ type: "status", status: "paused", reason: "Paused by the client." }]);
      this.controller.abort();
    });
    await this.pauseProduct();
    return this.state.status;
  }

  /** Pauses the open phase's product when it executes (also one no process drives, after a restart). */
  private async pauseProduct(): Promise<void> {
    const productId = this.state.productId;
    if (productId === undefined) return;
    const product = await this.ctx.products.get(productId).catch(() => undefined);
    if (product?.phase !== "executing") return;
    await this.ctx.products.pause(productId).catch((err: unknown) => {
      this.ctx.logger.warn({ err, goalRunId: this.id, productId }, "could not pause the phase's product");
    });
  }

  /**
   * `x/goal.resume`: resumes a paused, blocked or budget-limited goal — adding `additionalBudget` to the goal and to
   * the open phase's product, spent counters kept — or a running one no process drives (after a restart). Re-attaches
   * to the open phase's product and resumes it. Throws invalid_phase for a stopped, completed or failed goal, or one
   * that runs here already, and conflict while another process still holds the product's lease (nothing recorded
   * then); when resuming the product fails after the resume was recorded, the goal is blocked with the reason and the
   * error is thrown.
   */
  async resume(additionalBudget?: GoalBudget): Promise<GoalStatus> {
    let tookLease = false;
    await this.exclusive(async () => {
      await this.refresh();
      const failed = this.failClosedRecovery();
      if (failed) {
        throw new DomainError(
          "invalid_phase",
          `Goal run ${this.id} cannot be resumed: ${failed.cause} ${failed.remediation}`,
          { phase: this.state.status, allowed: [] },
        );
      }
      const status = this.state.status;
      const resumable =
        status === "paused" ||
        status === "blocked" ||
        status === "budget_limited" ||
        (status === "running" && !this.driving);
      if (!resumable || this.closed) {
        throw invalidPhase(status, ["paused", "blocked", "budget_limited"], {
          subject: `Goal run ${this.id}`,
          operation: status === "running" ? "x/goal.resume (it is already running)" : "x/goal.resume",
        });
      }
      // Before anything is recorded: refuse (conflict, with the owner) while another process drives this goal run
      // or still drives the phase's product, e.g. the lease of a crashed server that has not expired yet.
      tookLease = await this.takeLease();
      const productId = this.state.productId;
      const product =
        productId === undefined ? undefined : await this.ctx.products.get(productId).catch(() => undefined);
      if (product && !product.isDriving) await product.assertWritable();
      const spent = product
        ? {
            spentTokens:
              this.state.usedTokens + product.model.state.usage.inputTokens + product.model.state.usage.outputTokens,
            spentMs: this.state.elapsedMs + product.model.state.usage.elapsedMs,
          }
        : {};
      await this.commit([{ type: "resumed", ...(additionalBudget ? { additionalBudget } : {}), ...spent }]);
      this.controller = new AbortController();
      if (
        product &&
        productId !== undefined &&
        (product.phase === "paused" || (product.phase === "executing" && !product.isDriving))
      ) {
        const extra: Budget = {};
        if (additionalBudget?.maxTotalTokens !== undefined) extra.maxTotalTokens = additionalBudget.maxTotalTokens;
        if (additionalBudget?.maxDurationMs !== undefined) extra.maxDurationMs = additionalBudget.maxDurationMs;
        try {
          await this.ctx.products.resume(productId, Object.keys(extra).length > 0 ? extra : undefined);
          this.attached.add(productId);
        } catch (err) {
          const reason = err instanceof Error ? err.message : String(err);
          await this.commit([
            {
              type: "status",
              status: "blocked",
              reason: `Could not resume phase ${this.state.phaseIndex + 1}'s product: ${reason}`,
            },
          ]).catch(() => undefined);
          throw err;
        }
      }
    }).catch(async (err: unknown) => {
      // Not resumed here after all: the lease taken for it goes back at once.
      if (tookLease && !this.driving) await this.releaseLease();
      throw err;
    });
    this.drive();
    return this.state.status;
  }

  /** `x/goal.stop`: ends the goal for good (terminal) and pauses the open phase's product. Idempotent on stopped. */
  async stop(reason?: string): Promise<void> {
    await this.exclusive(async () => {
      await this.refresh();
      if (this.state.status === "stopped") return;
      if (TERMINAL_GOAL_STATUSES.includes(this.state.status)) {
        throw invalidPhase(this.state.status, ["running", "paused", "blocked", "budget_limited"], {
          subject: `Goal run ${this.id}`,
          operation: "x/goal.stop",
        });
      }
      await this.end("stopped", reason ? `Stopped: ${reason}` : "Stopped by the client.");
      this.controller.abort();
    });
    await this.pauseProduct();
    this.wake();
  }

  /** `x/goal.edit`: records the new goal; it takes effect at the next phase boundary. Refused on a terminal goal. */
  async edit(goal: string): Promise<void> {
    await this.exclusive(async () => {
      await this.refresh();
      this.requireNotTerminal("x/goal.edit");
      await this.commit([{ type: "goal_edited", goal }]);
    });
  }

  /** `x/goal.message`: queues a message for the next phase boundary; returns how many are queued. */
  async message(content: string): Promise<number> {
    return this.exclusive(async () => {
      await this.refresh();
      this.requireNotTerminal("x/goal.message");
      await this.commit([{ type: "message_queued", content }]);
      return this.state.queued.length;
    });
  }

  private requireNotTerminal(operation: string): void {
    if (TERMINAL_GOAL_STATUSES.includes(this.state.status)) {
      throw invalidPhase(this.state.status, ["running", "paused", "blocked", "budget_limited"], {
        subject: `Goal run ${this.id}`,
        operation,
      });
    }
  }

  /**
   * Stops driving in this process for good (server shutdown); the persisted status is unchanged. Resolves once the
   * driver's lease is given back (so a `serve --recover` server can take the run over at once). Never throws.
   */
  shutdown(): Promise<void> {
    this.closed = true;
    this.controller.abort();
    this.wake();
    return this.releaseLease();
  }
}

/** Criteria with usable ids and texts, first occurrence of each id kept. */
function cleanCriteria(criteria: readonly AcceptanceCriterion[]): AcceptanceCriterion[] {
  const seen = new Set<string>();
  const out: AcceptanceCriterion[] = [];
  for (const c of criteria) {
    const id = typeof c.id === "string" ? c.id.trim() : "";
    if (id === "" || id.length > 200 || seen.has(id) || /\p{Cc}/u.test(id)) continue;
    seen.add(id);
    out.push({ id, text: clip(String(c.text), 5_000) });
  }
  return out;
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 3)}...` : text;
}

/** A plain-words summary of what the phases so far did. Pure. */
export function progressSummaryOf(s: GoalState): string {
  const passed = s.criteria.filter((c) => c.passed).length;
  const lines = s.phases
    .filter((p) => p !== undefined)
    .map((p) => {
      const said =
        p.messages.length > 0
          ? ` (user messages: ${p.messages.map((m) => JSON.stringify(clip(m, 200))).join(", ")})`
          : "";
      return `Phase ${p.phaseIndex + 1}${said}: ${p.assessment ?? (p.productId ? "running" : "planned")}`;
    });
  const head =
    s.criteria.length === 0 ? "Deriving acceptance criteria." : `${passed} of ${s.criteria.length} criteria pass.`;
  return [head, ...lines].join("\n");
}

/**
 * The `phaseIndex` of `x/goal.status` and `x/goal.list`: the 0-based index of the latest phase that started, as in the
 * `x/goal.phaseStarted` and `x/goal.phaseAssessed` notifications (PROTOCOL.md section 6); 0 before any phase started.
 * (The state's own `phaseIndex` moves to the next phase once one is assessed, one ahead of what the client was told.)
 */
export function currentPhaseIndex(s: { phaseIndex: number; phasesStarted: number }): number {
  return Math.max(0, Math.min(s.phaseIndex, s.phasesStarted - 1));
}
