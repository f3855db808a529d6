/**
 * Behaviour of rollback to a checkpoint and replay of a task (DESIGN.md, Execution model: rollback restores a
 * checkpoint and resumes through the normal resume path; replay resets a task and everything downstream of it).
 */
import { describe, expect, it } from "vitest";
import { Gate, createHarness, drain, draftPlan, waitUntil, type TaskSpec } from "../../support/fakes.js";

describe("product.rollback", () => {
  const CHAIN: TaskSpec[] = [{ id: "a" }, { id: "b", deps: ["a"] }, { id: "c", deps: ["b"] }, { id: "d", deps: ["c"] }];

  it("re-runs exactly the tasks completed after the chosen checkpoint and completes again", async () => {
    const h = createHarness({ plan: draftPlan(CHAIN) });
    const productId = await h.started();
    await h.finished(productId);
    const { checkpoints } = await h.service.checkpoints(productId);
    const second = checkpoints.find((c) => c.completed === 2);
    expect(second).toBeDefined();
    const runsBefore = h.worker.executions.length;

    const result = await h.service.rollback(productId, second?.checkpointId);
    const done = await h.finished(productId, 2);

    expect(result).toEqual({ productId, checkpointId: second?.checkpointId, phase: "executing" });
    expect(done.phase).toBe("completed");
    expect(h.worker.executions.slice(runsBefore).map((e) => e.taskId)).toEqual(["c", "d"]);
    expect((await h.tasks(productId)).every((t) => t.status === "completed")).toBe(true);
  });

  it("announces the restored topology with the tasks after the checkpoint pending", async () => {
    const h = createHarness({ plan: draftPlan(CHAIN) });
    const productId = await h.started();
    await h.finished(productId);
    const { checkpoints } = await h.service.checkpoints(productId);
    const mark = h.notifier.sent.length;

    await h.service.rollback(productId, checkpoints.find((c) => c.completed === 2)?.checkpointId);
    await h.finished(productId, 2);

    const topology = h.notifier.sent.slice(mark).find((s) => s.method === "product.dagTopology");
    expect((topology?.params.nodes as { id: string; status: string }[]).map((n) => [n.id, n.status])).toEqual([
      ["a", "completed"],
      ["b", "completed"],
      ["c", "pending"],
      ["d", "pending"],
    ]);
  });

  it("stops the running task when rolling back a product that is still executing", async () => {
    const h = createHarness({ plan: draftPlan(CHAIN) });
    h.worker.script("c", { kind: "hang" }, { kind: "complete" });
    const productId = await h.started();
    await waitUntil(() => h.worker.hasStarted("c"), "c to start");
    await drain();
    const first = (await h.service.checkpoints(productId)).checkpoints[0];

    await h.service.rollback(productId, first?.checkpointId);
    const done = await h.finished(productId);

    expect(first?.completed).toBe(1);
    expect(h.worker.runsOf("c")[0]?.request.signal.aborted).toBe(true);
    expect(h.worker.executions.map((e) => e.taskId)).toEqual(["a", "b", "c", "b", "c", "d"]);
    expect(done.phase).toBe("completed");
  });
});

describe("product.replayTask", () => {
  /** a → b → c; a → d; e independent. */
  const PLAN = draftPlan([
    { id: "a" },
    { id: "b", deps: ["a"] },
    { id: "c", deps: ["b"] },
    { id: "d", deps: ["a"], instance: "i2" },
    { id: "e", instance: "i3" },
  ]);

  it("resets the task and its transitive dependents only, and re-runs exactly them", async () => {
    const h = createHarness({ plan: PLAN });
    const productId = await h.started();
    await h.finished(productId);
    const runsBefore = h.worker.executions.length;

    expect(await h.service.replayTask(productId, "b")).toEqual({ productId, reset: ["b", "c"] });
    const done = await h.finished(productId, 2);

    expect(done.phase).toBe("completed");
    expect(h.worker.executions.slice(runsBefore).map((e) => `${e.taskId}@${e.attempt}`)).toEqual(["b@1", "c@1"]);
    expect((await h.tasks(productId)).map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["a", "completed", 1],
      ["b", "completed", 1],
      ["c", "completed", 1],
      ["d", "completed", 1],
      ["e", "completed", 1],
    ]);
  });
});

describe("replay while a dependent runs (regression: an old worker's late answer taken for the new run)", () => {
  it("ignores the late result of the reset worker, so the dependent runs once more, not twice", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "t0" }, { id: "t1", deps: ["t0"] }]) });
    const second = new Gate();
    h.worker.script("t1", { kind: "hang" }, { kind: "complete", gate: second });
    const late = new Gate();
    let heldBack = false;
    const runTask = h.worker.runTask.bind(h.worker);
    h.worker.runTask = async (request, events) => {
      const result = await runTask(request, events);
      if (request.task.taskId === "t1" && !heldBack) {
        heldBack = true;
        await late.promise; // the old worker answers only after the new one started
      }
      return result;
    };
    const productId = await h.started();
    await waitUntil(() => h.worker.runsOf("t1").length === 1, "t1 to start");

    await h.service.replayTask(productId, "t0");
    await waitUntil(() => h.worker.runsOf("t1").length === 2, "t1 to start again after the replay");
    late.release();
    await drain();
    second.release();
    const done = await h.finished(productId);

    expect(done.phase).toBe("completed");
    expect(h.worker.runsOf("t1")).toHaveLength(2);
    expect((await h.tasks(productId)).find((t) => t.taskId === "t1")).toMatchObject({
      status: "completed",
      attempts: 1,
    });
  });
});
