/**
 * Wire-error factories: the only place that builds JSON-RPC `ResponseError`s with the codes, messages and `data`
 * shapes of PROTOCOL.md section 3.
 *
 * Owns: one small factory per error row, the `-32602` issue conversion and its one-sentence message. Must never log,
 * throw, or know about domain errors (the product layer maps those onto these factories through `mapError`).
 */
import { ResponseError } from "vscode-jsonrpc/node";
import type { z } from "zod";
import {
  ErrorCodes,
  invalidParamsData,
  type BusyData,
  type ConflictData,
  type InvalidMutationData,
  type InvalidParamsData,
  type InvalidPhaseData,
  type MethodNotFoundData,
  type NotFoundData,
  type OwnershipData,
  type ParamsIssue,
  type PersistenceFailedData,
} from "../../protocol/errors.js";

export { ErrorCodes };

/** One `-32602` issue as it travels in `data.issues` (protocol/errors.ts `ParamsIssue`: `path` is keys and indices). */
export type WireIssue = ParamsIssue;

/** The generic message of every `-32603`; the details go to the log only (PROTOCOL.md section 3). */
export const INTERNAL_ERROR_MESSAGE = "An internal error occurred; the details are in the server log.";

/**
 * Renders an issue path as one readable string: `["tasks", 0, "dependsOn"]` → `tasks[0].dependsOn`, keys that are not
 * identifiers in brackets (`_meta["acp-orchestrator"]`), `[]` → `""`. Pure; used for messages, never for `data`.
 */
export function formatIssuePath(path: readonly (string | number)[]): string {
  let out = "";
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(segment)) out += out === "" ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

/**
 * Converts a failed zod parse into wire issues, one per zod issue, in zod's order.
 *
 * The `path` keeps the shape of protocol/errors.ts `ParamsIssue` (an array of keys and indices, `[]` for the params
 * object itself) so that `data` validates against `InvalidParamsData`; use `formatIssuePath` for a readable form.
 * Does NOT build the error. Pure.
 */
export function zodIssuesToWire(error: z.ZodError): WireIssue[] {
  return invalidParamsData(error).issues;
}

/**
 * `-32602 Invalid params` with `data: {issues}`; the message is one sentence naming the first problem, e.g.
 * "Invalid params: cwd must be an absolute path." Does NOT validate anything itself.
 */
export function invalidParams(issues: readonly WireIssue[]): ResponseError<InvalidParamsData> {
  const first = issues[0];
  let message = "Invalid params.";
  if (first !== undefined) {
    const where = formatIssuePath(first.path);
    const what = where === "" ? first.message : `${where} ${lowerFirst(first.message)}`;
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more problem${issues.length > 2 ? "s" : ""})` : "";
    message = `Invalid params: ${stripPeriod(what)}${more}.`;
  }
  return new ResponseError(ErrorCodes.InvalidParams, message, { issues: [...issues] });
}

/** `-32601 Method not found` with `data: {method}`, the method as the client spelled it. */
export function methodNotFound(method: string): ResponseError<MethodNotFoundData> {
  return new ResponseError(ErrorCodes.MethodNotFound, `The method ${JSON.stringify(method)} is not supported.`, {
    method,
  });
}

/** `-32600 Invalid request` with the given one-sentence message and no `data`. */
export function invalidRequest(message: string): ResponseError<void> {
  return new ResponseError<void>(ErrorCodes.InvalidRequest, message);
}

/** `-32600` for any request other than `initialize` before `initialize` succeeded (PROTOCOL.md section 3). */
export function notInitialized(): ResponseError<void> {
  return invalidRequest("The server is not initialized; send initialize first.");
}

/** `-32603 Internal error` with the generic message. The caller logs the cause; it never reaches the wire. */
export function internalError(): ResponseError<void> {
  return new ResponseError<void>(ErrorCodes.InternalError, INTERNAL_ERROR_MESSAGE);
}

/** `-32800 Request cancelled` (ACP): the request was aborted by `$/cancel_request` or `$/cancelRequest`. */
export function requestCancelled(): ResponseError<void> {
  return new ResponseError<void>(ErrorCodes.RequestCancelled, "The request was cancelled.");
}

/** `-32002 Not found` with `data: {kind, id}`. `message` overrides the default sentence. */
export function notFound(kind: NotFoundData["kind"], id: string, message?: string): ResponseError<NotFoundData> {
  return new ResponseError(
    ErrorCodes.NotFound,
    message ?? `No ${kindWord(kind)} with id ${JSON.stringify(id)} exists.`,
    {
      kind,
      id,
    },
  );
}

/** `-32010 Invalid phase` with `data: {phase, allowed}`. `message` overrides the default sentence. */
export function invalidPhase(
  phase: string,
  allowed: readonly string[],
  message?: string,
): ResponseError<InvalidPhaseData> {
  const fallback =
    allowed.length === 0
      ? `The operation is not allowed in phase ${phase}.`
      : `The operation is not allowed in phase ${phase}; it is allowed in: ${allowed.join(", ")}.`;
  return new ResponseError(ErrorCodes.InvalidPhase, message ?? fallback, { phase, allowed: [...allowed] });
}

/** `-32011 Busy` with `data: {productId}`: a leader turn for this product is already running. */
export function busy(productId: string, message?: string): ResponseError<BusyData> {
  return new ResponseError(
    ErrorCodes.Busy,
    message ?? `A leader turn for product ${productId} is already running; retry when it has finished.`,
    { productId },
  );
}

/** `-32012 Conflict` with `data: {owner?, revision?, expiresAt?, live?}` (absent fields are omitted, not `null`). */
export function conflict(details: ConflictData, message?: string): ResponseError<ConflictData> {
  const data: ConflictData = {};
  if (details.owner !== undefined) data.owner = details.owner;
  if (details.revision !== undefined) data.revision = details.revision;
  if (details.expiresAt !== undefined) data.expiresAt = details.expiresAt;
  if (details.live !== undefined) data.live = details.live;
  const fallback =
    data.owner !== undefined
      ? `The record is held by another owner (${data.owner}); reload it and retry.`
      : "The record was changed by someone else; reload it and retry.";
  return new ResponseError(ErrorCodes.Conflict, message ?? fallback, data);
}

/** `-32013 Persistence failed` with `data: {cause, operation}` (plain words, no stack); the message says which. */
export function persistenceFailed(
  cause: string,
  operation: "read" | "write",
  message?: string,
): ResponseError<PersistenceFailedData> {
  return new ResponseError(
    ErrorCodes.PersistenceFailed,
    message ??
      (operation === "read"
        ? `The run-state authority failed to read the stored state: ${stripPeriod(cause)}.`
        : `The run-state authority failed to persist the change: ${stripPeriod(cause)}.`),
    { cause, operation },
  );
}

/** `-32014 Invalid mutation` with `data: {index, reason}`; `index` is the 0-based position in the batch. */
export function invalidMutation(index: number, reason: string, message?: string): ResponseError<InvalidMutationData> {
  return new ResponseError(
    ErrorCodes.InvalidMutation,
    message ?? `Mutation ${index} was rejected: ${stripPeriod(reason)}; no mutation of the batch was applied.`,
    { index, reason },
  );
}

/** `-32016 Ownership` with `data: {expected, got}`: the given projectId/sessionId does not own the record. */
export function ownership(expected: string, got: string, message?: string): ResponseError<OwnershipData> {
  return new ResponseError(ErrorCodes.Ownership, message ?? `The record belongs to ${expected}, not to ${got}.`, {
    expected,
    got,
  });
}

function lowerFirst(text: string): string {
  // Keep acronyms ("URL is …") as they are; lower a capitalised first word ("Invalid input" → "invalid input").
  return /^[A-Z][a-z]/.test(text) ? text[0]!.toLowerCase() + text.slice(1) : text;
}

function stripPeriod(text: string): string {
  return text.endsWith(".") ? text.slice(0, -1) : text;
}

function kindWord(kind: NotFoundData["kind"]): string {
  return kind === "goalRun" ? "goal run" : kind;
}
