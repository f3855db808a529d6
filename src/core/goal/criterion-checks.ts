/**
 * Command acceptance criteria of a goal run (docs/VERIFY.md, Goals; PROTOCOL.md section 6): runs a criterion's check
 * on the integrated head of a phase's product — its integration branch `acp/<productId>` as the phase left it — in a
 * verify worktree of the goal run through the same `VerifyPort` (and so the same watchdog, timeout and bounded
 * output) as a product's `verify` commands; never in the user's checkout, never in a worker's worktree.
 *
 * Decides nothing about what a result means (decide.ts counts a command criterion met only on a green check of the
 * phase it belongs to) and records nothing (the goal run does, one `criterion_checked` event per check that ran to
 * its end). Keeps no state. Imports no I/O: the checks run behind the port.
 */
import { DEFAULT_CHECK_TIMEOUT_MS } from "../../../protocol/verify.js";
import type { CriterionCheck } from "../../../protocol/goal.js";
import type { Clock } from "../ports.js";
import type { ProductState } from "../product/records.js";
import type { VerifyPort } from "../workspace/verify-port.js";
import { loopInterrupted } from "./leader-turns.js";
import type { CriterionCheckOutcome } from "./policy.js";

/** Where a phase's checks run: the integrated head, or why the phase has none. */
export type PhaseHead = { cwd: string; commit: string } | { cwd: string; reason: string };

/** The integrated head of a phase's product (state `st`), or why there is none (it did not run isolated). */
export function phaseHead(st: Pick<ProductState, "cwd" | "isolation" | "integration">): PhaseHead {
  const head = st.integration?.head;
  if (st.isolation === "worktree" && head !== undefined) return { cwd: st.cwd, commit: head };
  return {
    cwd: st.cwd,
    reason:
      "The phase's product did not run with worktree isolation (cwd is not a git repository with a commit, or " +
      "shared isolation was chosen), so there is no integrated head for the check to run on; the criterion is not met.",
  };
}

export class CriterionChecks {
  constructor(private readonly verifier: VerifyPort | undefined) {}

  /**
   * Runs `check` on `head` (phase `phaseIndex`) in the goal run's verify worktree (`goalRunId` names it). Resolves
   * the outcome to record; a failed one (exit code null, the reason as output) when the phase has no head to check
   * or this server no verifier (facts about the phase, not passing errors); `{error}` when the runner failed — the
   * verify worktree could not be prepared or the command could not be started — which is no verdict on the criterion
   * (the caller tries again); or `null` when `signal` aborted it (nothing may be recorded: it runs again). Never
   * rejects.
   */
  async run(request: {
    goalRunId: string;
    head: PhaseHead;
    phaseIndex: number;
    check: CriterionCheck;
    signal: AbortSignal;
  }): Promise<CriterionCheckOutcome | { error: string } | null> {
    const { head, phaseIndex } = request;
    if ("reason" in head) return failed(phaseIndex, head.reason);
    if (!this.verifier) {
      return failed(phaseIndex, "This server has no verifier (git worktrees), so the check cannot run.", head.commit);
    }
    let run;
    try {
      run = await this.verifier.run({
        cwd: head.cwd,
        productId: request.goalRunId,
        commit: head.commit,
        commands: [
          { name: "criterion", run: request.check.run, timeoutMs: request.check.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS },
        ],
        env: {},
        parallel: 1,
        signal: request.signal,
      });
    } catch (err) {
      if (request.signal.aborted) return null;
      return { error: err instanceof Error ? err.message : String(err) };
    }
    const result = run?.checks[0];
    if (run === null || result === undefined || request.signal.aborted) return null;
    return {
      ok: result.ok,
      exitCode: result.exitCode,
      ...(result.timedOut === true ? { timedOut: true } : {}),
      durationMs: result.durationMs,
      outputTail: result.outputTail,
      phaseIndex,
      commit: head.commit,
      tree: run.tree,
    };
  }

  /** Removes the goal run's verify worktree (its phase's checks are done). Never rejects. */
  async release(cwd: string, goalRunId: string): Promise<void> {
    await this.verifier?.release(cwd, goalRunId).catch(() => undefined);
  }
}

/**
 * Resolves after `ms` milliseconds of `clock`, or rejects with a loop interruption as soon as `signal` aborts (a
 * pause, stop or shutdown during the wait before a check is tried again).
 */
export function retryWait(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolveWait, reject) => {
    if (signal.aborted) {
      reject(loopInterrupted("criterion check retry"));
      return;
    }
    const onAbort = (): void => {
      cancel();
      reject(loopInterrupted("criterion check retry"));
    };
    const cancel = clock.setTimer(ms, () => {
      signal.removeEventListener("abort", onAbort);
      resolveWait();
    });
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function failed(phaseIndex: number, reason: string, commit?: string): CriterionCheckOutcome {
  return {
    ok: false,
    exitCode: null,
    durationMs: 0,
    outputTail: reason,
    phaseIndex,
    ...(commit !== undefined ? { commit } : {}),
  };
}
