/**
 * Confirmation and execution: driving the DAG on workers in waves (settle results, then start ready tasks, each
 * written before it is acted on, guarantee 1), retries, leader consultation on failure, budgets (guarantee 9), the
 * end of the run and the timers that drive it.
 *
 * This file must never import I/O.
 */
import type { Budget, Instance, Plan, Task, TaskState } from "../../../protocol/common.js";
import { TerminalPhases } from "../../../protocol/common.js";
import { downstreamOf, validatePlanGraph } from "../dag/graph.js";
import { applyMutations } from "../dag/mutations.js";
import { checkProductState } from "./integrity.js";
import { Scheduler } from "../dag/scheduler.js";
import { DomainError, invalidPhase, invalidPlan } from "../errors.js";
import { AgentConfigurationError, remediationThen } from "../ports.js";
import type { WorkerResult } from "../ports.js";
import { taskInputHash } from "./fingerprint.js";
import { attemptsUsed } from "./state.js";
import { OrchestratorPlanning } from "./planning.js";
import type { NewEvent, RunningTask } from "./base.js";
import { INTERRUPTION } from "./base.js";
import { BRANCH_MOVED_REMEDIATION, PREPARE_REMEDIATION } from "../workspace/integration.js";

/** Rough token estimate when a worker reports no usage: 4 characters per token (issue 2, budgets). */
export const estimateTokens = (chars: number): number => Math.ceil(chars / 4);

/** Confirmation and execution: a layer of `ProductOrchestrator` (orchestrator.ts), on top of planning.ts. */
export abstract class OrchestratorExecution extends OrchestratorPlanning {
  /** `product.checkpoint` (history.ts). */
  abstract checkpoint(): Promise<{ checkpointId: string; at: string }>;

  // -------------------------------------------------------------------------------------------------------------
  // Confirmation and execution

  /**
   * `product.confirm`: persists the (possibly edited) plan and starts execution after the answer is sent.
   * Throws invalid_phase outside awaiting_confirmation and invalid_plan for an edited plan that is not a valid DAG.
   */
  async confirm(edit: { instances?: Instance[]; tasks?: Task[]; budget?: Budget }): Promise<void> {
    await this.exclusive(async () => {
      await this.catchUpNow();
      this.requirePhase(["awaiting_confirmation"], "product.confirm");
      this.requireIntact("product.confirm");
      const current = this.model.state.plan;
      if (!current) throw invalidPhase(this.phase, ["awaiting_confirmation"]);
      const edited = edit.instances !== undefined || edit.tasks !== undefined;
      const plan: Plan = {
        ...current,
        instances: edit.instances ?? current.instances,
        tasks: edit.tasks ?? current.tasks,
        version: edited ? current.version + 1 : current.version,
      };
      if (edit.budget) plan.budget = { ...(current.budget ?? {}), ...edit.budget };
      const check = validatePlanGraph(plan.instances, plan.tasks);
      if (!check.ok) {
        const error = invalidPlan(check.reason, check.index);
        // The list `index` points into, for the -32602 issue path (error-mapping.ts reads it; `tasks` when absent).
        if (check.list === "instances") (error.details as { list?: "tasks" | "instances" }).list = "instances";
        throw error;
      }
      if (plan.tasks.length === 0) throw invalidPlan("The plan has no tasks to run.");
      // Drift detection: what the run depends on outside its stream, as of confirmation.
      const fingerprint = await this.currentFingerprint(plan);
      // Guarantee 6: the lease is taken before the first task can start.
      const epoch = await this.takeLease();
      try {
        // Isolation is decided now, from the workspace as it is at confirmation (guarantee 11).
        const chosen = await this.chooseWorkspace();
        await this.commit([{ type: "confirmed", plan, fingerprint }, chosen], { header: true });
      } catch (err) {
        await this.releaseLease(epoch);
        throw err;
      }
      // The integration branch is created after `workspaceChosen` recorded it (a later start verifies it again).
      const problem = await this.verifyBranch().catch((err: unknown) => String(err));
      if (problem)
        this.ctx.logger.warn({ productId: this.productId, problem }, "integration branch not created at confirm");
    });
    this.ctx.defer(() => this.startDriving());
  }

  /** Begins (or resumes) driving execution in this process. Announces the team and the DAG. */
  protected startDriving(): void {
    if (this.driving || this.fenced || this.phase !== "executing") return;
    if (!this.lease.held) {
      this.ctx.logger.warn({ productId: this.productId }, "not starting execution: this process holds no lease");
      return;
    }
    // Guarantee 15: nothing read back may crash the process. A state that is not whole is never scheduled (resume,
    // rollback and replay refuse it first; this is the last line, e.g. for a state another process wrote meanwhile).
    const invalid = this.invalid ?? checkProductState(this.model.state, this.productId);
    let scheduler: Scheduler | undefined;
    try {
      if (invalid === undefined) {
        scheduler = new Scheduler(
          this.model.state.tasks.map((t) => ({ ...t })),
          this.model.state.maxParallelTasks ?? this.ctx.options.maxParallelTasks,
        );
      }
    } catch (err) {
      this.invalid = err instanceof Error ? err.message : String(err);
    }
    if (!scheduler) {
      this.invalid ??= invalid;
      this.ctx.logger.error(
        { productId: this.productId, cause: this.invalid },
        "not starting execution: stored state is not whole",
      );
      this.releaseWhenIdle();
      return;
    }
    this.driving = true;
    this.pruneBeforeStart = true;
    this.executingSinceMs = this.ctx.clock.now();
    this.scheduler = scheduler;
    this.announceTeam();
    this.announceTopology();
    this.armTimers();
    this.reconsultUnsettledFailures();
    this.pump();
  }

  /**
   * A task that failed for good while its consultation was interrupted (cancel, shutdown, crash) still has pending
   * dependents that can never become ready: consult the leader again for each such task.
   */
  protected reconsultUnsettledFailures(): void {
    if (this.consultations > 0) return; // consultations of this process are still queued or running
    const tasks = this.model.state.tasks;
    const failedWithPending = new Set<string>();
    const failed = new Set(tasks.filter((t) => t.status === "failed").map((t) => t.taskId));
    if (failed.size === 0) return;
    for (const t of tasks) {
      if (t.status !== "pending") continue;
      for (const d of t.dependsOn) if (failed.has(d)) failedWithPending.add(d);
    }
    for (const id of failedWithPending) this.consult(id);
  }

  protected announceTeam(): void {
    const plan = this.model.state.plan;
    if (!plan) return;
    const seen = new Set<string>();
    const agents: { agentId: string; role: string; name: string }[] = [];
    for (const inst of plan.instances) {
      const key = `${inst.agentId}\u0000${inst.role}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const info = this.ctx.agents.get(inst.agentId);
      agents.push({ agentId: inst.agentId, role: inst.role, name: inst.name ?? info?.name ?? inst.agentId });
    }
    this.ctx.notifier.notify("product.teamRoster", { productId: this.productId, agents });
  }

  protected announceTopology(): void {
    this.ctx.notifier.notify("product.dagTopology", {
      productId: this.productId,
      nodes: this.model.state.tasks.map((t) => ({
        id: t.taskId,
        title: t.title,
        instanceId: t.instanceId,
        dependsOn: [...t.dependsOn],
        status: t.status,
      })),
    });
  }

  protected notifyTask(t: TaskState): void {
    this.ctx.notifier.notify("product.taskStatus", {
      productId: this.productId,
      taskId: t.taskId,
      status: t.status,
      attempt: t.attempts,
      ...(t.error !== undefined && (t.status === "failed" || t.status === "pending") ? { error: t.error } : {}),
      ...(t.question !== undefined ? { question: t.question } : {}),
    });
  }

  /** Schedules one execution wave (settle finished attempts, then start ready tasks) on the product's queue. */
  protected pump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    // The wave runs after the current turn of the event loop (ctx.defer), not on the next microtask: every result that
    // settles in the same turn (worker answers arrive in I/O callbacks) is then written in one wave, one transaction,
    // instead of one wave and its fsyncs per result. Nothing is acted on or announced before it is written.
    this.ctx.defer(() => {
      this.exclusive(async () => {
        this.pumpScheduled = false;
        await this.wave();
        // Stopped (paused by a failure or the budget, or its last workers settled after a pause or cancel): nothing
        // will take a parked worktree any more.
        if (!(this.driving && this.phase === "executing") && this.running.size === 0)
          await this.removeParkedWorkspaces();
      })
        .catch((err: unknown) => {
          if (!(err instanceof DomainError))
            this.ctx.logger.error({ productId: this.productId, err }, "execution wave failed");
        })
        .finally(() => this.resolveIdle());
    });
  }

  /**
   * One wave, inside the exclusive section: everything that settled since the last wave is written in one append
   * (results, usage, automatic checkpoints), then the tasks that became ready are marked running in a second append,
   * and only then are workers called (guarantee 1).
   */
  protected async wave(): Promise<void> {
    const results = this.settled.splice(0);
    const events: NewEvent[] = [];
    const announce: TaskState[] = [];
    const finalFailures: string[] = [];
    /** Events already written in this wave: a merge is recorded only after everything before it (guarantee 11). */
    const flushed: NewEvent[] = [];
    const integratedNow: { taskId: string; commit: string; changedFiles: string[] }[] = [];
    let configurationError: { cause: string; resumable: boolean; remediation: string } | undefined;
    let completedNow = 0;
    let completedUnwritten = 0;
    for (const r of results) {
      const current = this.task(r.taskId);
      // Stale results (task reset, removed or re-run since) are ignored. Attempt numbers alone cannot tell: a replay
      // restarts them, so an old worker's late answer could carry the new attempt's number.
      if (this.latestLaunch.get(r.taskId) !== r.entry) continue;
      this.latestLaunch.delete(r.taskId);
      if (!current || current.status !== "running" || current.attempts !== r.attempt) continue;
      const task: TaskState = { ...current, endedAt: this.now() };
      let res = r.result;
      if (res.outcome === "completed" && current.workspace && this.isolated()) {
        // Isolation: the attempt's commit is merged (serialised, recorded before the branch moves) before the task
        // counts as completed, so dependents start only after the merge is recorded.
        if (events.length > 0) {
          await this.commit(events);
          flushed.push(...events.splice(0));
          completedUnwritten = 0;
        }
        const integration = await this.integrateAttempt(current, res.output, r.inputHash);
        if (integration.workspace) task.workspace = integration.workspace;
        if (integration.ok) {
          events.push(...integration.events);
          if (integration.integrated) integratedNow.push({ taskId: task.taskId, ...integration.integrated });
        } else if (integration.halt) {
          // Not the attempt's fault (the branch was moved): no attempt spent, the product pauses (guarantee 16).
          res = { outcome: "failed", kind: "configuration", error: integration.error, ...integration.halt };
        } else res = { outcome: "failed", error: integration.error };
      }
      if (res.outcome === "completed") {
        task.status = "completed";
        task.output = res.output;
        delete task.error;
        delete task.interruption;
        completedNow++;
        completedUnwritten++;
      } else if (res.outcome === "waiting") {
        task.status = "waiting";
        task.question = res.question;
      } else if (res.outcome === "cancelled" || (!this.driving && this.stopReason !== null)) {
        // A worker stopped by pause/cancel/shutdown may report cancelled or failed; both mean "interrupted".
        const reason = this.stopReason ?? "pause";
        if (reason === "cancel") task.status = "cancelled";
        else {
          task.status = "pending";
          task.interruption = INTERRUPTION[reason];
        }
      } else if (res.outcome === "failed" && res.kind === "configuration") {
        // Retrying cannot fix a configuration error (DESIGN.md "Processes"): the task waits, the product pauses with
        // the fix, no retry is spent and the leader is not consulted (no fix-up task on the same broken agent).
        task.status = "pending";
        task.error = res.error;
        task.interruption = `The attempt could not start: ${res.error}`;
        configurationError ??= {
          cause: res.error,
          resumable: true,
          remediation: res.remediation ?? "Fix the agent configuration, then call product.resume.",
        };
      } else {
        task.error = res.outcome === "failed" ? res.error : "The worker stopped.";
        // A failed attempt is not an interruption: an interruption note left by an earlier attempt (e.g. a
        // configuration error) would make this failure count as interrupted and never use up a retry.
        delete task.interruption;
        const max = task.maxAttempts ?? this.ctx.options.defaultMaxAttempts;
        // A refusal by the permission policy would only be refused again: no retry under the same policy.
        const retryable = !(res.outcome === "failed" && res.kind === "permission");
        // Interrupted attempts (pause, shutdown, crash) do not use up retries: only failed ones count.
        if (retryable && attemptsUsed(this.model.state, task) < max && this.driving) task.status = "pending";
        else {
          task.status = "failed";
          finalFailures.push(task.taskId);
        }
      }
      if (r.entry.refusals.length > 0) {
        // Kept on the task across attempts (PROTOCOL.md section 5, TaskState.refusedPermissions), the newest 50.
        task.refusedPermissions = [...(current.refusedPermissions ?? []), ...r.entry.refusals].slice(-50);
      }
      events.push(
        task.status === "completed" ? { type: "task", task, inputHash: r.inputHash } : { type: "task", task },
      );
      // An attempt that never sent a prompt consumed nothing: it is not charged, not even by estimate.
      const prompted = !((res.outcome === "failed" || res.outcome === "cancelled") && res.prompted === false);
      if (!r.reportedUsage && prompted) {
        const outputChars = res.outcome === "completed" ? res.output.length : 0;
        events.push({
          type: "usage",
          taskId: task.taskId,
          inputTokens: estimateTokens(r.briefChars),
          outputTokens: estimateTokens(outputChars),
          estimated: true,
        });
      }
      if (task.status === "completed") {
        const done = this.model.counts.completed + completedUnwritten;
        events.push({
          type: "checkpoint",
          checkpointId: this.ctx.ids("ckp"),
          completed: Math.min(done, this.model.state.tasks.length),
          total: this.model.state.tasks.length,
        });
      }
      announce.push(task);
    }
    if (results.length > 0 || this.driving) events.push({ type: "elapsed", elapsedMs: this.elapsedMs() });
    if (events.length > 0) await this.commit(events);
    // While the product runs on, a finished attempt's worktree may serve its next attempt (cheaper than a checkout).
    const reuse = this.driving && this.phase === "executing";
    for (const r of results) await this.releaseWorkspace(r.entry.workspace, reuse);
    const sched = this.scheduler;
    for (const t of integratedNow)
      this.ctx.notifier.notify("product.taskIntegrated", { productId: this.productId, ...t });
    for (const t of announce) {
      this.notifyTask(t);
      sched?.settle(t.taskId, t.status === "running" ? "pending" : t.status);
    }
    for (const e of [...flushed, ...events]) {
      if (e.type === "checkpoint") {
        const ref = this.model.state.checkpoints.find((c) => c.checkpointId === e.checkpointId);
        if (ref)
          this.ctx.notifier.notify("product.checkpoint", {
            productId: this.productId,
            checkpointId: ref.checkpointId,
            at: ref.at,
          });
      }
    }
    if (results.length > 0) this.announceBudget();
    if (completedNow > 0) this.refreshHead();
    for (const id of finalFailures) this.consult(id);
    if (configurationError !== undefined && this.driving) {
      await this.pauseInside(configurationError, "pause");
      await this.writeHeader();
      this.resolveIdle();
      return;
    }
    if (this.driving && (await this.checkBudget())) {
      await this.writeHeader();
      this.resolveIdle();
      return;
    }
    if (this.driving && this.phase === "executing" && sched && this.pruneBeforeStart && this.running.size === 0) {
      // A resumed product first removes what a dead owner left and checks its branch (guarantee 11).
      this.pruneBeforeStart = false;
      await this.pruneWorkspaces(new Set());
      const problem = await this.verifyBranch();
      if (problem) {
        await this.pauseInside(
          {
            cause: problem,
            resumable: true,
            remediation:
              "Move the integration branch back to the recorded head (or roll back to a checkpoint), then call product.resume.",
          },
          "pause",
        );
        this.resolveIdle();
        return;
      }
    }
    if (this.driving && this.phase === "executing" && sched && (await this.leaseReady())) {
      const ready = sched.next();
      if (ready.length > 0) {
        const started: TaskState[] = [];
        const startEvents: NewEvent[] = [];
        for (const r of ready) {
          const current = this.task(r.taskId);
          if (!current) continue;
          const task: TaskState = {
            ...current,
            status: "running",
            attempts: current.attempts + 1,
            startedAt: this.now(),
          };
          delete task.endedAt;
          delete task.question;
          delete task.output;
          // Isolation: the attempt's worktree is recorded with its running state, before it is created.
          const workspace = await this.attemptWorkspace(task.taskId, task.attempts);
          if (workspace) task.workspace = workspace;
          else delete task.workspace;
          started.push(task);
          startEvents.push({ type: "task", task });
        }
        await this.commit(startEvents);
        for (const t of started) {
          this.notifyTask(t);
          this.launch(t);
        }
      }
      if (this.running.size === 0 && this.consultations === 0 && !sched.hasRunnable()) await this.finishIfDone();
    }
    if (results.length > 0 || events.length > 0 || flushed.length > 0) await this.writeHeader();
    this.resolveIdle();
  }

  /** Calls the worker for a task already persisted as running. Never throws; the result is queued for a wave. */
  protected launch(task: TaskState): void {
    const plan = this.model.state.plan as Plan;
    const instance = plan.instances.find((i) => i.instanceId === task.instanceId) ?? {
      instanceId: task.instanceId,
      agentId: this.ctx.options.fallbackWorkerAgentId,
      role: "worker",
    };
    const agentId = this.workerAgentFor(instance.agentId);
    const dependencyOutputs = task.dependsOn.map((id) => {
      const dep = this.task(id);
      return { taskId: id, title: dep?.title ?? id, output: dep?.output ?? "" };
    });
    const briefChars =
      task.title.length +
      task.description.length +
      (task.acceptance?.length ?? 0) +
      dependencyOutputs.reduce((n, d) => n + d.output.length + d.title.length, 0);
    const controller = new AbortController();
    const entry: RunningTask = {
      controller,
      attempt: task.attempts,
      startedMs: this.ctx.clock.now(),
      briefChars,
      reportedUsage: false,
      refusals: [],
      inputHash: taskInputHash(
        {
          ...this.inputOf(task),
          dependencyOutputs: dependencyOutputs.map((d) => ({ taskId: d.taskId, output: d.output })),
        },
        this.ctx.digest,
      ),
    };
    if (task.workspace) entry.workspace = task.workspace;
    this.running.set(task.taskId, entry);
    this.latestLaunch.set(task.taskId, entry);
    const taskDef: Task = {
      taskId: task.taskId,
      title: task.title,
      description: task.description,
      instanceId: task.instanceId,
      dependsOn: task.dependsOn,
      ...(task.acceptance !== undefined ? { acceptance: task.acceptance } : {}),
      ...(task.maxAttempts !== undefined ? { maxAttempts: task.maxAttempts } : {}),
    };
    const finish = (result: WorkerResult): void => {
      if (this.running.get(task.taskId) === entry) this.running.delete(task.taskId);
      this.settled.push({
        entry,
        taskId: task.taskId,
        attempt: entry.attempt,
        result,
        briefChars: entry.briefChars,
        reportedUsage: entry.reportedUsage,
        inputHash: entry.inputHash,
      });
      this.pump();
    };
    // Isolation: the worker runs in the attempt's worktree (its cwd and its fs confinement root), created first.
    const workspace = task.workspace;
    const prepared = workspace ? this.prepareWorkspace(workspace) : Promise.resolve();
    prepared
      .then(
        () => undefined,
        (err: unknown) =>
          `The task's worktree could not be prepared: ${err instanceof Error ? err.message : String(err)}`,
      )
      .then((prepareError) =>
        prepareError !== undefined
          ? // The adapter retried already; what fails still is the repository's, not the agent's: no attempt spent.
            finish({ outcome: "failed", kind: "configuration", error: prepareError, remediation: PREPARE_REMEDIATION })
          : this.runWorker(
              task,
              taskDef,
              { ...instance, agentId },
              workspace?.path ?? this.model.state.cwd,
              dependencyOutputs,
              controller,
              entry,
              finish,
            ),
      )
      .catch(() => undefined);
  }

  /** Runs the worker of a launched attempt in `cwd`; its result goes to `finish`. Never throws. */
  private runWorker(
    task: TaskState,
    taskDef: Task,
    instance: Instance,
    cwd: string,
    dependencyOutputs: { taskId: string; title: string; output: string }[],
    controller: AbortController,
    entry: RunningTask,
    finish: (result: WorkerResult) => void,
  ): void {
    if (controller.signal.aborted) {
      finish({ outcome: "cancelled" });
      return;
    }
    this.ctx.workers
      .runTask(
        {
          productId: this.productId,
          task: taskDef,
          instance,
          cwd,
          ...(cwd !== this.model.state.cwd ? { isolated: true } : {}),
          attempt: task.attempts,
          dependencyOutputs,
          signal: controller.signal,
        },
        {
          onText: (text) => {
            if (!controller.signal.aborted || this.stopReason !== "reset") {
              this.ctx.notifier.notify("product.taskOutputDelta", {
                productId: this.productId,
                taskId: task.taskId,
                text,
              });
            }
          },
          onActivity: (toolName) =>
            this.ctx.notifier.notify("product.agentActivity", {
              productId: this.productId,
              taskId: task.taskId,
              toolName,
            }),
          onPermissionRefused: (refusal) => {
            if (entry.refusals.length < 50) entry.refusals.push({ ...refusal });
          },
          onUsage: (usage) => {
            entry.reportedUsage = true;
            this.recordUsage(task.taskId, usage.inputTokens, usage.outputTokens);
          },
        },
      )
      .then(finish, (err: unknown) =>
        finish({
          outcome: "failed",
          error: `The worker failed unexpectedly: ${err instanceof Error ? err.message : String(err)}`,
        }),
      );
  }

  /** Resolves which agent runs an instance: the pseudo-agent `leader` runs on the leader's agent, else the fallback. */
  protected workerAgentFor(agentId: string): string {
    if (agentId !== "leader") return agentId;
    const leaderAgent = this.model.state.leaderAgentId;
    return leaderAgent && this.ctx.agents.get(leaderAgent) ? leaderAgent : this.ctx.options.fallbackWorkerAgentId;
  }

  protected recordUsage(taskId: string, inputTokens: number, outputTokens: number): void {
    const clean = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.floor(n) : 0);
    this.exclusive(async () => {
      await this.commit([
        { type: "usage", taskId, inputTokens: clean(inputTokens), outputTokens: clean(outputTokens), estimated: false },
      ]);
      this.announceBudget();
      if (this.driving && (await this.checkBudget())) this.resolveIdle();
    }).catch(() => undefined);
  }

  protected announceBudget(): void {
    const s = this.model.state;
    this.ctx.notifier.notify("product.budgetUpdate", {
      productId: this.productId,
      inputTokens: s.usage.inputTokens,
      outputTokens: s.usage.outputTokens,
      elapsedMs: this.liveElapsedMs(),
      ...(s.budget.maxTotalTokens !== undefined ? { maxTotalTokens: s.budget.maxTotalTokens } : {}),
    });
  }

  /**
   * Budget check (guarantee 9): one warning at 80 % of a limit, and on exceed the product pauses (not fails) and the
   * client is told which limit tripped. Returns true when the product was paused. Runs inside `exclusive`.
   */
  protected async checkBudget(): Promise<boolean> {
    const s = this.model.state;
    const used = s.usage.inputTokens + s.usage.outputTokens;
    const elapsed = this.liveElapsedMs();
    const maxTokens = s.budget.maxTotalTokens;
    const maxMs = s.budget.maxDurationMs;
    let exceeded: string | null = null;
    if (maxTokens !== undefined && used >= maxTokens) {
      exceeded = `The token budget is spent: ${used} of ${maxTokens} tokens used.`;
    } else if (maxMs !== undefined && elapsed >= maxMs) {
      exceeded = `The time budget is spent: ${elapsed} ms of ${maxMs} ms elapsed.`;
    }
    const base = {
      productId: this.productId,
      usedTokens: used,
      ...(maxTokens !== undefined ? { maxTotalTokens: maxTokens } : {}),
    };
    if (exceeded) {
      await this.pauseInside(
        {
          cause: exceeded,
          resumable: true,
          remediation: "Call product.resume with additionalBudget to continue; work done so far is kept.",
        },
        "pause",
      );
      this.ctx.notifier.notify("product.budgetExceeded", { ...base, reason: exceeded });
      return true;
    }
    if (!s.budgetWarned) {
      const ratio = this.ctx.options.budgetWarningRatio;
      let reason: string | null = null;
      if (maxTokens !== undefined && used >= ratio * maxTokens) {
        reason = `${Math.round((used / maxTokens) * 100)} % of the token budget is used (${used} of ${maxTokens}).`;
      } else if (maxMs !== undefined && elapsed >= ratio * maxMs) {
        reason = `${Math.round((elapsed / maxMs) * 100)} % of the time budget is used (${elapsed} of ${maxMs} ms).`;
      }
      if (reason) {
        await this.commit([{ type: "budgetWarned", reason }]);
        this.ctx.notifier.notify("product.budgetWarning", { ...base, reason });
      }
    }
    return false;
  }

  /** Asks the leader what to do about a task that failed its last attempt; runs outside the exclusive section. */
  protected consult(taskId: string): void {
    this.consultations++;
    const s = this.model.state;
    const failedTask = this.task(taskId);
    const plan = s.plan;
    const done = (): void => {
      this.consultations--;
      this.pump();
    };
    if (!failedTask || !plan) {
      done();
      return;
    }
    const skip = async (message: string): Promise<void> => {
      await this.exclusive(async () => {
        await this.commit([{ type: "dialogue", role: "leader", text: message }]);
        this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message });
        await this.skipDependents(taskId);
      });
    };
    const run = async (): Promise<void> => {
      if (this.leaderTurn) {
        await skip(`Task ${taskId} failed; the leader was busy, so its dependents are skipped.`);
        return;
      }
      this.leaderTurn = "consult";
      const controller = new AbortController();
      this.leaderController = controller;
      let decision;
      try {
        decision = await this.leader().consultOnFailure({
          productId: s.productId,
          goal: s.goal,
          failedTask: { ...failedTask },
          plan: s.plan ?? plan,
          tasks: s.tasks,
          roster: this.roster(),
          signal: controller.signal,
        });
      } catch (err) {
        if (err instanceof AgentConfigurationError && !controller.signal.aborted) {
          // The leader cannot be started (DESIGN.md "Processes"): pause with its fix instead of giving the branch up;
          // the dependents stay pending and the resume consults the leader again.
          this.leaderTurn = null;
          if (this.leaderController === controller) this.leaderController = null;
          await this.exclusive(async () => {
            if (!this.driving || this.phase !== "executing") return;
            await this.pauseInside(
              {
                cause: `The leader could not be consulted about the failure of task ${taskId}: ${err.message}`,
                resumable: true,
                remediation: remediationThen(err.remediation, "call product.resume"),
              },
              "pause",
            );
          });
          return;
        }
        decision = { kind: "giveUp" as const, message: `The leader could not be consulted: ${String(err)}` };
      } finally {
        this.leaderTurn = null;
        if (this.leaderController === controller) this.leaderController = null;
      }
      // Aborted by cancel or shutdown: decide nothing now. The dependents stay pending and a resume consults again.
      if (controller.signal.aborted) return;
      if (decision.kind === "mutate" && !TerminalPhases.includes(this.phase)) {
        const mutations = decision.mutations;
        const message = decision.message;
        const applied = await this.exclusive(async () => {
          const outcome = applyMutations(this.model.state.plan as Plan, this.model.state.tasks, mutations);
          if (!outcome.ok) return false;
          await this.commit([{ type: "dialogue", role: "leader", text: message }]);
          this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message });
          await this.applyMutationOutcome(mutations, outcome.plan, "leader");
          return true;
        });
        if (applied) return;
      }
      await skip(decision.message);
    };
    // Consultations run one at a time: a failure that arrives while another is being discussed waits its turn
    // instead of finding the leader busy and being given up unheard.
    const turn = this.consultQueue.then(run);
    this.consultQueue = turn.catch(() => undefined);
    turn
      .catch((err: unknown) => this.ctx.logger.warn({ productId: this.productId, err }, "leader consultation failed"))
      .finally(done);
  }

  /** Marks every pending transitive dependent of a finally failed task `skipped`. Inside `exclusive`. */
  protected async skipDependents(taskId: string): Promise<void> {
    const ids = downstreamOf(this.model.state.tasks, taskId).filter((id) => id !== taskId);
    const events: NewEvent[] = [];
    const skipped: TaskState[] = [];
    for (const id of ids) {
      const t = this.task(id);
      if (!t || (t.status !== "pending" && t.status !== "waiting")) continue;
      const task: TaskState = { ...t, status: "skipped", error: `Skipped because task ${taskId} failed.` };
      events.push({ type: "task", task });
      skipped.push(task);
    }
    if (events.length === 0) return;
    await this.commit(events);
    for (const t of skipped) {
      this.scheduler?.settle(t.taskId, "skipped");
      this.notifyTask(t);
    }
  }

  /** Ends the product when nothing is left to run: completed if every task completed, else failed. */
  protected async finishIfDone(): Promise<void> {
    const tasks = this.model.state.tasks;
    const counts = this.model.counts;
    if (counts.pending > 0 || counts.running > 0) return;
    if (counts.waiting > 0) return; // guarantee 8: waiting is not failing
    const moved = await this.branchProblem();
    if (moved) {
      await this.pauseInside({ cause: moved, resumable: true, remediation: BRANCH_MOVED_REMEDIATION }, "pause");
      return;
    }
    const failed = tasks.filter((t) => t.status !== "completed");
    const phase = failed.length === 0 ? "completed" : "failed";
    const summary =
      phase === "completed"
        ? `All ${tasks.length} tasks completed.`
        : `${tasks.length - failed.length} of ${tasks.length} tasks completed; ${failed
            .map((t) => `${t.taskId} ${t.status}`)
            .join(", ")}.`;
    const recovery =
      phase === "failed"
        ? {
            cause: summary,
            resumable: false,
            remediation:
              "Replay a failed task with product.replayTask, roll back with product.rollback, or mutate the plan and replay.",
          }
        : null;
    // Isolation: no worktree outlives the run; the end of the integration (merge mode: into the target) is recorded
    // with the outcome.
    await this.removeParkedWorkspaces();
    const ended = await this.endIntegration(phase === "completed");
    await this.commit([
      ...ended,
      { type: "elapsed", elapsedMs: this.elapsedMs() },
      { type: "phase", phase, recovery },
      { type: "dialogue", role: "leader", text: summary, outcome: true },
    ]);
    this.announceIntegrated();
    this.stopDriving();
    try {
      await this.writeHeader();
    } finally {
      // Nothing runs any more: give the lease back before telling the client, so it may act on the outcome at once.
      await this.releaseLease().catch(() => undefined);
      // The terminal phase is already in the event stream; a failed header (an index) must not hide the outcome.
      this.ctx.notifier.notify("product.completed", {
        productId: this.productId,
        projectId: this.model.state.projectId,
        phase,
        summary,
      });
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Timers

  protected armTimers(): void {
    this.disarmTimers();
    const maxMs = this.model.state.budget.maxDurationMs;
    if (maxMs !== undefined) {
      const left = Math.max(0, maxMs - this.liveElapsedMs());
      this.cancelTimers.push(this.ctx.clock.setTimer(left + 1, () => this.pump()));
      const warnAt = this.ctx.options.budgetWarningRatio * maxMs - this.liveElapsedMs();
      if (warnAt > 0) this.cancelTimers.push(this.ctx.clock.setTimer(warnAt + 1, () => this.pump()));
    }
    this.scheduleSafetyCheckpoint();
  }

  protected scheduleSafetyCheckpoint(): void {
    const ageMs = this.ctx.clock.now() - Date.parse(this.model.state.createdAt);
    const period =
      ageMs > 48 * 3_600_000 ? this.ctx.options.longRunSafetyCheckpointMs : this.ctx.options.safetyCheckpointMs;
    this.cancelTimers.push(
      this.ctx.clock.setTimer(period, () => {
        if (!this.driving) return;
        this.checkpoint()
          .catch(() => undefined)
          .finally(() => {
            if (this.driving) this.scheduleSafetyCheckpoint();
          });
      }),
    );
  }
}
