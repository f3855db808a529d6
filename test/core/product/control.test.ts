/**
 * Behaviour of pause, resume and cancel on an executing product (PROTOCOL.md section 5; DESIGN.md guarantee 7 for
 * the interruption note, guarantee 5 for cancelled being terminal).
 */
import { describe, expect, it } from "vitest";
import { isDomainError } from "../../../src/core/errors.js";
import { Gate, createHarness, drain, draftPlan, rejectionOf, taskOf, waitUntil } from "../../support/fakes.js";

/** a → b; attempt 1 of a hangs until aborted, attempt 2 completes. */
async function pausedWhileRunning() {
  const h = createHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]) });
  h.worker.script("a", { kind: "hang" }, { kind: "complete" });
  const productId = await h.started();
  await waitUntil(() => h.worker.hasStarted("a"), "a to start");
  await drain();
  const result = await h.service.pause(productId);
  return { h, productId, result };
}

describe("product.pause", () => {
  it("aborts the running worker and answers paused once the task is written back as pending", async () => {
    const { h, productId, result } = await pausedWhileRunning();
    const run = h.worker.runsOf("a")[0];

    expect(result).toEqual({ productId, phase: "paused" });
    expect(run?.request.signal.aborted).toBe(true);
    expect(run?.result).toEqual({ outcome: "cancelled" });
    const { model } = await h.store.load(productId);
    expect(model.state.phase).toBe("paused");
    expect(model.state.tasks[0]).toMatchObject({ taskId: "a", status: "pending", attempts: 1 });
    expect(model.state.tasks[0]?.interruption).toContain("paused");
  });

  it("is idempotent on a paused product: same answer, nothing written", async () => {
    const { h, productId } = await pausedWhileRunning();
    const writes = h.authority.writeCount;

    expect(await h.service.pause(productId)).toEqual({ productId, phase: "paused" });
    await drain();
    expect(h.authority.writeCount).toBe(writes);
    expect(h.worker.executions).toHaveLength(1);
  });

  it("resume runs the interrupted task again (attempt counted) and completes", async () => {
    const { h, productId } = await pausedWhileRunning();
    expect(await h.service.resume(productId)).toEqual({ productId, phase: "executing" });
    const done = await h.finished(productId);

    expect(done.phase).toBe("completed");
    expect(h.worker.executions.map((e) => `${e.taskId}@${e.attempt}`)).toEqual(["a@1", "a@2", "b@1"]);
    expect(h.notifier.of("product.teamRoster", productId)).toHaveLength(2);
  });

  it("refuses resume while the product is already executing in this process", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a" }]) });
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const productId = await h.started();
    await waitUntil(() => h.worker.hasStarted("a"), "a to start");

    const err = await rejectionOf(h.service.resume(productId));
    expect(isDomainError(err, "invalid_phase") && err.details).toEqual({ phase: "executing", allowed: ["paused"] });
    gate.release();
    await h.finished(productId);
  });
});

describe("product.cancel", () => {
  /** a (hangs) → b; x (hangs) independent on i2. */
  async function cancelled() {
    const h = createHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }, { id: "x", instance: "i2" }]) });
    h.worker.script("a", { kind: "hang" }).script("x", { kind: "hang" });
    const productId = await h.started();
    await waitUntil(() => h.worker.hasStarted("a") && h.worker.hasStarted("x"), "a and x to start");
    await drain();
    const result = await h.service.cancel(productId);
    return { h, productId, result };
  }

  it("ends in cancelled with every unfinished task cancelled and the workers aborted", async () => {
    const { h, productId, result } = await cancelled();

    expect(result).toEqual({ productId, phase: "cancelled" });
    expect(h.worker.executions.every((e) => e.request.signal.aborted)).toBe(true);
    const { model } = await h.store.load(productId);
    expect(model.state.phase).toBe("cancelled");
    expect(model.state.tasks.map((t) => [t.taskId, t.status])).toEqual([
      ["a", "cancelled"],
      ["b", "cancelled"],
      ["x", "cancelled"],
    ]);
    expect(h.worker.hasStarted("b")).toBe(false);
  });

  it("refuses every further lifecycle operation with invalid_phase", async () => {
    const { h, productId } = await cancelled();
    const calls: [string, Promise<unknown>][] = [
      ["pause", h.service.pause(productId)],
      ["resume", h.service.resume(productId)],
      ["cancel", h.service.cancel(productId)],
      ["confirm", h.service.confirm(productId, {})],
      ["message", h.service.message(productId, "hello")],
      ["mutate", h.service.mutate(productId, [{ op: "addTask", task: taskOf({ id: "y" }) }])],
      ["checkpoint", h.service.checkpoint(productId)],
    ];
    for (const [name, call] of calls) {
      const err = await rejectionOf(call);
      expect(isDomainError(err, "invalid_phase") ? err.details.phase : err, name).toBe("cancelled");
    }
    await drain();
    expect((await h.service.status(productId)).phase).toBe("cancelled");
  });
});

describe("interrupted attempts do not use up retries (regression: a pause made the next failure final)", () => {
  it("after a pause and resume during attempt 1, one failure still leaves a retry", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a", maxAttempts: 2 }]) });
    h.worker.script("a", { kind: "hang" }, { kind: "fail", error: "transient" }, { kind: "complete" });
    const productId = await h.started();
    await waitUntil(() => h.worker.runsOf("a").length === 1, "a to start");
    await h.service.pause(productId);
    await h.service.resume(productId);
    const done = await h.finished(productId);

    expect(done.phase).toBe("completed");
    expect(h.worker.runsOf("a").map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect(h.leader.consultCalls).toEqual([]);
  });
});
