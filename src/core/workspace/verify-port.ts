/**
 * The verification port (DESIGN.md guarantee 17; docs/VERIFY.md): what the core needs to run check commands on a
 * candidate commit. Types only; re-exported by ports.ts. Must never import I/O.
 */

/** One check command as the orchestrator runs it (docs/VERIFY.md). `timeoutMs` is always set here. */
export interface CheckCommand {
  name: string;
  run: string;
  timeoutMs: number;
}

/** The outcome of running a candidate's checks: every check that ran, in order (the first failure ends the run). */
export interface VerifyRun {
  tree: string;
  ok: boolean;
  checks: {
    name: string;
    ok: boolean;
    exitCode: number | null;
    timedOut?: boolean;
    durationMs: number;
    outputTail: string;
  }[];
}

/**
 * Runs verification commands on a candidate commit (guarantee 17): in a verify worktree of the repository (never the
 * user's checkout, never a worker's worktree), each command as its own process group under the agent watchdog, its
 * timeout enforced, its output bounded. Decides nothing: whether to run and what a result means is the core's.
 */
export interface VerifyPort {
  /** The tree id of `commit` in the repository of `cwd`. Throws with a plain message when git cannot read it. */
  treeOf(cwd: string, commit: string): Promise<string>;
  /**
   * Checks `commit` out in a verify worktree of `productId` (one of at most `parallel`, reused across candidates)
   * and runs `commands` in order, stopping at the first that fails. Resolves `null` when `signal` aborted the run
   * (its processes are gone then; nothing of it may be recorded). Throws when the worktree cannot be prepared or a
   * command cannot be started at all (no verdict: a command that ran and failed is a red check, never a throw).
   * `tree`, when the caller already read `commit`'s tree id, is returned as the run's tree (not read again).
   */
  run(request: {
    cwd: string;
    productId: string;
    commit: string;
    tree?: string;
    commands: CheckCommand[];
    env: Record<string, string>;
    parallel: number;
    signal: AbortSignal;
  }): Promise<VerifyRun | null>;
  /** Removes the product's verify worktrees (the product stopped running here, or was deleted). Missing is fine. */
  release(cwd: string, productId: string): Promise<void>;
  /**
   * Removes the verify worktrees of the repository of `cwd` left by processes that are provably gone (a server or a
   * `verify` command killed with SIGKILL), at most once per repository for the port's lifetime (later calls wait for
   * the first). Optional: a port without it sweeps before its first check only. Never rejects.
   */
  sweep?(cwd: string): Promise<void>;
}
