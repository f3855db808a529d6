/**
 * The execution loop of one product (issue 27: input → decide → persist events → run effects): waves that take what
 * the worker pool settled, let `decide` say what each result means, write it in one append, announce it, then start
 * the tasks that became ready (written as running before any worker is called, guarantee 1); the end of the run,
 * budgets (guarantee 9, through budget-watch.ts), skipping the dependents of a failed task, and pausing from inside
 * the loop. Owns whether this process drives the run, the ready set (Scheduler), whether a wave is queued, and
 * whether the next wave must first check the workspace. Everything it carries out goes through a collaborator (parts.ts).
 *
 * This file must never import I/O.
 */
import type { Instance, Plan, Task, TaskState } from "../../../protocol/common.js";
import { planGraphIndex, sameGraph } from "../dag/graph.js";
import { Scheduler } from "../dag/scheduler.js";
import { BRANCH_MOVED_REMEDIATION } from "../workspace/integration.js";
import { DomainError } from "../errors.js";
import { decide, finishEvents, instanceOf, skipEvents, taskOf } from "./decide.js";
import type { Effect, IntegrationOutcome, NewEvent, Recovery, StopReason } from "./decide.js";
import { taskInputHash } from "./fingerprint.js";
import { taskInputsOf, type AgentInputs } from "./agent-inputs.js";
import { checkProductState } from "./integrity.js";
import type { ProductParts } from "./parts.js";
import type { LaunchHooks, SettledResult } from "./worker-pool.js";
import { noteOverload } from "./task-waits.js";
import { BudgetWatch } from "./budget-watch.js";

/** What the first half of a wave decided about the settled results. */
interface Settled {
  events: NewEvent[];
  /** Events already written in this wave: a merge is recorded only after everything before it (guarantee 11). */
  flushed: NewEvent[];
  announce: TaskState[];
  integratedNow: { taskId: string; commit: string; changedFiles: string[] }[];
  consults: string[];
  pause: Recovery | undefined;
  completedNow: number;
  /** Results sent back to be verified on the head as it is now (guarantee 17): their worktrees stay. */
  reverify: SettledResult[];
}

export class ExecutionLoop {
  /** True while this process drives execution (holds the product). */
  #driving = false;
  #scheduler: Scheduler | null = null;
  #waveQueued = false;
  /** Set when driving starts: the next wave first prunes leftover worktrees and verifies the branch (guarantee 11). */
  #checkWorkspaceFirst = false;

  /** Token and time budgets of this run (guarantee 9). */
  readonly #budget: BudgetWatch;

  constructor(private readonly p: ProductParts) {
    this.#budget = new BudgetWatch(p, this);
  }

  get driving(): boolean {
    return this.#driving;
  }

  /** True while a wave is queued and has not begun. */
  get waveQueued(): boolean {
    return this.#waveQueued;
  }

  private get productId(): string {
    return this.p.model.state.productId;
  }

  /** Resolves once no worker is running and every settled result was written. */
  whenIdle(): Promise<void> {
    return this.p.pool.whenIdle(this.#waveQueued);
  }

  /** The ready set follows a change of the task list (mutation, answered question, replay). */
  rebuildScheduler(): void {
    this.#scheduler?.rebuild(this.p.model.state.tasks);
  }

  /** Begins (or resumes) driving execution in this process. Announces the team and the DAG. */
  startDriving(): void {
    const p = this.p;
    if (this.#driving || p.journal.fenced || p.model.state.phase !== "executing") return;
    if (!p.ownership.held) {
      p.ctx.logger.warn({ productId: this.productId }, "not starting execution: this process holds no lease");
      return;
    }
    // Guarantee 15: nothing read back may crash the process. A state that is not whole is never scheduled (resume,
    // rollback and replay refuse it first; this is the last line, e.g. for a state another process wrote meanwhile).
    const invalid = p.health.invalid ?? checkProductState(p.model.state, this.productId);
    let scheduler: Scheduler | undefined;
    try {
      if (invalid === undefined) {
        // The plan's graph index, built when the plan was validated, when the task states follow the plan's graph
        // (issue 34: not built a second time); the scheduler keeps only ids and statuses of the states.
        const { plan, tasks } = p.model.state;
        const index = plan && sameGraph(plan.tasks, tasks) ? planGraphIndex(plan.tasks) : undefined;
        scheduler = new Scheduler(tasks, p.model.state.maxParallelTasks ?? p.ctx.options.maxParallelTasks, index);
      }
    } catch (err) {
      p.health.invalid = err instanceof Error ? err.message : String(err);
    }
    if (!scheduler) {
      p.health.invalid ??= invalid;
      p.ctx.logger.error(
        { productId: this.productId, cause: p.health.invalid },
        "not starting execution: stored state is not whole",
      );
      p.access.releaseWhenIdle();
      return;
    }
    this.#driving = true;
    this.#checkWorkspaceFirst = true;
    p.timers.start();
    this.#scheduler = scheduler;
    this.announceTeam();
    this.announceTopology();
    p.timers.arm(
      () => this.pump(),
      () => p.history.checkpoint(),
      () => this.#driving,
    );
    this.reconsultUnsettledFailures();
    this.pump();
  }

  /** Stops driving in this process: no more waves start tasks, the timers are disarmed, the clock stops. */
  stopDriving(): void {
    this.#driving = false;
    this.p.timers.stop();
  }

  /**
   * A task that failed for good while its consultation was interrupted (cancel, shutdown, crash) still has pending
   * dependents that can never become ready: consult the leader again for each such task.
   */
  private reconsultUnsettledFailures(): void {
    if (this.p.leader.consulting) return; // consultations of this process are still queued or running
    const tasks = this.p.model.state.tasks;
    const failedWithPending = new Set<string>();
    const failed = new Set(tasks.filter((t) => t.status === "failed").map((t) => t.taskId));
    if (failed.size === 0) return;
    for (const t of tasks) {
      if (t.status !== "pending") continue;
      for (const d of t.dependsOn) if (failed.has(d)) failedWithPending.add(d);
    }
    for (const id of failedWithPending) this.p.leader.consult(id);
  }

  private announceTeam(): void {
    const plan = this.p.model.state.plan;
    if (!plan) return;
    const seen = new Set<string>();
    const agents: { agentId: string; role: string; name: string }[] = [];
    for (const inst of plan.instances) {
      const key = `${inst.agentId}\u0000${inst.role}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const info = this.p.ctx.agents.get(inst.agentId);
      agents.push({ agentId: inst.agentId, role: inst.role, name: inst.name ?? info?.name ?? inst.agentId });
    }
    this.p.ctx.notifier.notify("product.teamRoster", { productId: this.productId, agents });
  }

  announceTopology(): void {
    this.p.ctx.notifier.notify("product.dagTopology", {
      productId: this.productId,
      nodes: this.p.model.state.tasks.map((t) => ({
        id: t.taskId,
        title: t.title,
        instanceId: t.instanceId,
        dependsOn: [...t.dependsOn],
        status: t.status,
      })),
    });
  }

  notifyTask(t: TaskState): void {
    this.p.ctx.notifier.notify("product.taskStatus", {
      productId: this.productId,
      taskId: t.taskId,
      status: t.status,
      attempt: t.attempts,
      ...(t.error !== undefined && (t.status === "failed" || t.status === "pending") ? { error: t.error } : {}),
      ...(t.question !== undefined ? { question: t.question } : {}),
    });
  }

  /** Schedules one execution wave (settle finished attempts, then start ready tasks) on the product's queue. */
  pump(): void {
    if (this.#waveQueued) return;
    this.#waveQueued = true;
    const p = this.p;
    // The wave runs after the current turn of the event loop (ctx.defer), not on the next microtask: every result that
    // settles in the same turn (worker answers arrive in I/O callbacks) is then written in one wave, one transaction,
    // instead of one wave and its fsyncs per result. Nothing is acted on or announced before it is written.
    p.ctx.defer(() => {
      p.sections
        .run(async () => {
          this.#waveQueued = false;
          await this.wave();
          // Stopped (paused by a failure or the budget, or its last workers settled after a pause or cancel): nothing
          // will take a parked worktree any more.
          if (!(this.#driving && p.model.state.phase === "executing") && p.pool.size === 0)
            await p.workspaces.removeParkedWorkspaces();
        })
        .catch((err: unknown) => {
          if (!(err instanceof DomainError))
            p.ctx.logger.error({ productId: this.productId, err }, "execution wave failed");
        })
        .finally(() => p.pool.resolveIdle());
    });
  }

  /**
   * One wave, inside the exclusive section: everything that settled since the last wave is written in one append
   * (results, usage, automatic checkpoints), then the tasks that became ready are marked running in a second append,
   * and only then are workers called (guarantee 1). A wave with nothing settled has one append: its elapsed time and
   * its starts.
   */
  private async wave(): Promise<void> {
    const p = this.p;
    const results = p.pool.take();
    const settled = await this.settleAll(results);
    const events = settled.events;
    // A wave with nothing settled (a run's first) writes its elapsed time with its starts, in one commit instead of
    // two (issue 34: one fsync fewer per run on SQLite). The time is taken as it is written: until then the open span
    // still counts in the live elapsed time the budget check reads (timers.ts).
    const elapsed = {
      due: this.#driving && results.length === 0 && events.length === 0 && settled.flushed.length === 0,
    };
    if ((results.length > 0 || this.#driving) && !elapsed.due)
      events.push({ type: "elapsed", elapsedMs: p.timers.elapsedMs() });
    const written = events.length > 0 || elapsed.due;
    if (events.length > 0) await p.journal.commit(events);
    // While the product runs on, a finished attempt's worktree may serve its next attempt (cheaper than a checkout).
    const reuse = this.#driving && p.model.state.phase === "executing";
    for (const { entry } of results.filter((r) => r.entry.workspace && !settled.reverify.includes(r)))
      await p.workspaces.releaseWorkspace(entry.workspace, reuse); // none to release: no await (issue 34)
    for (const r of settled.reverify) p.verification.reverify(r); // guarantee 17: on the head as it is now
    this.announceSettled(settled, results.length > 0);
    for (const id of settled.consults) p.leader.consult(id);
    // A pause records the elapsed time it stops at (pauseInside).
    if (await this.stopsHere(settled.pause)) return;
    const sched = this.#scheduler;
    if (this.#driving && p.model.state.phase === "executing" && sched && (await this.leaseReady())) {
      await this.startReady(sched, elapsed);
      if (p.pool.size === 0 && !p.leader.consulting && !sched.hasRunnable()) await this.finishIfDone();
    }
    // Nothing started: the time alone, unless the run stopped meanwhile (its end, or a pause, wrote the time it stopped
    // at, before its outcome: nothing is written after that, nor after the lease is given back).
    if (elapsed.due && this.#driving) await p.journal.commit([{ type: "elapsed", elapsedMs: p.timers.elapsedMs() }]);
    if (results.length > 0 || written || settled.flushed.length > 0) await p.journal.writeWaveHeader();
    p.pool.resolveIdle();
  }

  /** Decides what each settled result means (integrating completed isolated attempts first), in settle order. */
  private async settleAll(results: SettledResult[]): Promise<Settled> {
    const p = this.p;
    const out: Settled = {
      events: [],
      flushed: [],
      announce: [],
      integratedNow: [],
      consults: [],
      pause: undefined,
      completedNow: 0,
      reverify: [],
    };
    let completedUnwritten = 0;
    for (let i = 0; i < results.length; i++) {
      const r = results[i] as SettledResult;
      if (!p.pool.claim(r)) continue;
      const current = taskOf(p.model, r.taskId);
      if (!current || current.status !== "running" || current.attempts !== r.attempt) continue;
      const now = p.journal.now();
      let integration: IntegrationOutcome | undefined;
      if (r.result.outcome === "completed" && current.workspace && p.workspaces.isolated()) {
        // Isolation: the attempt's commit is merged (serialised, recorded before the branch moves) before the task
        // counts as completed, so dependents start only after the merge is recorded.
        if (out.events.length > 0) {
          await p.journal.commit(out.events);
          out.flushed.push(...out.events.splice(0));
          completedUnwritten = 0;
        }
        const res = await p.workspaces.integrateAttempt(current, r.result.output, r.inputHash);
        integration = res;
        if (res.ok && res.integrated) out.integratedNow.push({ taskId: current.taskId, ...res.integrated });
      }
      const decision = decide(p.model, {
        kind: "attemptSettled",
        attempt: r,
        ...(integration ? { integration } : {}),
        now,
        driving: this.#driving,
        stopReason: p.pool.stopReason,
        defaultMaxAttempts: p.ctx.options.defaultMaxAttempts,
        completedUnwritten,
        checkpointId: () => p.ctx.ids("ckp"),
      });
      if (decision.effects.some((e) => e.kind === "verify")) out.reverify.push(r);
      const task = decision.events.find((e) => e.type === "task")?.task;
      if (!task) continue;
      if (task.status === "completed") {
        out.completedNow++;
        completedUnwritten++;
      }
      for (const effect of decision.effects) {
        if (effect.kind === "consult") out.consults.push(effect.taskId);
        else if (effect.kind === "pause") out.pause ??= effect.recovery;
      }
      out.events.push(...decision.events);
      out.announce.push(task);
    }
    return out;
  }

  /** Announces what a wave wrote: merges, task statuses (and the ready set), checkpoints, the budget, the HEAD. */
  private announceSettled(settled: Settled, anyResult: boolean): void {
    const p = this.p;
    const sched = this.#scheduler;
    for (const t of settled.integratedNow)
      p.ctx.notifier.notify("product.taskIntegrated", { productId: this.productId, ...t });
    // Indexed loops over a wave's results (issue 34: up to one per task; an iterator step allocates in code that is
    // not optimised yet).
    for (let i = 0; i < settled.announce.length; i++) {
      const t = settled.announce[i] as TaskState;
      this.notifyTask(t);
      sched?.settle(t.taskId, t.status === "running" ? "pending" : t.status);
    }
    for (const written of [settled.flushed, settled.events]) {
      for (let i = 0; i < written.length; i++) {
        const e = written[i] as NewEvent;
        const checkpointId = e.type === "task" ? e.checkpoint?.checkpointId : undefined; // a completion's (issue 34)
        if (checkpointId === undefined) continue;
        const ref = p.model.state.checkpoints.findLast((c) => c.checkpointId === checkpointId); // just added: last
        if (ref)
          p.ctx.notifier.notify("product.checkpoint", {
            productId: this.productId,
            checkpointId: ref.checkpointId,
            at: ref.at,
          });
      }
    }
    if (anyResult) this.#budget.announce();
    if (settled.completedNow > 0) p.inputs.refreshHead();
  }

  /**
   * True when the wave must stop before starting tasks: a configuration error or the budget paused the product, or
   * a resumed product's first look at its workspace found the integration branch moved (guarantee 11).
   */
  private async stopsHere(configurationError: Recovery | undefined): Promise<boolean> {
    const p = this.p;
    if (configurationError !== undefined && this.#driving) {
      await this.pauseInside(configurationError, "pause");
      await p.journal.writeHeader();
      p.pool.resolveIdle();
      return true;
    }
    if (this.#driving && (await this.#budget.check())) {
      await p.journal.writeHeader();
      p.pool.resolveIdle();
      return true;
    }
    if (!(this.#driving && p.model.state.phase === "executing" && this.#scheduler && this.#checkWorkspaceFirst))
      return false;
    if (p.pool.size > 0) return false;
    // A resumed product first removes what a dead owner left and checks its branch (guarantee 11).
    this.#checkWorkspaceFirst = false;
    await p.workspaces.pruneWorkspaces(new Set());
    // And the verify worktrees of its repository that gone processes left (once per repository per server process).
    if (p.model.state.isolation === "worktree") await p.ctx.verifier?.sweep?.(p.model.state.cwd);
    const problem = await p.workspaces.verifyBranch();
    if (!problem) return false;
    const remediation =
      "Move the integration branch back to the recorded head (or roll back to a checkpoint), then call product.resume.";
    await this.pauseInside({ cause: problem, resumable: true, remediation }, "pause");
    p.pool.resolveIdle();
    return true;
  }

  /**
   * True when the lease is held and fresh enough to start workers; renews it first when the clock says it may have
   * lapsed (e.g. a stalled event loop). A lost lease fences this instance (orchestrator.ts `onLeaseLost`).
   */
  private async leaseReady(): Promise<boolean> {
    return (await this.p.ownership.ready()) && !this.p.journal.fenced;
  }

  /**
   * Marks the ready tasks running (one append, their worktrees recorded first, after the wave's elapsed time when it
   * is `due`, which it then no longer is), then launches their workers.
   */
  private async startReady(sched: Scheduler, elapsed: { due: boolean }): Promise<void> {
    const p = this.p;
    const ready = sched.next();
    if (ready.length === 0) return;
    const starting: { task: TaskState; workspace?: NonNullable<TaskState["workspace"]> }[] = [];
    // Shared: no attempt has a worktree, and nothing is awaited per task (issue 34: 100 awaits per wave).
    const isolated = p.workspaces.isolated() !== null;
    for (let i = 0; i < ready.length; i++) {
      const current = taskOf(p.model, (ready[i] as { taskId: string }).taskId);
      if (!current) continue;
      const workspace = isolated
        ? await p.workspaces.attemptWorkspace(current.taskId, current.attempts + 1)
        : undefined;
      starting.push(workspace ? { task: current, workspace } : { task: current });
    }
    const decision = decide(p.model, { kind: "start", ready: starting, now: p.journal.now() });
    const time: NewEvent[] = elapsed.due ? [{ type: "elapsed", elapsedMs: p.timers.elapsedMs() }] : [];
    elapsed.due = false;
    await p.journal.commit([...time, ...decision.events]);
    const inputs = taskInputsOf(p.model.state); // the same for every task of the wave: nothing is written in between
    for (let i = 0; i < decision.effects.length; i++) {
      const effect = decision.effects[i] as Effect;
      if (effect.kind !== "launch") continue;
      // The started state as written (the `started` event's `at` is its start time; evolve.ts onStarted).
      const task = taskOf(p.model, effect.task.taskId) ?? effect.task;
      this.notifyTask(task);
      this.launch(task, inputs);
    }
  }

  /** Calls the worker for a task already persisted as running. Never throws; the result is queued for a wave. */
  private launch(task: TaskState, inputs: AgentInputs): void {
    const p = this.p;
    const instance: Instance = instanceOf(p.model.state.plan as Plan, task.instanceId) ?? {
      instanceId: task.instanceId,
      agentId: p.ctx.options.fallbackWorkerAgentId,
      role: "worker",
    };
    const dependencyOutputs = task.dependsOn.map((id) => {
      const dep = taskOf(p.model, id);
      return { taskId: id, title: dep?.title ?? id, output: dep?.output ?? "" };
    });
    const briefChars =
      task.title.length +
      task.description.length +
      (task.acceptance?.length ?? 0) +
      dependencyOutputs.reduce((n, d) => n + d.output.length + d.title.length, 0);
    // What `RunInputs.inputOf` gives (the planned assignee, the dependency outputs now), from what is at hand here.
    const inputHash = taskInputHash(
      {
        title: task.title,
        description: task.description,
        acceptance: task.acceptance,
        instanceId: task.instanceId,
        agentId: instance.agentId,
        dependencyOutputs,
      },
      p.ctx.digest,
    );
    const taskDef: Task = {
      taskId: task.taskId,
      title: task.title,
      description: task.description,
      instanceId: task.instanceId,
      dependsOn: task.dependsOn,
      ...(task.acceptance !== undefined ? { acceptance: task.acceptance } : {}),
      ...(task.maxAttempts !== undefined ? { maxAttempts: task.maxAttempts } : {}),
    };
    const workspace = task.workspace;
    const cwd = workspace?.cwd ?? workspace?.path ?? p.model.state.cwd;
    p.pool.launch(
      {
        productId: this.productId,
        task: taskDef,
        attempt: task.attempts,
        instance: { ...instance, agentId: this.workerAgentFor(instance.agentId) },
        cwd,
        ...(cwd !== p.model.state.cwd ? { isolated: true, checkout: p.model.state.cwd } : { isolated: false }),
        dependencyOutputs,
        briefChars,
        inputHash,
        ...(workspace ? { workspace, prepare: () => p.workspaces.prepareWorkspace(workspace) } : {}),
        inputs,
        ...(task.attempts > 1 && task.error !== undefined ? { previousError: task.error } : {}),
        ...(workspace ? p.verification.verifyHook(task.taskId) : {}),
      },
      this.hooksFor(task),
    );
  }

  private hooksFor(task: TaskState): LaunchHooks {
    const p = this.p;
    const taskId = task.taskId;
    const live = p.ctx.liveOutput?.forTask(p.model.state.projectId, this.productId, taskId, task.attempts);
    return {
      onText: (text: string, signal: AbortSignal) => {
        if (!signal.aborted || p.pool.stopReason !== "reset") {
          p.ctx.notifier.notify("product.taskOutputDelta", { productId: this.productId, taskId, text });
          live?.note(text);
        }
      },
      onActivity: (toolName: string) => {
        p.ctx.notifier.notify("product.agentActivity", { productId: this.productId, taskId, toolName });
        live?.note(`\n[tool] ${toolName}\n`);
      },
      onUsage: (inputTokens: number, outputTokens: number) =>
        this.#budget.recordUsage(taskId, inputTokens, outputTokens),
      onOverloaded: (entry, wait) => noteOverload(p.ctx, this.productId, task, entry, wait),
      onSettled: () => {
        live?.end();
        this.pump();
      },
    };
  }

  /** Resolves which agent runs an instance: the pseudo-agent `leader` runs on the leader's agent, else the fallback. */
  private workerAgentFor(agentId: string): string {
    if (agentId !== "leader") return agentId;
    const leaderAgent = this.p.model.state.leaderAgentId;
    return leaderAgent && this.p.ctx.agents.get(leaderAgent) ? leaderAgent : this.p.ctx.options.fallbackWorkerAgentId;
  }

  /** Marks every pending transitive dependent of a finally failed task `skipped`. Inside `exclusive`. */
  async skipDependents(taskId: string): Promise<void> {
    const { events, skipped } = skipEvents(this.p.model, taskId);
    if (events.length === 0) return;
    await this.p.journal.commit(events);
    for (const t of skipped) {
      this.#scheduler?.settle(t.taskId, "skipped");
      this.notifyTask(t);
    }
  }

  /** Ends the product when nothing is left to run (decide.ts): completed if every task completed, else failed. */
  private async finishIfDone(): Promise<void> {
    const p = this.p;
    let effect = decide(p.model, { kind: "quiescent" }).effects.find(
      (e): e is Extract<Effect, { kind: "finish" }> => e.kind === "finish",
    );
    if (!effect) return;
    if (effect.phase === "completed") {
      const final = await p.verification.finalVerification();
      if (final === "wait") return;
      if (final) effect = final;
    }
    const moved = await p.workspaces.branchProblem();
    if (moved) {
      await this.pauseInside({ cause: moved, resumable: true, remediation: BRANCH_MOVED_REMEDIATION }, "pause");
      return;
    }
    // Isolation: no worktree outlives the run; the end of the integration (merge mode: into the target) is recorded
    // with the outcome.
    await p.workspaces.removeParkedWorkspaces();
    const ended = await p.workspaces.endIntegration(effect.phase === "completed");
    await p.journal.commit(finishEvents(effect, ended, p.timers.elapsedMs()));
    p.workspaces.announceIntegrated();
    this.stopDriving();
    try {
      await p.journal.writeHeader();
    } finally {
      // Nothing runs any more: give the lease back before telling the client, so it may act on the outcome at once.
      await p.access.releaseLease().catch(() => undefined);
      // The terminal phase is already in the event stream; a failed header (an index) must not hide the outcome.
      p.ctx.notifier.notify("product.completed", {
        productId: this.productId,
        projectId: p.model.state.projectId,
        phase: effect.phase,
        summary: effect.summary,
      });
    }
  }

  /** Pauses inside the exclusive section: persists the phase, stops scheduling, aborts workers. */
  async pauseInside(recovery: Recovery, reason: StopReason): Promise<void> {
    const p = this.p;
    const elapsedMs = p.timers.elapsedMs();
    this.stopDriving();
    await p.journal.commit(
      [
        { type: "elapsed", elapsedMs },
        { type: "phase", phase: "paused", recovery },
      ],
      { header: true },
    );
    p.pool.stop(reason);
    p.access.releaseWhenIdle();
  }
}
