/**
 * The ACP session adapter (PROTOCOL.md section 4): `session/*` ↔ products and goal runs.
 *
 * A session is a conversation with the leader about one product at a time. This adapter turns prompts into product
 * operations (plan, message, confirm, resume, pause), goal runs (mode `goal`, `/goal`) and commands, and product and
 * goal notifications into `session/update`s while a prompt turn is active (session/turn.ts), and forwards the
 * permission questions of a session's workers to the IDE (session/permissions.ts). Sessions are persisted through the
 * run-state authority (session/store.ts) and opened by session/opening.ts (new, load, resume, list); modes and config
 * options live in session/settings.ts, commands in session/commands.ts.
 *
 * It must never send product notifications on `session/update` outside a turn, never send a `session/update` of a
 * turn after that turn's answer, never send a `session/request_permission` for a session after its `session/cancel`
 * (until its next prompt), and never turn a cancellation into an error (ACP: `stopReason: "cancelled"`).
 */
import type { ContentBlock, SessionUpdate } from "../../protocol/acp.js";
import { RequestPermissionResult } from "../../protocol/acp.js";
import type { ParamsOf } from "../../protocol/methods.js";
import { clientNotifications } from "../../protocol/methods.js";
import { TerminalPhases } from "../../protocol/common.js";
import { busy, DomainError, invalidPhase, isDomainError } from "../core/errors.js";
import type { GoalService } from "../core/goal/service.js";
import type { ProductOrchestrator } from "../core/product/orchestrator.js";
import type { ProductService } from "../core/product/service.js";
import type { Clock, IdGenerator, Logger, RunStateAuthority, WorkspaceProbe } from "../core/ports.js";
import type { RequestContext, RpcConnection } from "./rpc-connection.js";
import { parseCommand, runCommand, type CommandHost } from "./session/commands.js";
import { checkMode, configOptions, DEFAULT_MODE, setConfig, type SettingsContext } from "./session/settings.js";
import { SessionStore, type LiveSession } from "./session/store.js";
import { ABORTED, settleWithin, Turn, untilAborted } from "./session/turn.js";
import {
  PermissionForwarder,
  type ForwardedPermission,
  type ForwardedPermissionAnswer,
} from "./session/permissions.js";
import { cleanTitle, promptText, summaryOf, waitingForAnswer } from "./session/view.js";
import { configOf, SessionOpening } from "./session/opening.js";
import { requireDirectory } from "./workspace-check.js";
import { invalidParams } from "./wire-errors.js";

export { planEntries, promptText } from "./session/view.js";
export type { ForwardedPermission, ForwardedPermissionAnswer } from "./session/permissions.js";

type StopReason = "end_turn" | "cancelled";

const sessionCancel = clientNotifications.find((n) => n.method === "session/cancel")!;

/** A prompt whose whole text is one of these (any case) confirms a plan (PROTOCOL.md section 4). */
const CONFIRM_WORDS = new Set(["confirm", "go", "start", "yes"]);
/** Words that also resume a paused product (an extension of the confirm words for the paused phase). */
const RESUME_WORDS = new Set([...CONFIRM_WORDS, "resume", "continue"]);
/** How long a prompt waits for a busy leader before trying its message again (a notification wakes it earlier). */
const BUSY_RETRY_MS = 1_000;
const MAX_BUSY_RETRIES = 120;
/** A cancelled turn answers `cancelled` at the latest this long after the cancel, even if its pause is still running. */
const CANCEL_ANSWER_MS = 2_500;
/** A prompt arriving while a cancelled turn settles waits at most this long for it (PROTOCOL.md section 4). */
const SETTLE_WAIT_MS = 5_000;
/** Goal-run statuses at which a goal turn keeps following. */
const GOAL_RUNNING = new Set(["running"]);

export interface SessionAdapterOptions {
  products: ProductService;
  goals: GoalService;
  connection: RpcConnection;
  authority: RunStateAuthority;
  logger: Logger;
  clock: Clock;
  ids: IdGenerator;
  projectIdFor(cwd: string): string;
  /** The agents and defaults the config options are made of. */
  settings: SettingsContext;
  /** Decides the default `isolation` of a new session (a git checkout with a commit → `worktree`). */
  workspace?: WorkspaceProbe;
}

type Register = (method: string, handler: (params: unknown, ctx: RequestContext) => Promise<unknown>) => void;

const BUSY = Symbol("busy");

/**
 * Serves the ACP session methods on top of the product and goal services (PROTOCOL.md section 4).
 *
 * Turn semantics: the first prompt (or any prompt once the product is terminal) starts a product (mode `goal`: a goal
 * run); later prompts confirm, resume, run a command, or are messages to the leader. `session/cancel` ends the turn
 * with `cancelled`: an executing product (or a running goal run) is paused, and the answer waits until its workers have
 * stopped, at most 2.5 s; a product in `planning` or `awaiting_confirmation` keeps its phase (its leader turn is
 * stopped), and the next prompt continues the dialogue (a confirm word first shows a plan the user has not seen).
 */
export class SessionAdapter {
  private readonly store: SessionStore;
  private readonly turns = new Map<string, Turn>();
  /** Worker permission questions forwarded to the IDE, and which sessions were cancelled since their last prompt. */
  private readonly permissions: PermissionForwarder;
  /** `session/new`, `load`, `resume` and `list`. */
  private readonly opening: SessionOpening;
  private stopped = false;

  constructor(private readonly o: SessionAdapterOptions) {
    this.store = new SessionStore(o.authority, o.clock, o.logger);
    this.permissions = new PermissionForwarder(o.connection);
    this.opening = new SessionOpening({
      store: this.store,
      products: o.products,
      settings: o.settings,
      ids: o.ids,
      projectIdFor: (cwd) => o.projectIdFor(cwd),
      ...(o.workspace !== undefined ? { workspace: o.workspace } : {}),
      send: (sessionId, update) => this.update(sessionId, update),
      stopped: () => this.stopped,
    });
  }

  /**
   * True while a session in memory follows the product (its current product, or the product or a goal phase of a
   * running turn): the product's instance must then stay in memory (ProductService retainer, guarantee 14).
   */
  follows(productId: string): boolean {
    for (const turn of this.turns.values()) {
      if (turn.product?.productId === productId || turn.goal?.products.has(productId)) return true;
    }
    for (const s of this.store.live.values()) if (s.record.productId === productId) return true;
    return false;
  }

  /** Registers the `session/*` handlers (and the `session/cancel` notification) on the connection. */
  register(handle: Register): void {
    const h = <
      M extends
        | "session/new"
        | "session/load"
        | "session/resume"
        | "session/list"
        | "session/close"
        | "session/delete"
        | "session/set_mode"
        | "session/set_config_option"
        | "session/prompt",
    >(
      method: M,
      fn: (params: ParamsOf<M>, ctx: RequestContext) => Promise<unknown>,
    ): void => handle(method, fn as (params: unknown, ctx: RequestContext) => Promise<unknown>);
    h("session/new", async (p) => {
      await requireDirectory(p.cwd);
      return this.opening.newSession(p.cwd);
    });
    h("session/load", (p) => this.open(p.sessionId, p.cwd, true));
    h("session/resume", (p) => this.open(p.sessionId, p.cwd, false));
    h("session/list", (p) => this.opening.list(p.cwd ?? undefined, p.cursor ?? undefined));
    h("session/close", (p) => this.close(p.sessionId));
    h("session/delete", (p) => this.delete(p.sessionId));
    h("session/set_mode", (p) => this.setMode(p.sessionId, p.modeId));
    h("session/set_config_option", (p) => this.setConfigOption(p.sessionId, p.configId, p.value));
    h("session/prompt", (p, ctx) => this.prompt(p.sessionId, p.prompt, ctx));
    this.o.connection.handleNotification(sessionCancel, (params) => this.cancel(params.sessionId));
  }

  /** `session/load` (`replay`) and `session/resume`; see `SessionOpening.open`. */
  private open(sessionId: string, cwd: string, replay: boolean) {
    return this.opening.open(sessionId, cwd, replay);
  }

  /** For `product.plan {sessionId}`; see `SessionOpening.assertSessionProject`. */
  assertSessionProject(sessionId: string, projectId: string): Promise<void> {
    return this.opening.assertSessionProject(sessionId, projectId);
  }

  /** `session/close`: cancels the running turn as `session/cancel` would, forgets the session in memory, answers `{}`. */
  private async close(sessionId: string): Promise<Record<string, never>> {
    const s = await this.store.get(sessionId);
    s.open = false;
    s.record.closed = true;
    await this.store.save(s);
    const turn = this.turns.get(sessionId);
    this.cancel(sessionId);
    if (!turn) this.store.live.delete(sessionId);
    return {};
  }

  /**
   * `session/delete`: cancels the running turn, waits for it (at most 5 s), deletes the record; an unknown id succeeds
   * silently. The products the session started are kept.
   */
  private async delete(sessionId: string): Promise<Record<string, never>> {
    const turn = this.turns.get(sessionId);
    if (turn) {
      this.cancel(sessionId);
      await settleWithin(turn.done, SETTLE_WAIT_MS);
    }
    await this.store.delete(sessionId);
    this.permissions.clear(sessionId);
    return {};
  }

  /** `session/set_mode`: `-32602` for an unknown mode; announces `current_mode_update`. */
  private async setMode(sessionId: string, modeId: string): Promise<Record<string, never>> {
    const mode = checkMode(modeId);
    const s = await this.store.get(sessionId);
    s.record.modeId = mode;
    await this.store.save(s);
    await this.update(sessionId, { sessionUpdate: "current_mode_update", currentModeId: mode });
    return {};
  }

  /** `session/set_config_option`: answers the complete list and announces it (`config_option_update`). */
  private async setConfigOption(sessionId: string, configId: string, value: string | boolean) {
    const s = await this.store.get(sessionId);
    s.record.config = setConfig(this.o.settings, configOf(s, this.o.settings), configId, value);
    await this.store.save(s);
    const options = configOptions(this.o.settings, s.record.config);
    await this.update(sessionId, { sessionUpdate: "config_option_update", configOptions: options });
    return { configOptions: options };
  }

  /**
   * `session/cancel`: aborts the active turn (the prompt then answers `cancelled`, see the class contract), withdraws
   * the session's pending permission questions, and sends it no new one until its next prompt.
   */
  cancel(sessionId: string): void {
    this.permissions.cancel(sessionId);
    const turn = this.turns.get(sessionId);
    if (!turn) return;
    turn.controller.abort();
    turn.wake?.();
  }

  /** Stops every turn (server shutdown): prompts answer `cancelled` and products are left as they are (not paused). */
  shutdown(): void {
    this.stopped = true;
    for (const turn of this.turns.values()) {
      turn.controller.abort();
      turn.wake?.();
    }
  }

  private update(sessionId: string, update: SessionUpdate): Promise<void> {
    return this.o.connection.notify("session/update", { sessionId, update }).catch((err: unknown) => {
      this.o.logger.warn({ err }, "could not send session/update");
    });
  }

  // -------------------------------------------------------------------------------------------------------------
  // Prompt turns

  /**
   * `session/prompt`: one turn of the conversation (PROTOCOL.md section 4). A prompt without text is `-32602`; a prompt
   * while another turn runs is `-32010`, except while a cancelled turn settles: then it waits for it (at most 5 s).
   */
  private async prompt(
    sessionId: string,
    blocks: ContentBlock[],
    ctx: RequestContext,
  ): Promise<{ stopReason: StopReason }> {
    const previous = this.turns.get(sessionId);
    if (previous?.aborted) await settleWithin(previous.done, SETTLE_WAIT_MS);
    if (this.turns.has(sessionId)) {
      throw invalidPhase("prompting", ["idle"], {
        subject: `Session ${sessionId}`,
        operation: "session/prompt (a prompt turn is already running; wait for it or send session/cancel)",
      });
    }
    const turn = new Turn(
      sessionId,
      () => this.store.live.get(sessionId),
      (id, u) => this.update(id, u),
      this.o.ids,
    );
    this.turns.set(sessionId, turn);
    this.permissions.clear(sessionId);
    const onRequestAbort = (): void => this.cancel(sessionId);
    ctx.signal.addEventListener("abort", onRequestAbort, { once: true });
    let s: LiveSession | undefined;
    try {
      s = await this.store.get(sessionId);
      if (s.record.closed) {
        throw new DomainError(
          "not_found",
          `Session ${sessionId} is closed; open it again with session/load or session/resume before prompting.`,
          { kind: "session", id: sessionId },
        );
      }
      const text = promptText(blocks);
      if (text === "") {
        // A goal or a message to the leader must not be blank (product.plan / product.message schemas).
        throw invalidParams([
          {
            path: ["prompt"],
            message: "must contain some text (a text block, an embedded text resource or a resource link)",
          },
        ]);
      }
      s.open = true;
      s.record.messages.push({ role: "user", text });
      let stop: StopReason;
      try {
        stop = await this.runTurn(s, turn, text);
      } catch (err) {
        if (!turn.aborted) throw err;
        this.o.logger.debug({ err, sessionId }, "prompt turn failed after it was cancelled");
        stop = "cancelled";
      }
      if (turn.aborted) stop = await this.settleCancelled(turn);
      turn.endStream();
      return { stopReason: stop };
    } finally {
      ctx.signal.removeEventListener("abort", onRequestAbort);
      if (turn.planQueued && turn.product) turn.sendPlan(turn.product);
      await turn.sent;
      this.turns.delete(sessionId);
      turn.finish();
      if (s) {
        await this.store.saveQuietly(s);
        if (!s.open) this.store.live.delete(sessionId);
      }
    }
  }

  /**
   * After a cancel: a running planning turn is aborted; an executing product (or a running goal run) is paused; the
   * answer waits for the pause (its workers stopped) at most 2.5 s. Never throws: a failed pause is logged and the
   * turn still answers `cancelled`. At server shutdown everything is left as it is.
   */
  private async settleCancelled(turn: Turn): Promise<"cancelled"> {
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
  private async runTurn(s: LiveSession, turn: Turn, text: string): Promise<StopReason> {
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
    const { productId } = await this.o.products.plan({
      goal,
      cwd: s.record.cwd,
      projectId: s.record.projectId,
      sessionId: s.record.sessionId,
      maxParallelTasks: Number(config.parallelism),
      isolation: config.isolation,
      ...(config.leader !== this.o.settings.defaultLeader ? { leaderAgentId: config.leader } : {}),
    });
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
    const call = this.o.products.message(product.productId, text, product.model.state.pendingAsk?.askId);
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

  // -------------------------------------------------------------------------------------------------------------
  // Product and goal notifications → session/update

  /** Maps product and goal notifications to `session/update`s of the turns that follow them. Never throws. */
  onProductNotification(method: string, params: Record<string, unknown>): void {
    const productId = typeof params.productId === "string" ? params.productId : undefined;
    const goalRunId = typeof params.goalRunId === "string" ? params.goalRunId : undefined;
    for (const turn of this.turns.values()) {
      const s = this.store.live.get(turn.sessionId);
      if (!s) continue;
      try {
        if (goalRunId !== undefined && turn.goal?.goalRunId === goalRunId && method.startsWith("x/goal.")) {
          turn.mapGoal(method, params);
        } else if (productId !== undefined && method.startsWith("product.")) {
          if (turn.product?.productId !== productId && turn.goal?.products.has(productId)) {
            turn.product = this.o.products.peek(productId) ?? turn.product;
          }
          if (turn.product?.productId !== productId) continue;
          turn.mapProduct(s, turn.product, method, params);
        } else {
          continue;
        }
      } catch (err) {
        this.o.logger.error({ err, method }, "could not map a notification to session/update");
      }
      turn.wake?.();
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Worker permission questions

  /**
   * Forwards a worker's `session/request_permission` to the IDE when the worker's product belongs to a session this
   * connection has open (created, loaded, resumed or prompted, not closed); resolves `undefined` when no such session
   * exists (the caller's policy decides). The rest of the contract is `PermissionForwarder.forward`'s.
   */
  async forwardWorkerPermission(request: ForwardedPermission): Promise<ForwardedPermissionAnswer | undefined> {
    if (this.stopped) return undefined;
    const product = await this.o.products.get(request.productId).catch(() => undefined);
    const sessionId = product?.model.state.sessionId;
    const s = sessionId === undefined ? undefined : this.store.live.get(sessionId);
    if (!s || !s.open) return undefined;
    return this.permissions.forward(s.record.sessionId, request);
  }
}
