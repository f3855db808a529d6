/**
 * The planning dialogue with the leader: planning turns, questions and answers, revisions, and messages to the
 * leader during execution (whose answer may carry mutations).
 *
 * This file must never import I/O.
 */
import type { Mutation, Plan, TaskState } from "../../../protocol/common.js";
import { TerminalPhases } from "../../../protocol/common.js";
import { validatePlanGraph } from "../dag/graph.js";
import { applyMutations } from "../dag/mutations.js";
import { busy, invalidInput, invalidPhase } from "../errors.js";
import { AgentConfigurationError, remediationThen } from "../ports.js";
import type { AgentInfo, DraftPlan, LeaderPort } from "../ports.js";
import { OrchestratorWorkspaces } from "./workspaces.js";

/** The planning dialogue with the leader: a layer of `ProductOrchestrator` (orchestrator.ts), on top of workspaces.ts. */
export abstract class OrchestratorPlanning extends OrchestratorWorkspaces {
  /** Schedules one execution wave (execution.ts). */
  protected abstract pump(): void;

  /** Announces a task's status (execution.ts). */
  protected abstract notifyTask(t: TaskState): void;

  /** Persists an already validated mutation batch and announces it; inside `exclusive` (control.ts). */
  protected abstract applyMutationOutcome(mutations: Mutation[], plan: Plan, by: "leader" | "user"): Promise<void>;

  // -------------------------------------------------------------------------------------------------------------
  // Planning

  protected leader(): LeaderPort {
    return this.ctx.leader(this.model.state.leaderAgentId);
  }

  /** Agents the plan may use: `allowedAgents` is presence-based (omitted = every ready agent, [] = the leader alone). */
  roster(): AgentInfo[] {
    const all = this.ctx.agents.list();
    const allowed = this.model.state.allowedAgents;
    if (allowed === undefined) return all;
    const set = new Set(allowed);
    return all.filter((a) => set.has(a.agentId));
  }

  /** Starts the first planning turn (asynchronously; `product.plan` has answered already). */
  startPlanning(): void {
    if (this.planningStarted) return;
    this.planningStarted = true;
    this.runLeaderPlanning(undefined).catch((err: unknown) => {
      this.ctx.logger.error({ productId: this.productId, err }, "planning turn failed");
    });
  }

  /**
   * One planning turn: asks the leader for a plan (or questions), validates it, persists and announces it.
   * Returns the leader's message and the plan when one was produced.
   */
  protected async runLeaderPlanning(answers: { askId: string; content: string } | undefined): Promise<{
    response: string;
    plan?: Plan;
  }> {
    if (this.leaderTurn) throw busy(this.productId);
    this.leaderTurn = "plan";
    const controller = new AbortController();
    this.leaderController = controller;
    try {
      const s = this.model.state;
      let result;
      try {
        result = await this.leader().plan({
          productId: s.productId,
          goal: s.goal,
          cwd: s.cwd,
          roster: this.roster(),
          dialogue: s.dialogue.map((d) => ({ ...d })),
          ...(s.plan ? { previousPlan: s.plan } : {}),
          ...(answers ? { answers } : {}),
          signal: controller.signal,
          onText: (text) => this.ctx.notifier.notify("product.planningDelta", { productId: s.productId, text }),
        });
      } catch (err) {
        // A turn aborted by cancel, delete or shutdown is not a planning failure: the product keeps its phase and a
        // later product.message plans again.
        if (controller.signal.aborted) return { response: "The leader's turn was cancelled." };
        if (err instanceof AgentConfigurationError) return this.pauseForLeaderConfiguration(err);
        const error = `The leader could not plan: ${err instanceof Error ? err.message : String(err)}`;
        return await this.exclusive(async () => {
          await this.commit([{ type: "planFailed", error }], { header: true });
          this.ctx.notifier.notify("product.planFailed", { productId: this.productId, error });
          return { response: error };
        });
      }
      return await this.exclusive(async () => {
        if (TerminalPhases.includes(this.phase)) return { response: result.message };
        if (result.kind === "ask") {
          const askId = this.ctx.ids("ask");
          await this.commit(
            [
              { type: "dialogue", role: "leader", text: result.message },
              { type: "asked", askId, questions: result.questions },
            ],
            { header: true },
          );
          this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message: result.message });
          this.ctx.notifier.notify("product.leaderAsk", {
            productId: this.productId,
            askId,
            questions: result.questions,
          });
          return { response: result.message };
        }
        const plan = this.completePlan(result.plan);
        const check = validatePlanGraph(plan.instances, plan.tasks);
        if (!check.ok) {
          const error = `The leader's plan is invalid: ${check.reason}`;
          await this.commit([{ type: "planFailed", error }], { header: true });
          this.ctx.notifier.notify("product.planFailed", { productId: this.productId, error });
          return { response: error };
        }
        await this.commit(
          [
            { type: "dialogue", role: "leader", text: result.message },
            { type: "planProposed", plan },
          ],
          { header: true },
        );
        this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message: result.message });
        this.ctx.notifier.notify("product.planReady", { productId: this.productId, plan });
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
    return this.exclusive(async () => {
      if (this.phase !== "planning") return { response: error };
      await this.commit(
        [
          { type: "planFailed", error },
          { type: "phase", phase: "paused", recovery },
        ],
        { header: true },
      );
      this.ctx.notifier.notify("product.planFailed", { productId: this.productId, error });
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

  protected completePlan(draft: DraftPlan): Plan {
    const version = (this.model.state.plan?.version ?? 0) + 1;
    const budget = { ...this.model.state.budget, ...(draft.budget ?? {}) };
    const plan: Plan = { ...draft, productId: this.productId, version };
    if (Object.keys(budget).length > 0) plan.budget = budget;
    else delete plan.budget;
    return plan;
  }

  /**
   * `product.message`: a revision during planning, an answer to a leader question, or a message to the leader during
   * execution (whose answer may carry mutations). Throws busy while another leader turn runs.
   */
  async message(content: string, askId?: string): Promise<{ response: string; plan?: Plan; mutations?: Mutation[] }> {
    if (!this.driving) await this.exclusive(() => this.syncForWrite());
    this.requirePhase(["planning", "awaiting_confirmation", "executing", "paused"], "product.message");
    if (this.leaderTurn) throw busy(this.productId);
    if (this.phase === "paused" && !this.model.state.plan) {
      // Paused before it had a plan (its leader could not start): a message plans again.
      await this.exclusive(async () => {
        if (this.phase === "paused" && !this.model.state.plan) {
          await this.commit([{ type: "phase", phase: "planning", recovery: null }], { header: true });
        }
      });
    }
    if (this.phase === "planning" || this.phase === "awaiting_confirmation") {
      const pending = this.model.state.pendingAsk;
      if (askId !== undefined && pending?.askId !== askId) {
        throw invalidInput(`askId ${askId} does not match the pending question of product ${this.productId}.`);
      }
      this.leaderTurn = "reserved";
      try {
        await this.exclusive(() => this.commit([{ type: "dialogue", role: "user", text: content }]));
      } finally {
        this.leaderTurn = null;
      }
      this.planningStarted = true;
      return this.runLeaderPlanning(askId !== undefined ? { askId, content } : undefined);
    }
    return this.leaderMessageDuringRun(content);
  }

  protected async leaderMessageDuringRun(content: string): Promise<{ response: string; mutations?: Mutation[] }> {
    this.leaderTurn = "message";
    try {
      await this.exclusive(() => this.commit([{ type: "dialogue", role: "user", text: content }]));
      const waiting = this.model.state.tasks.find((t) => t.status === "waiting");
      if (waiting) {
        // Guarantee 8: a waiting task is answered by the next user message and becomes runnable again.
        await this.exclusive(async () => {
          const task: TaskState = {
            ...waiting,
            status: "pending",
            description: `${waiting.description}\n\nAnswer to "${waiting.question ?? ""}": ${content}`,
          };
          delete task.question;
          await this.commit([{ type: "task", task }]);
          this.notifyTask(task);
          this.scheduler?.rebuild(this.model.state.tasks);
        });
        this.pump();
        const response = `Passed your answer to task ${waiting.taskId}; it will run again.`;
        await this.exclusive(() => this.commit([{ type: "dialogue", role: "leader", text: response }]));
        return { response };
      }
      const s = this.model.state;
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
        signal: controller.signal,
        onText: (text) => this.ctx.notifier.notify("product.planningDelta", { productId: s.productId, text }),
      });
      let applied: Mutation[] | undefined;
      await this.exclusive(async () => {
        await this.commit([{ type: "dialogue", role: "leader", text: answer.response }]);
        this.ctx.notifier.notify("product.leaderMessage", { productId: this.productId, message: answer.response });
        if (answer.mutations && answer.mutations.length > 0 && !TerminalPhases.includes(this.phase)) {
          const outcome = applyMutations(this.model.state.plan as Plan, this.model.state.tasks, answer.mutations);
          if (outcome.ok) {
            await this.applyMutationOutcome(answer.mutations, outcome.plan, "leader");
            applied = answer.mutations;
          } else {
            this.ctx.logger.warn({ productId: this.productId, reason: outcome.reason }, "leader mutations rejected");
          }
        }
      });
      this.pump();
      return { response: answer.response, ...(applied ? { mutations: applied } : {}) };
    } finally {
      this.leaderTurn = null;
    }
  }
}
