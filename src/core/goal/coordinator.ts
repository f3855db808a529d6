/**
 * GoalRun: one goal run of the `x/goal` loop (PROTOCOL.md section 6, issue 5) in this process, composed the way the
 * product orchestrator is (issue 27): it loops input → decide (decide.ts, pure) → persist (journal.ts, events given
 * their meaning by evolve.ts) → effects (leader turns: leader-turns.ts; the phases' products: phase-product.ts; the
 * driver's lease: the product's `Ownership`) → results back as inputs. `GoalService` (service.ts) is the facade
 * behind every `x/goal.*` method.
 *
 * A goal run repeats: the leader derives acceptance criteria; for each phase the leader plans a product from the goal,
 * the criteria, the progress so far and the user messages handed over at the last boundary; the product runs
 * (confirmed automatically, with what is left of the goal's budget); the leader assesses which criteria now pass. It
 * ends when every criterion passes, `noProgressLimit` phases in a row pass nothing new, a budget or `maxPhases` is
 * spent, or the user stops it.
 *
 * Guarantees kept here:
 * - Write before act: every step is an event appended to the goal's stream before it takes effect; the phase's
 *   product id is recorded (`phase_started`) before the product is created.
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
import type { GoalStatus } from "../../../protocol/goal.js";
import { isDomainError } from "../errors.js";
import type {
  AgentDirectory,
  Clock,
  IdGenerator,
  LeaderResolver,
  Logger,
  Notifier,
  OwnerLiveness,
  RunStateAuthority,
} from "../ports.js";
import type { VerifyPort } from "../workspace/verify-port.js";
import type { LeaseSettings, LeaseStore } from "../product/lease.js";
import { Ownership } from "../product/ownership.js";
import type { ProductState } from "../product/records.js";
import type { ProductService } from "../product/service.js";
import { decideGoal, mayStart, resumeRefusal, type GoalEffect, type GoalInput } from "./decide.js";
import { GoalJournal, type NewGoalEvent } from "./journal.js";
import { GoalLeaderTurns, isLoopInterrupted, loopInterrupted } from "./leader-turns.js";
import { CriterionChecks, phaseHead, retryWait, type PhaseHead } from "./criterion-checks.js";
import { PhaseProducts } from "./phase-product.js";
import { checkErrorAttempts, checkRetryDelayMs, failClosedRecovery, passedCriteria, pendingChecks } from "./policy.js";
import type { GoalBudget, GoalState } from "./records.js";

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
  /**
   * Runs command criteria's checks on a phase's integrated head (docs/VERIFY.md, Goals). Without it a command
   * criterion is never met (its check records why it could not run).
   */
  verifier?: VerifyPort;
}

export interface GoalStartParams {
  goal: string;
  cwd: string;
  projectId: string;
  sessionId?: string;
  budget?: GoalBudget;
  noProgressLimit?: number;
  /** Criteria given by the client (ids set): the leader derives none. */
  criteria?: { id: string; text: string; check?: { run: string; timeoutMs?: number } }[];
}

/** The steps the loop takes (decided inside the lock, done outside it). */
type StepEffect = Extract<GoalEffect, { kind: "derive" | "plan" | "follow" }>;

/** One goal run loaded in this process. */
export class GoalRun {
  private lock: Promise<unknown> = Promise.resolve();
  private driving = false;
  private rerun = false;
  /** The server shuts down: this instance never starts anything again. */
  private closed = false;
  /** Aborted by pause, stop, shutdown and fencing: ends leader turns and waits in flight. Renewed by resume. */
  private controller = new AbortController();
  private readonly journal: GoalJournal;
  private readonly turns: GoalLeaderTurns;
  private readonly phases: PhaseProducts;
  private readonly checks: CriterionChecks;
  /** The driver's ownership (GoalContext.lease), made on first use. */
  private ownership: Ownership | null = null;

  constructor(
    readonly state: GoalState,
    private readonly ctx: GoalContext,
    /** True when the run was loaded from the authority (not started in this process). */
    readonly loadedFromStore: boolean,
  ) {
    this.journal = new GoalJournal(state, ctx, () => this.interrupt());
    this.turns = new GoalLeaderTurns(ctx.leader, ctx.agents);
    this.phases = new PhaseProducts(ctx.products, ctx.logger);
    this.checks = new CriterionChecks(ctx.verifier);
  }

  get id(): string {
    return this.state.goalRunId;
  }

  /** True while this process drives the loop. */
  get isDriving(): boolean {
    return this.driving;
  }

  /** True once a write of this instance was refused (or its lease lost); the service replaces it with a fresh load. */
  get isFenced(): boolean {
    return this.journal.fenced;
  }

  /** False once this instance is fenced or shut down: it starts nothing then. */
  private get live(): boolean {
    return !this.journal.fenced && !this.closed;
  }

  /** Ends leader turns and waits in flight. */
  private interrupt(): void {
    this.controller.abort();
    this.wake();
  }

  /** The driver's ownership, or null when the context has none. */
  private lease(): Ownership | null {
    const settings = this.ctx.lease;
    if (!settings) return null;
    this.ownership ??= new Ownership({
      store: settings.store,
      clock: this.ctx.clock,
      logger: this.ctx.logger,
      ...(settings.liveness ? { liveness: settings.liveness } : {}),
      projectId: this.state.projectId,
      id: this.id,
      settings: settings.settings,
      subject: `Goal run ${this.id}`,
      onLost: (loss) => {
        // Another process took the run over (or the store failed the renewal): this instance never drives again.
        this.ctx.logger.error({ goalRunId: this.id, loss: loss.kind }, "goal run lease lost; it stops driving here");
        this.journal.fence();
        this.interrupt();
      },
    });
    return this.ownership;
  }

  /**
   * Takes the driver's lease (renews it when held). Throws `conflict` (with the owner) while another process's lease
   * is live, `persistence_failed` when the store failed; returns true when this call took it (false: held already, or
   * no lease). Always through acquire (renews a held lease): it queues behind a release still in flight.
   */
  private async takeLease(): Promise<boolean> {
    const own = this.lease();
    if (!own) return false;
    const held = own.held;
    await own.take();
    return !held;
  }

  /** Gives the driver's lease back (deleted when still ours), queued behind any lease operation in flight. Never throws. */
  releaseLease(): Promise<void> {
    return this.ownership?.lease.release() ?? Promise.resolve();
  }

  /** Runs `fn` after every earlier exclusive section of this goal run finished; errors reach the caller only. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.lock.then(fn, fn);
    this.lock = next.catch(() => undefined);
    return next;
  }

  /** Wakes the driver when it waits for its phase's product (called on the product's phase changes). */
  wake(): void {
    this.phases.wake();
  }

  /** Appends events through the journal (see `GoalJournal.commit`). Call inside `exclusive`, after `refresh`. */
  commit(events: NewGoalEvent[]): Promise<void> {
    return this.journal.commit(events);
  }

  /** Applies events written since we last looked (see `GoalJournal.refresh`). */
  refresh(): Promise<void> {
    return this.journal.refresh();
  }

  /**
   * Decides `input` on the current state, records its events, and carries out its notices, interruptions, failures
   * and launches in order; returns the steps left for the loop. Throws a refusal, a failure (a plain Error the loop
   * blocks the goal with), or what the journal throws. Call inside `exclusive`, after `refresh`.
   */
  private async record(input: GoalInput): Promise<StepEffect[]> {
    const decision = decideGoal(this.state, input);
    if (decision.refusal) throw decision.refusal;
    if (decision.events.length > 0) await this.journal.commit(decision.events);
    const steps: StepEffect[] = [];
    for (const effect of decision.effects) {
      if (effect.kind === "notify") this.ctx.notifier.notify(effect.method, effect.params);
      else if (effect.kind === "interrupt") this.controller.abort();
      else if (effect.kind === "fail") throw new Error(effect.reason);
      else if (effect.kind === "launch") await this.phases.launch(this.state, effect);
      else steps.push(effect);
    }
    return steps;
  }

  /** True when the persisted status allows starting something now. Re-reads the stream first; call inside the lock. */
  private async mayStart(): Promise<boolean> {
    await this.refresh();
    return mayStart(this.state, this.live);
  }

  /** The recovery `x/goal.status` reports for a goal run that fails closed (policy.ts), or undefined. */
  failClosedRecovery(): { cause: string; resumable: false; remediation: string } | undefined {
    return failClosedRecovery(this.state);
  }

  // -------------------------------------------------------------------------------------------------------------
  // The loop

  /** Starts the driver unless it runs already (then it looks again when it ends). Never throws. */
  drive(): void {
    if (!this.live) return;
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
        if (this.rerun && this.live) {
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
      await this.record({ kind: "loopFailed", reason, live: !this.journal.fenced });
    }).catch((e: unknown) =>
      this.ctx.logger.error({ err: e, goalRunId: this.id }, "could not record the loop failure"),
    );
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
      const [step] = await this.exclusive(async () => {
        await this.refresh();
        return this.record({ kind: "next", live: this.live });
      });
      if (step === undefined) return;
      if (step.kind === "follow") await this.followPhase(step.productId);
      else if (step.kind === "derive") await this.deriveCriteria();
      else await this.planAndStartPhase();
    }
  }

  /** A leader turn: derives the acceptance criteria for the current goal (again after an edit). */
  private async deriveCriteria(): Promise<void> {
    const signal = this.controller.signal;
    // The leader turn starts only if the persisted status still allows it.
    if (!(await this.exclusive(() => this.mayStart()))) return;
    const goal = this.state.goal;
    const { criteria, message } = await this.turns.derive(this.state, signal);
    await this.exclusive(async () => {
      await this.refresh();
      await this.record({ kind: "criteriaDerived", goal, criteria, message });
    });
  }

  /**
   * A leader turn, then a start: plans the next phase and launches its product. The status is re-read before the
   * turn and again right before the start; a pause during planning wins (the plan is dropped, nothing starts).
   */
  private async planAndStartPhase(): Promise<void> {
    const signal = this.controller.signal;
    if (!(await this.exclusive(() => this.mayStart()))) return;
    const { phaseIndex, goal } = this.state;
    const planned = await this.turns.plan(this.state, signal);
    await this.exclusive(async () => {
      await this.refresh();
      const newProductId = (): string => this.ctx.ids("prd");
      await this.record({ kind: "phasePlanned", live: this.live, phaseIndex, goal, planned, newProductId });
    });
  }

  /**
   * Follows the running phase's product until it ends or pauses, then assesses it (a leader turn) or records why the
   * goal cannot go on (budget spent, product paused). Never resumes a product this instance already launched or
   * resumed; a phase whose product is gone is recorded as one that passed nothing.
   */
  private async followPhase(productId: string): Promise<void> {
    const product = await this.phases.find(productId);
    if (!product) {
      await this.exclusive(async () => {
        await this.refresh();
        await this.record({ kind: "productMissing", productId });
      });
      return;
    }
    if (this.phases.needsContinuing(product, productId)) {
      // Created but never confirmed, or not driven by anyone here: continue it, if the goal may still start things.
      if (!(await this.exclusive(() => this.mayStart()))) return;
      await this.phases.continue(product, productId);
    }
    await this.phases.waitSettled(product, { signal: () => this.controller.signal, closed: () => this.closed });
    const next = await this.exclusive(async () => {
      // A paused or stopped goal assesses nothing now (an assessment is a leader turn); resume does it later.
      if (!(await this.mayStart()) || this.state.productId !== productId) return "none" as const;
      const settled = this.phases.settledAs(product);
      if (settled === "paused") {
        await this.record({ kind: "productPaused", product: this.phases.pausedState(product) });
        return "none" as const;
      }
      return settled === "ended" ? ("assess" as const) : ("none" as const);
    });
    if (next === "assess") await this.assessPhase(productId);
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
    const phaseIndex = this.state.phaseIndex;
    await this.checkCriteria(productId, st, signal);
    const before = passedCriteria(this.state);
    const { passed, message } = await this.turns.assess(this.state, productId, st, before, signal);
    await this.exclusive(async () => {
      await this.refresh();
      await this.record({
        kind: "assessed",
        productId,
        phaseIndex,
        before,
        passed,
        message,
        tasks: st.tasks.map((t) => ({ taskId: t.taskId, status: t.status })),
        phaseTokens: st.usage.inputTokens + st.usage.outputTokens,
        phaseElapsedMs: st.usage.elapsedMs,
        productPhase: product.phase,
      });
    });
  }

  /**
   * Runs the command criteria's checks that have not run to their end on the phase's integrated head yet, one at a
   * time, outside the lock, and records each (`criterion_checked`) as it ends. A pause, stop or shutdown cuts the
   * running check (nothing recorded: it runs again on resume) and ends the loop's step.
   */
  private async checkCriteria(productId: string, st: ProductState, signal: AbortSignal): Promise<void> {
    const head = phaseHead(st);
    const phaseIndex = this.state.phaseIndex;
    const pending = pendingChecks(this.state, phaseIndex, productId, "commit" in head ? head.commit : undefined);
    if (pending.length === 0) return;
    try {
      for (const criterion of pending) await this.checkCriterion(criterion.id, { productId, head, phaseIndex }, signal);
    } finally {
      await this.checks.release(head.cwd, this.id);
    }
  }

  /**
   * Runs one command criterion's check until it runs to its end (`criterion_checked`). A try whose runner failed (no
   * verdict on the criterion) is recorded (`criterion_check_errored`) and tried again after a backoff, counting the
   * tries recorded before on this head (a crash and a resume do not reset them); the last allowed try blocks the goal
   * (decide.ts), which ends the loop's step, as a pause, stop or shutdown does (nothing recorded for a cut try).
   */
  private async checkCriterion(
    criterionId: string,
    at: { productId: string; head: PhaseHead; phaseIndex: number },
    signal: AbortSignal,
  ): Promise<void> {
    const { productId, head, phaseIndex } = at;
    const commit = "commit" in head ? head.commit : undefined;
    for (;;) {
      const criterion = this.state.criteria.find((c) => c.id === criterionId);
      if (criterion?.check === undefined) return;
      const tries = checkErrorAttempts(criterion, phaseIndex, productId, commit);
      if (tries > 0) await retryWait(this.ctx.clock, checkRetryDelayMs(tries), signal);
      const result = await this.checks.run({ goalRunId: this.id, head, phaseIndex, check: criterion.check, signal });
      if (result === null) throw loopInterrupted("criterion check");
      const input: GoalInput =
        "error" in result
          ? {
              kind: "criterionCheckErrored",
              productId,
              criterionId,
              phaseIndex,
              error: result.error,
              ...(commit !== undefined ? { commit } : {}),
            }
          : { kind: "criterionChecked", productId, criterionId, result };
      const running = await this.exclusive(async () => {
        await this.refresh();
        await this.record(input);
        return this.state.status === "running" && this.live;
      });
      if (!("error" in result)) return;
      if (!running) throw loopInterrupted("criterion check could not be run");
    }
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
      await this.record({ kind: "pause" });
    });
    await this.phases.pauseOpen(this.state);
    return this.state.status;
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
      const run = { driving: this.driving, closed: this.closed };
      const refusal = resumeRefusal(this.state, run);
      if (refusal) throw refusal;
      // Before anything is recorded: refuse (conflict, with the owner) while another process drives this goal run
      // or still drives the phase's product, e.g. the lease of a crashed server that has not expired yet.
      tookLease = await this.takeLease();
      const productId = this.state.productId;
      const product = productId === undefined ? undefined : await this.phases.peek(productId);
      if (product && !product.isDriving) await product.assertWritable();
      const spent = product ? this.phases.spentWith(this.state, product) : undefined;
      await this.record({
        kind: "resume",
        ...run,
        ...(additionalBudget ? { additionalBudget } : {}),
        ...(spent ? { spent } : {}),
      });
      this.controller = new AbortController();
      if (product && productId !== undefined && this.phases.needsResume(product)) {
        await this.resumeProduct(productId, additionalBudget);
      }
    }).catch(async (err: unknown) => {
      // Not resumed here after all: the lease taken for it goes back at once.
      if (tookLease && !this.driving) await this.releaseLease();
      throw err;
    });
    this.drive();
    return this.state.status;
  }

  /** Resumes the open phase's product; a failure blocks the goal with the reason and is thrown. Inside the lock. */
  private async resumeProduct(productId: string, additionalBudget: GoalBudget | undefined): Promise<void> {
    try {
      await this.phases.resume(productId, additionalBudget);
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

  /** `x/goal.stop`: ends the goal for good (terminal) and pauses the open phase's product. Idempotent on stopped. */
  async stop(reason?: string): Promise<void> {
    await this.exclusive(async () => {
      await this.refresh();
      await this.record({ kind: "stop", ...(reason !== undefined ? { reason } : {}) });
    });
    await this.phases.pauseOpen(this.state);
    this.wake();
  }

  /** `x/goal.edit`: records the new goal; it takes effect at the next phase boundary. Refused on a terminal goal. */
  async edit(goal: string): Promise<void> {
    await this.exclusive(async () => {
      await this.refresh();
      await this.record({ kind: "edit", goal });
    });
  }

  /** `x/goal.message`: queues a message for the next phase boundary; returns how many are queued. */
  async message(content: string): Promise<number> {
    return this.exclusive(async () => {
      await this.refresh();
      await this.record({ kind: "message", content });
      return this.state.queued.length;
    });
  }

  /**
   * Stops driving in this process for good (server shutdown); the persisted status is unchanged. Resolves once the
   * driver's lease is given back (so a `serve --recover` server can take the run over at once). Never throws.
   */
  shutdown(): Promise<void> {
    this.closed = true;
    this.interrupt();
    return this.releaseLease();
  }
}
