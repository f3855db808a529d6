import { describe, expect, it } from "vitest";
import type { TaskState } from "../../../protocol/common.js";
import type { ProductState } from "../../../src/core/product/records.js";
import { tasksWithWaits } from "../../../src/core/product/task-waits.js";

const task = (taskId: string, status: TaskState["status"], dependsOn: string[] = [], extra = {}): TaskState => ({
  taskId,
  title: taskId,
  description: "",
  instanceId: "i1",
  dependsOn,
  status,
  attempts: 0,
  ...extra,
});

function state(tasks: TaskState[], extra: Partial<ProductState> = {}): ProductState {
  return { phase: "executing", tasks, ...extra } as ProductState;
}
const facts = { leaderBusy: false, overloaded: new Map(), nowMs: 0 };
const waits = (s: ProductState, f = facts) => tasksWithWaits(s, f).map((t) => t.waitingFor ?? t.waiting ?? "-");

describe("tasksWithWaits (issue 28: status says what each pending task waits for)", () => {
  it("dependencies, then seat; running and finished tasks carry nothing", () => {
    const s = state([task("a", "running"), task("b", "pending", ["a"]), task("c", "pending"), task("d", "completed")]);
    expect(waits(s)).toEqual(["-", "dependencies", "seat", "-"]);
  });

  it("leader while a leader turn runs; budget when paused on a spent budget; nothing when paused otherwise", () => {
    const s = state([task("a", "completed"), task("b", "pending", ["a"])]);
    expect(waits(s, { ...facts, leaderBusy: true })).toEqual(["-", "leader"]);
    const cause = "The token budget is spent: 120 of 100 tokens used.";
    const budget = { phase: "paused", recovery: { cause, resumable: true, remediation: "" } } as const;
    expect(waits(state(s.tasks, budget))).toEqual(["-", "budget"]);
    const other = { phase: "paused", recovery: { cause: "Paused by the user.", resumable: true, remediation: "" } };
    expect(waits(state(s.tasks, other as never))).toEqual(["-", "-"]);
  });

  it("workspace while a completed dependency's result is not integrated yet (worktree isolation)", () => {
    const ws = { path: "/w/a", branch: "acp/a", baseCommit: "a".repeat(40), commit: "b".repeat(40) };
    const tasks = [task("a", "completed", [], { workspace: ws }), task("b", "pending", ["a"])];
    const integration = { merged: [] as string[] } as unknown as ProductState["integration"];
    expect(waits(state(tasks, { isolation: "worktree", integration }))).toEqual(["-", "workspace"]);
    const merged = { merged: ["a"] } as unknown as ProductState["integration"];
    expect(waits(state(tasks, { isolation: "worktree", integration: merged }))).toEqual(["-", "seat"]);
  });

  it("an overloaded running task counts its retry down", () => {
    const overloaded = new Map([["a", { reason: "provider overloaded", retryAtMs: 20_000 }]]);
    expect(waits(state([task("a", "running")]), { leaderBusy: false, overloaded, nowMs: 5_000 })).toEqual([
      "waiting: provider overloaded, retry in 15 s",
    ]);
  });
});
