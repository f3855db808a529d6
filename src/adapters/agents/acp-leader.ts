/**
 * The model-backed leader (issue 3 item 2, issue 5 item 1): `AcpLeader` implements the core's `LeaderPort` for one
 * agent of the registry by speaking ACP v1 to it as its client.
 *
 * Owns: the leader's conversations (one per product and per goal run, leader-conversation.ts), the repair loop (at
 * most `maxAttempts` answers, validated by leader-answers.ts) and idle/eviction of conversations. The prompt texts live
 * in leader-prompts.ts; the resolver that picks a product's leader in leader-resolver.ts. It must never hand the core
 * an answer that did not validate, and never leave a child running after `close()` or after the server process exits.
 */
import type {
  AssessRequest,
  AssessResult,
  ChecklistRequest,
  ChecklistResult,
  FailureConsultation,
  FailureDecision,
  LeaderPort,
  Logger,
  MessageRequest,
  MessageResult,
  PhasePlanRequest,
  PhasePlanResult,
  PlanRequest,
  PlanResult,
} from "../../core/ports.js";
import {
  parseAssessAnswer,
  parseChecklistAnswer,
  parseConsultAnswer,
  parseMessageAnswer,
  parsePhaseAnswer,
  parsePlanAnswer,
} from "./leader-answers.js";
import type { Parsed } from "./leader-answers.js";
import { McpSecrets } from "./mcp-servers.js";
import type { ResolvedMcp } from "./mcp-servers.js";
import type { StoredMcpServer } from "../../core/product/mcp-servers.js";
import { conversationAttachments } from "../../core/product/agent-inputs.js";
import type { AttachmentRef, ReadAttachment, SessionInputs } from "../../core/product/agent-inputs.js";
import { LeaderConversation } from "./leader-conversation.js";
import type { TurnAnswer, TurnMeta } from "./leader-conversation.js";
import { extractJsonBlock, ProseStream } from "./leader-json.js";
import {
  assessPrompt,
  checklistPrompt,
  consultPrompt,
  messagePrompt,
  phasePrompt,
  planPrompt,
  repairPrompt,
} from "./leader-prompts.js";
import type { LeaderTurnKind } from "./leader-prompts.js";
import type { AgentRegistry } from "./registry.js";

export { extractJsonBlock, ProseStream } from "./leader-json.js";
export type { ExtractedJson } from "./leader-json.js";
export {
  parseAssessAnswer,
  parseChecklistAnswer,
  parseConsultAnswer,
  parseMessageAnswer,
  parsePhaseAnswer,
  parsePlanAnswer,
} from "./leader-answers.js";
export type { Parsed } from "./leader-answers.js";

/** Options of `AcpLeader`. Durations are milliseconds. */
export interface AcpLeaderOptions {
  /** The registry agent that leads. */
  agentId: string;
  registry: Pick<AgentRegistry, "launchSpec">;
  logger: Logger;
  /** Answers per structured turn, the first one included (a repair prompt follows each invalid one). Default 3. */
  maxAttempts?: number;
  /** How long a cancelled turn may take to answer, and a process to exit after stdin closes / SIGTERM. Default 2000. */
  graceMs?: number;
  /**
   * Wall-time limit of one answer, from `session/prompt` to its response; on expiry the turn is cancelled, the process
   * killed and the call rejects. Default 10 min.
   */
  turnTimeoutMs?: number;
  /** Wall-time limit of starting a conversation (spawn, `initialize`, `session/new`); same consequences. Default 60 s. */
  startTimeoutMs?: number;
  /** A conversation idle this long is closed (its process ends); the next turn starts a fresh one. Default 10 min. */
  idleMs?: number;
  /** At most this many conversations keep a process; the least recently used idle one is closed first. Default 8. */
  maxConversations?: number;
  /** Session cwd when a request carries none and the subject's cwd is not known (e.g. after a restart). Default: process cwd. */
  defaultCwd?: string;
  /** `clientInfo` given in `initialize`. Defaults `acp-orchestrator` / `dev`. */
  clientName?: string;
  clientVersion?: string;
  /** The secrets of products' MCP servers held by this process (issue 28, mcp-servers.ts). */
  mcpSecrets?: McpSecrets;
  /** Reads the user's stored attachments for the prompts (issue 31, prompt-content.ts); absent: notes only. */
  readAttachment?: ReadAttachment;
}

/** Thrown inside the repair loop when every answer was invalid; carries the per-answer problems. */
class InvalidAnswers extends Error {
  constructor(
    message: string,
    readonly lastProse: string,
  ) {
    super(message);
  }
}

const MAX_FAILURE_CHARS = 600;

/**
 * A leader backed by an ACP agent of the registry (DESIGN.md, Agents; ports.ts `LeaderPort`).
 *
 * Conversations: one child process with one ACP session per product (plan, message, consultOnFailure) and one per
 * goal run (deriveChecklist, planPhase, assess), opened at the first turn with `session/new` in the subject's cwd and
 * kept so the agent keeps its context; turns within a conversation are serialised. Every prompt is nonetheless
 * self-contained (goal, team, dialogue or DAG progress), so a conversation that was closed for idleness (`idleMs`),
 * evicted (`maxConversations`), or lost to a crash is simply started again by the next turn.
 *
 * Answers: every structured turn wants exactly one fenced JSON block; an invalid answer gets a repair prompt with
 * the validation errors, up to `maxAttempts` answers in all; then the method rejects with an `Error` whose message
 * lists the problems of every answer (the orchestrator turns a planning rejection into `product.planFailed`). Only
 * `message` never rejects for invalid answers: the JSON is optional there, so after the last invalid one it answers
 * with the prose and a note that nothing was changed. Methods also reject when the agent cannot be started, crashes,
 * refuses, errors or exceeds `startTimeoutMs` / `turnTimeoutMs`, and with the signal's reason when `signal` aborts (after
 * `session/cancel`; an agent that does not answer within `graceMs` is killed). Text outside the JSON block streams
 * to `onText` where the request has one.
 */
export class AcpLeader implements LeaderPort {
  readonly agentId: string;
  private readonly conversations = new Map<string, LeaderConversation>();
  /** Known cwd of each subject (product or goal run), for turns whose request carries none. Bounded. */
  private readonly cwds = new Map<string, string>();
  private closed = false;
  private readonly log: Logger;
  private readonly maxAttempts: number;
  private readonly graceMs: number;
  private readonly turnTimeoutMs: number;
  private readonly startTimeoutMs: number;
  private readonly idleMs: number;
  private readonly maxConversations: number;

  constructor(private readonly options: AcpLeaderOptions) {
    this.agentId = options.agentId;
    this.maxAttempts = positiveInt(options.maxAttempts ?? 3, "maxAttempts");
    this.graceMs = nonNegative(options.graceMs ?? 2_000, "graceMs");
    this.turnTimeoutMs = positive(options.turnTimeoutMs ?? 600_000, "turnTimeoutMs");
    this.startTimeoutMs = positive(options.startTimeoutMs ?? 60_000, "startTimeoutMs");
    this.idleMs = positive(options.idleMs ?? 600_000, "idleMs");
    this.maxConversations = positiveInt(options.maxConversations ?? 8, "maxConversations");
    this.log = options.logger.child({ component: "leader", leaderAgentId: options.agentId });
  }

  /** Pids of the processes currently held (one per open conversation). For tests and status. */
  livePids(): number[] {
    return [...this.conversations.values()].flatMap((c) => (c.pid !== undefined && !c.dead ? [c.pid] : []));
  }

  /** Plans or asks (see the class contract). The conversation is the product's. */
  async plan(request: PlanRequest): Promise<PlanResult> {
    this.remember(request.productId, request.cwd);
    const prompt = planPrompt({
      goal: request.goal,
      cwd: request.cwd,
      roster: request.roster,
      dialogue: request.dialogue,
      ...(request.previousPlan !== undefined ? { previousPlan: request.previousPlan } : {}),
      ...(request.answers !== undefined ? { answers: request.answers } : {}),
    });
    return this.structured({
      key: `product:${request.productId}`,
      cwd: request.cwd,
      mcp: this.mcpOf(request.productId, request.mcpServers),
      ...dirsOf(request),
      attachments: conversationAttachments(request.dialogue),
      kind: "plan",
      subject: { productId: request.productId },
      what: "plan",
      prompt,
      signal: request.signal,
      onText: request.onText,
      parse: (text) => parsePlanAnswer(text, request.roster),
    });
  }

  /**
   * Answers a user message during execution; `mutations` only when the answer carried a valid batch. Never rejects
   * for invalid answers (see the class contract); rejects for process failures and aborts.
   */
  async message(request: MessageRequest): Promise<MessageResult> {
    const prompt = messagePrompt(request);
    try {
      return await this.structured({
        key: `product:${request.productId}`,
        cwd: this.cwdOf(request.productId),
        mcp: this.mcpOf(request.productId, request.mcpServers),
        ...dirsOf(request),
        attachments: request.attachments ?? [],
        kind: "message",
        subject: { productId: request.productId },
        what: "change of the plan",
        prompt,
        signal: request.signal,
        onText: request.onText,
        parse: (text) => parseMessageAnswer(text, request.plan, request.tasks),
      });
    } catch (error) {
      if (!(error instanceof InvalidAnswers)) throw error;
      const note = `(I proposed changes to the plan, but they were not valid, so nothing was changed: ${error.message})`;
      return { response: error.lastProse === "" ? note : `${error.lastProse}\n\n${note}` };
    }
  }

  /** Mutate or give up after a final task failure. Rejects after `maxAttempts` invalid answers. */
  async consultOnFailure(request: FailureConsultation): Promise<FailureDecision> {
    return this.structured({
      key: `product:${request.productId}`,
      cwd: this.cwdOf(request.productId),
      mcp: this.mcpOf(request.productId, request.mcpServers),
      ...dirsOf(request),
      kind: "consult",
      subject: { productId: request.productId },
      what: "decision",
      prompt: consultPrompt(request),
      signal: request.signal,
      parse: (text) => parseConsultAnswer(text, request.failedTask, request.plan, request.tasks),
    });
  }

  /** Acceptance criteria of a goal run (conversation: the goal run's). */
  async deriveChecklist(request: ChecklistRequest): Promise<ChecklistResult> {
    this.remember(request.goalRunId, request.cwd);
    return this.structured({
      key: `goal:${request.goalRunId}`,
      cwd: request.cwd,
      kind: "checklist",
      subject: { goalRunId: request.goalRunId },
      what: "list of acceptance criteria",
      prompt: checklistPrompt(request),
      signal: request.signal,
      parse: parseChecklistAnswer,
    });
  }

  /** The plan of one phase of a goal run, with the criteria it targets. */
  async planPhase(request: PhasePlanRequest): Promise<PhasePlanResult> {
    this.remember(request.goalRunId, request.cwd);
    return this.structured({
      key: `goal:${request.goalRunId}`,
      cwd: request.cwd,
      kind: "phase",
      subject: { goalRunId: request.goalRunId },
      what: "phase plan",
      prompt: phasePrompt(request),
      signal: request.signal,
      onText: request.onText,
      parse: (text) => parsePhaseAnswer(text, request.roster, request.criteria, request.phaseIndex),
    });
  }

  /** Which criteria pass after a phase. */
  async assess(request: AssessRequest): Promise<AssessResult> {
    return this.structured({
      key: `goal:${request.goalRunId}`,
      cwd: this.cwdOf(request.goalRunId),
      kind: "assess",
      subject: { goalRunId: request.goalRunId },
      what: "assessment",
      prompt: assessPrompt(request),
      signal: request.signal,
      parse: (text) => parseAssessAnswer(text, request.criteria),
    });
  }

  /**
   * Closes every conversation (stdin close, grace, SIGTERM, grace, SIGKILL) and resolves once every leader process
   * has exited. Running turns reject; later calls reject at once. Idempotent.
   */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.conversations.values()];
    this.conversations.clear();
    await Promise.allSettled(all.map((c) => c.close()));
  }

  // -------------------------------------------------------------------------------------------------------------

  private async structured<T>(spec: {
    key: string;
    cwd: string;
    /** The MCP servers of the conversation's session (issue 28); used when the conversation starts. */
    mcp?: ResolvedMcp;
    /** The product's additional directories (issue 31); used when the conversation starts. */
    additionalDirectories?: string[];
    /** Attachments for the first answer's prompt (issue 31); repair prompts carry none. */
    attachments?: AttachmentRef[];
    kind: LeaderTurnKind;
    subject: TurnMeta["subject"];
    what: string;
    prompt: string;
    signal: AbortSignal;
    onText?: (text: string) => void;
    parse: (text: string) => Parsed<T>;
  }): Promise<T> {
    const failures: string[] = [];
    let errors: string[] = [];
    let lastProse = "";
    const sink = spec.onText ?? (() => undefined);
    let streamedBefore = false;
    for (let attempt = 1; attempt <= this.maxAttempts; attempt++) {
      spec.signal.throwIfAborted();
      if (this.closed) throw new Error(`the leader agent "${this.agentId}" was closed`);
      const text =
        attempt === 1 ? spec.prompt : repairPrompt({ kind: spec.kind, errors, attempt, maxAttempts: this.maxAttempts });
      let firstChunk = true;
      const prose = new ProseStream((chunk) => {
        if (streamedBefore && firstChunk) sink("\n\n");
        firstChunk = false;
        sink(chunk);
      });
      const conversation = this.conversation(spec.key, spec.cwd, spec.mcp, spec.additionalDirectories);
      let answer: TurnAnswer;
      try {
        answer = await conversation.turn(
          text,
          { kind: spec.kind, attempt, repair: attempt > 1, subject: spec.subject },
          spec.signal,
          (chunk) => prose.push(chunk),
          attempt === 1 ? (spec.attachments ?? []) : [],
        );
      } finally {
        prose.end();
        streamedBefore ||= prose.hasEmitted;
        this.settle(conversation);
      }
      let parsed: Parsed<T>;
      if (answer.stopReason === "end_turn") parsed = spec.parse(answer.text);
      else if (answer.stopReason === "max_tokens" || answer.stopReason === "max_turn_requests") {
        parsed = {
          ok: false,
          errors: [`the answer was cut off (stop reason ${answer.stopReason}); answer more briefly`],
        };
      } else {
        throw new Error(`the leader agent "${this.agentId}" ended its turn with stop reason "${answer.stopReason}"`);
      }
      if (parsed.ok) {
        if (attempt > 1) this.log.info({ kind: spec.kind, attempt }, "leader answer valid after repair");
        return parsed.value;
      }
      errors = parsed.errors.length > 0 ? parsed.errors : ["the answer could not be used"];
      lastProse = extractJsonBlock(answer.text).prose;
      const summary = errors.join("; ");
      failures.push(
        `answer ${attempt}: ${summary.length > MAX_FAILURE_CHARS ? `${summary.slice(0, MAX_FAILURE_CHARS)}…` : summary}`,
      );
      this.log.warn({ kind: spec.kind, attempt, errors }, "leader answer invalid");
    }
    throw new InvalidAnswers(
      `the leader agent "${this.agentId}" gave no valid ${spec.what} in ${this.maxAttempts} answers (${failures.join(" | ")})`,
      lastProse,
    );
  }

  /** A product's stored MCP servers with the secrets this process holds (issue 28); `undefined` when it has none. */
  private mcpOf(productId: string, stored: readonly StoredMcpServer[] | undefined): ResolvedMcp | undefined {
    if (stored === undefined || stored.length === 0) return undefined;
    return (this.options.mcpSecrets ?? new McpSecrets()).resolve(productId, stored);
  }

  /** The live conversation of `key`, or a new one (closing the least recently used idle ones beyond the cap). */
  private conversation(
    key: string,
    cwd: string,
    mcp: ResolvedMcp | undefined,
    additionalDirectories: string[] | undefined,
  ): LeaderConversation {
    const existing = this.conversations.get(key);
    if (existing !== undefined && !existing.dead) return existing;
    if (existing !== undefined) void existing.close();
    const spec = this.options.registry.launchSpec(this.agentId);
    const created = new LeaderConversation(key, {
      agentId: this.agentId,
      spec,
      cwd,
      ...(mcp !== undefined ? { mcp } : {}),
      ...(additionalDirectories !== undefined ? { additionalDirectories } : {}),
      ...(this.options.readAttachment !== undefined ? { readAttachment: this.options.readAttachment } : {}),
      logger: this.log,
      graceMs: this.graceMs,
      turnTimeoutMs: this.turnTimeoutMs,
      startTimeoutMs: this.startTimeoutMs,
      clientName: this.options.clientName ?? "acp-orchestrator",
      clientVersion: this.options.clientVersion ?? "dev",
    });
    this.conversations.set(key, created);
    const idle = [...this.conversations.values()]
      .filter((c) => c !== created && c.busy === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed);
    while (this.conversations.size > this.maxConversations && idle.length > 0) {
      const oldest = idle.shift() as LeaderConversation;
      this.conversations.delete(oldest.key);
      void oldest.close();
    }
    return created;
  }

  /** After a turn: drops a dead conversation, and arms the idle timer of a live one. */
  private settle(conversation: LeaderConversation): void {
    if (conversation.dead) {
      if (this.conversations.get(conversation.key) === conversation) this.conversations.delete(conversation.key);
      void conversation.close();
      return;
    }
    const timer = setTimeout(() => {
      if (conversation.busy > 0 || Date.now() - conversation.lastUsed < this.idleMs) return;
      if (this.conversations.get(conversation.key) === conversation) this.conversations.delete(conversation.key);
      this.log.debug({ conversation: conversation.key }, "closing an idle leader conversation");
      void conversation.close();
    }, this.idleMs);
    timer.unref();
  }

  private remember(subject: string, cwd: string): void {
    this.cwds.delete(subject);
    this.cwds.set(subject, cwd);
    if (this.cwds.size > 1_000) {
      const oldest = this.cwds.keys().next().value;
      if (oldest !== undefined) this.cwds.delete(oldest);
    }
  }

  private cwdOf(subject: string): string {
    return this.cwds.get(subject) ?? this.options.defaultCwd ?? process.cwd();
  }
}

/** A request's additional directories, for `structured` (only when it has some). */
function dirsOf(request: SessionInputs): { additionalDirectories?: string[] } {
  return request.additionalDirectories?.length ? { additionalDirectories: request.additionalDirectories } : {};
}

function positiveInt(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer`);
  return value;
}

function positive(value: number, name: string): number {
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be a positive number of milliseconds`);
  return value;
}

function nonNegative(value: number, name: string): number {
  if (!Number.isFinite(value) || value < 0)
    throw new RangeError(`${name} must be a non-negative number of milliseconds`);
  return value;
}
