/**
 * The model-backed leader (issue 3 item 2, issue 5 item 1): `AcpLeader` implements the core's `LeaderPort` for one
 * agent of the registry by speaking ACP v1 to it as its client (official SDK), and `createLeaderResolver` chooses,
 * per product, between such leaders and the built-in heuristic one.
 *
 * Owns: the leader's child processes (one per conversation, see `AcpLeader`), their ACP sessions, turn serialisation,
 * cancellation and timeouts, reading the answer (exactly one fenced JSON block), validating it (zod shapes of
 * protocol/common.ts, `validatePlanGraph`, `applyMutations`) and the repair loop (at most `maxAttempts` answers).
 * The prompt texts live in leader-prompts.ts. It must never write to stdout, never advertise client capabilities it
 * does not serve (no fs, no terminal; the leader's permission requests are always refused), never hand the core an
 * answer that did not validate, and never leave a child running after `close()` or after the server process exits.
 */
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import { AgentProcess, delay } from "./agent-process.js";
import type { AgentExit } from "./agent-process.js";
import { handshakeConfigurationError, unknownAuthMethodError } from "./agent-errors.js";
import type { StartStage } from "./agent-errors.js";
import type { ClientConnection, SessionNotification, StopReason } from "@agentclientprotocol/sdk";
import { z } from "zod";
import { Id, Mutation, Plan } from "../../../protocol/common.js";
import type { Mutation as MutationT, TaskState } from "../../../protocol/common.js";
import { validatePlanGraph } from "../../core/dag/graph.js";
import { HEURISTIC_LEADER_ID } from "../../core/leader/heuristic-leader.js";
import { applyMutations } from "../../core/dag/mutations.js";
import type {
  AcceptanceCriterion,
  AgentInfo,
  AssessRequest,
  AssessResult,
  ChecklistRequest,
  ChecklistResult,
  DraftPlan,
  FailureConsultation,
  FailureDecision,
  LeaderPort,
  LeaderResolver,
  Logger,
  MessageRequest,
  MessageResult,
  PhasePlanRequest,
  PhasePlanResult,
  PlanRequest,
  PlanResult,
} from "../../core/ports.js";
import { META_KEY } from "./task-brief.js";
import { choosePermission } from "./worker-permissions.js";
import {
  assessPrompt,
  checklistPrompt,
  consultPrompt,
  LEADER_PROMPT_VERSION,
  messagePrompt,
  phasePrompt,
  planPrompt,
  repairPrompt,
} from "./leader-prompts.js";
import type { LeaderTurnKind } from "./leader-prompts.js";
import { BUILTIN_WORKER_AGENT_ID } from "./registry.js";
import type { AgentRegistry, LaunchSpec } from "./registry.js";

// ===============================================================================================================
// Reading an answer: exactly one fenced JSON block (pure)

/** What `extractJsonBlock` found: no JSON, one JSON value, or problems to send back in a repair prompt. */
export type ExtractedJson =
  | { kind: "none"; prose: string }
  | { kind: "one"; value: unknown; prose: string }
  | { kind: "invalid"; errors: string[]; prose: string };

interface Fence {
  /** Line indices of the opening and closing fence lines (`close` = lines.length when unclosed). */
  open: number;
  close: number;
  lang: string;
  content: string;
}

const FENCE = /^\s*```\s*([^\s`]*)[^`]*$/u;
const CLOSING_FENCE = /^\s*```\s*$/u;

function findFences(text: string): { lines: string[]; fences: Fence[] } {
  const lines = text.replace(/\r\n?/gu, "\n").split("\n");
  const fences: Fence[] = [];
  for (let i = 0; i < lines.length; i++) {
    const match = FENCE.exec(lines[i] ?? "");
    if (match === null) continue;
    let close = i + 1;
    while (close < lines.length && !CLOSING_FENCE.test(lines[close] ?? "")) close++;
    fences.push({
      open: i,
      close,
      lang: (match[1] ?? "").toLowerCase(),
      content: lines.slice(i + 1, close).join("\n"),
    });
    i = close;
  }
  return { lines, fences };
}

function isJsonFence(fence: Fence): boolean {
  if (fence.lang.startsWith("json")) return true;
  return fence.lang === "" && fence.content.trimStart().startsWith("{");
}

function tidy(text: string): string {
  return text.replace(/\n{3,}/gu, "\n\n").trim();
}

/**
 * Finds the JSON answer in a leader's text: the fenced code blocks tagged `json` (or untagged ones whose content
 * starts with `{`). Exactly one must be present and hold a JSON object; with none, a text that is a bare JSON object
 * as a whole is accepted too. `prose` is the text without the JSON block(s). Pure; never throws.
 */
export function extractJsonBlock(text: string): ExtractedJson {
  const { lines, fences } = findFences(text);
  const json = fences.filter(isJsonFence);
  const hidden = new Set<number>();
  for (const f of json) for (let i = f.open; i <= f.close; i++) hidden.add(i);
  const prose = tidy(lines.filter((_, i) => !hidden.has(i)).join("\n"));
  if (json.length === 0) {
    const whole = text.trim();
    if (whole.startsWith("{") && whole.endsWith("}")) {
      const parsed = parseJsonObject(whole);
      if (parsed.ok) return { kind: "one", value: parsed.value, prose: "" };
    }
    return { kind: "none", prose };
  }
  if (json.length > 1) {
    return {
      kind: "invalid",
      errors: [`the answer holds ${json.length} fenced JSON blocks; send exactly one`],
      prose,
    };
  }
  const only = json[0] as Fence;
  if (only.close >= lines.length) {
    return {
      kind: "invalid",
      errors: ["the fenced JSON block is not closed with ``` (was the answer cut off?)"],
      prose,
    };
  }
  const parsed = parseJsonObject(only.content);
  if (!parsed.ok) return { kind: "invalid", errors: [parsed.error], prose };
  return { kind: "one", value: parsed.value, prose };
}

function parseJsonObject(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `the fenced block is not valid JSON: ${(error as Error).message}` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, error: "the fenced JSON block must hold a JSON object ({…}), not an array or a single value" };
  }
  return { ok: true, value };
}

/**
 * Streams a leader's text without its JSON blocks: the prose reaches the user (`product.planningDelta`) while the
 * fenced `json` (or untagged) blocks, which a program reads, are held back. Fences split across chunks are handled;
 * a line is held only while it could still be a fence line. Other fenced blocks (```ts …) pass through.
 */
export class ProseStream {
  private inFence = false;
  private hideFence = false;
  private line = "";
  private decided: "emit" | "hide" | undefined;
  private emitted = false;

  constructor(private readonly sink: (text: string) => void) {}

  /** True once any text was passed to the sink. */
  get hasEmitted(): boolean {
    return this.emitted;
  }

  /** Feeds one chunk of agent text; forwards what is prose. */
  push(chunk: string): void {
    let out = "";
    for (const ch of chunk.replace(/\r/gu, "")) {
      if (this.decided !== undefined) {
        if (this.decided === "emit") out += ch;
        if (ch === "\n") this.endLine();
        continue;
      }
      this.line += ch;
      if (ch === "\n") {
        out += this.decideWholeLine();
        this.endLine();
        continue;
      }
      const start = this.line.trimStart();
      // A line that is, or may still become, a fence line is held until it is complete.
      if (start === "" || start.startsWith("```") || "```".startsWith(start)) continue;
      this.decided = this.inFence && this.hideFence ? "hide" : "emit";
      if (this.decided === "emit") out += this.line;
    }
    this.send(out);
  }

  /** Forwards a held partial line at the end of a turn (unless it is a fence line or inside a hidden block), and resets. */
  end(): void {
    if (this.decided === undefined && this.line !== "" && !this.line.trimStart().startsWith("```")) {
      if (!(this.inFence && this.hideFence)) this.send(this.line);
    }
    this.line = "";
    this.decided = undefined;
    this.inFence = false;
    this.hideFence = false;
  }

  /** Decides a complete line that was held: a fence line opens or closes a block; other lines follow the block. */
  private decideWholeLine(): string {
    const start = this.line.trimStart();
    if (this.inFence) {
      const hidden = this.hideFence;
      if (start.trimEnd() === "```") this.inFence = false;
      return hidden ? "" : this.line;
    }
    if (!start.startsWith("```")) return this.line;
    const lang = (start.slice(3).trim().split(/\s+/u)[0] ?? "").toLowerCase();
    this.inFence = true;
    this.hideFence = lang === "" || lang.startsWith("json");
    return this.hideFence ? "" : this.line;
  }

  private endLine(): void {
    this.line = "";
    this.decided = undefined;
  }

  private send(text: string): void {
    if (text === "") return;
    this.emitted = true;
    this.sink(text);
  }
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out === "" ? "(top level)" : out;
}

/** One sentence per zod issue, e.g. `tasks[0].title: Too small: expected string to have >=1 characters`. */
function issuesOf(error: z.ZodError, prefix = ""): string[] {
  return error.issues.slice(0, 20).map((issue) => `${prefix}${formatPath(issue.path)}: ${issue.message}`);
}

// ===============================================================================================================
// Validating an answer (pure)

/** A validated answer, or the problems to send back. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; errors: string[] };

/** A plan as the leader writes it: protocol/common.ts `Plan` without the server-owned `productId` and `version`. */
const DraftPlanSchema = Plan.omit({ productId: true, version: true });

const QuestionsSchema = z.object({
  questions: z
    .array(
      z.object({
        question: z.string().trim().min(1).max(2_000),
        options: z.array(z.string().min(1).max(500)).max(20).optional(),
      }),
    )
    .min(1)
    .max(20),
});

const MutationsSchema = z.object({ mutations: z.array(Mutation).min(1).max(1_000) });

const DecisionSchema = z.discriminatedUnion("decision", [
  z.object({ decision: z.literal("mutate"), mutations: z.array(Mutation).min(1).max(1_000) }),
  z.object({ decision: z.literal("giveUp") }),
]);

const ChecklistSchema = z.object({
  criteria: z
    .array(z.object({ id: Id, text: z.string().trim().min(1).max(2_000) }))
    .min(1)
    .max(50),
});

const AssessSchema = z.object({ passed: z.array(Id).max(1_000) });

function draftOf(value: unknown, roster: readonly AgentInfo[]): Parsed<DraftPlan> {
  const parsed = DraftPlanSchema.safeParse(value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  const draft = parsed.data;
  const errors: string[] = [];
  if (draft.instances.length === 0) errors.push("instances: the plan needs at least one instance");
  if (draft.tasks.length === 0) errors.push("tasks: the plan needs at least one task");
  const allowed = roster.length === 0 ? new Set(["leader"]) : new Set(roster.map((a) => a.agentId));
  draft.instances.forEach((instance, index) => {
    if (!allowed.has(instance.agentId)) {
      errors.push(
        `instances[${index}].agentId: "${instance.agentId}" is not one of the team's agents (${[...allowed].join(", ")})`,
      );
    }
  });
  const graph = validatePlanGraph(draft.instances, draft.tasks);
  if (!graph.ok) errors.push(`${graph.list}[${graph.index}]: ${graph.reason}`);
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: draft };
}

function needOne(extracted: ExtractedJson): Parsed<unknown> {
  if (extracted.kind === "invalid") return { ok: false, errors: extracted.errors };
  if (extracted.kind === "none") {
    return { ok: false, errors: ["the answer holds no fenced ```json block; end it with exactly one"] };
  }
  return { ok: true, value: extracted.value };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Validates a planning answer: a plan that passes zod, the roster check and `validatePlanGraph`, or questions. */
export function parsePlanAnswer(text: string, roster: readonly AgentInfo[]): Parsed<PlanResult> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  const prose = extracted.prose;
  if (isObject(one.value) && "questions" in one.value) {
    if ("tasks" in one.value) return { ok: false, errors: ["answer with either a plan or questions, not both"] };
    const asked = QuestionsSchema.safeParse(one.value);
    if (!asked.success) return { ok: false, errors: issuesOf(asked.error) };
    const questions = asked.data.questions.map((q) =>
      q.options ? { question: q.question, options: q.options } : { question: q.question },
    );
    return {
      ok: true,
      value: { kind: "ask", message: prose || "I need a few answers before I can plan.", questions },
    };
  }
  const draft = draftOf(one.value, roster);
  if (!draft.ok) return draft;
  const plan = draft.value;
  const message =
    prose || `Here is the plan "${plan.name}": ${plan.tasks.length} tasks on ${plan.instances.length} instances.`;
  return { ok: true, value: { kind: "plan", plan, message } };
}

/**
 * Validates an answer to an execution-time message: prose, plus optionally one JSON block `{"mutations": [...]}` that
 * must pass `applyMutations` against the current plan and task states.
 */
export function parseMessageAnswer(text: string, plan: Plan, tasks: readonly TaskState[]): Parsed<MessageResult> {
  const extracted = extractJsonBlock(text);
  if (extracted.kind === "invalid") return { ok: false, errors: extracted.errors };
  if (extracted.kind === "none") return { ok: true, value: { response: extracted.prose || "Noted." } };
  const parsed = MutationsSchema.safeParse(extracted.value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  const mutations: MutationT[] = parsed.data.mutations;
  const outcome = applyMutations(plan, tasks, mutations);
  if (!outcome.ok) return { ok: false, errors: [`mutations[${outcome.index}]: ${outcome.reason}`] };
  const response =
    extracted.prose || `I changed the plan (${mutations.length} change${mutations.length === 1 ? "" : "s"}).`;
  return { ok: true, value: { response, mutations } };
}

/** Validates a failure consultation answer: `{"decision": "mutate", mutations}` (must apply) or `{"decision": "giveUp"}`. */
export function parseConsultAnswer(
  text: string,
  failed: TaskState,
  plan: Plan,
  tasks: readonly TaskState[],
): Parsed<FailureDecision> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  const parsed = DecisionSchema.safeParse(one.value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  if (parsed.data.decision === "giveUp") {
    return {
      ok: true,
      value: { kind: "giveUp", message: extracted.prose || `I am giving up on the branch of task ${failed.taskId}.` },
    };
  }
  const mutations: MutationT[] = parsed.data.mutations;
  const outcome = applyMutations(plan, tasks, mutations);
  if (!outcome.ok) return { ok: false, errors: [`mutations[${outcome.index}]: ${outcome.reason}`] };
  const message = extracted.prose || `I changed the plan to recover from the failure of task ${failed.taskId}.`;
  return { ok: true, value: { kind: "mutate", mutations, message } };
}

/** Validates a checklist answer: 1-50 criteria with unique ids. */
export function parseChecklistAnswer(text: string): Parsed<ChecklistResult> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  const parsed = ChecklistSchema.safeParse(one.value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  const criteria: AcceptanceCriterion[] = parsed.data.criteria;
  const seen = new Set<string>();
  const errors: string[] = [];
  criteria.forEach((c, i) => {
    if (seen.has(c.id)) errors.push(`criteria[${i}].id: "${c.id}" is used twice`);
    seen.add(c.id);
  });
  if (errors.length > 0) return { ok: false, errors };
  const message =
    extracted.prose ||
    `I will work towards ${criteria.length} acceptance criteria:\n${criteria.map((c) => `${c.id}. ${c.text}`).join("\n")}`;
  return { ok: true, value: { criteria, message } };
}

/**
 * Validates a phase plan answer: a plan (as for `parsePlanAnswer`, questions not allowed) with `targets`, ids of known
 * criteria. Without `targets` the phase targets every criterion that does not pass yet.
 */
export function parsePhaseAnswer(
  text: string,
  roster: readonly AgentInfo[],
  criteria: readonly (AcceptanceCriterion & { passed: boolean })[],
  phaseIndex: number,
): Parsed<PhasePlanResult> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  if (!isObject(one.value)) return { ok: false, errors: ["the JSON block must hold a plan object"] };
  if ("questions" in one.value) return { ok: false, errors: ["questions are not possible in a goal run: send a plan"] };
  const { targets: rawTargets, ...rest } = one.value;
  const targetsParsed = z.array(Id).max(1_000).optional().safeParse(rawTargets);
  const errors: string[] = targetsParsed.success ? [] : issuesOf(targetsParsed.error, "targets");
  const known = new Set(criteria.map((c) => c.id));
  const targets = targetsParsed.success
    ? (targetsParsed.data ?? criteria.filter((c) => !c.passed).map((c) => c.id))
    : [];
  for (const t of targets)
    if (!known.has(t)) errors.push(`targets: "${t}" is not a criterion id (${[...known].join(", ")})`);
  const draft = draftOf(rest, roster);
  if (!draft.ok) errors.push(...draft.errors);
  if (errors.length > 0 || !draft.ok) return { ok: false, errors };
  const plan = draft.value;
  const message =
    extracted.prose ||
    `Phase ${phaseIndex + 1}: ${plan.tasks.length} tasks towards ${targets.join(", ") || "the goal"}.`;
  return { ok: true, value: { plan, message, targets: [...new Set(targets)] } };
}

/** Validates an assessment answer: `{"passed": [ids]}`, every id a known criterion; result in criteria order. */
export function parseAssessAnswer(
  text: string,
  criteria: readonly (AcceptanceCriterion & { passed: boolean })[],
): Parsed<AssessResult> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  const parsed = AssessSchema.safeParse(one.value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  const known = new Set(criteria.map((c) => c.id));
  const errors = parsed.data.passed
    .filter((id) => !known.has(id))
    .map((id) => `passed: "${id}" is not a criterion id (${[...known].join(", ")})`);
  if (errors.length > 0) return { ok: false, errors };
  const given = new Set(parsed.data.passed);
  const passed = criteria.filter((c) => given.has(c.id)).map((c) => c.id);
  const message = extracted.prose || `${passed.length} of ${criteria.length} criteria pass.`;
  return { ok: true, value: { passed, message } };
}

function describeError(error: unknown): string {
  if (error instanceof RequestError) return `error ${error.code}: ${error.message}`;
  if (error instanceof Error) return error.message;
  return String(error);
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The leader turn was aborted.", "AbortError");
}

// ===============================================================================================================
// One conversation: one child process, one ACP session

type Exit = AgentExit;

interface TurnMeta {
  kind: LeaderTurnKind;
  attempt: number;
  repair: boolean;
  subject: { productId: string } | { goalRunId: string };
}

interface TurnAnswer {
  text: string;
  stopReason: StopReason;
}

interface ConversationOptions {
  agentId: string;
  spec: LaunchSpec;
  cwd: string;
  logger: Logger;
  graceMs: number;
  turnTimeoutMs: number;
  startTimeoutMs: number;
  clientName: string;
  clientVersion: string;
}

const STDERR_TAIL_CHARS = 2_048;

/**
 * One leader process with one ACP session in the product's (or goal run's) cwd. Turns are serialised. After a crash,
 * a kill, a timeout or an unanswered cancel the conversation is dead and the owner replaces it.
 */
class LeaderConversation {
  private child: AgentProcess | undefined;
  private exited: Promise<AgentExit> | undefined;
  private closedIo: Promise<void> | undefined;
  private connection: ClientConnection | undefined;
  private sessionId: string | undefined;
  private ready: Promise<void> | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private onChunk: ((text: string) => void) | undefined;
  private stderrTail = "";
  private spawnFailure: string | undefined;
  private closing: Promise<void> | undefined;
  /** Set when the process must not be used again (it exited, or was killed). */
  dead = false;
  /** Turns queued or running. */
  busy = 0;
  lastUsed = Date.now();
  private readonly log: Logger;

  constructor(
    readonly key: string,
    private readonly options: ConversationOptions,
  ) {
    this.log = options.logger.child({ leaderAgentId: options.agentId, conversation: key });
  }

  /** The child's pid, if it was started. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Runs one prompt turn after the previous ones; resolves with all agent text of the turn. */
  turn(text: string, meta: TurnMeta, signal: AbortSignal, onText: (text: string) => void): Promise<TurnAnswer> {
    this.busy += 1;
    this.lastUsed = Date.now();
    const run = this.queue.then(() => this.runTurn(text, meta, signal, onText));
    this.queue = run.catch(() => undefined);
    return run.finally(() => {
      this.busy -= 1;
      this.lastUsed = Date.now();
    });
  }

  private start(): Promise<void> {
    const { spec, agentId } = this.options;
    let child: AgentProcess;
    try {
      child = AgentProcess.spawn({
        command: spec.command,
        args: spec.args,
        cwd: spec.cwd ?? this.options.cwd,
        env: spec.env,
      });
    } catch (error) {
      this.dead = true;
      return Promise.reject(
        new Error(`could not start leader agent "${agentId}" (${spec.command}): ${describeError(error)}`),
      );
    }
    this.child = child;
    const spawnError = child.spawnFailed;
    void spawnError.then((failure) => {
      this.spawnFailure = `${spec.command}: ${failure.message}`;
      this.dead = true;
    });
    this.exited = child.exited.then((exit) => {
      this.dead = true;
      return exit;
    });
    this.closedIo = child.closed;
    child.stdin.on("error", (error) => this.log.debug({ error: error.message }, "leader stdin error"));
    child.stdout.on("error", (error) => this.log.debug({ error: error.message }, "leader stdout error"));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-4 * STDERR_TAIL_CHARS);
    });
    this.log.debug({ pid: child.pid, command: spec.command, args: spec.args }, "leader agent started");
    const app = client({ name: this.options.clientName })
      .onNotification(methods.client.session.update, ({ params }) => this.onUpdate(params))
      .onRequest(methods.client.session.requestPermission, ({ params }) => {
        // The leader plans; it is never allowed to act through this client.
        this.log.info(
          { tool: params.toolCall.title ?? params.toolCall.toolCallId },
          "refused a leader permission request",
        );
        return choosePermission(params.options, "deny");
      });
    const connection = app.connect(
      ndJsonStream(
        Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
        Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
      ),
    );
    this.connection = connection;
    let stage: StartStage = "initialize";
    let authMethods: { id: string; name?: string }[] = [];
    const handshake = (async () => {
      const init = await connection.agent.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: {},
        clientInfo: { name: this.options.clientName, version: this.options.clientVersion },
      });
      if (init.protocolVersion !== PROTOCOL_VERSION) {
        throw new Error(
          `leader agent "${agentId}" speaks ACP protocol version ${init.protocolVersion}, not ${PROTOCOL_VERSION}`,
        );
      }
      authMethods = (init.authMethods ?? []).map((m) => ({ id: m.id, name: m.name }));
      if (spec.auth !== undefined && authMethods.length > 0) {
        if (!authMethods.some((m) => m.id === spec.auth?.methodId)) {
          throw unknownAuthMethodError(agentId, spec.auth.methodId, authMethods);
        }
        stage = "authenticate";
        await connection.agent.request(methods.agent.authenticate, { methodId: spec.auth.methodId });
      }
      stage = "session/new";
      const session = await connection.agent.request(methods.agent.session.new, {
        cwd: this.options.cwd,
        mcpServers: [],
      });
      this.sessionId = session.sessionId;
    })().catch((error: unknown) => {
      // A refused handshake is a configuration error: say what to fix (DESIGN.md "Processes").
      const configuration = handshakeConfigurationError(agentId, stage, error, authMethods);
      if (configuration === undefined) throw error;
      throw new Error(`${configuration.message} ${configuration.remediation}`);
    });
    // Whichever comes first: the handshake, a spawn failure, or an exit.
    return Promise.race([
      handshake,
      spawnError.then((failure) => {
        throw new Error(
          `could not start leader agent "${agentId}" (${spec.command}): ${failure.message}. Install it, or fix ` +
            `"command" of agent "${agentId}" in the agent configuration.`,
        );
      }),
      this.exited.then(async (exit) => {
        throw new Error(await this.exitMessage(exit, "before its session was ready"));
      }),
    ]);
  }

  private async runTurn(
    text: string,
    meta: TurnMeta,
    signal: AbortSignal,
    onText: (t: string) => void,
  ): Promise<TurnAnswer> {
    if (signal.aborted) throw abortReason(signal);
    if (this.closing !== undefined || this.dead)
      throw new Error(`the leader agent "${this.options.agentId}" was closed`);
    if (this.ready === undefined) {
      this.ready = this.start();
      // A conversation whose process or handshake failed is never used again.
      this.ready.catch(() => {
        this.dead = true;
      });
    }
    let answerText = "";
    this.onChunk = (chunk) => {
      answerText += chunk;
      try {
        onText(chunk);
      } catch (error) {
        this.log.warn({ err: error }, "leader text handler threw; ignored");
      }
    };
    type Settled =
      | { kind: "answered"; stopReason: StopReason }
      | { kind: "error"; error: unknown }
      | { kind: "exited"; exit: Exit }
      | { kind: "aborted" }
      | { kind: "timeout" };
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    let prompted = false;
    let settle: (settled: Settled) => void = () => undefined;
    const outcome = new Promise<Settled>((resolve) => {
      settle = resolve;
    });
    // The process start and handshake have their own limit; the answer's limit runs from the prompt on.
    const arm = (ms: number): void => {
      if (timer !== undefined) clearTimeout(timer);
      timer = setTimeout(() => settle({ kind: "timeout" }), ms);
    };
    arm(this.options.startTimeoutMs);
    const work = (async () => {
      await this.ready;
      if (signal.aborted) throw abortReason(signal);
      const connection = this.connection as ClientConnection;
      prompted = true;
      arm(this.options.turnTimeoutMs);
      return connection.agent.request(methods.agent.session.prompt, {
        sessionId: this.sessionId as string,
        prompt: [{ type: "text", text }],
        _meta: { [META_KEY]: { leaderTurn: { ...meta, promptVersion: LEADER_PROMPT_VERSION } } },
      });
    })();
    try {
      work.then(
        (response) => settle({ kind: "answered", stopReason: response.stopReason }),
        (error: unknown) => settle({ kind: "error", error }),
      );
      void this.exited?.then((exit) => settle({ kind: "exited", exit }));
      onAbort = () => settle({ kind: "aborted" });
      signal.addEventListener("abort", onAbort, { once: true });
      const settled = await outcome;
      switch (settled.kind) {
        case "answered":
          return { text: answerText, stopReason: settled.stopReason };
        case "aborted":
          await this.cancelTurn(prompted, work);
          throw abortReason(signal);
        case "timeout":
          await this.cancelTurn(prompted, work);
          await this.kill();
          throw new Error(
            prompted
              ? `the leader agent "${this.options.agentId}" did not answer within ${this.options.turnTimeoutMs} ms`
              : `the leader agent "${this.options.agentId}" did not start within ${this.options.startTimeoutMs} ms`,
          );
        case "exited":
          if (this.closing !== undefined) throw new Error(`the leader agent "${this.options.agentId}" was closed`);
          throw new Error(await this.exitMessage(settled.exit, "during its turn"));
        case "error": {
          if (signal.aborted) throw abortReason(signal);
          if (this.closing !== undefined) throw new Error(`the leader agent "${this.options.agentId}" was closed`);
          if (settled.error instanceof RequestError) {
            throw new Error(`the leader agent "${this.options.agentId}" answered with ${describeError(settled.error)}`);
          }
          // The connection failed: most likely the process died. Give it a moment to say how.
          const exit = this.exited
            ? await Promise.race([this.exited, delay(this.options.graceMs).then(() => undefined)])
            : undefined;
          if (exit !== undefined) throw new Error(await this.exitMessage(exit, "during its turn"));
          throw new Error(`the leader agent "${this.options.agentId}" failed: ${describeError(settled.error)}`);
        }
        default:
          throw new Error(`unexpected turn outcome ${JSON.stringify(settled satisfies never)}`);
      }
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      if (onAbort !== undefined) signal.removeEventListener("abort", onAbort);
      this.onChunk = undefined;
      work.catch(() => undefined);
    }
  }

  /** session/cancel, then up to `graceMs` for the prompt to answer; an agent that does not answer is killed. */
  private async cancelTurn(prompted: boolean, work: Promise<unknown>): Promise<void> {
    const connection = this.connection;
    if (!prompted || connection === undefined || this.sessionId === undefined || this.dead) {
      await this.kill();
      return;
    }
    this.log.info({}, "cancelling the leader turn");
    await connection.agent
      .notify(methods.agent.session.cancel, { sessionId: this.sessionId })
      .catch((error: unknown) => this.log.debug({ err: error }, "session/cancel could not be sent"));
    const answered = await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      delay(this.options.graceMs).then(() => false),
    ]);
    if (!answered) await this.kill();
  }

  private onUpdate(notification: SessionNotification): void {
    if (this.sessionId !== undefined && notification.sessionId !== this.sessionId) return;
    const update = notification.update;
    if (update.sessionUpdate === "agent_message_chunk") {
      if (update.content.type === "text" && update.content.text !== "") this.onChunk?.(update.content.text);
    } else if (update.sessionUpdate === "tool_call") {
      this.log.debug({ tool: update.title }, "leader tool call");
    }
  }

  private async exitMessage(exit: Exit, when: string): Promise<string> {
    if (this.closedIo !== undefined) await Promise.race([this.closedIo, delay(Math.min(500, this.options.graceMs))]);
    const how =
      this.child?.spawnFailure !== undefined || this.spawnFailure !== undefined
        ? `could not be started (${this.spawnFailure ?? `${this.options.spec.command}: ${this.child?.spawnFailure?.message ?? ""}`})`
        : exit.signal !== null
          ? `was killed by ${exit.signal}`
          : exit.code === null
            ? `could not be started (${this.spawnFailure ?? this.options.spec.command})`
            : exit.code === 0
              ? "exited (code 0)"
              : `crashed (exit code ${exit.code})`;
    const tail = this.stderrTail.trim().slice(-STDERR_TAIL_CHARS);
    return `the leader agent "${this.options.agentId}" ${how} ${when}${tail === "" ? "" : ` — stderr tail: ${tail}`}`;
  }

  /** Marks the conversation dead and SIGKILLs its process group. Resolves once it (and all it started) is gone. */
  private async kill(): Promise<void> {
    this.dead = true;
    const child = this.child;
    if (child === undefined || child.gone) return;
    await child.kill();
  }

  /**
   * Ends the conversation: closes stdin and signals the agent's group at once (SIGTERM, then SIGKILL after
   * `graceMs`): a leader between turns owes nothing. A running turn rejects ("was closed"). Resolves once the process
   * and everything it started are gone. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.dead = true;
      const child = this.child;
      if (child !== undefined) await child.stop(this.options.graceMs);
      this.connection?.close();
    })();
    return this.closing;
  }
}

// ===============================================================================================================
// The leader

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
      const conversation = this.conversation(spec.key, spec.cwd);
      let answer: TurnAnswer;
      try {
        answer = await conversation.turn(
          text,
          { kind: spec.kind, attempt, repair: attempt > 1, subject: spec.subject },
          spec.signal,
          (chunk) => prose.push(chunk),
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

  /** The live conversation of `key`, or a new one (closing the least recently used idle ones beyond the cap). */
  private conversation(key: string, cwd: string): LeaderConversation {
    const existing = this.conversations.get(key);
    if (existing !== undefined && !existing.dead) return existing;
    if (existing !== undefined) void existing.close();
    const spec = this.options.registry.launchSpec(this.agentId);
    const created = new LeaderConversation(key, {
      agentId: this.agentId,
      spec,
      cwd,
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

// ===============================================================================================================
// Choosing the leader of a product

/**
 * A leader that cannot be used (unknown agent id, or an agent that cannot lead): every method rejects with an
 * `Error` carrying `reason`, so planning ends in `product.planFailed` with that reason instead of hanging.
 */
export class UnavailableLeader implements LeaderPort {
  constructor(readonly reason: string) {}
  private fail(): Promise<never> {
    return Promise.reject(new Error(this.reason));
  }
  plan(): Promise<PlanResult> {
    return this.fail();
  }
  message(): Promise<MessageResult> {
    return this.fail();
  }
  consultOnFailure(): Promise<FailureDecision> {
    return this.fail();
  }
  deriveChecklist(): Promise<ChecklistResult> {
    return this.fail();
  }
  planPhase(): Promise<PhasePlanResult> {
    return this.fail();
  }
  assess(): Promise<AssessResult> {
    return this.fail();
  }
}

/** Options of `createLeaderResolver`. */
export interface LeaderResolverOptions {
  registry: AgentRegistry;
  logger: Logger;
  /** The leader used when neither `leaderAgentId` nor `defaultLeaderAgentId` is set (the built-in heuristic one). */
  fallback: LeaderPort;
  /** The config file's `leader`, if any. */
  defaultLeaderAgentId?: string;
  /** Passed to every `AcpLeader` made. */
  leaderOptions?: Omit<AcpLeaderOptions, "agentId" | "registry" | "logger">;
}

/** A `LeaderResolver` plus the means to stop every leader process it started. */
export interface LeaderSelection {
  resolve: LeaderResolver;
  /** Closes every `AcpLeader` made so far; resolves once their processes have exited. Later resolves get an `UnavailableLeader`. */
  close(): Promise<void>;
}

/**
 * The composition root's leader resolver (ports.ts `LeaderResolver`): `leaderAgentId` (from `product.plan`), else
 * `defaultLeaderAgentId` (config `leader`), names a registry agent that leads through an `AcpLeader` (one per agent,
 * shared by every product); with neither, or with `"heuristic"` (`HEURISTIC_LEADER_ID`), `fallback` leads. An unknown agent id, or the built-in worker (which cannot
 * plan), gives an `UnavailableLeader` whose rejection names the problem. Never throws.
 */
export function createLeaderResolver(options: LeaderResolverOptions): LeaderSelection {
  const leaders = new Map<string, AcpLeader>();
  let closed = false;
  const resolve: LeaderResolver = (leaderAgentId) => {
    const agentId = leaderAgentId ?? options.defaultLeaderAgentId;
    if (agentId === undefined || agentId === HEURISTIC_LEADER_ID) return options.fallback;
    if (closed) return new UnavailableLeader("the server is shutting down; no leader turn can start");
    if (agentId === BUILTIN_WORKER_AGENT_ID) {
      return new UnavailableLeader(
        `the built-in worker cannot lead (it does not plan); leave leaderAgentId out to use the configured or built-in leader`,
      );
    }
    if (options.registry.get(agentId) === undefined) {
      const known = options.registry
        .list()
        .map((a) => a.agentId)
        .filter((id) => id !== BUILTIN_WORKER_AGENT_ID);
      return new UnavailableLeader(
        `unknown leader agent "${agentId}": it is not in the agent registry (${known.length > 0 ? `configured agents: ${known.join(", ")}` : "no agent is configured"})`,
      );
    }
    let leader = leaders.get(agentId);
    if (leader === undefined) {
      leader = new AcpLeader({ ...options.leaderOptions, agentId, registry: options.registry, logger: options.logger });
      leaders.set(agentId, leader);
    }
    return leader;
  };
  return {
    resolve,
    async close() {
      closed = true;
      await Promise.allSettled([...leaders.values()].map((l) => l.close()));
    },
  };
}
