/**
 * How one prompt turn is carried out (PROTOCOL.md section 4): a command, a goal-mode prompt, or by the phase of the
 * session's product (start a product, message the leader, show and confirm a plan, follow execution, resume), and how
 * a cancelled turn settles (a planning turn is stopped, an executing product or a running goal run is paused).
 *
 * Owns no state of its own: the turn (session/turn.ts) and the session record (session/store.ts) are the caller's.
 * Never sends a `session/update` except through the turn, never turns a cancellation into an error.
 */
import { RequestPermissionResult, type McpServer } from "../../../protocol/acp.js";
import { TerminalPhases } from "../../../protocol/common.js";
import { busy, isDomainError } from "../../core/errors.js";
import type { GoalService } from "../../core/goal/service.js";
import type { ProductOrchestrator } from "../../core/product/orchestrator.js";
import type { ProductService } from "../../core/product/service.js";
import type { Logger } from "../../core/ports.js";
import type { McpSecrets } from "../../adapters/agents/mcp-servers.js";
import type { RpcConnection } from "../rpc-connection.js";
import { parseCommand, runCommand, type CommandHost } from "./commands.js";
import { configOf } from "./opening.js";
import type { PermissionForwarder } from "./permissions.js";
import { DEFAULT_MODE, type SettingsContext } from "./settings.js";
import type { LiveSession, SessionStore } from "./store.js";
import { ABORTED, settleWithin, type Turn, untilAborted } from "./turn.js";
import { cleanTitle, summaryOf, waitingForAnswer } from "./view.js";

export type StopReason = "end_turn" | "cancelled";

/** A prompt whose whole text is one of these (any case) confirms a plan (PROTOCOL.md section 4). */
const CONFIRM_WORDS = new Set(["confirm", "go", "start", "yes"]);
/** Words that also resume a paused product (an extension of the confirm words for the paused phase). */
const RESUME_WORDS = new Set([...CONFIRM_WORDS, "resume", "continue"]);
/** How long a prompt waits for a busy leader before trying its message again (a notification wakes it earlier). */
const BUSY_RETRY_MS = 1_000;
const MAX_BUSY_RETRIES = 120;
/** A cancelled turn answers `cancelled` at the latest this long after the cancel, even if its pause is still running. */
const CANCEL_ANSWER_MS = 2_500;
/** Goal-run statuses at which a goal turn keeps following. */
const GOAL_RUNNING = new Set(["running"]);

const BUSY = Symbol("busy");

/** What carrying out turns needs from the session adapter. */
export interface TurnDispatchDeps {
  products: ProductService;
  goals: GoalService;
  connection: RpcConnection;
  logger: Logger;
  settings: SettingsContext;
  store: SessionStore;
  permissions: PermissionForwarder;
  /** True once the server shuts down (turns then end `cancelled` and leave products as they are). */
  stopped(): boolean;
  /** The MCP servers the client gave the session (issue 28), if any. */
  mcpServersOf(sessionId: string): McpServer[] | undefined;
  /** Where the secrets of the sessions' MCP servers are held for their products' agents (issue 28). */
  mcpSecrets?: McpSecrets;
}

/** Carries out prompt turns on the product and goal services (see the file comment). */
export class TurnDispatcher {
  constructor(private readonly o: TurnDispatchDeps) {}

  private get store(): SessionStore {
    return this.o.store;
  }

  private get permissions(): PermissionForwarder {
    return this.o.permissions;
  }

  private get stopped(): boolean {
    return this.o.stopped();
  }
  /**
   * After a cancel: a running planning turn is aborted; an executing product (or a running goal run) is paused; the
   * answer waits for the pause (its workers stopped) at most 2.5 s. Never throws: a failed pause is logged and the
   * turn still answers `cancelled`. At server shutdown everything is left as it is.
   */
  async settleCancelled(turn: Turn): Promise<"cancelled"> {
    const product = turn.product;
    // A planning turn the prompt started is stopped too (a model-backed leader gets session/cancel); the product
    // keeps its phase and the next prompt plans again.
    if (product && (product.phase === "planning" || product.phase === "awaiting_confirmation"))
      product.abortLeaderTurn();
    if (this.stopped) return "cancelled";
    let pausing: Promise<unknown> | undefined;
    if (turn.goal && GOAL_RUNNING.has(turn.goal.status)) {
      pausing = this.o.goals.pause(turn.goal.goalRunId);
    } else if (product && product.phase === "executing") {
      pausing = this.o.products.pause(product.productId);
    }
    if (pausing) {
      const logged = pausing.catch((err: unknown) => {
        this.o.logger.warn({ err, sessionId: turn.sessionId }, "could not pause after session/cancel");
      });
      await settleWithin(logged, CANCEL_ANSWER_MS);
    }
    return "cancelled";
  }

  /** The session's title becomes `name`, cleaned (announced by `session_info_update` when it changes). */
  private setTitle(s: LiveSession, turn: Turn, name: string): void {
    const title = cleanTitle(name);
    if (s.record.title === title) return;
    s.record.title = title;
    turn.emit({ sessionUpdate: "session_info_update", title, updatedAt: this.store.now() });
  }

  /**
   * Dispatches a prompt: a command, a goal-mode prompt, or by the product's phase. A message that finds the leader
   * busy (a turn still running, e.g. a plan started by a cancelled prompt) waits for the leader to move and is
   * dispatched again on the then-current phase, so a confirm word typed while the plan was being made shows that plan.
   */
  async runTurn(s: LiveSession, turn: Turn, text: string): Promise<StopReason> {
    const command = parseCommand(text);
    if (command) return runCommand(this.commandHost(s, turn), command.name, command.argument);
    if ((s.record.modeId ?? DEFAULT_MODE) === "goal") return this.goalTurn(s, turn, text);
    const products = this.o.products;
    const current = s.record.productId ? await products.get(s.record.productId).catch(() => undefined) : undefined;
    if (!current || TerminalPhases.includes(current.phase)) return this.startProduct(s, turn, text);
    const product = current;
    turn.product = product;
    const word = text.trim().toLowerCase();
    for (let round = 0; ; round++) {
      let sent: typeof ABORTED | typeof BUSY | undefined;
      switch (product.phase) {
        case "awaiting_confirmation":
          if (CONFIRM_WORDS.has(word)) {
            // Never run a plan the user has not seen (e.g. one finished after a cancelled turn): show it and ask.
            if (s.record.shownPlanVersion === product.model.state.plan?.version) return this.execute(turn, product);
            const said = [...product.model.state.dialogue].reverse().find((d) => d.role === "leader");
            if (said && !turn.leaderSpoke) turn.say(said.text);
            return this.askToConfirm(s, turn, product);
          }
          sent = await this.messageLeader(turn, product, text);
          if (sent === undefined) return this.afterLeader(s, turn, product);
          break;
        case "planning":
          sent = await this.messageLeader(turn, product, text);
          if (sent === undefined) return this.afterLeader(s, turn, product);
          break;
        case "paused":
          if (RESUME_WORDS.has(word)) return this.resume(turn, product);
          sent = await this.messageLeader(turn, product, text);
          if (sent === undefined) {
            turn.say('The product is paused. Say "resume" to continue it.');
            return "end_turn";
          }
          break;
        case "executing":
          if (!product.isDriving) {
            // Persisted as executing but nobody drives it (the server that ran it stopped).
            if (RESUME_WORDS.has(word)) return this.resume(turn, product);
            sent = await this.messageLeader(turn, product, text);
            if (sent === undefined) {
              turn.say('The run was interrupted when the server stopped. Say "resume" to continue it.');
              return "end_turn";
            }
            break;
          }
          sent = await this.messageLeader(turn, product, text);
          if (sent === undefined) return this.follow(turn, product);
          break;
        default:
          // Became terminal meanwhile (cancelled elsewhere): the next prompt starts a new product.
          turn.say(`The product is ${product.phase}; your next message starts a new one.`);
          return "end_turn";
      }
      if (sent === ABORTED || turn.aborted) return "cancelled";
      // BUSY: wait until the leader moves (or a second passes), then dispatch again.
      if (round >= MAX_BUSY_RETRIES) throw busy(product.productId);
      const seen = turn.leaderEvents;
      await this.waitFor(turn, () => turn.leaderEvents !== seen, BUSY_RETRY_MS);
      if (turn.aborted) return "cancelled";
    }
  }

  private commandHost(s: LiveSession, turn: Turn): CommandHost {
    return {
      products: this.o.products,
      goals: this.o.goals,
      goalRunId: () => s.record.goalRunId,
      product: async () => {
        let productId = s.record.productId;
        if (s.record.goalRunId !== undefined) {
          const status = await this.o.goals.status(s.record.goalRunId).catch(() => undefined);
          productId = status?.productId ?? productId;
        }
        const product = productId ? await this.o.products.get(productId).catch(() => undefined) : undefined;
        if (product) turn.product = product;
        return product;
      },
      say: (text) => turn.say(text),
      followProduct: (product) => this.follow(turn, product),
      followGoal: (goalRunId) => this.followGoal(turn, goalRunId),
      startGoal: (goal) => this.goalTurn(s, turn, goal),
    };
  }

  /** The first prompt (or one after a terminal product): starts a product with the prompt as its goal. */
  private async startProduct(s: LiveSession, turn: Turn, goal: string): Promise<StopReason> {
    const config = configOf(s, this.o.settings);
    const mcpServers = this.o.mcpServersOf(s.record.sessionId);
    const { productId } = await this.o.products.plan({
      goal,
      cwd: s.record.cwd,
      projectId: s.record.projectId,
      sessionId: s.record.sessionId,
      maxParallelTasks: Number(config.parallelism),
      isolation: config.isolation,
      ...(config.integration !== undefined ? { integration: { mode: config.integration } } : {}),
      ...(config.leader !== this.o.settings.defaultLeader ? { leaderAgentId: config.leader } : {}),
      ...(mcpServers !== undefined ? { mcpServers } : {}),
      ...(s.record.additionalDirectories?.length ? { additionalDirectories: s.record.additionalDirectories } : {}),
      ...(turn.attachments.length > 0 ? { attachments: turn.attachments } : {}),
    });
    this.o.mcpSecrets?.remember(productId, mcpServers ?? []);
    const product = await this.o.products.get(productId);
    turn.product = product;
    s.record.productId = productId;
    delete s.record.goalRunId;
    delete s.record.shownPlanVersion;
    this.setTitle(s, turn, product.model.state.name);
    await this.store.save(s);
    await this.waitFor(
      turn,
      () => product.phase !== "planning" || !!product.model.state.planError || !!product.model.state.pendingAsk,
    );
    if (turn.aborted || this.stopped) return "cancelled";
    return this.afterLeader(s, turn, product);
  }

  /** After a leader planning turn: a ready plan is shown and confirmed; otherwise (question, failure) the turn ends. */
  private afterLeader(s: LiveSession, turn: Turn, product: ProductOrchestrator): Promise<StopReason> | StopReason {
    if (turn.aborted) return "cancelled";
    if (product.phase === "awaiting_confirmation") return this.askToConfirm(s, turn, product);
    return "end_turn";
  }

  /**
   * Sends `product.message` and says the leader's answer unless it already reached the session. Resolves `BUSY` when
   * another leader turn runs (nothing was sent), `ABORTED` when the turn is cancelled first (the leader's call then
   * finishes in the background), else `undefined`.
   */
  private async messageLeader(
    turn: Turn,
    product: ProductOrchestrator,
    text: string,
  ): Promise<typeof ABORTED | typeof BUSY | undefined> {
    turn.leaderSpoke = false;
    const askId = product.model.state.pendingAsk?.askId;
    const call = this.o.products.message(product.productId, text, askId, turn.attachments);
    let answer;
    try {
      answer = await untilAborted(turn, call);
    } catch (err) {
      if (isDomainError(err, "busy")) return BUSY;
      throw err;
    }
    if (answer === ABORTED) {
      call.catch((err: unknown) =>
        this.o.logger.debug({ err }, "leader message finished with an error after a cancel"),
      );
      return ABORTED;
    }
    turn.endStream();
    if (!turn.leaderSpoke) turn.say(answer.response);
    return undefined;
  }

  /**
   * Shows the plan and, in mode `confirm`, asks `session/request_permission` (`confirm` / `revise`); in mode `auto`
   * runs it at once.
   */
  private async askToConfirm(s: LiveSession, turn: Turn, product: ProductOrchestrator): Promise<StopReason> {
    const plan = product.model.state.plan;
    if (!plan) return "end_turn";
    turn.sendPlan(product);
    s.record.shownPlanVersion = plan.version;
    this.setTitle(s, turn, product.model.state.name);
    // Kept before the plan runs or waits for the user (a turn may last the whole run): a server killed meanwhile
    // still has the title, the plan shown and what the leader said (the turn's end saves the record again).
    await this.store.saveQuietly(s, () => turn.streamedText());
    if (s.record.modeId === "auto") return this.execute(turn, product);
    if (turn.aborted || this.permissions.isCancelled(s.record.sessionId)) return "cancelled";
    const summary = plan.tasks.map(
      (t) => `${t.taskId}. ${t.title}${t.dependsOn.length > 0 ? ` (after ${t.dependsOn.join(", ")})` : ""}`,
    );
    let raw: unknown;
    try {
      raw = await this.o.connection.request(
        "session/request_permission",
        {
          sessionId: s.record.sessionId,
          toolCall: {
            toolCallId: `plan-${product.productId}-v${plan.version}`,
            title: `Run this plan: ${plan.name}`,
            kind: "think",
            status: "pending",
            rawInput: { productId: product.productId, plan },
            content: [{ type: "content", content: { type: "text", text: summary.join("\n") } }],
          },
          options: [
            { optionId: "confirm", name: "Confirm and run", kind: "allow_once" },
            { optionId: "revise", name: "Revise the plan", kind: "reject_once" },
          ],
        },
        { signal: turn.controller.signal },
      );
    } catch (err) {
      if (turn.aborted) return "cancelled";
      // A client that cannot show the question still gets a way forward.
      this.o.logger.warn({ err, sessionId: s.record.sessionId }, "session/request_permission failed");
      turn.say('Reply "confirm" to run this plan, or tell me what to change.');
      return "end_turn";
    }
    if (turn.aborted) return "cancelled";
    const parsed = RequestPermissionResult.safeParse(raw);
    const outcome = parsed.success ? parsed.data.outcome : undefined;
    if (outcome?.outcome === "selected" && outcome.optionId === "confirm") return this.execute(turn, product);
    if (outcome?.outcome === "selected" && outcome.optionId === "revise") {
      turn.say("Tell me what to change in the plan.");
    } else {
      turn.say('The plan is waiting for your confirmation: reply "confirm" to run it, or tell me what to change.');
    }
    return "end_turn";
  }

  private async execute(turn: Turn, product: ProductOrchestrator): Promise<StopReason> {
    await this.o.products.confirm(product.productId, {});
    return this.follow(turn, product);
  }

  private async resume(turn: Turn, product: ProductOrchestrator): Promise<StopReason> {
    await this.o.products.resume(product.productId);
    return this.follow(turn, product);
  }

  /**
   * Follows execution until the product is completed, failed, paused or cancelled, or is waiting for an answer with
   * nothing else to do; then says a summary and ends the turn. A cancel ends the wait (the caller pauses the product).
   */
  private async follow(turn: Turn, product: ProductOrchestrator): Promise<StopReason> {
    turn.product = product;
    let sawDriving = product.isDriving;
    const settled = (): boolean => {
      if (product.phase !== "executing") return true;
      if (product.isDriving) sawDriving = true;
      else if (sawDriving) return true; // stopped driving in this process (fenced by another owner)
      return waitingForAnswer(product) !== undefined;
    };
    await this.waitFor(turn, settled);
    if (turn.aborted || this.stopped) return "cancelled";
    turn.sendPlan(product);
    turn.say(summaryOf(product));
    return "end_turn";
  }

  /**
   * A goal-mode prompt or `/goal`: a goal run still running in this session gets the text as a message (taken at its
   * next phase boundary) and is followed; otherwise a new goal run starts with the text as its goal.
   */
  private async goalTurn(s: LiveSession, turn: Turn, goal: string): Promise<StopReason> {
    const current = s.record.goalRunId;
    if (current !== undefined) {
      const status = await this.o.goals.status(current).catch(() => undefined);
      if (status?.status === "running") {
        await this.o.goals.message(current, goal);
        return this.followGoal(turn, current);
      }
    }
    const { goalRunId } = await this.o.goals.start({
      goal,
      cwd: s.record.cwd,
      projectId: s.record.projectId,
      sessionId: s.record.sessionId,
    });
    s.record.goalRunId = goalRunId;
    delete s.record.productId;
    delete s.record.shownPlanVersion;
    this.setTitle(s, turn, goal);
    await this.store.save(s);
    return this.followGoal(turn, goalRunId);
  }

  /**
   * Follows a goal run: each phase's plan and tasks as for a product, each assessment as an agent message, until the
   * goal run stops running (achieved, blocked, budget limited, paused, stopped, failed); then a summary.
   */
  private async followGoal(turn: Turn, goalRunId: string): Promise<StopReason> {
    const first = await this.o.goals.status(goalRunId);
    turn.goal = { goalRunId, status: first.status, products: new Set(first.productId ? [first.productId] : []) };
    if (first.productId) turn.product = this.o.products.peek(first.productId) ?? turn.product;
    await this.waitFor(turn, () => !GOAL_RUNNING.has(turn.goal!.status));
    if (turn.aborted || this.stopped) return "cancelled";
    const end = await this.o.goals.status(goalRunId);
    if (turn.product) turn.sendPlan(turn.product);
    const outcome =
      end.status === "completed" && end.endReason === "achieved"
        ? "achieved"
        : `${end.status}${end.endReason ? ` (${end.endReason})` : ""}`;
    turn.say(
      `Goal run ${outcome}: ${end.acceptance.passed} of ${end.acceptance.total} criteria pass after ${end.phaseIndex + 1} ` +
        `${end.phaseIndex === 0 ? "phase" : "phases"}.${end.failedReason ? ` ${end.failedReason}` : ""}` +
        `${end.status === "paused" || end.status === "blocked" || end.status === "budget_limited" ? " Say /resume to continue it." : ""}`,
    );
    return "end_turn";
  }

  /**
   * Waits until `done()` holds (checked after every notification of the turn), the turn is cancelled, the server
   * stops, or `timeoutMs` passes.
   */
  private async waitFor(turn: Turn, done: () => boolean, timeoutMs?: number): Promise<void> {
    let timedOut = false;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            turn.wake?.();
          }, timeoutMs);
    try {
      while (!done() && !turn.aborted && !this.stopped && !timedOut) {
        await new Promise<void>((resolveWake) => {
          turn.wake = resolveWake;
        });
        turn.wake = null;
      }
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }
}
