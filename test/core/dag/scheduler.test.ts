import { describe, expect, it } from "vitest";
import type { TaskStatus } from "../../../protocol/common.js";
import { planGraphIndex, validatePlanLists } from "../../../src/core/dag/graph.js";
import { Scheduler } from "../../../src/core/dag/scheduler.js";
import type { SchedulerTask } from "../../../src/core/dag/scheduler.js";
import { isDomainError } from "../../../src/core/errors.js";
import { seededRandom as rng } from "../../support/seeded-random.js";

const task = (
  taskId: string,
  dependsOn: string[] = [],
  instanceId = "i1",
  status: TaskStatus = "pending",
): SchedulerTask => ({
  taskId,
  title: taskId,
  description: "",
  instanceId,
  dependsOn,
  status,
});

const ids = (tasks: readonly SchedulerTask[]): string[] => tasks.map((t) => t.taskId);

describe("Scheduler basics", () => {
  it("starts roots, then dependents once all their dependencies complete", () => {
    const s = new Scheduler([task("a"), task("b", [], "i2"), task("c", ["a", "b"], "i3")], 10);
    expect(ids(s.next())).toEqual(["a", "b"]);
    expect(s.next()).toEqual([]);
    s.settle("a", "completed");
    expect(s.next()).toEqual([]);
    s.settle("b", "completed");
    expect(ids(s.next())).toEqual(["c"]);
    s.settle("c", "completed");
    expect(s.isIdle()).toBe(true);
    expect(s.hasRunnable()).toBe(false);
    expect(s.counts()).toMatchObject({ total: 3, completed: 3, pending: 0, running: 0 });
  });

  it("runs one task at a time per instance and keeps the parked task", () => {
    const s = new Scheduler([task("a"), task("b"), task("c", [], "i2")], 10);
    expect(ids(s.next())).toEqual(["a", "c"]);
    expect(s.counts()).toMatchObject({ ready: 1, running: 2 });
    expect(s.next()).toEqual([]);
    s.settle("c", "completed");
    expect(s.next()).toEqual([]); // i1 still busy
    s.settle("a", "completed");
    expect(ids(s.next())).toEqual(["b"]);
  });

  it("honours maxParallelTasks and FIFO order of readiness", () => {
    const s = new Scheduler(
      ["a", "b", "c", "d"].map((x, i) => task(x, [], `i${i}`)),
      2,
    );
    expect(ids(s.next())).toEqual(["a", "b"]);
    s.settle("b", "completed");
    expect(ids(s.next())).toEqual(["c"]);
    s.setMaxParallelTasks(3);
    expect(ids(s.next())).toEqual(["d"]);
  });

  it("puts a task back on pending (retry or interruption) at the end of the queue", () => {
    const s = new Scheduler([task("a"), task("b", [], "i2")], 1);
    expect(ids(s.next())).toEqual(["a"]);
    s.settle("a", "pending");
    expect(ids(s.next())).toEqual(["b"]);
    s.settle("b", "completed");
    expect(ids(s.next())).toEqual(["a"]);
  });

  it("skips every transitive pending dependent of a failed task, and nothing else", () => {
    const s = new Scheduler(
      [
        task("a"),
        task("b", ["a"]),
        task("c", ["b"]),
        task("d", ["c", "x"]),
        task("x", [], "i2"),
        task("y", ["x"], "i2"),
      ],
      5,
    );
    expect(ids(s.next())).toEqual(["a", "x"]);
    s.settle("a", "failed");
    expect(s.skipDependentsOf("a")).toEqual(["b", "c", "d"]);
    expect(s.statusOf("d")).toBe("skipped");
    s.settle("x", "completed");
    expect(ids(s.next())).toEqual(["y"]);
    s.settle("y", "completed");
    expect(s.isIdle() && !s.hasRunnable()).toBe(true);
    expect(s.counts()).toMatchObject({ failed: 1, skipped: 3, completed: 2 });
  });

  it("a waiting task keeps its dependents pending: neither run nor skipped (guarantee 8)", () => {
    const s = new Scheduler([task("a"), task("b", ["a"], "i2"), task("c", [], "i1")], 5);
    expect(ids(s.next())).toEqual(["a"]);
    s.settle("a", "waiting");
    expect(ids(s.next())).toEqual(["c"]); // the instance is free for other work
    s.settle("c", "completed");
    expect(s.statusOf("b")).toBe("pending");
    expect(s.isIdle() && !s.hasRunnable()).toBe(true);
    expect(s.counts()).toMatchObject({ waiting: 1, pending: 1, ready: 0 });
    // The answer arrives: the task goes back to pending and runs again.
    s.settle("a", "pending");
    expect(ids(s.next())).toEqual(["a"]);
    s.settle("a", "completed");
    expect(ids(s.next())).toEqual(["b"]);
  });

  it("builds from persisted statuses: completed deps count, running tasks keep their instance busy", () => {
    const s = new Scheduler(
      [
        task("a", [], "i1", "completed"),
        task("b", ["a"], "i1"),
        task("c", [], "i2", "running"),
        task("d", ["c"], "i3"),
      ],
      5,
    );
    expect(s.counts()).toMatchObject({ running: 1, completed: 1, ready: 1 });
    expect(ids(s.next())).toEqual(["b"]);
    s.settle("c", "completed");
    expect(ids(s.next())).toEqual(["d"]);
  });

  it("rebuilds after a mutation", () => {
    const s = new Scheduler([task("a"), task("b", ["a"])], 5);
    expect(ids(s.next())).toEqual(["a"]);
    s.rebuild([task("a", [], "i1", "running"), task("b", ["a"]), task("n", [], "i2")]);
    expect(ids(s.next())).toEqual(["n"]);
    s.settle("a", "completed");
    expect(ids(s.next())).toEqual(["b"]);
  });

  it("ignores stale queue entries after a ready task is cancelled and restored", () => {
    const s = new Scheduler([task("a"), task("b")], 5);
    expect(ids(s.next())).toEqual(["a"]);
    s.settle("b", "cancelled");
    expect(s.hasRunnable()).toBe(false);
    s.settle("a", "completed");
    expect(s.next()).toEqual([]);
    s.settle("b", "pending");
    expect(ids(s.next())).toEqual(["b"]);
    expect(s.counts()).toMatchObject({ ready: 0, running: 1, cancelled: 0 });
  });

  it("refuses bad input with domain errors", () => {
    expect(() => new Scheduler([task("a", ["q"])], 1)).toThrow(
      "The plan is invalid: task a depends on unknown task q.",
    );
    expect(() => new Scheduler([task("a"), task("a")], 1)).toThrow(/used twice/);
    expect(() => new Scheduler([], 0)).toThrow(/maxParallelTasks/);
    const s = new Scheduler([task("a", [], "i1", "completed")], Infinity);
    let caught: unknown;
    try {
      s.settle("a", "pending");
    } catch (e) {
      caught = e;
    }
    expect(isDomainError(caught, "invalid_input")).toBe(true);
    expect(() => s.settle("zz", "completed")).toThrow("Task zz was not found.");
  });
});

describe("Scheduler from a validated plan's index (issue 34)", () => {
  it("runs as one that built its own index, and changes neither the index nor the tasks", () => {
    const next = rng(34);
    const plan = Array.from({ length: 60 }, (_, i) =>
      task(
        `t${i}`,
        [
          ...new Set(
            Array.from({ length: i === 0 ? 0 : 1 + Math.floor(next() * 3) }, () => `t${Math.floor(next() * i)}`),
          ),
        ],
        `i${i % 7}`,
      ),
    );
    expect(
      validatePlanLists({ instances: Array.from({ length: 7 }, (_, i) => ({ instanceId: `i${i}` })), tasks: plan }),
    ).toEqual({ ok: true });
    const index = planGraphIndex(plan);
    expect(index).toBeDefined();
    const positions = [...(index?.positions ?? [])];
    const targets = [...(index?.dependents.targets ?? [])];
    // Task states of the plan's graph (copies, as a product's are), some already settled.
    const states = plan.map((t, i) => ({
      ...t,
      dependsOn: [...t.dependsOn],
      status: (i < 10 ? "completed" : "pending") as TaskStatus,
    }));
    const own = new Scheduler(states, 5);
    const shared = new Scheduler(states, 5, index);
    for (let round = 0; round < 100 && own.hasRunnable(); round++) {
      const a = ids(own.next());
      expect(ids(shared.next())).toEqual(a);
      for (const id of a) {
        const status = next() < 0.9 ? "completed" : "failed";
        own.settle(id, status);
        shared.settle(id, status);
      }
      expect(shared.counts()).toEqual(own.counts());
    }
    expect([...(index?.positions ?? [])]).toEqual(positions);
    expect([...(index?.dependents.targets ?? [])]).toEqual(targets);
    expect(states.slice(10).every((t) => t.status === "pending")).toBe(true);
  });

  it("has no index for a task list that did not pass", () => {
    const cyclic = [task("a", ["b"]), task("b", ["a"])];
    expect(validatePlanLists({ instances: [{ instanceId: "i1" }], tasks: cyclic }).ok).toBe(false);
    expect(planGraphIndex(cyclic)).toBeUndefined();
  });
});

describe("Scheduler at scale", () => {
  it("runs a 50,000-task random DAG (width ~100): each task once, after its deps, one per instance, within the cap", () => {
    const random = rng(42);
    const n = 50_000;
    const instances = 24;
    const maxParallel = 16;
    const tasks: SchedulerTask[] = [];
    for (let i = 0; i < n; i += 1) {
      const deps = new Set<string>();
      const k = i === 0 ? 0 : Math.floor(random() * 4);
      for (let j = 0; j < k; j += 1) deps.add(`t${Math.max(0, i - 1 - Math.floor(random() * 100))}`);
      tasks.push(task(`t${i}`, [...deps], `i${Math.floor(random() * instances)}`));
    }
    const index = new Map(tasks.map((t, i) => [t.taskId, i]));

    const started = performance.now();
    const s = new Scheduler(tasks, maxParallel);
    const runs = new Uint8Array(n);
    const done = new Uint8Array(n);
    const busy = new Set<string>();
    const running: SchedulerTask[] = [];
    let violations = 0;
    let maxSeen = 0;
    let rounds = 0;
    for (;;) {
      for (const t of s.next()) {
        const i = index.get(t.taskId) as number;
        runs[i] = (runs[i] ?? 0) + 1;
        if (busy.has(t.instanceId)) violations += 1;
        busy.add(t.instanceId);
        for (const d of t.dependsOn) if (done[index.get(d) as number] !== 1) violations += 1;
        running.push(t);
      }
      maxSeen = Math.max(maxSeen, running.length);
      if (running.length === 0) break;
      // Settle a pseudo-random running task, so completions interleave with starts.
      const pick = Math.floor(random() * running.length);
      const t = running[pick] as SchedulerTask;
      running[pick] = running[running.length - 1] as SchedulerTask;
      running.pop();
      busy.delete(t.instanceId);
      done[index.get(t.taskId) as number] = 1;
      s.settle(t.taskId, "completed");
      rounds += 1;
    }
    const ms = performance.now() - started;
    console.info(`scheduler: ${n} tasks, ${rounds} settles in ${ms.toFixed(0)} ms (max running ${maxSeen})`);

    expect(violations).toBe(0);
    expect(runs.every((r) => r === 1)).toBe(true);
    expect(maxSeen).toBeLessThanOrEqual(maxParallel);
    expect(maxSeen).toBe(maxParallel); // the DAG is wide enough to fill every slot
    expect(s.counts()).toMatchObject({ total: n, completed: n, running: 0, pending: 0, ready: 0 });
    expect(s.isIdle() && !s.hasRunnable()).toBe(true);
  });
});
