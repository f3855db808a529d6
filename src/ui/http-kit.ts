/**
 * The dashboard's HTTP helpers (issue 15, issue 29): answers with the headers every route shares, the error a route
 * throws to answer a status, the loopback-name check (DNS rebinding), path segments decoded, and a JSON request body
 * read with its size checked before it is parsed (guarantee 14).
 *
 * Owns no route and no state.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { isIPv4 } from "node:net";

/** A route's answer other than 200: the status and one plain sentence, sent as `{error}`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const LOOPBACK_NAMES = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

/** An IPv4 literal in 127.0.0.0/8 (a name that merely starts with "127." is not one: DNS rebinding). */
function isLoopbackAddress(host: string): boolean {
  return isIPv4(host) && host.startsWith("127.");
}

/** True for a loopback host name or address (`localhost`, `::1`, 127.0.0.0/8). */
export function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.has(host) || isLoopbackAddress(host);
}

/** The Host header without its port. */
export function hostName(req: IncomingMessage): string {
  return (req.headers.host ?? "").replace(/:\d+$/, "");
}

/** A path segment decoded, or a 404 when its percent-encoding is malformed. */
export function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(404, `There is no dashboard route for the malformed path segment ${segment}.`);
  }
}

/** Answers `body` with `status` (no caching, no sniffing); a HEAD request gets the headers only. */
export function send(res: ServerResponse, status: number, type: string, body: string, head = false): void {
  res.writeHead(status, {
    "content-type": type,
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
  });
  res.end(head ? undefined : body);
}

/** Answers `value` as JSON. */
export function sendJson(res: ServerResponse, status: number, value: unknown, head = false): void {
  send(res, status, "application/json", JSON.stringify(value), head);
}

/**
 * Reads a request body of at most `maxBytes` bytes and parses it as JSON. Throws HttpError 413 when it is longer
 * (reading stops there), 415 when its content type is not `application/json`, 400 when it does not parse.
 */
export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const type = String(req.headers["content-type"] ?? "")
    .split(";")[0]
    ?.trim()
    .toLowerCase();
  if (type !== "application/json") throw new HttpError(415, "A dashboard request's body must be application/json.");
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > maxBytes) throw new HttpError(413, `A dashboard request's body is limited to ${maxBytes} bytes.`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new HttpError(413, `A dashboard request's body is limited to ${maxBytes} bytes.`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch {
    throw new HttpError(400, "A dashboard request's body is not valid JSON.");
  }
}
