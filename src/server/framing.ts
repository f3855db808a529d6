/**
 * The stdio transport: byte framing and JSON-RPC 2.0 envelope validation on vscode-jsonrpc's reader/writer seam
 * (PROTOCOL.md section 1).
 *
 * Owns: newline-delimited JSON (default) and LSP `Content-Length` framing, detected once from the first bytes of the
 * input and then used for both directions; the `-32700` / `-32600` answers to input that is not a valid JSON-RPC
 * message; serialised, backpressure-aware writes. Must never dispatch methods, never log to stdout, and never let a
 * malformed message reach the connection or end the stream. Input backpressure: while the writer's backlog is above a
 * limit the reader stops delivering messages and pauses its input, so a client that never reads its answers cannot
 * grow this process's memory (the server's own notifications are not blocked, only reading).
 */
import type { Writable } from "node:stream";
import { AbstractMessageReader, AbstractMessageWriter, ErrorCodes } from "vscode-jsonrpc/node";
import type { DataCallback, Disposable, Message, MessageWriter, ResponseMessage } from "vscode-jsonrpc/node";
import type { Logger } from "../core/ports.js";
import { INTERNAL_ERROR_MESSAGE } from "./wire-errors.js";

/** The two framings of PROTOCOL.md section 1. */
export type Framing = "ndjson" | "content-length";

/** Default maximum size of one message body in bytes (64 MiB). */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** Default writer backlog, in bytes, above which the reader stops consuming input (8 MiB). */
export const DEFAULT_MAX_OUTPUT_BACKLOG_BYTES = 8 * 1024 * 1024;

/** Bytes of undelivered input the reader buffers while it waits before it pauses its input stream (1 MiB). */
const PAUSE_BUFFERED_BYTES = 1024 * 1024;

/** Longest `Content-Length` header block accepted before the framing is declared broken, in bytes. */
const MAX_HEADER_BYTES = 8 * 1024;

const CONTENT_LENGTH = "content-length:";
const LF = 0x0a;
const CR = 0x0d;

export interface FramedTransportOptions {
  /** `auto` (default) detects the framing from the first non-whitespace bytes; the others force it. */
  framing?: "auto" | Framing;
  /** Largest accepted message body in bytes; a bigger one is answered `-32600` and dropped. Default 64 MiB. */
  maxMessageBytes?: number;
  /** Where framing problems are logged (debug/warn). Optional. */
  logger?: Logger;
  /**
   * Writer backlog (`FramedMessageWriter.backlogBytes`) above which the reader stops delivering input messages and
   * pauses its input until the backlog is back at or below it, in bytes. Default 8 MiB.
   */
  maxOutputBacklogBytes?: number;
}

/** A reader and a writer sharing one framing decision. */
export interface FramedTransport {
  readonly reader: FramedMessageReader;
  readonly writer: FramedMessageWriter;
  /** The framing in use: fixed by the options, or detected from the input; `undefined` while nothing was read yet. */
  framing(): Framing | undefined;
}

/**
 * Builds the stdio transport over `input` and `output` (PROTOCOL.md section 1).
 *
 * The reader answers malformed input itself through the writer (`-32700`, `-32600`) and hands only valid JSON-RPC 2.0
 * messages to its callback. Until the framing is detected, writes use newline-delimited JSON. Input backpressure:
 * before each message the reader checks the writer's backlog; above `maxOutputBacklogBytes` it pauses `input` and
 * resumes when the writer has drained to the limit, and it hands over one message per event-loop turn so that a
 * handler's answer is queued before the next message is considered. Order is kept and nothing is dropped; writes
 * themselves (answers, notifications, malformed-input errors) are never blocked. Does NOT start reading: call
 * `reader.listen` (the connection does). Does NOT end or destroy either stream.
 */
export function createFramedTransport(
  input: NodeJS.ReadableStream,
  output: Writable,
  options: FramedTransportOptions = {},
): FramedTransport {
  const decision = new FramingDecision(
    options.framing === undefined || options.framing === "auto" ? undefined : options.framing,
  );
  const writer = new FramedMessageWriter(output, decision, options.logger);
  const backlogLimit = options.maxOutputBacklogBytes ?? DEFAULT_MAX_OUTPUT_BACKLOG_BYTES;
  const reader = new FramedMessageReader(input, decision, {
    maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    logger: options.logger,
    gate: {
      blocked: () => writer.backlogExceeds(backlogLimit),
      unblocked: () => writer.whenWritable(backlogLimit),
    },
    reply: (message) => {
      writer.write(message).catch((error: unknown) => {
        options.logger?.warn({ err: error }, "Could not write the error response to malformed input");
      });
    },
  });
  return { reader, writer, framing: () => decision.value };
}

/** The framing shared by a reader and its writer; set once. */
class FramingDecision {
  constructor(public value: Framing | undefined) {}
}

// ---------------------------------------------------------------------------------------------------------------
// Envelope validation

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
  const invalid = (message: string, id: string | number | null = null): EnvelopeCheck => ({
    ok: false,
    code: ErrorCodes.InvalidRequest,
    id,
    message,
  });
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

// ---------------------------------------------------------------------------------------------------------------
// Reader

interface ReaderOptions {
  maxMessageBytes: number;
  logger: Logger | undefined;
  /** Sends an error response for malformed input. Never throws. */
  reply(message: ResponseMessage): void;
  /** Input backpressure; without it every buffered message is delivered at once. */
  gate?: InputGate;
}

/** When the reader must stop consuming input. */
interface InputGate {
  /** True while no further input message may be delivered. Must turn false once `unblocked()` resolved. */
  blocked(): boolean;
  /** Resolves when delivery may go on. Never rejects. */
  unblocked(): Promise<void>;
}

/**
 * Reads framed JSON-RPC messages from a byte stream (PROTOCOL.md section 1).
 *
 * Lines may arrive split across chunks or many per chunk; a trailing `\r` is stripped and blank lines are skipped.
 * Malformed input is answered (`-32700`, `-32600`) and dropped; an oversize message is answered `-32600` and skipped
 * without being buffered. With a gate (see `createFramedTransport`), delivers at most one message per event-loop turn
 * and, while the gate is blocked, delivers nothing and pauses the input stream; an end of input seen meanwhile is
 * acted on only after every buffered message was delivered. Fires `onClose` when the input ends (a last unterminated
 * line is still delivered) and `onError` when the input stream errors. Does NOT close the input stream.
 */
export class FramedMessageReader extends AbstractMessageReader {
  private readonly queue = new ByteQueue();
  private mode: "detect" | Framing;
  private callback: DataCallback | undefined;
  private listening: Disposable | undefined;
  private ended = false;
  /** The input ended while messages were still waiting for the gate; `onClose` fires once they are delivered. */
  private endPending = false;
  /** True while delivery waits (for the gate, or for the next event-loop turn). */
  private waiting = false;
  /** True while this reader holds the input stream paused. */
  private inputPaused = false;
  /** Set by `handleText` when a message went to the callback (the cue to yield the event loop). */
  private delivered = false;
  private disposed = false;
  // ndjson state
  private scanned = 0;
  private discardingLine = false;
  // content-length state
  private bodyLength: number | undefined;
  private skipBytes = 0;
  private resyncing = false;
  private readonly decoder = new TextDecoder("utf-8", { fatal: true });

  /** Use `createFramedTransport`; the reader must share its framing decision with a writer. */
  constructor(
    private readonly input: NodeJS.ReadableStream,
    private readonly decision: FramingDecision,
    private readonly options: ReaderOptions,
  ) {
    super();
    this.mode = decision.value ?? "detect";
  }

  /**
   * Starts reading and delivers each valid message to `callback`, in input order. To be called at most once.
   * Returns a disposable that stops reading (it does NOT close the input).
   */
  listen(callback: DataCallback): Disposable {
    if (this.callback !== undefined) throw new Error("FramedMessageReader.listen may be called only once.");
    this.callback = callback;
    const onData = (chunk: Buffer | string) =>
      this.onData(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk);
    const onEnd = () => this.onEnd();
    const onError = (error: unknown) => this.fireError(error);
    this.input.on("data", onData);
    this.input.on("end", onEnd);
    this.input.on("close", onEnd);
    this.input.on("error", onError);
    this.listening = {
      dispose: () => {
        this.input.off("data", onData);
        this.input.off("end", onEnd);
        this.input.off("close", onEnd);
        this.input.off("error", onError);
      },
    };
    return this.listening;
  }

  /** Stops reading and releases the event emitters. Does NOT close the input stream. */
  override dispose(): void {
    this.disposed = true;
    this.listening?.dispose();
    this.listening = undefined;
    this.queue.clear();
    super.dispose();
  }

  private onData(chunk: Buffer): void {
    if (this.ended || this.endPending || chunk.length === 0) return;
    this.queue.push(chunk);
    if (!this.waiting) this.pump();
    else if (this.queue.length >= PAUSE_BUFFERED_BYTES) this.pauseInput();
  }

  /** Delivers what is buffered until input runs out or delivery must wait; then acts on a pending end of input. */
  private pump(): void {
    if (this.disposed) return;
    try {
      this.drain();
    } catch (error) {
      // A bug in framing must not kill the process; drop what is buffered and keep reading.
      this.options.logger?.error({ err: error }, "Framing failed; buffered input dropped");
      this.queue.clear();
      this.scanned = 0;
    }
    if (this.waiting) return;
    if (this.endPending) this.finishEnd();
    else this.resumeInput();
  }

  /** Stops delivery until `until` settles, pausing the input when asked to or when enough is buffered. */
  private wait(until: Promise<void>, pause: boolean): void {
    this.waiting = true;
    if (pause || this.queue.length >= PAUSE_BUFFERED_BYTES) this.pauseInput();
    const go = () => {
      this.waiting = false;
      this.pump();
    };
    until.then(go, go);
  }

  private pauseInput(): void {
    if (this.inputPaused || this.endPending) return;
    this.inputPaused = true;
    this.input.pause();
  }

  private resumeInput(): void {
    if (!this.inputPaused || this.disposed) return;
    this.inputPaused = false;
    this.input.resume();
  }

  private onEnd(): void {
    if (this.ended || this.endPending) return;
    this.endPending = true;
    if (!this.waiting) this.finishEnd();
  }

  private finishEnd(): void {
    if (this.ended) return;
    this.endPending = false;
    this.ended = true;
    if (this.queue.length > 0) {
      if (this.mode === "detect" || this.mode === "ndjson") {
        if (!this.discardingLine) this.handleLine(this.queue.take(this.queue.length));
      } else {
        this.options.logger?.warn({ buffered: this.queue.length }, "Input ended in the middle of a framed message");
      }
      this.queue.clear();
    }
    this.fireClose();
  }

  /**
   * Consumes complete messages from the queue until it holds none or delivery must wait: before each one while the
   * gate is blocked (input paused until it opens), and after each delivered message (until the next event-loop turn,
   * so the handler's answer reaches the writer's backlog before the gate is asked again).
   */
  private drain(): void {
    const gate = this.options.gate;
    for (;;) {
      if (gate !== undefined && this.queue.length > 0 && gate.blocked()) {
        this.wait(gate.unblocked(), true);
        return;
      }
      if (this.mode === "detect" && !this.detect()) return;
      this.delivered = false;
      if (this.mode === "ndjson") {
        if (!this.nextLine()) return;
      } else if (this.mode === "content-length") {
        if (!this.nextFramedMessage()) return;
      }
      if (gate !== undefined && this.delivered) {
        this.wait(new Promise<void>((resolve) => setImmediate(resolve)), false);
        return;
      }
    }
  }

  /** Decides the framing from the first non-whitespace bytes; false while undecidable. */
  private detect(): boolean {
    while (this.queue.length > 0 && isWhitespace(this.queue.byteAt(0))) this.queue.skip(1);
    if (this.queue.length === 0) return false;
    const n = Math.min(CONTENT_LENGTH.length, this.queue.length);
    const head = this.queue.peek(n).toString("latin1").toLowerCase();
    let framing: Framing;
    if (head !== CONTENT_LENGTH.slice(0, n)) framing = "ndjson";
    else if (n === CONTENT_LENGTH.length) framing = "content-length";
    else return false;
    this.mode = framing;
    this.decision.value ??= framing;
    this.options.logger?.debug({ framing }, "Framing detected");
    return true;
  }

  /** Handles one newline-terminated line; false when more input is needed. */
  private nextLine(): boolean {
    if (this.discardingLine) {
      const end = this.queue.indexOf(LF, 0);
      if (end < 0) {
        this.queue.clear();
        return false;
      }
      this.queue.skip(end + 1);
      this.discardingLine = false;
      return true;
    }
    const end = this.queue.indexOf(LF, this.scanned);
    if (end < 0) {
      this.scanned = this.queue.length;
      if (this.queue.length > this.options.maxMessageBytes) {
        this.replyOversize();
        this.queue.clear();
        this.scanned = 0;
        this.discardingLine = true;
      }
      return false;
    }
    this.scanned = 0;
    const line = this.queue.take(end);
    this.queue.skip(1);
    if (line.length > this.options.maxMessageBytes) this.replyOversize();
    else this.handleLine(line);
    return true;
  }

  /** Handles one `Content-Length` framed message; false when more input is needed. */
  private nextFramedMessage(): boolean {
    if (this.skipBytes > 0) {
      const n = Math.min(this.skipBytes, this.queue.length);
      this.queue.skip(n);
      this.skipBytes -= n;
      return this.skipBytes === 0;
    }
    if (this.resyncing) return this.resync();
    if (this.bodyLength === undefined) {
      while (this.queue.length > 0 && isWhitespace(this.queue.byteAt(0))) this.queue.skip(1);
      const head = this.queue.peek(Math.min(this.queue.length, MAX_HEADER_BYTES + 4)).toString("latin1");
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) {
        if (this.queue.length <= MAX_HEADER_BYTES) return false;
        this.replyBadHeader("The Content-Length header block is too long.");
        return true;
      }
      const length = parseContentLength(head.slice(0, end));
      if (length === undefined) {
        this.replyBadHeader("The message header has no valid Content-Length.");
        return true;
      }
      this.queue.skip(end + 4);
      if (length > this.options.maxMessageBytes) {
        this.replyOversize();
        this.skipBytes = length;
        return true;
      }
      this.bodyLength = length;
    }
    if (this.queue.length < this.bodyLength) return false;
    const body = this.queue.take(this.bodyLength);
    this.bodyLength = undefined;
    this.handleText(body);
    return true;
  }

  /** After a broken header: drops bytes up to the next `Content-Length:`; false when more input is needed. */
  private resync(): boolean {
    const text = this.queue.peek(this.queue.length).toString("latin1").toLowerCase();
    const at = text.indexOf(CONTENT_LENGTH);
    if (at < 0) {
      this.queue.skip(Math.max(0, this.queue.length - (CONTENT_LENGTH.length - 1)));
      return false;
    }
    this.queue.skip(at);
    this.resyncing = false;
    return true;
  }

  private handleLine(line: Buffer): void {
    const end = line.length > 0 && line[line.length - 1] === CR ? line.length - 1 : line.length;
    this.handleText(line.subarray(0, end));
  }

  private handleText(bytes: Buffer): void {
    let text: string;
    try {
      text = this.decoder.decode(bytes);
    } catch {
      this.reply(ErrorCodes.ParseError, null, "The message is not valid UTF-8.");
      return;
    }
    if (text.trim() === "") return;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      this.options.logger?.debug({ bytes: bytes.length }, "Input that is not JSON answered with -32700");
      this.reply(ErrorCodes.ParseError, null, "The message is not valid JSON; send one JSON-RPC 2.0 object per line.");
      return;
    }
    const check = checkEnvelope(value);
    if (!check.ok) {
      this.options.logger?.debug({ reason: check.message }, "Invalid JSON-RPC message answered with -32600");
      this.reply(check.code, check.id, check.message);
      return;
    }
    this.delivered = true;
    try {
      this.callback?.(check.message);
    } catch (error) {
      this.options.logger?.error({ err: error }, "The message callback threw");
    }
  }

  private replyOversize(): void {
    const mib = Math.round((this.options.maxMessageBytes / (1024 * 1024)) * 100) / 100;
    this.options.logger?.warn({ maxMessageBytes: this.options.maxMessageBytes }, "Oversize message dropped");
    this.reply(ErrorCodes.InvalidRequest, null, `The message exceeds the maximum size of ${mib} MiB and was dropped.`);
  }

  private replyBadHeader(message: string): void {
    this.options.logger?.warn({}, "Broken Content-Length framing; resynchronising");
    this.reply(ErrorCodes.ParseError, null, message);
    this.resyncing = true;
    // Skip the first byte so the resync does not find the broken header itself.
    this.queue.skip(Math.min(1, this.queue.length));
  }

  private reply(code: number, id: string | number | null, message: string): void {
    this.options.reply({ jsonrpc: "2.0", id, error: { code, message } });
  }
}

function isWhitespace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x09 || byte === LF || byte === CR;
}

/** Parses an LSP header block (without the final blank line); the Content-Length in bytes, or undefined. */
function parseContentLength(block: string): number | undefined {
  let length: number | undefined;
  for (const line of block.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon < 0) return undefined;
    if (line.slice(0, colon).trim().toLowerCase() !== "content-length") continue;
    const value = line.slice(colon + 1).trim();
    if (!/^\d{1,15}$/.test(value)) return undefined;
    length = Number(value);
  }
  return length;
}

/**
 * A FIFO of byte chunks that avoids copying: chunks are kept as received and only the bytes handed out are joined.
 * Offsets are relative to the first unconsumed byte.
 */
class ByteQueue {
  private chunks: Buffer[] = [];
  length = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  byteAt(offset: number): number | undefined {
    for (const chunk of this.chunks) {
      if (offset < chunk.length) return chunk[offset];
      offset -= chunk.length;
    }
    return undefined;
  }

  /** Absolute offset of the first `byte` at or after `from`, or -1. Skips whole chunks before `from`. */
  indexOf(byte: number, from: number): number {
    let base = 0;
    for (const chunk of this.chunks) {
      if (from < base + chunk.length) {
        const at = chunk.indexOf(byte, Math.max(0, from - base));
        if (at >= 0) return base + at;
      }
      base += chunk.length;
    }
    return -1;
  }

  /** The first `n` bytes without consuming them (`n` ≤ length). */
  peek(n: number): Buffer {
    const first = this.chunks[0];
    if (first !== undefined && first.length >= n) return first.subarray(0, n);
    const parts: Buffer[] = [];
    let left = n;
    for (const chunk of this.chunks) {
      if (left === 0) break;
      const part = chunk.length <= left ? chunk : chunk.subarray(0, left);
      parts.push(part);
      left -= part.length;
    }
    return Buffer.concat(parts, n - left);
  }

  /** Removes and returns the first `n` bytes (`n` ≤ length). */
  take(n: number): Buffer {
    const out = this.peek(n);
    this.skip(n);
    return out;
  }

  /** Drops the first `n` bytes (`n` ≤ length). */
  skip(n: number): void {
    this.length -= n;
    while (n > 0) {
      const first = this.chunks[0]!;
      if (first.length <= n) {
        this.chunks.shift();
        n -= first.length;
      } else {
        this.chunks[0] = first.subarray(n);
        n = 0;
      }
    }
  }

  clear(): void {
    this.chunks = [];
    this.length = 0;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Writer

/** Default backlog, in bytes, below which `whenWritable` resolves (see `FramedMessageWriter.whenWritable`). */
export const DEFAULT_WRITABLE_BACKLOG_BYTES = 256 * 1024;

/** A frame waiting to be handed to the output, with the callbacks of its `write` promise. */
interface QueuedFrame {
  frame: string;
  resolve: () => void;
  reject: (error: Error) => void;
}

/**
 * Writes JSON-RPC messages to a byte stream in the transport's framing (PROTOCOL.md section 1).
 *
 * Serialises compactly (one line, `\n`-terminated, never an embedded raw newline; U+2028/U+2029 escaped), or with a
 * `Content-Length` header once that framing was detected. Writes go out in call order. Frames queued in the same turn
 * of the event loop are handed to `output` together, joined into one chunk of at most the output's high-water mark
 * (one system call for many small notifications instead of one each; a frame larger than that goes alone). A write's
 * promise resolves once `output` accepted its bytes (immediately, or after `'drain'` when `output.write` returned
 * false), so callers that await writes never buffer unboundedly; callers that do not await (notifications) can ask
 * `whenWritable` before producing more. A response whose result cannot be serialised is replaced by a `-32603` for
 * the same id. Does NOT end or destroy `output`.
 */
export class FramedMessageWriter extends AbstractMessageWriter implements MessageWriter {
  /** Frames not yet handed to `output`, oldest first from `head`. */
  private queue: QueuedFrame[] = [];
  private head = 0;
  /** UTF-16 length of the frames in `queue` (a cheap bound of their bytes). */
  private queuedChars = 0;
  /** True while a send is scheduled, running, or waiting for `'drain'`. */
  private sending = false;
  private readonly idleWaiters: (() => void)[] = [];
  private readonly writableWaiters: { limit: number; resolve: () => void }[] = [];
  private failure: Error | undefined;
  private errorCount = 0;
  private readonly onOutputError = (error: Error) => {
    this.failure ??= error;
    this.fireError(error, undefined, ++this.errorCount);
    this.wakeWaiters();
  };
  private readonly onOutputClose = () => {
    this.failure ??= new Error("The output stream is closed.");
    this.fireClose();
    this.wakeWaiters();
  };

  /** Use `createFramedTransport`; the writer must share its framing decision with a reader. */
  constructor(
    private readonly output: Writable,
    private readonly decision: FramingDecision,
    private readonly logger: Logger | undefined,
  ) {
    super();
    output.on("error", this.onOutputError);
    output.on("close", this.onOutputClose);
  }

  /**
   * Queues `message`; resolves when its bytes were accepted by the output, rejects if the output failed or closed
   * or the message cannot be serialised. The message is serialised at call time (later mutation has no effect).
   */
  write(message: Message): Promise<void> {
    let frame: string;
    try {
      frame = this.frame(serialize(message));
    } catch (error) {
      const id = (message as Partial<ResponseMessage>).id;
      if (Object.hasOwn(message, "result") && id !== undefined) {
        this.logger?.error({ err: error, id }, "Response result could not be serialised; answered -32603");
        return this.write({
          jsonrpc: "2.0",
          id,
          error: {
            code: ErrorCodes.InternalError,
            message: INTERNAL_ERROR_MESSAGE,
          },
        } as ResponseMessage);
      }
      this.fireError(error, message, ++this.errorCount);
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ frame, resolve, reject });
      this.queuedChars += frame.length;
      if (!this.sending) {
        this.sending = true;
        // After the current turn's synchronous work and promise callbacks, so that its frames go out together.
        process.nextTick(() => this.send());
      }
    });
  }

  /**
   * Bytes written but not yet handed to the operating system: frames still queued here plus what `output` buffers.
   * (Queued frames are counted in UTF-16 code units, a close bound of their UTF-8 size for JSON.)
   */
  get backlogBytes(): number {
    return this.queuedChars + this.output.writableLength;
  }

  /**
   * True when `backlogBytes` is above `limit` and the output has not failed or closed: exactly when
   * `whenWritable(limit)` would wait. Used by the reader to stop consuming input (input backpressure).
   */
  backlogExceeds(limit: number): boolean {
    return this.failure === undefined && this.backlogBytes > limit;
  }

  /**
   * Resolves once `backlogBytes` is at most `limit` (default 256 KiB): at once when it already is, or when the output
   * failed or closed (then writes reject anyway). For producers that cannot await each write (notifications of a
   * streaming worker): waiting here before reading more input is what bounds memory when the client reads slowly.
   */
  whenWritable(limit = DEFAULT_WRITABLE_BACKLOG_BYTES): Promise<void> {
    if (this.failure !== undefined || this.backlogBytes <= limit) return Promise.resolve();
    return new Promise((resolve) => this.writableWaiters.push({ limit, resolve }));
  }

  /**
   * Resolves when every write queued so far has been accepted and `output`'s own buffer is empty (all bytes handed
   * to the OS, or consumed by an in-process reader). Never rejects; resolves early if the output fails or closes.
   * Use at shutdown before exiting.
   */
  async flush(): Promise<void> {
    if (this.sending && this.failure === undefined) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    const output = this.output;
    if (this.failure !== undefined || output.destroyed || output.writableEnded || output.writableLength === 0) return;
    await new Promise<void>((resolve) => {
      const finish = () => {
        output.off("close", finish);
        output.off("error", finish);
        resolve();
      };
      output.once("close", finish);
      output.once("error", finish);
      // A zero-length write calls back only after every earlier chunk was written out.
      output.write("", () => finish());
    });
  }

  /** Called by the connection when it ends. Does NOT end the output stream (the process owns stdout). */
  end(): void {}

  /** Releases the listeners on `output`. Does NOT close the output stream. */
  override dispose(): void {
    this.output.off("error", this.onOutputError);
    this.output.off("close", this.onOutputClose);
    super.dispose();
  }

  private frame(json: string): string {
    return this.decision.value === "content-length"
      ? `Content-Length: ${Buffer.byteLength(json, "utf8")}\r\n\r\n${json}`
      : `${json}\n`;
  }

  /**
   * Hands queued frames to `output`, a batch at a time (at least one frame, at most the output's high-water mark),
   * until the queue is empty or `output.write` returns false; then waits for `'drain'` and goes on. A batch's write
   * promises resolve when `output` accepted it; on a closed or failed output every queued frame is rejected.
   */
  private send(): void {
    const output = this.output;
    const limit = Math.max(1, output.writableHighWaterMark || 16 * 1024);
    while (this.head < this.queue.length) {
      if (this.failure === undefined && (output.destroyed || output.writableEnded)) {
        this.failure = new Error("The output stream is closed.");
      }
      if (this.failure !== undefined) {
        this.rejectQueued(this.failure);
        break;
      }
      const batch: QueuedFrame[] = [];
      let chars = 0;
      while (this.head < this.queue.length) {
        const next = this.queue[this.head] as QueuedFrame;
        if (batch.length > 0 && chars + next.frame.length > limit) break;
        batch.push(next);
        chars += next.frame.length;
        this.head += 1;
      }
      this.queuedChars -= chars;
      const text = batch.length === 1 ? (batch[0] as QueuedFrame).frame : batch.map((b) => b.frame).join("");
      let accepted: boolean;
      try {
        accepted = output.write(text, "utf8");
      } catch (error) {
        const failure = error instanceof Error ? error : new Error(String(error));
        for (const b of batch) b.reject(failure);
        continue;
      }
      if (!accepted) {
        this.awaitDrain(batch);
        return;
      }
      for (const b of batch) b.resolve();
      this.wakeWaiters();
    }
    this.queue = [];
    this.head = 0;
    this.queuedChars = 0;
    this.sending = false;
    this.wakeWaiters();
  }

  /** Waits until `output` drains (then resolves `batch` and sends on) or closes/fails (then rejects everything). */
  private awaitDrain(batch: QueuedFrame[]): void {
    const output = this.output;
    const cleanup = () => {
      output.off("drain", onDrain);
      output.off("close", onClose);
      output.off("error", onError);
    };
    const onDrain = () => {
      cleanup();
      for (const b of batch) b.resolve();
      this.wakeWaiters();
      this.send();
    };
    const onClose = () => {
      cleanup();
      const failure = this.failure ?? new Error("The output stream closed before the message was written.");
      for (const b of batch) b.reject(failure);
      this.rejectQueued(failure);
      this.queue = [];
      this.head = 0;
      this.queuedChars = 0;
      this.sending = false;
      this.wakeWaiters();
    };
    const onError = (error: Error) => {
      this.failure ??= error;
      onClose();
    };
    output.on("drain", onDrain);
    output.on("close", onClose);
    output.on("error", onError);
  }

  private rejectQueued(failure: Error): void {
    while (this.head < this.queue.length) (this.queue[this.head++] as QueuedFrame).reject(failure);
    this.queuedChars = 0;
  }

  /** Resolves `flush` waiters when idle and `whenWritable` waiters whose limit is met (all of them after a failure). */
  private wakeWaiters(): void {
    if (!this.sending || this.failure !== undefined) for (const w of this.idleWaiters.splice(0)) w();
    if (this.writableWaiters.length === 0) return;
    const backlog = this.backlogBytes;
    const failed = this.failure !== undefined;
    for (let i = this.writableWaiters.length - 1; i >= 0; i -= 1) {
      const w = this.writableWaiters[i] as { limit: number; resolve: () => void };
      if (failed || backlog <= w.limit) {
        this.writableWaiters.splice(i, 1);
        w.resolve();
      }
    }
  }
}

/** Compact JSON with U+2028/U+2029 escaped, so no line-splitting reader can break a message. Throws on BigInt/cycles. */
function serialize(message: Message): string {
  const json = JSON.stringify(message);
  if (typeof json !== "string") throw new TypeError("The message is not serialisable.");
  return json.replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"));
}
