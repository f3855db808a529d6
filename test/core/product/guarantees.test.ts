/**
 * The durability guarantees of DESIGN.md that issue 4 item 5 asks to prove, one `describe` per guarantee, on the
 * in-process fakes. A "restart" is a second ProductService (its own owner id, its clock past the first one's lease)
 * over the same MemoryAuthority. Same-process behaviour is in the other files of this folder; this file adds the
 * cases that cross a restart, a second writer or a tampered store.
 */
import { describe, expect, it } from "vitest";
import {
  FakeClock,
  Gate,
  createHarness,
  draftPlan,
  drain,
  rejectionOf,
  waitUntil,
  type Harness,
} from "../../support/fakes.js";
import type { DraftPlan } from "../../../src/core/ports.js";
import { isDomainError } from "../../../src/core/errors.js";
import {
  LeaseRecord,
  ProductEvent,
  ProductHeaderRecord,
  ProductStateSchema,
  productStream,
} from "../../../src/core/product/records.js";
import { ProductStore } from "../../../src/core/product/store.js";

const T0 = Date.parse("2030-01-01T00:00:00.000Z");
const AT = "2030-01-01T00:00:00.000Z";
const CHAIN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }, { id: "c", deps: ["b"] }]);

/** One "process": its own owner id and clock (a later process's clock is past every earlier lease). */
function processOf(owner: string, plan: DraftPlan, shared?: Harness, aheadMs = 60_000): Harness {
  return createHarness({
    plan,
    ...(shared ? { authority: shared.authority, ids: shared.ids } : {}),
    clock: new FakeClock(shared ? T0 + aheadMs : T0),
    options: { ownerId: owner, leaseTtlMs: 3_000, leaseRenewMs: 1_000 },
  });
}

async function streamOf(h: Harness, productId: string) {
  return h.authority.readEvents("proj", productStream(productId), 0);
}

async function append(h: Harness, productId: string, events: object[]) {
  const seq = (await streamOf(h, productId)).length;
  await h.authority.appendEvents("proj", productStream(productId), events, seq);
}

// ---------------------------------------------------------------------------------------------------------------

describe("guarantee 2: a persistence failure is a barrier", () => {
  it("a failed write of the tasks about to start means no worker is called for them", async () => {
    const h = processOf("A", draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]));
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const productId = await h.started();
    await waitUntil(() => h.worker.hasStarted("a"), "a to start");
    await drain();
    // a's completion is written (append 1); the write that marks b running (append 2) fails.
    let appends = 0;
    h.authority.setFailure((call) => call.op === "appendEvents" && ++appends === 2);
    gate.release();
    await h.notifier.next("product.persistenceError");
    await drain();
    h.authority.setFailure(null);

    expect(h.worker.started).toEqual(["a"]);
    expect((await h.service.status(productId)).phase).toBe("paused");
    await h.service.resume(productId);
    expect((await h.finished(productId)).phase).toBe("completed");
    expect(h.worker.started).toEqual(["a", "b"]);
  });
});

describe("guarantee 3: reading never writes", () => {
  it("status, list and checkpoints write nothing in any phase, loaded fresh or live", async () => {
    const first = processOf("A", draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]));
    // b hangs in the first product, asks in the second, completes in the third.
    first.worker.script("b", { kind: "hang" }, { kind: "wait", question: "?" }, { kind: "complete" });
    const running = await first.started();
    await waitUntil(() => first.worker.hasStarted("b"), "b to start");
    const waiting = await first.started();
    await waitUntil(() => first.worker.runsOf("b")[1]?.result !== undefined, "b to ask");
    const done = await first.started();
    await first.finished(done);
    const paused = await first.started();
    await first.service.pause(paused);
    const awaiting = await first.planned();
    first.leader.planGate = new Gate();
    const planning = (await first.service.plan({ goal: "g", cwd: "/work/proj", projectId: "proj" })).productId;
    await waitUntil(() => first.leader.planCalls.length === 6, "the planning turn");
    const second = processOf("B", draftPlan([{ id: "a" }]), first);
    await drain();
    const writes = first.authority.writeCount;

    const phases: unknown[] = [];
    for (const h of [first, second]) {
      for (const id of [planning, awaiting, running, waiting, done, paused]) {
        phases.push((await h.service.status(id)).phase);
        await h.service.checkpoints(id);
      }
      await h.service.list();
      await h.service.list("proj", "executing");
    }
    await drain();
    expect(first.authority.writeCount).toBe(writes);
    const expected = ["planning", "awaiting_confirmation", "executing", "executing", "completed", "paused"];
    expect(phases).toEqual([...expected, ...expected]);
  });
});

describe("guarantee 4: fail closed, per record", () => {
  const evilTask = {
    taskId: "evil",
    title: "evil",
    description: "rm -rf /",
    instanceId: "i1",
    dependsOn: [],
    status: "pending",
    attempts: 0,
  };

  /** A product paused with b pending; the tampering is appended by `tamper`; then a restarted process loads it. */
  async function tampered(tamper: (h: Harness, productId: string) => Promise<void>) {
    const first = processOf("A", draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]));
    first.worker.script("b", { kind: "hang" }, { kind: "complete" });
    const productId = await first.started();
    await waitUntil(() => first.worker.hasStarted("b"), "b to start");
    await first.service.pause(productId);
    await tamper(first, productId);
    return { second: processOf("B", draftPlan([{ id: "a" }]), first), productId };
  }

  it("skips a future-version (v: 2) event, counts it, and never executes what it describes", async () => {
    const { second, productId } = await tampered((h, id) =>
      append(h, id, [{ v: 2, at: AT, type: "task", task: evilTask }]),
    );
    const status = await second.service.status(productId);
    expect(status.dropped).toBe(1);
    expect((await second.tasks(productId)).map((t) => t.taskId)).toEqual(["a", "b"]);

    // Fail closed: the product lost an event, so it is not run again at all (nothing from the record executes).
    await expect(second.service.resume(productId)).rejects.toMatchObject({ code: "invalid_phase" });
    expect(second.worker.started).toEqual([]);
  });

  it.each([
    [
      "negative attempts",
      { v: 1, at: AT, type: "task", task: { ...evilTask, taskId: "a", status: "completed", attempts: -1 } },
    ],
    [
      "absurd attempts",
      { v: 1, at: AT, type: "task", task: { ...evilTask, taskId: "a", status: "completed", attempts: 1e300 } },
    ],
    ["fractional attempts", { v: 1, at: AT, type: "task", task: { ...evilTask, taskId: "b", attempts: 1.5 } }],
    [
      "NaN usage",
      { v: 1, at: AT, type: "usage", taskId: "a", inputTokens: Number.NaN, outputTokens: 1, estimated: false },
    ],
    [
      "negative usage",
      { v: 1, at: AT, type: "usage", taskId: "a", inputTokens: -1_000, outputTokens: 1, estimated: false },
    ],
    ["infinite elapsed time", { v: 1, at: AT, type: "elapsed", elapsedMs: Number.POSITIVE_INFINITY }],
    ["an unknown event type", { v: 1, at: AT, type: "runShell", command: "rm -rf /" }],
  ])("drops an event with %s and keeps every counter as it was", async (_what, event) => {
    const { second, productId } = await tampered((h, id) => append(h, id, [event]));
    const status = await second.service.status(productId);

    expect(status.dropped).toBe(1);
    expect((await second.tasks(productId)).map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["a", "completed", 1],
      ["b", "pending", 1],
    ]);
    const budget = status.budget as { usedTokens: number; elapsedMs: number };
    expect(Number.isSafeInteger(budget.usedTokens) && budget.usedTokens >= 0).toBe(true);
    expect(Number.isSafeInteger(budget.elapsedMs) && budget.elapsedMs >= 0).toBe(true);
  });

  it("skips a future-version snapshot, counts it, and rebuilds the state from the events", async () => {
    const { second, productId } = await tampered(async (h, id) => {
      const { model } = await new ProductStore(h.authority, 20).load(id);
      const current = await h.authority.get("proj", "snapshot", id);
      const evil = { v: 2, state: { ...model.state, tasks: [evilTask] } };
      await h.authority.put("proj", "snapshot", id, evil, current ? current.revision : null);
    });
    const status = await second.service.status(productId);

    expect(status.dropped).toBe(1);
    expect((await second.tasks(productId)).map((t) => [t.taskId, t.status])).toEqual([
      ["a", "completed"],
      ["b", "pending"],
    ]);
  });

  it("rejects negative or absurd counters and future versions in every record schema", () => {
    const task = { ...evilTask, attempts: 0 };
    expect(ProductEvent.safeParse({ v: 1, at: AT, type: "task", task }).success).toBe(true);
    for (const attempts of [-1, 1e300, 2 ** 53, 0.5, Number.NaN]) {
      expect(ProductEvent.safeParse({ v: 1, at: AT, type: "task", task: { ...task, attempts } }).success).toBe(false);
    }
    expect(ProductEvent.safeParse({ v: 2, at: AT, type: "task", task }).success).toBe(false);
    expect(ProductEvent.safeParse({ v: 1, at: AT, type: "task", task, inputHash: "x".repeat(10_000) }).success).toBe(
      false,
    );
    const state = {
      v: 1,
      seq: 3,
      productId: "p",
      projectId: "proj",
      name: "n",
      goal: "g",
      cwd: "/w",
      phase: "paused",
      tasks: [],
      dialogue: [],
      budget: {},
      usage: { inputTokens: 1, outputTokens: 1, estimatedTokens: 0, elapsedMs: 5 },
      budgetWarned: false,
      checkpoints: [],
      createdAt: AT,
      updatedAt: AT,
    };
    expect(ProductStateSchema.safeParse(state).success).toBe(true);
    expect(ProductStateSchema.safeParse({ ...state, usage: { ...state.usage, inputTokens: -5 } }).success).toBe(false);
    expect(ProductStateSchema.safeParse({ ...state, seq: 1e300 }).success).toBe(false);
    expect(ProductStateSchema.safeParse({ ...state, v: 2 }).success).toBe(false);
    const progress = { total: 1, completed: 0, running: 0, failed: 0, pending: -1 };
    const header = {
      v: 1,
      productId: "p",
      projectId: "proj",
      name: "n",
      phase: "paused",
      progress,
      createdAt: AT,
      updatedAt: AT,
    };
    expect(ProductHeaderRecord.safeParse(header).success).toBe(false);
    expect(LeaseRecord.safeParse({ v: 1, owner: "A", expiresAt: AT }).success).toBe(true);
    expect(LeaseRecord.safeParse({ v: 2, owner: "A", expiresAt: AT }).success).toBe(false);
    expect(LeaseRecord.safeParse({ v: 1, owner: "A", expiresAt: "soon" }).success).toBe(false);
  });
});

describe("guarantee 5: terminal is sticky, someone else's pause is kept", () => {
  it("a process holding a stale view of a completed product writes nothing over it", async () => {
    const first = processOf("A", CHAIN);
    first.worker.script("b", { kind: "hang" }, { kind: "complete" });
    const productId = await first.started();
    await waitUntil(() => first.worker.hasStarted("b"), "b to start");
    await first.service.pause(productId);
    const stale = processOf("S", CHAIN, first);
    expect((await stale.service.status(productId)).phase).toBe("paused");
    await first.service.resume(productId);
    await first.finished(productId);
    const stream = await streamOf(first, productId);

    for (const op of [
      () => stale.service.resume(productId),
      () => stale.service.pause(productId),
      () => stale.service.cancel(productId),
      () => stale.service.mutate(productId, [{ op: "removeTask", taskId: "c" }]),
    ]) {
      expect(isDomainError(await rejectionOf(op()), "invalid_phase")).toBe(true);
    }
    expect(await streamOf(first, productId)).toEqual(stream);
    expect((await new ProductStore(first.authority, 20).load(productId)).model.state.phase).toBe("completed");
  });

  it("a cancel by another process is not overwritten by the old owner's late result", async () => {
    const first = processOf("A", CHAIN);
    const gate = new Gate();
    first.worker.script("b", { kind: "complete", gate });
    const productId = await first.started();
    await waitUntil(() => first.worker.hasStarted("b"), "b to start");
    await drain();
    const other = processOf("B", CHAIN, first);
    await other.service.cancel(productId);

    gate.release();
    await drain();
    const { model } = await new ProductStore(first.authority, 20).load(productId);
    expect(model.state.phase).toBe("cancelled");
    expect(model.state.tasks.map((t) => t.status)).toEqual(["completed", "cancelled", "cancelled"]);
    expect(first.worker.started).toEqual(["a", "b"]);
    expect((await first.service.status(productId)).phase).toBe("cancelled");
  });

  it("a pause written by another process is kept: the running owner's next write is refused and it stops", async () => {
    const first = processOf("A", CHAIN);
    const gate = new Gate();
    first.worker.script("b", { kind: "complete", gate });
    const productId = await first.started();
    await waitUntil(() => first.worker.hasStarted("b"), "b to start");
    await drain();
    const other = processOf("B", CHAIN, first);
    await other.service.pause(productId);
    const stream = await streamOf(first, productId);

    gate.release();
    await drain();
    expect(await streamOf(first, productId)).toEqual(stream);
    expect(first.worker.started).toEqual(["a", "b"]);
    expect((await new ProductStore(first.authority, 20).load(productId)).model.state.phase).toBe("paused");
    await other.service.resume(productId);
    expect((await other.finished(productId)).phase).toBe("completed");
    expect(other.worker.started).toEqual(["b", "c"]);
  });
});

describe("guarantee 7: at-most-once for finished work, bound by input hash", () => {
  /** a and b complete; c hangs; the process "dies". */
  async function twoDone() {
    const first = processOf("A", CHAIN);
    first.worker.script("c", { kind: "hang" });
    const productId = await first.started();
    await waitUntil(() => first.worker.hasStarted("c"), "c to start");
    await drain();
    return { first, productId };
  }

  it("records a hash of each completed task's input with its completion, never on the wire", async () => {
    const { first, productId } = await twoDone();
    const completions = (await streamOf(first, productId))
      .map((e) => e.event as { type: string; task?: { taskId: string; status: string }; inputHash?: string })
      .filter((e) => e.type === "task" && e.task?.status === "completed");

    expect(completions.map((e) => [e.task?.taskId, e.inputHash?.slice(0, 4)])).toEqual([
      ["a", "ti1:"],
      ["b", "ti1:"],
    ]);
    const { model } = await new ProductStore(first.authority, 20).load(productId);
    expect(Object.keys(model.state.inputHashes ?? {})).toEqual(["a", "b"]);
    for (const t of await first.tasks(productId)) expect(t).not.toHaveProperty("inputHash");
  });

  it("a running task goes back to pending with an interruption note, its attempt counted; finished work is kept", async () => {
    const { first, productId } = await twoDone();
    const second = processOf("B", CHAIN, first);
    await second.service.resume(productId);
    await second.finished(productId);

    const c = (await second.tasks(productId)).find((t) => t.taskId === "c");
    expect(c).toMatchObject({ status: "completed", attempts: 2 });
    expect(second.worker.started).toEqual(["c"]);
    expect(second.worker.runsOf("c")[0]?.attempt).toBe(2);
  });

  it("re-runs a completed task whose description changed since it completed, and what consumed its result", async () => {
    const { first, productId } = await twoDone();
    const plan = (await first.service.status(productId)).plan as { tasks: { taskId: string; description: string }[] };
    const edited = {
      ...plan,
      tasks: plan.tasks.map((t) => (t.taskId === "a" ? { ...t, description: "Do a better." } : t)),
    };
    await append(first, productId, [{ v: 1, at: AT, type: "mutated", mutations: [], by: "user", plan: edited }]);
    const second = processOf("B", CHAIN, first);
    await second.service.resume(productId);
    const reset = await second.tasks(productId);

    expect(reset.map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["a", "pending", 1],
      ["b", "pending", 1],
      ["c", "pending", 1],
    ]);
    expect(reset[0]?.interruption).toContain("Its input changed since it completed");
    expect(reset[1]?.interruption).toBe("Task a it depends on will run again, so this task will run again too.");
    expect(reset[2]?.interruption).toContain("shut down");
    for (const t of reset) expect(t).not.toHaveProperty("output");
    await second.finished(productId);
    expect(second.worker.started).toEqual(["a", "b", "c"]);
    expect(second.worker.runsOf("a")[0]?.request.task.description).toBe("Do a better.");
  });

  it("re-runs a completed task whose dependency's output changed since it completed (a replayed dependency)", async () => {
    const { first, productId } = await twoDone();
    const a = (await first.tasks(productId)).find((t) => t.taskId === "a");
    await append(first, productId, [{ v: 1, at: AT, type: "task", task: { ...a, output: "a different result" } }]);
    const second = processOf("B", CHAIN, first);
    await second.service.resume(productId);
    await second.finished(productId);

    expect(second.worker.started).toEqual(["b", "c"]);
    expect(second.worker.runsOf("b")[0]?.request.dependencyOutputs).toEqual([
      { taskId: "a", title: "a", output: "a different result" },
    ]);
  });
});

describe("guarantee 8: waiting is not failing, across a restart", () => {
  it("keeps the asking task waiting and its dependents pending after a restart and a resume", async () => {
    const first = processOf("A", CHAIN);
    first.worker.script("b", { kind: "wait", question: "Which database?" }, { kind: "complete" });
    const productId = await first.started();
    await waitUntil(() => first.worker.runsOf("b")[0]?.result !== undefined, "b to ask");
    await drain();
    const second = processOf("B", CHAIN, first);
    await second.service.resume(productId);
    await drain();

    expect((await second.tasks(productId)).map((t) => [t.taskId, t.status])).toEqual([
      ["a", "completed"],
      ["b", "waiting"],
      ["c", "pending"],
    ]);
    const status = await second.service.status(productId);
    expect(status.phase).toBe("executing");
    expect(status.recovery).toMatchObject({ cause: expect.stringContaining("Which database?"), resumable: true });
    expect(second.worker.executions).toEqual([]);
    expect(second.notifier.of("product.completed")).toEqual([]);

    await second.service.message(productId, "PostgreSQL");
    expect((await second.finished(productId)).phase).toBe("completed");
    expect(second.worker.started).toEqual(["b", "c"]);
  });
});

describe("guarantee 9: resume may add budget, spent counters are kept", () => {
  it("after a restart, resume with additionalBudget keeps the used tokens and raises the limit on top of them", async () => {
    const first = processOf("A", draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]));
    first.worker.script("a", { kind: "complete", usage: { inputTokens: 90, outputTokens: 30 } });
    const { productId } = await first.service.plan({
      goal: "g",
      cwd: "/work/proj",
      projectId: "proj",
      budget: { maxTotalTokens: 100 },
    });
    await first.notifier.next("product.planReady");
    await first.service.confirm(productId, {});
    await first.notifier.next("product.budgetExceeded");
    await drain();
    const second = processOf("B", draftPlan([{ id: "a" }]), first);
    const before = (await second.service.status(productId)).budget as Record<string, number>;

    await second.service.resume(productId, { maxTotalTokens: 500 });
    const after = (await second.service.status(productId)).budget as Record<string, number>;
    expect(before).toMatchObject({ usedTokens: 120, inputTokens: 90, outputTokens: 30, maxTotalTokens: 100 });
    expect(after).toMatchObject({ usedTokens: 120, inputTokens: 90, outputTokens: 30, maxTotalTokens: 620 });
    expect((await second.finished(productId)).phase).toBe("completed");
    expect(second.worker.started).toEqual(["b"]);
  });
});

describe("guarantee 10: recovery explains cause and remedy in plain words", () => {
  const sentence = /^[A-Z0-9].*\.$/s;

  it.each([
    [
      "paused by the client",
      async () => {
        const h = processOf("A", CHAIN);
        h.worker.script("a", { kind: "hang" });
        const id = await h.started();
        await waitUntil(() => h.worker.hasStarted("a"));
        await h.service.pause(id);
        return { h, id };
      },
      /paused by the client/,
      /product\.resume/,
    ],
    [
      "a persistence failure",
      async () => {
        const h = processOf("A", CHAIN);
        const gate = new Gate();
        h.worker.script("a", { kind: "complete", gate });
        const id = await h.started();
        await waitUntil(() => h.worker.hasStarted("a"));
        await drain();
        h.authority.failNext("appendEvents");
        gate.release();
        await h.notifier.next("product.persistenceError");
        return { h, id };
      },
      /run-state authority failed a write/,
      /Check the state store.*product\.resume/,
    ],
    [
      "a failed run",
      async () => {
        const h = processOf("A", CHAIN);
        h.worker.script("a", { kind: "fail", error: "compiler exploded" });
        const id = await h.started();
        await h.finished(id);
        return { h, id };
      },
      /a failed/,
      /product\.replayTask.*product\.rollback/,
    ],
    [
      "a server that stopped",
      async () => {
        const first = processOf("A", CHAIN);
        first.worker.script("a", { kind: "hang" });
        const id = await first.started();
        await waitUntil(() => first.worker.hasStarted("a"));
        await drain();
        return { h: processOf("B", CHAIN, first), id };
      },
      /No process is driving this product/,
      /product\.resume/,
    ],
  ])("after %s", async (_what, setup, cause, remedy) => {
    const { h, id } = await setup();
    const recovery = (await h.service.status(id)).recovery as {
      cause: string;
      remediation: string;
      resumable: boolean;
    };

    expect(recovery.cause).toMatch(sentence);
    expect(recovery.cause).toMatch(cause);
    expect(recovery.remediation).toMatch(sentence);
    expect(recovery.remediation).toMatch(remedy);
  });
});
