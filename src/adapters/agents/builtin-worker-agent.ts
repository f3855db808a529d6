/**
 * The built-in worker agent (registry id `builtin-worker`): a real ACP v1 agent on the official SDK, started by the
 * registry as a subprocess and served over stdio. It needs no model: for each task brief it writes a markdown note
 * about the task to `<session cwd>/notes/<taskId>-<slug>.md`, reports that as one `edit` tool call, streams a few
 * message chunks and ends the turn.
 *
 * Owns: its sessions and the note files it writes. It must never write outside the session's cwd (paths are
 * sanitised, the real path is checked, symlinks are not followed), never write anything but ACP messages to stdout
 * (logs go to stderr), and always answer a cancelled prompt with `stopReason: "cancelled"`.
 */
import { constants, realpathSync } from "node:fs";
import { mkdir, open, realpath, stat } from "node:fs/promises";
import { isAbsolute, join, relative, sep } from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { agent, methods, ndJsonStream, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import type { AgentApp, AgentContext, ContentBlock, PromptRequest } from "@agentclientprotocol/sdk";
import pino from "pino";
import type { Logger } from "../../core/ports.js";
import { META_KEY, parseBriefHeader } from "./acp-worker.js";
import type { TaskBriefMeta } from "./acp-worker.js";

/** Name the built-in worker gives itself in `initialize`. */
export const BUILTIN_WORKER_AGENT_NAME = "acp-orchestrator-builtin-worker";

interface Session {
  cwd: string;
  turn: AbortController | undefined;
}

/** What the worker knows about its task, from the prompt's `_meta` or else from the brief text. */
interface TaskFacts {
  taskId: string;
  title: string;
  productId?: string;
  attempt?: number;
  description: string;
  acceptance?: string;
  dependencies: { taskId: string; title: string; excerpt: string }[];
}

class TurnCancelled extends Error {}

/** Waits `ms` (0 = just a tick), or throws `TurnCancelled` as soon as `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new TurnCancelled());
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new TurnCancelled());
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function textOf(prompt: ContentBlock[]): string {
  return prompt
    .map((block) => (block.type === "text" ? block.text : ""))
    .filter((t) => t !== "")
    .join("\n\n");
}

function asString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** Reads the task from `_meta["acp-orchestrator"]` when present, else from the brief's header and sections. Pure. */
export function taskFactsOf(request: Pick<PromptRequest, "prompt" | "_meta">): TaskFacts {
  const text = textOf(request.prompt);
  const raw = request._meta?.[META_KEY];
  if (typeof raw === "object" && raw !== null) {
    const meta = raw as Partial<Record<keyof TaskBriefMeta, unknown>>;
    const taskId = asString(meta.taskId);
    const title = asString(meta.title);
    if (taskId !== undefined && taskId !== "" && title !== undefined && title !== "") {
      const deps = Array.isArray(meta.dependencies) ? (meta.dependencies as unknown[]) : [];
      const facts: TaskFacts = {
        taskId,
        title,
        description: asString(meta.description) ?? "",
        dependencies: deps.flatMap((d) => {
          if (typeof d !== "object" || d === null) return [];
          const dep = d as Record<string, unknown>;
          const depId = asString(dep["taskId"]);
          if (depId === undefined) return [];
          return [{ taskId: depId, title: asString(dep["title"]) ?? depId, excerpt: asString(dep["excerpt"]) ?? "" }];
        }),
      };
      const productId = asString(meta.productId);
      if (productId !== undefined) facts.productId = productId;
      if (typeof meta.attempt === "number") facts.attempt = meta.attempt;
      const acceptance = asString(meta.acceptance);
      if (acceptance !== undefined) facts.acceptance = acceptance;
      return facts;
    }
  }
  const header = parseBriefHeader(text);
  const description = /^## Description\n+([\s\S]*?)(?=\n## |$)/m.exec(text)?.[1]?.trim();
  if (header !== undefined) return { ...header, description: description ?? "", dependencies: [] };
  // Not one of our briefs: the first non-empty line is the title.
  const firstLine =
    text
      .split("\n")
      .find((l) => l.trim() !== "")
      ?.replace(/^#+\s*/, "")
      .trim() ?? "";
  return {
    taskId: "task",
    title: firstLine === "" ? "Untitled task" : firstLine.slice(0, 200),
    description: text,
    dependencies: [],
  };
}

/** `[A-Za-z0-9_-]` only, collapsed, at most `max` characters; `fallback` when nothing is left. Pure. */
export function safeFileComponent(value: string, max: number, fallback: string): string {
  const cleaned = value
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/-+/g, "-")
    .replace(/^-|-$/g, "")
    .slice(0, max)
    .replace(/-$/, "");
  return cleaned === "" ? fallback : cleaned;
}

/** The note's path relative to the session cwd: `notes/<taskId>-<slug>.md`, both parts sanitised. Pure. */
export function notePathFor(taskId: string, title: string): string {
  return `notes/${safeFileComponent(taskId, 64, "task")}-${safeFileComponent(title, 48, "note")}.md`;
}

function renderNote(facts: TaskFacts, at: string): string {
  const lines = [`# ${facts.title}`, ""];
  const context = [`- Task: \`${facts.taskId}\``];
  if (facts.productId !== undefined) context.push(`- Product: \`${facts.productId}\``);
  if (facts.attempt !== undefined) context.push(`- Attempt: ${facts.attempt}`);
  context.push(`- Written: ${at} by the acp-orchestrator built-in worker`);
  lines.push(
    ...context,
    "",
    "## Description",
    "",
    facts.description.trim() === "" ? "(no description)" : facts.description.trim(),
  );
  if (facts.acceptance !== undefined && facts.acceptance.trim() !== "") {
    lines.push("", "## Acceptance criteria", "", facts.acceptance.trim());
  }
  lines.push("", "## What the dependencies produced", "");
  if (facts.dependencies.length === 0) lines.push("Nothing: this task has no dependencies.");
  for (const dep of facts.dependencies) {
    const excerpt = dep.excerpt.trim() === "" ? "(no output)" : dep.excerpt.trim().replace(/\n/g, "\n  ");
    lines.push(`- **${dep.title}** (\`${dep.taskId}\`):`, `  ${excerpt}`);
  }
  lines.push("");
  return lines.join("\n");
}

/**
 * Writes `content` to `<cwd>/<relativePath>` and returns the absolute path. Refuses (throws) when the real location
 * would be outside the real `cwd` (e.g. `notes` is a symlink out of the workspace) or the file itself is a symlink.
 */
async function writeInside(cwd: string, relativePath: string, content: string): Promise<string> {
  const root = await realpath(cwd);
  if (!(await stat(root)).isDirectory()) throw new Error(`session cwd ${cwd} is not a directory`);
  const target = join(root, relativePath);
  const dir = join(target, "..");
  await mkdir(dir, { recursive: true });
  const realDir = await realpath(dir);
  const rel = relative(root, realDir);
  if (rel.startsWith("..") || isAbsolute(rel) || rel.split(sep).includes("..")) {
    throw new Error(`refusing to write ${relativePath}: it resolves outside the session cwd`);
  }
  const file = join(realDir, relativePath.split("/").pop() ?? "note.md");
  const handle = await open(
    file,
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | (constants.O_NOFOLLOW ?? 0),
    0o644,
  );
  try {
    await handle.writeFile(content, "utf8");
  } finally {
    await handle.close();
  }
  return file;
}

/** How the built-in worker paces a turn: its logger, the note's clock, the delay between steps (ms). */
interface TurnPace {
  logger: Logger;
  now: () => Date;
  stepDelayMs: number;
}

/** One prompt turn: says what it works on, writes the task's note inside the session's cwd, reports it. */
async function runTurn(
  pace: TurnPace,
  ctx: AgentContext,
  sessionId: string,
  session: Session,
  request: PromptRequest,
  signal: AbortSignal,
): Promise<void> {
  const { logger, now, stepDelayMs } = pace;
  const say = async (text: string): Promise<void> => {
    if (signal.aborted) throw new TurnCancelled();
    await ctx.notify(methods.client.session.update, {
      sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
    });
  };
  const facts = taskFactsOf(request);
  await say(`Working on task ${facts.taskId}: ${facts.title}.\n`);
  const relativePath = notePathFor(facts.taskId, facts.title);
  await pause(stepDelayMs, signal);
  const file = await writeInside(session.cwd, relativePath, renderNote(facts, now().toISOString()));
  logger.info({ sessionId, taskId: facts.taskId, file }, "note written");
  await ctx.notify(methods.client.session.update, {
    sessionId,
    update: {
      sessionUpdate: "tool_call",
      toolCallId: `write-${safeFileComponent(facts.taskId, 64, "task")}`,
      title: `Write ${relativePath}`,
      kind: "edit",
      status: "completed",
      locations: [{ path: file }],
    },
  });
  const deps = facts.dependencies.length;
  await pause(stepDelayMs, signal);
  await say(
    `Wrote a note with the task's description${facts.acceptance !== undefined ? ", its acceptance criteria" : ""} and ` +
      `${deps === 0 ? "no dependency outputs (there are none)" : `a summary of what its ${deps} dependenc${deps === 1 ? "y" : "ies"} produced`} ` +
      `to ${relativePath} (${file}).\n`,
  );
  await pause(stepDelayMs, signal);
  await say("Done.\n");
}

/**
 * Builds the built-in worker's ACP agent app (initialize, session/new, session/prompt, session/cancel). Serve it with
 * `connect(stream)`; tests may connect a client app to it in-process. `now` supplies the note's timestamp;
 * `stepDelayMs` (default 0) paces the turn between its steps, and a session/cancel interrupts that wait.
 */
export function createBuiltinWorkerAgent(options: {
  logger: Logger;
  now?: () => Date;
  stepDelayMs?: number;
}): AgentApp {
  const { logger } = options;
  const now = options.now ?? (() => new Date());
  const stepDelayMs = options.stepDelayMs ?? 0;
  const sessions = new Map<string, Session>();
  let nextSession = 1;

  return agent({ name: BUILTIN_WORKER_AGENT_NAME })
    .onRequest(methods.agent.initialize, () => ({
      protocolVersion: PROTOCOL_VERSION,
      agentCapabilities: { loadSession: false },
      authMethods: [],
      agentInfo: { name: BUILTIN_WORKER_AGENT_NAME, title: "acp-orchestrator built-in worker", version: "1" },
    }))
    .onRequest(methods.agent.session.new, ({ params }) => {
      if (!isAbsolute(params.cwd))
        throw RequestError.invalidParams({ cwd: params.cwd }, "cwd must be an absolute path");
      const sessionId = `bw-${process.pid}-${nextSession++}`;
      sessions.set(sessionId, { cwd: params.cwd, turn: undefined });
      return { sessionId };
    })
    .onRequest(methods.agent.session.prompt, async ({ params, client: ctx }) => {
      const session = sessions.get(params.sessionId);
      if (session === undefined) throw RequestError.resourceNotFound(params.sessionId);
      session.turn?.abort();
      const turn = new AbortController();
      session.turn = turn;
      try {
        await runTurn({ logger, now, stepDelayMs }, ctx, params.sessionId, session, params, turn.signal);
        return { stopReason: turn.signal.aborted ? "cancelled" : "end_turn" };
      } catch (error) {
        if (turn.signal.aborted || error instanceof TurnCancelled) return { stopReason: "cancelled" };
        logger.error({ err: error, sessionId: params.sessionId }, "turn failed");
        throw RequestError.internalError(undefined, error instanceof Error ? error.message : String(error));
      } finally {
        if (session.turn === turn) session.turn = undefined;
      }
    })
    .onNotification(methods.agent.session.cancel, ({ params }) => {
      sessions.get(params.sessionId)?.turn?.abort();
    });
}

/** Serves the built-in worker on this process's stdio until stdin closes, then exits 0. Logs go to stderr. */
async function main(): Promise<void> {
  const logger = pino(
    { name: BUILTIN_WORKER_AGENT_NAME, level: process.env["ACP_ORCHESTRATOR_LOG_LEVEL"] ?? "info" },
    pino.destination({ dest: 2, sync: true }),
  );
  const stream = ndJsonStream(
    Writable.toWeb(process.stdout) as WritableStream<Uint8Array>,
    Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>,
  );
  const connection = createBuiltinWorkerAgent({ logger }).connect(stream);
  await connection.closed;
  process.exit(0);
}

/** True when this module is the process's entry point (also when started through a symlink). */
function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(fileURLToPath(import.meta.url)) === realpathSync(entry);
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main().catch((error: unknown) => {
    process.stderr.write(
      `${BUILTIN_WORKER_AGENT_NAME}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  });
}
