/**
 * The task brief a worker receives (DESIGN.md, Agents): the markdown prompt of one task attempt and its `_meta`
 * mirror. Pure: no I/O.
 */
import type { DependencyOutput, WorkerRequest } from "../../core/ports.js";

/** Key of our entry in ACP `_meta` objects (prompt requests, prompt responses). */
export const META_KEY = "acp-orchestrator";

/** At most this many characters of one dependency's output go into a brief; the rest is cut with a marker. */
export const MAX_DEPENDENCY_OUTPUT_CHARS = 20_000;
/** At most this many characters of all dependency outputs together; later dependencies are then omitted. */
export const MAX_TOTAL_DEPENDENCY_CHARS = 200_000;
/** Length of the dependency output excerpt carried in the prompt's `_meta`. */
const META_EXCERPT_CHARS = 500;
/** At most this many characters of agent text are kept as the task output (all of it is still streamed). */
export const MAX_OUTPUT_CHARS = 1_000_000;
/** Length of the stderr tail quoted in a failure. */
export const STDERR_TAIL_CHARS = 2_048;

/** The structured mirror of the brief, sent as `_meta["acp-orchestrator"]` of `session/prompt`. */
export interface TaskBriefMeta {
  taskId: string;
  title: string;
  productId: string;
  attempt: number;
  description: string;
  acceptance?: string;
  dependencies: { taskId: string; title: string; excerpt: string }[];
}

function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[… truncated: ${text.length - max} more characters]`;
}

/**
 * Builds the prompt of one task attempt: a markdown brief whose first line is `# Task <taskId>: <title>`, followed by
 * the context, `## Description`, `## Acceptance criteria` (when set) and one `### Output of dependency <taskId>:
 * <title>` section per dependency (each cut at `MAX_DEPENDENCY_OUTPUT_CHARS`, all together at
 * `MAX_TOTAL_DEPENDENCY_CHARS`). `roots`: the additional directories the agent's session was given (issue 31), named
 * beside the workspace. Also returns the `_meta` mirror. Pure.
 */
export function formatTaskBrief(
  request: Omit<WorkerRequest, "signal" | "instance">,
  roots: readonly string[] = [],
): {
  text: string;
  meta: TaskBriefMeta;
} {
  const { task, attempt } = request;
  const root = request.root;
  const place =
    root !== undefined && root !== request.cwd ? `${root} (your cwd is its folder ${request.cwd})` : request.cwd;
  const shared = roots.length > 0 ? ` and the additional directories ${roots.join(", ")} (shared, not isolated)` : "";
  const lines: string[] = [
    `# Task ${task.taskId}: ${task.title}`,
    "",
    `You are a worker on one task of a larger plan run by acp-orchestrator (product ${request.productId}, attempt ${attempt}` +
      `${attempt > 1 ? "; earlier attempts failed, so check the workspace for partial work" : ""}).`,
    `Work only inside the workspace ${place}${shared}. When you are done, reply with a short summary of what you did and where the results are.`,
    "",
    "## Description",
    "",
    task.description.trim() === "" ? "(no description)" : task.description,
  ];
  if (task.acceptance !== undefined && task.acceptance.trim() !== "") {
    lines.push("", "## Acceptance criteria", "", task.acceptance);
  }
  if (request.previousError !== undefined && request.previousError.trim() !== "") {
    lines.push(
      "",
      "## Why the previous attempt failed",
      "",
      truncate(request.previousError, MAX_DEPENDENCY_OUTPUT_CHARS),
    );
  }
  const deps: DependencyOutput[] = request.dependencyOutputs;
  if (deps.length > 0) {
    lines.push(
      "",
      "## Dependencies",
      "",
      `This task builds on ${deps.length} completed task(s); their outputs follow.`,
    );
    let budget = MAX_TOTAL_DEPENDENCY_CHARS;
    for (const dep of deps) {
      lines.push("", `### Output of dependency ${dep.taskId}: ${dep.title}`, "");
      if (budget <= 0) {
        lines.push("[output omitted: the brief's size limit was reached]");
        continue;
      }
      const cut = truncate(dep.output, Math.min(MAX_DEPENDENCY_OUTPUT_CHARS, budget));
      budget -= Math.min(dep.output.length, MAX_DEPENDENCY_OUTPUT_CHARS);
      lines.push(dep.output.trim() === "" ? "(no output)" : cut);
    }
  }
  const meta: TaskBriefMeta = {
    taskId: task.taskId,
    title: task.title,
    productId: request.productId,
    attempt,
    description: task.description,
    dependencies: deps.map((d) => ({
      taskId: d.taskId,
      title: d.title,
      excerpt: truncate(d.output, META_EXCERPT_CHARS),
    })),
  };
  if (task.acceptance !== undefined) meta.acceptance = task.acceptance;
  return { text: lines.join("\n"), meta };
}

/** Reads `{taskId, title}` from a brief's header line (`# Task <taskId>: <title>`), or `undefined`. Pure. */
export function parseBriefHeader(text: string): { taskId: string; title: string } | undefined {
  const match = /^# Task (\S+): (.+)$/m.exec(text);
  if (match === null || match[1] === undefined || match[2] === undefined) return undefined;
  return { taskId: match[1], title: match[2].trim() };
}
