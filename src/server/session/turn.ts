/**
 * One running `session/prompt` turn and what it sends (PROTOCOL.md section 4): the turn's state, its ordered
 * `session/update` stream, agent messages (each with its own `messageId`, each ending with a blank line), the
 * coalesced `plan` update, and the mapping of product and goal-run notifications to `session/update`s.
 *
 * A turn never sends an update after its answer (the adapter awaits `sent` before answering) and never throws from
 * a notification.
 */
import type { SessionUpdate } from "../../../protocol/acp.js";
import type { TaskState, TaskStatus } from "../../../protocol/common.js";
import type { ProductOrchestrator } from "../../core/product/orchestrator.js";
import type { IdGenerator } from "../../core/ports.js";
import type { AttachmentRef } from "../../core/product/agent-inputs.js";
import type { LiveSession } from "./store.js";
import { asMessage, planEntries, taskOf, taskToolCallId, toolStatus, toolText, verificationText } from "./view.js";

/** Product notifications that mean the leader finished something (a busy leader may be free again). */
const LEADER_EVENTS = new Set([
  "product.leaderMessage",
  "product.leaderAsk",
  "product.planReady",
  "product.planFailed",
  "product.dagMutated",
]);

/** Sends one `session/update` of a session; resolves when the writer took it. Never rejects. */
export type SendUpdate = (sessionId: string, update: SessionUpdate) => Promise<void>;

/** One running `session/prompt`. Created synchronously when the prompt arrives, so a cancel right behind it is never lost. */
export class Turn {
  readonly controller = new AbortController();
  product: ProductOrchestrator | undefined;
  /** The goal run this turn follows (goal mode or `/goal`), with its last known status. */
  goal: { goalRunId: string; status: string; products: Set<string> } | undefined;
  /** Resolves the current `waitFor` so it re-checks its condition (set by notifications and cancel). */
  wake: (() => void) | null = null;
  /** Leader text streaming through `product.planningDelta` since the last leader message. */
  stream: { messageId: string; text: string } | null = null;
  /** Set when the leader's message of the current call reached the session (no need to repeat the answer). */
  leaderSpoke = false;
  /** Counts leader notifications (message, plan, ask, failure, mutation): a busy leader is retried when it moves. */
  leaderEvents = 0;
  /** A coalesced `plan` update is queued (one per macrotask, however many task updates came). */
  planQueued = false;
  /** The images and binary resources of the prompt, by reference: recorded with its message to the product. */
  attachments: AttachmentRef[] = [];
  /** The last `session/update` of this turn handed to the writer; awaited before the turn answers. */
  sent: Promise<void> = Promise.resolve();
  /** Resolves when the turn has answered (a prompt arriving while a cancelled turn settles waits for it). */
  readonly done: Promise<void>;
  finish!: () => void;

  constructor(
    readonly sessionId: string,
    readonly session: () => LiveSession | undefined,
    private readonly send: SendUpdate,
    private readonly ids: IdGenerator,
  ) {
    this.done = new Promise((resolve) => (this.finish = resolve));
  }

  get aborted(): boolean {
    return this.controller.signal.aborted;
  }

  /** Sends an update of this turn; updates keep their call order, and the turn awaits the last one before answering. */
  emit(update: SessionUpdate): void {
    this.sent = this.send(this.sessionId, update);
  }

  /** An agent message: recorded in the conversation and sent as one `agent_message_chunk` ending with a blank line. */
  say(text: string): void {
    if (!text) return;
    this.session()?.record.messages.push({ role: "agent", text });
    this.emit({
      sessionUpdate: "agent_message_chunk",
      content: { type: "text", text: asMessage(text) },
      messageId: this.ids("msg"),
    });
  }

  /** The text of the leader message streaming now (not yet a message of the conversation: `endStream`), or `""`. */
  streamedText(): string {
    return this.stream?.text ?? "";
  }

  /** Ends a streamed leader message: a closing blank line is sent, and the text becomes one message of the conversation. */
  endStream(): void {
    const stream = this.stream;
    if (!stream) return;
    this.stream = null;
    if (stream.text === "") return;
    this.session()?.record.messages.push({ role: "agent", text: stream.text });
    const tail = asMessage(stream.text).slice(stream.text.length);
    if (tail !== "") {
      this.emit({
        sessionUpdate: "agent_message_chunk",
        content: { type: "text", text: tail },
        messageId: stream.messageId,
      });
    }
  }

  /** Sends the full plan now (and drops a queued one: this one is newer). */
  sendPlan(product: ProductOrchestrator): void {
    this.planQueued = false;
    const entries = planEntries(product);
    if (entries.length > 0) this.emit({ sessionUpdate: "plan", entries });
  }

  /** Queues one full `plan` update for the end of this macrotask (task updates of one wave share it). */
  queuePlan(product: ProductOrchestrator, stillCurrent: () => boolean): void {
    if (this.planQueued) return;
    this.planQueued = true;
    setImmediate(() => {
      if (this.planQueued && stillCurrent()) this.sendPlan(product);
    });
  }

  /** One task as a tool call: `tool_call` the first time the session sees it, `tool_call_update` (with its title) after. */
  taskUpdate(s: LiveSession, productId: string, task: TaskState): void {
    const status = toolStatus(task.status);
    const text = toolText(task);
    const content = text ? [{ type: "content" as const, content: { type: "text" as const, text } }] : undefined;
    const known = s.announced.has(task.taskId);
    s.announced.set(task.taskId, task.status);
    const toolCallId = taskToolCallId(productId, task.taskId);
    if (!known) {
      this.emit({
        sessionUpdate: "tool_call",
        toolCallId,
        title: task.title,
        kind: "other",
        status,
        rawInput: { taskId: task.taskId, instanceId: task.instanceId, agentId: agentOf(productId, task, this.product) },
        ...(content ? { content } : {}),
      });
      return;
    }
    this.emit({
      sessionUpdate: "tool_call_update",
      toolCallId,
      title: task.title,
      status,
      ...(content ? { content } : {}),
    });
  }

  /** Maps one product notification of the product this turn follows to `session/update`s. */
  mapProduct(s: LiveSession, product: ProductOrchestrator, method: string, params: Record<string, unknown>): void {
    if (LEADER_EVENTS.has(method)) this.leaderEvents++;
    switch (method) {
      case "product.planningDelta": {
        const text = String(params.text ?? "");
        if (text === "") break;
        this.stream ??= { messageId: this.ids("msg"), text: "" };
        this.stream.text += text;
        this.emit({
          sessionUpdate: "agent_message_chunk",
          content: { type: "text", text },
          messageId: this.stream.messageId,
        });
        break;
      }
      case "product.leaderMessage":
        this.leaderSpoke = true;
        if (this.stream) this.endStream();
        else this.say(String(params.message ?? ""));
        break;
      case "product.leaderAsk": {
        const questions = Array.isArray(params.questions)
          ? (params.questions as { question: string; options?: string[] }[])
          : [];
        const lines = questions.map(
          (q, i) => `${i + 1}. ${q.question}${q.options && q.options.length > 0 ? ` (${q.options.join(" / ")})` : ""}`,
        );
        this.say(`Before I plan, please answer:\n${lines.join("\n")}`);
        break;
      }
      case "product.planFailed":
        this.leaderSpoke = true;
        this.endStream();
        this.say(`${String(params.error ?? "The leader could not make a plan.")} Send a message to try again.`);
        break;
      case "product.dagTopology": {
        // New tasks become tool calls; known ones whose status changed without a taskStatus (rollback) are updated.
        trackProduct(s, product.productId);
        for (const t of product.model.state.tasks) {
          if (s.announced.get(t.taskId) !== t.status) this.taskUpdate(s, product.productId, t);
        }
        this.queuePlan(product, () => this.product === product);
        break;
      }
      case "product.taskStatus": {
        const task = taskOf(product, String(params.taskId));
        if (!task) break;
        trackProduct(s, product.productId);
        this.taskUpdate(s, product.productId, { ...task, status: String(params.status) as TaskStatus });
        this.queuePlan(product, () => this.product === product);
        break;
      }
      case "product.taskVerified": {
        // Guarantee 17 in ACP terms: the task's tool call gets the checks; the final head's are an agent message.
        const text = verificationText(params);
        const taskId = typeof params.taskId === "string" ? params.taskId : undefined;
        const task = taskId === undefined ? undefined : taskOf(product, taskId);
        if (!task || !s.announced.has(task.taskId)) {
          this.say(text);
          break;
        }
        this.emit({
          sessionUpdate: "tool_call_update",
          toolCallId: taskToolCallId(product.productId, task.taskId),
          content: [{ type: "content", content: { type: "text", text } }],
        });
        break;
      }
      case "product.budgetUpdate": {
        // PROTOCOL.md section 4: tokens used against the product's token budget, when it has one.
        const size = params.maxTotalTokens;
        if (typeof size !== "number") break;
        const used = Number(params.inputTokens ?? 0) + Number(params.outputTokens ?? 0);
        this.emit({ sessionUpdate: "usage_update", used: Math.max(0, Math.round(used)), size: Math.round(size) });
        break;
      }
      default:
        break;
    }
  }

  /** Maps one `x/goal.*` notification of the goal run this turn follows: assessments and phases as agent messages. */
  mapGoal(method: string, params: Record<string, unknown>): void {
    const goal = this.goal;
    if (!goal) return;
    switch (method) {
      case "x/goal.started": {
        const criteria = Array.isArray(params.criteria) ? (params.criteria as { id?: string; text?: string }[]) : [];
        this.say(
          `Working toward the goal. Acceptance criteria:\n${criteria.map((c, i) => `${i + 1}. ${c.text ?? c.id ?? ""}`).join("\n")}`,
        );
        break;
      }
      case "x/goal.phaseStarted":
        goal.products.add(String(params.productId));
        this.say(`Phase ${Number(params.phaseIndex) + 1} started.`);
        break;
      case "x/goal.phaseAssessed": {
        const newly = Array.isArray(params.newlyPassed) ? (params.newlyPassed as string[]) : [];
        const regressed = Array.isArray(params.regressed) ? (params.regressed as string[]) : [];
        this.say(
          `Phase ${Number(params.phaseIndex) + 1} assessed: ${String(params.passed)} of ${String(params.total)} criteria pass` +
            `${newly.length > 0 ? `; newly passing: ${newly.join(", ")}` : ""}` +
            `${regressed.length > 0 ? `; regressed: ${regressed.join(", ")}` : ""}.`,
        );
        break;
      }
      case "x/goal.statusChanged":
        goal.status = String(params.status);
        break;
      default:
        break;
    }
  }
}

function trackProduct(s: LiveSession, productId: string): void {
  if (s.announcedFor === productId) return;
  s.announcedFor = productId;
  s.announced.clear();
}

function agentOf(productId: string, task: TaskState, product: ProductOrchestrator | undefined): string | undefined {
  if (product?.productId !== productId) return undefined;
  return product.model.state.plan?.instances.find((i) => i.instanceId === task.instanceId)?.agentId;
}

/** What `untilAborted` resolves with when the turn is cancelled first. */
export const ABORTED = Symbol("aborted");

/** Resolves with `p`, or with `ABORTED` as soon as the turn is cancelled (whichever comes first). */
export function untilAborted<T>(turn: Turn, p: Promise<T>): Promise<T | typeof ABORTED> {
  const signal = turn.controller.signal;
  if (signal.aborted) return Promise.resolve(ABORTED);
  return new Promise<T | typeof ABORTED>((resolveRace, reject) => {
    const onAbort = (): void => resolveRace(ABORTED);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolveRace(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/** Resolves when `p` settles or `ms` pass, whichever is first. Never rejects. */
export function settleWithin(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise<void>((resolveWait) => {
    const timer = setTimeout(resolveWait, ms);
    p.then(
      () => {
        clearTimeout(timer);
        resolveWait();
      },
      () => {
        clearTimeout(timer);
        resolveWait();
      },
    );
  });
}
