/**
 * The input half of the stdio transport (PROTOCOL.md section 1): reads newline-delimited JSON or LSP `Content-Length`
 * framed messages from a byte stream, answers malformed input (`-32700`, `-32600`) and hands only valid JSON-RPC 2.0
 * messages on, with input backpressure through a gate.
 *
 * Owns byte framing of the input only. Must never dispatch methods, never write to stdout itself (malformed input is
 * answered through the `reply` callback), and never let a malformed message reach the connection or end the stream.
 */
import { AbstractMessageReader, ErrorCodes } from "vscode-jsonrpc/node";
import type { DataCallback, Disposable, ResponseMessage } from "vscode-jsonrpc/node";
import type { Logger } from "../core/ports.js";
import { RESPONSE_HEAD_BYTES, checkEnvelope, responseIdOf } from "./envelope.js";
import type { Framing, FramingDecision } from "./framing-decision.js";

/** Bytes of undelivered input the reader buffers while it waits before it pauses its input stream (1 MiB). */
const PAUSE_BUFFERED_BYTES = 1024 * 1024;

/**
 * Most messages handed over in one event-loop turn (issue 16: a turn per message made a burst of pipelined requests
 * cost a turn each). The batch starts at one and doubles after each full turn up to this, and is never more than the
 * gate's `allowance`, so input backpressure holds whatever size the answers are.
 */
export const MAX_MESSAGES_PER_TURN = 64;

/** Longest `Content-Length` header block accepted before the framing is declared broken, in bytes. */
const MAX_HEADER_BYTES = 8 * 1024;

const CONTENT_LENGTH = "content-length:";
const LF = 0x0a;
const CR = 0x0d;

export interface ReaderOptions {
  maxMessageBytes: number;
  /**
   * Largest accepted response (an answer to one of the server's own requests), in bytes. A newline-delimited line
   * over it whose first bytes show a response (`responseIdOf`) is dropped unread, and the request it answers gets a
   * local `-32600` error instead. Default: `maxMessageBytes`.
   */
  maxResponseBytes?: number;
  logger: Logger | undefined;
  /** Sends an error response for malformed input. Never throws. */
  reply(message: ResponseMessage): void;
  /** Input backpressure; without it every buffered message is delivered at once. */
  gate?: InputGate;
}

/** When the reader must stop consuming input. */
export interface InputGate {
  /** True while no further input message may be delivered. Must turn false once `unblocked()` resolved. */
  blocked(): boolean;
  /** Resolves when delivery may go on. Never rejects. */
  unblocked(): Promise<void>;
  /**
   * How many more messages may be handed over before their answers are seen (at least 1 is always taken): the
   * output's headroom divided by the size of a typical answer. Without it, one message per turn.
   */
  allowance?(): number;
}

/**
 * Reads framed JSON-RPC messages from a byte stream (PROTOCOL.md section 1).
 *
 * Lines may arrive split across chunks or many per chunk; a trailing `\r` is stripped and blank lines are skipped.
 * Malformed input is answered (`-32700`, `-32600`) and dropped; an oversize message is answered `-32600` and skipped
 * without being buffered. With a gate (see `createFramedTransport`), delivers a batch of messages per event-loop turn
 * (one at first, doubling after each full turn up to `MAX_MESSAGES_PER_TURN`, never more than the gate's
 * `allowance`; back to one after the gate blocked) and, while the gate is blocked, delivers nothing and pauses the
 * input stream, going on in the turn after it opens; an end of input seen meanwhile is
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
  /** Set by `handleText` when a message went to the callback (counted against the turn's batch). */
  private delivered = false;
  /** Messages the next turn may hand over at most (before the gate's allowance); see `MAX_MESSAGES_PER_TURN`. */
  private perTurn = 1;
  /** Messages handed over in the current turn's batch. */
  private handedThisTurn = 0;
  /**
   * Answers to malformed input met after messages of the same batch: sent at the start of the next turn, after the
   * answers of those messages, so every answer keeps the input order a one-message-per-turn reader gave.
   */
  private deferredReplies: ResponseMessage[] = [];
  private disposed = false;
  /** Depth of `drain` calls running (see `dispatchEpoch`). */
  private delivering = 0;
  /** See `chunksRead`. */
  private chunks = 0;
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

  /**
   * True while this reader holds buffered input it has not handed over yet and is waiting for its next turn (or for
   * the gate) to go on: more messages, and so more answers, are coming. The writer holds its batch meanwhile.
   */
  get deliveryPending(): boolean {
    return this.waiting && this.queue.length > 0 && !this.disposed;
  }

  /** Stops reading and releases the event emitters. Does NOT close the input stream. */
  override dispose(): void {
    this.disposed = true;
    this.listening?.dispose();
    this.listening = undefined;
    this.queue.clear();
    super.dispose();
  }

  /**
   * How many chunks of input were read so far: it moves before any message of a new chunk is handed over, so a value
   * taken after a message was delivered is never older than that message's bytes (`RunStateAuthority.shareChangeMarks`).
   */
  get chunksRead(): number {
    return this.chunks;
  }

  /**
   * `chunksRead` while this reader is handing messages over (inside its delivery loop, handlers' synchronous parts
   * included), `NaN` at any other time. A store look shared by the holders of one value (`RunStateAuthority.
   * shareChangeMarks`) is then only ever taken while messages are being delivered, after every byte they came in was
   * read, and never reused by anything that runs outside the delivery (a timer, a later microtask): NaN equals nothing.
   */
  get dispatchEpoch(): number {
    return this.delivering > 0 ? this.chunks : Number.NaN;
  }

  private onData(chunk: Buffer): void {
    this.chunks += 1;
    if (this.ended || this.endPending || chunk.length === 0) return;
    this.queue.push(chunk);
    if (!this.waiting) this.pump();
    else if (this.queue.length >= PAUSE_BUFFERED_BYTES) this.pauseInput();
  }

  /** Delivers what is buffered until input runs out or delivery must wait; then acts on a pending end of input. */
  private pump(): void {
    if (this.disposed) return;
    this.sendDeferredReplies();
    try {
      this.drain();
    } catch (error) {
      // A bug in framing must not kill the process; drop what is buffered and keep reading.
      this.options.logger?.error({ err: error }, "Framing failed; buffered input dropped");
      this.queue.clear();
      this.scanned = 0;
    }
    if (this.waiting) return;
    // An answer to malformed input was held behind this batch's answers and no more input came: send it next turn.
    if (this.deferredReplies.length > 0) {
      this.wait(undefined, false);
      return;
    }
    if (this.endPending) this.finishEnd();
    else this.resumeInput();
  }

  /**
   * Stops delivery until `until` settles and then one more turn has begun (so answers already under way are written
   * before the next message is dispatched), pausing the input when asked to or when enough is buffered.
   */
  private wait(until: Promise<void> | undefined, pause: boolean): void {
    this.waiting = true;
    if (pause || this.queue.length >= PAUSE_BUFFERED_BYTES) this.pauseInput();
    const go = () => {
      this.waiting = false;
      this.pump();
    };
    const nextTurn = () => setImmediate(go);
    if (until === undefined) nextTurn();
    else until.then(nextTurn, nextTurn);
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
    this.sendDeferredReplies();
    this.handedThisTurn = 0;
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
   * gate is blocked (input paused until it opens), and after this turn's batch (until the next event-loop turn, so
   * the handlers' answers reach the writer's backlog before the gate is asked again).
   */
  private drain(): void {
    this.delivering += 1;
    try {
      this.deliver();
    } finally {
      this.delivering -= 1;
    }
  }

  /** `drain`'s loop. */
  private deliver(): void {
    const gate = this.options.gate;
    const batch = gate === undefined ? 0 : Math.max(1, Math.min(this.perTurn, gate.allowance?.() ?? 1));
    this.handedThisTurn = 0;
    for (;;) {
      if (gate !== undefined && this.queue.length > 0 && gate.blocked()) {
        this.perTurn = 1;
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
      if (gate === undefined) continue;
      if (this.delivered) this.handedThisTurn += 1;
      if (this.deferredReplies.length > 0 || this.handedThisTurn >= batch) {
        if (this.handedThisTurn >= batch) this.perTurn = Math.min(MAX_MESSAGES_PER_TURN, this.perTurn * 2);
        this.wait(undefined, false);
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
      const response = this.oversizeResponse(this.queue.length);
      if (response !== undefined || this.queue.length > this.options.maxMessageBytes) {
        if (response !== undefined) this.dropResponse(response);
        else this.replyOversize();
        this.queue.clear();
        this.scanned = 0;
        this.discardingLine = true;
      }
      return false;
    }
    this.scanned = 0;
    const response = this.oversizeResponse(end);
    if (response !== undefined) {
      this.queue.skip(end + 1);
      this.dropResponse(response);
      return true;
    }
    const line = this.queue.take(end);
    this.queue.skip(1);
    if (line.length > this.options.maxMessageBytes) this.replyOversize();
    else this.handleLine(line);
    return true;
  }

  /** The id of the response at the queue's head when it is `bytes` long and over `maxResponseBytes`, else undefined. */
  private oversizeResponse(bytes: number): string | number | undefined {
    const max = this.options.maxResponseBytes;
    if (max === undefined || bytes <= max) return undefined;
    return responseIdOf(this.queue.peek(Math.min(RESPONSE_HEAD_BYTES, this.queue.length)));
  }

  /** Hands on a local `-32600` answer for request `id` in place of its oversize response (issue 31). */
  private dropResponse(id: string | number): void {
    const max = this.options.maxResponseBytes ?? this.options.maxMessageBytes;
    this.options.logger?.warn({ id, maxResponseBytes: max }, "Oversize response dropped unread");
    const message = `The answer exceeds the ${Math.round(max / (1024 * 1024))} MiB the server accepts for an answer and was dropped unread.`;
    const error = { code: ErrorCodes.InvalidRequest, message, data: { maxResponseBytes: max } };
    this.delivered = true;
    this.callback?.({ jsonrpc: "2.0", id, error } as ResponseMessage);
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
    this.handleText(line.length > 0 && line[line.length - 1] === CR ? line.subarray(0, line.length - 1) : line);
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
    const response: ResponseMessage = { jsonrpc: "2.0", id, error: { code, message } };
    if (this.options.gate !== undefined && this.handedThisTurn > 0) this.deferredReplies.push(response);
    else this.options.reply(response);
  }

  private sendDeferredReplies(): void {
    if (this.deferredReplies.length === 0) return;
    for (const response of this.deferredReplies.splice(0)) this.options.reply(response);
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
  /** Bytes of `chunks[0]` already consumed (kept as an offset, not cut off: issue 16, request path). */
  private start = 0;
  length = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  byteAt(offset: number): number | undefined {
    offset += this.start;
    for (const chunk of this.chunks) {
      if (offset < chunk.length) return chunk[offset];
      offset -= chunk.length;
    }
    return undefined;
  }

  /** Absolute offset of the first `byte` at or after `from`, or -1. Skips whole chunks before `from`. */
  indexOf(byte: number, from: number): number {
    let base = -this.start;
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
    const start = this.start;
    if (first !== undefined && first.length - start >= n) return first.subarray(start, start + n);
    const parts: Buffer[] = [];
    let left = n;
    let skip = start;
    for (const chunk of this.chunks) {
      if (left === 0) break;
      const available = chunk.length - skip;
      const part = available <= left ? chunk.subarray(skip) : chunk.subarray(skip, skip + left);
      skip = 0;
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
      const available = first.length - this.start;
      if (available <= n) {
        this.chunks.shift();
        this.start = 0;
        n -= available;
      } else {
        this.start += n;
        n = 0;
      }
    }
  }

  clear(): void {
    this.chunks = [];
    this.start = 0;
    this.length = 0;
  }
}
