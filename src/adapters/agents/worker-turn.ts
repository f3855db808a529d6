/**
 * What a worker's turn means, as pure functions over what the agent sent (DESIGN.md, Agents): the prompt response's
 * token usage and question, its stop reason as an attempt's draft result, the text of an exit, and the gated stdout
 * stream that gives end-to-end backpressure. Split from worker-attempt.ts (issue 27: one concept per file); the
 * attempt keeps the process and the session, this file keeps the meaning.
 */
import { Readable } from "node:stream";
import { RequestError } from "@agentclientprotocol/sdk";
import type { PromptResponse } from "@agentclientprotocol/sdk";
import type { RefusedPermission, WorkerResult } from "../../core/ports.js";
import type { AgentExit } from "./agent-process.js";
import { META_KEY } from "./task-brief.js";

/** Resolves when the consumer of worker output can take more (see `AcpWorkerPool.setOutputGate`). Never rejects. */
export type OutputGate = () => Promise<void>;

/** An attempt's result before the child has exited: failures get their stderr tail only at the very end. */
export type Draft = WorkerResult | { outcome: "failedWithTail"; what: string };

export function describeError(error: unknown): string {
  if (error instanceof RequestError) return `error ${error.code}: ${error.message}`;
  if (error instanceof Error) return error.message;
  return String(error);
}

function nonNegativeInt(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? Math.floor(value) : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Token usage of the turn a prompt response ends: ACP's `usage` (`inputTokens`, `outputTokens`), or the same shape in
 * `_meta.usage` / `_meta["acp-orchestrator"].usage`. `usage_update` notifications are NOT usage (their `used` is the
 * size of the context window in use), so they are never read here.
 */
export function usageOf(response: PromptResponse): { inputTokens: number; outputTokens: number } | undefined {
  const meta = isRecord(response._meta) ? response._meta : {};
  const ours = isRecord(meta[META_KEY]) ? meta[META_KEY] : {};
  const candidates = [(response as Record<string, unknown>)["usage"], ours["usage"], meta["usage"]];
  for (const candidate of candidates) {
    if (!isRecord(candidate)) continue;
    const inputTokens = nonNegativeInt(candidate["inputTokens"]);
    const outputTokens = nonNegativeInt(candidate["outputTokens"]);
    if (inputTokens !== undefined || outputTokens !== undefined) {
      return { inputTokens: inputTokens ?? 0, outputTokens: outputTokens ?? 0 };
    }
  }
  return undefined;
}

/** A question the agent needs answered, carried as `_meta["acp-orchestrator"].question` of the prompt response. */
export function questionOf(response: PromptResponse): string | undefined {
  const meta = isRecord(response._meta) ? response._meta : {};
  const ours = meta[META_KEY];
  if (!isRecord(ours)) return undefined;
  const question = ours["question"];
  return typeof question === "string" && question.trim() !== "" ? question : undefined;
}

/**
 * A worker's stdout as a web stream that reads on only once `gate()` (read anew before every read; none = open)
 * resolved. While the gate is closed nothing is read, so the child's pipe fills and its own writes wait: end-to-end
 * backpressure, with at most one chunk (the pipe's size) read ahead. Cancelling the stream cancels the source.
 */
export function gatedReadable(source: Readable, gate: () => OutputGate | undefined): ReadableStream<Uint8Array> {
  const reader = (Readable.toWeb(source) as ReadableStream<Uint8Array>).getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const wait = gate();
        if (wait !== undefined) await wait();
        const { value, done } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** What `turnOutcome` needs besides the response: who ran the turn, what it wrote, what was refused and by which rule. */
export interface TurnContext {
  agentId: string;
  /** The task output collected during the turn (bounded by the attempt's output buffer). */
  output: string;
  refusals: readonly RefusedPermission[];
  /** The permission policy in words (registry.ts `describePolicy`), for the failure a policy refusal causes. */
  policy: string;
}

/**
 * The draft result of a turn the agent ended with `response` (ACP `session/prompt` stop reasons). A turn that ends
 * after a policy refusal fails with kind `permission` (issue 11: a refused action leaves the task undone, never a
 * silent success), except on `max_tokens`/`max_turn_requests`, which fail on their own. `end_turn` with a question
 * in `_meta` waits for an answer. Pure.
 */
export function turnOutcome(response: PromptResponse | undefined, turn: TurnContext): Draft {
  if (response === undefined)
    return { outcome: "failedWithTail", what: "agent session ended without a prompt response" };
  const byPolicy = turn.refusals.filter((r) => r.by === "policy");
  if (byPolicy.length > 0 && response.stopReason !== "max_tokens" && response.stopReason !== "max_turn_requests") {
    const actions = byPolicy.map((r) => `${r.kind} "${r.title}"`).join(", ");
    return {
      outcome: "failed",
      kind: "permission",
      agentId: turn.agentId,
      prompted: true,
      error:
        `The permission policy ${turn.policy} refused ${actions} to agent ` +
        `"${turn.agentId}", so the task could not be done (the agent ended its turn: ${response.stopReason}). ` +
        `Allow that kind of action in "permissions" of the agent configuration, or run the product from an ACP ` +
        `session to answer permission requests yourself.`,
    };
  }
  return stopReasonOutcome(response, turn.output);
}

function stopReasonOutcome(response: PromptResponse, output: string): Draft {
  switch (response.stopReason) {
    case "end_turn": {
      const question = questionOf(response);
      if (question !== undefined) return { outcome: "waiting", question };
      return { outcome: "completed", output };
    }
    case "cancelled":
      // The agent cancelled on its own (we never asked): treat it as a failure so the core retries or consults.
      return { outcome: "failed", error: "agent ended the turn as cancelled without being asked to" };
    case "refusal":
      return { outcome: "failed", error: "agent refused the task (stop reason: refusal)" };
    case "max_tokens":
      return { outcome: "failed", error: "agent ran out of tokens (stop reason: max_tokens)" };
    case "max_turn_requests":
      return { outcome: "failed", error: "agent hit its turn request limit (stop reason: max_turn_requests)" };
    default:
      return {
        outcome: "failed",
        error: `agent ended the turn with unknown stop reason "${String(response.stopReason)}"`,
      };
  }
}

/** "was killed by SIGKILL" / "crashed (exit code 3)" / "exited (code 0)". Pure. */
export function describeExit(exit: AgentExit): string {
  if (exit.signal !== null) return `was killed by ${exit.signal}`;
  if (exit.code !== 0) return `crashed (exit code ${String(exit.code)})`;
  return "exited (code 0)";
}
