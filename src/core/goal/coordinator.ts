/**
 * GoalLoopCoordinator: the `x/goal` loop (PROTOCOL.md section 6, issue 5).
 *
 * A goal run repeats: the leader derives acceptance criteria; for each phase the leader plans a product from the goal,
 * the criteria and the progress so far; the product runs (confirmed automatically, with what is left of the goal's
 * budget); the leader assesses which criteria now pass. It ends when every criterion passes, `noProgressLimit` phases
 * in a row pass nothing new, a budget or `maxPhases` is spent, or the user stops it.
 *
 * Every step is an event appended to the goal's stream before it takes effect (records.ts). It cannot run away: a
 * paused, blocked, budget-limited or stopped goal starts no phase and no leader turn, ever, until resumed — the check
 * re-reads the persisted events right before each start. Operations on one goal run are serialised. This file never
 * performs I/O except through ports and the ProductService.
 */
import type { GoalEndReason, GoalStatus } from "../../../protocol/goal.js";
import type { Phase } from "../../../protocol/common.js";
import { conflict, DomainError, invalidPhase, notFound, persistenceFailed } from "../errors.js";
import type {
  AgentDirectory,
  Clock,
  IdGenerator,
  LeaderResolver,
  Logger,
  Notifier,
  RunStateAuthority,
} from "../ports.js";
import { AuthorityConflict } from "../ports.js";
import { INDEX_PROJECT } from "../product/records.js";
import type { ProductService } from "../product/service.js";
import {
  GoalEvent,
  GoalHeaderRecord,
  GoalIndexRecord,
  STATUS_AFTER_END,
  TERMINAL_GOAL_STATUSES,
  applyGoalEvent,
  emptyGoalState,
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
}

export interface GoalStartParams {
  goal: string;
  cwd: string;
  projectId: string;
  sessionId?: string;
  budget?: GoalBudget;
  noProgressLimit?: number;
}

const PRODUCT_SETTLED: readonly Phase[] = ["completed", "failed", "cancelled", "paused"];

/** One goal run loaded in this process. */
class GoalRun {
  private lock: Promise<unknown> = Promise.resolve();
  private driving = false;
  private fenced = false;
  private controller = new AbortController();
  private wakeUp: (() => void) | null = null;

  constructor(
    readonly state: GoalState,
    private readonly ctx: GoalContext,
  ) {}

  get id(): string {
    return this.state.goalRunId;
  }

  get isDriving(): boolean {
    return this.driving;
  }

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

  /** Appends events (CAS on the stream's sequence number), then applies them. A conflict fences this run. */
  async commit(events: NewGoalEvent[]): Promise<void> {
    if (this.fenced) throw conflict({}, `Goal run ${this.id}`);
    const at = this.now();
    const stamped = events.map((e) => ({ v: 1, at, ...e }) as GoalEvent);
    const from = this.state.seq;
    try {
      await this.ctx.authority.appendEvents(this.state.projectId, goalStream(this.id), stamped, from);
    } catch (err) {
      if (err instanceof AuthorityConflict) {
        this.fenced = true;
        this.controller.abort();
        throw conflict(err.details, `Goal run ${this.id}`);
      }
      throw persistenceFailed(err instanceof Error ? err.message : String(err));
    }
    stamped.forEach((e, i) => applyGoalEvent(this.state, e, from + i + 1));
    for (const e of stamped) {
      if (e.type === "status" || e.type === "resumed" || e.type === "ended") {
        this.ctx.notifier.notify("x/goal.statusChanged", { goalRunId: this.id, status: this.state.status });
      }
    }
    await this.writeHeader().catch((err: unknown) => this.ctx.logger.warn({ err, goalRunId: this.id }, "goal header write failed"));
  }

  private headerRevision: number | null | undefined = undefined;

  private async writeHeader(): Promise<void> {
    const s = this.state;
    const header: GoalHeaderRecord = {
      v: 1,
      goalRunId: s.goalRunId,
      projectId: s.projectId,
      status: s.status,
      goal: s.goal,
      phaseIndex: s.phaseIndex,
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
   * Re-reads events written since we last looked (by this process or, after a restart, by an earlier one). Reading
   * never writes; invalid events are skipped and counted (guarantee 4).
   */
  async refresh(): Promise<void> {
    const events = await this.ctx.authority.readEvents(this.state.projectId, goalStream(this.id), this.state.seq);
    for (const { seq, event } of events) {
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

  /** Starts the driver unless it runs already. Never throws; failures end in a recorded status. */
  drive(): void {
    if (this.fenced) return;
    if (this.driving) {
      // The running driver may be on its way out (it saw a pause); make it look again when it ends.
      this.rerun = true;
      return;
    }
    this.driving = true;
    this.rerun = false;
    if (this.controller.signal.aborted) this.controller = new AbortController();
    this.loop()
      .catch(async (err: unknown) => {
        this.ctx.logger.error({ err, goalRunId: this.id }, "goal loop failed");
        if (err instanceof DomainError && (err.code === "conflict" || err.code === "persistence_failed")) return;
        const reason = err instanceof Error ? err.message : String(err);
        await this.exclusive(() =>
          this.commit([{ type: "status", status: "blocked", reason: `The goal loop stopped: ${reason}` }]),
        ).catch(() => undefined);
      })
      .finally(() => {
        this.driving = false;
        if (this.rerun) {
          this.rerun = false;
          this.drive();
        }
      });
  }

  private rerun = false;

  /** True when the persisted status allows starting something now (re-read right before each start). */
  private async mayStart(): Promise<boolean> {
    await this.refresh();
    return this.state.status === "running" && !this.fenced;
  }

  private leader() {
    return this.ctx.leader(undefined);
  }

  private async loop(): Promise<void> {
    for (;;) {
      const proceed = await this.exclusive(async () => {
        if (!(await this.mayStart())) return "stop" as const;
        if (this.state.productId) return "follow" as const;
        if (this.state.criteria.length === 0) return "derive" as const;
        const ending = this.endReasonNow();
        if (ending) {
          await this.end(ending.reason, ending.summary);
          return "stop" as const;
        }
        // Phase boundary: goal edits and queued messages take effect now, in order, exactly once.
        const s = this.state;
        if (s.pendingGoal !== undefined || s.queued.length > 0) {
          const goalChanged = s.pendingGoal !== undefined && s.pendingGoal !== s.goal;
          await this.commit([{ type: "boundary", goal: s.pendingGoal ?? s.goal, consumed: s.queued.length }]);
          if (goalChanged) return "derive" as const;
        }
        return "plan" as const;
      });
      if (proceed === "stop") return;
      if (proceed === "follow") {
        await this.followPhase();
        continue;
      }
      if (proceed === "derive") {
        await this.deriveCriteria();
        continue;
      }
      await this.planAndStartPhase();
    }
  }

  private endReasonNow(): { reason: GoalEndReason; summary: string } | null {
    const s = this.state;
    const passed = s.criteria.filter((c) => c.passed).length;
    if (s.criteria.length > 0 && passed === s.criteria.length) {
      return { reason: "achieved", summary: `All ${s.criteria.length} acceptance criteria pass after ${s.phasesStarted} phase(s).` };
    }
    if (s.noProgressCount >= s.noProgressLimit) {
      return {
        reason: "no_progress",
        summary: `${s.noProgressCount} phases in a row passed no new criterion (${passed} of ${s.criteria.length} pass). Edit the goal or send a message, then resume.`,
      };
    }
    if (s.budget.maxPhases !== undefined && s.phasesStarted >= s.budget.maxPhases) {
      return {
        reason: "max_phases",
        summary: `The limit of ${s.budget.maxPhases} phases is reached (${passed} of ${s.criteria.length} criteria pass). Resume with additionalBudget.maxPhases to continue.`,
      };
    }
    if (s.budget.maxTotalTokens !== undefined && s.usedTokens >= s.budget.maxTotalTokens) {
      return {
        reason: "budget",
        summary: `The token budget is spent: ${s.usedTokens} of ${s.budget.maxTotalTokens} tokens used. Resume with additionalBudget to continue.`,
      };
    }
    if (s.budget.maxDurationMs !== undefined && s.elapsedMs >= s.budget.maxDurationMs) {
      return {
        reason: "budget",
        summary: `The time budget is spent: ${s.elapsedMs} of ${s.budget.maxDurationMs} ms used. Resume with additionalBudget to continue.`,
      };
    }
    return null;
  }

  private async end(reason: GoalEndReason, summary: string, failedReason?: string): Promise<void> {
    await this.commit([{ type: "ended", endReason: reason, summary, ...(failedReason ? { failedReason } : {}) }]);
    this.ctx.notifier.notify("x/goal.ended", { goalRunId: this.id, endReason: reason, summary });
  }

  private roster() {
    return this.ctx.agents.list();
  }

  private async deriveCriteria(): Promise<void> {
    // The leader turn starts only if the persisted status still allows it.
    if (!(await this.exclusive(() => this.mayStart()))) return;
    const result = await this.leader().deriveChecklist({
      goalRunId: this.id,
      goal: this.state.goal,
      cwd: this.state.cwd,
      roster: this.roster(),
      signal: this.controller.signal,
    });
    await this.exclusive(async () => {
      await this.refresh();
      if (TERMINAL_GOAL_STATUSES.includes(this.state.status)) return;
      const first = this.state.criteria.length === 0;
      await this.commit([{ type: "criteria_derived", criteria: result.criteria, message: result.message }]);
      if (first) {
        this.ctx.notifier.notify("x/goal.started", {
          goalRunId: this.id,
          criteria: this.state.criteria.map((c) => ({ id: c.id, text: c.text })),
        });
      }
    });
  }

  private progressSummary(): string {
    return progressSummaryOf(this.state);
  }

  private async planAndStartPhase(): Promise<void> {
    if (!(await this.exclusive(() => this.mayStart()))) return;
    const s = this.state;
    const phaseIndex = s.phaseIndex;
    const planned = await this.leader().planPhase({
      goalRunId: this.id,
      goal: s.goal,
      cwd: s.cwd,
      phaseIndex,
      criteria: s.criteria.map((c) => ({ ...c })),
      progressSummary: this.progressSummary(),
      messages: [...s.consumedMessages],
      roster: this.roster(),
      signal: this.controller.signal,
      onText: () => undefined,
    });
    await this.exclusive(async () => {
      // Right before the phase starts: the persisted status must still be running (a pause during planning wins).
      if (!(await this.mayStart())) return;
      await this.commit([{ type: "phase_planned", phaseIndex, targets: planned.targets, message: planned.message }]);
      const budget = this.phaseBudget();
      const product = await this.ctx.products.launch(
        {
          goal: s.goal,
          cwd: s.cwd,
          projectId: s.projectId,
          ...(s.sessionId !== undefined ? { sessionId: s.sessionId } : {}),
          name: planned.plan.name || `Phase ${phaseIndex + 1}`,
          ...(budget ? { budget } : {}),
        },
        planned.plan,
        planned.message,
      );
      await this.commit([{ type: "phase_started", phaseIndex, productId: product.productId }]);
      this.ctx.notifier.notify("x/goal.phaseStarted", { goalRunId: this.id, phaseIndex, productId: product.productId });
    });
  }

  /** What is left of the goal's budget, given to the phase's product. */
  private phaseBudget(): { maxTotalTokens?: number; maxDurationMs?: number } | undefined {
    const s = this.state;
    const out: { maxTotalTokens?: number; maxDurationMs?: number } = {};
    if (s.budget.maxTotalTokens !== undefined) out.maxTotalTokens = Math.max(1, s.budget.maxTotalTokens - s.usedTokens);
    if (s.budget.maxDurationMs !== undefined) out.maxDurationMs = Math.max(1, s.budget.maxDurationMs - s.elapsedMs);
    return Object.keys(out).length > 0 ? out : undefined;
  }

  /**
   * Follows the running phase's product until it settles, then assesses it. After a restart this re-attaches to the
   * product and resumes it (completed tasks are not re-run: the product's own guarantee 7).
   */
  private async followPhase(): Promise<void> {
    const productId = this.state.productId;
    if (!productId) return;
    const product = await this.ctx.products.get(productId);
    if (product.phase === "executing" && !product.isDriving) {
      if (!(await this.exclusive(() => this.mayStart()))) return;
      await this.ctx.products.resume(productId);
    }
    if (product.phase === "awaiting_confirmation") {
      await this.ctx.products.confirm(productId, {});
    }
    while (!PRODUCT_SETTLED.includes(product.phase) && !this.controller.signal.aborted) {
      const signal = this.controller.signal;
      await new Promise<void>((resolve) => {
        this.wakeUp = resolve;
        signal.addEventListener("abort", () => resolve(), { once: true });
        if (PRODUCT_SETTLED.includes(product.phase) || signal.aborted) resolve();
      });
      this.wakeUp = null;
    }
    await this.exclusive(async () => {
      await this.refresh();
      if (this.state.productId !== productId) return;
      if (product.phase === "paused") {
        if (this.state.status !== "running") return; // paused/stopped by the user: nothing to assess yet
        const cause = product.model.state.recovery?.cause ?? "The phase's product paused.";
        const tokens = this.state.usedTokens + usedTokensOf(product);
        const overBudget = this.state.budget.maxTotalTokens !== undefined && tokens >= this.state.budget.maxTotalTokens;
        if (overBudget || /budget/iu.test(cause)) {
          await this.commit([{ type: "status", status: "budget_limited", reason: cause }]);
        } else {
          await this.commit([{ type: "status", status: "blocked", reason: cause }]);
        }
        return;
      }
      if (!TERMINAL_GOAL_STATUSES.includes(this.state.status)) await this.assessInside(productId);
    });
  }

  /** Asks the leader which criteria pass after the phase; inside `exclusive`. */
  private async assessInside(productId: string): Promise<void> {
    const product = await this.ctx.products.get(productId);
    const st = product.model.state;
    const s = this.state;
    let passedIds: string[];
    let message: string;
    try {
      const result = await this.leader().assess({
        goalRunId: this.id,
        goal: s.goal,
        phaseIndex: s.phaseIndex,
        criteria: s.criteria.map((c) => ({ ...c })),
        plan: st.plan ?? { productId, version: 0, name: "", summary: "", instances: [], tasks: [] },
        tasks: st.tasks,
        targets: [...s.targets],
        signal: this.controller.signal,
      });
      const known = new Set(s.criteria.map((c) => c.id));
      passedIds = result.passed.filter((id) => known.has(id));
      message = result.message;
    } catch (err) {
      passedIds = s.criteria.filter((c) => c.passed).map((c) => c.id);
      message = `The leader could not assess the phase: ${err instanceof Error ? err.message : String(err)}`;
    }
    const before = new Set(s.criteria.filter((c) => c.passed).map((c) => c.id));
    const after = new Set(passedIds);
    const newlyPassed = [...after].filter((id) => !before.has(id));
    const regressed = [...before].filter((id) => !after.has(id));
    const phaseIndex = s.phaseIndex;
    await this.commit([
      {
        type: "phase_assessed",
        phaseIndex,
        passed: [...after],
        newlyPassed,
        regressed,
        phaseTokens: usedTokensOf(product),
        phaseElapsedMs: st.usage.elapsedMs,
        productPhase: product.phase,
        message,
      },
    ]);
    this.ctx.notifier.notify("x/goal.phaseAssessed", {
      goalRunId: this.id,
      phaseIndex,
      passed: after.size,
      total: s.criteria.length,
      newlyPassed,
      regressed,
    });
  }

  // -------------------------------------------------------------------------------------------------------------
  // Operations

  /** Pauses the goal and its running phase's product. Idempotent on paused. */
  async pause(): Promise<GoalStatus> {
    await this.exclusive(async () => {
      await this.refresh();
      if (this.state.status === "paused") return;
      if (this.state.status !== "running") {
        throw invalidPhase(this.state.status, ["running", "paused"], { subject: `Goal run ${this.id}`, operation: "x/goal.pause" });
      }
      await this.commit([{ type: "status", status: "paused", reason: "Paused by the client." }]);
      this.controller.abort();
    });
    await this.pauseProduct();
    return this.state.status;
  }

  private async pauseProduct(): Promise<void> {
    const productId = this.state.productId;
    if (!productId) return;
    const product = await this.ctx.products.get(productId).catch(() => undefined);
    if (product && product.phase === "executing") await this.ctx.products.pause(productId).catch(() => undefined);
  }

  /**
   * Resumes a paused, blocked or budget-limited goal (adding budget, spent counters kept), or a running one that no
   * process drives (after a restart). A stopped, completed or failed goal is refused.
   */
  async resume(additionalBudget?: GoalBudget): Promise<GoalStatus> {
    await this.exclusive(async () => {
      await this.refresh();
      const status = this.state.status;
      const resumable = status === "paused" || status === "blocked" || status === "budget_limited" || (status === "running" && !this.driving);
      if (!resumable) {
        throw invalidPhase(status, ["paused", "blocked", "budget_limited"], {
          subject: `Goal run ${this.id}`,
          operation: status === "running" ? "x/goal.resume (it is already running)" : "x/goal.resume",
        });
      }
      await this.commit([{ type: "resumed", ...(additionalBudget ? { additionalBudget } : {}) }]);
      this.controller = new AbortController();
    });
    const productId = this.state.productId;
    if (productId) {
      const product = await this.ctx.products.get(productId);
      if (product.phase === "paused" || (product.phase === "executing" && !product.isDriving)) {
        const extra: { maxTotalTokens?: number; maxDurationMs?: number } = {};
        if (additionalBudget?.maxTotalTokens !== undefined) extra.maxTotalTokens = additionalBudget.maxTotalTokens;
        if (additionalBudget?.maxDurationMs !== undefined) extra.maxDurationMs = additionalBudget.maxDurationMs;
        await this.ctx.products.resume(productId, Object.keys(extra).length > 0 ? extra : undefined);
      }
    }
    this.drive();
    return this.state.status;
  }

  /** Stops the goal for good (terminal) and pauses its running phase's product. */
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
      this.controller.abort();
      await this.end("stopped", reason ? `Stopped: ${reason}` : "Stopped by the client.");
    });
    await this.pauseProduct();
    this.wake();
  }

  async edit(goal: string): Promise<void> {
    await this.exclusive(async () => {
      await this.refresh();
      this.requireNotTerminal("x/goal.edit");
      await this.commit([{ type: "goal_edited", goal }]);
    });
  }

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

  /** Stops driving in this process (server shutdown); the persisted status is unchanged. */
  shutdown(): void {
    this.controller.abort();
    this.wake();
  }
}

function usedTokensOf(product: { model: { state: { usage: { inputTokens: number; outputTokens: number } } } }): number {
  const u = product.model.state.usage;
  return u.inputTokens + u.outputTokens;
}

/** A plain-words summary of what the phases so far did. */
export function progressSummaryOf(s: GoalState): string {
  const passed = s.criteria.filter((c) => c.passed).length;
  const lines = s.phases
    .filter((p) => p !== undefined)
    .map((p) => `Phase ${p.phaseIndex + 1}: ${p.assessment ?? (p.productId ? "running" : "planned")}`);
  const head = s.criteria.length === 0 ? "Deriving acceptance criteria." : `${passed} of ${s.criteria.length} criteria pass.`;
  return [head, ...lines].join("\n");
}

/** The facade behind every `x/goal.*` method. */
export class GoalService {
  private readonly runs = new Map<string, GoalRun>();
  private readonly loading = new Map<string, Promise<GoalRun>>();

  constructor(private readonly ctx: GoalContext) {}

  /** Wakes the goal run that follows `productId` (wired to the product layer's phase changes). */
  onProductPhaseChange(productId: string): void {
    for (const run of this.runs.values()) if (run.state.productId === productId) run.wake();
  }

  private async get(goalRunId: string): Promise<GoalRun> {
    const live = this.runs.get(goalRunId);
    if (live) return live;
    let pending = this.loading.get(goalRunId);
    if (!pending) {
      pending = this.load(goalRunId);
      this.loading.set(goalRunId, pending);
      pending.then(
        () => this.loading.delete(goalRunId),
        () => this.loading.delete(goalRunId),
      );
    }
    return pending;
  }

  private async load(goalRunId: string): Promise<GoalRun> {
    const index = await this.ctx.authority.get(INDEX_PROJECT, "goal-index", goalRunId);
    const parsed = index ? GoalIndexRecord.safeParse(index.value) : undefined;
    if (!parsed?.success) throw notFound("goal run", goalRunId);
    const state = emptyGoalState();
    state.projectId = parsed.data.projectId;
    state.goalRunId = goalRunId;
    const run = new GoalRun(state, this.ctx);
    await run.refresh();
    if (state.startedAt === new Date(0).toISOString()) throw notFound("goal run", goalRunId);
    this.runs.set(goalRunId, run);
    return run;
  }

  /** `x/goal.start`: records the goal and answers at once; the loop starts after the answer is sent. */
  async start(params: GoalStartParams): Promise<{ goalRunId: string }> {
    const goalRunId = this.ctx.ids("goal");
    await this.ctx.authority.put(INDEX_PROJECT, "goal-index", goalRunId, { v: 1, projectId: params.projectId }, null);
    const state = emptyGoalState();
    state.projectId = params.projectId;
    state.goalRunId = goalRunId;
    const run = new GoalRun(state, this.ctx);
    await run.commit([
      {
        type: "goal_started",
        goalRunId,
        projectId: params.projectId,
        goal: params.goal,
        cwd: params.cwd,
        ...(params.sessionId !== undefined ? { sessionId: params.sessionId } : {}),
        budget: params.budget ?? {},
        noProgressLimit: params.noProgressLimit ?? 3,
      },
    ]);
    this.runs.set(goalRunId, run);
    this.ctx.defer(() => run.drive());
    return { goalRunId };
  }

  /** `x/goal.status`, rebuilt from the persisted events (reading never writes). */
  async status(goalRunId: string) {
    const run = await this.get(goalRunId);
    await run.refresh();
    const s = run.state;
    let liveTokens = 0;
    if (s.productId) {
      const product = await this.ctx.products.get(s.productId).catch(() => undefined);
      if (product) liveTokens = usedTokensOf(product);
    }
    const passed = s.criteria.filter((c) => c.passed).length;
    return {
      goalRunId: s.goalRunId,
      status: s.status,
      goal: s.goal,
      originalGoal: s.originalGoal,
      phaseIndex: s.phaseIndex,
      ...(s.productId ?? s.lastProductId ? { productId: (s.productId ?? s.lastProductId) as string } : {}),
      startedAt: s.startedAt,
      progressSummary: progressSummaryOf(s),
      acceptance: { passed, total: s.criteria.length, criteria: s.criteria.map((c) => ({ ...c })) },
      queuedMessages: s.queued.length,
      noProgressCount: s.noProgressCount,
      usedTokens: s.usedTokens + liveTokens,
      ...(s.endReason !== undefined ? { endReason: s.endReason } : {}),
      ...(s.failedReason !== undefined
        ? { failedReason: s.failedReason }
        : (s.status === "blocked" || s.status === "budget_limited") && s.statusReason
          ? { failedReason: s.statusReason }
          : {}),
    };
  }

  /** `x/goal.list`: goal runs of one project or of every project; invalid headers are skipped. */
  async list(projectId?: string) {
    const projects = new Set<string>();
    if (projectId !== undefined) projects.add(projectId);
    else {
      for (const info of await this.ctx.authority.list(INDEX_PROJECT, "goal-index")) {
        const rec = await this.ctx.authority.get(INDEX_PROJECT, "goal-index", info.id);
        const parsed = rec ? GoalIndexRecord.safeParse(rec.value) : undefined;
        if (parsed?.success) projects.add(parsed.data.projectId);
      }
    }
    const goals: { goalRunId: string; status: GoalStatus; goal: string; phaseIndex: number }[] = [];
    for (const p of [...projects].sort()) {
      for (const info of await this.ctx.authority.list(p, "goal")) {
        const rec = await this.ctx.authority.get(p, "goal", info.id);
        const parsed = rec ? GoalHeaderRecord.safeParse(rec.value) : undefined;
        if (!parsed?.success) continue;
        const live = this.runs.get(parsed.data.goalRunId)?.state;
        goals.push({
          goalRunId: parsed.data.goalRunId,
          status: live?.status ?? parsed.data.status,
          goal: live?.goal ?? parsed.data.goal,
          phaseIndex: live?.phaseIndex ?? parsed.data.phaseIndex,
        });
      }
    }
    return { goals };
  }

  async pause(goalRunId: string) {
    const status = await (await this.get(goalRunId)).pause();
    return { goalRunId, status };
  }

  async resume(goalRunId: string, additionalBudget?: GoalBudget) {
    const status = await (await this.get(goalRunId)).resume(additionalBudget);
    return { goalRunId, status };
  }

  async stop(goalRunId: string, reason?: string) {
    await (await this.get(goalRunId)).stop(reason);
    return { goalRunId, status: "stopped" as const };
  }

  async edit(goalRunId: string, goal: string) {
    await (await this.get(goalRunId)).edit(goal);
    return { goalRunId, goal };
  }

  async message(goalRunId: string, content: string) {
    const queued = await (await this.get(goalRunId)).message(content);
    return { goalRunId, queued };
  }

  /** Stops every driver in this process; persisted statuses stay as they are (a restart resumes explicitly). */
  shutdown(): void {
    for (const run of this.runs.values()) run.shutdown();
  }
}

export { STATUS_AFTER_END };
