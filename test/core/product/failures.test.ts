/**
 * Behaviour of a product when work goes wrong: retries, leader consultation after a final failure (give up or a
 * fix-up mutation), a worker that asks a question (DESIGN.md guarantee 8: waiting is not failing), and a run-state
 * authority that fails a write (guarantee 2: persistence failure is a barrier).
 */
import { describe, expect, it } from "vitest";
import type { Mutation } from "../../../protocol/common.js";
import { ProductStore } from "../../../src/core/product/store.js";
import { Gate, createHarness, drain, draftPlan, taskOf, waitUntil } from "../../support/fakes.js";

describe("retries", () => {
  it("completes a task on attempt 2 after one failed attempt when maxAttempts is 2", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a", maxAttempts: 2 }]) });
    h.worker.script("a", { kind: "fail", error: "flaky" }, { kind: "complete" });
    const productId = await h.started();
    const done = await h.finished(productId);

    expect(done.phase).toBe("completed");
    expect(h.worker.runsOf("a").map((e) => e.attempt)).toEqual([1, 2]);
    expect(h.notifier.taskTrail("a")).toEqual(["running@1", "pending@1", "running@2", "completed@2"]);
    expect(h.notifier.of("product.taskStatus", productId, (p) => p.status === "pending")).toEqual([
      { productId, taskId: "a", status: "pending", attempt: 1, error: "flaky" },
    ]);
    expect(h.leader.consultCalls).toEqual([]);
  });
});

describe("leader consultation after a final failure", () => {
  /** a fails every attempt; b and c depend on it (c through b); x is independent. */
  const PLAN = draftPlan([
    { id: "a" },
    { id: "b", deps: ["a"] },
    { id: "c", deps: ["b"] },
    { id: "x", instance: "i2" },
  ]);

  it("consults the leader exactly once, with the failed task, after the last attempt", async () => {
    const h = createHarness({ plan: PLAN });
    h.worker.script("a", { kind: "fail", error: "broken build" });
    const productId = await h.started();
    await h.finished(productId);

    expect(h.worker.runsOf("a").map((e) => e.attempt)).toEqual([1, 2]);
    expect(h.leader.consultCalls).toHaveLength(1);
    expect(h.leader.consultCalls[0]?.failedTask).toMatchObject({
      taskId: "a",
      status: "failed",
      attempts: 2,
      error: "broken build",
    });
  });

  it("on giveUp skips the dependents, completes independent tasks and ends failed with a recovery", async () => {
    const h = createHarness({ plan: PLAN });
    h.worker.script("a", { kind: "fail", error: "broken build" });
    h.leader.decisions.push({ kind: "giveUp", message: "Cannot fix the build." });
    const productId = await h.started();
    const done = await h.finished(productId);
    const status = await h.service.status(productId);

    expect(done).toMatchObject({ productId, phase: "failed" });
    expect((await h.tasks(productId)).map((t) => [t.taskId, t.status])).toEqual([
      ["a", "failed"],
      ["b", "skipped"],
      ["c", "skipped"],
      ["x", "completed"],
    ]);
    expect(h.worker.started.filter((id) => id === "b" || id === "c")).toEqual([]);
    expect(status.phase).toBe("failed");
    expect(status.recovery).toMatchObject({ resumable: false, cause: expect.stringContaining("a failed") });
    expect(
      h.notifier.of("product.leaderMessage", productId, (p) => p.message === "Cannot fix the build."),
    ).toHaveLength(1);
  });

  it("on a fix-up mutation runs the fix-up, then the re-pointed dependents, and completes", async () => {
    const h = createHarness({ plan: PLAN });
    h.worker.script("a", { kind: "fail" });
    const fix: Mutation[] = [
      { op: "addTask", task: taskOf({ id: "a_fix", title: "Fix a" }) },
      { op: "removeDependency", taskId: "b", dependsOn: "a" },
      { op: "addDependency", taskId: "b", dependsOn: "a_fix" },
      { op: "removeTask", taskId: "a" },
    ];
    h.leader.decisions.push({ kind: "mutate", mutations: fix, message: "Replacing a with a fix-up." });
    const productId = await h.started();
    const done = await h.finished(productId);

    expect(done.phase).toBe("completed");
    expect(h.leader.consultCalls).toHaveLength(1);
    const fixRun = h.worker.runsOf("a_fix")[0];
    const bRun = h.worker.runsOf("b")[0];
    expect(fixRun && bRun && fixRun.endSeq !== undefined && fixRun.endSeq < bRun.startSeq).toBe(true);
    expect(bRun?.request.dependencyOutputs).toEqual([{ taskId: "a_fix", title: "Fix a", output: "out:a_fix" }]);
    expect(h.worker.runsOf("c")).toHaveLength(1);
    expect((await h.tasks(productId)).map((t) => [t.taskId, t.status])).toEqual([
      ["b", "completed"],
      ["c", "completed"],
      ["x", "completed"],
      ["a_fix", "completed"],
    ]);
    expect(h.notifier.of("product.dagMutated", productId).map((p) => p.by)).toEqual([
      "leader",
      "leader",
      "leader",
      "leader",
    ]);
  });
});

describe("two final failures", () => {
  it("consults the leader about a task that fails while another consultation is in flight", async () => {
    // Regression: the second failure found the leader turn taken by the first consultation and its dependents were
    // skipped without the leader ever hearing of it.
    const h = createHarness({
      plan: draftPlan([
        { id: "a" },
        { id: "b", deps: ["a"] },
        { id: "x", instance: "i2" },
        { id: "y", deps: ["x"], instance: "i2" },
      ]),
    });
    const xGate = new Gate();
    h.worker.script("a", { kind: "fail" }).script("x", { kind: "fail", gate: xGate });
    h.leader.consultGate = new Gate();
    const productId = await h.started();
    await waitUntil(() => h.leader.consultCalls.length === 1, "the consultation about a");
    xGate.release();
    await waitUntil(
      () => h.worker.runsOf("x").length === 2 && h.worker.runsOf("x")[1]?.result !== undefined,
      "x to fail twice",
    );
    await drain();
    h.leader.consultGate.release();
    const done = await h.finished(productId);

    expect(h.leader.consultCalls.map((c) => c.failedTask.taskId)).toEqual(["a", "x"]);
    expect(done.phase).toBe("failed");
    expect((await h.tasks(productId)).map((t) => [t.taskId, t.status])).toEqual([
      ["a", "failed"],
      ["b", "skipped"],
      ["x", "failed"],
      ["y", "skipped"],
    ]);
  });
});

describe("waiting is not failing (guarantee 8)", () => {
  const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }, { id: "x", instance: "i2" }]);

  async function waitingProduct() {
    const h = createHarness({ plan: PLAN });
    h.worker.script("a", { kind: "wait", question: "Which database?" }, { kind: "complete" });
    const productId = await h.started();
    await h.notifier.next("product.taskStatus", (p) => p.taskId === "a" && p.status === "waiting");
    await h.notifier.next("product.taskStatus", (p) => p.taskId === "x" && p.status === "completed");
    await drain();
    return { h, productId };
  }

  it("keeps the asking task waiting, its dependents pending and the product executing, and says why", async () => {
    const { h, productId } = await waitingProduct();
    const status = await h.service.status(productId);

    expect(status.phase).toBe("executing");
    expect((await h.tasks(productId)).map((t) => [t.taskId, t.status, t.question])).toEqual([
      ["a", "waiting", "Which database?"],
      ["b", "pending", undefined],
      ["x", "completed", undefined],
    ]);
    expect(h.worker.hasStarted("b")).toBe(false);
    expect(h.notifier.of("product.completed", productId)).toEqual([]);
    expect(status.recovery).toMatchObject({ resumable: true, cause: expect.stringContaining("Which database?") });
    expect(h.notifier.of("product.taskStatus", productId, (p) => p.status === "waiting")).toEqual([
      { productId, taskId: "a", status: "waiting", attempt: 1, question: "Which database?" },
    ]);
  });

  it("runs the task again with the answer from product.message, then its dependents, and completes", async () => {
    const { h, productId } = await waitingProduct();
    const answer = await h.service.message(productId, "PostgreSQL");
    const done = await h.finished(productId);

    expect(answer.response).toContain("a");
    expect(done.phase).toBe("completed");
    expect(h.worker.runsOf("a").map((e) => e.attempt)).toEqual([1, 2]);
    expect(h.worker.runsOf("a")[1]?.request.task.description).toContain("PostgreSQL");
    expect(h.worker.runsOf("b")).toHaveLength(1);
    expect(h.leader.messageCalls).toEqual([]);
  });
});

describe("persistence failure is a barrier (guarantee 2)", () => {
  /** a completes; b is held running; the write of b's completion fails. */
  async function failedWrite() {
    const h = createHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }, { id: "c", deps: ["b"] }]) });
    const gate = new Gate();
    h.worker.script("b", { kind: "complete", gate }, { kind: "complete" });
    const productId = await h.started();
    await waitUntil(() => h.worker.hasStarted("b"), "b to start");
    await drain();
    h.authority.failNext("appendEvents");
    gate.release();
    await h.notifier.next("product.persistenceError");
    await drain();
    return { h, productId };
  }

  it("pauses, tells the client and starts no further task", async () => {
    const { h, productId } = await failedWrite();
    const status = await h.service.status(productId);

    expect(h.notifier.of("product.persistenceError", productId)).toEqual([
      { productId, projectId: "proj", error: expect.stringContaining("Injected failure on appendEvents") },
    ]);
    expect(status.phase).toBe("paused");
    expect((status.recovery as { cause: string }).cause).toContain("Injected failure on appendEvents");
    expect(h.worker.started).toEqual(["a", "b"]);
    expect(h.notifier.of("product.completed", productId)).toEqual([]);
  });

  it("counts the stopped task as pending, not running, in product.status and product.list (issue 10 finding 10)", async () => {
    const { h, productId } = await failedWrite();
    const status = await h.service.status(productId);
    const listed = (await h.service.list("proj")).products.find((p) => p.productId === productId);

    expect(status.progress).toEqual({ total: 3, completed: 1, running: 0, failed: 0, pending: 2 });
    expect(listed?.progress).toEqual({ total: 3, completed: 1, running: 0, failed: 0, pending: 2 });
  });

  it("after the authority recovers, resume finishes without re-running persisted completed work", async () => {
    const { h, productId } = await failedWrite();
    await h.service.resume(productId);
    const done = await h.finished(productId);

    expect(done.phase).toBe("completed");
    expect(h.worker.runsOf("a")).toHaveLength(1);
    // b's result never reached the authority, so it is the one task that runs again (its attempt counted).
    expect(h.worker.runsOf("b").map((e) => e.attempt)).toEqual([1, 2]);
    expect(h.worker.runsOf("c")).toHaveLength(1);
  });

  it("still announces product.completed when the header write after the final commit fails", async () => {
    // Regression: the terminal phase was committed to the event stream, then the header write failed and the client
    // was never told the product had completed (nor sent a persistenceError, the product being terminal).
    const h = createHarness({ plan: draftPlan([{ id: "a" }]) });
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const productId = await h.started();
    await waitUntil(() => h.worker.hasStarted("a"), "a to start");
    await drain();
    h.authority.failNext("put");
    gate.release();
    const done = await h.finished(productId);

    expect(done.phase).toBe("completed");
    const { model } = await new ProductStore(h.authority, 20).load(productId);
    expect(model.state.phase).toBe("completed");
  });
});

describe("a consultation interrupted by shutdown", () => {
  const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }, { id: "x", instance: "i2" }]);

  it("decides nothing, leaves the dependents pending, and the leader is consulted again on resume", async () => {
    const first = createHarness({ plan: PLAN });
    first.worker.script("a", { kind: "fail", error: "broken" });
    first.leader.consultGate = new Gate();
    const productId = await first.started();
    await waitUntil(() => first.leader.consultCalls.length === 1, "the consultation to start");
    const signal = first.leader.consultCalls[0]?.signal;

    await first.service.shutdown();
    expect(signal?.aborted).toBe(true);
    first.leader.decisions.push({ kind: "giveUp", message: "too late" });
    first.leader.consultGate.release();
    await drain();
    expect((await first.tasks(productId)).map((t) => [t.taskId, t.status])).toEqual([
      ["a", "failed"],
      ["b", "pending"],
      ["x", "completed"],
    ]);

    const second = createHarness({ plan: PLAN, authority: first.authority, clock: first.clock, ids: first.ids });
    second.leader.decisions.push({ kind: "giveUp", message: "Giving up on a." });
    await second.service.resume(productId);
    const done = await second.finished(productId);
    expect(done.phase).toBe("failed");
    expect(second.leader.consultCalls.map((c) => c.failedTask.taskId)).toEqual(["a"]);
    expect((await second.tasks(productId)).map((t) => [t.taskId, t.status])).toEqual([
      ["a", "failed"],
      ["b", "skipped"],
      ["x", "completed"],
    ]);
  });
});

describe("configuration errors and permission refusals (issue 11)", () => {
  it("a configuration error pauses the product with the fix: no retry, no consultation, nothing charged", async () => {
    const h = createHarness({
      plan: draftPlan([
        { id: "a", maxAttempts: 3 },
        { id: "b", deps: ["a"] },
      ]),
    });
    h.worker.script(
      "a",
      {
        kind: "fail",
        failure: "configuration",
        prompted: false,
        error: 'Could not start agent "coder": the command "coder-acp" was not found.',
        remediation: 'Install the agent, or fix "command" of agent "coder".',
      },
      { kind: "complete" },
    );
    const productId = await h.started();
    await waitUntil(() => h.notifier.of("product.taskStatus", productId).length >= 2, "a back to pending");
    await waitUntil(() => h.worker.runsOf("a")[0]?.result !== undefined, "a settled");
    await drain();
    const status = await h.service.status(productId);
    expect(status.phase).toBe("paused");
    expect(status.recovery).toEqual({
      cause: 'Could not start agent "coder": the command "coder-acp" was not found.',
      resumable: true,
      remediation: 'Install the agent, or fix "command" of agent "coder".',
    });
    expect(h.worker.runsOf("a")).toHaveLength(1);
    expect(h.leader.consultCalls).toEqual([]);
    expect(status.budget).toMatchObject({ usedTokens: 0, tokenSource: "none" });
    // After the fix, resume runs the task again, with its retries untouched.
    await h.service.resume(productId);
    const done = await h.finished(productId);
    expect(done.phase).toBe("completed");
    expect(h.worker.runsOf("a").map((e) => e.attempt)).toEqual([1, 2]);
  });

  it("after a configuration error, ordinary failures still use up the retries (the retry limit holds)", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a", maxAttempts: 2 }]) });
    h.worker.script(
      "a",
      {
        kind: "fail",
        failure: "configuration",
        prompted: false,
        error: 'Unknown agent "ghost": it is not in the agent registry.',
        remediation: "Start the server with the configuration, then resume.",
      },
      { kind: "fail", error: "broken build" },
    );
    h.leader.decisions.push({ kind: "giveUp", message: "Cannot fix the build." });
    const productId = await h.started();
    await waitUntil(() => h.worker.runsOf("a")[0]?.result !== undefined, "a settled");
    await drain();
    expect((await h.service.status(productId)).phase).toBe("paused");
    await h.service.resume(productId);
    const done = await h.finished(productId);
    expect(done.phase).toBe("failed");
    // One attempt stopped by the configuration error (not charged), then exactly maxAttempts ordinary failures.
    expect(h.worker.runsOf("a").map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect(h.leader.consultCalls).toHaveLength(1);
  });

  it("a refusal by the permission policy fails the task at once (no retry) and is kept on the task", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a", maxAttempts: 3 }]) });
    h.worker.script("a", {
      kind: "fail",
      failure: "permission",
      error: 'The permission policy "deny" refused edit "Write hello.txt".',
      refusals: [{ kind: "edit", title: "Write hello.txt", by: "policy" }],
    });
    h.leader.decisions.push({ kind: "giveUp", message: "Allow edits first." });
    const productId = await h.started();
    await h.finished(productId);
    const [a] = await h.tasks(productId);
    expect(h.worker.runsOf("a")).toHaveLength(1);
    expect(a).toMatchObject({
      status: "failed",
      error: 'The permission policy "deny" refused edit "Write hello.txt".',
      refusedPermissions: [{ kind: "edit", title: "Write hello.txt", by: "policy" }],
    });
    expect(h.leader.consultCalls).toHaveLength(1);
  });
});
