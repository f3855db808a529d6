/**
 * Lifecycle operations of one product: confirmation (the plan persisted before the first task starts, guarantee 1),
 * pause, resume (guarantee 7: interrupted work runs again, changed inputs are not trusted), cancel, shutdown, and
 * mutations of the plan by the user. Owns no state: every step is a collaborator's (parts.ts), and what the events
 * are is decided by decide.ts.
 *
 * This file must never import I/O.
 */
import type { Budget, Instance, Mutation, Plan, Task } from "../../../protocol/common.js";
import { validatePlanLists } from "../dag/graph.js";
import { applyMutations } from "../dag/mutations.js";
import { DomainError, invalidMutation, invalidPhase, invalidPlan } from "../errors.js";
import { cancelEvents, interruptedTasks, type NewEvent } from "./decide.js";
import { planHash, type Drift } from "./fingerprint.js";
import type { ProductParts } from "./parts.js";

export class Lifecycle {
  constructor(private readonly p: ProductParts) {}

  private get productId(): string {
    return this.p.model.state.productId;
  }

  /**
   * `product.confirm`: persists the (possibly edited) plan and starts execution after the answer is sent.
   * Throws invalid_phase outside awaiting_confirmation and invalid_plan for an edited plan that is not a valid DAG.
   */
  async confirm(edit: { instances?: Instance[]; tasks?: Task[]; budget?: Budget }): Promise<void> {
    const p = this.p;
    await p.sections.run(async () => {
      await p.access.catchUpNow();
      p.access.requirePhase(["awaiting_confirmation"], "product.confirm");
      p.access.requireIntact("product.confirm");
      const current = p.model.state.plan;
      if (!current) throw invalidPhase(p.model.state.phase, ["awaiting_confirmation"]);
      const edited = edit.instances !== undefined || edit.tasks !== undefined;
      const plan: Plan = {
        ...current,
        instances: edit.instances ?? current.instances,
        tasks: edit.tasks ?? current.tasks,
        version: edited ? current.version + 1 : current.version,
      };
      if (edit.budget) plan.budget = { ...(current.budget ?? {}), ...edit.budget };
      const check = validatePlanLists(plan);
      if (!check.ok) {
        const error = invalidPlan(check.reason, check.index);
        // The list `index` points into, for the -32602 issue path (error-mapping.ts reads it; `tasks` when absent).
        if (check.list === "instances") (error.details as { list?: "tasks" | "instances" }).list = "instances";
        throw error;
      }
      if (plan.tasks.length === 0) throw invalidPlan("The plan has no tasks to run.");
      // Drift detection: what the run depends on outside its stream, as of confirmation.
      const fingerprint = await p.inputs.currentFingerprint(plan);
      // Guarantee 6: the lease is taken before the first task can start.
      const epoch = await p.access.takeLease();
      try {
        // Isolation is decided now, from the workspace as it is at confirmation (guarantee 11).
        const chosen = await p.workspaces.chooseWorkspace();
        await p.journal.commit([{ type: "confirmed", plan, fingerprint }, chosen], { header: true });
      } catch (err) {
        await p.access.releaseLease(epoch);
        throw err;
      }
      // The integration branch is created after `workspaceChosen` recorded it (a later start verifies it again).
      const problem = await p.workspaces.verifyBranch().catch((err: unknown) => String(err));
      if (problem)
        p.ctx.logger.warn({ productId: this.productId, problem }, "integration branch not created at confirm");
    });
    p.ctx.defer(() => p.run.startDriving());
  }

  /** `product.pause`: idempotent on paused; waits until running workers have stopped and their state is written. */
  async pause(): Promise<void> {
    const p = this.p;
    let epoch: number | undefined;
    await p.sections.run(async () => {
      await p.access.syncForWrite();
      p.access.requirePhase(["executing", "paused"], "product.pause");
      if (p.model.state.phase === "paused") return;
      await p.run.pauseInside(
        {
          cause: "The product was paused by the client.",
          resumable: true,
          remediation: "Call product.resume to continue.",
        },
        "pause",
      );
      epoch = p.ownership.epoch;
    });
    await p.run.whenIdle();
    await this.removeParkedWhenStopped();
    // The lease is given back before the answer (unless a resume took it again meanwhile).
    if (epoch !== undefined) await p.access.releaseLease(epoch);
  }

  /**
   * `product.resume`: from paused, or from executing when no process drives it (after a restart). Tasks persisted
   * as running go back to pending with an interruption note, their attempt counted (guarantee 7).
   */
  async resume(additionalBudget?: Budget, opts: { automatic?: boolean } = {}): Promise<void> {
    const p = this.p;
    await p.sections.run(async () => {
      const alreadyRunning = () =>
        invalidPhase(p.model.state.phase, ["paused"], {
          subject: `Product ${this.productId}`,
          operation: "product.resume (it is already running)",
        });
      if (p.model.state.phase === "executing" && p.run.driving) throw alreadyRunning();
      await p.access.catchUpNow();
      p.access.requirePhase(["paused", "executing"], "product.resume");
      p.access.requireIntact("product.resume");
      if (!p.model.state.plan) {
        throw new DomainError(
          "invalid_phase",
          `Product ${this.productId} was paused before it had a plan (its leader could not start); once the leader ` +
            `agent is fixed, send product.message to plan again.`,
          { phase: p.model.state.phase, allowed: [] },
        );
      }
      const refuseDrift = (drift: Drift[]): void => {
        if (!opts.automatic || drift.length === 0) return;
        throw new DomainError(
          "invalid_phase",
          `Product ${this.productId} needs an explicit product.resume: since its last checkpoint ${drift.map((d) => d.text).join("; ")}.`,
          { phase: p.model.state.phase, allowed: [] },
        );
      };
      // An automatic resume never continues past drift; refused before anything is written.
      refuseDrift(await p.inputs.drift());
      // Guarantee 6: a live lease of another process refuses (conflict with its owner); the lease is ours from here.
      const epoch = await p.access.takeLease();
      try {
        await p.access.catchUpNow();
        p.access.requirePhase(["paused", "executing"], "product.resume");
        const drift = await p.inputs.drift();
        refuseDrift(drift);
        // Guarantee 11: a merge recorded but not confirmed before a crash is settled first (completed or kept).
        const recovered = await p.workspaces.recoverPending();
        if (recovered.length > 0) await p.journal.commit(recovered);
        const events: NewEvent[] = [...unrecordedTime(p)];
        if (additionalBudget && Object.keys(additionalBudget).length > 0) {
          events.push({ type: "budgetAdded", budget: additionalBudget });
        }
        // Guarantee 7: work that was running is interrupted (attempt counted); completed work whose input changed
        // since it completed is not trusted.
        const changed = interruptedTasks(p.model.state, (taskId) => p.pool.runs(taskId));
        for (const task of p.inputs.rebind(changed).values()) events.push({ type: "task", task });
        // Drift is acknowledged by this explicit resume: the current fingerprint becomes the recorded one.
        if (p.model.state.fingerprint) events.push(...(await p.inputs.fingerprintEvents(p.model.state.plan, drift)));
        events.push({ type: "phase", phase: "executing", recovery: null });
        await p.journal.commit(events, { header: true });
      } catch (err) {
        await p.access.releaseLease(epoch);
        throw err;
      }
      p.pool.clearStopReason();
    });
    p.ctx.defer(() => p.run.startDriving());
  }

  /** `product.cancel`: terminal; running workers are stopped and every unfinished task is marked cancelled. */
  async cancel(): Promise<void> {
    const p = this.p;
    await p.sections.run(async () => {
      await p.access.syncForWrite();
      p.access.requirePhase(["planning", "awaiting_confirmation", "executing", "paused"], "product.cancel");
      p.leader.abortLeaderTurn();
      const elapsedMs = p.timers.elapsedMs();
      p.run.stopDriving();
      p.pool.stop("cancel");
      const events = cancelEvents(p.model.state, elapsedMs, (taskId) => p.pool.runs(taskId));
      await p.journal.commit(events, { header: true });
    });
    const epoch = p.ownership.epoch;
    await p.run.whenIdle();
    await this.removeParkedWhenStopped();
    await p.access.releaseLease(epoch);
  }

  /**
   * Stops execution in this process without changing the persisted phase (server shutdown, delete): running tasks
   * are written back as interrupted, then the lease is released so another process may resume at once.
   */
  async shutdown(): Promise<void> {
    const p = this.p;
    p.leader.abortLeaderTurn();
    await this.stopExecution();
    // A header change held back by its pacing is written while the lease is still held (header-pacing.ts).
    await p.sections.run(() => p.journal.flushHeader());
    await p.access.releaseLease();
  }

  /** Stops scheduling and running workers and waits until their results are written. Keeps the lease. */
  async stopExecution(): Promise<void> {
    const p = this.p;
    if (p.run.driving || p.pool.size > 0) {
      p.run.stopDriving();
      p.pool.stop("shutdown");
      await p.run.whenIdle();
    }
    await this.removeParkedWhenStopped();
  }

  /** Removes parked worktrees unless the product runs again in this process (a resume came in meanwhile). */
  async removeParkedWhenStopped(): Promise<void> {
    const p = this.p;
    await p.sections.run(async () => {
      if (!(p.run.driving && p.model.state.phase === "executing")) await p.workspaces.removeParkedWorkspaces();
    });
  }

  /** `product.mutate` (by the user): validated as a batch, applied atomically, persisted, then announced. */
  async mutate(mutations: Mutation[]): Promise<{ applied: number; version: number }> {
    const p = this.p;
    return p.sections.run(async () => {
      await p.access.syncForWrite();
      p.access.requirePhase(["awaiting_confirmation", "executing", "paused"], "product.mutate");
      p.access.requireIntact("product.mutate");
      const plan = p.model.state.plan;
      if (!plan) throw invalidPhase(p.model.state.phase, ["awaiting_confirmation", "executing", "paused"]);
      const states = p.model.state.phase === "awaiting_confirmation" ? [] : p.model.state.tasks;
      const outcome = applyMutations(plan, states, mutations);
      if (!outcome.ok) throw invalidMutation(outcome.index, outcome.reason);
      await this.applyMutationOutcome(mutations, outcome.plan, "user");
      p.run.pump();
      return { applied: mutations.length, version: outcome.plan.version };
    });
  }

  /** Persists an already validated mutation batch and announces it. Inside `exclusive`. */
  async applyMutationOutcome(mutations: Mutation[], plan: Plan, by: "leader" | "user"): Promise<void> {
    const p = this.p;
    const awaiting = p.model.state.phase === "awaiting_confirmation";
    if (awaiting) {
      await p.journal.commit([{ type: "planProposed", plan }], { header: true });
    } else {
      // The plan fingerprint follows recorded mutations, so only an unrecorded change reads as drift.
      const fp = p.model.state.fingerprint;
      const refreshed: NewEvent[] = fp
        ? [{ type: "fingerprint", fingerprint: { ...fp, planHash: planHash(plan, fp.promptVersion, p.ctx.digest) } }]
        : [];
      await p.journal.commit([{ type: "mutated", mutations, by, plan }, ...refreshed], { header: true });
      p.run.rebuildScheduler();
    }
    for (const mutation of mutations)
      p.ctx.notifier.notify("product.dagMutated", { productId: this.productId, mutation, by });
    if (p.model.state.phase === "awaiting_confirmation") {
      p.ctx.notifier.notify("product.planReady", { productId: this.productId, plan });
    } else {
      p.run.announceTopology();
    }
  }
}

/**
 * The `elapsed` event counting the time an owner proven dead, whose lease this resume took over, ran the product after
 * its last event, or none. A time budget must not lose that time (a new user saw a task's 6 s counted as 0 after a
 * kill -9 and a takeover). The owner drove the product from its last event (`updatedAt`) until it stopped, which was
 * before the renewal it would have made next, and before now: counted up to the sooner of the two (through PostgreSQL's
 * liveness lock a death is seen within about a second; found later, at most one renewal period more than it ran).
 * Nothing when the product was not executing (a paused product's time is not running) or no such lease was taken.
 */
function unrecordedTime(p: ProductParts): NewEvent[] {
  const taken = p.ownership.takenOver;
  const s = p.model.state;
  if (taken === null || s.phase !== "executing") return [];
  const stoppedBy = Math.min(p.ctx.clock.now(), taken.renewedAtMs + taken.renewMs);
  const extra = Math.round(stoppedBy - Date.parse(s.updatedAt));
  return Number.isFinite(extra) && extra > 0 ? [{ type: "elapsed", elapsedMs: s.usage.elapsedMs + extra }] : [];
}
