/**
 * Isolation and integration of a product's tasks (DESIGN.md guarantee 11; PROTOCOL.md section 5): choose the isolation
 * at confirmation, give each attempt a worktree on the integration head, commit and merge its result, keep failed
 * attempts' commits, verify a recorded step after a crash, prune what a dead owner left, end the integration, move the
 * branch on rollback, remove it all on delete. Every step that moves a ref is recorded as an event first (`commit`), and every move is a compare-and-swap through
 * `WorkspacePort`. The decisions themselves are pure functions of src/core/workspace/. This file must never import I/O.
 */
import type { TaskState, TaskWorkspace } from "../../../protocol/common.js";
import type { WorkspacePort } from "../ports.js";
import {
  attemptBase,
  attemptMessage,
  freeAttemptRef,
  BRANCH_MOVED_REMEDIATION,
  branchMovedProblem,
  chooseIsolation,
  conflictError,
  integrationRef,
  integrationView,
  keptHeadRef,
  mergeMessage,
  pendingOutcome,
  productRefPrefix,
} from "../workspace/integration.js";
import type { IntegrationRecord, PendingIntegration } from "../workspace/records.js";
import type { Verdict } from "../workspace/verification.js";
import { taskOf, type NewEvent } from "./decide.js";
import type { ProductParts } from "./parts.js";
import {
  keepAndMoveBranch,
  REMOTE_REMEDIATION,
  refreshForResume,
  refreshProblem,
  remoteWorkspaceChosen,
} from "./remote-workspace.js";
import type { CheckpointRef } from "./records.js";

/** What integrating a completed attempt gave: events to record with its completion, or the failure. */
export type IntegrationResult =
  | {
      ok: true;
      events: NewEvent[];
      workspace?: TaskWorkspace;
      integrated?: { commit: string; changedFiles: string[]; changedFilesTotal?: number };
    }
  /** `halt`: not the attempt's fault and not retryable (the branch was moved): the product pauses with `remediation`. */
  | { ok: false; error: string; workspace?: TaskWorkspace; halt?: { remediation: string }; verdict?: Verdict }
  /** Guarantee 17: the candidate on the head as it is now was not verified yet; nothing was recorded or moved. */
  | { ok: false; verdict: { state: "unverified" }; workspace?: TaskWorkspace };

/**
 * Isolation and integration steps of one product; owns whether worktrees are parked for reuse. The product's
 * verification (guarantee 17) is product-verification.ts's, which this consults for a candidate's verdict.
 */
export class WorkspaceCoordinator {
  /** True once an attempt's worktree was released for reuse and not removed since (`removeParkedWorkspaces`). */
  private parkedWorkspaces = false;

  constructor(private readonly p: ProductParts) {}

  private get productId(): string {
    return this.p.model.state.productId;
  }

  /** The port and repository of the product's worktrees: remote port and URL (issue 33), or local port and `cwd`. */
  private target(): { port: WorkspacePort; repo: string } | null {
    const s = this.p.model.state;
    const port = s.workspace ? this.p.ctx.remoteWorkspaces : this.p.ctx.workspaces;
    return port ? { port, repo: s.workspace?.remote ?? s.cwd } : null;
  }

  /** The port, repository and integration record when this product runs with worktree isolation, else `null`. */
  isolated(): { port: WorkspacePort; integration: IntegrationRecord; repo: string } | null {
    const s = this.p.model.state;
    const t = this.target();
    if (!t || s.isolation !== "worktree" || !s.integration) return null;
    return { ...t, integration: s.integration };
  }

  /** The `workspaceChosen` event for confirmation: inspects `cwd` (reads only). */
  async chooseWorkspace(): Promise<NewEvent> {
    const s = this.p.model.state;
    const t = this.target();
    if (s.workspace && t) return remoteWorkspaceChosen(this.productId, s.workspace, t.port);
    const info = t
      ? await t.port.inspect(t.repo)
      : { kind: "none" as const, reason: "This server has no git workspace adapter, so tasks share cwd." };
    const o = this.p.ctx.options;
    const requested = s.isolationRequest;
    const isolation = requested?.isolation ?? o.isolation;
    const integration = requested?.integration ?? o.integration;
    const choice = chooseIsolation(
      this.productId,
      { ...(isolation !== undefined ? { isolation } : {}), ...(integration !== undefined ? { integration } : {}) },
      info,
    );
    return {
      type: "workspaceChosen",
      isolation: choice.isolation,
      ...(choice.reason !== undefined ? { reason: choice.reason } : {}),
      ...(choice.integration ? { integration: choice.integration } : {}),
    };
  }

  /**
   * Makes sure the integration branch is where the state says (created at confirmation; a rollback's recorded move
   * finished). Returns a plain-words problem when it is somewhere else (someone moved it): nothing is overwritten.
   */
  async verifyBranch(): Promise<string | null> {
    const iso = this.isolated();
    if (!iso) return null;
    const { port, integration, repo: cwd } = iso;
    const unreachable = await refreshProblem(port, cwd);
    if (unreachable !== null) return unreachable;
    const ref = integrationRef(this.productId);
    const current = await port.readRef(cwd, ref);
    if (current === integration.head) return null;
    if (current === null && (await port.moveRef(cwd, ref, integration.head, null))) return null;
    const moving = integration.moving;
    if (moving && current === moving.from && moving.to === integration.head) {
      await port.moveRef(cwd, moving.keptAs, moving.from, null);
      if (await port.moveRef(cwd, ref, moving.to, moving.from)) return null;
    }
    const pending = integration.pending;
    if (pending && (current === pending.to || current === pending.from)) return null; // settled by recoverPending
    return `The integration branch ${integration.branch} is at ${current ?? "(missing)"}, not at the recorded head ${integration.head}: something else moved it.`;
  }

  /**
   * The plain-words problem when the integration branch is not at the recorded head (read from the ref itself), or
   * `null` (also without isolation). Reads only.
   */
  async branchProblem(): Promise<string | null> {
    const iso = this.isolated();
    if (!iso) return null;
    const found = await iso.port.readRef(iso.repo, integrationRef(this.productId));
    return branchMovedProblem(iso.integration.branch, iso.integration.head, found);
  }

  /**
   * After a crash: settles a merge that was recorded (`integrating`) but not confirmed. Returns the events to record:
   * the task's integration and completion when the branch moved (or could be moved now from the expected head), else
   * the attempt's commit kept and nothing integrated. Call inside `exclusive`.
   */
  async recoverPending(): Promise<NewEvent[]> {
    const iso = this.isolated();
    const pending = iso?.integration.pending;
    if (!iso || !pending) return [];
    const cwd = iso.repo;
    await refreshForResume(iso.port, cwd, this.productId, this.p.model.state.phase);
    let outcome = pendingOutcome(pending, await iso.port.readRef(cwd, integrationRef(this.productId)));
    if (outcome !== "notMoved") await iso.port.moveRef(cwd, pending.ref, pending.commit, null);
    else if (await keepAndMoveBranch(iso.port, cwd, integrationRef(this.productId), pending)) outcome = "moved";
    if (outcome !== "moved") {
      return [
        {
          type: "attemptKept",
          taskId: pending.taskId,
          attempt: pending.attempt,
          commit: pending.commit,
          ref: pending.ref,
          files: [],
        },
      ];
    }
    const events: NewEvent[] = [this.integratedEvent(pending)];
    const task = taskOf(this.p.model, pending.taskId);
    // `pending`: a remote push that failed (unreachable, refused) paused the product with the merge still recorded.
    if (task && (task.status === "running" || task.status === "pending") && task.attempts === pending.attempt) {
      const done: TaskState = { ...task, status: "completed", output: pending.output, endedAt: this.p.journal.now() };
      delete done.error;
      delete done.interruption;
      if (done.workspace)
        done.workspace = {
          ...done.workspace,
          commit: pending.commit,
          changedFiles: pending.changedFiles,
          ...(pending.changedFilesTotal !== undefined ? { changedFilesTotal: pending.changedFilesTotal } : {}),
        };
      events.push(
        pending.inputHash !== undefined
          ? { type: "task", task: done, inputHash: pending.inputHash }
          : { type: "task", task: done },
      );
    }
    return events;
  }

  private integratedEvent(p: PendingIntegration): NewEvent {
    return {
      type: "taskIntegrated",
      taskId: p.taskId,
      attempt: p.attempt,
      commit: p.commit,
      head: p.to,
      changedFiles: p.changedFiles,
      ...(p.changedFilesTotal !== undefined ? { changedFilesTotal: p.changedFilesTotal } : {}),
    };
  }

  /** The worktree a new attempt of `taskId` gets (recorded with its `running` state before the worktree exists). */
  async attemptWorkspace(taskId: string, attempt: number): Promise<TaskWorkspace | undefined> {
    const iso = this.isolated();
    if (!iso) return undefined;
    const path = await iso.port.attemptPath(iso.repo, this.productId, taskId, attempt);
    const cwd = (await iso.port.attemptCwd?.(iso.repo, path)) ?? path; // issue 31: cwd's folder of the worktree
    const branch = await freeAttemptRef(this.productId, taskId, attempt, (ref) => iso.port.readRef(iso.repo, ref));
    return { path, ...(cwd !== path ? { cwd } : {}), branch, baseCommit: attemptBase(iso.integration) };
  }

  /** Creates the attempt's worktree (after its `running` state was recorded). Throws with a plain message. */
  async prepareWorkspace(ws: TaskWorkspace): Promise<void> {
    const t = this.target();
    if (!t) throw new Error("No workspace adapter is configured.");
    await t.port.prepare(t.repo, ws.path, ws.baseCommit);
  }

  /**
   * Integrates a completed attempt (inside `exclusive`, one at a time: merges are serialised): commits its changes
   * (none → no commit), records the merge (`integrating`) BEFORE keeping the commit and moving the branch by
   * compare-and-swap, and returns the `taskIntegrated` event to record with the task's completion. A conflict records
   * `attemptKept` (the commit stays under the product's refs) and fails the attempt naming the files. What `preVerify`
   * captured and merged is reused, not made again (guarantee 17, verification-gate.ts `takeCandidate`).
   */
  async integrateAttempt(task: TaskState, output: string, inputHash: string): Promise<IntegrationResult> {
    const iso = this.isolated();
    const ws = task.workspace;
    if (!iso || !ws) return { ok: true, events: [] };
    const { port, integration, repo: cwd } = iso;
    const launch = task.startedAt ?? "";
    const prepared = this.p.verification.takeCandidate(task.taskId, task.attempts, ws.path, ws.baseCommit, launch);
    let captured;
    try {
      const msg = attemptMessage(this.productId, task, task.attempts);
      captured = prepared?.captured ?? (await port.capture(ws.path, msg, ws.baseCommit));
    } catch (err) {
      return { ok: false, error: `The task's changes could not be committed: ${message(err)}`, workspace: ws };
    }
    if (captured.commit === null) return { ok: true, events: [], workspace: { ...ws, changedFiles: [] } };
    const total = captured.changedFilesTotal > captured.changedFiles.length ? captured.changedFilesTotal : undefined;
    const changed = {
      changedFiles: captured.changedFiles,
      ...(total !== undefined ? { changedFilesTotal: total } : {}),
    };
    const withCommit: TaskWorkspace = { ...ws, commit: captured.commit, ...changed };
    const head = integration.head;
    // Guarantee 16: the branch is verified against the ref itself before every merge.
    const moved = branchMovedProblem(integration.branch, head, await port.readRef(cwd, integrationRef(this.productId)));
    if (moved)
      return { ok: false, error: moved, workspace: withCommit, halt: { remediation: BRANCH_MOVED_REMEDIATION } };
    const what = `task ${task.taskId} (attempt ${task.attempts})`;
    let merge;
    try {
      const reuse = prepared?.merged?.head === head ? prepared.merged.outcome : undefined;
      merge = reuse ?? (await port.merge(cwd, head, captured.commit, mergeMessage(this.productId, what)));
    } catch (err) {
      merge = { kind: "error" as const, error: message(err) };
    }
    if (merge.kind === "conflict" || merge.kind === "error") {
      await this.keepAttempt(task, captured.commit, ws.branch, merge.kind === "conflict" ? merge.files : []);
      await port.moveRef(cwd, ws.branch, captured.commit, null).catch((err: unknown) => {
        this.p.ctx.logger.warn({ productId: this.productId, err: message(err) }, "could not keep an attempt's commit");
      });
      const error =
        merge.kind === "conflict"
          ? conflictError(merge.files)
          : `The task's commit could not be merged: ${merge.error}`;
      return { ok: false, error, workspace: withCommit };
    }
    // Guarantee 17: only a candidate whose tree passed the checks moves the branch.
    const verdict = await this.p.verification.eachVerdict(merge.commit);
    if (verdict?.state === "unverified") return { ok: false, verdict, workspace: withCommit };
    if (verdict && verdict.state !== "green") {
      await this.keepAttempt(task, captured.commit, ws.branch, []);
      await port.moveRef(cwd, ws.branch, captured.commit, null);
      return {
        ok: false,
        error: "The task's merge candidate did not pass verification.",
        verdict,
        workspace: withCommit,
      };
    }
    const pending: PendingIntegration = {
      taskId: task.taskId,
      attempt: task.attempts,
      commit: captured.commit,
      ...changed,
      ref: ws.branch,
      from: head,
      to: merge.commit,
      output,
      inputHash,
    };
    return this.moveBranch(pending, withCommit);
  }

  /**
   * Records the merge (`integrating`), keeps the attempt's commit under its ref and moves the integration branch by
   * compare-and-swap from the head the merge was made on; a branch that moved meanwhile fails the attempt (kept).
   */
  private async moveBranch(pending: PendingIntegration, withCommit: TaskWorkspace): Promise<IntegrationResult> {
    const {
      port,
      integration,
      repo: cwd,
    } = this.isolated() as NonNullable<ReturnType<WorkspaceCoordinator["isolated"]>>;
    await this.p.journal.commit([{ type: "integrating", pending }]);
    let moved: boolean;
    try {
      moved = await keepAndMoveBranch(port, cwd, integrationRef(this.productId), pending);
    } catch (err) {
      // A remote away or refusing (issue 33): the merge stays recorded, the product pauses, the resume settles it.
      return { ok: false, error: message(err), workspace: withCommit, halt: { remediation: REMOTE_REMEDIATION } };
    }
    if (!moved) {
      await this.keepAttempt({ taskId: pending.taskId, attempts: pending.attempt }, pending.commit, pending.ref, []);
      const found = await port.readRef(cwd, integrationRef(this.productId));
      return {
        ok: false,
        error:
          branchMovedProblem(integration.branch, pending.from, found) ??
          `The integration branch ${integration.branch} moved while task ${pending.taskId} was being merged; nothing was overwritten.`,
        workspace: withCommit,
        halt: { remediation: BRANCH_MOVED_REMEDIATION },
      };
    }
    return {
      ok: true,
      events: [this.integratedEvent(pending)],
      workspace: withCommit,
      integrated: {
        commit: pending.commit,
        changedFiles: pending.changedFiles,
        ...(pending.changedFilesTotal !== undefined ? { changedFilesTotal: pending.changedFilesTotal } : {}),
      },
    };
  }

  /** Records that an attempt's commit is kept under `ref`, not integrated (`files`: the conflicting ones). */
  private async keepAttempt(
    task: { taskId: string; attempts: number },
    commit: string,
    ref: string,
    files: string[],
  ): Promise<void> {
    await this.p.journal.commit([
      { type: "attemptKept", taskId: task.taskId, attempt: task.attempts, commit, ref, files },
    ]);
  }

  /**
   * Ends an attempt's use of its worktree; failures are logged (a later resume prunes leftovers). With `reuse` (the
   * product keeps running) the adapter may park it for the product's next attempt; `removeParkedWorkspaces` removes
   * what is parked once the product stops.
   */
  async releaseWorkspace(ws: TaskWorkspace | undefined, reuse = false): Promise<void> {
    const t = this.target();
    if (!t || !ws) return;
    try {
      await t.port.release(t.repo, ws.path, reuse ? { reuse: true } : undefined);
      if (reuse) this.parkedWorkspaces = true;
    } catch (err) {
      this.p.ctx.logger.warn(
        { productId: this.productId, path: ws.path, err: message(err) },
        "could not remove a worktree",
      );
    }
  }

  /**
   * Removes the worktrees parked for reuse (issue 12: no worktree outlives the product's run), keeping those of
   * attempts still running. Call inside `exclusive` when the product stops running in this process (end, pause,
   * cancel, shutdown); nothing to do (no git call) when nothing was parked since the last time.
   */
  async removeParkedWorkspaces(): Promise<void> {
    await this.p.verification.releaseWorktrees();
    if (!this.parkedWorkspaces) return;
    this.parkedWorkspaces = false;
    await this.pruneWorkspaces(this.p.pool.workspacePaths());
  }

  /** Removes worktrees of this product that no running attempt of this process uses (a dead owner's leftovers). */
  async pruneWorkspaces(inUse: ReadonlySet<string>): Promise<void> {
    const t = this.target();
    if (!t || this.p.model.state.isolation !== "worktree") return;
    try {
      for (const path of await t.port.leftovers(t.repo, this.productId)) {
        if (!inUse.has(path)) await t.port.release(t.repo, path);
      }
    } catch (err) {
      this.p.ctx.logger.warn({ productId: this.productId, err: message(err) }, "could not prune worktrees");
    }
  }

  /**
   * The end of a worktree product (inside `exclusive`, before its terminal phase is recorded): `branch` mode leaves
   * the result on the integration branch; `merge` mode records the intent, then merges into the target (fast-forward
   * or merge commit, never a rewrite). Returns the events to record with the phase; `[]` without isolation.
   */
  async endIntegration(completed: boolean): Promise<NewEvent[]> {
    const iso = this.isolated();
    if (!iso) return [];
    const { port, integration } = iso;
    // Guarantee 16: nothing is called integrated that is not on the branch (checked once more, against the ref).
    const found = await port.readRef(iso.repo, integrationRef(this.productId));
    const moved = branchMovedProblem(integration.branch, integration.head, found);
    if (moved) return [{ type: "integrationEnded", state: "pending", reason: moved }];
    if (integration.mode === "branch") return [{ type: "integrationEnded", state: "integrated" }];
    if (!completed || !integration.targetBranch) return [{ type: "integrationEnded", state: "pending" }];
    await this.p.journal.commit([{ type: "integrationEnded", state: "integrating" }]);
    try {
      const result = await port.integrateInto(
        this.p.model.state.cwd,
        integration.targetBranch,
        integration.head,
        mergeMessage(this.productId, `${integration.branch} into ${integration.targetBranch}`),
      );
      if (result.state === "integrated")
        return [{ type: "integrationEnded", state: "integrated", targetHead: result.head }];
      if (result.state === "deferred") return [{ type: "integrationEnded", state: "deferred", reason: result.reason }];
      return [{ type: "integrationEnded", state: "conflict", files: result.files }];
    } catch (err) {
      this.p.ctx.logger.warn(
        { productId: this.productId, err: message(err) },
        "could not merge into the target branch",
      );
      return [{ type: "integrationEnded", state: "conflict", files: [] }];
    }
  }

  /** Tells the client how the integration ended (`product.integrated`), after it was recorded. */
  announceIntegrated(): void {
    const integration = this.p.model.state.integration;
    if (this.p.model.state.isolation !== "worktree" || !integration) return;
    this.p.ctx.notifier.notify("product.integrated", {
      productId: this.productId,
      integration: integrationView(integration),
    });
  }

  /**
   * Rollback of the code (guarantee 11): the event that moves the integration branch back to the checkpoint's head,
   * keeping the head it leaves under the product's refs. `[]` when there is nothing to move.
   */
  branchRollbackEvents(ref: CheckpointRef): NewEvent[] {
    const iso = this.isolated();
    if (!iso || !ref.integrationHead || ref.integrationHead === iso.integration.head) return [];
    return [
      {
        type: "branchMoved",
        from: iso.integration.head,
        to: ref.integrationHead,
        keptAs: keptHeadRef(this.productId, iso.integration.kept + 1),
        merged: [...(ref.merged ?? [])],
      },
    ];
  }

  /** Removes every worktree, the integration branch and the product's refs (`product.delete`). Best effort, logged. */
  async removeWorkspaces(): Promise<void> {
    const t = this.target();
    const s = this.p.model.state;
    if (!t || s.isolation !== "worktree") return;
    try {
      await this.pruneWorkspaces(new Set());
      if (this.p.ctx.verifier) await this.p.ctx.verifier.release(s.cwd, this.productId);
      await t.port.removeProductFolder(t.repo, this.productId); // its folder too, not left empty in .git
      await t.port.deleteRefs(t.repo, [integrationRef(this.productId)], productRefPrefix(this.productId));
    } catch (err) {
      this.p.ctx.logger.warn(
        { productId: this.productId, err: message(err) },
        "could not remove the product's branches",
      );
    }
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
