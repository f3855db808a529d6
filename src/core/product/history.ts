/**
 * The product's history: checkpoints, rollback to a checkpoint and replay of a task and its dependents.
 *
 * This file must never import I/O.
 */
import type { Phase, TaskState } from "../../../protocol/common.js";
import { downstreamOf } from "../dag/graph.js";
import { DomainError, invalidPhase, notFound } from "../errors.js";
import { OrchestratorControl } from "./control.js";
import type { NewEvent } from "./base.js";
import { INTERRUPTION } from "./base.js";

/** The product's history: a layer of `ProductOrchestrator` (orchestrator.ts), on top of control.ts. */
export abstract class OrchestratorHistory extends OrchestratorControl {
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
   *
   * The checkpoint's state is rebuilt from the latest snapshot at or before it plus the events up
   * to it (store.ts `stateAtCheckpoint`: it costs what the checkpoint holds, not the whole history), and checked like
   * a loaded product (guarantees 4 and 15): when an event it needs did not parse or is missing (counted in
   * `dropped`), or the rebuilt state breaks the DAG rules, the rollback is refused (`invalid_phase` with the cause)
   * before anything is stopped or written, so no completed task can run again because its completion was skipped.
   * The rollback is a compaction point: a snapshot of the restored state is written and the events it covers pruned.
   */
  async rollback(checkpointId?: string): Promise<{ checkpointId: string; phase: Phase }> {
    // Another process may drive it: catch up and refuse before stopping anything here (guarantee 6).
    if (!this.driving) await this.assertWritable();
    this.requirePhase(["executing", "paused", "completed", "failed"], "product.rollback");
    this.requireIntact("product.rollback");
    const refs = this.model.state.checkpoints;
    const ref = checkpointId === undefined ? refs[refs.length - 1] : refs.find((c) => c.checkpointId === checkpointId);
    if (!ref) throw notFound("checkpoint", checkpointId ?? "(latest)");
    const past = await this.ctx.store.stateAtCheckpoint(this.model.state.projectId, this.productId, ref);
    if (past.dropped > 0 || past.invalid !== undefined) {
      this.dropped += past.dropped;
      const cause =
        past.dropped > 0
          ? `${past.dropped} stored ${past.dropped === 1 ? "event" : "events"} that checkpoint ${ref.checkpointId} needs ` +
            `failed validation or ${past.dropped === 1 ? "is" : "are"} missing (guarantee 4)`
          : `the state at checkpoint ${ref.checkpointId} is not whole (guarantee 15): ${past.invalid ?? ""}`;
      throw new DomainError(
        "invalid_phase",
        `Product ${this.productId} cannot roll back: ${stripDot(cause)}; restoring it could repeat or skip completed ` +
          "work. Roll back to another checkpoint, or restore the state store from a backup.",
        { phase: this.phase, allowed: [] },
      );
    }
    await this.stopExecution();
    await this.exclusive(async () => {
      const epoch = await this.takeLease();
      try {
        const tasks = past.model.state.tasks.map((t) =>
          t.status === "running" ? { ...t, status: "pending" as const, interruption: INTERRUPTION.reset } : t,
        );
        const inputHashes = past.model.state.inputHashes;
        const fingerprint = this.model.state.fingerprint
          ? await this.fingerprintEvents(past.model.state.plan, await this.drift())
          : [];
        await this.commit(
          [
            {
              type: "restored",
              checkpointId: ref.checkpointId,
              ...(past.model.state.plan ? { plan: past.model.state.plan } : {}),
              tasks,
              ...(inputHashes ? { inputHashes } : {}),
            },
            ...fingerprint,
            // Guarantee 11: the code goes back too; the head it leaves is kept under the product's refs.
            ...this.branchRollbackEvents(ref),
            { type: "phase", phase: "executing", recovery: null },
          ],
          { header: true },
        );
        const problem = await this.verifyBranch();
        if (problem) this.ctx.logger.warn({ productId: this.productId, problem }, "integration branch not moved on rollback");
        await this.compactNow();
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
        for (const k of ["output", "error", "startedAt", "endedAt", "question", "interruption", "workspace"] as const) delete fresh[k];
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
}

function stripDot(text: string): string {
  return text.endsWith(".") ? text.slice(0, -1) : text;
}
