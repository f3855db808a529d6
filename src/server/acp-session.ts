/**
 * The ACP session adapter (PROTOCOL.md section 4): `session/*` ↔ products.
 *
 * A session is a conversation with the leader about one product at a time. This adapter turns prompts into product
 * operations (plan, message, confirm, resume, pause) and product notifications into `session/update`s
 * (agent_message_chunk, plan, tool_call, tool_call_update) while a prompt turn is active, and forwards the permission
 * questions of a session's workers to the IDE. Sessions are persisted through the run-state authority (project `_`) so
 * `session/load` and `session/list` work after a restart.
 *
 * It must never send product notifications on `session/update` outside a turn, never send a `session/update` of a
 * turn after that turn's answer, and never turn a cancellation into an error (ACP: `stopReason: "cancelled"`).
 */
import { resolve } from "node:path";
import { z } from "zod";
import type { ContentBlock, SessionUpdate } from "../../protocol/acp.js";
import { RequestPermissionResult } from "../../protocol/acp.js";
import type { ParamsOf } from "../../protocol/methods.js";
import { clientNotifications } from "../../protocol/methods.js";
import { TerminalPhases, type TaskState, type TaskStatus } from "../../protocol/common.js";
import { busy, DomainError, invalidPhase, isDomainError, notFound } from "../core/errors.js";
import type { ProductOrchestrator } from "../core/product/orchestrator.js";
import type { ProductService } from "../core/product/service.js";
import type { Clock, IdGenerator, Logger, RunStateAuthority } from "../core/ports.js";
import type { RequestContext, RpcConnection } from "./rpc-connection.js";
import { requireDirectory } from "./workspace-check.js";
import { invalidParams } from "./wire-errors.js";

/** The authority project that holds session records (sessions are looked up by id alone). */
const SESSION_PROJECT = "_";

const SessionRecord = z.object({
  v: z.literal(1),
  sessionId: z.string(),
  cwd: z.string(),
  projectId: z.string(),
  title: z.string().optional(),
  productId: z.string().optional(),
  /** Version of the product's plan last shown to the user (a confirm word never runs a plan the user did not see). */
  shownPlanVersion: z.number().int().min(0).optional(),
  /** Set by `session/close`; a closed session takes no prompt until `session/load` opens it again. */
  closed: z.boolean().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
  messages: z.array(z.object({ role: z.enum(["user", "agent"]), text: z.string() })),
});
type SessionRecord = z.infer<typeof SessionRecord>;

type StopReason = "end_turn" | "cancelled";

/** One running `session/prompt`. Created synchronously when the prompt arrives, so a `session/cancel` right behind it is never lost. */
interface Turn {
  readonly sessionId: string;
  readonly controller: AbortController;
  product: ProductOrchestrator | undefined;
  /** Resolves the current `waitFor` so it re-checks its condition (set by notifications and cancel). */
  wake: (() => void) | null;
  /** Leader text streaming through `product.planningDelta` since the last leader message. */
  stream: { messageId: string; text: string } | null;
  /** Set when the leader's message of the current call reached the session (no need to repeat the answer). */
  leaderSpoke: boolean;
  /** Counts leader notifications (message, plan, ask, failure, mutation): a busy leader is retried when it moves. */
  leaderEvents: number;
  /** A coalesced `plan` update is queued (one per macrotask, however many task updates came). */
  planQueued: boolean;
  /** The last `session/update` of this turn handed to the writer; awaited before the turn answers. */
  sent: Promise<void>;
}

interface LiveSession {
  record: SessionRecord;
  revision: number | null;
  /** Serialises writes of this record (each put is compare-and-swap on the previous revision). */
  saving: Promise<void>;
  /** Created, loaded or prompted through this connection and not closed: the client knows it. */
  open: boolean;
  /** Task ids of the current product already announced as `tool_call`s in this session, with the last status sent. */
  announced: Map<string, TaskStatus>;
  announcedFor: string | undefined;
}

/** A worker's permission question as the worker pool hands it over (structurally `WorkerPermissionRequest`). */
export interface ForwardedPermission {
  productId: string;
  taskId: string;
  taskTitle: string;
  attempt: number;
  agentId: string;
  params: {
    toolCall: { toolCallId: string; title?: string | null; kind?: string | null; _meta?: Record<string, unknown> | null };
    options: { optionId: string; name: string; kind: string }[];
  };
  signal: AbortSignal;
}

/** The IDE's answer to a forwarded permission question. */
export type ForwardedPermissionAnswer =
  | { outcome: { outcome: "cancelled" } }
  | { outcome: { outcome: "selected"; optionId: string } };

const sessionCancel = clientNotifications.find((n) => n.method === "session/cancel")!;

/** A prompt whose whole text is one of these (any case) confirms a plan (PROTOCOL.md section 4). */
const CONFIRM_WORDS = new Set(["confirm", "go", "start", "yes"]);
/** Words that also resume a paused product (an extension of the confirm words for the paused phase). */
const RESUME_WORDS = new Set([...CONFIRM_WORDS, "resume", "continue"]);
/** At most this many characters of a task's output go into its tool call content (the rest is cut with a marker). */
const MAX_TOOL_CONTENT_CHARS = 100_000;
/** How long a prompt waits for a busy leader before trying its message again (a notification wakes it earlier). */
const BUSY_RETRY_MS = 1_000;
const MAX_BUSY_RETRIES = 120;

export interface SessionAdapterOptions {
  products: ProductService;
  connection: RpcConnection;
  authority: RunStateAuthority;
  logger: Logger;
  clock: Clock;
  ids: IdGenerator;
  projectIdFor(cwd: string): string;
}

type Register = (method: string, handler: (params: unknown, ctx: RequestContext) => Promise<unknown>) => void;

const ABORTED = Symbol("aborted");
const BUSY = Symbol("busy");

/** Product notifications that mean the leader finished something (a busy leader may be free again). */
const LEADER_EVENTS = new Set([
  "product.leaderMessage",
  "product.leaderAsk",
  "product.planReady",
  "product.planFailed",
  "product.dagMutated",
]);

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}\n[… ${text.length - max} more characters]`;
}

/**
 * Serves the ACP session methods on top of the product service (PROTOCOL.md section 4).
 *
 * Turn semantics: the first prompt (or any prompt once the product is terminal) starts a product; later prompts
 * confirm, resume, or are messages to the leader. `session/cancel` ends the turn with `cancelled`: an executing product
 * is paused (and the answer waits until its workers have stopped); a product in `planning` or `awaiting_confirmation`
 * keeps its phase — the phase table allows pause only in executing/paused, and nothing runs there without a
 * confirmation, so "paused" for it means the dialogue is parked: a leader turn already running finishes in the
 * background, its plan is kept, and the next prompt continues the dialogue (a confirm word first shows a plan the user
 * has not seen instead of running it).
 */
export class SessionAdapter {
  private readonly sessions = new Map<string, LiveSession>();
  private readonly turns = new Map<string, Turn>();
  private stopped = false;

  constructor(private readonly o: SessionAdapterOptions) {}

  /** Registers the `session/*` handlers (and the `session/cancel` notification) on the connection. */
  register(handle: Register): void {
    const h = <M extends "session/new" | "session/load" | "session/list" | "session/close" | "session/prompt">(
      method: M,
      fn: (params: ParamsOf<M>, ctx: RequestContext) => Promise<unknown>,
    ): void => handle(method, fn as (params: unknown, ctx: RequestContext) => Promise<unknown>);
    h("session/new", async (p) => {
      await requireDirectory(p.cwd);
      return this.newSession(p.cwd);
    });
    h("session/load", (p) => this.load(p.sessionId, p.cwd));
    h("session/list", (p) => this.list(p.cwd ?? undefined, p.cursor ?? undefined));
    h("session/close", (p) => this.close(p.sessionId));
    h("session/prompt", (p, ctx) => this.prompt(p.sessionId, p.prompt, ctx));
    this.o.connection.handleNotification(sessionCancel, (params) => this.cancel(params.sessionId));
  }

  // -------------------------------------------------------------------------------------------------------------
  // Records

  private now(): string {
    return new Date(this.o.clock.now()).toISOString();
  }

  /** Writes the record (serialised per session; each write is compare-and-swap on the last revision). */
  private save(s: LiveSession): Promise<void> {
    const run = async (): Promise<void> => {
      s.record.updatedAt = this.now();
      const { revision } = await this.o.authority.put(SESSION_PROJECT, "session", s.record.sessionId, s.record, s.revision);
      s.revision = revision;
    };
    const next = s.saving.then(run, run);
    s.saving = next.catch(() => undefined);
    return next;
  }

  private saveQuietly(s: LiveSession): Promise<void> {
    return this.save(s).catch((err: unknown) => this.o.logger.warn({ err, sessionId: s.record.sessionId }, "could not save the session"));
  }

  private live(record: SessionRecord, revision: number | null): LiveSession {
    return { record, revision, saving: Promise.resolve(), open: false, announced: new Map(), announcedFor: undefined };
  }

  /** The session, loaded from the authority on first use. Throws not_found for an unknown or unreadable record. */
  private async get(sessionId: string): Promise<LiveSession> {
    const cached = this.sessions.get(sessionId);
    if (cached) return cached;
    const rec = await this.o.authority.get(SESSION_PROJECT, "session", sessionId);
    const parsed = rec ? SessionRecord.safeParse(rec.value) : undefined;
    if (!rec || !parsed?.success) throw notFound("session", sessionId);
    const again = this.sessions.get(sessionId);
    if (again) return again;
    const s = this.live(parsed.data, rec.revision);
    this.sessions.set(sessionId, s);
    return s;
  }

  private async newSession(cwd: string): Promise<{ sessionId: string }> {
    const sessionId = this.o.ids("ses");
    const at = this.now();
    const s = this.live(
      { v: 1, sessionId, cwd, projectId: this.o.projectIdFor(cwd), createdAt: at, updatedAt: at, messages: [] },
      null,
    );
    await this.save(s);
    s.open = true;
    this.sessions.set(sessionId, s);
    return { sessionId };
  }

  /**
   * `session/load`: replays the conversation and the latest plan as `session/update`s, then answers `{}`. Throws
   * `not_found` for an unknown session and `ownership` (`{expected: <the session's cwd>, got: cwd}`, -32016) when
   * `cwd` is not the directory the session was created in; nothing is replayed then.
   */
  private async load(sessionId: string, cwd: string): Promise<Record<string, never>> {
    const s = await this.get(sessionId);
    if (resolve(s.record.cwd) !== resolve(cwd)) {
      throw new DomainError(
        "ownership",
        `Session ${sessionId} belongs to the workspace ${s.record.cwd}, not ${cwd}: load it with its own cwd.`,
        { expected: s.record.cwd, got: cwd },
      );
    }
    s.open = true;
    if (s.record.closed) {
      delete s.record.closed;
      await this.save(s);
    }
    for (const m of s.record.messages) {
      await this.update(sessionId, {
        sessionUpdate: m.role === "user" ? "user_message_chunk" : "agent_message_chunk",
        content: { type: "text", text: m.text },
        messageId: this.o.ids("msg"),
      });
    }
    if (s.record.productId) {
      const product = await this.o.products.get(s.record.productId).catch(() => undefined);
      // A deleted product: the conversation is still replayed, without a plan.
      const entries = product ? planEntries(product) : [];
      if (entries.length > 0) await this.update(sessionId, { sessionUpdate: "plan", entries });
    }
    return {};
  }

  /**
   * For `product.plan {sessionId}`: throws `ownership` (`{expected: <the session's project>, got: projectId}`, -32016)
   * when `sessionId` names a stored session of another project. Read-only; an unknown `sessionId` is accepted (the
   * product only records it), as before.
   */
  async assertSessionProject(sessionId: string, projectId: string): Promise<void> {
    const s = await this.get(sessionId).catch((err: unknown) => {
      if (isDomainError(err, "not_found")) return undefined;
      throw err;
    });
    if (s && s.record.projectId !== projectId) {
      throw new DomainError(
        "ownership",
        `Session ${sessionId} belongs to project ${s.record.projectId}, not ${projectId}: ` +
          "plan in its project or omit sessionId.",
        { expected: s.record.projectId, got: projectId },
      );
    }
  }

  /** `session/list`: every readable session record (newest first), optionally only those of `cwd`. One page. */
  private async list(cwd: string | undefined, cursor: string | undefined) {
    if (cursor !== undefined) {
      throw invalidParams([{ path: ["cursor"], message: "is not a cursor this server issued (session/list has one page)" }]);
    }
    const infos = await this.o.authority.list(SESSION_PROJECT, "session");
    const sessions: { sessionId: string; cwd: string; title?: string; updatedAt: string }[] = [];
    for (const info of infos) {
      const live = this.sessions.get(info.id);
      let record = live?.record;
      if (!record) {
        const rec = await this.o.authority.get(SESSION_PROJECT, "session", info.id);
        const parsed = rec ? SessionRecord.safeParse(rec.value) : undefined;
        if (!parsed?.success) continue;
        record = parsed.data;
      }
      if (cwd !== undefined && record.cwd !== cwd) continue;
      sessions.push({
        sessionId: record.sessionId,
        cwd: record.cwd,
        ...(record.title !== undefined ? { title: record.title } : {}),
        updatedAt: record.updatedAt,
      });
    }
    sessions.sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0));
    return { sessions };
  }

  /** `session/close`: cancels the running turn as `session/cancel` would, forgets the session in memory, answers `{}`. */
  private async close(sessionId: string): Promise<Record<string, never>> {
    const s = await this.get(sessionId);
    s.open = false;
    s.record.closed = true;
    await this.save(s);
    const turn = this.turns.get(sessionId);
    this.cancel(sessionId);
    if (!turn) this.sessions.delete(sessionId);
    return {};
  }

  /** `session/cancel`: aborts the active turn; the prompt then answers `cancelled` (see the class contract). */
  cancel(sessionId: string): void {
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

  // -------------------------------------------------------------------------------------------------------------
  // Sending updates

  private update(sessionId: string, update: SessionUpdate): Promise<void> {
    return this.o.connection.notify("session/update", { sessionId, update }).catch((err: unknown) => {
      this.o.logger.warn({ err }, "could not send session/update");
    });
  }

  /** Sends an update of a turn; updates keep their call order, and the turn awaits the last one before answering. */
  private emit(turn: Turn, update: SessionUpdate): void {
    turn.sent = this.update(turn.sessionId, update);
  }

  /** An agent message: recorded in the conversation and sent as one `agent_message_chunk`. */
  private say(s: LiveSession, turn: Turn, text: string): void {
    if (!text) return;
    s.record.messages.push({ role: "agent", text });
    this.emit(turn, {
      sessionUpdate: "agent_message_chunk",
      content: { type: "text", text },
      messageId: this.o.ids("msg"),
    });
  }

  /** Sends the full plan now (and drops a queued one: this one is newer). */
  private sendPlan(turn: Turn, product: ProductOrchestrator): void {
    turn.planQueued = false;
    const entries = planEntries(product);
    if (entries.length > 0) this.emit(turn, { sessionUpdate: "plan", entries });
  }

  /** Queues one full `plan` update for the end of this macrotask (task updates of one wave share it). */
  private queuePlan(turn: Turn, product: ProductOrchestrator): void {
    if (turn.planQueued) return;
    turn.planQueued = true;
    setImmediate(() => {
      if (turn.planQueued && this.turns.get(turn.sessionId) === turn) this.sendPlan(turn, product);
    });
  }

  // -------------------------------------------------------------------------------------------------------------
  // Prompt turns

  /** `session/prompt`: one turn of the conversation (PROTOCOL.md section 4). A prompt without text is `-32602`. */
  private async prompt(sessionId: string, blocks: ContentBlock[], ctx: RequestContext): Promise<{ stopReason: StopReason }> {
    if (this.turns.has(sessionId)) {
      throw invalidPhase("prompting", ["idle"], {
        subject: `Session ${sessionId}`,
        operation: "session/prompt (a prompt turn is already running; wait for it or send session/cancel)",
      });
    }
    const turn: Turn = {
      sessionId,
      controller: new AbortController(),
      product: undefined,
      wake: null,
      stream: null,
      leaderSpoke: false,
      leaderEvents: 0,
      planQueued: false,
      sent: Promise.resolve(),
    };
    this.turns.set(sessionId, turn);
    const onRequestAbort = (): void => this.cancel(sessionId);
    ctx.signal.addEventListener("abort", onRequestAbort, { once: true });
    let s: LiveSession | undefined;
    try {
      s = await this.get(sessionId);
      if (s.record.closed) {
        throw new DomainError(
          "not_found",
          `Session ${sessionId} is closed; open it again with session/load before prompting.`,
          { kind: "session", id: sessionId },
        );
      }
      const text = promptText(blocks);
      if (text === "") {
        // A goal or a message to the leader must not be blank (product.plan / product.message schemas).
        throw invalidParams([
          { path: ["prompt"], message: "must contain some text (a text block, an embedded text resource or a resource link)" },
        ]);
      }
      s.open = true;
      s.record.messages.push({ role: "user", text });
      s.record.title ??= text.slice(0, 80);
      let stop: StopReason;
      try {
        stop = await this.runTurn(s, turn, text);
      } catch (err) {
        if (!turn.controller.signal.aborted) throw err;
        this.o.logger.debug({ err, sessionId }, "prompt turn failed after it was cancelled");
        stop = "cancelled";
      }
      if (turn.controller.signal.aborted) stop = await this.settleCancelled(turn);
      this.endStream(s, turn);
      return { stopReason: stop };
    } finally {
      ctx.signal.removeEventListener("abort", onRequestAbort);
      if (turn.planQueued && turn.product) this.sendPlan(turn, turn.product);
      await turn.sent;
      this.turns.delete(sessionId);
      if (s) {
        await this.saveQuietly(s);
        if (!s.open) this.sessions.delete(sessionId);
      }
    }
  }

  /**
   * After a cancel: a running planning turn is aborted; an executing product is paused (resolves once its workers have
   * stopped). Never throws: a failed
   * pause is logged and the turn still answers `cancelled`. At server shutdown the product is left as it is.
   */
  private async settleCancelled(turn: Turn): Promise<"cancelled"> {
    const product = turn.product;
    // A planning turn the prompt started is stopped too (a model-backed leader gets session/cancel); the product
    // keeps its phase and the next prompt plans again.
    if (product && (product.phase === "planning" || product.phase === "awaiting_confirmation")) product.abortLeaderTurn();
    if (!this.stopped && product && product.phase === "executing") {
      await this.o.products.pause(product.productId).catch((err: unknown) => {
        this.o.logger.warn({ err, productId: product.productId }, "could not pause the product after session/cancel");
      });
    }
    return "cancelled";
  }

  /**
   * Dispatches a prompt on the session's product by its phase. A message that finds the leader busy (a turn still
   * running, e.g. a plan started by a cancelled prompt) waits for the leader to move and is dispatched again on the
   * then-current phase, so a confirm word typed while the plan was being made shows that plan.
   */
  private async runTurn(s: LiveSession, turn: Turn, text: string): Promise<StopReason> {
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
            if (s.record.shownPlanVersion === product.model.state.plan?.version) return this.execute(s, turn, product);
            const said = [...product.model.state.dialogue].reverse().find((d) => d.role === "leader");
            if (said && !turn.leaderSpoke) this.say(s, turn, said.text);
            return this.askToConfirm(s, turn, product);
          }
          sent = await this.messageLeader(s, turn, product, text);
          if (sent === undefined) return this.afterLeader(s, turn, product);
          break;
        case "planning":
          sent = await this.messageLeader(s, turn, product, text);
          if (sent === undefined) return this.afterLeader(s, turn, product);
          break;
        case "paused":
          if (RESUME_WORDS.has(word)) return this.resume(s, turn, product);
          sent = await this.messageLeader(s, turn, product, text);
          if (sent === undefined) {
            this.say(s, turn, 'The product is paused. Say "resume" to continue it.');
            return "end_turn";
          }
          break;
        case "executing":
          if (!product.isDriving) {
            // Persisted as executing but nobody drives it (the server that ran it stopped).
            if (RESUME_WORDS.has(word)) return this.resume(s, turn, product);
            sent = await this.messageLeader(s, turn, product, text);
            if (sent === undefined) {
              this.say(s, turn, 'The run was interrupted when the server stopped. Say "resume" to continue it.');
              return "end_turn";
            }
            break;
          }
          sent = await this.messageLeader(s, turn, product, text);
          if (sent === undefined) return this.follow(s, turn, product);
          break;
        default:
          // Became terminal meanwhile (cancelled elsewhere): the next prompt starts a new product.
          this.say(s, turn, `The product is ${product.phase}; your next message starts a new one.`);
          return "end_turn";
      }
      if (sent === ABORTED || turn.controller.signal.aborted) return "cancelled";
      // BUSY: wait until the leader moves (or a second passes), then dispatch again.
      if (round >= MAX_BUSY_RETRIES) throw busy(product.productId);
      const seen = turn.leaderEvents;
      await this.waitFor(turn, () => turn.leaderEvents !== seen, BUSY_RETRY_MS);
      if (turn.controller.signal.aborted) return "cancelled";
    }
  }

  /** The first prompt (or one after a terminal product): starts a product with the prompt as its goal. */
  private async startProduct(s: LiveSession, turn: Turn, goal: string): Promise<StopReason> {
    const { productId } = await this.o.products.plan({
      goal,
      cwd: s.record.cwd,
      projectId: s.record.projectId,
      sessionId: s.record.sessionId,
    });
    const product = await this.o.products.get(productId);
    turn.product = product;
    s.record.productId = productId;
    delete s.record.shownPlanVersion;
    await this.save(s);
    await this.waitFor(turn, () => product.phase !== "planning" || !!product.model.state.planError || !!product.model.state.pendingAsk);
    if (turn.controller.signal.aborted || this.stopped) return "cancelled";
    return this.afterLeader(s, turn, product);
  }

  /** After a leader planning turn: a ready plan is shown and confirmed; otherwise (question, failure) the turn ends. */
  private afterLeader(s: LiveSession, turn: Turn, product: ProductOrchestrator): Promise<StopReason> | StopReason {
    if (turn.controller.signal.aborted) return "cancelled";
    if (product.phase === "awaiting_confirmation") return this.askToConfirm(s, turn, product);
    return "end_turn";
  }

  /**
   * Sends `product.message` and says the leader's answer unless it already reached the session. Resolves `BUSY` when
   * another leader turn runs (nothing was sent), `ABORTED` when the turn is cancelled first (the leader's call then
   * finishes in the background), else `undefined`.
   */
  private async messageLeader(
    s: LiveSession,
    turn: Turn,
    product: ProductOrchestrator,
    text: string,
  ): Promise<typeof ABORTED | typeof BUSY | undefined> {
    turn.leaderSpoke = false;
    const call = this.o.products.message(product.productId, text, product.model.state.pendingAsk?.askId);
    let answer;
    try {
      answer = await this.untilAborted(turn, call);
    } catch (err) {
      if (isDomainError(err, "busy")) return BUSY;
      throw err;
    }
    if (answer === ABORTED) {
      call.catch((err: unknown) => this.o.logger.debug({ err }, "leader message finished with an error after a cancel"));
      return ABORTED;
    }
    this.endStream(s, turn);
    if (!turn.leaderSpoke) this.say(s, turn, answer.response);
    return undefined;
  }

  /** Resolves with `p`, or with `ABORTED` as soon as the turn is cancelled (whichever comes first). */
  private untilAborted<T>(turn: Turn, p: Promise<T>): Promise<T | typeof ABORTED> {
    const signal = turn.controller.signal;
    if (signal.aborted) return Promise.resolve(ABORTED);
    return new Promise<T | typeof ABORTED>((resolve, reject) => {
      const onAbort = (): void => resolve(ABORTED);
      signal.addEventListener("abort", onAbort, { once: true });
      p.then(
        (value) => {
          signal.removeEventListener("abort", onAbort);
          resolve(value);
        },
        (err: unknown) => {
          signal.removeEventListener("abort", onAbort);
          reject(err);
        },
      );
    });
  }

  /** Shows the plan and asks `session/request_permission` (`confirm` / `revise`). */
  private async askToConfirm(s: LiveSession, turn: Turn, product: ProductOrchestrator): Promise<StopReason> {
    const plan = product.model.state.plan;
    if (!plan) return "end_turn";
    this.sendPlan(turn, product);
    s.record.shownPlanVersion = plan.version;
    const summary = plan.tasks.map((t) => `${t.taskId}. ${t.title}${t.dependsOn.length > 0 ? ` (after ${t.dependsOn.join(", ")})` : ""}`);
    let raw: unknown;
    try {
      raw = await this.o.connection.request(
        "session/request_permission",
        {
          sessionId: s.record.sessionId,
          toolCall: {
            toolCallId: `plan-${product.productId}-v${plan.version}`,
            title: `Run the plan "${plan.name}" (${plan.tasks.length} ${plan.tasks.length === 1 ? "task" : "tasks"})`,
            kind: "other",
            status: "pending",
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
      if (turn.controller.signal.aborted) return "cancelled";
      // A client that cannot show the question still gets a way forward.
      this.o.logger.warn({ err, sessionId: s.record.sessionId }, "session/request_permission failed");
      this.say(s, turn, 'Reply "confirm" to run this plan, or tell me what to change.');
      return "end_turn";
    }
    if (turn.controller.signal.aborted) return "cancelled";
    const parsed = RequestPermissionResult.safeParse(raw);
    const outcome = parsed.success ? parsed.data.outcome : undefined;
    if (outcome?.outcome === "selected" && outcome.optionId === "confirm") return this.execute(s, turn, product);
    if (outcome?.outcome === "selected" && outcome.optionId === "revise") {
      this.say(s, turn, "Tell me what to change in the plan.");
    } else {
      this.say(s, turn, 'The plan is waiting for your confirmation: reply "confirm" to run it, or tell me what to change.');
    }
    return "end_turn";
  }

  private async execute(s: LiveSession, turn: Turn, product: ProductOrchestrator): Promise<StopReason> {
    await this.o.products.confirm(product.productId, {});
    return this.follow(s, turn, product);
  }

  private async resume(s: LiveSession, turn: Turn, product: ProductOrchestrator): Promise<StopReason> {
    await this.o.products.resume(product.productId);
    return this.follow(s, turn, product);
  }

  /**
   * Follows execution until the product is completed, failed, paused or cancelled, or is waiting for an answer with
   * nothing else to do; then says a summary and ends the turn. A cancel ends the wait (the caller pauses the product).
   */
  private async follow(s: LiveSession, turn: Turn, product: ProductOrchestrator): Promise<StopReason> {
    let sawDriving = product.isDriving;
    const settled = (): boolean => {
      if (product.phase !== "executing") return true;
      if (product.isDriving) sawDriving = true;
      else if (sawDriving) return true; // stopped driving in this process (fenced by another owner)
      return waitingForAnswer(product) !== undefined;
    };
    await this.waitFor(turn, settled);
    if (turn.controller.signal.aborted || this.stopped) return "cancelled";
    this.sendPlan(turn, product);
    this.say(s, turn, summaryOf(product));
    return "end_turn";
  }

  /**
   * Waits until `done()` holds (checked after every product notification of the turn), the turn is cancelled, the
   * server stops, or `timeoutMs` passes.
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
      while (!done() && !turn.controller.signal.aborted && !this.stopped && !timedOut) {
        await new Promise<void>((resolve) => {
          turn.wake = resolve;
        });
        turn.wake = null;
      }
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Product notifications → session/update

  /** Maps product notifications to `session/update`s of the session whose turn follows that product. Never throws. */
  onProductNotification(method: string, params: Record<string, unknown>): void {
    const productId = params.productId;
    if (typeof productId !== "string") return;
    for (const turn of this.turns.values()) {
      if (turn.product?.productId !== productId) continue;
      const s = this.sessions.get(turn.sessionId);
      if (!s) continue;
      try {
        this.mapNotification(s, turn, turn.product, method, params);
      } catch (err) {
        this.o.logger.error({ err, method }, "could not map a product notification to session/update");
      }
      turn.wake?.();
    }
  }

  private mapNotification(
    s: LiveSession,
    turn: Turn,
    product: ProductOrchestrator,
    method: string,
    params: Record<string, unknown>,
  ): void {
    if (LEADER_EVENTS.has(method)) turn.leaderEvents++;
    switch (method) {
      case "product.planningDelta": {
        const text = String(params.text ?? "");
        if (text === "") break;
        turn.stream ??= { messageId: this.o.ids("msg"), text: "" };
        turn.stream.text += text;
        this.emit(turn, { sessionUpdate: "agent_message_chunk", content: { type: "text", text }, messageId: turn.stream.messageId });
        break;
      }
      case "product.leaderMessage":
        turn.leaderSpoke = true;
        if (turn.stream) this.endStream(s, turn);
        else this.say(s, turn, String(params.message ?? ""));
        break;
      case "product.leaderAsk": {
        const questions = Array.isArray(params.questions) ? (params.questions as { question: string; options?: string[] }[]) : [];
        const lines = questions.map(
          (q, i) => `${i + 1}. ${q.question}${q.options && q.options.length > 0 ? ` (${q.options.join(" / ")})` : ""}`,
        );
        this.say(s, turn, `Before I plan, please answer:\n${lines.join("\n")}`);
        break;
      }
      case "product.planFailed":
        turn.leaderSpoke = true;
        this.endStream(s, turn);
        this.say(s, turn, `${String(params.error ?? "The leader could not make a plan.")} Send a message to try again.`);
        break;
      case "product.dagTopology": {
        // New tasks become tool calls; known ones whose status changed without a taskStatus (rollback) are updated.
        this.trackProduct(s, product.productId);
        for (const t of product.model.state.tasks) if (s.announced.get(t.taskId) !== t.status) this.taskUpdate(s, turn, t);
        this.queuePlan(turn, product);
        break;
      }
      case "product.taskStatus": {
        const task = taskOf(product, String(params.taskId));
        if (!task) break;
        this.trackProduct(s, product.productId);
        this.taskUpdate(s, turn, { ...task, status: String(params.status) as TaskStatus });
        this.queuePlan(turn, product);
        break;
      }
      default:
        break;
    }
  }

  private trackProduct(s: LiveSession, productId: string): void {
    if (s.announcedFor === productId) return;
    s.announcedFor = productId;
    s.announced.clear();
  }

  /** One task as a tool call: `tool_call` the first time the session sees it, `tool_call_update` afterwards. */
  private taskUpdate(s: LiveSession, turn: Turn, task: TaskState): void {
    const status = toolStatus(task.status);
    const text = toolText(task);
    const content = text ? [{ type: "content" as const, content: { type: "text" as const, text } }] : undefined;
    const known = s.announced.has(task.taskId);
    s.announced.set(task.taskId, task.status);
    if (!known) {
      this.emit(turn, {
        sessionUpdate: "tool_call",
        toolCallId: task.taskId,
        title: task.title,
        kind: "other",
        status,
        ...(content ? { content } : {}),
      });
      return;
    }
    this.emit(turn, { sessionUpdate: "tool_call_update", toolCallId: task.taskId, status, ...(content ? { content } : {}) });
  }

  /** Ends a streamed leader message: what was streamed becomes one agent message of the conversation. */
  private endStream(s: LiveSession, turn: Turn): void {
    if (!turn.stream) return;
    if (turn.stream.text !== "") s.record.messages.push({ role: "agent", text: turn.stream.text });
    turn.stream = null;
  }

  // -------------------------------------------------------------------------------------------------------------
  // Worker permission questions

  /**
   * Forwards a worker's `session/request_permission` to the IDE when the worker's product belongs to a session this
   * connection has open (created, loaded or prompted, not closed): the question names the task in its title and
   * keeps the worker's options. Resolves `undefined` when no such session exists (the caller's policy decides).
   * Rejects when the IDE fails to answer or answers something invalid, and with the abort reason when `signal`
   * aborts (the request is then withdrawn with `$/cancel_request`).
   */
  async forwardWorkerPermission(request: ForwardedPermission): Promise<ForwardedPermissionAnswer | undefined> {
    if (this.stopped) return undefined;
    const product = await this.o.products.get(request.productId).catch(() => undefined);
    const sessionId = product?.model.state.sessionId;
    const s = sessionId === undefined ? undefined : this.sessions.get(sessionId);
    if (!s || !s.open) return undefined;
    const original = request.params.toolCall;
    const what = original.title ?? original.kind ?? "a tool call";
    const raw = await this.o.connection.request(
      "session/request_permission",
      {
        sessionId: s.record.sessionId,
        toolCall: {
          ...original,
          toolCallId: `${request.taskId}/${original.toolCallId}`,
          title: `Task ${request.taskId} "${request.taskTitle}": ${what}`,
          _meta: {
            ...(original._meta ?? {}),
            "acp-orchestrator": {
              productId: request.productId,
              taskId: request.taskId,
              attempt: request.attempt,
              agentId: request.agentId,
              workerToolCallId: original.toolCallId,
            },
          },
        },
        options: request.params.options,
      },
      { signal: request.signal },
    );
    const parsed = RequestPermissionResult.safeParse(raw);
    if (!parsed.success) throw new Error("The client answered session/request_permission with an invalid result.");
    const outcome = parsed.data.outcome;
    return outcome.outcome === "selected"
      ? { outcome: { outcome: "selected", optionId: outcome.optionId } }
      : { outcome: { outcome: "cancelled" } };
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Pure helpers

function taskOf(product: ProductOrchestrator, taskId: string): TaskState | undefined {
  const i = product.model.index.get(taskId);
  return i === undefined ? undefined : product.model.state.tasks[i];
}

/** ACP tool call status of a task status (ACP has no cancelled/skipped: they are `failed`). */
function toolStatus(status: TaskStatus): "pending" | "in_progress" | "completed" | "failed" {
  switch (status) {
    case "running":
      return "in_progress";
    case "completed":
      return "completed";
    case "pending":
    case "waiting":
      return "pending";
    default:
      return "failed";
  }
}

/** The text a task's tool call carries: the worker's output, the error, a retry note, or the pending question. */
function toolText(task: TaskState): string | undefined {
  switch (task.status) {
    case "completed":
      return task.output ? truncate(task.output, MAX_TOOL_CONTENT_CHARS) : undefined;
    case "failed":
      return task.error ?? "The task failed.";
    case "skipped":
      return task.error ?? "Skipped because a task it depends on failed.";
    case "cancelled":
      return "Cancelled.";
    case "waiting":
      return `Waiting for an answer: ${task.question ?? "(no question given)"}`;
    case "pending":
      return task.error && task.attempts > 0 ? `Attempt ${task.attempts} failed: ${task.error} It will run again.` : undefined;
    default:
      return undefined;
  }
}

/** ACP plan entries: every task of the product (or of its proposed plan before confirmation), in plan order. */
export function planEntries(product: ProductOrchestrator): { content: string; priority: "medium"; status: "pending" | "in_progress" | "completed" }[] {
  const state = product.model.state;
  const source: { title: string; status: TaskStatus }[] =
    state.tasks.length > 0 ? state.tasks : (state.plan?.tasks ?? []).map((t) => ({ title: t.title, status: "pending" as const }));
  return source.map((t) => ({
    content:
      t.status === "failed" || t.status === "skipped" || t.status === "cancelled" ? `${t.title} (${t.status})` : t.title,
    priority: "medium",
    status: t.status === "running" ? "in_progress" : t.status === "pending" || t.status === "waiting" ? "pending" : "completed",
  }));
}

/**
 * The waiting task whose answer the execution needs, when nothing runs and nothing else can start (so the turn should
 * end and let the user answer), else `undefined`.
 */
function waitingForAnswer(product: ProductOrchestrator): TaskState | undefined {
  const counts = product.model.counts;
  if (counts.running > 0 || counts.waiting === 0) return undefined;
  const tasks = product.model.state.tasks;
  const statusOf = (id: string): TaskStatus | undefined => taskOf(product, id)?.status;
  const ready = tasks.some((t) => t.status === "pending" && t.dependsOn.every((d) => statusOf(d) === "completed"));
  return ready ? undefined : tasks.find((t) => t.status === "waiting");
}

/** The summary said at the end of an execution turn. */
function summaryOf(product: ProductOrchestrator): string {
  const st = product.model.state;
  const total = st.tasks.length;
  const done = product.model.counts.completed;
  switch (product.phase) {
    case "completed":
      return `Done: all ${total} ${total === 1 ? "task" : "tasks"} completed.`;
    case "failed": {
      const failed = st.tasks.filter((t) => t.status !== "completed").map((t) => `${t.taskId} ${t.status}${t.error ? ` (${t.error})` : ""}`);
      return `Finished with failures: ${done} of ${total} tasks completed; ${failed.join("; ")}.`;
    }
    case "paused":
      return `Paused: ${st.recovery?.cause ?? "the product was paused."} Say "resume" to continue.`;
    case "cancelled":
      return `The product was cancelled: ${done} of ${total} tasks completed.`;
    default: {
      const waiting = waitingForAnswer(product);
      if (waiting) {
        return `Task ${waiting.taskId} "${waiting.title}" needs an answer: ${waiting.question ?? "(no question given)"}\nReply with your answer and the task will run again.`;
      }
      return `Execution stopped in this process: ${product.recovery()?.cause ?? "another owner took over."}`;
    }
  }
}

/** The text of a prompt: text blocks, embedded text resources and resource links, in order. */
export function promptText(blocks: ContentBlock[]): string {
  const parts: string[] = [];
  for (const b of blocks) {
    if (b.type === "text") parts.push(b.text);
    else if (b.type === "resource_link") parts.push(`[${b.name}](${b.uri})`);
    else if (b.type === "resource") {
      const r = b.resource as { uri: string; text?: string };
      parts.push(r.text !== undefined ? `${r.uri}:\n${r.text}` : r.uri);
    }
  }
  return parts.join("\n").trim();
}
