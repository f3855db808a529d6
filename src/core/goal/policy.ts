/**
 * The goal run's rules in plain functions (PROTOCOL.md section 6): when a goal must end and why (achievement first,
 * then stalls, then limits), what is left of its budget for the next phase, when a goal run fails closed, which
 * criteria a leader's answer may name, and the progress summary `x/goal.status` reports and the leader plans with.
 * Pure: no I/O, no clock, no state of its own. decide.ts and the goal run's collaborators use them.
 */
import { CRITERION_CHECK_ATTEMPTS, type GoalEndReason } from "../../../protocol/goal.js";
import type { Budget } from "../../../protocol/common.js";
import type { AcceptanceCriterion } from "../ports.js";
import type { CriterionCheckResult } from "../../../protocol/goal.js";
import type { GoalCriterion, GoalState } from "./records.js";

/** A command criterion's check as the goal run hands it to `decideGoal` (the journal stamps `at`). */
export type CriterionCheckOutcome = Omit<CriterionCheckResult, "at" | "productId">;

/**
 * True when `c` is a command criterion whose last check passed on the integrated head of phase `phaseIndex`'s
 * product `productId` (docs/VERIFY.md, Goals): the only way a command criterion is met.
 */
export function checkedGreen(c: GoalCriterion, phaseIndex: number, productId: string): boolean {
  const last = c.lastCheck;
  return (
    c.check !== undefined &&
    last !== undefined &&
    last.ok &&
    last.phaseIndex === phaseIndex &&
    last.productId === productId
  );
}

/**
 * The command criteria whose check has not run to its end yet on `commit` (undefined: the phase has no integrated
 * head) of phase `phaseIndex`'s product `productId`: after a crash or a pause only these run again.
 */
export function pendingChecks(
  s: GoalState,
  phaseIndex: number,
  productId: string,
  commit: string | undefined,
): GoalCriterion[] {
  return s.criteria.filter((c) => {
    const last = c.lastCheck;
    if (c.check === undefined) return false;
    return !(last && last.phaseIndex === phaseIndex && last.productId === productId && last.commit === commit);
  });
}

/**
 * How many tries of `c`'s check errored (could not be run at all) on `commit` of phase `phaseIndex`'s product
 * `productId` since the count was last cleared; 0 when its recorded error is about another head or there is none.
 */
export function checkErrorAttempts(
  c: GoalCriterion,
  phaseIndex: number,
  productId: string,
  commit: string | undefined,
): number {
  const e = c.checkError;
  if (e === undefined || e.phaseIndex !== phaseIndex || e.productId !== productId || e.commit !== commit) return 0;
  return e.attempts;
}

/** The wait before trying a check again after its `attempts`th errored try: 1 s, doubling, at most 30 s. */
export function checkRetryDelayMs(attempts: number): number {
  return Math.min(30_000, 1_000 * 2 ** Math.max(0, attempts - 1));
}

/** The default of `noProgressLimit` (PROTOCOL.md section 6). */
export const DEFAULT_NO_PROGRESS_LIMIT = 3;

/** `text`, cut to at most `max` characters (ending in `...` when cut). */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 3)}...` : text;
}

/** Criteria with usable ids and texts, first occurrence of each id kept. */
export function cleanCriteria(criteria: readonly AcceptanceCriterion[]): AcceptanceCriterion[] {
  const seen = new Set<string>();
  const out: AcceptanceCriterion[] = [];
  for (const c of criteria) {
    const id = typeof c.id === "string" ? c.id.trim() : "";
    if (id === "" || id.length > 200 || seen.has(id) || /\p{Cc}/u.test(id)) continue;
    seen.add(id);
    out.push({ id, text: clip(String(c.text), 5_000) });
  }
  return out;
}

/** The distinct ids of `ids` that name one of the goal's criteria, in order. */
export function knownCriteria(s: GoalState, ids: readonly string[]): string[] {
  const known = new Set(s.criteria.map((c) => c.id));
  return [...new Set(ids.filter((id) => known.has(id)))];
}

/** The ids of the criteria that pass now. */
export function passedCriteria(s: GoalState): string[] {
  return s.criteria.filter((c) => c.passed).map((c) => c.id);
}

/** Why the loop must end before the next phase, or null. Achievement first, then stalls, then limits. */
export function endReasonNow(s: GoalState): { reason: GoalEndReason; summary: string } | null {
  const passed = s.criteria.filter((c) => c.passed).length;
  const of = `${passed} of ${s.criteria.length} criteria pass`;
  if (s.criteria.length > 0 && passed === s.criteria.length) {
    return {
      reason: "achieved",
      summary: `All ${s.criteria.length} acceptance criteria pass after ${s.phasesStarted} phase(s).`,
    };
  }
  if (s.noProgressCount >= s.noProgressLimit) {
    return {
      reason: "no_progress",
      summary: `${s.noProgressCount} phases in a row passed no new criterion (${of}). Edit the goal or send a message, then resume.`,
    };
  }
  if (s.budget.maxPhases !== undefined && s.phasesStarted >= s.budget.maxPhases) {
    return {
      reason: "max_phases",
      summary: `The limit of ${s.budget.maxPhases} phases is reached (${of}). Resume with additionalBudget.maxPhases to continue.`,
    };
  }
  if (s.budget.maxTotalTokens !== undefined && s.usedTokens >= s.budget.maxTotalTokens) {
    return {
      reason: "budget",
      summary: `The token budget is spent: ${s.usedTokens} of ${s.budget.maxTotalTokens} tokens used (${of}). Resume with additionalBudget to continue.`,
    };
  }
  if (s.budget.maxDurationMs !== undefined && s.elapsedMs >= s.budget.maxDurationMs) {
    return {
      reason: "budget",
      summary: `The time budget is spent: ${s.elapsedMs} of ${s.budget.maxDurationMs} ms used (${of}). Resume with additionalBudget to continue.`,
    };
  }
  return null;
}

/** What is left of the goal's budget, given to the next phase's product (at least 1 of each limit); undefined: none. */
export function phaseBudget(s: GoalState): Budget | undefined {
  const out: Budget = {};
  if (s.budget.maxTotalTokens !== undefined) out.maxTotalTokens = Math.max(1, s.budget.maxTotalTokens - s.usedTokens);
  if (s.budget.maxDurationMs !== undefined) out.maxDurationMs = Math.max(1, s.budget.maxDurationMs - s.elapsedMs);
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * Fail closed (PROTOCOL.md section 6, DESIGN.md guarantee 4): a goal run some of whose stored events did not parse
 * or are missing is never driven again — a lost `phase_started` would start its phase a second time. Returns the
 * recovery `x/goal.status` reports, or undefined when every event was read.
 */
export function failClosedRecovery(s: GoalState): { cause: string; resumable: false; remediation: string } | undefined {
  const dropped = s.dropped;
  if (dropped === 0) return undefined;
  return {
    cause:
      `${dropped} stored ${dropped === 1 ? "event" : "events"} of this goal run failed validation or ` +
      `${dropped === 1 ? "is" : "are"} missing (guarantee 4); driving it again could start a phase twice.`,
    resumable: false,
    remediation: "Restore the state store from a backup, or start a new goal run; this one can still be read.",
  };
}

/** A plain-words summary of what the phases so far did. */
export function progressSummaryOf(s: GoalState): string {
  const passed = s.criteria.filter((c) => c.passed).length;
  const lines = s.phases
    .filter((p) => p !== undefined)
    .map((p) => {
      const said =
        p.messages.length > 0
          ? ` (user messages: ${p.messages.map((m) => JSON.stringify(clip(m, 200))).join(", ")})`
          : "";
      return `Phase ${p.phaseIndex + 1}${said}: ${p.assessment ?? (p.productId ? "running" : "planned")}`;
    });
  const head =
    s.criteria.length === 0 ? "Deriving acceptance criteria." : `${passed} of ${s.criteria.length} criteria pass.`;
  return [head, ...lines, ...failingChecks(s), ...erroredChecks(s)].join("\n");
}

/** One line per command criterion whose check could not be run on its last tries (not a verdict on it). */
function erroredChecks(s: GoalState): string[] {
  return s.criteria.flatMap((c) => {
    const e = c.checkError;
    if (c.check === undefined || e === undefined) return [];
    return [
      `Criterion ${c.id}'s check could not be run on phase ${e.phaseIndex + 1}'s integrated head ` +
        `(${e.attempts} of ${CRITERION_CHECK_ATTEMPTS} tries; an error of the check's runner, not a verdict on the ` +
        `criterion): ${clip(e.error, 1_000)}`,
    ];
  });
}

/** One line per command criterion whose last check failed: the command, how it failed and its output's end. */
function failingChecks(s: GoalState): string[] {
  return s.criteria
    .filter((c) => c.check !== undefined && c.lastCheck !== undefined && !c.lastCheck.ok)
    .map((c) => {
      const last = c.lastCheck as CriterionCheckResult;
      const how = last.timedOut
        ? "timed out"
        : last.exitCode === null
          ? "did not run to an exit code"
          : `failed with exit code ${last.exitCode}`;
      const tail = last.outputTail.trim() === "" ? "(no output)" : clip(last.outputTail.trim().slice(-1_000), 1_000);
      return `Criterion ${c.id}'s check \`${clip(c.check?.run ?? "", 200)}\` ${how} on phase ${last.phaseIndex + 1}'s integrated head:\n${tail}`;
    });
}
