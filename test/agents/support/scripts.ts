/**
 * Model scripts for the real-agent suite: how the fake model answers a worker's task, a leader's turn, and the side
 * requests an agent makes on its own (titles, summaries).
 *
 * Owns: reading the orchestrator's prompts back out of a model request (the worker brief of task-brief.ts, the leader
 * turn header of leader-prompts.ts), naming an agent's own tools (Claude Code offers `Write`, claude-code-acp
 * `mcp__acp__Write`), and `routeScript`, which dispatches each request to the right handler. Provider-neutral where
 * it can be: a codex script reuses `workerBrief`, `leaderTurn` and `routeScript` with its own tool steps.
 */
import { join } from "node:path";
import type { ModelRequest, ModelScript, ScriptedReply } from "./fake-model.js";

/** The worker brief of a task prompt (src/adapters/agents/task-brief.ts), read back from the conversation. */
export interface WorkerBrief {
  taskId: string;
  title: string;
  /** The absolute workspace the worker must work in (the task's worktree, or the product's cwd). */
  workspace: string;
  /** The brief's text (from `# Task` on). */
  text: string;
}

/** The worker brief in `request`'s conversation, or undefined when this is not a worker's task turn. */
export function workerBrief(request: ModelRequest): WorkerBrief | undefined {
  const text = request.allText;
  const start = text.indexOf("# Task ");
  if (start < 0) return undefined;
  const brief = text.slice(start);
  const head = /^# Task ([^:\n]+): ([^\n]*)/.exec(brief);
  const workspace = /Work only inside the workspace (\/.*?)\. When you are done/.exec(brief);
  if (head === null || workspace === null) return undefined;
  return { taskId: head[1]!, title: head[2]!, workspace: workspace[1]!, text: brief };
}

/** The kind of leader turn (`plan`, `message`, `consult`, …) in `request`, or undefined when it is no leader turn. */
export function leaderTurn(request: ModelRequest): string | undefined {
  const found = /# acp-orchestrator leader turn: (\w+)/.exec(request.lastUserText || request.allText);
  return found?.[1];
}

/** The name under which `request` offers the tool `base` (`Write`, `Edit`, `Bash`, …), or undefined. */
export function toolNamed(request: ModelRequest, base: string): string | undefined {
  return request.toolNames.find((n) => n === base || n.endsWith(`__${base}`));
}

/** A fenced JSON block, as the leader prompts ask for. */
export function fencedJson(value: unknown): string {
  return ["```json", JSON.stringify(value, null, 2), "```"].join("\n");
}

/** One step of a worker's turn: what the model answers to the `assistantTurns`-th call of the turn. */
export type WorkerStep = (brief: WorkerBrief, request: ModelRequest) => ScriptedReply;

/** A `Write` tool call creating `relativePath` (inside the brief's workspace) with `content`. */
export function writeStep(relativePath: string, content: string, text = `Writing ${relativePath}.`): WorkerStep {
  return (brief, request) => ({
    text,
    toolCalls: [
      {
        name: toolNamed(request, "Write") ?? "Write",
        input: { file_path: join(brief.workspace, relativePath), content },
      },
    ],
  });
}

/** A `Bash` tool call running `command`. */
export function bashStep(command: string, description = "Run a command"): WorkerStep {
  return (_brief, request) => ({
    text: `Running: ${description}.`,
    toolCalls: [{ name: toolNamed(request, "Bash") ?? "Bash", input: { command, description } }],
  });
}

/** The final answer (no tool call): the turn ends with `end_turn`. */
export function answerStep(text: string): WorkerStep {
  return () => ({ text });
}

/** Holds the reply open (the agent is mid-turn with its model request open) until `FakeModel.release()`. */
export function holdStep(text = "Thinking about it."): WorkerStep {
  return () => ({ text, hold: true });
}

export interface RouteScriptOptions {
  /** Steps of a worker's turn for the task in `brief` (index = the call's `assistantTurns`); past the end: `answer`. */
  worker?: (brief: WorkerBrief) => WorkerStep[];
  /** The leader's answer to a turn of `kind` (`plan`, `message`, `consult`, …). */
  leader?: (kind: string, request: ModelRequest) => ScriptedReply;
  /** Anything else (an agent's own side requests: titles, summaries, quota checks). Default: a short text. */
  other?: (request: ModelRequest) => ScriptedReply;
}

/**
 * A script that routes each request: leader turns to `leader`, worker task turns to `worker`'s steps, everything
 * else (side requests without the orchestrator's prompt, or without tools) to `other`.
 */
export function routeScript(options: RouteScriptOptions): ModelScript {
  return (request) => {
    const kind = leaderTurn(request);
    if (kind !== undefined && options.leader !== undefined && request.toolNames.length > 0) {
      return options.leader(kind, request);
    }
    const brief = workerBrief(request);
    if (brief !== undefined && options.worker !== undefined && request.toolNames.length > 0) {
      const steps = options.worker(brief);
      const step = steps[request.assistantTurns];
      return step !== undefined ? step(brief, request) : { text: `Task ${brief.taskId} is done.` };
    }
    return options.other?.(request) ?? { text: "OK." };
  };
}
