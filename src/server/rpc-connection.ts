/**
 * The JSON-RPC dispatch layer: one vscode-jsonrpc connection, one star request handler and one star notification
 * handler that route every inbound message through the method table (PROTOCOL.md sections 1-3).
 *
 * Owns: method-name resolution (bare and `_`-prefixed extension spellings), the initialize gate, params validation
 * (`-32602`), error mapping (`ResponseError` passthrough, injected domain mapping, generic `-32603`), cancellation
 * (`$/cancelRequest` and ACP `$/cancel_request` → `AbortSignal`), outbound notifications and requests, and who hears
 * what (PROTOCOL.md section 2): extension traffic only once the client uses the extension, in its spelling. Must never know what a method does, never validate results at runtime, never
 * write to stdout other than through the writer, and never let a handler's exception text reach the wire.
 * Its pieces: inbound-request.ts (handler contexts, names), outbound-request.ts, extension-audience.ts, params-memo.ts.
 */
import type { Message } from "vscode-jsonrpc/node";
import {
  CancellationReceiverStrategy,
  ParameterStructures,
  ResponseError,
  createMessageConnection,
  type CancellationStrategy,
  type Disposable,
  type MessageConnection,
  type MessageReader,
  type MessageWriter,
  type NotificationMessage,
  type RequestMessage,
  type ResponseMessage,
} from "vscode-jsonrpc/node";
import type { MethodSpec, NotificationSpec } from "../../protocol/method-spec.js";
import type { Logger } from "../core/ports.js";
import type { Framing } from "./framing.js";
import type { OutboundRequestOptions } from "../adapters/persistence/host-requester.js";
import {
  InboundCancellation,
  isNotificationMessage,
  isRequestMessage,
  isThenable,
  wireNames,
  type ErrorMapper,
  type NotificationHandler,
  type RequestHandler,
} from "./inbound-request.js";
import { ExtensionAudience } from "./extension-audience.js";
import { InputHold } from "./input-hold.js";
import { checkInputBounds } from "./input-bounds.js";
import { ParamsMemo } from "./params-memo.js";
import { sendOutboundRequest } from "./outbound-request.js";
import { jsonRpcLogger } from "./logger.js";
import {
  internalError,
  invalidParams,
  methodNotFound,
  notInitialized,
  requestCancelled,
  zodIssuesToWire,
} from "./wire-errors.js";

export type {
  ErrorMapper,
  NotificationContext,
  NotificationHandler,
  RequestContext,
  RequestHandler,
} from "./inbound-request.js";

export interface RpcConnectionOptions {
  reader: MessageReader;
  /**
   * The writer; when it has `flush()` / `whenWritable()` (the framed writer does), `RpcConnection.flush()` /
   * `RpcConnection.whenWritable()` wait for it.
   */
  writer: MessageWriter & {
    flush?(): Promise<void>;
    whenWritable?(): Promise<void>;
    /** `write` with a callback instead of a promise (the framed writer's `post`); used for answers when present. */
    post?(message: Message, settle: (error?: Error) => void): void;
  };
  /** Every request the server serves. Wire names must be unique across bare and `_` spellings. */
  methods: readonly MethodSpec[];
  logger: Logger;
  /** The product layer's domain-error mapping; consulted for every non-`ResponseError` a handler throws. */
  mapError?: ErrorMapper;
  /**
   * The transport's framing (`createFramedTransport().framing`): decides how the server cancels its own requests
   * (PROTOCOL.md section 2: `$/cancelRequest {id}` on Content-Length, ACP `$/cancel_request {requestId}` otherwise).
   * Without it the connection counts as NDJSON.
   */
  framing?: () => Framing | undefined;
}

/** An extension request to a client that does not use the extension (PROTOCOL.md section 2). Never sent on the wire. */
export class ExtensionNotUsedError extends Error {
  override readonly name = "ExtensionNotUsedError";
  constructor(readonly method: string) {
    super(`The client does not use the acp-orchestrator extension, so ${method} is not sent to it.`);
  }
}

/** ACP's cancellation notification. */
const ACP_CANCEL_REQUEST = "$/cancel_request";
/** vscode-jsonrpc's (LSP's) cancellation notification. */
const LSP_CANCEL_REQUEST = "$/cancelRequest";

/**
 * Notifications left to vscode-jsonrpc's own handlers (progress of our outbound requests, trace lines); every other
 * inbound request and notification is dispatched by `RpcConnection` itself as it arrives.
 */
const LIBRARY_NOTIFICATIONS: ReadonlySet<string> = new Set(["$/progress", "$/logTrace"]);

/**
 * Passed as vscode-jsonrpc's `maxParallelism`: any number makes the library resolve an inbound response as it arrives
 * (in input order with the requests this connection dispatches) instead of queueing it for a later turn; this one
 * is never reached, as the library's queue only ever holds `LIBRARY_NOTIFICATIONS`.
 */
const LIBRARY_PARALLELISM = 1_000_000;

/** The one method allowed before the server is initialized. */
const INITIALIZE = "initialize";

/**
 * A JSON-RPC connection that serves a method table (PROTOCOL.md sections 1-3) over any vscode-jsonrpc reader/writer.
 *
 * Lifecycle: construct, `handle(...)` every method, `listen()`, later `dispose()`. Requests are served concurrently.
 * Inbound requests and notifications are dispatched by this class in the reader's callback, as each message arrives
 * and in input order (issue 16: vscode-jsonrpc's own queue dispatches one message per `setImmediate`, so a burst of
 * pipelined requests cost a turn each); vscode-jsonrpc keeps the outbound side, inbound responses, and the framing
 * and message types. A handler's answer is written after every message it wrote before returning.
 * Shutdown when the input ends (`onClose`): stop the product layer, `abortInFlight()`, `await idle()` (every request
 * received is answered), `await flush()`, exit. After the input ended, requests already received are still answered,
 * notifications are dropped and server → client requests reject with `ConnectionClosedError`.
 * Until `initialize` succeeded, every other request is answered `-32600` and client notifications are ignored.
 * Unknown requests get `-32601 {method}`, unknown notifications are ignored silently, params that fail their schema
 * get `-32602 {issues}`. Does NOT validate results, and does NOT abort running handlers when the input ends
 * (the owner decides what a closed input means; `dispose()` aborts them).
 */
export class RpcConnection {
  private readonly connection: MessageConnection;
  private readonly writer: RpcConnectionOptions["writer"];
  private readonly logger: Logger;
  private readonly mapError: ErrorMapper | undefined;
  /** Wire spelling (bare or `_`-prefixed) → spec. */
  private readonly requestSpecs = new Map<string, MethodSpec>();
  private readonly requestHandlers = new Map<string, RequestHandler>();
  private readonly notificationSpecs = new Map<string, NotificationSpec>();
  private readonly notificationHandlers = new Map<string, NotificationHandler>();
  /** Running inbound requests by id, for `$/cancelRequest`, ACP `$/cancel_request` and `dispose()`. */
  private readonly active = new Map<string | number, InboundCancellation>();
  private readonly anonymous = new Set<InboundCancellation>();
  /**
   * Set for one turn after the first `initialize` is dispatched on an uninitialized connection: messages that arrive
   * meanwhile (pipelined behind it in the same batch) wait for it, in order, so that an `initialize` answered within
   * its turn counts for them, as when vscode-jsonrpc dispatched one message per turn.
   */
  private initializeTurn: Promise<void> | undefined;
  private readonly inputHold = new InputHold(INITIALIZE); // see holdUntil
  private readonly params = new ParamsMemo(); // validates params (params-memo.ts)
  /** Inbound requests received whose answer the writer has not accepted yet (counted on arrival). */
  private unanswered = 0;
  /** Settles one answer (see `answer`): one function for every answer, so an answer allocates no callback. */
  private readonly answerSettled = (error?: Error): void => {
    if (error !== undefined) this.logger.debug({ err: error }, "Response not delivered");
    if (this.unanswered > 0) this.unanswered -= 1;
    if (this.unanswered === 0 && this.idleWaiters.length > 0) for (const wake of this.idleWaiters.splice(0)) wake();
  };
  private idleWaiters: (() => void)[] = [];
  /** Rejecters of outbound requests awaiting an answer, for when the input ends. */
  private readonly outbound = new Set<() => void>();
  /** Who hears extension traffic, in which spelling (PROTOCOL.md section 2). */
  private readonly audience = new ExtensionAudience();
  private initializedFlag = false;
  private disposed = false;
  /** Moved by every `abortInFlight()`, so that a handler running at that moment is aborted once it is tracked. */
  private abortEpoch = 0;

  /** Builds the connection and registers the dispatchers. Throws if two specs share a wire name. Does NOT listen. */
  constructor(options: RpcConnectionOptions) {
    this.writer = options.writer;
    this.logger = options.logger;
    this.mapError = options.mapError;
    for (const spec of options.methods) {
      for (const name of wireNames(spec)) {
        if (this.requestSpecs.has(name)) throw new Error(`Two methods share the wire name ${name}.`);
        this.requestSpecs.set(name, spec);
      }
    }
    const cancellationStrategy: CancellationStrategy = {
      // Inbound requests never reach the library (see `dispatchingReader`), so its receiver side is unused.
      receiver: CancellationReceiverStrategy.Message,
      sender: {
        // One dialect per framing (PROTOCOL.md section 2): vscode-jsonrpc hosts speak Content-Length and
        // `$/cancelRequest`; ACP clients speak NDJSON and `$/cancel_request`.
        sendCancellation: async (connection, id) => {
          if (options.framing?.() === "content-length") {
            await connection.sendNotification(LSP_CANCEL_REQUEST, ParameterStructures.byName, { id });
          } else {
            await connection.sendNotification(ACP_CANCEL_REQUEST, ParameterStructures.byName, { requestId: id });
          }
        },
        cleanup: () => {},
      },
    };
    this.connection = createMessageConnection(
      this.dispatchingReader(options.reader),
      options.writer,
      jsonRpcLogger(options.logger),
      { cancellationStrategy, maxParallelism: LIBRARY_PARALLELISM },
    );
    this.connection.onClose(() => {
      for (const close of [...this.outbound]) close();
    });
    this.connection.onError(([error, , count]) => {
      this.logger.warn({ err: error, count }, "JSON-RPC transport error");
    });
  }

  /** True once an `initialize` handler resolved successfully. */
  get initialized(): boolean {
    return this.initializedFlag;
  }

  /**
   * Registers the handler of one method of the table, by spec (typed) or by bare name. It serves every spelling of
   * the method. Throws if the method is not in the table or already has a handler.
   */
  handle<S extends MethodSpec>(spec: S, handler: RequestHandler<S>): void;
  handle(method: string, handler: RequestHandler): void;
  handle(specOrMethod: MethodSpec | string, handler: RequestHandler): void {
    const method = typeof specOrMethod === "string" ? specOrMethod : specOrMethod.method;
    const spec = this.requestSpecs.get(method);
    if (spec === undefined || spec.method !== method)
      throw new Error(`The method ${method} is not in the method table.`);
    if (this.requestHandlers.has(method)) throw new Error(`The method ${method} already has a handler.`);
    this.requestHandlers.set(method, handler);
  }

  /**
   * Registers a client → server notification (e.g. `session/cancel`) with its spec: served under its bare name and,
   * for an extension, with a leading `_`. Params failing the schema are logged and dropped (a notification cannot be
   * answered). Throws if the wire name is already registered.
   */
  handleNotification<S extends NotificationSpec>(spec: S, handler: NotificationHandler<S>): void {
    for (const name of wireNames(spec)) {
      if (this.notificationSpecs.has(name)) throw new Error(`The notification ${name} already has a handler.`);
    }
    for (const name of wireNames(spec)) this.notificationSpecs.set(name, spec);
    this.notificationHandlers.set(spec.method, handler as NotificationHandler);
  }

  /**
   * Records that the client declared the extension in `initialize` (`clientCapabilities._meta["acp-orchestrator"]`
   * present, PROTOCOL.md section 2): from now on extension traffic (every notification and server → client request
   * whose name does not start with `session/`, `fs/`, `terminal/`, `elicitation/` or `$/`) is sent to it, spelled
   * with a leading `_` when `prefix` is `"_"`, bare when it is `""`, and, when `prefix` is omitted, in the spelling
   * of the first extension method the client calls (bare until then). A later declaration replaces the prefix.
   */
  declareExtension(prefix?: "" | "_"): void {
    this.audience.declare(prefix);
  }

  /**
   * True once the client uses the extension: it declared it (`declareExtension`) or called an extension method.
   * Until then extension notifications are dropped and extension requests refused (PROTOCOL.md section 2).
   */
  get usesExtension(): boolean {
    return this.audience.used;
  }

  /** The spelling extension traffic is sent in now (PROTOCOL.md section 2). */
  get extensionPrefix(): "" | "_" {
    return this.audience.prefix;
  }

  /**
   * Sends a notification by its bare name, with the extension prefix applied. An extension notification on a
   * connection that does not use the extension is dropped (PROTOCOL.md section 2). Never rejects and never throws: a
   * closed or failed connection is logged (debug) and the notification dropped. Resolves once the writer accepted it.
   */
  notify(method: string, params?: object): Promise<void> {
    if (!this.audience.hears(method)) return Promise.resolve();
    const wire = this.audience.outboundName(method);
    try {
      const sent =
        params === undefined
          ? this.connection.sendNotification(wire)
          : this.connection.sendNotification(wire, ParameterStructures.byName, params);
      return sent.catch((error: unknown) => {
        this.logger.debug({ err: error, method: wire }, "Notification not delivered");
      });
    } catch (error) {
      this.logger.debug({ err: error, method: wire }, "Notification not delivered");
      return Promise.resolve();
    }
  }

  /**
   * Sends a server → client request (e.g. `session/request_permission`, `runState/put`) by its bare name, with the
   * extension prefix applied, and resolves with the client's `result` (unvalidated: the caller parses it).
   *
   * Rejects with the client's `ResponseError`, with `RequestTimeoutError` after `timeoutMs`, with the signal's reason
   * when `signal` aborts (a timeout or abort also cancels it at the client, in the framing's dialect), with
   * `ExtensionNotUsedError` for an extension request on a connection that does not use the extension (PROTOCOL.md
   * section 2; nothing is sent), or with a connection error when the connection is not listening, closed or disposed.
   * Requires `listen()` first.
   */
  request(method: string, params: object | undefined, options: OutboundRequestOptions = {}): Promise<unknown> {
    if (!this.audience.hears(method)) return Promise.reject(new ExtensionNotUsedError(method));
    const wire = this.audience.outboundName(method);
    return sendOutboundRequest(this.connection, wire, params, options, this.outbound);
  }

  /**
   * Aborts the signal of every running request handler, without closing anything: their answers are still written.
   * Used at shutdown so long requests (`session/prompt`) answer promptly.
   */
  abortInFlight(): void {
    this.abortEpoch += 1;
    for (const cancellation of [...this.active.values(), ...this.anonymous]) cancellation.abort();
  }

  /**
   * Resolves when every request received so far (including ones still queued for dispatch) has been answered and
   * its response accepted by the writer. Does NOT wait for outbound requests. Resolves at once after `dispose()`.
   */
  idle(): Promise<void> {
    if (this.unanswered === 0 || this.disposed) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** Registers `callback` for when the input ends or the output closes. Returns a disposable that unregisters it. */
  onClose(callback: () => void): Disposable {
    return this.connection.onClose(callback);
  }

  /** Holds inbound requests but a first `initialize` until `until` settles (input-hold.ts; before `listen()`). */
  holdUntil(until: Promise<unknown>): void {
    this.inputHold.holdUntil(until);
  }

  /** Starts reading. To be called once. Throws if the connection is closed, disposed or already listening. */
  listen(): void {
    this.connection.listen();
  }

  /**
   * Resolves once the writer's backlog of unsent bytes is below its limit (see `FramedMessageWriter.whenWritable`), at
   * once for a writer without one. Producers of notifications that cannot await each send (a streaming worker) wait
   * here before reading more, so a slow client holds them back instead of growing this process's memory.
   */
  whenWritable(): Promise<void> {
    return this.writer.whenWritable?.() ?? Promise.resolve();
  }

  /** Resolves when every message written so far was accepted by the output (see `FramedMessageWriter.flush`). */
  async flush(): Promise<void> {
    await this.writer.flush?.();
  }

  /**
   * Aborts every running handler's signal, rejects pending server → client requests, and stops reading and writing.
   * Does NOT close the underlying streams. Idempotent.
   */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.abortInFlight();
    this.active.clear();
    this.anonymous.clear();
    this.connection.dispose();
    for (const close of [...this.outbound]) close();
    this.unanswered = 0;
    for (const wake of this.idleWaiters.splice(0)) wake();
  }

  // -------------------------------------------------------------------------------------------------------------

  /**
   * Serves one inbound request as it arrives: runs `dispatchRequest` and writes its answer (a `ResponseError` as
   * `error`, anything else as `result`, `undefined` as `null`). Nothing is answered after `dispose()`.
   */
  private serveRequest(message: RequestMessage): void {
    const id = message.id;
    if (this.disposed) return;
    const outcome = this.dispatchRequest(message.method, message.params, id === null ? undefined : id);
    // A synchronous handler is answered in this turn (issue 16); responses are matched by id, not by order.
    if (isThenable(outcome)) this.answerLater(message, outcome);
    else this.answer(message, outcome);
  }

  /**
   * `answer` once `outcome` settles (it never rejects: see `dispatchRequest`). A method of its own so that the
   * synchronous path allocates no closure.
   */
  private answerLater(message: RequestMessage, outcome: PromiseLike<unknown>): void {
    void outcome.then((settled) => this.answer(message, settled));
  }

  /** Writes the response to `message`: a `ResponseError` as `error`, anything else as `result` (`undefined` as null). */
  private answer(message: RequestMessage, outcome: unknown): void {
    if (this.disposed) return;
    const id = message.id;
    const response: ResponseMessage =
      outcome instanceof ResponseErrorClass
        ? { jsonrpc: "2.0", id, error: (outcome as ResponseError<unknown>).toJson() }
        : { jsonrpc: "2.0", id, result: outcome === undefined ? null : (outcome as ResponseMessage["result"]) };
    const writer = this.writer;
    if (writer.post !== undefined) writer.post(response, this.answerSettled);
    else writer.write(response).then(() => this.answerSettled(), this.answerSettled);
  }

  /** Serves one inbound notification as it arrives; cancellations act on the running request they name. */
  private serveNotification(message: NotificationMessage): void {
    if (this.disposed) return;
    if (message.method === LSP_CANCEL_REQUEST) {
      const id = (message.params as { id?: unknown } | undefined)?.id;
      if (typeof id === "string" || typeof id === "number") this.active.get(id)?.abort();
      return;
    }
    void this.dispatchNotification(message.method, message.params);
  }

  /**
   * Runs the request's handler. Never throws and never rejects: every failure becomes the `ResponseError` to answer
   * with. Returns the outcome itself when it is known synchronously (a refusal, or a handler that returned a value),
   * else a promise of it.
   */
  private dispatchRequest(wireMethod: string, params: unknown, requestId: string | number | undefined): unknown {
    const spec = this.requestSpecs.get(wireMethod);
    if (!this.initializedFlag && spec?.method !== INITIALIZE) return notInitialized();
    if (spec === undefined) return methodNotFound(wireMethod);
    if (spec.extension) this.audience.noteCall(wireMethod);
    const handler = this.requestHandlers.get(spec.method);
    if (handler === undefined) {
      this.logger.warn({ method: spec.method }, "A declared method has no handler; answered -32601");
      return methodNotFound(wireMethod);
    }
    // Guarantee 14: structural bounds first, so no schema does work proportional to an oversized input.
    const outOfBounds = checkInputBounds(params);
    if (outOfBounds) return invalidParams([outOfBounds]);
    let parsed: ReturnType<typeof spec.params.safeParse>;
    try {
      parsed = this.params.parse(spec, params);
    } catch (error) {
      // e.g. an async refinement in a schema: a bug of the table, never the client's fault.
      this.logger.error({ err: error, method: spec.method }, "Params schema threw; answered -32603");
      return internalError();
    }
    if (!parsed.success) return invalidParams(zodIssuesToWire(parsed.error));

    // The handler's context is the cancellation itself: one object per request (issue 16, request path).
    const cancellation = new InboundCancellation(spec.method, requestId);
    // Kept abortable by id only once it is known to run on: a handler that answers synchronously cannot be reached by a
    // cancellation, which is handled in a later message (issue 16, request path). `abortInFlight()` called while the
    // handler ran is caught up with by its epoch.
    const epoch = this.abortEpoch;
    let result: unknown;
    try {
      result = handler(parsed.data, cancellation);
    } catch (error) {
      return this.toResponseError(error, spec.method, cancellation.aborted || epoch !== this.abortEpoch);
    }
    if (!isThenable(result)) return this.succeeded(cancellation, result);
    this.track(cancellation);
    if (epoch !== this.abortEpoch) cancellation.abort();
    return this.settleLater(cancellation, result);
  }

  /** A handler's success: `initialize` opens the gate; the request stops being abortable. Returns `value`. */
  private succeeded(cancellation: InboundCancellation, value: unknown): unknown {
    if (cancellation.method === INITIALIZE) this.initializedFlag = true;
    this.untrack(cancellation);
    return value;
  }

  /** The outcome of a handler that returned `result`, a thenable; never rejects. */
  private settleLater(cancellation: InboundCancellation, result: PromiseLike<unknown>): PromiseLike<unknown> {
    return result.then(
      (value) => this.succeeded(cancellation, value),
      (error: unknown) => {
        this.untrack(cancellation);
        return this.toResponseError(error, cancellation.method, cancellation.aborted);
      },
    );
  }

  private async dispatchNotification(wireMethod: string, params: unknown): Promise<void> {
    if (wireMethod === ACP_CANCEL_REQUEST) {
      const requestId = (params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof requestId === "string" || typeof requestId === "number") this.active.get(requestId)?.abort();
      return;
    }
    if (!this.initializedFlag) {
      this.logger.debug({ method: wireMethod }, "Notification before initialize ignored");
      return;
    }
    const spec = this.notificationSpecs.get(wireMethod);
    if (spec === undefined) {
      this.logger.debug({ method: wireMethod }, "Unknown notification ignored");
      return;
    }
    const outOfBounds = checkInputBounds(params);
    if (outOfBounds) {
      this.logger.warn({ method: wireMethod, issues: [outOfBounds] }, "Notification with oversized params dropped");
      return;
    }
    const parsed = this.params.parse(spec, params);
    if (!parsed.success) {
      this.logger.warn(
        { method: wireMethod, issues: zodIssuesToWire(parsed.error) },
        "Notification with invalid params dropped",
      );
      return;
    }
    try {
      await this.notificationHandlers.get(spec.method)?.(parsed.data, { method: spec.method });
    } catch (error) {
      this.logger.error({ err: error, method: spec.method }, "Notification handler failed");
    }
  }

  /** Keeps a running request abortable by id (see `untrack`). */
  private track(cancellation: InboundCancellation): void {
    const requestId = cancellation.requestId;
    if (requestId === undefined) this.anonymous.add(cancellation);
    else this.active.set(requestId, cancellation);
  }

  /** Forgets a request `track` kept, unless a later request with the same id took its place. */
  private untrack(cancellation: InboundCancellation): void {
    const requestId = cancellation.requestId;
    if (requestId === undefined) this.anonymous.delete(cancellation);
    else if (this.active.get(requestId) === cancellation) this.active.delete(requestId);
  }

  private toResponseError(error: unknown, method: string, aborted: boolean): ResponseError<unknown> {
    if (error instanceof ResponseError) return error as ResponseError<unknown>;
    try {
      const mapped = this.mapError?.(error);
      if (mapped !== undefined) return mapped;
    } catch (mappingError) {
      this.logger.error({ err: mappingError, method }, "The error mapper threw");
    }
    if (aborted) return requestCancelled();
    this.logger.error({ err: error, method }, "Request handler failed; answered -32603");
    return internalError();
  }

  /**
   * Wraps the reader so that inbound requests and notifications are dispatched here as they arrive; only responses
   * (and `LIBRARY_NOTIFICATIONS`) go on to vscode-jsonrpc.
   */
  private dispatchingReader(inner: MessageReader): MessageReader {
    return {
      get onError() {
        return inner.onError;
      },
      get onClose() {
        return inner.onClose;
      },
      get onPartialMessage() {
        return inner.onPartialMessage;
      },
      listen: (callback) => {
        const deliver = (message: Message): void => {
          const held = this.initializeTurn;
          if (held === undefined) {
            this.route(message, callback);
            return;
          }
          // Behind a first `initialize` dispatched this turn: in order, once its handler had the turn to itself.
          const next = held.then(() => this.route(message, callback));
          this.initializeTurn = next;
          void next.then(() => {
            if (this.initializeTurn === next) this.initializeTurn = undefined;
          });
        };
        return inner.listen((message) => {
          if (isRequestMessage(message)) this.unanswered += 1;
          this.inputHold.pass(message, deliver);
        });
      },
      dispose: () => inner.dispose(),
    };
  }

  /** Dispatches one inbound message now: requests and notifications here, the rest to vscode-jsonrpc. */
  private route(message: Message, callback: (message: Message) => void): void {
    if (isRequestMessage(message)) {
      this.serveRequest(message);
      if (message.method === INITIALIZE && !this.initializedFlag && this.initializeTurn === undefined) {
        this.initializeTurn = new Promise<void>((resolve) => setImmediate(resolve));
      }
    } else if (isNotificationMessage(message) && !LIBRARY_NOTIFICATIONS.has(message.method)) {
      this.serveNotification(message);
    } else callback(message);
  }
}

/**
 * vscode-jsonrpc's `ResponseError`, read once: the bundle reaches a CommonJS module's exports through a getter on every
 * use (scripts/bundle.ts), and `answer` asks for it on every request (issue 16, request path).
 */
const ResponseErrorClass = ResponseError;
