/**
 * A product's verification (DESIGN.md guarantee 17, green-only integration): the gate that checks a completed
 * attempt's merge candidate on the integration head as it is now (`when: "each"`) or the final head (`when: "end"`),
 * the hook that runs it before an attempt settles, and the verdicts the integration step and the end of a run
 * consult. Checks run outside the exclusive section; their outcomes are recorded through the journal by the gate.
 * Split out of workspace-coordinator.ts, which consults `eachVerdict` and `takeCandidate` while it integrates. This
 * file must never import I/O.
 */
import type { PreparedCandidate } from "../workspace/verification-gate.js";
import { VerificationGate } from "../workspace/verification-gate.js";
import { attemptMessage, mergeMessage } from "../workspace/integration.js";
import { verifyWhen, type Verdict } from "../workspace/verification.js";
import { decide, taskOf, type Effect } from "./decide.js";
import type { ProductParts } from "./parts.js";
import type { SettledResult } from "./worker-pool.js";

/** The verification of one product's integration (guarantee 17); owns its gate, made on first use. */
export class ProductVerification {
  private verificationGate: VerificationGate | undefined;

  constructor(private readonly p: ProductParts) {}

  private get productId(): string {
    return this.p.model.state.productId;
  }

  /** The verification gate when `verify` is configured, a verifier exists and the product runs isolated. */
  gate(): VerificationGate | null {
    const verifier = this.p.ctx.verifier;
    if (!verifier || !this.p.model.state.verification || !this.p.workspaces.isolated()) return null;
    this.verificationGate ??= new VerificationGate({
      productId: this.productId,
      cwd: () => this.p.model.state.cwd,
      state: () => this.p.model.state,
      verifier,
      notifier: this.p.ctx.notifier,
      logger: this.p.ctx.logger,
      now: () => this.p.journal.now(),
      record: (event) => this.p.sections.run(() => this.p.journal.commit([event])),
    });
    return this.verificationGate;
  }

  /**
   * Guarantee 17, `when: "each"`: verifies a completed attempt's merge candidate on the head as it is now, BEFORE
   * the attempt is settled and outside the exclusive section (`signal`: the attempt's, so pause, cancel and shutdown
   * stop the check). The integration step then finds the verdict by tree id. Resolves when done; never rejects.
   */
  async preVerify(taskId: string, signal: AbortSignal): Promise<void> {
    const gate = this.gate();
    const iso = this.p.workspaces.isolated();
    const task = taskOf(this.p.model, taskId);
    if (!gate || !iso || !task?.workspace || verifyWhen(this.p.model.state) !== "each") return;
    await gate.preVerify({
      workspaces: iso.port,
      worktree: task.workspace.path,
      base: task.workspace.baseCommit,
      head: iso.integration.head,
      captureMessage: attemptMessage(this.productId, task, task.attempts),
      mergeMessage: mergeMessage(this.productId, `task ${task.taskId} (attempt ${task.attempts})`),
      taskId,
      attempt: task.attempts,
      launch: task.startedAt ?? "",
      signal,
    });
  }

  /**
   * Guarantee 17: the launch's `beforeSettle` (worker-pool.ts) that verifies the attempt's candidate before its result
   * settles, outside the exclusive section; `{}` when no verification applies.
   */
  verifyHook(taskId: string): { beforeSettle?: (signal: AbortSignal) => Promise<void> } {
    if (!this.gate() || verifyWhen(this.p.model.state) !== "each") return {};
    return { beforeSettle: (signal) => this.preVerify(taskId, signal) };
  }

  /** Guarantee 17: sends a settled result back to be verified on the head as it is now, then settled again. */
  reverify(r: SettledResult): void {
    this.p.pool.reverify(
      r,
      (signal) => this.preVerify(r.taskId, signal),
      () => this.p.run.pump(),
    );
  }

  /**
   * Guarantee 17, `when: "end"`: what is known of the integration head's tree (`null`: no end verification applies,
   * the base commit is the user's and is never checked). Reads only.
   */
  async finalVerdict(): Promise<{ verdict: Verdict; tree: string | undefined; fixupAsked: boolean } | null> {
    const gate = this.gate();
    const iso = this.p.workspaces.isolated();
    const v = this.p.model.state.verification;
    if (!gate || !iso || !v || verifyWhen(this.p.model.state) !== "end") return null;
    if (iso.integration.head === iso.integration.base) return null;
    const { tree, verdict } = await gate.verdict(iso.integration.head);
    return { verdict, tree, fixupAsked: v.endFixupAsked !== undefined };
  }

  /**
   * Guarantee 17, `when: "end"`, inside the exclusive section when every task completed (decide.ts says what the
   * verdict means): `undefined` when the final head is green (or nothing applies); `wait` when its checks now run
   * aside (outside the section; a wave follows) or the leader was asked for a fix-up; else the failed end.
   */
  async finalVerification(): Promise<Extract<Effect, { kind: "finish" }> | "wait" | undefined> {
    const p = this.p;
    const final = await this.finalVerdict();
    if (!final) return undefined;
    const decision = decide(p.model, { kind: "finalVerdict", ...final });
    if (decision.events.length > 0) await p.journal.commit(decision.events);
    for (const e of decision.effects) {
      if (e.kind === "finish") return e;
      if (e.kind === "verifyHead")
        p.pool.runAside(
          "verify-head",
          (signal) => this.verifyHead(signal),
          () => p.run.pump(),
        );
      if (e.kind === "consultFinal") p.leader.consultFinal(e.error);
    }
    return decision.effects.length > 0 ? "wait" : undefined;
  }

  /** Runs the final head's checks (outside the exclusive section); the outcome is recorded by the gate. */
  async verifyHead(signal: AbortSignal): Promise<void> {
    const gate = this.gate();
    const iso = this.p.workspaces.isolated();
    if (!gate || !iso) return;
    try {
      await gate.verify({ commit: iso.integration.head, scope: "end", signal });
    } catch (err) {
      this.p.ctx.logger.warn({ productId: this.productId, err: message(err) }, "could not verify the final head");
    }
  }

  /** The verdict of a candidate under `when: "each"`, or `undefined` when no verification applies. */
  async eachVerdict(commit: string): Promise<Verdict | undefined> {
    const gate = this.gate();
    if (!gate || verifyWhen(this.p.model.state) !== "each") return undefined;
    return (await gate.verdict(commit)).verdict;
  }

  /**
   * What `preVerify` captured and merged for this attempt in this process, handed over once (verification-gate.ts
   * `takeCandidate`); `undefined` when no gate was made or nothing was prepared on `base`.
   */
  takeCandidate(
    taskId: string,
    attempt: number,
    worktree: string,
    base: string,
    launch: string,
  ): PreparedCandidate | undefined {
    return this.verificationGate?.takeCandidate(taskId, attempt, worktree, base, launch);
  }

  /** Removes the worktrees the gate's checks used, when a gate was made (verification-gate.ts `releaseWorktrees`). */
  async releaseWorktrees(): Promise<void> {
    await this.verificationGate?.releaseWorktrees();
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
