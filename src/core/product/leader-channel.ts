/**
 * The leader channel of one product: the planning dialogue (planning turns, questions and answers, revisions), the
 * user's messages to the leader during execution (whose answer may carry mutations) and the consultation of the
 * leader about a task that failed for good. Owns the leader turn in flight (one at a time: `busy`), its abort
 * controller, whether planning started in this process, and the queue of consultations. Writes through the journal
 * and asks the execution loop to run, never the other way round.
 *
 * This file must never import I/O.
 */
import type { Mutation, Plan, TaskState } from "../../../protocol/common.js";
import { TerminalPhases } from "../../../protocol/common.js";
import { validatePlanLists } from "../dag/graph.js";
import { applyMutations } from "../dag/mutations.js";
import { busy, invalidInput, invalidPhase } from "../errors.js";
import { AgentConfigurationError, remediationThen } from "../ports.js";
import type { AgentInfo, DraftPlan, FailureDecision, LeaderPort } from "../ports.js";
import { answeredTask, taskOf } from "./decide.js";
import type { ProductParts } from "./parts.js";
import type { ProductState } from "./records.js";
import type { NewEvent } from "./decide.js";
import { sessionInputsOf, type AttachmentRef } from "./agent-inputs.js";

/** The task id a red final head is presented to the leader as (guarantee 17, `when: "end"`; never in the plan). */
export const FINAL_VERIFICATION_TASK_ID = "final-verification";

export class LeaderChannel {
  /** The leader turn in flight: `plan`, `message`, `consult`, or `reserved` while a user message is written. */
  private leaderTurn: string | null = null;
  /** Aborts the running leader turn (planning, message or consultation) on cancel, delete and shutdown. */
  private leaderController: AbortController | null = null;
  private planningStartedHere = false;
  private consultations = 0;
  private consultQueue: Promise<void> = Promise.resolve();

  constructor(private readonly p: ProductParts) {}

  private get productId(): string {
    return this.p.model.state.productId;
  }

  private get phase() {
    return this.p.model.state.phase;
  }

  /** True once planning started in this process (a turn ran or a message planned). */
  get planningStarted(): boolean {
    return this.planningStartedHere;
  }

  /** True while consultations of this process are queued or running. */
  get consulting(): boolean {
    return this.consultations > 0;
  }

  /** True when no leader turn runs or is reserved and no controller is held. */
  get idle(): boolean {
    return this.leaderTurn === null && this.leaderController === null;
  }

  leader(): LeaderPort {
    return this.p.ctx.leader(this.p.model.state.leaderAgentId);
  }

  /**
   * Agents the plan may use: `allowedAgents` is presence-based (omitted = the registry's team, [] = the leader alone);
   * given, it names the team itself, the built-in worker included (issue 28), in the order given.
   */
  roster(): AgentInfo[] {
    const allowed = this.p.model.state.allowedAgents;
    if (allowed === undefined) return this.p.ctx.agents.list();
    return [...new Set(allowed)].flatMap((id) => this.p.ctx.agents.get(id) ?? []);
  }

  /** Starts the first planning turn (asynchronously; `product.plan` has answered already). */
  startPlanning(): void {
    if (this.planningStartedHere) return;
    this.planningStartedHere = true;
    this.runLeaderPlanning(undefined).catch((err: unknown) => {
      this.p.ctx.logger.error({ productId: this.productId, err }, "planning turn failed");
    });
  }

  /**
   * One planning turn: asks the leader for a plan (or questions), validates it, persists and announces it.
   * Returns the leader's message and the plan when one was produced.
   */
  async runLeaderPlanning(answers?: { askId: string; content: string }): Promise<{ response: string; plan?: Plan }> {
    if (this.leaderTurn) throw busy(this.productId);
    this.leaderTurn = "plan";
    const controller = new AbortController();
    this.leaderController = controller;
    try {
      const s = this.p.model.state;
      let result;
      try {
        result = await this.leader().plan({
          productId: s.productId,
          goal: s.goal,
          cwd: s.cwd,
          roster: this.roster(),
          maxParallelTasks: s.maxParallelTasks ?? this.p.ctx.options.maxParallelTasks,
          ...sessionInputsOf(s),
          ...(s.provisionalName ? {} : { title: s.name }),
          dialogue: s.dialogue.map((d) => ({ ...d })),
          ...(s.plan ? { previousPlan: s.plan } : {}),
          ...(answers ? { answers } : {}),
          signal: controller.signal,
          onText: (text) => this.p.ctx.notifier.notify("product.planningDelta", { productId: s.productId, text }),
        });
      } catch (err) {
        // A turn aborted by cancel, delete or shutdown is not a planning failure: the product keeps its phase and a
        // later product.message plans again.
        if (controller.signal.aborted) return { response: "The leader's turn was cancelled." };
        if (err instanceof AgentConfigurationError) return this.pauseForLeaderConfiguration(err);
        const error = `The leader could not plan: ${err instanceof Error ? err.message : String(err)}`;
        return await this.p.sections.run(async () => {
          await this.p.journal.commit([{ type: "planFailed", error }], { header: true });
          this.p.ctx.notifier.notify("product.planFailed", { productId: this.productId, error });
          return { response: error };
        });
      }
      return await this.p.sections.run(async () => {
        if (TerminalPhases.includes(this.phase)) return { response: result.message };
        if (result.kind === "ask") {
          const askId = this.p.ctx.ids("ask");
          await this.p.journal.commit(
            [
              { type: "dialogue", role: "leader", text: result.message },
              { type: "asked", askId, questions: result.questions },
            ],
            { header: true },
          );
          this.p.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message: result.message });
          this.p.ctx.notifier.notify("product.leaderAsk", {
            productId: this.productId,
            askId,
            questions: result.questions,
          });
          return { response: result.message };
        }
        const plan = this.completePlan(result.plan);
        const check = validatePlanLists(plan);
        if (!check.ok) {
          const error = `The leader's plan is invalid: ${check.reason}`;
          await this.p.journal.commit([{ type: "planFailed", error }], { header: true });
          this.p.ctx.notifier.notify("product.planFailed", { productId: this.productId, error });
          return { response: error };
        }
        await this.p.journal.commit(
          [
            { type: "dialogue", role: "leader", text: result.message },
            { type: "planProposed", plan },
          ],
          { header: true },
        );
        this.p.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message: result.message });
        this.p.ctx.notifier.notify("product.planReady", { productId: this.productId, plan });
        return { response: result.message, plan };
      });
    } finally {
      this.leaderTurn = null;
      if (this.leaderController === controller) this.leaderController = null;
    }
  }

  /**
   * The leader agent cannot be started for a reason retrying cannot fix (DESIGN.md "Processes"): the product pauses
   * before it has a plan, with a recovery naming the agent and the fix; `product.planFailed` still tells waiting
   * clients that no plan came. Nothing is retried. `product.message` plans again once the agent is fixed (a paused
   * product without a plan goes back to planning). Records nothing when the product left planning meanwhile.
   */
  private async pauseForLeaderConfiguration(err: AgentConfigurationError): Promise<{ response: string }> {
    const recovery = {
      cause: `The leader could not plan: ${err.message}`,
      resumable: true,
      remediation: remediationThen(err.remediation, 'send product.message (e.g. "plan again") to plan'),
    };
    const error = `${recovery.cause} ${recovery.remediation}`;
    return this.p.sections.run(async () => {
      if (this.phase !== "planning") return { response: error };
      await this.p.journal.commit(
        [
          { type: "planFailed", error },
          { type: "phase", phase: "paused", recovery },
        ],
        { header: true },
      );
      this.p.ctx.notifier.notify("product.planFailed", { productId: this.productId, error });
      return { response: error };
    });
  }

  /**
   * Aborts the running leader turn, if any (its `signal` fires; a model-backed leader sends `session/cancel`).
   * Used by cancel, delete and shutdown, and by the ACP session adapter when `session/cancel` arrives during planning.
   * An aborted planning turn records nothing. Does NOT wait for the turn to end.
   */
  abortLeaderTurn(): void {
    this.leaderController?.abort(new Error("The leader's turn was cancelled."));
  }

  /** True while a leader turn (planning, message or consultation) runs for this product. */
  get leaderBusy(): boolean {
    return this.leaderTurn !== null;
  }

  completePlan(draft: DraftPlan): Plan {
    const s = this.p.model.state;
    const version = (s.plan?.version ?? 0) + 1;
    const budget = { ...s.budget, ...(draft.budget ?? {}) };
    // One title (issue 28): once the product is named (given to product.plan, or by its first plan), every plan
    // carries that name; a first plan with no name of its own takes the provisional one.
    const name = !s.provisionalName || draft.name.trim() === "" ? s.name : draft.name;
    const plan: Plan = { ...draft, name, productId: this.productId, version };
    if (Object.keys(budget).length > 0) plan.budget = budget;
    else delete plan.budget;
    return plan;
  }

  /**
   * `product.message`: a revision during planning, an answer to a leader question, or a message to the leader during
   * execution (whose answer may carry mutations). Throws busy while another leader turn runs.
   */
  async message(
    content: string,
    askId?: string,
    attachments: AttachmentRef[] = [],
  ): Promise<{ response: string; plan?: Plan; mutations?: Mutation[] }> {
    if (!this.p.run.driving) await this.p.sections.run(() => this.p.access.syncForWrite());
    this.p.access.requirePhase(["planning", "awaiting_confirmation", "executing", "paused"], "product.message");
    if (this.leaderTurn) throw busy(this.productId);
    if (this.phase === "paused" && !this.p.model.state.plan) {
      // Paused before it had a plan (its leader could not start): a message plans again.
      await this.p.sections.run(async () => {
        if (this.phase === "paused" && !this.p.model.state.plan) {
          await this.p.journal.commit([{ type: "phase", phase: "planning", recovery: null }], { header: true });
        }
      });
    }
    if (this.phase === "planning" || this.phase === "awaiting_confirmation") {
      const pending = this.p.model.state.pendingAsk;
      if (askId !== undefined && pending?.askId !== askId) {
        throw invalidInput(`askId ${askId} does not match the pending question of product ${this.productId}.`);
      }
      this.leaderTurn = "reserved";
      try {
        await this.p.sections.run(() => this.p.journal.commit([userEntry(content, attachments)]));
      } finally {
        this.leaderTurn = null;
      }
      this.planningStartedHere = true;
      return this.runLeaderPlanning(askId !== undefined ? { askId, content } : undefined);
    }
    return this.leaderMessageDuringRun(content, attachments);
  }

  async leaderMessageDuringRun(
    content: string,
    attachments: AttachmentRef[] = [],
  ): Promise<{ response: string; mutations?: Mutation[] }> {
    this.leaderTurn = "message";
    try {
      await this.p.sections.run(() => this.p.journal.commit([userEntry(content, attachments)]));
      const waiting = this.p.model.state.tasks.find((t) => t.status === "waiting");
      if (waiting) {
        // Guarantee 8: a waiting task is answered by the next user message and becomes runnable again.
        await this.p.sections.run(async () => {
          const task: TaskState = answeredTask(waiting, content);
          await this.p.journal.commit([{ type: "task", task }]);
          this.p.run.notifyTask(task);
          this.p.run.rebuildScheduler();
        });
        this.p.run.pump();
        const response = `Passed your answer to task ${waiting.taskId}; it will run again.`;
        await this.p.sections.run(() => this.p.journal.commit([{ type: "dialogue", role: "leader", text: response }]));
        return { response };
      }
      const s = this.p.model.state;
      if (!s.plan) throw invalidPhase(this.phase, ["executing", "paused"]);
      const controller = new AbortController();
      this.leaderController = controller;
      const answer = await this.leader().message({
        productId: s.productId,
        goal: s.goal,
        content,
        plan: s.plan,
        tasks: s.tasks,
        roster: this.roster(),
        ...sessionInputsOf(s),
        ...(attachments.length > 0 ? { attachments } : {}),
        signal: controller.signal,
        onText: (text) => this.p.ctx.notifier.notify("product.planningDelta", { productId: s.productId, text }),
      });
      let applied: Mutation[] | undefined;
      await this.p.sections.run(async () => {
        await this.p.journal.commit([{ type: "dialogue", role: "leader", text: answer.response }]);
        this.p.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message: answer.response });
        if (answer.mutations && answer.mutations.length > 0 && !TerminalPhases.includes(this.phase)) {
          const outcome = applyMutations(this.p.model.state.plan as Plan, this.p.model.state.tasks, answer.mutations);
          if (outcome.ok) {
            await this.p.lifecycle.applyMutationOutcome(answer.mutations, outcome.plan, "leader");
            applied = answer.mutations;
          } else {
            this.p.ctx.logger.warn({ productId: this.productId, reason: outcome.reason }, "leader mutations rejected");
          }
        }
      });
      this.p.run.pump();
      return { response: answer.response, ...(applied ? { mutations: applied } : {}) };
    } finally {
      this.leaderTurn = null;
    }
  }

  /** Asks the leader what to do about a task that failed its last attempt; runs outside the exclusive section. */
  consult(taskId: string): void {
    this.consultations++;
    const s = this.p.model.state;
    const failedTask = taskOf(this.p.model, taskId);
    const plan = s.plan;
    const done = (): void => {
      this.consultations--;
      this.p.run.pump();
    };
    if (!failedTask || !plan) {
      done();
      return;
    }
    this.enqueue(taskId, failedTask, plan, s, done);
  }

  /**
   * Guarantee 17, `when: "end"`: asks the leader for a fix-up of a red final head, as the failure of a task
   * `final-verification` (not in the plan) that depends on every task nothing else depends on, whose `error` is the
   * failing check's name, exit code and output. A fix-up the leader adds runs like any task; the run then ends
   * through its checks again. Runs outside the exclusive section.
   */
  consultFinal(error: string): void {
    this.consultations++;
    const s = this.p.model.state;
    const plan = s.plan;
    const done = (): void => {
      this.consultations--;
      this.p.run.pump();
    };
    const last = s.tasks[s.tasks.length - 1];
    if (!plan || !last) {
      done();
      return;
    }
    const depended = new Set(s.tasks.flatMap((t) => t.dependsOn));
    const failedTask: TaskState = {
      taskId: FINAL_VERIFICATION_TASK_ID,
      title: "Final verification",
      description: "The verification checks on the final head of the integration branch must pass.",
      instanceId: last.instanceId,
      dependsOn: s.tasks.filter((t) => !depended.has(t.taskId)).map((t) => t.taskId),
      status: "failed",
      attempts: 1,
      error,
    };
    this.enqueue(FINAL_VERIFICATION_TASK_ID, failedTask, plan, s, done);
  }

  private enqueue(taskId: string, failedTask: TaskState, plan: Plan, s: ProductState, done: () => void): void {
    // Consultations run one at a time: a failure that arrives while another is being discussed waits its turn
    // instead of finding the leader busy and being given up unheard.
    const turn = this.consultQueue.then(() => this.consultNow(taskId, failedTask, plan, s));
    this.consultQueue = turn.catch(() => undefined);
    turn
      .catch((err: unknown) => this.p.ctx.logger.warn({ productId: this.productId, err }, "leader consultation failed"))
      .finally(done);
  }

  /** One consultation (its turn in the queue came): ask, then apply the leader's mutations or skip the dependents. */
  private async consultNow(taskId: string, failedTask: TaskState, plan: Plan, s: ProductState): Promise<void> {
    if (this.leaderTurn) {
      await this.skipAfter(taskId, `Task ${taskId} failed; the leader was busy, so its dependents are skipped.`);
      return;
    }
    const decision = await this.askAboutFailure(taskId, failedTask, plan, s);
    if (decision === null) return;
    if (decision.kind === "mutate" && !TerminalPhases.includes(this.phase)) {
      const { mutations, message } = decision;
      const applied = await this.p.sections.run(async () => {
        const outcome = applyMutations(this.p.model.state.plan as Plan, this.p.model.state.tasks, mutations);
        if (!outcome.ok) return false;
        await this.p.journal.commit([{ type: "dialogue", role: "leader", text: message }]);
        this.p.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message });
        await this.p.lifecycle.applyMutationOutcome(mutations, outcome.plan, "leader");
        return true;
      });
      if (applied) return;
    }
    await this.skipAfter(taskId, decision.message);
  }

  /**
   * The leader's decision about a failed task, or `null` when there is nothing to decide now: the turn was aborted
   * (cancel or shutdown: the dependents stay pending and a resume consults again) or the leader cannot be started
   * (the product paused with the fix). Any other failure of the leader is a decision to give up.
   */
  private async askAboutFailure(
    taskId: string,
    failedTask: TaskState,
    plan: Plan,
    s: ProductState,
  ): Promise<FailureDecision | null> {
    this.leaderTurn = "consult";
    const controller = new AbortController();
    this.leaderController = controller;
    let decision: FailureDecision;
    try {
      decision = await this.leader().consultOnFailure({
        productId: s.productId,
        goal: s.goal,
        failedTask: { ...failedTask },
        plan: s.plan ?? plan,
        tasks: s.tasks,
        roster: this.roster(),
        ...sessionInputsOf(s),
        signal: controller.signal,
      });
    } catch (err) {
      if (err instanceof AgentConfigurationError && !controller.signal.aborted) {
        // The leader cannot be started (DESIGN.md "Processes"): pause with its fix instead of giving the branch up;
        // the dependents stay pending and the resume consults the leader again.
        this.endTurn(controller);
        await this.p.sections.run(async () => {
          if (!this.p.run.driving || this.phase !== "executing") return;
          const cause = `The leader could not be consulted about the failure of task ${taskId}: ${err.message}`;
          const remediation = remediationThen(err.remediation, "call product.resume");
          await this.p.run.pauseInside({ cause, resumable: true, remediation }, "pause");
        });
        return null;
      }
      decision = { kind: "giveUp", message: `The leader could not be consulted: ${String(err)}` };
    } finally {
      this.endTurn(controller);
    }
    return controller.signal.aborted ? null : decision;
  }

  private endTurn(controller: AbortController): void {
    this.leaderTurn = null;
    if (this.leaderController === controller) this.leaderController = null;
  }

  /** Records and announces the leader's message, then skips the failed task's dependents. */
  private async skipAfter(taskId: string, message: string): Promise<void> {
    await this.p.sections.run(async () => {
      await this.p.journal.commit([{ type: "dialogue", role: "leader", text: message }]);
      this.p.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message });
      await this.p.run.skipDependents(taskId);
    });
  }
}

/** The dialogue event of a user message, with its attachments by reference (issue 31). */
function userEntry(text: string, attachments: AttachmentRef[]): NewEvent {
  return { type: "dialogue", role: "user", text, ...(attachments.length > 0 ? { attachments } : {}) };
}
