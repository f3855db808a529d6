import { describe, expect, it } from "vitest";
import type { Mutation, Plan, Task, TaskState, TaskStatus } from "../../../protocol/common.js";
import { validatePlanGraph } from "../../../src/core/dag/graph.js";
import { applyMutations } from "../../../src/core/dag/mutations.js";

const task = (taskId: string, dependsOn: string[] = [], instanceId = "i1"): Task => ({
  taskId,
  title: `Title ${taskId}`,
  description: `Do ${taskId}`,
  instanceId,
  dependsOn,
});

/** a ← b ← c, a ← d (b and d depend on a, c on b). */
function basePlan(): Plan {
  return {
    productId: "prd_1",
    version: 3,
    name: "n",
    summary: "s",
    instances: [
      { instanceId: "i1", agentId: "a1", role: "coder" },
      { instanceId: "i2", agentId: "a2", role: "reviewer" },
    ],
    tasks: [task("a"), task("b", ["a"]), task("c", ["b"], "i2"), task("d", ["a"])],
  };
}

const states = (statuses: Record<string, TaskStatus>): TaskState[] =>
  basePlan().tasks.map((t) => ({ ...t, status: statuses[t.taskId] ?? "pending", attempts: 0 }));

function rejected(
  plan: Plan,
  st: TaskState[] | Map<string, TaskState>,
  ms: Mutation[],
): { index: number; reason: string } {
  const r = applyMutations(plan, st, ms);
  if (r.ok) throw new Error("expected a rejection");
  return { index: r.index, reason: r.reason };
}

describe("applyMutations: success", () => {
  it("applies a mixed batch, bumps the version, reports added/removed/changed", () => {
    const plan = basePlan();
    const frozen = structuredClone(plan);
    const r = applyMutations(plan, states({}), [
      { op: "addTask", task: task("e", ["a"], "i2") },
      { op: "addDependency", taskId: "c", dependsOn: "e" },
      { op: "updateTask", taskId: "b", patch: { title: "New b" } },
      { op: "removeTask", taskId: "d" },
      { op: "reassign", taskId: "b", instanceId: "i2" },
      { op: "removeDependency", taskId: "c", dependsOn: "b" },
    ]);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.plan.version).toBe(4);
    expect(r.plan.tasks.map((t) => t.taskId)).toEqual(["a", "b", "c", "e"]);
    expect(r.plan.tasks.find((t) => t.taskId === "c")?.dependsOn).toEqual(["e"]);
    expect(r.plan.tasks.find((t) => t.taskId === "b")).toMatchObject({ title: "New b", instanceId: "i2" });
    expect(r.added.map((t) => t.taskId)).toEqual(["e"]);
    expect(r.removed).toEqual(["d"]);
    expect(r.changed).toEqual(["b", "c"]);
    expect(plan).toEqual(frozen); // the original is never modified
    expect(validatePlanGraph(r.plan.instances, r.plan.tasks)).toEqual({ ok: true });
  });

  it("lets a later mutation refer to a task added earlier in the batch", () => {
    const r = applyMutations(
      basePlan(),
      [],
      [
        { op: "addTask", task: task("x", ["c"]) },
        { op: "addTask", task: task("y", ["x"]) },
        { op: "updateTask", taskId: "x", patch: { description: "changed" } },
      ],
    );
    expect(r.ok && r.added.map((t) => [t.taskId, t.description])).toEqual([
      ["x", "changed"],
      ["y", "Do y"],
    ]);
  });

  it("removes a depended-on task once the batch has first removed the dependency", () => {
    const r = applyMutations(basePlan(), states({}), [
      { op: "removeDependency", taskId: "b", dependsOn: "a" },
      { op: "removeDependency", taskId: "d", dependsOn: "a" },
      { op: "removeTask", taskId: "a" },
    ]);
    expect(r.ok && r.removed).toEqual(["a"]);
  });

  it("allows a new task to depend on a completed task", () => {
    const r = applyMutations(basePlan(), states({ a: "completed" }), [{ op: "addTask", task: task("n", ["a"]) }]);
    expect(r.ok).toBe(true);
  });

  it("allows a pending task to gain a dependency on a completed one, and reports a task added then removed nowhere", () => {
    const r = applyMutations(basePlan(), states({ a: "completed" }), [
      { op: "addDependency", taskId: "c", dependsOn: "a" },
      { op: "addTask", task: task("tmp") },
      { op: "removeTask", taskId: "tmp" },
    ]);
    expect(r.ok && [r.added, r.removed, r.changed]).toEqual([[], [], ["c"]]);
  });

  it("accepts a status map as well as a list", () => {
    const map = new Map(states({ b: "running" }).map((s) => [s.taskId, s]));
    expect(rejected(basePlan(), map, [{ op: "updateTask", taskId: "b", patch: { title: "x" } }]).index).toBe(0);
  });

  it("allows touching failed, skipped and cancelled tasks", () => {
    const r = applyMutations(basePlan(), states({ b: "failed", c: "skipped", d: "cancelled" }), [
      { op: "removeDependency", taskId: "c", dependsOn: "b" },
      { op: "removeTask", taskId: "b" },
      { op: "updateTask", taskId: "d", patch: { title: "again" } },
    ]);
    expect(r.ok).toBe(true);
  });
});

describe("applyMutations: rejections name the mutation and the task", () => {
  it("rejects an empty batch", () => {
    expect(rejected(basePlan(), [], []).reason).toBe("The batch contains no mutations.");
  });

  it("rejects unknown task and instance ids", () => {
    expect(rejected(basePlan(), [], [{ op: "removeTask", taskId: "zz" }])).toEqual({
      index: 0,
      reason: "Task zz does not exist in the plan.",
    });
    expect(rejected(basePlan(), [], [{ op: "reassign", taskId: "a", instanceId: "i9" }]).reason).toBe(
      "Task a cannot be reassigned to unknown instance i9.",
    );
    expect(rejected(basePlan(), [], [{ op: "addTask", task: task("n", [], "i9") }]).reason).toBe(
      "Task n is assigned to unknown instance i9.",
    );
    expect(rejected(basePlan(), [], [{ op: "addTask", task: task("n", ["q"]) }]).reason).toBe(
      "Task n depends on unknown task q.",
    );
    expect(rejected(basePlan(), [], [{ op: "addDependency", taskId: "a", dependsOn: "q" }]).reason).toBe(
      "Task a cannot depend on unknown task q.",
    );
  });

  it("rejects a duplicate id on addTask, including an id removed earlier in the batch", () => {
    expect(rejected(basePlan(), [], [{ op: "addTask", task: task("b") }]).reason).toBe("Task b already exists.");
    const r = rejected(
      basePlan(),
      [],
      [
        { op: "removeTask", taskId: "c" },
        { op: "addTask", task: task("c") },
      ],
    );
    expect(r.index).toBe(1);
    expect(r.reason).toContain("removed earlier in this batch");
  });

  it("rejects a cycle created by addDependency and explains the path", () => {
    const r = rejected(basePlan(), [], [{ op: "addDependency", taskId: "a", dependsOn: "c" }]);
    expect(r).toEqual({
      index: 0,
      reason: "Making a depend on c would create a cycle, because c already depends on a (c → b → a).",
    });
  });

  it("rejects a cycle through a task added earlier in the batch", () => {
    const r = rejected(
      basePlan(),
      [],
      [
        { op: "addTask", task: task("x", ["c"]) },
        { op: "addDependency", taskId: "a", dependsOn: "x" },
      ],
    );
    expect(r.index).toBe(1);
  });

  it("rejects self-dependencies and repeated dependencies", () => {
    expect(rejected(basePlan(), [], [{ op: "addDependency", taskId: "a", dependsOn: "a" }]).reason).toBe(
      "Task a cannot depend on itself.",
    );
    expect(rejected(basePlan(), [], [{ op: "addTask", task: task("n", ["n"]) }]).reason).toBe(
      "Task n cannot depend on itself.",
    );
    expect(rejected(basePlan(), [], [{ op: "addDependency", taskId: "b", dependsOn: "a" }]).reason).toBe(
      "Task b already depends on a.",
    );
    expect(rejected(basePlan(), [], [{ op: "removeDependency", taskId: "b", dependsOn: "d" }]).reason).toBe(
      "Task b does not depend on d.",
    );
  });

  it("rejects removing a task others still depend on", () => {
    expect(rejected(basePlan(), [], [{ op: "removeTask", taskId: "a" }]).reason).toBe(
      "Task a cannot be removed while b, d still depend on it.",
    );
  });

  it.each([
    ["running", "is running"],
    ["completed", "is completed"],
    ["waiting", "is waiting for an answer"],
  ] as const)("rejects touching a %s task as the dependent", (status, phrase) => {
    const st = states({ d: status });
    const ops: Mutation[] = [
      { op: "removeTask", taskId: "d" },
      { op: "updateTask", taskId: "d", patch: { title: "x" } },
      { op: "reassign", taskId: "d", instanceId: "i2" },
      { op: "addDependency", taskId: "d", dependsOn: "c" },
      { op: "removeDependency", taskId: "d", dependsOn: "a" },
    ];
    for (const op of ops) {
      const r = rejected(basePlan(), st, [{ op: "addTask", task: task("ok") }, op]);
      expect(r.index).toBe(1);
      expect(r.reason).toContain(`Task d ${phrase}`);
    }
  });

  it("rejects a malformed mutation without throwing", () => {
    const bad = { op: "addTask", task: { taskId: "", title: "t" } } as unknown as Mutation;
    const r = rejected(basePlan(), [], [bad]);
    expect(r.index).toBe(0);
    expect(r.reason).toMatch(/^The mutation is malformed at task\./);
  });

  it("leaves the plan untouched when a later mutation fails", () => {
    const plan = basePlan();
    const frozen = structuredClone(plan);
    rejected(
      plan,
      [],
      [
        { op: "updateTask", taskId: "a", patch: { title: "changed" } },
        { op: "removeDependency", taskId: "b", dependsOn: "a" },
        { op: "removeTask", taskId: "zz" },
      ],
    );
    expect(plan).toEqual(frozen);
  });
});
