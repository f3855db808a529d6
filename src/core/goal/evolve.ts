/**
 * The goal run's reducer: `evolveGoal(state, event, seq)`, the one meaning of a goal run's journal (issue 27). The
 * live run (journal.ts applies what it appended), loading and refreshing from the authority (journal.ts `refresh`)
 * all go through it, so what an event means can never differ between them; test/core/goal/evolve.test.ts checks that
 * replaying a journal always gives the live state.
 *
 * It changes the given state in place and returns it. It never performs I/O, never reads a clock and never rejects
 * an event: events are validated before they are appended and when they are read back. The caller applies each
 * sequence number once, in order.
 */
import { STATUS_AFTER_END, type GoalEvent, type GoalPhaseRecord, type GoalState } from "./records.js";

type EventOf<T extends GoalEvent["type"]> = Extract<GoalEvent, { type: T }>;
type Handlers = { [T in GoalEvent["type"]]: (s: GoalState, e: EventOf<T>) => void };

/** Applies one event with sequence number `seq` to `s`, in place, and returns `s`. Does NOT validate the event. */
export function evolveGoal(s: GoalState, e: GoalEvent, seq: number): GoalState {
  s.seq = seq;
  s.updatedAt = e.at;
  (HANDLERS[e.type] as (s: GoalState, e: GoalEvent) => void)(s, e);
  return s;
}

/** The record of phase `phaseIndex`, or a fresh one with `targets` when it was never planned. */
function phaseOf(s: GoalState, phaseIndex: number, targets: string[]): GoalPhaseRecord {
  return s.phases[phaseIndex] ?? { phaseIndex, targets, message: "", messages: [] };
}

const HANDLERS: Handlers = {
  goal_started: (s, e) => {
    s.goalRunId = e.goalRunId;
    s.projectId = e.projectId;
    s.cwd = e.cwd;
    if (e.sessionId !== undefined) s.sessionId = e.sessionId;
    s.goal = e.goal;
    s.originalGoal = e.goal;
    s.budget = { ...e.budget };
    s.noProgressLimit = e.noProgressLimit;
    s.status = "running";
    s.startedAt = e.at;
    if (e.criteria !== undefined) {
      s.criteria = e.criteria.map((c) => ({ ...c, ...(c.check ? { check: { ...c.check } } : {}), passed: false }));
      s.criteriaGoal = e.goal;
      s.criteriaGiven = true;
    }
  },
  criteria_derived: (s, e) => {
    // Criteria derived again after a goal edit keep their verdict when their text is unchanged.
    const before = new Map(s.criteria.map((c) => [c.text, c.passed]));
    s.criteria = e.criteria.map((c) => ({
      id: c.id,
      text: c.text,
      ...(c.check ? { check: { ...c.check } } : {}),
      passed: before.get(c.text) ?? false,
    }));
    s.criteriaGoal = s.goal;
  },
  criterion_checked: (s, e) => {
    const c = s.criteria.find((x) => x.id === e.criterionId);
    if (!c) return;
    c.lastCheck = { ...e.result, at: e.at };
    delete c.checkError;
  },
  criterion_check_errored: (s, e) => {
    const c = s.criteria.find((x) => x.id === e.criterionId);
    if (c) c.checkError = { ...e.error, at: e.at };
  },
  goal_edited: (s, e) => {
    s.pendingGoal = e.goal;
  },
  message_queued: (s, e) => {
    s.queued.push(e.content);
  },
  boundary: (s, e) => {
    s.goal = e.goal;
    delete s.pendingGoal;
    const consumed = s.queued.splice(0, e.consumed);
    s.phaseMessages.push(...consumed);
    s.consumedMessages.push(...consumed);
  },
  phase_planned: (s, e) => {
    s.phaseIndex = e.phaseIndex;
    s.targets = e.targets;
    s.phases[e.phaseIndex] = { phaseIndex: e.phaseIndex, targets: e.targets, message: e.message, messages: [] };
  },
  phase_started: (s, e) => {
    s.phaseIndex = e.phaseIndex;
    s.productId = e.productId;
    s.lastProductId = e.productId;
    s.phasesStarted = Math.max(s.phasesStarted, e.phaseIndex + 1);
    const p = phaseOf(s, e.phaseIndex, s.targets);
    p.productId = e.productId;
    // The messages handed over at the boundary are now in effect: the started phase was planned with them.
    p.messages = s.phaseMessages.splice(0);
    s.phases[e.phaseIndex] = p;
  },
  task_settled: () => undefined,
  phase_assessed: (s, e) => {
    const passed = new Set(e.passed);
    for (const c of s.criteria) c.passed = passed.has(c.id);
    s.usedTokens += e.phaseTokens;
    s.elapsedMs += e.phaseElapsedMs;
    s.noProgressCount = e.newlyPassed.length === 0 ? s.noProgressCount + 1 : 0;
    const p = phaseOf(s, e.phaseIndex, []);
    p.assessment = e.message;
    p.productPhase = e.productPhase;
    s.phases[e.phaseIndex] = p;
    delete s.productId;
    s.phaseIndex = e.phaseIndex + 1;
  },
  status: (s, e) => {
    s.status = e.status;
    if (e.reason !== undefined) s.statusReason = e.reason;
    else delete s.statusReason;
  },
  resumed: onResumed,
  ended: (s, e) => {
    s.endReason = e.endReason;
    s.summary = e.summary;
    if (e.failedReason !== undefined) s.failedReason = e.failedReason;
    s.status = STATUS_AFTER_END[e.endReason];
  },
};

/** Added budget counts from what is spent now (spent counters are kept, never reset). */
function onResumed(s: GoalState, e: EventOf<"resumed">): void {
  const add = e.additionalBudget;
  const tokens = Math.max(s.usedTokens, e.spentTokens ?? 0);
  const ms = Math.max(s.elapsedMs, e.spentMs ?? 0);
  if (add?.maxTotalTokens !== undefined) {
    s.budget.maxTotalTokens = Math.max(s.budget.maxTotalTokens ?? tokens, tokens) + add.maxTotalTokens;
  }
  if (add?.maxDurationMs !== undefined) {
    s.budget.maxDurationMs = Math.max(s.budget.maxDurationMs ?? ms, ms) + add.maxDurationMs;
  }
  if (add?.maxPhases !== undefined) {
    s.budget.maxPhases = Math.max(s.budget.maxPhases ?? s.phasesStarted, s.phasesStarted) + add.maxPhases;
  }
  // Resuming a blocked goal (no progress, or a loop error) gives it a fresh run of `noProgressLimit` phases;
  // pausing and resuming does not.
  if (s.status === "blocked") s.noProgressCount = 0;
  // Resuming a blocked goal also gives each command criterion whose check could not run a fresh set of tries (the
  // user resumes once the cause is fixed); resuming a running or paused one keeps the count (bounded across crashes).
  if (s.status === "blocked") for (const c of s.criteria) delete c.checkError;
  s.status = "running";
  delete s.statusReason;
  delete s.endReason;
  delete s.summary;
  delete s.failedReason;
}
