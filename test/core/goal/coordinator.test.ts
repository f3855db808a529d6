/**
 * Behaviour of the goal loop (src/core/goal/coordinator.ts, PROTOCOL.md section 6, issue 5 "Must show") on the
 * in-process fakes: a `GoalService` over the same `MemoryAuthority` and `ProductService` the product harness builds,
 * the `ScriptedLeader` (criteria, phase plans, assessments, a gate on `planPhase`) and the `FakeWorker`.
 *
 * "Nothing happened" is asserted after draining the queues and advancing the FakeClock past every timer the product
 * layer arms (safety checkpoints, lease heartbeats), never after a sleep.
 */
import { describe, expect, it } from "vitest";
import { GoalService } from "../../../src/core/goal/service.js";
import { goalStream } from "../../../src/core/goal/records.js";
import { isDomainError } from "../../../src/core/errors.js";
import type { AssessResult } from "../../../src/core/ports.js";
import {
  FakeClock,
  Gate,
  StaticAgents,
  createHarness,
  drain,
  draftPlan,
  rejectionOf,
  sequentialIds,
  waitUntil,
  type Harness,
  type HarnessOptions,
} from "../../support/fakes.js";
import type { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";

const PROJECT = "proj";
const CWD = "/work/proj";

interface GoalHarness extends Harness {
  goals: GoalService;
  /** `x/goal.start` with the test's project and cwd; returns the goal run id. */
  start(params?: {
    goal?: string;
    budget?: { maxTotalTokens?: number; maxDurationMs?: number; maxPhases?: number };
    noProgressLimit?: number;
  }): Promise<string>;
  /** Waits until the goal's persisted status is `status`. */
  until(goalRunId: string, status: string, timeoutMs?: number): Promise<Awaited<ReturnType<GoalService["status"]>>>;
  /** Goal notifications of one method, in order. */
  goalNotes(method: string): Record<string, unknown>[];
  /** Products launched (one per started phase), from the `x/goal.phaseStarted` notifications. */
  launched(): string[];
  /** Lets every queued step run and moves the FakeClock past every armed timer. */
  settle(): Promise<void>;
  /** The goal's stored events, oldest first. */
  events(goalRunId: string): Promise<{ seq: number; event: Record<string, unknown> }[]>;
}

function goalHarness(opts: HarnessOptions = {}): GoalHarness {
  const h = createHarness({ plan: draftPlan([{ id: "a" }]), ...opts });
  const goals = new GoalService({
    authority: h.authority,
    products: h.service,
    leader: () => h.leader,
    agents: new StaticAgents(),
    notifier: h.notifier,
    clock: h.clock,
    ids: h.ids,
    logger: h.logger,
    defer: (fn) => setImmediate(fn),
  });
  h.ctx.onPhaseChange = (productId) => goals.onProductPhaseChange(productId);
  const g: GoalHarness = {
    ...h,
    goals,
    async start(params = {}) {
      const { goalRunId } = await goals.start({
        goal: params.goal ?? "Build the thing",
        cwd: CWD,
        projectId: PROJECT,
        ...(params.budget ? { budget: params.budget } : {}),
        ...(params.noProgressLimit !== undefined ? { noProgressLimit: params.noProgressLimit } : {}),
      });
      return goalRunId;
    },
    async until(goalRunId, status, timeoutMs = 3_000) {
      let last = await goals.status(goalRunId);
      const deadline = Date.now() + timeoutMs;
      while (last.status !== status) {
        if (Date.now() > deadline)
          throw new Error(`goal ${goalRunId} is ${last.status}, expected ${status}: ${last.progressSummary}`);
        await drain(2);
        last = await goals.status(goalRunId);
      }
      return last;
    },
    goalNotes: (method) => h.notifier.of(method),
    launched: () => h.notifier.of("x/goal.phaseStarted").map((p) => String(p.productId)),
    async settle() {
      await drain();
      h.clock.advance(60 * 60_000);
      await drain();
    },
    async events(goalRunId) {
      const stored = await h.authority.readEvents(PROJECT, goalStream(goalRunId), 0);
      return stored.map((e) => ({ seq: e.seq, event: e.event as Record<string, unknown> }));
    },
  };
  return g;
}

/** Appends an event to the goal's stream as another process would (straight through the authority). */
async function appendAsAnotherProcess(
  authority: MemoryAuthority,
  goalRunId: string,
  event: Record<string, unknown>,
): Promise<void> {
  const stream = goalStream(goalRunId);
  const seq = (await authority.readEvents(PROJECT, stream, 0)).length;
  await authority.appendEvents(PROJECT, stream, [{ v: 1, at: new Date(0).toISOString(), ...event }], seq);
}

const nothing: AssessResult = { passed: [], message: "Nothing passes." };

describe("goal loop: reaching the goal", () => {
  it("derives criteria, runs one product per phase, assesses, and ends achieved with the notifications in order", async () => {
    const h = goalHarness();
    h.leader.criteria = [
      { id: "c1", text: "First." },
      { id: "c2", text: "Second." },
    ];
    h.leader.assessments.push(
      { passed: ["c1"], message: "c1 passes." },
      { passed: ["c1", "c2"], message: "Both pass." },
    );
    const goalRunId = await h.start();
    // x/goal.start answers before anything runs (the loop is deferred).
    expect(h.leader.checklistCalls).toHaveLength(0);
    const done = await h.until(goalRunId, "completed");

    expect(done).toMatchObject({
      status: "completed",
      endReason: "achieved",
      phaseIndex: 1,
      acceptance: { passed: 2, total: 2 },
      noProgressCount: 0,
      queuedMessages: 0,
    });
    expect(h.leader.phaseCalls.map((c) => c.phaseIndex)).toEqual([0, 1]);
    expect(h.leader.phaseCalls[1]?.criteria).toEqual([
      { id: "c1", text: "First.", passed: true },
      { id: "c2", text: "Second.", passed: false },
    ]);
    expect(h.launched()).toHaveLength(2);
    const goalMethods = h.notifier.sent.map((s) => s.method).filter((m) => m.startsWith("x/goal."));
    expect(goalMethods).toEqual([
      "x/goal.started",
      "x/goal.phaseStarted",
      "x/goal.phaseAssessed",
      "x/goal.phaseStarted",
      "x/goal.phaseAssessed",
      "x/goal.statusChanged",
      "x/goal.ended",
    ]);
    expect(h.goalNotes("x/goal.phaseAssessed")).toEqual([
      { goalRunId, phaseIndex: 0, passed: 1, total: 2, newlyPassed: ["c1"], regressed: [] },
      { goalRunId, phaseIndex: 1, passed: 2, total: 2, newlyPassed: ["c2"], regressed: [] },
    ]);
    expect(h.goalNotes("x/goal.statusChanged")).toEqual([{ goalRunId, status: "completed" }]);
    expect(h.goalNotes("x/goal.ended")[0]).toMatchObject({ goalRunId, endReason: "achieved" });
    // Each phase's product notifications come between its phaseStarted and its phaseAssessed.
    const [p1] = h.launched();
    const started = h.notifier.indexOf("x/goal.phaseStarted", (p) => p.productId === p1);
    const assessed = h.notifier.indexOf("x/goal.phaseAssessed", (p) => p.phaseIndex === 0);
    const completed = h.notifier.indexOf("product.completed", (p) => p.productId === p1);
    expect(started).toBeLessThan(completed);
    expect(completed).toBeLessThan(assessed);

    expect(await h.goals.list(PROJECT)).toEqual({
      goals: [{ goalRunId, status: "completed", goal: "Build the thing", phaseIndex: 1 }],
    });
  });

  it("records the phase (with its product id) before the product exists, and the settled tasks before the assessment", async () => {
    const h = goalHarness();
    const seen: string[][] = [];
    let goalRunId = "";
    h.worker.onStart = async () => {
      seen.push((await h.events(goalRunId)).map((e) => String(e.event.type)));
    };
    goalRunId = await h.start();
    await h.until(goalRunId, "completed");
    expect(seen[0]).toEqual(["goal_started", "criteria_derived", "phase_planned", "phase_started"]);
    const types = (await h.events(goalRunId)).map((e) => e.event.type);
    expect(types).toEqual([
      "goal_started",
      "criteria_derived",
      "phase_planned",
      "phase_started",
      "task_settled",
      "phase_assessed",
      "ended",
    ]);
    const phaseStarted = (await h.events(goalRunId)).find((e) => e.event.type === "phase_started");
    expect(phaseStarted?.event.productId).toBe(h.launched()[0]);
  });

  it("rebuilds the same status by replaying the events in a fresh service (reading never writes)", async () => {
    const h = goalHarness();
    const goalRunId = await h.start();
    const live = await h.until(goalRunId, "completed");
    const before = (await h.events(goalRunId)).length;
    const again = goalHarness({ authority: h.authority, clock: h.clock, ids: h.ids });
    expect(await again.goals.status(goalRunId)).toEqual(live);
    expect(await again.goals.list()).toEqual(await h.goals.list());
    expect((await h.events(goalRunId)).length).toBe(before);
  });
});

describe("goal loop: no progress", () => {
  it("ends no_progress (blocked) after exactly noProgressLimit phases that pass nothing, and starts nothing after", async () => {
    const h = goalHarness();
    for (let i = 0; i < 10; i += 1) h.leader.assessments.push(nothing);
    const goalRunId = await h.start({ noProgressLimit: 3 });
    const blocked = await h.until(goalRunId, "blocked");
    expect(blocked).toMatchObject({
      endReason: "no_progress",
      noProgressCount: 3,
      phaseIndex: 2,
      acceptance: { passed: 0, total: 1 },
    });
    await h.settle();
    expect(h.leader.phaseCalls).toHaveLength(3);
    expect(h.leader.assessCalls).toHaveLength(3);
    expect(h.leader.checklistCalls).toHaveLength(1);
    expect(h.launched()).toHaveLength(3);
    expect(new Set(h.worker.executions.map((e) => e.request.productId)).size).toBe(3);
    expect(h.goalNotes("x/goal.ended")).toEqual([]); // blocked can resume: not an end (PROTOCOL.md section 6)
    expect(h.goalNotes("x/goal.statusChanged")).toEqual([{ goalRunId, status: "blocked" }]);

    // Resumable after a message: the count starts again, the message reaches the next phase only.
    expect(await h.goals.message(goalRunId, "Try another way.")).toEqual({ goalRunId, queued: 1 });
    await h.goals.resume(goalRunId);
    await h.until(goalRunId, "blocked");
    await h.settle();
    expect(h.leader.phaseCalls).toHaveLength(6);
    expect(h.leader.phaseCalls.map((c) => c.messages)).toEqual([[], [], [], ["Try another way."], [], []]);
  });

  it("never counts a phase whose assessment failed as progress", async () => {
    const h = goalHarness();
    h.leader.assess = () => Promise.reject(new Error("model unavailable"));
    const goalRunId = await h.start({ noProgressLimit: 2 });
    const blocked = await h.until(goalRunId, "blocked");
    expect(blocked).toMatchObject({ endReason: "no_progress", acceptance: { passed: 0 } });
    expect(blocked.progressSummary).toContain("could not assess");
    expect(h.launched()).toHaveLength(2);
  });
});

describe("goal loop: budgets", () => {
  it("ends budget (budget_limited) when the phase's product trips the budget; resume with more budget keeps the used tokens", async () => {
    const h = goalHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]) });
    h.worker.script("a", { kind: "complete", usage: { inputTokens: 70, outputTokens: 40 } });
    h.worker.script("b", { kind: "complete", usage: { inputTokens: 6, outputTokens: 4 } });
    const goalRunId = await h.start({ budget: { maxTotalTokens: 100 } });
    const limited = await h.until(goalRunId, "budget_limited");
    expect(limited).toMatchObject({ endReason: "budget", usedTokens: 110, acceptance: { passed: 0 } });
    expect(limited.failedReason).toBeUndefined();
    const [productId] = h.launched();
    expect((await h.service.status(productId as string)).phase).toBe("paused");
    expect(h.goalNotes("x/goal.ended")).toEqual([]); // budget_limited can resume: not an end

    await h.settle();
    expect(h.worker.started).toEqual(["a"]);
    expect(h.leader.assessCalls).toHaveLength(0);
    expect(h.leader.phaseCalls).toHaveLength(1);

    expect(await h.goals.resume(goalRunId, { maxTotalTokens: 500 })).toEqual({ goalRunId, status: "running" });
    const done = await h.until(goalRunId, "completed");
    expect(done).toMatchObject({ endReason: "achieved", usedTokens: 120 });
    expect(h.worker.started).toEqual(["a", "b"]);
    expect(h.launched()).toEqual([productId]);
    const product = await h.service.status(productId as string);
    expect(product.budget).toMatchObject({ usedTokens: 120, maxTotalTokens: 610 });
  });

  it("ends max_phases at the phase limit; resume with additionalBudget.maxPhases runs the next phase", async () => {
    const h = goalHarness();
    h.leader.criteria = [
      { id: "c1", text: "First." },
      { id: "c2", text: "Second." },
    ];
    h.leader.assessments.push({ passed: ["c1"], message: "c1 passes." });
    const goalRunId = await h.start({ budget: { maxPhases: 1 } });
    const limited = await h.until(goalRunId, "budget_limited");
    expect(limited).toMatchObject({ endReason: "max_phases", acceptance: { passed: 1, total: 2 } });
    await h.settle();
    expect(h.leader.phaseCalls).toHaveLength(1);

    await h.goals.resume(goalRunId, { maxPhases: 1 });
    expect(await h.until(goalRunId, "completed")).toMatchObject({ endReason: "achieved", phaseIndex: 1 });
    expect(h.launched()).toHaveLength(2);
  });

  it("gives each phase only what is left of the goal's token budget", async () => {
    const h = goalHarness();
    h.leader.criteria = [
      { id: "c1", text: "First." },
      { id: "c2", text: "Second." },
    ];
    h.leader.assessments.push({ passed: ["c1"], message: "c1 passes." });
    h.worker.script("a", { kind: "complete", usage: { inputTokens: 20, outputTokens: 10 } });
    const goalRunId = await h.start({ budget: { maxTotalTokens: 1_000 } });
    await h.until(goalRunId, "completed");
    const [p1, p2] = h.launched();
    expect((await h.service.status(p1 as string)).budget).toMatchObject({ maxTotalTokens: 1_000 });
    expect((await h.service.status(p2 as string)).budget).toMatchObject({ maxTotalTokens: 970 });
    expect((await h.goals.status(goalRunId)).usedTokens).toBe(60);
  });
});

describe("goal loop: pause, resume, stop", () => {
  it("pause during a phase pauses its product; nothing starts while paused, however long; resume finishes it", async () => {
    const h = goalHarness();
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const goalRunId = await h.start();
    await waitUntil(() => h.worker.hasStarted("a"), "task a started");
    const [productId] = h.launched();

    expect(await h.goals.pause(goalRunId)).toEqual({ goalRunId, status: "paused" });
    expect((await h.service.status(productId as string)).phase).toBe("paused");
    expect(await h.goals.pause(goalRunId)).toEqual({ goalRunId, status: "paused" }); // idempotent
    gate.release();
    for (let i = 0; i < 5; i += 1) await h.settle();
    expect(h.leader.checklistCalls).toHaveLength(1);
    expect(h.leader.phaseCalls).toHaveLength(1);
    expect(h.leader.assessCalls).toHaveLength(0);
    expect(h.launched()).toEqual([productId]);
    expect(h.worker.executions).toHaveLength(1);
    expect((await h.goals.status(goalRunId)).status).toBe("paused");
    expect(h.goalNotes("x/goal.statusChanged")).toEqual([{ goalRunId, status: "paused" }]);

    expect(await h.goals.resume(goalRunId)).toEqual({ goalRunId, status: "running" });
    expect(await h.until(goalRunId, "completed")).toMatchObject({ endReason: "achieved" });
    expect(h.launched()).toEqual([productId]);
    expect(h.worker.runsOf("a").map((e) => e.result?.outcome)).toEqual(["cancelled", "completed"]);
  });

  it("pause during a leader turn: the planned phase is dropped and nothing starts until resumed", async () => {
    const h = goalHarness();
    h.leader.phaseGate = new Gate();
    const goalRunId = await h.start();
    await waitUntil(() => h.leader.phaseCalls.length === 1, "planPhase called");
    await h.goals.pause(goalRunId);
    h.leader.phaseGate.release();
    await h.settle();
    expect(h.launched()).toEqual([]);
    expect(h.worker.executions).toHaveLength(0);
    expect(h.leader.phaseCalls).toHaveLength(1);
    expect(h.leader.assessCalls).toHaveLength(0);
    expect((await h.events(goalRunId)).map((e) => e.event.type)).not.toContain("phase_planned");

    await h.goals.resume(goalRunId);
    await h.until(goalRunId, "completed");
    expect(h.leader.phaseCalls).toHaveLength(2);
    expect(h.launched()).toHaveLength(1);
  });

  it("stop is terminal: it pauses the running phase's product, and resume, edit, message and pause are refused", async () => {
    const h = goalHarness();
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const goalRunId = await h.start();
    await waitUntil(() => h.worker.hasStarted("a"), "task a started");
    const [productId] = h.launched();

    expect(await h.goals.stop(goalRunId, "changed my mind")).toEqual({ goalRunId, status: "stopped" });
    expect((await h.service.status(productId as string)).phase).toBe("paused");
    expect(await h.goals.stop(goalRunId)).toEqual({ goalRunId, status: "stopped" }); // idempotent
    const status = await h.goals.status(goalRunId);
    expect(status).toMatchObject({ status: "stopped", endReason: "stopped" });
    expect(h.goalNotes("x/goal.ended")).toEqual([
      { goalRunId, endReason: "stopped", summary: "Stopped: changed my mind" },
    ]);

    for (const attempt of [
      () => h.goals.resume(goalRunId),
      () => h.goals.resume(goalRunId, { maxTotalTokens: 1_000 }),
      () => h.goals.edit(goalRunId, "Another goal"),
      () => h.goals.message(goalRunId, "hello"),
      () => h.goals.pause(goalRunId),
    ]) {
      const err = await rejectionOf(attempt());
      expect(isDomainError(err, "invalid_phase")).toBe(true);
      expect((err as { details: { phase: string } }).details.phase).toBe("stopped");
    }
    gate.release();
    await h.settle();
    expect(h.leader.assessCalls).toHaveLength(0);
    expect(h.leader.phaseCalls).toHaveLength(1);
    expect(h.worker.executions).toHaveLength(1);
    expect((await h.service.status(productId as string)).phase).toBe("paused");
    expect((await h.goals.status(goalRunId)).status).toBe("stopped");
  });

  it("a leader failure blocks the goal with the reason, once; nothing retries behind the user's back", async () => {
    const h = goalHarness({ plan: { kind: "ask", message: "?", questions: [{ question: "What?" }] } });
    const goalRunId = await h.start();
    const blocked = await h.until(goalRunId, "blocked");
    expect(blocked.failedReason).toContain("could not plan phase 1");
    expect(blocked.endReason).toBeUndefined();
    await h.settle();
    expect(h.leader.phaseCalls).toHaveLength(1);
    expect(h.launched()).toEqual([]);
  });

  it("an invalid phase plan blocks the goal before any product is created", async () => {
    const h = goalHarness();
    h.leader.phasePlans.push({ plan: draftPlan([{ id: "a", deps: ["a"] }]), message: "Loop.", targets: ["c1"] });
    const goalRunId = await h.start();
    const blocked = await h.until(goalRunId, "blocked");
    expect(blocked.failedReason).toContain("invalid phase 1");
    expect(h.launched()).toEqual([]);
    expect((await h.service.list(PROJECT)).products).toEqual([]);
  });
});

describe("goal loop: it cannot run away", () => {
  it("re-reads the persisted status before assessing: a pause written by another process stops the loop", async () => {
    const h = goalHarness();
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const goalRunId = await h.start();
    await waitUntil(() => h.worker.hasStarted("a"), "task a started");
    await appendAsAnotherProcess(h.authority, goalRunId, {
      type: "status",
      status: "paused",
      reason: "Paused elsewhere.",
    });

    gate.release();
    const [productId] = h.launched();
    await waitUntil(() => h.notifier.of("product.completed", productId).length === 1, "phase product completed");
    await h.settle();
    expect(h.leader.assessCalls).toHaveLength(0);
    expect(h.leader.phaseCalls).toHaveLength(1);
    expect(h.launched()).toHaveLength(1);
    expect((await h.goals.status(goalRunId)).status).toBe("paused");

    // The driver's state follows the stream: resume appends after the foreign event, no conflict.
    await h.goals.resume(goalRunId);
    expect(await h.until(goalRunId, "completed")).toMatchObject({ endReason: "achieved" });
    expect(h.launched()).toHaveLength(1);
  });

  for (const status of ["paused", "blocked", "budget_limited", "stopped"] as const) {
    it(`re-reads the persisted status right before a phase start: ${status} written elsewhere during planning starts nothing`, async () => {
      const h = goalHarness();
      h.leader.phaseGate = new Gate();
      const goalRunId = await h.start();
      await waitUntil(() => h.leader.phaseCalls.length === 1, "planPhase called");
      await appendAsAnotherProcess(h.authority, goalRunId, { type: "status", status, reason: "Written elsewhere." });
      h.leader.phaseGate.release();
      await h.settle();
      await h.settle();
      expect(h.launched()).toEqual([]);
      expect(h.worker.executions).toHaveLength(0);
      expect(h.leader.phaseCalls).toHaveLength(1);
      expect(h.leader.assessCalls).toHaveLength(0);
      expect((await h.goals.status(goalRunId)).status).toBe(status);
    });
  }

  it("a paused goal whose phase product finished assesses it only after resume", async () => {
    const h = goalHarness();
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const goalRunId = await h.start();
    await waitUntil(() => h.worker.hasStarted("a"), "task a started");
    // The task completes while the goal's pause is being recorded: the product ends, the goal stays paused.
    gate.release();
    await h.goals.pause(goalRunId);
    await h.settle();
    expect(h.leader.assessCalls).toHaveLength(0);
    await h.goals.resume(goalRunId);
    await h.until(goalRunId, "completed");
    expect(h.leader.assessCalls).toHaveLength(1);
  });
});

describe("goal loop: edits and messages at the boundary", () => {
  it("applies the goal edit and the queued messages at the next boundary, in order, exactly once", async () => {
    const h = goalHarness();
    h.leader.criteria = [
      { id: "c1", text: "First." },
      { id: "c2", text: "Second." },
    ];
    h.leader.assessments.push(
      { passed: ["c1"], message: "c1 passes." },
      { passed: ["c1"], message: "Still c1." },
      { passed: ["c1", "c2"], message: "Both pass." },
    );
    const gate1 = new Gate();
    const gate2 = new Gate();
    h.worker.script("a", { kind: "complete", gate: gate1 }, { kind: "complete", gate: gate2 }, { kind: "complete" });
    const goalRunId = await h.start({ goal: "Original goal" });
    await waitUntil(() => h.worker.runsOf("a").length === 1, "phase 1 running");

    await h.goals.edit(goalRunId, "Edited goal");
    await h.goals.edit(goalRunId, "Edited goal, twice");
    const queued = await Promise.all([
      h.goals.message(goalRunId, "m1"),
      h.goals.status(goalRunId),
      h.goals.message(goalRunId, "m2"),
    ]);
    expect(queued[0]).toEqual({ goalRunId, queued: 1 });
    expect(queued[2]).toEqual({ goalRunId, queued: 2 });
    const during = await h.goals.status(goalRunId);
    expect(during).toMatchObject({ goal: "Original goal", originalGoal: "Original goal", queuedMessages: 2 });

    gate1.release();
    await waitUntil(() => h.worker.runsOf("a").length === 2, "phase 2 running");
    // The edited goal is in effect: the criteria were derived again from it and phase 2 was planned with it.
    expect(h.leader.checklistCalls.map((c) => c.goal)).toEqual(["Original goal", "Edited goal, twice"]);
    expect(h.leader.phaseCalls[1]).toMatchObject({ goal: "Edited goal, twice", messages: ["m1", "m2"] });
    expect(h.leader.phaseCalls[1]?.criteria.find((c) => c.id === "c1")?.passed).toBe(true); // kept across re-derivation
    expect(await h.goals.status(goalRunId)).toMatchObject({
      goal: "Edited goal, twice",
      originalGoal: "Original goal",
      queuedMessages: 0,
    });

    await h.goals.message(goalRunId, "m3");
    gate2.release();
    await h.until(goalRunId, "completed");
    expect(h.leader.phaseCalls.map((c) => c.messages)).toEqual([[], ["m1", "m2"], ["m3"]]);
    expect(h.leader.phaseCalls.map((c) => c.goal)).toEqual([
      "Original goal",
      "Edited goal, twice",
      "Edited goal, twice",
    ]);
    expect(h.leader.checklistCalls).toHaveLength(2);
    expect(h.goalNotes("x/goal.started")).toHaveLength(1);

    const events = (await h.events(goalRunId)).map((e) => e.event);
    expect(events.filter((e) => e.type === "boundary").map((e) => ({ goal: e.goal, consumed: e.consumed }))).toEqual([
      { goal: "Edited goal, twice", consumed: 2 },
      { goal: "Edited goal, twice", consumed: 1 },
    ]);
    expect(events.filter((e) => e.type === "message_queued").map((e) => e.content)).toEqual(["m1", "m2", "m3"]);
    expect(events.filter((e) => e.type === "goal_edited").map((e) => e.goal)).toEqual([
      "Edited goal",
      "Edited goal, twice",
    ]);
    // The boundary comes after phase 1's assessment and before phase 2 is planned.
    const types = events.map((e) => e.type);
    expect(types.indexOf("boundary")).toBeGreaterThan(types.indexOf("phase_assessed"));
    expect(types.indexOf("boundary")).toBeLessThan(types.lastIndexOf("phase_planned"));
    expect((await h.goals.status(goalRunId)).progressSummary).toContain('Phase 2 (user messages: "m1", "m2")');
  });
});

describe("goal loop: concurrent reads", () => {
  it("applies each event once when x/goal.status reads while operations write (an authority that answers late)", async () => {
    const { MemoryAuthority } = await import("../../../src/adapters/persistence/memory-authority.js");
    const memory = new MemoryAuthority();
    // Every call is answered one macrotask later, like a host authority over RPC: reads and writes interleave.
    const late = new Proxy(memory, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver) as unknown;
        if (typeof value !== "function") return value;
        return async (...args: unknown[]) => {
          await new Promise((resolve) => setImmediate(resolve));
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const h = goalHarness({ authority: late });
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const goalRunId = await h.start();
    await waitUntil(() => h.worker.hasStarted("a"), "task a started", 5_000);
    let polling = true;
    const pollers = [0, 1, 2].map(async () => {
      while (polling) await h.goals.status(goalRunId);
    });
    for (let i = 1; i <= 5; i += 1) await h.goals.message(goalRunId, `m${i}`);
    polling = false;
    await Promise.all(pollers);
    const status = await h.goals.status(goalRunId);
    expect(status.queuedMessages).toBe(5);
    const replayed = goalHarness({ authority: late, clock: h.clock, ids: h.ids });
    expect(await replayed.goals.status(goalRunId)).toEqual({
      ...status,
      progressSummary: expect.stringContaining(status.progressSummary),
    });
    gate.release();
    await h.until(goalRunId, "completed", 5_000);
    expect(h.leader.phaseCalls.map((c) => c.messages)).toEqual([[]]);
  });
});

describe("goal loop: restart", () => {
  it("a restarted server does not drive the goal until x/goal.resume, which re-attaches without re-running completed tasks", async () => {
    const first = goalHarness({ plan: draftPlan([{ id: "a" }, { id: "b" }], undefined) });
    first.worker.script("b", { kind: "hang" });
    const goalRunId = await first.start();
    await waitUntil(() => first.worker.hasStarted("a") && first.worker.hasStarted("b"), "both tasks started");
    const [productId] = first.launched();
    await waitUntil(() => first.notifier.taskTrail("a").includes("completed@1"), "a completed");
    // "kill -9": the first process writes nothing more (its clock never moves again, its worker hangs).

    const second = goalHarness({
      authority: first.authority,
      clock: new FakeClock(Date.parse("2030-01-01T01:00:00.000Z")),
      ids: first.ids,
    });
    second.leader.criteria = first.leader.criteria;
    const idle = await second.goals.status(goalRunId);
    expect(idle).toMatchObject({ status: "running", productId, phaseIndex: 0 });
    expect(idle.progressSummary).toContain("call x/goal.resume");
    await second.settle();
    expect(second.leader.phaseCalls).toHaveLength(0);
    expect(second.worker.executions).toHaveLength(0);

    expect(await second.goals.resume(goalRunId)).toEqual({ goalRunId, status: "running" });
    expect(await second.until(goalRunId, "completed")).toMatchObject({ endReason: "achieved", phaseIndex: 0 });
    expect(second.worker.started).toEqual(["b"]);
    expect(second.leader.phaseCalls).toHaveLength(0);
    expect(second.launched()).toEqual([]);
    const tasks = await second.tasks(productId as string);
    expect(tasks.map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["a", "completed", 1],
      ["b", "completed", 2],
    ]);
  });

  it("fails closed when a stored goal event does not parse: dropped and recovery in status, resume refused, no phase started twice (issue 10, finding 3)", async () => {
    const first = goalHarness({ plan: draftPlan([{ id: "a" }, { id: "b" }], undefined) });
    first.worker.script("b", { kind: "hang" });
    const goalRunId = await first.start();
    await waitUntil(() => first.worker.hasStarted("a") && first.worker.hasStarted("b"), "both tasks started");
    await waitUntil(() => first.notifier.taskTrail("a").includes("completed@1"), "a completed");
    // "kill -9", and the store comes back with the phase_started event damaged.
    const inner = first.authority;
    const damaged = Object.create(inner) as MemoryAuthority;
    for (const name of [
      "get",
      "put",
      "delete",
      "list",
      "appendEvents",
      "deleteStream",
      "pruneEvents",
      "listProjects",
    ] as const) {
      Object.defineProperty(damaged, name, { value: (inner[name] as (...a: unknown[]) => unknown).bind(inner) });
    }
    Object.defineProperty(damaged, "readEvents", {
      value: async (p: string, stream: string, after: number, limit?: number) =>
        (await inner.readEvents(p, stream, after, limit)).map((e) =>
          (e.event as { type?: string }).type === "phase_started"
            ? { seq: e.seq, event: { v: 1, type: "phase_started" } }
            : e,
        ),
    });
    const second = goalHarness({
      authority: damaged,
      clock: new FakeClock(Date.parse("2030-01-01T01:00:00.000Z")),
      ids: first.ids,
    });
    second.leader.criteria = first.leader.criteria;

    const status = await second.goals.status(goalRunId);
    const error = await rejectionOf(second.goals.resume(goalRunId));
    await second.settle();
    expect({
      dropped: status.dropped,
      recovery: status.recovery,
      code: isDomainError(error) ? error.code : error,
      message: (error as Error).message,
      phasesPlanned: second.leader.phaseCalls.length,
      launched: second.launched(),
      workerRuns: second.worker.executions.length,
    }).toEqual({
      dropped: 1,
      recovery: {
        cause: expect.stringContaining("1 stored event of this goal run failed validation"),
        resumable: false,
        remediation: expect.any(String),
      },
      code: "invalid_phase",
      message: expect.stringContaining("could start a phase twice"),
      phasesPlanned: 0,
      launched: [],
      workerRuns: 0,
    });
  });

  it("a phase whose product is gone counts as a phase that passed nothing, and the loop goes on", async () => {
    const h = goalHarness();
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate }, { kind: "complete" });
    const goalRunId = await h.start();
    await waitUntil(() => h.worker.hasStarted("a"), "task a started");
    await h.goals.pause(goalRunId);
    const [gone] = h.launched();
    expect(await h.service.delete(gone as string)).toEqual({ deleted: true });

    await h.goals.resume(goalRunId);
    const done = await h.until(goalRunId, "completed");
    expect(done).toMatchObject({ endReason: "achieved", phaseIndex: 1 });
    expect(h.goalNotes("x/goal.phaseAssessed")[0]).toMatchObject({ phaseIndex: 0, passed: 0, newlyPassed: [] });
    expect(done.progressSummary).toContain("was not found");
    expect(h.launched()).toHaveLength(2);
  });

  it("unknown goal runs are not_found with kind goal run", async () => {
    const h = goalHarness({ ids: sequentialIds() });
    const err = await rejectionOf(h.goals.status("goal_missing"));
    expect(isDomainError(err, "not_found")).toBe(true);
    expect((err as { details: unknown }).details).toEqual({ kind: "goal run", id: "goal_missing" });
  });
});
