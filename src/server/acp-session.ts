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
import type { ContentBlock, McpServer, SessionUpdate } from "../../protocol/acp.js";
import type { ParamsOf } from "../../protocol/methods.js";
import { clientNotifications } from "../../protocol/methods.js";
import { DomainError, invalidPhase } from "../core/errors.js";
import type { GoalService } from "../core/goal/service.js";
import type { ProductService } from "../core/product/service.js";
import type { Clock, IdGenerator, Logger, RunStateAuthority, WorkspaceProbe } from "../core/ports.js";
import type { McpSecrets } from "../adapters/agents/mcp-servers.js";
import type { RequestContext, RpcConnection } from "./rpc-connection.js";
import { TurnDispatcher, type StopReason } from "./session/dispatch.js";
import { checkMode, configOptions, setConfig, type SettingsContext } from "./session/settings.js";
import { SessionStore, type LiveSession } from "./session/store.js";
import { settleWithin, Turn } from "./session/turn.js";
import {
  PermissionForwarder,
  type ForwardedPermission,
  type ForwardedPermissionAnswer,
} from "./session/permissions.js";
import { promptText } from "./session/view.js";
import { attachmentBlock, attachmentNote, deleteAttachments, storeAttachments } from "./session/content.js";
import { configOf, SessionOpening } from "./session/opening.js";
import { requireDirectories, requireDirectory } from "./workspace-check.js";
import { invalidParams } from "./wire-errors.js";

export { planEntries, promptText } from "./session/view.js";
export type { ForwardedPermission, ForwardedPermissionAnswer } from "./session/permissions.js";

const sessionCancel = clientNotifications.find((n) => n.method === "session/cancel")!;

/** A prompt arriving while a cancelled turn settles waits at most this long for it (PROTOCOL.md section 4). */
const SETTLE_WAIT_MS = 5_000;

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
  /** Where the secrets of the sessions' MCP servers are held for their products' agents (issue 28). */
  mcpSecrets?: McpSecrets;
}

type Register = (method: string, handler: (params: unknown, ctx: RequestContext) => Promise<unknown>) => void;

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
  /** Carries out each prompt turn (session/dispatch.ts). */
  private readonly dispatch: TurnDispatcher;
  private stopped = false;
  /** The `mcpServers` of each session opened on this connection, as the client gave them (in memory only). */
  private readonly mcp = new Map<string, McpServer[]>();

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
      attachment: (a) => attachmentBlock(o.authority, a),
      stopped: () => this.stopped,
    });
    this.dispatch = new TurnDispatcher({
      products: o.products,
      goals: o.goals,
      connection: o.connection,
      logger: o.logger,
      settings: o.settings,
      store: this.store,
      permissions: this.permissions,
      stopped: () => this.stopped,
      mcpServersOf: (sessionId) => this.mcp.get(sessionId),
      ...(o.mcpSecrets !== undefined ? { mcpSecrets: o.mcpSecrets } : {}),
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
      const opened = await this.opening.newSession(p.cwd, await requireDirectories(p.cwd, p.additionalDirectories));
      this.keepMcpServers(opened.sessionId, p.mcpServers);
      return opened;
    });
    h("session/load", (p) => this.open(p.sessionId, p.cwd, true, p.additionalDirectories, p.mcpServers));
    h("session/resume", (p) =>
      this.open(p.sessionId, p.cwd, false, p.additionalDirectories, p.mcpServers ?? undefined),
    );
    h("session/list", (p) => this.opening.list(p.cwd ?? undefined, p.cursor ?? undefined));
    h("session/close", (p) => this.close(p.sessionId));
    h("session/delete", (p) => this.delete(p.sessionId));
    h("session/set_mode", (p) => this.setMode(p.sessionId, p.modeId));
    h("session/set_config_option", (p) => this.setConfigOption(p.sessionId, p.configId, p.value));
    h("session/prompt", (p, ctx) => this.prompt(p.sessionId, p.prompt, ctx));
    this.o.connection.handleNotification(sessionCancel, (params) => this.cancel(params.sessionId));
  }

  /**
   * `session/load` (`replay`) and `session/resume`; see `SessionOpening.open`. The MCP servers given (ACP: always with
   * load) replace the session's, and give the session's product the secrets of its MCP servers back (issue 28).
   */
  private async open(
    sessionId: string,
    cwd: string,
    replay: boolean,
    dirs: string[] | null | undefined,
    mcpServers: McpServer[] | undefined,
  ) {
    const opened = await this.opening.open(sessionId, cwd, replay, await requireDirectories(cwd, dirs));
    if (mcpServers !== undefined) this.keepMcpServers(sessionId, mcpServers);
    const productId = this.store.live.get(sessionId)?.record.productId;
    const kept = this.mcp.get(sessionId);
    if (productId !== undefined && kept !== undefined) this.o.mcpSecrets?.remember(productId, kept);
    return opened;
  }

  /** Keeps a session's MCP servers in memory (at most the 1 000 newest sessions; issue 28, guarantee 14). */
  private keepMcpServers(sessionId: string, servers: McpServer[]): void {
    this.mcp.delete(sessionId);
    if (servers.length === 0) return;
    this.mcp.set(sessionId, servers);
    if (this.mcp.size > 1_000) this.mcp.delete(this.mcp.keys().next().value as string);
  }

  /** For `product.plan {sessionId}`; see `SessionOpening.assertSessionProject`. */
  assertSessionProject(sessionId: string, projectId: string): Promise<void> {
    return this.opening.assertSessionProject(sessionId, projectId);
  }

  /**
   * `session/close`: cancels the running turn as `session/cancel` would (its prompt answers `cancelled`; an executing
   * product is paused, resumable by a later prompt after `session/load`/`session/resume`, or by `product.resume`),
   * waits for that answer (at most 5 s), forgets the session in memory and answers `{}`. The record is kept (marked
   * closed): `session/load` or `session/resume` opens it again.
   */
  private async close(sessionId: string): Promise<Record<string, never>> {
    const s = await this.store.get(sessionId);
    s.open = false;
    s.record.closed = true;
    await this.store.save(s);
    const turn = this.turns.get(sessionId);
    this.cancel(sessionId);
    if (turn) {
      await settleWithin(turn.done, SETTLE_WAIT_MS);
      // The prompt's answer is handed to the writer in the microtasks after `done`: it goes out before this one.
      await new Promise<void>((resolveTurn) => setImmediate(resolveTurn));
    }
    if (!this.turns.has(sessionId) && !s.open) this.store.live.delete(sessionId);
    this.permissions.clear(sessionId);
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
    await deleteAttachments(this.o.authority, sessionId);
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
      const typed = promptText(blocks);
      const attachments = await storeAttachments(this.o.authority, sessionId, blocks);
      if (typed === "" && attachments.length === 0) {
        // A goal or a message to the leader must not be blank (product.plan / product.message schemas).
        throw invalidParams([
          {
            path: ["prompt"],
            message: "must contain some text (a text block, an embedded text resource or a resource link) or an image",
          },
        ]);
      }
      // The text names each attachment (a note with its reference); agents that take images or embedded resources
      // also get its content (product/agent-inputs.ts, adapters/agents/prompt-content.ts).
      const text = [typed, ...attachments.map(attachmentNote)].filter((part) => part !== "").join("\n\n");
      turn.attachments = attachments;
      s.open = true;
      s.record.messages.push({ role: "user", text: typed, ...(attachments.length > 0 ? { attachments } : {}) });
      let stop: StopReason;
      try {
        stop = await this.dispatch.runTurn(s, turn, text);
      } catch (err) {
        if (!turn.aborted) throw err;
        this.o.logger.debug({ err, sessionId }, "prompt turn failed after it was cancelled");
        stop = "cancelled";
      }
      if (turn.aborted) stop = await this.dispatch.settleCancelled(turn);
      turn.endStream();
      return { stopReason: stop };
    } finally {
      ctx.signal.removeEventListener("abort", onRequestAbort);
      if (turn.planQueued && turn.product) turn.sendPlan(turn.product);
      await turn.sent;
      this.turns.delete(sessionId);
      if (s) {
        await this.store.saveQuietly(s);
        if (!s.open) this.store.live.delete(sessionId);
      }
      turn.finish();
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
