/**
 * What one inbound request or notification is to its handler (the context types and the handler signatures typed
 * from a method spec), the cancellation of one inbound request, and the names rule of PROTOCOL.md section 2 (which
 * methods are extension traffic, and their two wire spellings), and the tests that tell an inbound message's kind. Split out of rpc-connection.ts, which dispatches
 * through these (issue 27: one concept per file, under 600 lines).
 *
 * Owns these declarations only: never dispatches, never writes to the wire.
 */
import { Message, type NotificationMessage, type RequestMessage, type ResponseError } from "vscode-jsonrpc/node";
import type { z } from "zod";
import type { MethodSpec, NotificationSpec } from "../../protocol/method-spec.js";

/** What a request handler gets besides its validated params. */
export interface RequestContext {
  /** Aborted by `$/cancelRequest`, ACP `$/cancel_request {requestId}`, `abortInFlight()` or `dispose()`. */
  readonly signal: AbortSignal;
  /** The bare method name (`product.plan`), whichever spelling the client used. */
  readonly method: string;
  /** The JSON-RPC id of the request. */
  readonly requestId: string | number | undefined;
}

/** What a notification handler gets besides its validated params. */
export interface NotificationContext {
  /** The bare method name, whichever spelling the client used. */
  readonly method: string;
}

/** A request handler typed from its spec. Its result is sent as is (not validated at runtime). */
export type RequestHandler<S extends MethodSpec = MethodSpec> = (
  params: z.infer<S["params"]>,
  ctx: RequestContext,
) => Promise<z.infer<S["result"]>> | z.infer<S["result"]>;

/** A client → server notification handler typed from its spec. */
export type NotificationHandler<S extends NotificationSpec = NotificationSpec> = (
  params: z.infer<S["params"]>,
  ctx: NotificationContext,
) => Promise<void> | void;

/** Maps a domain error thrown by a handler to a wire error; `undefined` means "not mine" (→ `-32603`). */
export type ErrorMapper = (error: unknown) => ResponseError<unknown> | undefined;

/**
 * The cancellation of one inbound request, which is also its handler's `RequestContext`: aborted by `$/cancelRequest`,
 * ACP `$/cancel_request`, `abortInFlight()` or `dispose()`. Its `AbortController` is made only when the handler first
 * reads `signal` (issue 16, request path: most handlers never do), already aborted if a cancellation came first, so a
 * handler sees the same thing whenever it looks.
 */
export class InboundCancellation implements RequestContext {
  private controller: AbortController | undefined;
  private abortedFlag = false;

  constructor(
    readonly method: string,
    readonly requestId: string | number | undefined,
  ) {}

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortedFlag) this.controller.abort();
    }
    return this.controller.signal;
  }

  /** True once the request was cancelled, whether or not its handler looked at `signal`. */
  get aborted(): boolean {
    return this.abortedFlag;
  }

  abort(): void {
    this.abortedFlag = true;
    this.controller?.abort();
  }
}

/** Method-name prefixes of standard ACP traffic, which never carries the extension prefix (PROTOCOL.md section 2). */
const STANDARD_PREFIXES = ["session/", "fs/", "terminal/", "elicitation/", "$/"] as const;

/** True for a method of the extension (anything not ACP: not `session/`, `fs/`, `terminal/`, `elicitation/`, `$/`). */
export function isExtensionTraffic(method: string): boolean {
  return !STANDARD_PREFIXES.some((prefix) => method.startsWith(prefix));
}

/** The wire spellings of a spec: the bare name, plus `_name` for an extension (PROTOCOL.md section 2). */
export function wireNames(spec: { method: string; extension: boolean }): string[] {
  return spec.extension ? [spec.method, `_${spec.method}`] : [spec.method];
}

/** True for a promise or any other object with a `then` method (what `await` would wait for). */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}

/**
 * vscode-jsonrpc's `Message.isRequest` and `Message.isNotification`, read once, because the bundle reaches a
 * CommonJS module's exports through a getter on every use (scripts/bundle.ts), and both run on every inbound message
 * (issue 16, request path).
 */
export const isRequestMessage: (message: Message) => message is RequestMessage = Message.isRequest;
export const isNotificationMessage: (message: Message) => message is NotificationMessage = Message.isNotification;
