/**
 * What a session shows of a product (PROTOCOL.md section 4), as pure functions of the product's state: tool call
 * ids, statuses and texts of tasks, plan entries, the end-of-turn summary, the session title, the prompt's text.
 * No I/O; never throws.
 */
import type { ContentBlock } from "../../../protocol/acp.js";
import type { TaskState, TaskStatus } from "../../../protocol/common.js";
import type { ProductOrchestrator } from "../../core/product/orchestrator.js";

/** At most this many characters of a task's output go into its tool call content (the rest is cut with a marker). */
const MAX_TOOL_CONTENT_CHARS = 100_000;
/** At most this many characters of a product's name become the session title. */
const MAX_TITLE_CHARS = 80;

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}\n[… ${text.length - max} more characters]`;
}

/** A task's tool call id: `<productId>/<taskId>`, unique in the session whatever product it ran (section 4). */
export function taskToolCallId(productId: string, taskId: string): string {
  return `${productId}/${taskId}`;
}

/** Ordering words at the start of a goal line: not part of a title. */
const ORDERING_LEAD =
  /^(?:and\s+)?(?:then|next|finally|lastly|afterwards?|after that|first(?:ly)?|meanwhile|in parallel|at the same time|also)(?=[\s,:])[,:]?\s*/i;

/**
 * A session title from a product's name or a goal (issue 15, Build 4: titles without list markers and ordering
 * words): list bullets, numbers and markdown markers dropped, a line's leading ordering words ("Then", "Finally",
 * "In parallel", …) dropped, lines joined with "; ", whitespace collapsed, first letter capital, at most 80
 * characters (cut at a word with an ellipsis). Empty input gives "Product".
 */
export function cleanTitle(name: string): string {
  const lines = name
    .split(/\r?\n/)
    .map((line) => line.replace(/^\s*(?:[-*+•]|\[[ xX]\]|\d+[.)]|#+)\s+/, "").trim())
    .map((line) => line.replace(ORDERING_LEAD, "").trim())
    .filter((line) => line !== "");
  const joined = lines.join("; ").replace(/\s+/g, " ").trim();
  const flat = joined.charAt(0).toUpperCase() + joined.slice(1);
  if (flat === "") return "Product";
  if (flat.length <= MAX_TITLE_CHARS) return flat;
  const cut = flat.slice(0, MAX_TITLE_CHARS - 1);
  const space = cut.lastIndexOf(" ");
  return `${(space > 40 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** A leader/agent message as sent: ends with a blank line, so clients that join messages keep them apart. */
export function asMessage(text: string): string {
  return text.endsWith("\n\n") ? text : text.endsWith("\n") ? `${text}\n` : `${text}\n\n`;
}

export function taskOf(product: ProductOrchestrator, taskId: string): TaskState | undefined {
  const i = product.model.index.get(taskId);
  return i === undefined ? undefined : product.model.state.tasks[i];
}

/** ACP tool call status of a task status (ACP has no cancelled/skipped: they are `failed`). */
export function toolStatus(status: TaskStatus): "pending" | "in_progress" | "completed" | "failed" {
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

/**
 * One line per permission the task's workers were refused (`refusedPermissions`, newest last), saying who refused
 * it: the user in the IDE ("you") or the permission policy (issue 11: every refusal is shown). Undefined when none.
 */
export function refusalText(task: TaskState, only?: "policy" | "client"): string | undefined {
  const refused = (task.refusedPermissions ?? []).filter((r) => only === undefined || r.by === only);
  if (refused.length === 0) return undefined;
  return refused
    .map((r) => `Permission refused by ${r.by === "client" ? "you" : "the permission policy"}: ${r.kind} "${r.title}"`)
    .join("\n");
}

function withRefusals(text: string | undefined, refusals: string | undefined): string | undefined {
  if (refusals === undefined) return text;
  return text === undefined || text === "" ? refusals : `${text}\n\n${refusals}`;
}

/**
 * The text a task's tool call carries: the worker's output, the error, a retry note, or the pending question; for a
 * completed or failed task also the permissions that were refused (a failed task's error already names the policy's).
 */
export function toolText(task: TaskState): string | undefined {
  switch (task.status) {
    case "completed":
      return withRefusals(task.output ? truncate(task.output, MAX_TOOL_CONTENT_CHARS) : undefined, refusalText(task));
    case "failed":
      return withRefusals(task.error ?? "The task failed.", refusalText(task, "client"));
    case "skipped":
      return task.error ?? "Skipped because a task it depends on failed.";
    case "cancelled":
      return "Cancelled.";
    case "waiting":
      return `Waiting for an answer: ${task.question ?? "(no question given)"}`;
    case "pending":
      return task.error && task.attempts > 0
        ? `Attempt ${task.attempts} failed: ${task.error} It will run again.`
        : undefined;
    default:
      return undefined;
  }
}

/** ACP plan entries: every task of the product (or of its proposed plan before confirmation), in plan order. */
export function planEntries(
  product: ProductOrchestrator,
): { content: string; priority: "medium"; status: "pending" | "in_progress" | "completed" }[] {
  const state = product.model.state;
  const source: { title: string; status: TaskStatus }[] =
    state.tasks.length > 0
      ? state.tasks
      : (state.plan?.tasks ?? []).map((t) => ({ title: t.title, status: "pending" as const }));
  return source.map((t) => ({
    content:
      t.status === "failed" || t.status === "skipped" || t.status === "cancelled"
        ? `${t.title} (${t.status})`
        : t.title,
    priority: "medium",
    status:
      t.status === "running"
        ? "in_progress"
        : t.status === "pending" || t.status === "waiting"
          ? "pending"
          : "completed",
  }));
}

/**
 * The waiting task whose answer the execution needs, when nothing runs and nothing else can start (so the turn should
 * end and let the user answer), else `undefined`.
 */
export function waitingForAnswer(product: ProductOrchestrator): TaskState | undefined {
  const counts = product.model.counts;
  if (counts.running > 0 || counts.waiting === 0) return undefined;
  const tasks = product.model.state.tasks;
  const statusOf = (id: string): TaskStatus | undefined => taskOf(product, id)?.status;
  const ready = tasks.some((t) => t.status === "pending" && t.dependsOn.every((d) => statusOf(d) === "completed"));
  return ready ? undefined : tasks.find((t) => t.status === "waiting");
}

/** The summary said at the end of an execution turn. */
export function summaryOf(product: ProductOrchestrator): string {
  const st = product.model.state;
  const total = st.tasks.length;
  const done = product.model.counts.completed;
  switch (product.phase) {
    case "completed":
      return `Done: all ${total} ${total === 1 ? "task" : "tasks"} completed.`;
    case "failed": {
      const failed = st.tasks
        .filter((t) => t.status !== "completed")
        .map((t) => `${t.taskId} ${t.status}${t.error ? ` (${t.error})` : ""}`);
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

/**
 * The text a plain ACP client sees for `product.taskVerified` (guarantee 17; PROTOCOL.md Verification): one line per
 * check (`✓`/`✗`, name, exit code or timeout, duration), and the failing check's output tail (its last 2,000
 * characters). Sent as the task's `tool_call_update` content, or as an agent message for the final head.
 */
export function verificationText(params: Record<string, unknown>): string {
  const checks = Array.isArray(params.checks)
    ? (params.checks as {
        name?: string;
        ok?: boolean;
        exitCode?: number | null;
        timedOut?: boolean;
        durationMs?: number;
        outputTail?: string;
      }[])
    : [];
  const tree = String(params.tree ?? "").slice(0, 12);
  const head = `Verification of tree ${tree}: ${params.ok === true ? "passed" : "failed"}.`;
  const lines = checks.map((c) => {
    const how = c.timedOut ? "timed out" : c.exitCode === null ? "ended by a signal" : `exit ${String(c.exitCode)}`;
    return `${c.ok ? "✓" : "✗"} ${String(c.name)} (${how}, ${Math.round(Number(c.durationMs ?? 0))} ms)`;
  });
  const failed = checks.find((c) => !c.ok);
  const tail = failed?.outputTail?.trimEnd().slice(-2_000);
  return [head, ...lines, ...(tail ? ["", tail] : [])].join("\n");
}
