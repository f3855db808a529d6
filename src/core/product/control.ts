/**
 * Lifecycle operations: pause, resume (guarantee 7: interrupted work runs again, changed inputs are not trusted),
 * cancel, shutdown, and mutations of the plan by the user or the leader.
 *
 * This file must never import I/O.
 */
import type { Budget, Mutation, Plan, TaskState } from "../../../protocol/common.js";
import { applyMutations } from "../dag/mutations.js";
import { DomainError, invalidMutation, invalidPhase } from "../errors.js";
import { planHash, type Drift } from "./fingerprint.js";
import { OrchestratorExecution } from "./execution.js";
import type { NewEvent } from "./base.js";
import { INTERRUPTION } from "./base.js";

/** Lifecycle operations: a layer of `ProductOrchestrator` (orchestrator.ts), on top of execution.ts. */
export abstract class OrchestratorControl extends OrchestratorExecution {
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
        {
          cause: "The product was paused by the client.",
          resumable: true,
          remediation: "Call product.resume to continue.",
        },
        "pause",
      );
      epoch = this.leaseEpoch;
    });
    await this.whenIdle();
    await this.removeParkedWhenStopped();
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
      if (!this.model.state.plan) {
        throw new DomainError(
          "invalid_phase",
          `Product ${this.productId} was paused before it had a plan (its leader could not start); once the leader ` +
            `agent is fixed, send product.message to plan again.`,
          { phase: this.phase, allowed: [] },
        );
      }
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
        // Guarantee 11: a merge recorded but not confirmed before a crash is settled first (completed or kept).
        const recovered = await this.recoverPending();
        if (recovered.length > 0) await this.commit(recovered);
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
        if (
          t.status === "pending" ||
          t.status === "waiting" ||
          (t.status === "running" && !this.running.has(t.taskId))
        ) {
          events.push({ type: "task", task: { ...t, status: "cancelled" } });
        }
      }
      events.push({ type: "phase", phase: "cancelled", recovery: null });
      await this.commit(events, { header: true });
    });
    const epoch = this.leaseEpoch;
    await this.whenIdle();
    await this.removeParkedWhenStopped();
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
  protected async stopExecution(): Promise<void> {
    if (this.driving || this.running.size > 0) {
      this.stopDriving();
      this.stopWorkers("shutdown");
      await this.whenIdle();
    }
    await this.removeParkedWhenStopped();
  }

  /** Removes parked worktrees unless the product runs again in this process (a resume came in meanwhile). */
  protected async removeParkedWhenStopped(): Promise<void> {
    await this.exclusive(async () => {
      if (!(this.driving && this.phase === "executing")) await this.removeParkedWorkspaces();
    });
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
  protected async applyMutationOutcome(mutations: Mutation[], plan: Plan, by: "leader" | "user"): Promise<void> {
    if (this.phase === "awaiting_confirmation") {
      await this.commit([{ type: "planProposed", plan }], { header: true });
    } else {
      // The plan fingerprint follows recorded mutations, so only an unrecorded change reads as drift.
      const fp = this.model.state.fingerprint;
      const refreshed: NewEvent[] = fp
        ? [{ type: "fingerprint", fingerprint: { ...fp, planHash: planHash(plan, fp.promptVersion, this.ctx.digest) } }]
        : [];
      await this.commit([{ type: "mutated", mutations, by, plan }, ...refreshed], { header: true });
      this.scheduler?.rebuild(this.model.state.tasks);
    }
    for (const mutation of mutations)
      this.ctx.notifier.notify("product.dagMutated", { productId: this.productId, mutation, by });
    if (this.phase === "awaiting_confirmation") {
      this.ctx.notifier.notify("product.planReady", { productId: this.productId, plan });
    } else {
      this.announceTopology();
    }
  }
}
