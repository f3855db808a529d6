/**
 * Worker permission questions forwarded to the IDE (PROTOCOL.md section 4): a worker's `session/request_permission`
 * goes to the client of the session whose product the worker serves, with the task named in its title, a tool call
 * id unique to the product, task and worker call, and the worker's options. A `session/cancel` withdraws the pending
 * questions (`$/cancel_request`, answered `cancelled`) and no new question is sent to the session until its next
 * prompt.
 */
import { RequestPermissionResult } from "../../../protocol/acp.js";
import type { RpcConnection } from "../rpc-connection.js";
import { taskToolCallId } from "./view.js";

/** A worker's permission question as the worker pool hands it over (structurally `WorkerPermissionRequest`). */
export interface ForwardedPermission {
  productId: string;
  taskId: string;
  taskTitle: string;
  attempt: number;
  agentId: string;
  params: {
    toolCall: {
      toolCallId: string;
      title?: string | null;
      kind?: string | null;
      _meta?: Record<string, unknown> | null;
    };
    options: { optionId: string; name: string; kind: string }[];
  };
  signal: AbortSignal;
}

/** The IDE's answer to a forwarded permission question. */
export type ForwardedPermissionAnswer =
  | { outcome: { outcome: "cancelled" } }
  | { outcome: { outcome: "selected"; optionId: string } };

/** The permission questions of one connection's sessions: forwarding, withdrawal on cancel, the cancelled set. */
export class PermissionForwarder {
  /** Sessions cancelled since their last prompt: no permission question goes to them (PROTOCOL.md section 4). */
  private readonly cancelled = new Set<string>();
  /** Forwarded worker permission questions awaiting the IDE, per session (withdrawn by a cancel). */
  private readonly forwarded = new Map<string, Set<AbortController>>();

  constructor(private readonly connection: Pick<RpcConnection, "request">) {}

  /** `session/cancel` of `sessionId`: withdraws its pending questions and sends it none until `clear`. */
  cancel(sessionId: string): void {
    this.cancelled.add(sessionId);
    for (const pending of this.forwarded.get(sessionId) ?? []) pending.abort(new Error("The session was cancelled."));
  }

  /** A new prompt (or the session's deletion): questions may be sent to `sessionId` again. */
  clear(sessionId: string): void {
    this.cancelled.delete(sessionId);
  }

  /** True when `sessionId` was cancelled since its last prompt. */
  isCancelled(sessionId: string): boolean {
    return this.cancelled.has(sessionId);
  }

  /**
   * Sends the worker's question to the client of `sessionId`: the question names the task in its title and keeps the
   * worker's options. Answers `cancelled` without asking when the session was cancelled since its last prompt; a
   * `cancel` withdraws a pending question and answers it `cancelled`. Rejects when the client fails to answer or
   * answers something invalid, and with the abort reason when `request.signal` aborts (the request is withdrawn).
   */
  async forward(sessionId: string, request: ForwardedPermission): Promise<ForwardedPermissionAnswer> {
    if (this.cancelled.has(sessionId)) return { outcome: { outcome: "cancelled" } };
    const original = request.params.toolCall;
    const what = original.title ?? original.kind ?? "a tool call";
    const withdraw = new AbortController();
    const pending = this.forwarded.get(sessionId) ?? new Set<AbortController>();
    this.forwarded.set(sessionId, pending);
    pending.add(withdraw);
    const onAbort = (): void => withdraw.abort(request.signal.reason);
    request.signal.addEventListener("abort", onAbort, { once: true });
    if (request.signal.aborted) onAbort();
    let raw: unknown;
    try {
      raw = await this.connection.request(
        "session/request_permission",
        {
          sessionId: sessionId,
          toolCall: {
            ...original,
            toolCallId: `${taskToolCallId(request.productId, request.taskId)}/${original.toolCallId}`,
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
        { signal: withdraw.signal },
      );
    } catch (err) {
      if (!request.signal.aborted && this.cancelled.has(sessionId)) return { outcome: { outcome: "cancelled" } };
      throw err;
    } finally {
      request.signal.removeEventListener("abort", onAbort);
      pending.delete(withdraw);
    }
    const parsed = RequestPermissionResult.safeParse(raw);
    if (!parsed.success) throw new Error("The client answered session/request_permission with an invalid result.");
    const outcome = parsed.data.outcome;
    return outcome.outcome === "selected"
      ? { outcome: { outcome: "selected", optionId: outcome.optionId } }
      : { outcome: { outcome: "cancelled" } };
  }
}
