/**
 * The goal run's pure decisions (issue 27, PROTOCOL.md section 6): `decideGoal(state, input) → {events, effects,
 * refusal?}` says what a goal run does next — which step the loop takes (derive criteria, plan a phase, follow the
 * running phase), when a phase boundary hands over the goal edit and queued messages, when and why the goal ends,
 * what a leader turn's result, a paused or missing product and a loop failure are recorded as, and what each
 * `x/goal.*` operation records or why it is refused. Events are what to record (evolve.ts gives them their meaning);
 * effects are what the goal run's collaborators carry out once the events are written (notify the client, consult the
 * leader, launch or follow the phase's product, interrupt what is in flight). Results come back as inputs.
 *
 * Pure: no I/O, no clock, no ports, nothing kept between calls. Run-time facts (is this instance fenced or shut down,
 * does it drive the loop, a new product id) come in with the input. Never changes the state.
 */
import { CRITERION_CHECK_ATTEMPTS, type GoalEndReason } from "../../../protocol/goal.js";
import type { Budget } from "../../../protocol/common.js";
import { validatePlanGraph } from "../dag/graph.js";
import { DomainError, invalidPhase } from "../errors.js";
import type { AcceptanceCriterion, DraftPlan } from "../ports.js";
import { remediationThen } from "../ports.js";
import type { NewGoalEvent } from "./journal.js";
import { STATUS_AFTER_END, TERMINAL_GOAL_STATUSES, type GoalBudget, type GoalState } from "./records.js";
import { checkedGreen, checkErrorAttempts, clip, endReasonNow, failClosedRecovery, phaseBudget } from "./policy.js";
import type { CriterionCheckOutcome } from "./policy.js";

/** What the goal run carries out after the events of a decision were written, in order. */
export type GoalEffect =
  /** Sends a goal notification (PROTOCOL.md section 6). */
  | { kind: "notify"; method: GoalNotice; params: Record<string, unknown> }
  /** A leader turn: derive the acceptance criteria for the current goal. */
  | { kind: "derive" }
  /** A leader turn, then a start: plan the next phase. */
  | { kind: "plan" }
  /** Follow the running phase's product until it settles. */
  | { kind: "follow"; productId: string }
  /** Launch the phase's product (recorded by `phase_started` before). */
  | { kind: "launch"; productId: string; phaseIndex: number; plan: DraftPlan; message: string; budget?: Budget }
  /** End leader turns and waits in flight (pause, stop). */
  | { kind: "interrupt" }
  /** The loop cannot go on: block the goal with `reason` (a plain Error, recorded by `loopFailed`). */
  | { kind: "fail"; reason: string };

type GoalNotice = "x/goal.started" | "x/goal.phaseStarted" | "x/goal.phaseAssessed" | "x/goal.ended";

export interface GoalDecision {
  events: NewGoalEvent[];
  effects: GoalEffect[];
  /** The operation is refused: nothing is recorded, the caller throws it. */
  refusal?: DomainError;
}

/** How a phase's product stood when it paused while the goal ran. */
export interface PausedProduct {
  usedTokens: number;
  elapsedMs: number;
  budget: Budget;
  cause?: string;
  remediation?: string;
}

/** The inputs `decideGoal` understands. */
export type GoalInput =
  /** The loop looks at the persisted state; `live` is false once this instance is fenced or shut down. */
  | { kind: "next"; live: boolean }
  /** The leader derived criteria (already cleaned, at least one) for `goal`. */
  | { kind: "criteriaDerived"; goal: string; criteria: AcceptanceCriterion[]; message: string }
  /** The leader planned phase `phaseIndex` of `goal`; `newProductId` draws the product's id, only when it starts. */
  | {
      kind: "phasePlanned";
      live: boolean;
      phaseIndex: number;
      goal: string;
      planned: { plan: DraftPlan; targets: string[]; message: string };
      newProductId: () => string;
    }
  | { kind: "productPaused"; product: PausedProduct }
  /** A command criterion's check ran to its end on the integrated head of phase `phaseIndex`'s product. */
  | { kind: "criterionChecked"; productId: string; criterionId: string; result: CriterionCheckOutcome }
  /**
   * A command criterion's check could not be run at all on `commit` (the integrated head of phase `phaseIndex`'s
   * product): its runner failed, which says nothing about the criterion.
   */
  | {
      kind: "criterionCheckErrored";
      productId: string;
      criterionId: string;
      phaseIndex: number;
      commit?: string;
      error: string;
    }
  | { kind: "productMissing"; productId: string }
  /** The leader assessed the phase whose product `productId` ended (`passed`: known ids, `before`: at the turn). */
  | {
      kind: "assessed";
      productId: string;
      phaseIndex: number;
      before: string[];
      passed: string[];
      message: string;
      tasks: { taskId: string; status: string }[];
      phaseTokens: number;
      phaseElapsedMs: number;
      productPhase: string;
    }
  | { kind: "loopFailed"; reason: string; live: boolean }
  | { kind: "pause" }
  | {
      kind: "resume";
      driving: boolean;
      closed: boolean;
      additionalBudget?: GoalBudget;
      spent?: { spentTokens: number; spentMs: number };
    }
  | { kind: "stop"; reason?: string }
  | { kind: "edit"; goal: string }
  | { kind: "message"; content: string };

const NOTHING: GoalDecision = { events: [], effects: [] };

/**
 * What to do about `input` given the goal run's current state (read fresh from the journal). Never throws, never
 * changes the state: the caller throws `refusal` when there is one, else appends `events` and carries out `effects`.
 */
export function decideGoal(s: GoalState, input: GoalInput): GoalDecision {
  switch (input.kind) {
    case "next":
      return nextStep(s, input.live);
    case "criteriaDerived":
      return criteriaDecision(s, input);
    case "phasePlanned":
      return phaseStartDecision(s, input);
    case "productPaused":
      return productPausedDecision(s, input.product);
    case "criterionChecked":
      return criterionCheckedDecision(s, input);
    case "criterionCheckErrored":
      return criterionCheckErroredDecision(s, input);
    case "productMissing":
      return productMissingDecision(s, input.productId);
    case "assessed":
      return assessedDecision(s, input);
    case "loopFailed":
      return !input.live || s.status !== "running"
        ? NOTHING
        : { events: [blocked(`The goal loop stopped: ${input.reason}`)], effects: [] };
    case "pause":
      return pauseDecision(s);
    case "resume":
      return resumeDecision(s, input);
    case "stop":
      return stopDecision(s, input.reason);
    case "edit":
      return notTerminal(s, "x/goal.edit", [{ type: "goal_edited", goal: input.goal }]);
    case "message":
      return notTerminal(s, "x/goal.message", [{ type: "message_queued", content: input.content }]);
  }
}

/** True when the persisted status allows starting something now (a phase, a leader turn). */
export function mayStart(s: GoalState, live: boolean): boolean {
  return s.status === "running" && live && s.dropped === 0;
}

function blocked(reason: string): NewGoalEvent {
  return { type: "status", status: "blocked", reason };
}

/** The events and notice of an end: `x/goal.ended` only when the status it leads to is final (PROTOCOL.md §6). */
function endDecision(s: GoalState, reason: GoalEndReason, summary: string): GoalDecision {
  const status = STATUS_AFTER_END[reason];
  const final = status === "completed" || status === "stopped" || status === "failed";
  return {
    events: [{ type: "ended", endReason: reason, summary }],
    effects: final
      ? [{ kind: "notify", method: "x/goal.ended", params: { goalRunId: s.goalRunId, endReason: reason, summary } }]
      : [],
  };
}

/**
 * The loop's next step from the persisted state. A phase boundary on the way: the goal edit and queued messages take
 * effect now, in order, exactly once. Then criteria (again after an edit), then an end, then the next phase.
 */
function nextStep(s: GoalState, live: boolean): GoalDecision {
  if (!mayStart(s, live)) return NOTHING;
  if (s.productId !== undefined) return { events: [], effects: [{ kind: "follow", productId: s.productId }] };
  const events: NewGoalEvent[] = [];
  let goal = s.goal;
  if (s.pendingGoal !== undefined || s.queued.length > 0) {
    goal = s.pendingGoal ?? s.goal;
    events.push({ type: "boundary", goal, consumed: s.queued.length });
  }
  // Criteria the client gave are never derived (a goal edit keeps them).
  if (s.criteria.length === 0 || (!s.criteriaGiven && s.criteriaGoal !== goal)) {
    return { events, effects: [{ kind: "derive" }] };
  }
  const ending = endReasonNow(s);
  if (ending) {
    const end = endDecision(s, ending.reason, ending.summary);
    return { events: [...events, ...end.events], effects: end.effects };
  }
  return { events, effects: [{ kind: "plan" }] };
}

function criteriaDecision(s: GoalState, input: Extract<GoalInput, { kind: "criteriaDerived" }>): GoalDecision {
  if (TERMINAL_GOAL_STATUSES.includes(s.status) || s.goal !== input.goal) return NOTHING;
  const events: NewGoalEvent[] = [
    { type: "criteria_derived", criteria: input.criteria, message: clip(input.message, 20_000) },
  ];
  if (s.criteria.length > 0) return { events, effects: [] };
  const criteria = input.criteria.map((c) => ({ id: c.id, text: c.text }));
  return {
    events,
    effects: [{ kind: "notify", method: "x/goal.started", params: { goalRunId: s.goalRunId, criteria } }],
  };
}

/**
 * Right before a phase starts: the persisted status must still be running and nothing moved on; a phase is started
 * once, never again once its product was recorded. An empty or invalid plan fails the loop.
 */
function phaseStartDecision(s: GoalState, input: Extract<GoalInput, { kind: "phasePlanned" }>): GoalDecision {
  const { phaseIndex, planned } = input;
  if (!mayStart(s, input.live)) return NOTHING;
  if (s.productId !== undefined || s.phaseIndex !== phaseIndex || s.goal !== input.goal) return NOTHING;
  if (s.phases[phaseIndex]?.productId !== undefined) return NOTHING;
  const plan = planned.plan;
  if (plan.tasks.length === 0) return failure(`The leader planned phase ${phaseIndex + 1} without tasks.`);
  const check = validatePlanGraph(plan.instances, plan.tasks);
  if (!check.ok) return failure(`The leader planned an invalid phase ${phaseIndex + 1}: ${check.reason}`);
  const known = new Set(s.criteria.map((c) => c.id));
  const targets = [...new Set(planned.targets.filter((t) => known.has(t)))];
  const productId = input.newProductId();
  const budget = phaseBudget(s);
  return {
    events: [
      { type: "phase_planned", phaseIndex, targets, message: clip(planned.message, 20_000) },
      { type: "phase_started", phaseIndex, productId },
    ],
    effects: [
      { kind: "notify", method: "x/goal.phaseStarted", params: { goalRunId: s.goalRunId, phaseIndex, productId } },
      { kind: "launch", productId, phaseIndex, plan, message: planned.message, ...(budget ? { budget } : {}) },
    ],
  };
}

function failure(reason: string): GoalDecision {
  return { events: [], effects: [{ kind: "fail", reason }] };
}

/**
 * The phase's product paused while the goal runs (its budget tripped, a persistence failure, or a client paused the
 * product itself): a spent budget ends the goal `budget` (budget-limited), anything else blocks it with the product's
 * cause. Either way no phase and no leader turn starts until `x/goal.resume`.
 */
function productPausedDecision(s: GoalState, p: PausedProduct): GoalDecision {
  const cause = p.cause ?? "The phase's product paused.";
  // A configuration error's fix ends "…, then resume." (agent-errors): the goal's reason carries it.
  const fix = p.remediation !== undefined && /then resume\.?\s*$/iu.test(p.remediation) ? p.remediation : undefined;
  const spent =
    (p.budget.maxTotalTokens !== undefined && p.usedTokens >= p.budget.maxTotalTokens) ||
    (p.budget.maxDurationMs !== undefined && p.elapsedMs >= p.budget.maxDurationMs) ||
    /budget/iu.test(cause);
  const phase = s.phaseIndex + 1;
  if (spent) {
    return endDecision(
      s,
      "budget",
      `The budget is spent during phase ${phase}: ${cause} Resume with additionalBudget to continue the phase.`,
    );
  }
  const then =
    fix !== undefined ? remediationThen(fix, "resume the goal to resume it") : "Resume the goal to resume it.";
  return { events: [blocked(`Phase ${phase}'s product paused: ${cause} ${then}`)], effects: [] };
}

/** A phase whose product is gone counts as one that passed nothing (no fabricated progress). */
function productMissingDecision(s: GoalState, productId: string): GoalDecision {
  if (s.productId !== productId || TERMINAL_GOAL_STATUSES.includes(s.status)) return NOTHING;
  const passed = s.criteria.filter((c) => c.passed).map((c) => c.id);
  const phaseIndex = s.phaseIndex;
  const message = `Phase ${phaseIndex + 1}'s product ${productId} was not found (deleted, or never created); it counts as a phase that passed nothing.`;
  return {
    events: [
      {
        type: "phase_assessed",
        phaseIndex,
        passed,
        newlyPassed: [],
        regressed: [],
        phaseTokens: 0,
        phaseElapsedMs: 0,
        productPhase: "missing",
        message,
      },
    ],
    effects: [assessedNotice(s, phaseIndex, passed.length, [], [])],
  };
}

function assessedNotice(
  s: GoalState,
  phaseIndex: number,
  passed: number,
  newlyPassed: string[],
  regressed: string[],
): GoalEffect {
  const params = { goalRunId: s.goalRunId, phaseIndex, passed, total: s.criteria.length, newlyPassed, regressed };
  return { kind: "notify", method: "x/goal.phaseAssessed", params };
}

/** Records the settled tasks and the assessment in one append, unless the phase moved on or the goal ended. */
function assessedDecision(s: GoalState, input: Extract<GoalInput, { kind: "assessed" }>): GoalDecision {
  if (s.productId !== input.productId || TERMINAL_GOAL_STATUSES.includes(s.status)) return NOTHING;
  const { phaseIndex, before } = input;
  const beforeSet = new Set(before);
  // A command criterion is met only when its check passed on this phase's integrated head, whatever the leader said.
  const commands = new Set(s.criteria.filter((c) => c.check !== undefined).map((c) => c.id));
  const after = new Set(input.passed.filter((id) => !commands.has(id)));
  for (const c of s.criteria) if (checkedGreen(c, phaseIndex, input.productId)) after.add(c.id);
  const newlyPassed = [...after].filter((id) => !beforeSet.has(id));
  const regressed = before.filter((id) => !after.has(id));
  return {
    events: [
      ...input.tasks.map((t) => ({ type: "task_settled" as const, phaseIndex, taskId: t.taskId, status: t.status })),
      {
        type: "phase_assessed",
        phaseIndex,
        passed: [...after],
        newlyPassed,
        regressed,
        phaseTokens: input.phaseTokens,
        phaseElapsedMs: input.phaseElapsedMs,
        productPhase: input.productPhase,
        message: clip(input.message, 20_000),
      },
    ],
    effects: [assessedNotice(s, phaseIndex, after.size, newlyPassed, regressed)],
  };
}

/** Records a command criterion's check of the running phase (nothing once the phase moved on or the goal ended). */
function criterionCheckedDecision(s: GoalState, input: Extract<GoalInput, { kind: "criterionChecked" }>): GoalDecision {
  if (s.productId !== input.productId || TERMINAL_GOAL_STATUSES.includes(s.status)) return NOTHING;
  const criterion = s.criteria.find((c) => c.id === input.criterionId);
  if (criterion?.check === undefined) return NOTHING;
  const result = { ...input.result, productId: input.productId };
  return { events: [{ type: "criterion_checked", criterionId: input.criterionId, result }], effects: [] };
}

/**
 * Records that a command criterion's check could not be run (docs/VERIFY.md, Goals): the try is counted on that head,
 * and the `CRITERION_CHECK_ATTEMPTS`th such try blocks a running goal with the error — reported as a check that could
 * not run, never as a criterion that is not met (the phase is not assessed until the check runs to its end).
 */
function criterionCheckErroredDecision(
  s: GoalState,
  input: Extract<GoalInput, { kind: "criterionCheckErrored" }>,
): GoalDecision {
  if (s.productId !== input.productId || TERMINAL_GOAL_STATUSES.includes(s.status)) return NOTHING;
  const criterion = s.criteria.find((c) => c.id === input.criterionId);
  if (criterion?.check === undefined) return NOTHING;
  const { productId, phaseIndex, commit } = input;
  const attempts = checkErrorAttempts(criterion, phaseIndex, productId, commit) + 1;
  const error = clip(input.error, 10_000);
  const events: NewGoalEvent[] = [
    {
      type: "criterion_check_errored",
      criterionId: criterion.id,
      error: { error, attempts, phaseIndex, productId, ...(commit !== undefined ? { commit } : {}) },
    },
  ];
  if (attempts >= CRITERION_CHECK_ATTEMPTS && s.status === "running") {
    events.push(
      blocked(
        `Criterion ${criterion.id}'s check could not be run on phase ${phaseIndex + 1}'s integrated head ` +
          `(${attempts} tries): ${clip(error, 2_000)} This is an error of the check's runner, not a verdict on the ` +
          "criterion; fix its cause, then resume the goal (the check is tried again).",
      ),
    );
  }
  return { events, effects: [] };
}

/** `x/goal.pause`: idempotent on paused; refused in any other status than running. */
function pauseDecision(s: GoalState): GoalDecision {
  if (s.status === "paused") return NOTHING;
  if (s.status !== "running") {
    const refusal = invalidPhase(s.status, ["running", "paused"], {
      subject: `Goal run ${s.goalRunId}`,
      operation: "x/goal.pause",
    });
    return { ...NOTHING, refusal };
  }
  return {
    events: [{ type: "status", status: "paused", reason: "Paused by the client." }],
    effects: [{ kind: "interrupt" }],
  };
}

/**
 * Why `x/goal.resume` is refused, or undefined: a goal run that fails closed, a stopped, completed or failed one, one
 * that runs here already, or any goal run once this instance shut down.
 */
export function resumeRefusal(s: GoalState, run: { driving: boolean; closed: boolean }): DomainError | undefined {
  const failed = failClosedRecovery(s);
  if (failed) {
    return new DomainError(
      "invalid_phase",
      `Goal run ${s.goalRunId} cannot be resumed: ${failed.cause} ${failed.remediation}`,
      { phase: s.status, allowed: [] },
    );
  }
  const status = s.status;
  const resumable =
    status === "paused" ||
    status === "blocked" ||
    status === "budget_limited" ||
    (status === "running" && !run.driving);
  if (resumable && !run.closed) return undefined;
  return invalidPhase(status, ["paused", "blocked", "budget_limited"], {
    subject: `Goal run ${s.goalRunId}`,
    operation: status === "running" ? "x/goal.resume (it is already running)" : "x/goal.resume",
  });
}

/** `x/goal.resume`: records `resumed` with the added budget and what the open phase's product spent so far. */
function resumeDecision(s: GoalState, input: Extract<GoalInput, { kind: "resume" }>): GoalDecision {
  const refusal = resumeRefusal(s, input);
  if (refusal) return { ...NOTHING, refusal };
  const add = input.additionalBudget;
  return {
    events: [{ type: "resumed", ...(add ? { additionalBudget: add } : {}), ...(input.spent ?? {}) }],
    effects: [],
  };
}

/** `x/goal.stop`: ends the goal for good (terminal); idempotent on stopped, refused on another terminal status. */
function stopDecision(s: GoalState, reason: string | undefined): GoalDecision {
  if (s.status === "stopped") return NOTHING;
  const refused = notTerminal(s, "x/goal.stop", []);
  if (refused.refusal) return refused;
  const end = endDecision(s, "stopped", reason ? `Stopped: ${reason}` : "Stopped by the client.");
  return { events: end.events, effects: [...end.effects, { kind: "interrupt" }] };
}

/** `events` unless the goal is terminal (then refused: edits and messages need a goal that can still run). */
function notTerminal(s: GoalState, operation: string, events: NewGoalEvent[]): GoalDecision {
  if (!TERMINAL_GOAL_STATUSES.includes(s.status)) return { events, effects: [] };
  const refusal = invalidPhase(s.status, ["running", "paused", "blocked", "budget_limited"], {
    subject: `Goal run ${s.goalRunId}`,
    operation,
  });
  return { ...NOTHING, refusal };
}
