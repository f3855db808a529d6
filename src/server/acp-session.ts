/**
 * The ACP session adapter (PROTOCOL.md section 4): `session/*` ↔ products.
 *
 * A session is a conversation with the leader about one product at a time. This adapter turns prompts into product
 * operations (plan, message, confirm) and product notifications into `session/update`s (agent_message_chunk, plan,
 * tool_call, tool_call_update) while a prompt turn is active. Sessions are persisted through the run-state authority
 * so `session/load` and `session/list` work after a restart. It must never send product notifications on
 * `session/update` outside a turn, and never turn a cancellation into an error (ACP: `stopReason: "cancelled"`).
 */
import { z } from "zod";
import type { ContentBlock, SessionUpdate } from "../../protocol/acp.js";
import type { ParamsOf } from "../../protocol/methods.js";
import { TerminalPhases, type Phase } from "../../protocol/common.js";
import { invalidPhase, notFound } from "../core/errors.js";
import { clientNotifications } from "../../protocol/methods.js";
import type { ProductService } from "../core/product/service.js";
import type { Clock, IdGenerator, Logger, RunStateAuthority } from "../core/ports.js";
import type { RequestContext, RpcConnection } from "./rpc-connection.js";
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
  createdAt: z.string(),
  updatedAt: z.string(),
  messages: z.array(z.object({ role: z.enum(["user", "agent"]), text: z.string() })),
});
type SessionRecord = z.infer<typeof SessionRecord>;

interface Turn {
  controller: AbortController;
  productId: string | undefined;
  /** Leader text streamed through planningDelta since the last leaderMessage (to avoid sending it twice). */
  streamed: boolean;
  agentText: string;
  wake: (() => void) | null;
  tools: Set<string>;
}

interface LiveSession {
  record: SessionRecord;
  revision: number | null;
  turn: Turn | null;
}

const sessionCancel = clientNotifications.find((n) => n.method === "session/cancel")!;

const CONFIRM_WORDS = new Set(["confirm", "go", "start", "yes"]);

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

export class SessionAdapter {
  private readonly sessions = new Map<string, LiveSession>();
  private readonly byProduct = new Map<string, string>();
  private stopped = false;

  constructor(private readonly o: SessionAdapterOptions) {}

  /** Registers the `session/*` handlers on the connection. */
  register(handle: Register): void {
    const h = <M extends "session/new" | "session/load" | "session/list" | "session/close" | "session/prompt">(
      method: M,
      fn: (params: ParamsOf<M>, ctx: RequestContext) => Promise<unknown>,
    ): void => handle(method, fn as (params: unknown, ctx: RequestContext) => Promise<unknown>);
    h("session/new", (p) => this.newSession(p.cwd));
    h("session/load", (p) => this.load(p.sessionId));
    h("session/list", (p) => this.list(p.cwd ?? undefined));
    h("session/close", (p) => this.close(p.sessionId));
    h("session/prompt", (p, ctx) => this.prompt(p.sessionId, p.prompt, ctx));
    this.o.connection.handleNotification(sessionCancel, (params) => this.cancel(params.sessionId));
  }

  private now(): string {
    return new Date(this.o.clock.now()).toISOString();
  }

  private async save(s: LiveSession): Promise<void> {
    s.record.updatedAt = this.now();
    const { revision } = await this.o.authority.put(SESSION_PROJECT, "session", s.record.sessionId, s.record, s.revision);
    s.revision = revision;
  }

  private async get(sessionId: string): Promise<LiveSession> {
    const live = this.sessions.get(sessionId);
    if (live) return live;
    const rec = await this.o.authority.get(SESSION_PROJECT, "session", sessionId);
    const parsed = rec ? SessionRecord.safeParse(rec.value) : undefined;
    if (!rec || !parsed?.success) throw notFound("session", sessionId);
    const s: LiveSession = { record: parsed.data, revision: rec.revision, turn: null };
    this.sessions.set(sessionId, s);
    if (s.record.productId) this.byProduct.set(s.record.productId, sessionId);
    return s;
  }

  private async newSession(cwd: string): Promise<{ sessionId: string }> {
    const sessionId = this.o.ids("ses");
    const at = this.now();
    const s: LiveSession = {
      record: { v: 1, sessionId, cwd, projectId: this.o.projectIdFor(cwd), createdAt: at, updatedAt: at, messages: [] },
      revision: null,
      turn: null,
    };
    await this.save(s);
    this.sessions.set(sessionId, s);
    return { sessionId };
  }

  /** `session/load`: replays the conversation and the latest plan as `session/update`s, then answers `{}`. */
  private async load(sessionId: string): Promise<Record<string, never>> {
    const s = await this.get(sessionId);
    for (const m of s.record.messages) {
      await this.update(sessionId, {
        sessionUpdate: m.role === "user" ? "user_message_chunk" : "agent_message_chunk",
        content: { type: "text", text: m.text },
      });
    }
    if (s.record.productId) {
      try {
        const product = await this.o.products.get(s.record.productId);
        const entries = this.planEntries(product.model.state);
        if (entries.length > 0) await this.update(sessionId, { sessionUpdate: "plan", entries });
      } catch {
        // The product was deleted: the conversation is still replayed.
      }
    }
    return {};
  }

  private async list(cwd: string | undefined) {
    const infos = await this.o.authority.list(SESSION_PROJECT, "session");
    const sessions = [];
    for (const info of infos) {
      const rec = await this.o.authority.get(SESSION_PROJECT, "session", info.id);
      const parsed = rec ? SessionRecord.safeParse(rec.value) : undefined;
      if (!parsed?.success) continue;
      if (cwd !== undefined && parsed.data.cwd !== cwd) continue;
      sessions.push({
        sessionId: parsed.data.sessionId,
        cwd: parsed.data.cwd,
        ...(parsed.data.title !== undefined ? { title: parsed.data.title } : {}),
        updatedAt: parsed.data.updatedAt,
      });
    }
    return { sessions };
  }

  private async close(sessionId: string): Promise<Record<string, never>> {
    const s = await this.get(sessionId);
    if (s.turn) this.cancel(sessionId);
    this.sessions.delete(sessionId);
    return {};
  }

  /** `session/cancel`: aborts the active turn; the product is paused and the prompt answers `cancelled`. */
  cancel(sessionId: string): void {
    const s = this.sessions.get(sessionId);
    s?.turn?.controller.abort();
    s?.turn?.wake?.();
  }

  /** Stops every turn (server shutdown). */
  shutdown(): void {
    this.stopped = true;
    for (const s of this.sessions.values()) {
      s.turn?.controller.abort();
      s.turn?.wake?.();
    }
  }

  private update(sessionId: string, update: SessionUpdate | Record<string, unknown>): Promise<void> {
    return this.o.connection.notify("session/update", { sessionId, update }).catch((err: unknown) => {
      this.o.logger.warn({ err }, "could not send session/update");
    });
  }

  private async say(s: LiveSession, text: string): Promise<void> {
    if (!text) return;
    s.record.messages.push({ role: "agent", text });
    await this.update(s.record.sessionId, { sessionUpdate: "agent_message_chunk", content: { type: "text", text } });
  }

  private planEntries(state: { tasks: { title: string; status: string }[]; plan?: { tasks: { title: string }[] } }) {
    const source = state.tasks.length > 0 ? state.tasks : (state.plan?.tasks ?? []).map((t) => ({ ...t, status: "pending" }));
    return source.map((t) => ({
      content: t.title,
      priority: "medium" as const,
      status:
        t.status === "completed" || t.status === "failed" || t.status === "skipped" || t.status === "cancelled"
          ? ("completed" as const)
          : t.status === "running"
            ? ("in_progress" as const)
            : ("pending" as const),
    }));
  }

  /** `session/prompt`: one turn of the conversation (PROTOCOL.md section 4). */
  private async prompt(sessionId: string, blocks: ContentBlock[], ctx: RequestContext): Promise<{ stopReason: string }> {
    const s = await this.get(sessionId);
    if (s.turn) {
      throw invalidPhase("prompting", ["idle"], {
        subject: `Session ${sessionId}`,
        operation: "session/prompt (a prompt turn is already running; wait for it or send session/cancel)",
      });
    }
    const text = promptText(blocks);
    if (text === "") {
      // A goal or a message to the leader must not be blank (product.plan / product.message schemas).
      throw invalidParams([
        { path: ["prompt"], message: "must contain some text (a text block, an embedded text resource or a resource link)" },
      ]);
    }
    const turn: Turn = {
      controller: new AbortController(),
      productId: s.record.productId,
      streamed: false,
      agentText: "",
      wake: null,
      tools: new Set(),
    };
    ctx.signal.addEventListener("abort", () => turn.controller.abort(), { once: true });
    s.turn = turn;
    s.record.messages.push({ role: "user", text });
    s.record.title ??= text.slice(0, 80);
    try {
      const stop = await this.runTurn(s, turn, text);
      return { stopReason: stop };
    } catch (err) {
      if (turn.controller.signal.aborted) return { stopReason: "cancelled" };
      throw err;
    } finally {
      s.turn = null;
      await this.save(s).catch((err: unknown) => this.o.logger.warn({ err }, "could not save the session"));
    }
  }

  private async runTurn(s: LiveSession, turn: Turn, text: string): Promise<"end_turn" | "cancelled"> {
    const products = this.o.products;
    let product = s.record.productId ? await products.get(s.record.productId).catch(() => undefined) : undefined;
    if (!product || TerminalPhases.includes(product.phase)) {
      const { productId } = await products.plan({
        goal: text,
        cwd: s.record.cwd,
        projectId: s.record.projectId,
        sessionId: s.record.sessionId,
      });
      s.record.productId = productId;
      turn.productId = productId;
      this.byProduct.set(productId, s.record.sessionId);
      await this.save(s);
      product = await products.get(productId);
      await this.waitFor(turn, () => product!.phase !== "planning" || !!product!.model.state.planError || !!product!.model.state.pendingAsk);
    } else {
      turn.productId = product.productId;
      const word = text.trim().toLowerCase();
      if (CONFIRM_WORDS.has(word) && product.phase === "awaiting_confirmation") {
        return this.execute(s, turn, product.productId);
      }
      if (CONFIRM_WORDS.has(word) && product.phase === "paused") {
        await products.resume(product.productId);
        return this.follow(s, turn, product.productId);
      }
      const answer = await products.message(
        product.productId,
        text,
        product.model.state.pendingAsk?.askId,
      );
      if (!turn.streamed) await this.say(s, answer.response);
      turn.streamed = false;
    }
    if (turn.controller.signal.aborted) return "cancelled";
    if (product.phase !== "awaiting_confirmation") return "end_turn";
    return this.askToConfirm(s, turn, product.productId);
  }

  private async askToConfirm(s: LiveSession, turn: Turn, productId: string): Promise<"end_turn" | "cancelled"> {
    const product = await this.o.products.get(productId);
    const entries = this.planEntries(product.model.state);
    await this.update(s.record.sessionId, { sessionUpdate: "plan", entries });
    let outcome: unknown;
    try {
      outcome = await this.o.connection.request(
        "session/request_permission",
        {
          sessionId: s.record.sessionId,
          toolCall: { toolCallId: `plan-${productId}`, title: `Run the plan "${product.model.state.name}" (${entries.length} tasks)`, kind: "other", status: "pending" },
          options: [
            { optionId: "confirm", name: "Confirm and run", kind: "allow_once" },
            { optionId: "revise", name: "Revise the plan", kind: "reject_once" },
          ],
        },
        { signal: turn.controller.signal },
      );
    } catch (err) {
      if (turn.controller.signal.aborted) return "cancelled";
      throw err;
    }
    const selected = (outcome as { outcome?: { outcome?: string; optionId?: string } } | undefined)?.outcome;
    if (selected?.outcome === "selected" && selected.optionId === "confirm") return this.execute(s, turn, productId);
    if (selected?.outcome === "cancelled" || turn.controller.signal.aborted) return "cancelled";
    await this.say(s, "Tell me what to change in the plan.");
    return "end_turn";
  }

  private async execute(s: LiveSession, turn: Turn, productId: string): Promise<"end_turn" | "cancelled"> {
    await this.o.products.confirm(productId, {});
    return this.follow(s, turn, productId);
  }

  /** Follows execution until the product is completed, failed or paused; a cancel pauses it. */
  private async follow(s: LiveSession, turn: Turn, productId: string): Promise<"end_turn" | "cancelled"> {
    const product = await this.o.products.get(productId);
    const settled = (phase: Phase): boolean => phase !== "executing";
    await this.waitFor(turn, () => settled(product.phase));
    if (turn.controller.signal.aborted) {
      if (product.phase === "executing" || product.phase === "paused") await this.o.products.pause(productId).catch(() => undefined);
      return "cancelled";
    }
    const st = product.model.state;
    const done = product.model.counts.completed;
    const summary =
      product.phase === "paused"
        ? `Paused: ${st.recovery?.cause ?? "the product was paused"} ${st.recovery?.remediation ?? ""}`.trim()
        : `${product.phase === "completed" ? "Done" : "Finished with failures"}: ${done} of ${st.tasks.length} tasks completed.`;
    await this.say(s, summary);
    return "end_turn";
  }

  /** Waits until `done()` holds (checked after every product notification) or the turn is cancelled. */
  private async waitFor(turn: Turn, done: () => boolean): Promise<void> {
    while (!done() && !turn.controller.signal.aborted && !this.stopped) {
      await new Promise<void>((resolve) => {
        turn.wake = resolve;
      });
      turn.wake = null;
    }
  }

  /** Maps product notifications to `session/update`s of the session that owns the product, during its turn. */
  onProductNotification(method: string, params: Record<string, unknown>): void {
    const productId = params.productId;
    if (typeof productId !== "string") return;
    const sessionId = this.byProduct.get(productId);
    const s = sessionId ? this.sessions.get(sessionId) : undefined;
    const turn = s?.turn;
    if (!s || !turn || turn.productId !== productId) return;
    const sid = s.record.sessionId;
    switch (method) {
      case "product.planningDelta":
        turn.streamed = true;
        turn.agentText += String(params.text);
        void this.update(sid, { sessionUpdate: "agent_message_chunk", content: { type: "text", text: String(params.text) } });
        break;
      case "product.leaderMessage":
        if (!turn.streamed) void this.say(s, String(params.message));
        else s.record.messages.push({ role: "agent", text: turn.agentText });
        turn.streamed = false;
        turn.agentText = "";
        break;
      case "product.taskStatus":
        void this.taskUpdate(s, turn, params);
        break;
      default:
        break;
    }
    turn.wake?.();
  }

  private async taskUpdate(s: LiveSession, turn: Turn, params: Record<string, unknown>): Promise<void> {
    const taskId = String(params.taskId);
    const status = String(params.status);
    const product = await this.o.products.get(String(params.productId));
    const index = product.model.index.get(taskId);
    const task = index === undefined ? undefined : product.model.state.tasks[index];
    const acpStatus =
      status === "running" ? "in_progress" : status === "completed" ? "completed" : status === "pending" || status === "waiting" ? "pending" : "failed";
    const sid = s.record.sessionId;
    if (!turn.tools.has(taskId)) {
      turn.tools.add(taskId);
      await this.update(sid, {
        sessionUpdate: "tool_call",
        toolCallId: taskId,
        title: task?.title ?? taskId,
        kind: "other",
        status: acpStatus,
      });
    } else {
      const text = status === "completed" ? task?.output : status === "failed" ? task?.error : undefined;
      await this.update(sid, {
        sessionUpdate: "tool_call_update",
        toolCallId: taskId,
        status: acpStatus,
        ...(text ? { content: [{ type: "content", content: { type: "text", text } }] } : {}),
      });
    }
    await this.update(sid, { sessionUpdate: "plan", entries: this.planEntries(product.model.state) });
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
