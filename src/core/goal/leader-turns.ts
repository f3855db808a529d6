/**
 * The goal run's leader channel (PROTOCOL.md section 6): the three leader turns of a goal run — derive the acceptance
 * criteria, plan a phase, assess a phase — asked through the `LeaderPort`, and what a failed turn means. A turn ended
 * by a pause, a stop or a shutdown (its signal aborted) is `LoopInterrupted`: nothing is recorded for it. A failed
 * derive or plan becomes a plain Error the loop blocks the goal with (a configuration error carries its fix); a failed
 * assessment keeps the earlier verdicts. Keeps no state; never records anything (the goal run does).
 */
import { AgentConfigurationError, remediationThen, type AgentDirectory, type LeaderResolver } from "../ports.js";
import type { PhasePlanResult } from "../ports.js";
import type { ProductState } from "../product/records.js";
import { cleanCriteria, knownCriteria, progressSummaryOf } from "./policy.js";
import type { GoalState } from "./records.js";

/** Marks the error of a leader turn or a wait that ended because the goal was paused, stopped or shut down. */
const INTERRUPTED = Symbol("LoopInterrupted");

/** A leader turn or a wait ended because the goal was paused, stopped or shut down: nothing is recorded. */
export function loopInterrupted(what: string): Error {
  return Object.assign(new Error(what), { name: "LoopInterrupted", [INTERRUPTED]: true });
}

export function isLoopInterrupted(err: unknown): boolean {
  return err instanceof Error && INTERRUPTED in err;
}

/** Turns a leader failure into what the loop does with it: nothing when the goal was interrupted, else blocked. */
function leaderFailure(what: string, err: unknown, signal: AbortSignal): Error {
  if (signal.aborted) return loopInterrupted(what);
  if (err instanceof AgentConfigurationError) {
    // Retrying cannot fix it (DESIGN.md "Processes"): the goal is blocked with the fix, no phase is spent on it.
    return new Error(
      `The leader could not ${what}: ${err.message} ${remediationThen(err.remediation, "call x/goal.resume")}`,
    );
  }
  return new Error(`The leader could not ${what}: ${err instanceof Error ? err.message : String(err)}`);
}

export class GoalLeaderTurns {
  constructor(
    private readonly leader: LeaderResolver,
    private readonly agents: AgentDirectory,
  ) {}

  /**
   * Derives the acceptance criteria for `s.goal` (cleaned: usable ids, first of each id). Throws LoopInterrupted when
   * `signal` aborted, else an Error the goal is blocked with (also when the leader derived no usable criterion).
   */
  async derive(
    s: GoalState,
    signal: AbortSignal,
  ): Promise<{ criteria: ReturnType<typeof cleanCriteria>; message: string }> {
    let result;
    try {
      result = await this.leader(undefined).deriveChecklist({
        goalRunId: s.goalRunId,
        goal: s.goal,
        cwd: s.cwd,
        roster: this.agents.list(),
        signal,
      });
    } catch (err) {
      throw leaderFailure("derive acceptance criteria", err, signal);
    }
    const criteria = cleanCriteria(result.criteria);
    if (criteria.length === 0) throw new Error("The leader derived no acceptance criteria from the goal.");
    return { criteria, message: result.message };
  }

  /** Plans phase `s.phaseIndex` of `s.goal`. Throws as `derive` does. */
  async plan(s: GoalState, signal: AbortSignal): Promise<PhasePlanResult> {
    const phaseIndex = s.phaseIndex;
    try {
      return await this.leader(undefined).planPhase({
        goalRunId: s.goalRunId,
        goal: s.goal,
        cwd: s.cwd,
        phaseIndex,
        criteria: s.criteria.map((c) => ({ ...c })),
        progressSummary: progressSummaryOf(s),
        messages: [...s.phaseMessages],
        roster: this.agents.list(),
        signal,
        onText: () => undefined,
      });
    } catch (err) {
      throw leaderFailure(`plan phase ${phaseIndex + 1}`, err, signal);
    }
  }

  /**
   * Asks which criteria pass after the phase's product (state `st`) ended: the known ids named, and the leader's
   * message. A failed assessment keeps `before`, the verdicts when the turn began (the phase passed nothing new).
   * Throws only LoopInterrupted (when `signal` aborted).
   */
  async assess(
    s: GoalState,
    productId: string,
    st: ProductState,
    before: string[],
    signal: AbortSignal,
  ): Promise<{ passed: string[]; message: string }> {
    try {
      const result = await this.leader(undefined).assess({
        goalRunId: s.goalRunId,
        goal: s.goal,
        phaseIndex: s.phaseIndex,
        criteria: s.criteria.map((c) => ({ ...c })),
        plan: st.plan ?? { productId, version: 0, name: "", summary: "", instances: [], tasks: [] },
        tasks: st.tasks.map((t) => ({ ...t })),
        targets: [...s.targets],
        signal,
      });
      return { passed: knownCriteria(s, result.passed), message: result.message };
    } catch (err) {
      if (signal.aborted) throw loopInterrupted("assess");
      const message = `The leader could not assess the phase: ${err instanceof Error ? err.message : String(err)}`;
      return { passed: before, message };
    }
  }
}
