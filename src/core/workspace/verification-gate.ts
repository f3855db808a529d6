/**
 * The verification gate of one product (DESIGN.md guarantee 17; docs/VERIFY.md): runs a candidate's checks through
 * `VerifyPort` unless its tree was verified before, records the outcome as a `verified` event bound to the tree id
 * (only once every check ran to its end), and announces it (`product.taskVerified`).
 *
 * Owns the in-flight runs of its product, so two callers asking about one tree share one run, and the trees whose
 * checks could not be run at all. It never moves a ref and never decides what a red result does to a task
 * (product/decide.ts does). Imports no I/O: the checks run behind the port, the event is written through `record`,
 * which must NOT be called from inside the product's exclusive section (it takes that section itself).
 */
import { DEFAULT_CHECK_TIMEOUT_MS } from "../../../protocol/verify.js";
import type { CaptureResult, Logger, MergeOutcome, Notifier, WorkspacePort } from "../ports.js";
import type { VerifyPort } from "./verify-port.js";
import type { HasVerification, VerificationEntry, VerifiedEvent, Verdict } from "./verification.js";
import { recordedVerification, verifyParallelism } from "./verification.js";

/** The body of a `verified` event as the gate appends it (the journal stamps `v` and `at`). */
export type VerifiedEventBody = Omit<VerifiedEvent, "v" | "at">;

/** What the gate needs from its product; read at each call (the state changes under it). */
export interface GateDeps {
  productId: string;
  cwd: () => string;
  state: () => HasVerification;
  verifier: VerifyPort;
  notifier: Notifier;
  logger: Logger;
  now: () => string;
  /** Appends the event (taking the product's exclusive section); rejects when it could not be written. */
  record: (event: VerifiedEventBody) => Promise<void>;
}

/** Trees remembered as "could not be verified" (in memory only: a restart tries them again). */
const MAX_BROKEN = 100;
/** Candidates and tree ids remembered for the integration step (in memory only; oldest forgotten first). */
const MAX_REMEMBERED = 256;

/**
 * What `preVerify` captured and merged for one attempt, handed to its integration step (`takeCandidate`) so the
 * worktree is not captured and merged a second time: once a worker's turn ended, the worker and everything it started
 * are gone (worker-attempt.ts `run` resolves only then; guarantee 12), so nothing can change its worktree between
 * the two, and the capture of the same worktree on the same base is the same commit.
 */
export interface PreparedCandidate {
  base: string;
  captured: CaptureResult;
  /** The head the candidate was merged on, and that merge (absent when it conflicted or was not reached). */
  merged?: { head: string; outcome: Exclude<MergeOutcome, { kind: "conflict" }> };
}

export class VerificationGate {
  private readonly inFlight = new Map<string, Promise<VerificationEntry | null>>();
  /** True once checks ran in this process since the last `releaseWorktrees`. */
  private used = false;
  private readonly broken = new Map<string, string>();
  /** Attempt key (`takeCandidate`) → what `preVerify` captured and merged for it. */
  private readonly candidates = new Map<string, PreparedCandidate>();
  /** Commit → tree id, for the commits this gate read or verified (a verdict at integration needs no git). */
  private readonly trees = new Map<string, string>();

  constructor(private readonly deps: GateDeps) {}

  /** Runs being checked now (for tests and status). */
  get running(): number {
    return this.inFlight.size;
  }

  /** The tree id of `commit` (remembered once read). Throws with git's message when it cannot be read. */
  async treeOf(commit: string): Promise<string> {
    const known = this.trees.get(commit);
    if (known !== undefined) return known;
    const tree = await this.deps.verifier.treeOf(this.deps.cwd(), commit);
    remember(this.trees, commit, tree);
    return tree;
  }

  /**
   * What `preVerify` captured (and merged) for attempt `attempt` of `taskId` in `worktree` on `base` in one launch
   * (`launch`: the attempt's `startedAt`; a replay or rollback runs the same attempt number again in the same path,
   * and must never get an earlier launch's capture), forgotten as it
   * is handed over; undefined when it did not run in this process (a restart, no verification) or ran on another
   * base. The caller merges again when the head moved since.
   */
  takeCandidate(
    taskId: string,
    attempt: number,
    worktree: string,
    base: string,
    launch: string,
  ): PreparedCandidate | undefined {
    const key = candidateKey(taskId, attempt, worktree, launch);
    const found = this.candidates.get(key);
    this.candidates.delete(key);
    return found?.base === base ? found : undefined;
  }

  /** What is known of `commit`'s tree now (no check runs). A tree that cannot be read is `broken`. */
  async verdict(commit: string): Promise<{ tree?: string; verdict: Verdict }> {
    let tree: string;
    try {
      tree = await this.treeOf(commit);
    } catch (err) {
      return { verdict: { state: "broken", error: `The candidate's tree could not be read: ${message(err)}` } };
    }
    const entry = recordedVerification(this.deps.state(), tree);
    if (entry) return { tree, verdict: { state: entry.ok ? "green" : "red", entry } };
    const error = this.broken.get(tree);
    return { tree, verdict: error !== undefined ? { state: "broken", error } : { state: "unverified" } };
  }

  /**
   * The verification of `commit`'s tree: the recorded one when the tree was verified before (no check runs; not for
   * `manual`), else its checks run now (sharing a run already under way for the same tree) and the outcome is
   * recorded BEFORE it is returned or announced. Resolves `null` when `signal` aborted the run (nothing recorded: a
   * cut-short check runs again next time) or when no verification is configured. Throws when the verify worktree
   * cannot be prepared or the event cannot be written (the tree is then `broken` until a restart).
   */
  async verify(request: {
    commit: string;
    taskId?: string;
    scope: "task" | "end" | "manual";
    signal: AbortSignal;
  }): Promise<VerificationEntry | null> {
    if (!this.deps.state().verification) return null;
    const tree = await this.treeOf(request.commit);
    if (request.scope !== "manual") {
      const known = recordedVerification(this.deps.state(), tree);
      if (known) return known;
    }
    const running = this.inFlight.get(tree);
    if (running) return running;
    const run = this.runChecks({ ...request, tree })
      .catch((err: unknown) => {
        this.broken.set(tree, `The verification commands could not be run: ${message(err)}`);
        if (this.broken.size > MAX_BROKEN) this.broken.delete(this.broken.keys().next().value as string);
        throw err;
      })
      .finally(() => this.inFlight.delete(tree));
    this.inFlight.set(tree, run);
    return run;
  }

  private async runChecks(request: {
    commit: string;
    tree: string;
    taskId?: string;
    scope: "task" | "end" | "manual";
    signal: AbortSignal;
  }): Promise<VerificationEntry | null> {
    const state = this.deps.state();
    const config = state.verification?.config;
    if (!config) return null;
    this.used = true;
    const result = await this.deps.verifier.run({
      cwd: this.deps.cwd(),
      productId: this.deps.productId,
      commit: request.commit,
      tree: request.tree,
      commands: config.commands.map((c) => ({
        name: c.name,
        run: c.run,
        timeoutMs: c.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS,
      })),
      env: { ...(config.env ?? {}) },
      parallel: verifyParallelism(state),
      signal: request.signal,
    });
    // Guarantee 17: a check cut short records nothing (it runs again, never assumed).
    if (result === null || request.signal.aborted) return null;
    const event: VerifiedEventBody = {
      type: "verified",
      tree: result.tree,
      commit: request.commit,
      ...(request.taskId !== undefined ? { taskId: request.taskId } : {}),
      scope: request.scope,
      ok: result.ok,
      checks: result.checks,
    };
    await this.deps.record(event);
    this.deps.notifier.notify("product.taskVerified", {
      productId: this.deps.productId,
      ...(request.taskId !== undefined ? { taskId: request.taskId } : {}),
      tree: result.tree,
      commit: request.commit,
      ok: result.ok,
      checks: result.checks.map((c) => ({ ...c })),
    });
    const { type: _type, ...entry } = event;
    return { ...entry, at: this.deps.now() };
  }

  /**
   * Removes the product's verify worktrees when checks ran since the last call and none is running now (the product
   * stopped running in this process), or always with `force` (delete). Failures are logged.
   */
  async releaseWorktrees(force = false): Promise<void> {
    if (!force && (!this.used || this.inFlight.size > 0)) return;
    this.used = false;
    try {
      await this.deps.verifier.release(this.deps.cwd(), this.deps.productId);
    } catch (err) {
      this.deps.logger.warn(
        { productId: this.deps.productId, err: message(err) },
        "could not remove the verify worktrees",
      );
    }
  }

  /**
   * Verification ahead of integration (`when: "each"`), outside the product's exclusive section, so checks of
   * independent candidates run in parallel (up to `verify.maxParallel`) and a pause is never held up by a check:
   * captures the attempt's worktree against the base it was prepared on (guarantee 16), merges it (as objects only)
   * with the integration head as it is now, and verifies that candidate. Best effort: a failure is logged, and the
   * integration step finds the candidate unverified or broken. Resolves when done; never rejects.
   */
  async preVerify(request: {
    workspaces: WorkspacePort;
    worktree: string;
    base: string;
    head: string;
    captureMessage: string;
    mergeMessage: string;
    taskId: string;
    attempt: number;
    /** The attempt's `startedAt`: tells a re-run of the same attempt number apart (see `takeCandidate`). */
    launch: string;
    signal: AbortSignal;
  }): Promise<void> {
    const key = candidateKey(request.taskId, request.attempt, request.worktree, request.launch);
    try {
      // A re-verification on a moved head takes the capture made before (the worktree cannot have changed).
      const earlier = this.candidates.get(key);
      const captured =
        earlier?.base === request.base
          ? earlier.captured
          : await request.workspaces.capture(request.worktree, request.captureMessage, request.base);
      const prepared: PreparedCandidate = { base: request.base, captured };
      remember(this.candidates, key, prepared);
      if (captured.commit === null || request.signal.aborted) return;
      const outcome = await request.workspaces.merge(
        this.deps.cwd(),
        request.head,
        captured.commit,
        request.mergeMessage,
      );
      if (outcome.kind === "conflict" || request.signal.aborted) return;
      prepared.merged = { head: request.head, outcome };
      // The tree ids the capture and the merge wrote: the verification reads none again (issue 30 bench).
      if (captured.tree !== undefined) remember(this.trees, captured.commit, captured.tree);
      if (outcome.tree !== undefined) remember(this.trees, outcome.commit, outcome.tree);
      await this.verify({ commit: outcome.commit, taskId: request.taskId, scope: "task", signal: request.signal });
    } catch (err) {
      this.deps.logger.warn(
        { productId: this.deps.productId, taskId: request.taskId, err: message(err) },
        "could not verify a candidate ahead of its integration",
      );
    }
  }
}

function candidateKey(taskId: string, attempt: number, worktree: string, launch: string): string {
  return `${taskId}\u0000${attempt}\u0000${worktree}\u0000${launch}`;
}

/** Sets `key` in a bounded map (the oldest entry goes past `MAX_REMEMBERED`). */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_REMEMBERED) map.delete(map.keys().next().value as string);
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
