/**
 * The goal run's pure decisions (src/core/goal/decide.ts, issue 27), as "given these events, when this input, then
 * these events and effects": no authority, no leader, no product, no clock — the state is a fold of `evolveGoal` over
 * the given events, and `decideGoal` must neither change it nor do anything but answer.
 */
import { describe, expect, it } from "vitest";
import { decideGoal, mayStart, type GoalDecision, type GoalInput } from "../../../src/core/goal/decide.js";
import { evolveGoal } from "../../../src/core/goal/evolve.js";
import type { NewGoalEvent } from "../../../src/core/goal/journal.js";
import { emptyGoalState, type GoalEvent, type GoalState } from "../../../src/core/goal/records.js";
import type { DraftPlan } from "../../../src/core/ports.js";
import { pendingChecks, progressSummaryOf } from "../../../src/core/goal/policy.js";

const AT = "2030-01-01T00:00:00.000Z";
const START: NewGoalEvent = {
  type: "goal_started",
  goalRunId: "goal_d",
  projectId: "proj",
  goal: "Ship it",
  cwd: "/w",
  budget: {},
  noProgressLimit: 2,
};
const CRITERIA: NewGoalEvent = {
  type: "criteria_derived",
  criteria: [
    { id: "c1", text: "builds" },
    { id: "c2", text: "tested" },
  ],
  message: "two",
};
const PLAN: DraftPlan = {
  name: "Phase",
  summary: "One task.",
  instances: [{ instanceId: "i1", agentId: "coder", role: "coder" }],
  tasks: [{ taskId: "a", title: "a", description: "Do a.", instanceId: "i1", dependsOn: [] }],
};

function given(...events: NewGoalEvent[]): GoalState {
  const s = emptyGoalState();
  [START, ...events].forEach((e, i) => evolveGoal(s, { v: 1, at: AT, ...e } as GoalEvent, i + 1));
  return s;
}

/** `decideGoal`, checking it left the state as it was. */
function when(s: GoalState, input: GoalInput): GoalDecision {
  const before = JSON.stringify(s);
  const decision = decideGoal(s, input);
  expect(JSON.stringify(s), "decideGoal changes nothing").toBe(before);
  return decision;
}

const started = (phaseIndex: number, productId: string): NewGoalEvent[] => [
  { type: "phase_planned", phaseIndex, targets: ["c1"], message: "plan" },
  { type: "phase_started", phaseIndex, productId },
];
const assessed = (phaseIndex: number, passed: string[], newlyPassed: string[]): NewGoalEvent => ({
  type: "phase_assessed",
  phaseIndex,
  passed,
  newlyPassed,
  regressed: [],
  phaseTokens: 100,
  phaseElapsedMs: 1_000,
  productPhase: "completed",
  message: "assessed",
});

describe("decideGoal: the loop's next step", () => {
  it("derives criteria first, then plans, then follows the running phase", () => {
    expect(when(given(), { kind: "next", live: true })).toEqual({ events: [], effects: [{ kind: "derive" }] });
    expect(when(given(CRITERIA), { kind: "next", live: true })).toEqual({ events: [], effects: [{ kind: "plan" }] });
    const running = given(CRITERIA, ...started(0, "prd_1"));
    expect(when(running, { kind: "next", live: true }).effects).toEqual([{ kind: "follow", productId: "prd_1" }]);
  });

  it("starts nothing when paused, fenced or shut down, or when an event was dropped (fail closed)", () => {
    const paused = given(CRITERIA, { type: "status", status: "paused" });
    expect(when(paused, { kind: "next", live: true })).toEqual({ events: [], effects: [] });
    expect(when(given(CRITERIA), { kind: "next", live: false })).toEqual({ events: [], effects: [] });
    const damaged = given(CRITERIA);
    damaged.dropped = 1;
    expect(mayStart(damaged, true)).toBe(false);
    expect(when(damaged, { kind: "next", live: true }).effects).toEqual([]);
  });

  it("hands the goal edit and queued messages over at the boundary, then derives criteria for the new goal", () => {
    const s = given(CRITERIA, { type: "goal_edited", goal: "Ship it well" }, { type: "message_queued", content: "hi" });
    expect(when(s, { kind: "next", live: true })).toEqual({
      events: [{ type: "boundary", goal: "Ship it well", consumed: 1 }],
      effects: [{ kind: "derive" }],
    });
    const queuedOnly = given(CRITERIA, { type: "message_queued", content: "hi" });
    expect(when(queuedOnly, { kind: "next", live: true })).toEqual({
      events: [{ type: "boundary", goal: "Ship it", consumed: 1 }],
      effects: [{ kind: "plan" }],
    });
  });

  it("ends achieved (with x/goal.ended) once every criterion passes", () => {
    const s = given(CRITERIA, ...started(0, "prd_1"), assessed(0, ["c1", "c2"], ["c1", "c2"]));
    const d = when(s, { kind: "next", live: true });
    expect(d.events).toEqual([
      { type: "ended", endReason: "achieved", summary: "All 2 acceptance criteria pass after 1 phase(s)." },
    ]);
    expect(d.effects).toEqual([
      {
        kind: "notify",
        method: "x/goal.ended",
        params: { goalRunId: "goal_d", endReason: "achieved", summary: expect.stringContaining("All 2") },
      },
    ]);
  });

  it("ends no_progress after noProgressLimit phases without a new criterion, without x/goal.ended (resumable)", () => {
    const s = given(CRITERIA, ...started(0, "prd_1"), assessed(0, [], []), ...started(1, "prd_2"), assessed(1, [], []));
    const d = when(s, { kind: "next", live: true });
    expect(d.events.map((e) => e.type === "ended" && e.endReason)).toEqual(["no_progress"]);
    expect(d.effects).toEqual([]);
  });

  it("ends max_phases and budget before a phase that would exceed them", () => {
    const limited = given(CRITERIA, ...started(0, "prd_1"), assessed(0, ["c1"], ["c1"]));
    limited.budget = { maxPhases: 1 };
    expect(when(limited, { kind: "next", live: true }).events).toMatchObject([{ endReason: "max_phases" }]);
    limited.budget = { maxTotalTokens: 100 };
    expect(when(limited, { kind: "next", live: true }).events).toMatchObject([{ endReason: "budget" }]);
  });
});

describe("decideGoal: leader turns and the phase's product", () => {
  it("records derived criteria and announces x/goal.started the first time only", () => {
    const criteria = [{ id: "c1", text: "builds" }];
    const first = when(given(), { kind: "criteriaDerived", goal: "Ship it", criteria, message: "m" });
    expect(first.events).toEqual([{ type: "criteria_derived", criteria, message: "m" }]);
    expect(first.effects).toEqual([
      { kind: "notify", method: "x/goal.started", params: { goalRunId: "goal_d", criteria } },
    ]);
    const again = when(given(CRITERIA), { kind: "criteriaDerived", goal: "Ship it", criteria, message: "m" });
    expect(again.effects).toEqual([]);
    const stale = when(given(), { kind: "criteriaDerived", goal: "Another goal", criteria, message: "m" });
    expect(stale).toEqual({ events: [], effects: [] });
  });

  it("starts a planned phase once: planned + started, then x/goal.phaseStarted and the launch with the budget left", () => {
    const s = given(CRITERIA, ...started(0, "prd_1"), assessed(0, ["c1"], ["c1"]));
    s.budget = { maxTotalTokens: 1_000 };
    let drawn = 0;
    const input: GoalInput = {
      kind: "phasePlanned",
      live: true,
      phaseIndex: 1,
      goal: "Ship it",
      planned: { plan: PLAN, targets: ["c2", "c2", "unknown"], message: "next" },
      newProductId: () => `prd_${++drawn + 1}`,
    };
    const d = when(s, input);
    expect(d.events).toEqual([
      { type: "phase_planned", phaseIndex: 1, targets: ["c2"], message: "next" },
      { type: "phase_started", phaseIndex: 1, productId: "prd_2" },
    ]);
    expect(d.effects).toEqual([
      {
        kind: "notify",
        method: "x/goal.phaseStarted",
        params: { goalRunId: "goal_d", phaseIndex: 1, productId: "prd_2" },
      },
      {
        kind: "launch",
        productId: "prd_2",
        phaseIndex: 1,
        plan: PLAN,
        message: "next",
        budget: { maxTotalTokens: 900 },
      },
    ]);
    // The phase moved on meanwhile (or the goal was paused): nothing starts, and no product id is drawn.
    const moved = given(CRITERIA, ...started(0, "prd_1"));
    expect(when(moved, { ...input, phaseIndex: 0 })).toEqual({ events: [], effects: [] });
    expect(when(s, { ...input, live: false })).toEqual({ events: [], effects: [] });
    expect(drawn).toBe(1);
  });

  it("fails the loop on a phase plan without tasks", () => {
    const d = when(given(CRITERIA), {
      kind: "phasePlanned",
      live: true,
      phaseIndex: 0,
      goal: "Ship it",
      planned: { plan: { ...PLAN, tasks: [] }, targets: [], message: "" },
      newProductId: () => "prd_x",
    });
    expect(d).toEqual({ events: [], effects: [{ kind: "fail", reason: "The leader planned phase 1 without tasks." }] });
  });

  it("records an assessment with the settled tasks, what passed newly and what regressed", () => {
    const s = given(CRITERIA, ...started(0, "prd_1"));
    const d = when(s, {
      kind: "assessed",
      productId: "prd_1",
      phaseIndex: 0,
      before: ["c1"],
      passed: ["c2"],
      message: "ok",
      tasks: [{ taskId: "a", status: "completed" }],
      phaseTokens: 10,
      phaseElapsedMs: 20,
      productPhase: "completed",
    });
    expect(d.events).toEqual([
      { type: "task_settled", phaseIndex: 0, taskId: "a", status: "completed" },
      {
        type: "phase_assessed",
        phaseIndex: 0,
        passed: ["c2"],
        newlyPassed: ["c2"],
        regressed: ["c1"],
        phaseTokens: 10,
        phaseElapsedMs: 20,
        productPhase: "completed",
        message: "ok",
      },
    ]);
    expect(d.effects).toMatchObject([{ method: "x/goal.phaseAssessed", params: { passed: 1, total: 2 } }]);
  });

  it("records a missing product as a phase that passed nothing", () => {
    const s = given(CRITERIA, ...started(0, "prd_1"));
    const d = when(s, { kind: "productMissing", productId: "prd_1" });
    expect(d.events).toMatchObject([
      { type: "phase_assessed", newlyPassed: [], productPhase: "missing", phaseTokens: 0 },
    ]);
    expect(when(s, { kind: "productMissing", productId: "prd_other" })).toEqual({ events: [], effects: [] });
  });

  it("ends budget when the paused product spent its budget, else blocks with the product's cause and fix", () => {
    const s = given(CRITERIA, ...started(0, "prd_1"));
    const spent = when(s, {
      kind: "productPaused",
      product: { usedTokens: 50, elapsedMs: 0, budget: { maxTotalTokens: 50 }, cause: "Tokens ran out." },
    });
    expect(spent.events).toMatchObject([{ type: "ended", endReason: "budget" }]);
    const broken = when(s, {
      kind: "productPaused",
      product: { usedTokens: 0, elapsedMs: 0, budget: {}, cause: "No agent.", remediation: "Install it, then resume." },
    });
    expect(broken.events).toEqual([
      {
        type: "status",
        status: "blocked",
        reason: expect.stringMatching(/^Phase 1's product paused: No agent\. Install it/u),
      },
    ]);
  });
});

describe("decideGoal: x/goal operations", () => {
  it("pause records paused and interrupts; idempotent on paused; refused when blocked", () => {
    expect(when(given(), { kind: "pause" })).toEqual({
      events: [{ type: "status", status: "paused", reason: "Paused by the client." }],
      effects: [{ kind: "interrupt" }],
    });
    expect(when(given({ type: "status", status: "paused" }), { kind: "pause" })).toEqual({ events: [], effects: [] });
    const refused = when(given({ type: "status", status: "blocked" }), { kind: "pause" });
    expect(refused.events).toEqual([]);
    expect(refused.refusal?.code).toBe("invalid_phase");
  });

  it("resume records what is spent; refused when stopped, when it runs here already, or when it fails closed", () => {
    const paused = given({ type: "status", status: "paused" });
    const spent = { spentTokens: 5, spentMs: 6 };
    const d = when(paused, {
      kind: "resume",
      driving: false,
      closed: false,
      additionalBudget: { maxPhases: 1 },
      spent,
    });
    expect(d.events).toEqual([{ type: "resumed", additionalBudget: { maxPhases: 1 }, ...spent }]);
    const stopped = given({ type: "ended", endReason: "stopped", summary: "s" });
    expect(when(stopped, { kind: "resume", driving: false, closed: false }).refusal?.code).toBe("invalid_phase");
    expect(when(given(), { kind: "resume", driving: true, closed: false }).refusal?.message).toMatch(
      /already running/u,
    );
    const damaged = given({ type: "status", status: "paused" });
    damaged.dropped = 2;
    expect(when(damaged, { kind: "resume", driving: false, closed: false }).refusal?.message).toMatch(
      /cannot be resumed: 2 stored events/u,
    );
  });

  it("stop ends the goal for good with x/goal.ended and interrupts; idempotent on stopped", () => {
    const d = when(given(), { kind: "stop", reason: "enough" });
    expect(d.events).toEqual([{ type: "ended", endReason: "stopped", summary: "Stopped: enough" }]);
    expect(d.effects.map((e) => e.kind)).toEqual(["notify", "interrupt"]);
    const stopped = given({ type: "ended", endReason: "stopped", summary: "s" });
    expect(when(stopped, { kind: "stop" })).toEqual({ events: [], effects: [] });
    const done = given({ type: "ended", endReason: "achieved", summary: "s" });
    expect(when(done, { kind: "stop" }).refusal?.code).toBe("invalid_phase");
  });

  it("edit and message record their event unless the goal is terminal", () => {
    expect(when(given(), { kind: "edit", goal: "new" }).events).toEqual([{ type: "goal_edited", goal: "new" }]);
    expect(when(given(), { kind: "message", content: "m" }).events).toEqual([{ type: "message_queued", content: "m" }]);
    const done = given({ type: "ended", endReason: "achieved", summary: "s" });
    expect(when(done, { kind: "edit", goal: "new" }).refusal?.code).toBe("invalid_phase");
    expect(when(done, { kind: "message", content: "m" }).refusal?.code).toBe("invalid_phase");
  });

  it("records a loop failure as blocked only while running and not fenced", () => {
    expect(when(given(), { kind: "loopFailed", reason: "boom", live: true }).events).toEqual([
      { type: "status", status: "blocked", reason: "The goal loop stopped: boom" },
    ]);
    expect(when(given(), { kind: "loopFailed", reason: "boom", live: false }).events).toEqual([]);
    const paused = given({ type: "status", status: "paused" });
    expect(when(paused, { kind: "loopFailed", reason: "boom", live: true }).events).toEqual([]);
  });
});

describe("decideGoal: command acceptance criteria (issue 30, docs/VERIFY.md Goals)", () => {
  const GIVEN: NewGoalEvent = {
    ...START,
    criteria: [
      { id: "c1", text: "builds" },
      { id: "c2", text: "tests pass", check: { run: "npm test", timeoutMs: 60_000 } },
    ],
  } as NewGoalEvent;
  const HEAD = "a".repeat(40);
  const check = (phaseIndex: number, ok: boolean, commit = HEAD) => ({
    ok,
    exitCode: ok ? 0 : 1,
    durationMs: 5,
    outputTail: ok ? "" : "1 failing",
    phaseIndex,
    commit,
  });
  const checked = (phaseIndex: number, productId: string, ok: boolean, commit = HEAD): NewGoalEvent => ({
    type: "criterion_checked",
    criterionId: "c2",
    result: { ...check(phaseIndex, ok, commit), productId },
  });
  const givenCriteria = (...events: NewGoalEvent[]): GoalState => {
    const s = emptyGoalState();
    [GIVEN, ...events].forEach((e, i) => evolveGoal(s, { v: 1, at: AT, ...e } as GoalEvent, i + 1));
    return s;
  };
  const assessInput = (phaseIndex: number, productId: string, passed: string[]): GoalInput => ({
    kind: "assessed",
    productId,
    phaseIndex,
    before: [],
    passed,
    message: "leader says",
    tasks: [],
    phaseTokens: 0,
    phaseElapsedMs: 0,
    productPhase: "completed",
  });

  it("never derives criteria the client gave, even after a goal edit", () => {
    const s = givenCriteria({ type: "goal_edited", goal: "Ship it faster" });
    expect(s.criteriaGiven).toBe(true);
    const next = when(s, { kind: "next", live: true });
    expect(next.effects).toEqual([{ kind: "plan" }]);
    expect(next.events).toEqual([{ type: "boundary", goal: "Ship it faster", consumed: 0 }]);
  });

  it("records a check of the running phase only, and the criterion's last check is what status shows", () => {
    const s = givenCriteria(...started(0, "prd_1"));
    const input: GoalInput = {
      kind: "criterionChecked",
      productId: "prd_1",
      criterionId: "c2",
      result: check(0, false),
    };
    const d = when(s, input);
    expect(d.events).toEqual([
      { type: "criterion_checked", criterionId: "c2", result: { ...check(0, false), productId: "prd_1" } },
    ]);
    expect(when(s, { ...input, productId: "prd_other" })).toEqual({ events: [], effects: [] });
    expect(when(s, { ...input, criterionId: "c1" })).toEqual({ events: [], effects: [] });
    const after = givenCriteria(...started(0, "prd_1"), checked(0, "prd_1", false));
    expect(after.criteria[1]?.lastCheck).toEqual({ ...check(0, false), productId: "prd_1", at: AT });
  });

  it("counts a command criterion met only on a green check of this phase's head, whatever the leader said", () => {
    // Red check: the leader's word for c2 does not count; c1 is the leader's to judge.
    const red = givenCriteria(...started(0, "prd_1"), checked(0, "prd_1", false));
    const d1 = when(red, assessInput(0, "prd_1", ["c1", "c2"]));
    expect(d1.events.at(-1)).toMatchObject({ type: "phase_assessed", passed: ["c1"], newlyPassed: ["c1"] });
    // Green check of an earlier phase does not count for this one (the head moved on).
    const stale = givenCriteria(
      ...started(0, "prd_1"),
      checked(0, "prd_1", true),
      assessed(0, ["c2"], ["c2"]),
      ...started(1, "prd_2"),
    );
    expect(when(stale, assessInput(1, "prd_2", [])).events.at(-1)).toMatchObject({ passed: [], regressed: [] });
    // Green check of this phase: met even though the leader did not name it.
    const green = givenCriteria(...started(0, "prd_1"), checked(0, "prd_1", true));
    expect(when(green, assessInput(0, "prd_1", [])).events.at(-1)).toMatchObject({
      passed: ["c2"],
      newlyPassed: ["c2"],
    });
  });

  it("after a resume, only the checks that did not run to their end on this head run again", () => {
    const s = givenCriteria(...started(0, "prd_1"), checked(0, "prd_1", false));
    expect(pendingChecks(s, 0, "prd_1", HEAD)).toEqual([]);
    expect(pendingChecks(s, 0, "prd_1", "b".repeat(40)).map((c) => c.id)).toEqual(["c2"]);
    expect(pendingChecks(givenCriteria(...started(0, "prd_1")), 0, "prd_1", HEAD).map((c) => c.id)).toEqual(["c2"]);
    // The planner sees why the criterion is not met.
    expect(progressSummaryOf(s)).toContain("Criterion c2's check `npm test` failed with exit code 1");
    expect(progressSummaryOf(s)).toContain("1 failing");
  });

  it("a check whose runner failed is counted per head, never a verdict; the last try blocks, a blocked resume resets", () => {
    const errored = (attempts: number, commit = HEAD): NewGoalEvent => ({
      type: "criterion_check_errored",
      criterionId: "c2",
      error: { error: "mkdir failed", attempts, phaseIndex: 0, productId: "prd_1", commit },
    });
    const input: GoalInput = {
      kind: "criterionCheckErrored",
      productId: "prd_1",
      criterionId: "c2",
      phaseIndex: 0,
      commit: HEAD,
      error: "mkdir failed",
    };
    // First try: recorded as an error (attempt 1), nothing about the criterion's verdict, the goal keeps running.
    const first = when(givenCriteria(...started(0, "prd_1")), input);
    expect(first.events).toEqual([{ ...errored(1) }]);
    // The tries before count on the same head; another head starts again at 1.
    const two = givenCriteria(...started(0, "prd_1"), errored(1), errored(2));
    expect(when(two, input).events).toEqual([errored(3)]);
    expect(when(two, { ...input, commit: "b".repeat(40) }).events).toEqual([errored(1, "b".repeat(40))]);
    // The still-pending check runs again (nothing ran to its end), and the status shows why it did not.
    expect(pendingChecks(two, 0, "prd_1", HEAD).map((c) => c.id)).toEqual(["c2"]);
    expect(two.criteria[1]?.lastCheck).toBeUndefined();
    expect(progressSummaryOf(two)).toContain("Criterion c2's check could not be run on phase 1's integrated head");
    expect(progressSummaryOf(two)).not.toContain("failed with exit code");
    // The fourth try blocks the goal, saying it is the runner's error.
    const three = givenCriteria(...started(0, "prd_1"), errored(1), errored(2), errored(3));
    const last = when(three, input);
    expect(last.events[0]).toEqual(errored(4));
    expect(last.events[1]).toMatchObject({ type: "status", status: "blocked" });
    expect((last.events[1] as { reason: string }).reason).toMatch(/could not be run .*4 tries.*not a verdict/s);
    // A resume of a running goal (after a crash) keeps the count; a resume of a blocked one starts it again.
    const crashed = givenCriteria(...started(0, "prd_1"), errored(1), { type: "resumed" });
    expect(crashed.criteria[1]?.checkError?.attempts).toBe(1);
    const unblocked = givenCriteria(
      ...started(0, "prd_1"),
      ...[1, 2, 3, 4].map((n) => errored(n)),
      { type: "status", status: "blocked", reason: "x" },
      { type: "resumed" },
    );
    expect(unblocked.criteria[1]?.checkError).toBeUndefined();
    // A check that ran to its end clears the error.
    const ran = givenCriteria(...started(0, "prd_1"), errored(1), checked(0, "prd_1", false));
    expect(ran.criteria[1]?.checkError).toBeUndefined();
  });
});
