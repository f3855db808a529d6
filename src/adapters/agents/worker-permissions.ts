/**
 * Worker permission requests (DESIGN.md, Agents; PROTOCOL.md section 4, "Worker permission requests"): the policy's
 * answer, the forwarder type through which the IDE answers, and what counts as a refusal.
 *
 * Owns: choosing an option under a `PermissionPolicy`, and describing a refusal. Pure: no I/O, no process.
 */
import type { PermissionOption, RequestPermissionRequest, RequestPermissionResponse } from "@agentclientprotocol/sdk";
import { permissionDecision } from "./registry.js";
import type { PermissionPolicy } from "./registry.js";

/**
 * Picks the answer to a worker's permission request under the configured policy, for a request of tool kind `kind`
 * (absent = `other`; only matters for per-kind rules). `allow` picks the first allow option (once before always),
 * else a reject one; `deny` picks the first reject option. No suitable option: `cancelled`. Pure.
 */
export function choosePermission(
  options: PermissionOption[],
  policy: PermissionPolicy,
  kind?: string | null,
): RequestPermissionResponse {
  const allow = options.find((o) => o.kind === "allow_once") ?? options.find((o) => o.kind === "allow_always");
  const reject = options.find((o) => o.kind === "reject_once" || o.kind === "reject_always");
  const chosen = permissionDecision(policy, kind) === "allow" ? (allow ?? reject) : reject;
  if (chosen === undefined) return { outcome: { outcome: "cancelled" } };
  return { outcome: { outcome: "selected", optionId: chosen.optionId } };
}

/**
 * True when `response` refuses the request: it selects a `reject_*` option, or an option the request did not offer,
 * or it is `cancelled`. Pure.
 */
export function isRefusal(response: RequestPermissionResponse, options: PermissionOption[]): boolean {
  const outcome = response.outcome;
  if (outcome.outcome !== "selected") return true;
  const option = options.find((o) => o.optionId === outcome.optionId);
  return option === undefined || option.kind === "reject_once" || option.kind === "reject_always";
}

/** A worker's `session/request_permission` as handed to the pool's forwarder (see `PermissionForwarder`). */
export interface WorkerPermissionRequest {
  productId: string;
  taskId: string;
  taskTitle: string;
  attempt: number;
  agentId: string;
  /**
   * The request as the worker sent it (its own `sessionId`, `toolCall`, `options`), with `toolCall.kind` and
   * `toolCall.title` filled in from the worker's earlier `tool_call`/`tool_call_update` of the same `toolCallId` when
   * the request itself lacks them.
   */
  params: RequestPermissionRequest;
  /** Aborted when the attempt stops (cancel, pause, timeout, shutdown): a pending question must then be withdrawn. */
  signal: AbortSignal;
}

/**
 * Forwards a worker's permission request to whoever can answer it for the product (the IDE of the product's ACP
 * session). Resolves `undefined` when nobody can (then the `permissions` policy decides). A rejection means someone
 * was asked and failed to answer: the worker is then denied, whatever the policy says.
 */
export type PermissionForwarder = (request: WorkerPermissionRequest) => Promise<RequestPermissionResponse | undefined>;
