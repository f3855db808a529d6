/**
 * The product's pure decisions (src/core/product/decide.ts, issue 27), as "given these events, when this input,
 * then these events and effects": no store, no worker, no clock — the model is a fold of `evolve` over the given
 * events, and `decide` must neither change it nor do anything but answer.
 */
import { describe, expect, it } from "vitest";
import type { Plan, TaskState } from "../../../protocol/common.js";
import { decide, type Input, type NewEvent, type SettledAttempt } from "../../../src/core/product/decide.js";
import { evolve } from "../../../src/core/product/evolve.js";
import type { ProductEvent } from "../../../src/core/product/records.js";
import { emptyState, modelOf, type ProductModel } from "../../../src/core/product/state.js";
import type { WorkerResult } from "../../../src/core/ports.js";

const AT = "2030-01-01T00:00:00.000Z";
const NOW = "2030-01-01T00:01:00.000Z";

/** a → b → c on one instance; `maxAttempts` 2 for every task. */
const PLAN: Plan = {
  productId: "prd_d",
  version: 1,
  name: "Decide",
  summary: "Three tasks.",
  instances: [{ instanceId: "i1", agentId: "coder", role: "coder" }],
  tasks: ["a", "b", "c"].map((id, i) => ({
    taskId: id,
    title: id,
    description: `Do ${id}.`,
    instanceId: "i1",
    dependsOn: i === 0 ? [] : [["a", "b"][i - 1] as string],
    maxAttempts: 2,
  })),
};

type Raw = Record<string, unknown> & { type: string };

function given(...raws: Raw[]): ProductModel {
  const events = [
    { type: "created", productId: "prd_d", projectId: "proj", name: "Decide", goal: "g", cwd: "/w" },
    { type: "confirmed", plan: PLAN },
    ...raws,
  ].map((r) => ({ v: 1, at: AT, ...r }) as ProductEvent);
  const model = modelOf(emptyState());
  events.forEach((e, i) => evolve(model, e, i + 1));
  return model;
}

function task(model: ProductModel, id: string): TaskState {
  return model.state.tasks.find((t) => t.taskId === id) as TaskState;
}

function running(id: string, attempts = 1): Raw {
  return { type: "task", task: { ...PLAN.tasks.find((t) => t.taskId === id), status: "running", attempts } };
}

function settled(model: ProductModel, result: WorkerResult, over: Partial<Input & { kind: "attemptSettled" }> = {}) {
  const attempt: SettledAttempt = {
    taskId: "a",
    attempt: task(model, "a").attempts,
    result,
    briefChars: 40,
    reportedUsage: false,
    inputHash: "ti1:a",
    refusals: [],
  };
  const before = JSON.stringify(model.state);
  const decision = decide(model, {
    kind: "attemptSettled",
    attempt,
    now: NOW,
    driving: true,
    stopReason: null,
    defaultMaxAttempts: 2,
    completedUnwritten: 0,
    checkpointId: () => "ckp_1",
    ...over,
  });
  expect(JSON.stringify(model.state), "decide must not change the model").toBe(before);
  return decision;
}

describe("decide: a settled attempt", () => {
  it("completed: the task completes with its input hash, the estimate is charged, a checkpoint is taken", () => {
    const model = given(running("a"));
    const d = settled(model, { outcome: "completed", output: "done!!!!" });
    expect(d.effects).toEqual([]);
    // One event (issue 34): the estimate and the automatic checkpoint ride on the task event.
    expect(d.events).toEqual([
      {
        type: "task",
        task: expect.objectContaining({ taskId: "a", status: "completed", output: "done!!!!", endedAt: NOW }),
        inputHash: "ti1:a",
        usage: { inputTokens: 10, outputTokens: 2, estimated: true },
        checkpoint: { checkpointId: "ckp_1", completed: 1, total: 3 },
      },
    ]);
  });

  it("failed with a retry left while driving: back to pending, nothing else to do", () => {
    const d = settled(given(running("a")), { outcome: "failed", error: "broke" });
    expect(d.events).toEqual([
      {
        type: "task",
        task: expect.objectContaining({ status: "pending", error: "broke", attempts: 1 }),
        usage: { inputTokens: 10, outputTokens: 0, estimated: true },
      },
    ]);
    expect(d.effects).toEqual([]);
  });

  it("failed on its last attempt: failed for good, and the leader is consulted", () => {
    const d = settled(given(running("a", 2)), { outcome: "failed", error: "broke again" });
    expect(d.events[0]).toMatchObject({ type: "task", task: { status: "failed", error: "broke again" } });
    expect(d.effects).toEqual([{ kind: "consult", taskId: "a" }]);
  });

  it("refused by the permission policy: failed at once, no retry under the same policy", () => {
    const d = settled(given(running("a")), { outcome: "failed", error: "no", kind: "permission" });
    expect(d.events[0]).toMatchObject({ task: { status: "failed" } });
    expect(d.effects).toEqual([{ kind: "consult", taskId: "a" }]);
  });

  it("a configuration error: the task waits (no retry spent) and the product pauses with the fix", () => {
    const d = settled(given(running("a", 2)), {
      outcome: "failed",
      error: "agent missing",
      kind: "configuration",
      remediation: "Install it.",
    });
    expect(d.events[0]).toMatchObject({
      task: { status: "pending", interruption: "The attempt could not start: agent missing" },
    });
    expect(d.effects).toEqual([
      { kind: "pause", recovery: { cause: "agent missing", resumable: true, remediation: "Install it." } },
    ]);
  });

  it("stopped by a cancel or a pause: cancelled, or pending with the interruption note", () => {
    const model = given(running("a"));
    const failed: WorkerResult = { outcome: "failed", error: "aborted" };
    expect(settled(model, failed, { driving: false, stopReason: "cancel" }).events[0]).toMatchObject({
      task: { status: "cancelled" },
    });
    expect(settled(model, { outcome: "cancelled" }, { stopReason: "pause" }).events[0]).toMatchObject({
      task: { status: "pending", interruption: expect.stringContaining("paused") },
    });
  });

  it("a cancelled product's worker stopped later by the server's shutdown: cancelled, never pending for a resume", () => {
    // Guarantee 5 (found by a new user): `cancel` while a task ran under `run`, then the server shut down; the task was
    // recorded pending "will run again on resume" after the phase was already cancelled.
    const model = given(running("a"), { type: "phase", phase: "cancelled", recovery: null });
    const failed: WorkerResult = { outcome: "failed", error: "aborted" };
    for (const stopReason of ["shutdown", "pause", "fenced"] as const) {
      const event = settled(model, failed, { driving: false, stopReason }).events[0];
      expect(event).toMatchObject({ task: { status: "cancelled" } });
      expect(event).not.toHaveProperty("task.interruption");
    }
  });

  it("waiting: the task waits with its question (guarantee 8)", () => {
    const d = settled(given(running("a")), { outcome: "waiting", question: "Which one?" });
    expect(d.events[0]).toMatchObject({ task: { status: "waiting", question: "Which one?" } });
    expect(d.effects).toEqual([]);
  });

  it("an attempt that never prompted is not charged; a reported usage is not estimated again", () => {
    const model = given(running("a"));
    const unprompted = settled(model, { outcome: "failed", error: "x", prompted: false });
    expect(unprompted.events).toEqual([{ type: "task", task: expect.objectContaining({ status: "pending" }) }]);
    const reported = settled(
      model,
      { outcome: "completed", output: "o" },
      {
        attempt: {
          taskId: "a",
          attempt: 1,
          result: { outcome: "completed", output: "o" },
          briefChars: 4,
          reportedUsage: true,
          inputHash: "h",
          refusals: [],
        },
      },
    );
    expect(reported.events).toHaveLength(1);
    expect(reported.events[0]).not.toHaveProperty("usage");
    expect(reported.events[0]).toHaveProperty("checkpoint.checkpointId", "ckp_1");
  });

  it("integrated: the integration's events come first; a failed integration fails the attempt", () => {
    const model = given(running("a"));
    const merged = {
      type: "taskIntegrated",
      taskId: "a",
      attempt: 1,
      commit: "c".repeat(40),
      head: "d".repeat(40),
      changedFiles: [] as string[],
    } satisfies NewEvent;
    const ok = settled(model, { outcome: "completed", output: "o" }, { integration: { ok: true, events: [merged] } });
    expect(ok.events.map((e) => e.type)).toEqual(["taskIntegrated", "task"]);
    expect(ok.events[1]).toMatchObject({ usage: { estimated: true }, checkpoint: { checkpointId: "ckp_1" } });
    const conflict = settled(
      model,
      { outcome: "completed", output: "o" },
      { integration: { ok: false, error: "conflict in x.txt" } },
    );
    expect(conflict.events[0]).toMatchObject({ type: "task", task: { status: "pending", error: "conflict in x.txt" } });
  });

  it("counts completions already decided in the wave in the automatic checkpoint", () => {
    const d = settled(given(running("a")), { outcome: "completed", output: "o" }, { completedUnwritten: 1 });
    expect(d.events.at(-1)).toHaveProperty("checkpoint", { checkpointId: "ckp_1", completed: 2, total: 3 });
  });
});

describe("decide: starting, ending, budgets, skipping", () => {
  it("start: each ready task runs its next attempt, recorded with its worktree, then launched", () => {
    const model = given();
    const workspace = { path: "/w/.wt/a-1", branch: "refs/x/a/1", baseCommit: "e".repeat(40) };
    const d = decide(model, { kind: "start", ready: [{ task: task(model, "a"), workspace }], now: NOW });
    const started = { ...task(model, "a"), status: "running", attempts: 1, startedAt: NOW, workspace };
    // One `started` event for the wave (issue 34), which evolve turns into the same started state.
    expect(d.events).toEqual([{ type: "started", tasks: [{ taskId: "a", attempt: 1, workspace }] }]);
    expect(d.effects).toEqual([{ kind: "launch", task: started }]);
    const stamped = { v: 1, at: NOW, ...d.events[0] } as ProductEvent;
    expect(task(evolve(model, stamped, model.state.seq + 1), "a")).toEqual(started);
  });

  it("quiescent: nothing to do while a task is pending, running or waiting", () => {
    expect(decide(given(), { kind: "quiescent" })).toEqual({ events: [], effects: [] });
    const waiting = { ...PLAN.tasks[0], status: "waiting", attempts: 1, question: "?" };
    expect(decide(given({ type: "task", task: waiting }), { kind: "quiescent" }).effects).toEqual([]);
  });

  it("quiescent: completed when every task completed, else failed with the summary as the recovery", () => {
    const done = (id: string, status = "completed"): Raw => ({
      type: "task",
      task: { ...PLAN.tasks.find((t) => t.taskId === id), status, attempts: 1 },
    });
    expect(decide(given(done("a"), done("b"), done("c")), { kind: "quiescent" }).effects).toEqual([
      { kind: "finish", phase: "completed", summary: "All 3 tasks completed.", recovery: null },
    ]);
    const failed = decide(given(done("a"), done("b", "failed"), done("c", "skipped")), { kind: "quiescent" });
    expect(failed.effects).toEqual([
      {
        kind: "finish",
        phase: "failed",
        summary: "1 of 3 tasks completed; b failed, c skipped.",
        recovery: expect.objectContaining({ cause: "1 of 3 tasks completed; b failed, c skipped.", resumable: false }),
      },
    ]);
  });

  it("budget: a spent token budget pauses and tells which limit tripped (guarantee 9)", () => {
    const model = given(
      { type: "budgetAdded", budget: { maxTotalTokens: 100 } },
      { type: "usage", taskId: "a", inputTokens: 90, outputTokens: 20, estimated: false },
    );
    const d = decide(model, { kind: "budget", elapsedMs: 0, warningRatio: 0.8 });
    expect(d.events).toEqual([]);
    expect(d.effects).toEqual([
      {
        kind: "pause",
        recovery: expect.objectContaining({ cause: "The token budget is spent: 110 of 100 tokens used." }),
      },
      {
        kind: "notify",
        method: "product.budgetExceeded",
        reason: "The token budget is spent: 110 of 100 tokens used.",
      },
    ]);
  });

  it("budget: one warning at 80 % of the time budget, recorded, and none once warned", () => {
    const model = given({ type: "budgetAdded", budget: { maxDurationMs: 1_000 } });
    const d = decide(model, { kind: "budget", elapsedMs: 850, warningRatio: 0.8 });
    const reason = "85 % of the time budget is used (850 of 1000 ms).";
    expect(d).toEqual({
      events: [{ type: "budgetWarned", reason }],
      effects: [{ kind: "notify", method: "product.budgetWarning", reason }],
    });
    const warned = given({ type: "budgetAdded", budget: { maxDurationMs: 1_000 } }, { type: "budgetWarned", reason });
    expect(decide(warned, { kind: "budget", elapsedMs: 900, warningRatio: 0.8 })).toEqual({ events: [], effects: [] });
  });

  it("a task failed for good: its pending transitive dependents are skipped, naming it", () => {
    const d = decide(given(), { kind: "failedForGood", taskId: "a" });
    expect(d.events).toEqual(
      ["b", "c"].map((id) => ({
        type: "task",
        task: expect.objectContaining({ taskId: id, status: "skipped", error: "Skipped because task a failed." }),
      })),
    );
  });
});

describe("decide: verification (guarantee 17)", () => {
  const TREE = "e".repeat(40);
  const entry = (ok: boolean) => ({
    tree: TREE,
    commit: "c".repeat(40),
    scope: "task" as const,
    ok,
    at: AT,
    checks: [{ name: "unit tests", ok, exitCode: ok ? 0 : 1, durationMs: 40, outputTail: "not ok 1 - add sums" }],
  });

  it("an unverified candidate is sent back to be verified; nothing is recorded and the task stays running", () => {
    const model = given(running("a"));
    const d = settled(
      model,
      { outcome: "completed", output: "o" },
      { integration: { ok: false, verdict: { state: "unverified" } } },
    );
    expect(d).toEqual({ events: [], effects: [{ kind: "verify", taskId: "a" }] });
  });

  it("an unverified candidate of a stopped run is an interruption, not a failure (runs again on resume)", () => {
    const d = settled(
      given(running("a")),
      { outcome: "completed", output: "o" },
      { integration: { ok: false, verdict: { state: "unverified" } }, driving: false, stopReason: "shutdown" },
    );
    expect(d.events[0]).toMatchObject({ type: "task", task: { status: "pending", attempts: 1 } });
    expect(d.effects).toEqual([]);
  });

  it("a red candidate fails the attempt with the check's name, exit code and output; retried while attempts last", () => {
    const d = settled(
      given(running("a")),
      { outcome: "completed", output: "o" },
      { integration: { ok: false, error: "x", verdict: { state: "red", entry: entry(false) } } },
    );
    const t = (d.events[0] as { task: TaskState }).task;
    expect(t.status).toBe("pending");
    expect(t.error).toMatch(/check "unit tests" failed with exit code 1/);
    expect(t.error).toMatch(/not ok 1 - add sums/);
    expect(d.events.some((e) => e.type === "taskIntegrated")).toBe(false);
  });

  it("a result sent back too often fails its attempt instead of looping", () => {
    const model = given(running("a"));
    const d = decide(model, {
      kind: "attemptSettled",
      attempt: {
        taskId: "a",
        attempt: 1,
        result: { outcome: "completed", output: "o" },
        briefChars: 1,
        reportedUsage: true,
        inputHash: "h",
        refusals: [],
        verifyRounds: 8,
      },
      integration: { ok: false, verdict: { state: "unverified" } },
      now: NOW,
      driving: true,
      stopReason: null,
      defaultMaxAttempts: 2,
      completedUnwritten: 0,
      checkpointId: () => "ckp_1",
    });
    expect((d.events[0] as { task: TaskState }).task.error).toMatch(/could not be verified/);
  });

  it("final head: green ends, unverified verifies it, red asks the leader once, then fails naming the check", () => {
    const model = given();
    const base = { kind: "finalVerdict" as const, tree: TREE, fixupAsked: false };
    expect(decide(model, { ...base, verdict: { state: "green", entry: entry(true) } })).toEqual({
      events: [],
      effects: [],
    });
    expect(decide(model, { ...base, verdict: { state: "unverified" } }).effects).toEqual([{ kind: "verifyHead" }]);
    const red = decide(model, { ...base, verdict: { state: "red", entry: entry(false) } });
    expect(red.events).toEqual([{ type: "verifyFixup", tree: TREE }]);
    expect(red.effects[0]).toMatchObject({ kind: "consultFinal", error: expect.stringMatching(/not ok 1 - add sums/) });
    const again = decide(model, { ...base, fixupAsked: true, verdict: { state: "red", entry: entry(false) } });
    expect(again.effects[0]).toMatchObject({
      kind: "finish",
      phase: "failed",
      recovery: { cause: expect.stringMatching(/check "unit tests" failed \(exit code 1\) on the final head/) },
    });
  });
});
