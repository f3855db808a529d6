/**
 * JSON-RPC 2.0 envelope validation of one parsed input message (PROTOCOL.md section 1: `-32600` for an object that
 * is not a valid JSON-RPC message, and for a batch).
 *
 * Owns the envelope rules only. Pure: never reads a stream, never looks at the method name.
 */
import { ErrorCodes } from "vscode-jsonrpc/node";
import type { Message, ResponseMessage } from "vscode-jsonrpc/node";

/** The outcome of checking one parsed JSON value against the JSON-RPC 2.0 envelope. */
export type EnvelopeCheck =
  | { ok: true; message: Message }
  | { ok: false; code: number; id: string | number | null; message: string };

/**
 * Checks that `value` (already JSON-parsed) is one valid JSON-RPC 2.0 request, notification or response.
 *
 * Returns the `-32600` to answer otherwise, with the message's id when it had a valid one (string or number), else
 * `null`. A batch (array) is refused. A request with `"id": null` is refused. Does NOT look at the method name. Pure.
 */
export function checkEnvelope(value: unknown): EnvelopeCheck {
  if (Array.isArray(value)) return invalid("Batch requests are not supported; send one JSON-RPC message at a time.");
  if (typeof value !== "object" || value === null) return invalid("The message is not a JSON-RPC 2.0 object.");
  const candidate = value as Record<string, unknown>;
  const hasId = Object.hasOwn(candidate, "id");
  const rawId = candidate["id"];
  const validId = typeof rawId === "string" || (typeof rawId === "number" && Number.isFinite(rawId)) ? rawId : null;
  if (hasId && validId === null && rawId !== null) return invalid("The id must be a string or a number.");
  if (candidate["jsonrpc"] !== "2.0") return invalid('The message must carry "jsonrpc": "2.0".', validId);

  if (Object.hasOwn(candidate, "method")) {
    if (typeof candidate["method"] !== "string") return invalid("The method must be a string.", validId);
    if (hasId && rawId === null) return invalid("A request id must be a string or a number, not null.");
    const params = candidate["params"];
    if (params !== undefined && (typeof params !== "object" || params === null)) {
      return invalid("The params must be an object or an array.", validId);
    }
    return { ok: true, message: candidate as unknown as Message };
  }

  const hasResult = Object.hasOwn(candidate, "result");
  const hasError = Object.hasOwn(candidate, "error");
  if (!hasId) return invalid("The message is neither a request, a notification nor a response.");
  if (hasResult === hasError) return invalid("A response must carry exactly one of result or error.", validId);
  if (hasError) {
    const error = candidate["error"] as Record<string, unknown> | null;
    if (
      typeof error !== "object" ||
      error === null ||
      !Number.isInteger(error["code"]) ||
      typeof error["message"] !== "string"
    ) {
      return invalid("A response error must be an object with an integer code and a string message.", validId);
    }
  }
  return { ok: true, message: candidate as unknown as ResponseMessage };
}

/** The `-32600` outcome (a function of the module, not a closure per call: issue 16, request path). */
function invalid(message: string, id: string | number | null = null): EnvelopeCheck {
  return { ok: false, code: ErrorCodes.InvalidRequest, id, message };
}

/** Bytes at the start of a message `responseIdOf` looks at. */
export const RESPONSE_HEAD_BYTES = 256;

/**
 * The id of a message whose first bytes show it is a response — `{"jsonrpc":"2.0","id":ID,"result"` or `"error"`,
 * the members in either order of `jsonrpc` and `id`, with optional whitespace — or `undefined` when the head does
 * not show that (then it may be anything). Reads at most `RESPONSE_HEAD_BYTES` bytes of `head`. Pure.
 */
export function responseIdOf(head: Buffer): string | number | undefined {
  const text = head.subarray(0, RESPONSE_HEAD_BYTES).toString("latin1");
  const version = String.raw`"jsonrpc"\s*:\s*"2\.0"`;
  const id = String.raw`"id"\s*:\s*(-?\d{1,15}|"[A-Za-z0-9_.:-]{0,100}")`;
  const pattern = new RegExp(
    String.raw`^\s*\{\s*(?:${version}\s*,\s*${id}|${id}\s*,\s*${version})\s*,\s*"(?:result|error)"\s*:`,
  );
  const m = pattern.exec(text);
  const raw = m?.[1] ?? m?.[2];
  if (raw === undefined) return undefined;
  return raw.startsWith('"') ? raw.slice(1, -1) : Number(raw);
}
