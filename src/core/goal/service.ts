/**
 * GoalService: the facade behind every `x/goal.*` method (PROTOCOL.md section 6). It keeps the goal runs of this
 * process (one `GoalRun` each, coordinator.ts, loaded once from the persisted events), answers status and list from
 * the persisted state (reading never writes, guarantee 3), and with `serve --recover` takes over goal runs whose
 * driver is gone.
 *
 * It never drives a loop itself (coordinator.ts does), never performs I/O except through ports, and never imports a
 * `node:` module.
 */
import type { GoalStatus } from "../../../protocol/goal.js";
import { isDomainError, notFound } from "../errors.js";
import { listIndexedRecords } from "../indexed-records.js";
import { INDEX_PROJECT } from "../product/records.js";
import { GoalRun, type GoalContext, type GoalStartParams } from "./coordinator.js";
import { currentPhaseIndex } from "./journal.js";
import { DEFAULT_NO_PROGRESS_LIMIT, progressSummaryOf } from "./policy.js";
import {
  GoalHeaderRecord,
  GoalIndexRecord,
  TERMINAL_GOAL_STATUSES,
  emptyGoalState,
  type GoalBudget,
} from "./records.js";

/** The facade behind every `x/goal.*` method (PROTOCOL.md section 6). Errors are DomainErrors. */
export class GoalService {
  private readonly runs = new Map<string, GoalRun>();
  private readonly loading = new Map<string, Promise<GoalRun>>();

  constructor(private readonly ctx: GoalContext) {}

  /**
   * True while a goal run in memory that has not ended has `productId` as its phase's product: it follows that
   * product's instance, which must then stay in memory (ProductService retainer, guarantee 14). Never throws.
   */
  follows(productId: string): boolean {
    for (const run of this.runs.values()) {
      if (run.state.productId === productId && !TERMINAL_GOAL_STATUSES.includes(run.state.status)) return true;
    }
    return false;
  }

  /** Wakes the goal run that follows `productId` (wired to the product layer's phase changes). Never throws. */
  onProductPhaseChange(productId: string): void {
    for (const run of this.runs.values()) if (run.state.productId === productId) run.wake();
  }

  /** The goal run, loaded once (a fenced instance is replaced by a fresh load). Throws not_found (kind `goal run`). */
  private async get(goalRunId: string): Promise<GoalRun> {
    const live = this.runs.get(goalRunId);
    if (live && !live.isFenced) return live;
    if (live) this.runs.delete(goalRunId);
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

  /** Rebuilds a goal run from its events. Reading never writes; it does NOT start driving (see the file header). */
  private async load(goalRunId: string): Promise<GoalRun> {
    const index = await this.ctx.authority.get(INDEX_PROJECT, "goal-index", goalRunId);
    const parsed = index ? GoalIndexRecord.safeParse(index.value) : undefined;
    if (!parsed?.success) throw notFound("goal run", goalRunId);
    const state = emptyGoalState();
    state.projectId = parsed.data.projectId;
    state.goalRunId = goalRunId;
    const run = new GoalRun(state, this.ctx, true);
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
    const run = new GoalRun(state, this.ctx, false);
    await run.commit([
      {
        type: "goal_started",
        goalRunId,
        projectId: params.projectId,
        goal: params.goal,
        cwd: params.cwd,
        ...(params.sessionId !== undefined ? { sessionId: params.sessionId } : {}),
        budget: params.budget ?? {},
        noProgressLimit: params.noProgressLimit ?? DEFAULT_NO_PROGRESS_LIMIT,
        ...(params.criteria !== undefined ? { criteria: params.criteria } : {}),
      },
    ]);
    this.runs.set(goalRunId, run);
    const given = params.criteria;
    this.ctx.defer(() => {
      // Given criteria need no leader turn: the goal run starts with them (PROTOCOL.md section 6).
      if (given !== undefined) this.ctx.notifier.notify("x/goal.started", { goalRunId, criteria: given });
      run.drive();
    });
    return { goalRunId };
  }

  /** `x/goal.status`, rebuilt from the persisted events (reading never writes). */
  async status(goalRunId: string) {
    const run = await this.get(goalRunId);
    await run.refresh();
    const s = run.state;
    let liveTokens = 0;
    if (s.productId !== undefined) {
      const product = await this.ctx.products.get(s.productId).catch(() => undefined);
      if (product) liveTokens = product.model.state.usage.inputTokens + product.model.state.usage.outputTokens;
    }
    const passed = s.criteria.filter((c) => c.passed).length;
    const productId = s.productId ?? s.lastProductId;
    let progressSummary = progressSummaryOf(s);
    if (s.status === "running" && run.loadedFromStore && !run.isDriving) {
      progressSummary += "\nNot driven by this server (it restarted since): call x/goal.resume to continue.";
    }
    const failedReason =
      s.failedReason ??
      ((s.status === "blocked" || s.status === "budget_limited") && s.statusReason ? s.statusReason : undefined);
    const recovery = run.failClosedRecovery();
    return {
      goalRunId: s.goalRunId,
      status: s.status,
      goal: s.goal,
      originalGoal: s.originalGoal,
      phaseIndex: currentPhaseIndex(s),
      ...(productId !== undefined ? { productId } : {}),
      startedAt: s.startedAt,
      progressSummary,
      acceptance: { passed, total: s.criteria.length, criteria: s.criteria.map((c) => ({ ...c })) },
      queuedMessages: s.queued.length,
      noProgressCount: s.noProgressCount,
      usedTokens: s.usedTokens + liveTokens,
      ...(s.endReason !== undefined ? { endReason: s.endReason } : {}),
      ...(failedReason !== undefined ? { failedReason } : {}),
      dropped: s.dropped,
      ...(recovery ? { recovery } : {}),
    };
  }

  /** `x/goal.list`: goal runs of one project or of every project (persisted ones too); invalid headers are skipped. */
  async list(projectId?: string) {
    const { records } = await listIndexedRecords(this.ctx.authority, {
      ...(projectId !== undefined ? { projectId } : {}),
      indexKind: "goal-index",
      kind: "goal",
      schema: GoalHeaderRecord,
    });
    const goals: { goalRunId: string; status: GoalStatus; goal: string; phaseIndex: number }[] = records.map((h) => {
      const live = this.runs.get(h.goalRunId)?.state;
      return {
        goalRunId: h.goalRunId,
        status: live?.status ?? h.status,
        goal: live?.goal ?? h.goal,
        phaseIndex: live ? currentPhaseIndex(live) : h.phaseIndex,
      };
    });
    return { goals };
  }

  /** `x/goal.pause` (see `GoalRun.pause`). */
  async pause(goalRunId: string) {
    const status = await (await this.get(goalRunId)).pause();
    return { goalRunId, status };
  }

  /** `x/goal.resume` (see `GoalRun.resume`). */
  async resume(goalRunId: string, additionalBudget?: GoalBudget) {
    const status = await (await this.get(goalRunId)).resume(additionalBudget);
    return { goalRunId, status };
  }

  /** `x/goal.stop` (see `GoalRun.stop`). */
  async stop(goalRunId: string, reason?: string) {
    await (await this.get(goalRunId)).stop(reason);
    return { goalRunId, status: "stopped" as const };
  }

  /** `x/goal.edit` (see `GoalRun.edit`). */
  async edit(goalRunId: string, goal: string) {
    await (await this.get(goalRunId)).edit(goal);
    return { goalRunId, goal };
  }

  /** `x/goal.message` (see `GoalRun.message`). */
  async message(goalRunId: string, content: string) {
    const queued = await (await this.get(goalRunId)).message(content);
    return { goalRunId, queued };
  }

  /**
   * Stops every driver in this process; persisted statuses stay as they are (a restart resumes explicitly, or a
   * `serve --recover` server takes them over). Resolves once their leases are given back. Never throws.
   */
  async shutdown(): Promise<void> {
    await Promise.all([...this.runs.values()].map((run) => run.shutdown()));
  }

  /**
   * `serve --recover` (issue 14, many servers on one store): resumes here every goal run whose persisted status is
   * `running`, that this process does not drive, and whose driver is gone — no lease, an expired one, or one whose
   * owner the liveness port proves dead (same host, process gone). The resume is the one `x/goal.resume` performs
   * (it re-attaches to the open phase's product; completed tasks are not run again, the phase is not started again);
   * the lease's compare-and-swap lets exactly one server win, a lost race is not an error. Needs `GoalContext.lease`
   * (returns [] without it). Returns the ids of the goal runs taken over. Throws only when listing fails.
   */
  async recoverOrphans(): Promise<string[]> {
    const lease = this.ctx.lease;
    if (!lease) return [];
    const taken: string[] = [];
    const { records } = await listIndexedRecords(this.ctx.authority, {
      indexKind: "goal-index",
      kind: "goal",
      schema: GoalHeaderRecord,
    });
    for (const header of records) {
      if (header.status !== "running" || this.runs.get(header.goalRunId)?.isDriving) continue;
      const current = await lease.store.readLease(header.projectId, header.goalRunId);
      const holder = current.lease;
      const dead = holder !== null && lease.liveness?.check(holder.owner) === "dead";
      const mine = holder?.owner === lease.settings.owner;
      if (holder && !mine && Date.parse(holder.expiresAt) > this.ctx.clock.now() && !dead) continue;
      try {
        await this.resume(header.goalRunId);
        taken.push(header.goalRunId);
        this.ctx.logger.info(
          { goalRunId: header.goalRunId, previousOwner: holder?.owner },
          "recovered a goal run whose driver is gone",
        );
      } catch (err) {
        const expected = isDomainError(err, "conflict") || isDomainError(err, "invalid_phase");
        if (!expected) this.ctx.logger.warn({ goalRunId: header.goalRunId, err }, "could not recover a goal run");
      }
    }
    return taken;
  }
}
