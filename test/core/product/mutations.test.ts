/**
 * Behaviour of `product.mutate` during execution (DESIGN.md, Execution model: mutations are validated as a batch,
 * applied atomically, persisted, then announced; PROTOCOL.md section 5).
 */
import { describe, expect, it } from "vitest";
import type { Mutation } from "../../../protocol/common.js";
import { isDomainError } from "../../../src/core/errors.js";
import { Gate, createHarness, drain, draftPlan, rejectionOf, taskOf, waitUntil } from "../../support/fakes.js";

/** a (held running by a gate) → b → c, all on instance i1; instance i2 is idle. */
async function runningProduct() {
  const plan = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }, { id: "c", deps: ["b"] }]);
  plan.instances.push({ instanceId: "i2", agentId: "tester", role: "tester" });
  const h = createHarness({ plan });
  const gate = new Gate();
  h.worker.script("a", { kind: "complete", gate });
  const productId = await h.started();
  await waitUntil(() => h.worker.hasStarted("a"), "a to start");
  await drain();
  return { h, productId, gate };
}

const addX: Mutation = { op: "addTask", task: taskOf({ id: "x", instance: "i1" }) };

describe("product.mutate refuses an invalid batch whole", () => {
  it.each<[string, Mutation[], number, RegExp]>([
    ["a cycle", [addX, { op: "addDependency", taskId: "b", dependsOn: "c" }], 1, /cycle/],
    [
      "an unknown id",
      [
        { op: "updateTask", taskId: "b", patch: { title: "B" } },
        { op: "removeTask", taskId: "zzz" },
      ],
      1,
      /zzz/,
    ],
    ["a running task", [{ op: "updateTask", taskId: "a", patch: { title: "A" } }], 0, /running/],
  ])("refuses %s with invalid_mutation, changing and persisting nothing", async (_what, batch, index, reason) => {
    const { h, productId, gate } = await runningProduct();
    const writesBefore = h.authority.writeCount;
    const tasksBefore = await h.tasks(productId);

    const err = await rejectionOf(h.service.mutate(productId, batch));
    expect(isDomainError(err, "invalid_mutation") && err.details.index).toBe(index);
    expect(isDomainError(err, "invalid_mutation") && err.details.reason).toMatch(reason);
    await drain();
    expect(h.authority.writeCount).toBe(writesBefore);
    expect(((await h.service.status(productId)).plan as { version: number }).version).toBe(1);
    expect(await h.tasks(productId)).toEqual(tasksBefore);
    expect(h.notifier.of("product.dagMutated", productId)).toEqual([]);
    gate.release();
    await h.finished(productId);
    expect(h.worker.hasStarted("x")).toBe(false);
  });
});

describe("product.mutate applies a valid batch", () => {
  const batch: Mutation[] = [
    { op: "addTask", task: taskOf({ id: "x", instance: "i2" }) },
    { op: "addDependency", taskId: "c", dependsOn: "x" },
  ];

  it("bumps the version, persists the new plan, and announces each mutation then the topology", async () => {
    const { h, productId, gate } = await runningProduct();
    const mark = h.notifier.sent.length;

    expect(await h.service.mutate(productId, batch)).toEqual({ productId, applied: 2, version: 2 });
    const after = h.notifier.sent.slice(mark).filter((s) => s.method !== "product.taskStatus");
    expect(after.slice(0, 3).map((s) => s.method)).toEqual([
      "product.dagMutated",
      "product.dagMutated",
      "product.dagTopology",
    ]);
    expect(after.slice(0, 2).map((s) => s.params)).toEqual(
      batch.map((mutation) => ({ productId, mutation, by: "user" })),
    );
    expect((after[2]?.params.nodes as { id: string; dependsOn: string[] }[]).map((n) => [n.id, n.dependsOn])).toEqual([
      ["a", []],
      ["b", ["a"]],
      ["c", ["b", "x"]],
      ["x", []],
    ]);
    const { model } = await h.store.load(productId);
    expect(model.state.plan?.version).toBe(2);
    expect(model.state.tasks.map((t) => t.taskId)).toEqual(["a", "b", "c", "x"]);
    gate.release();
    await h.finished(productId);
  });

  it("runs the added task, and the task that now depends on it only after it", async () => {
    const { h, productId, gate } = await runningProduct();
    await h.service.mutate(productId, batch);
    await waitUntil(() => h.worker.runsOf("x")[0]?.endSeq !== undefined, "x to finish");
    gate.release();
    const done = await h.finished(productId);

    expect(done).toMatchObject({ phase: "completed", summary: "All 4 tasks completed." });
    const x = h.worker.runsOf("x");
    const c = h.worker.runsOf("c");
    expect(x).toHaveLength(1);
    expect(c).toHaveLength(1);
    expect((x[0]?.endSeq ?? Infinity) < (c[0]?.startSeq ?? -1)).toBe(true);
    expect(c[0]?.request.dependencyOutputs.map((d) => d.taskId)).toEqual(["b", "x"]);
  });
});

describe("leader mutations from product.message", () => {
  it("applies the mutations the leader answers with, marked as by the leader, and returns them", async () => {
    const { h, productId, gate } = await runningProduct();
    const mutations: Mutation[] = [{ op: "updateTask", taskId: "c", patch: { description: "Do c, with tests." } }];
    h.leader.messageAnswers.push({ response: "Added tests to c.", mutations });

    expect(await h.service.message(productId, "c needs tests")).toEqual({ response: "Added tests to c.", mutations });
    expect(h.leader.messageCalls.map((m) => m.content)).toEqual(["c needs tests"]);
    expect(h.notifier.of("product.dagMutated", productId)).toEqual([
      { productId, mutation: mutations[0], by: "leader" },
    ]);
    gate.release();
    await h.finished(productId);
    expect(h.worker.runsOf("c")[0]?.request.task.description).toBe("Do c, with tests.");
  });
});
