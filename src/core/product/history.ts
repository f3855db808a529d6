/**
 * The product's history: checkpoints, rollback to a checkpoint (the state rebuilt from the journal up to it, the
 * integration branch moved back too, guarantee 11) and replay of a task and its dependents. Owns no state.
 *
 * This file must never import I/O.
 */
import type { Phase } from "../../../protocol/common.js";
import { DomainError, invalidPhase, notFound } from "../errors.js";
import { stripDot } from "./access.js";
import { replayEvents, restoredTasks, taskOf } from "./decide.js";
import type { ProductParts } from "./parts.js";

export class ProductHistory {
  constructor(private readonly p: ProductParts) {}

  private get productId(): string {
    return this.p.model.state.productId;
  }

  /** `product.checkpoint`: records a manual checkpoint of the current state. */
  async checkpoint(): Promise<{ checkpointId: string; at: string }> {
    const p = this.p;
    return p.sections.run(async () => {
      await p.access.syncForWrite();
      p.access.requirePhase(["executing", "paused", "completed", "failed"], "product.checkpoint");
      const tasks = p.model.state.tasks;
      const checkpointId = p.ctx.ids("ckp");
      await p.journal.commit([
        {
          type: "checkpoint",
          checkpointId,
          completed: p.model.counts.completed,
          total: tasks.length,
        },
      ]);
      const ref = p.model.state.checkpoints.find((c) => c.checkpointId === checkpointId);
      const at = ref?.at ?? p.journal.now();
      p.ctx.notifier.notify("product.checkpoint", { productId: this.productId, checkpointId, at });
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
    const p = this.p;
    // Another process may drive it: catch up and refuse before stopping anything here (guarantee 6).
    if (!p.run.driving) await p.sections.run(() => p.access.syncForWrite());
    p.access.requirePhase(["executing", "paused", "completed", "failed"], "product.rollback");
    p.access.requireIntact("product.rollback");
    const refs = p.model.state.checkpoints;
    const ref = checkpointId === undefined ? refs[refs.length - 1] : refs.find((c) => c.checkpointId === checkpointId);
    if (!ref) throw notFound("checkpoint", checkpointId ?? "(latest)");
    const past = await p.ctx.store.stateAtCheckpoint(p.model.state.projectId, this.productId, ref);
    if (past.dropped > 0 || past.invalid !== undefined) {
      p.health.dropped += past.dropped;
      const cause =
        past.dropped > 0
          ? `${past.dropped} stored ${past.dropped === 1 ? "event" : "events"} that checkpoint ${ref.checkpointId} needs ` +
            `failed validation or ${past.dropped === 1 ? "is" : "are"} missing (guarantee 4)`
          : `the state at checkpoint ${ref.checkpointId} is not whole (guarantee 15): ${past.invalid ?? ""}`;
      throw new DomainError(
        "invalid_phase",
        `Product ${this.productId} cannot roll back: ${stripDot(cause)}; restoring it could repeat or skip completed ` +
          "work. Roll back to another checkpoint, or restore the state store from a backup.",
        { phase: p.model.state.phase, allowed: [] },
      );
    }
    await p.lifecycle.stopExecution();
    await p.sections.run(async () => {
      const epoch = await p.access.takeLease();
      try {
        const tasks = restoredTasks(past.model.state.tasks);
        const inputHashes = past.model.state.inputHashes;
        const fingerprint = p.model.state.fingerprint
          ? await p.inputs.fingerprintEvents(past.model.state.plan, await p.inputs.drift())
          : [];
        await p.journal.commit(
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
            ...p.workspaces.branchRollbackEvents(ref),
            { type: "phase", phase: "executing", recovery: null },
          ],
          { header: true },
        );
        const problem = await p.workspaces.verifyBranch();
        if (problem)
          p.ctx.logger.warn({ productId: this.productId, problem }, "integration branch not moved on rollback");
        await p.journal.compact();
      } catch (err) {
        await p.access.releaseLease(epoch);
        throw err;
      }
      p.pool.clearStopReason();
    });
    p.ctx.defer(() => p.run.startDriving());
    return { checkpointId: ref.checkpointId, phase: "executing" };
  }

  /** `product.replayTask`: resets the task and everything downstream of it to pending and runs them again. */
  async replayTask(taskId: string): Promise<string[]> {
    const p = this.p;
    const reset = await p.sections.run(async () => {
      await p.access.syncForWrite();
      p.access.requirePhase(["executing", "paused", "completed", "failed"], "product.replayTask");
      p.access.requireIntact("product.replayTask");
      const task = taskOf(p.model, taskId);
      if (!task) throw notFound("task", taskId);
      if (!["completed", "failed", "skipped"].includes(task.status)) {
        throw invalidPhase(task.status, ["completed", "failed", "skipped"], {
          subject: `Task ${taskId}`,
          operation: "product.replayTask",
        });
      }
      const { ids, events } = replayEvents(p.model, taskId);
      p.pool.stop("reset", new Set(ids));
      const wasTerminal = p.model.state.phase === "completed" || p.model.state.phase === "failed";
      // A terminal product starts executing again here: take the lease first (guarantee 6).
      const epoch = wasTerminal && !p.run.driving ? await p.access.takeLease() : undefined;
      try {
        if (wasTerminal && p.model.state.fingerprint) {
          events.push(...(await p.inputs.fingerprintEvents(p.model.state.plan, await p.inputs.drift())));
        }
        if (wasTerminal) events.push({ type: "phase", phase: "executing", recovery: null });
        await p.journal.commit(events, { header: true });
      } catch (err) {
        if (epoch !== undefined) await p.access.releaseLease(epoch);
        throw err;
      }
      for (const e of events) if (e.type === "task") p.run.notifyTask(e.task);
      if (p.run.driving) {
        p.run.rebuildScheduler();
        p.run.announceTopology();
        p.run.pump();
      } else if (wasTerminal) {
        p.pool.clearStopReason();
        p.ctx.defer(() => p.run.startDriving());
      }
      return ids;
    });
    return reset;
  }
}
