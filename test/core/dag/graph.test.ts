import { describe, expect, it } from "vitest";
import { downstreamOf, topologicalOrder, validatePlanGraph, validatePlanLists } from "../../../src/core/dag/graph.js";
import type { GraphTask } from "../../../src/core/dag/graph.js";
import { DomainError, isDomainError } from "../../../src/core/errors.js";

const inst = [{ instanceId: "i1" }, { instanceId: "i2" }];
const t = (taskId: string, dependsOn: string[] = [], instanceId = "i1"): GraphTask => ({
  taskId,
  instanceId,
  dependsOn,
});

describe("validatePlanGraph", () => {
  it("accepts a diamond", () => {
    expect(validatePlanGraph(inst, [t("a"), t("b", ["a"]), t("c", ["a"], "i2"), t("d", ["b", "c"])])).toEqual({
      ok: true,
    });
  });

  it("accepts an empty plan", () => {
    expect(validatePlanGraph([], [])).toEqual({ ok: true });
  });

  it("rejects a duplicate instance id with the instance's index", () => {
    const r = validatePlanGraph([...inst, { instanceId: "i1" }], [t("a")]);
    expect(r).toEqual({
      ok: false,
      list: "instances",
      index: 2,
      reason: "Instance i1 appears twice (entries 1 and 3).",
    });
  });

  it("rejects a duplicate task id at the second occurrence", () => {
    const r = validatePlanGraph(inst, [t("a"), t("b"), t("a")]);
    expect(r).toMatchObject({ ok: false, list: "tasks", index: 2 });
    expect(!r.ok && r.reason).toBe("Task id a is used twice (tasks 1 and 3).");
  });

  it("rejects an unknown dependency", () => {
    expect(validatePlanGraph(inst, [t("a"), t("b", ["zz"])])).toEqual({
      ok: false,
      list: "tasks",
      index: 1,
      reason: "Task b depends on unknown task zz.",
    });
  });

  it("rejects a self-dependency", () => {
    expect(validatePlanGraph(inst, [t("a", ["a"])])).toMatchObject({
      ok: false,
      index: 0,
      reason: "Task a depends on itself.",
    });
  });

  it("rejects an unknown instance", () => {
    expect(validatePlanGraph(inst, [t("a"), t("b", [], "i9")])).toMatchObject({
      ok: false,
      index: 1,
      reason: "Task b is assigned to instance i9, which is not in the plan.",
    });
  });

  it("rejects a dependency listed twice", () => {
    expect(validatePlanGraph(inst, [t("a"), t("b", ["a", "a"])])).toMatchObject({ ok: false, index: 1 });
  });

  it("reports one cycle's path starting at the earliest task of the cycle", () => {
    // x is outside the cycle but depends on it; the cycle is b → c → d → b.
    const r = validatePlanGraph(inst, [t("a"), t("x", ["c"]), t("b", ["c"]), t("c", ["d"]), t("d", ["b", "a"])]);
    expect(r).toEqual({
      ok: false,
      list: "tasks",
      index: 2,
      reason: "Tasks form a dependency cycle (each depends on the next): b → c → d → b.",
    });
  });

  it("reports a two-task cycle", () => {
    const r = validatePlanGraph(inst, [t("a", ["b"]), t("b", ["a"])]);
    expect(!r.ok && r.reason).toBe("Tasks form a dependency cycle (each depends on the next): a → b → a.");
  });

  it("validates a 100,000-task chain without recursion limits", () => {
    const tasks = Array.from({ length: 100_000 }, (_, i) => t(`t${i}`, i === 0 ? [] : [`t${i - 1}`]));
    expect(validatePlanGraph(inst, tasks)).toEqual({ ok: true });
    tasks[0] = t("t0", ["t99999"]);
    const r = validatePlanGraph(inst, tasks);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.index).toBe(0);
  });
});

describe("validatePlanLists", () => {
  it("remembers only a plan's lists that passed, and with the instance list they passed with", () => {
    const tasks = [t("a"), t("b", ["a"], "i2")];
    expect(validatePlanLists({ instances: inst, tasks })).toEqual({ ok: true });
    expect(validatePlanLists({ instances: inst, tasks })).toEqual({ ok: true });
    // The same task list with another instance list is checked again (i2 is gone).
    const fewer = validatePlanLists({ instances: [{ instanceId: "i1" }], tasks });
    expect(fewer).toMatchObject({ ok: false, list: "tasks", index: 1 });
    // A list that failed is checked again each time, never remembered as passing.
    const cyclic = [t("a", ["b"]), t("b", ["a"])];
    expect(validatePlanLists({ instances: inst, tasks: cyclic }).ok).toBe(false);
    expect(validatePlanLists({ instances: inst, tasks: cyclic }).ok).toBe(false);
    // A new list (a mutation or an edit builds one) is checked, whatever an earlier list with the same tasks gave.
    expect(validatePlanLists({ instances: inst, tasks: [...tasks, t("c", ["c"])] }).ok).toBe(false);
  });
});

describe("topologicalOrder", () => {
  it("puts every task after its dependencies and keeps list order among peers", () => {
    const tasks = [t("d", ["b", "c"]), t("c", ["a"]), t("b", ["a"]), t("a"), t("e")];
    expect(topologicalOrder(tasks).map((x) => x.taskId)).toEqual(["a", "e", "c", "b", "d"]);
  });

  it("throws invalid_plan on a cycle", () => {
    let caught: unknown;
    try {
      topologicalOrder([t("a", ["b"]), t("b", ["a"])]);
    } catch (e) {
      caught = e;
    }
    expect(isDomainError(caught, "invalid_plan")).toBe(true);
    expect((caught as DomainError<"invalid_plan">).details.index).toBe(0);
  });

  it("throws invalid_plan on an unknown dependency", () => {
    expect(() => topologicalOrder([t("a", ["q"])])).toThrow(DomainError);
  });
});

describe("downstreamOf", () => {
  const tasks = [t("a"), t("b", ["a"]), t("c", ["b"]), t("d", ["a", "c"]), t("e"), t("f", ["e", "b"])];

  it("returns the task and every transitive dependent in topological order", () => {
    expect(downstreamOf(tasks, "b")).toEqual(["b", "c", "f", "d"]);
    expect(downstreamOf(tasks, "a")).toEqual(["a", "b", "c", "f", "d"]);
  });

  it("returns only the task for a sink", () => {
    expect(downstreamOf(tasks, "d")).toEqual(["d"]);
  });

  it("throws not_found for an unknown task", () => {
    expect(() => downstreamOf(tasks, "zz")).toThrow("Task zz was not found.");
  });

  it("is linear on a wide fan-out", () => {
    const wide = [t("root"), ...Array.from({ length: 50_000 }, (_, i) => t(`n${i}`, ["root"]))];
    expect(downstreamOf(wide, "root")).toHaveLength(50_001);
  });
});
