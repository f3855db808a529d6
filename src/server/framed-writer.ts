/**
 * The output half of the stdio transport (PROTOCOL.md section 1): serialises JSON-RPC messages in the transport's
 * framing, in call order, batching the frames of one event-loop turn into one write, and measures its backlog for
 * backpressure.
 *
 * Owns output framing and write ordering only. Must never end or destroy the output stream, and never write anything
 * but whole frames.
 */
import type { Writable } from "node:stream";
import { AbstractMessageWriter, ErrorCodes } from "vscode-jsonrpc/node";
import type { Message, MessageWriter, ResponseMessage } from "vscode-jsonrpc/node";
import type { Logger } from "../core/ports.js";
import type { FramingDecision } from "./framing-decision.js";
import { JsonText, serializeJson } from "./json-text.js";
import { INTERNAL_ERROR_MESSAGE } from "./wire-errors.js";

/** Default backlog, in bytes, below which `whenWritable` resolves (see `FramedMessageWriter.whenWritable`). */
export const DEFAULT_WRITABLE_BACKLOG_BYTES = 256 * 1024;

/**
 * Most event-loop turns a batch is held while more answers are coming (see `FramedMessageWriter.holdWhile`): bounds
 * the delay of a frame to a few turns whatever the predicate says.
 */
const MAX_HOLD_TURNS = 16;

/** Written frames kept at the front of the queue before they are dropped from it (see `releaseWritten`). */
const RELEASE_AFTER_FRAMES = 256;

/**
 * A frame waiting to be handed to the output, with the callbacks of its `write` promise. A frame is `frame` alone, or,
 * for a response whose result is a `JsonText`, `frame` (everything before the result), the result's UTF-8 `body`, and
 * `tail` (what closes the response).
 */
interface QueuedFrame {
  frame: string;
  /** The result's UTF-8 bytes, in pieces (`JsonText.chunks`). */
  body: readonly Buffer[] | undefined;
  tail: string;
  /** `frame.length + body.length + tail.length`: UTF-16 code units and bytes, a bound of the frame's bytes. */
  size: number;
  /** Called once: without an error when the output accepted the frame, with one when it never will. */
  settle: (error?: Error) => void;
}

/** The placeholder `settle` of a frame being made. */
function unsettled(): void {}

/** What closes a spliced response (`QueuedFrame.tail`), per framing. */
const SPLICED_TAIL_NDJSON = "}\n";
const SPLICED_TAIL_FRAMED = "}";

/**
 * Writes JSON-RPC messages to a byte stream in the transport's framing (PROTOCOL.md section 1).
 *
 * Serialises compactly (one line, `\n`-terminated, never an embedded raw newline; U+2028/U+2029 escaped), or with a
 * `Content-Length` header once that framing was detected. Writes go out in call order. Frames queued in the same turn
 * of the event loop are handed to `output` together, joined into one chunk of at most the output's high-water mark
 * (one system call for many small notifications instead of one each; a frame larger than that goes alone). While
 * `holdWhile`'s predicate says more answers are coming (the reader still has input messages to hand over in a
 * later turn), the batch is held for up to `MAX_HOLD_TURNS` further turns or until it reaches the high-water mark, so a
 * burst of pipelined requests is answered in a few writes instead of one per request. A write's
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
  /** True while more frames are about to be written (see `holdWhile`); unset: never hold. */
  private hold: (() => boolean) | undefined;
  /** Consecutive turns the current batch was held. */
  private holds = 0;
  /** See `recentFrameChars`. */
  private recentFrame = 0;
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
    return new Promise<void>((resolve, reject) => {
      this.post(message, (error) => (error === undefined ? resolve() : reject(error)));
    });
  }

  /**
   * `write` without a promise: queues `message` and calls `settle` once, without an argument when its bytes were
   * accepted by the output, with the error when the output failed or closed or the message cannot be serialised (a
   * response whose result cannot be serialised is replaced by a `-32603` for the same id, as with `write`). `settle`
   * may be called before `post` returns. For the answers of a connection, which need no promise each (issue 16,
   * request path).
   */
  post(message: Message, settle: (error?: Error) => void): void {
    let queued: QueuedFrame;
    try {
      queued = this.frame(message);
    } catch (error) {
      const id = (message as Partial<ResponseMessage>).id;
      if (Object.hasOwn(message, "result") && id !== undefined) {
        this.logger?.error({ err: error, id }, "Response result could not be serialised; answered -32603");
        this.post(
          {
            jsonrpc: "2.0",
            id,
            error: { code: ErrorCodes.InternalError, message: INTERNAL_ERROR_MESSAGE },
          } as ResponseMessage,
          settle,
        );
        return;
      }
      this.fireError(error, message, ++this.errorCount);
      settle(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    queued.settle = settle;
    const size = queued.size;
    // A slowly decaying maximum: one large frame counts for the next few dozen.
    this.recentFrame = Math.max(size, this.recentFrame - (this.recentFrame >> 4));
    this.queue.push(queued);
    this.queuedChars += size;
    if (!this.sending) {
      this.sending = true;
      // After the current turn's synchronous work and promise callbacks, so that its frames go out together.
      process.nextTick(() => this.send());
    }
  }

  /**
   * Bytes written but not yet handed to the operating system: frames still queued here plus what `output` buffers.
   * (Queued frames are counted in UTF-16 code units, a close bound of their UTF-8 size for JSON.)
   */
  get backlogBytes(): number {
    return this.queuedChars + this.output.writableLength;
  }

  /**
   * The size of a large recent frame, in UTF-16 code units: the largest one written, decaying by a sixteenth with
   * each later frame. The reader's gate divides the backlog headroom by it (how many more answers fit). 0 before
   * the first write.
   */
  get recentFrameChars(): number {
    return this.recentFrame;
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
    if (this.sending && this.failure === undefined)
      await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
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

  /**
   * Lets the writer hold a batch for a later turn while `more()` is true (the reader calls it with "I still have
   * input messages to deliver", whose answers will follow): at most `MAX_HOLD_TURNS` turns in a row, never past the
   * output's high-water mark, never after the output failed. Order, promises and backpressure are unchanged; a
   * single request with nothing behind it is written in the same turn as before. Replaces an earlier predicate.
   */
  holdWhile(more: () => boolean): void {
    this.hold = more;
  }

  /** Called by the connection when it ends. Does NOT end the output stream (the process owns stdout). */
  end(): void {}

  /** Releases the listeners on `output`. Does NOT close the output stream. */
  override dispose(): void {
    this.output.off("error", this.onOutputError);
    this.output.off("close", this.onOutputClose);
    super.dispose();
  }

  /**
   * The frame of `message` in the transport's framing. A response whose `result` is a `JsonText` (json-text.ts) is
   * spliced: its result's bytes are written verbatim between the response's opening and closing, in the member order
   * every response has, without encoding the text again. Throws on BigInt/cycles.
   */
  private frame(message: Message): QueuedFrame {
    const framed = this.decision.value === "content-length";
    const result = (message as Partial<ResponseMessage>).result;
    if (result instanceof JsonText) {
      const head = `{"jsonrpc":"2.0","id":${serializeJson((message as ResponseMessage).id)},"result":`;
      const body = result.chunks;
      let bytes = 0;
      for (const chunk of body) bytes += chunk.length;
      const tail = framed ? SPLICED_TAIL_FRAMED : SPLICED_TAIL_NDJSON;
      const frame = framed
        ? `Content-Length: ${Buffer.byteLength(head, "utf8") + bytes + tail.length}\r\n\r\n${head}`
        : head;
      return { frame, body, tail, size: frame.length + bytes + tail.length, settle: unsettled };
    }
    const json = serializeJson(message);
    const frame = framed ? `Content-Length: ${Buffer.byteLength(json, "utf8")}\r\n\r\n${json}` : `${json}\n`;
    return { frame, body: undefined, tail: "", size: frame.length, settle: unsettled };
  }

  /**
   * Hands queued frames to `output`, a batch at a time (at least one frame, at most the output's high-water mark),
   * until the queue is empty or `output.write` returns false; then waits for `'drain'` and goes on. A batch's write
   * promises resolve when `output` accepted it; on a closed or failed output every queued frame is rejected.
   */
  private send(): void {
    const output = this.output;
    const limit = Math.max(1, output.writableHighWaterMark || 16 * 1024);
    if (this.holds < MAX_HOLD_TURNS && this.queuedChars < limit && this.failure === undefined && this.hold?.()) {
      this.holds += 1;
      setImmediate(() => this.send());
      return;
    }
    this.holds = 0;
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
      let spliced = false;
      while (this.head < this.queue.length) {
        const next = this.queue[this.head] as QueuedFrame;
        if (batch.length > 0 && chars + next.size > limit) break;
        batch.push(next);
        chars += next.size;
        if (next.body !== undefined) spliced = true;
        this.head += 1;
      }
      this.queuedChars -= chars;
      let accepted: boolean;
      try {
        if (spliced) accepted = writePieces(output, assemble(batch));
        else accepted = output.write(batch.length === 1 ? (batch[0] as QueuedFrame).frame : joinFrames(batch), "utf8");
      } catch (error) {
        const failure = error instanceof Error ? error : new Error(String(error));
        for (const b of batch) b.settle(failure);
        continue;
      }
      if (!accepted) {
        this.releaseWritten();
        this.awaitDrain(batch);
        return;
      }
      for (const b of batch) b.settle();
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
      for (const b of batch) b.settle();
      this.wakeWaiters();
      this.send();
    };
    const onClose = () => {
      cleanup();
      const failure = this.failure ?? new Error("The output stream closed before the message was written.");
      for (const b of batch) b.settle(failure);
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

  /**
   * Drops the frames already handed to `output` from the front of `queue`. Under a client that reads slowly the queue
   * may never run empty (new frames arrive while the output is behind), so without this every frame written since it
   * last did stayed referenced, with its promise callbacks: memory growing with the stream's length (issue 16).
   * Amortised O(1) per frame: only once the written part is at least as long as what is left.
   */
  private releaseWritten(): void {
    if (this.head < RELEASE_AFTER_FRAMES || this.head < this.queue.length - this.head) return;
    this.queue = this.queue.slice(this.head);
    this.head = 0;
  }

  private rejectQueued(failure: Error): void {
    while (this.head < this.queue.length) (this.queue[this.head++] as QueuedFrame).settle(failure);
    this.queuedChars = 0;
  }

  /** Resolves `flush` waiters when idle and `whenWritable` waiters whose limit is met (all of them after a failure). */
  private wakeWaiters(): void {
    if ((!this.sending || this.failure !== undefined) && this.idleWaiters.length > 0)
      for (const w of this.idleWaiters.splice(0)) w();
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

/** The text of a batch of frames that are all text. */
function joinFrames(batch: readonly QueuedFrame[]): string {
  let text = "";
  for (const b of batch) text += b.frame;
  return text;
}

/** Bodies' pieces at least this large are written as they are; smaller ones are copied together with the frames. */
const PIECE_BYTES = 64 * 1024;

/**
 * The bytes of a batch of frames, some of them spliced (`QueuedFrame.body`), in order: one buffer, or for a large
 * body (issue 32: a 22 MB `product.list`) its large pieces as they are between buffers of the rest, so its bytes are
 * never copied into one more buffer.
 */
function assemble(batch: readonly QueuedFrame[]): Buffer[] {
  const pieces: Buffer[] = [];
  let small: (string | Buffer)[] = [];
  const flush = (): void => {
    if (small.length === 0) return;
    let bytes = 0;
    for (const s of small) bytes += typeof s === "string" ? Buffer.byteLength(s, "utf8") : s.length;
    const out = Buffer.allocUnsafe(bytes);
    let at = 0;
    for (const s of small) at += typeof s === "string" ? out.write(s, at, "utf8") : s.copy(out, at);
    pieces.push(out);
    small = [];
  };
  for (const b of batch) {
    small.push(b.frame);
    if (b.body === undefined) continue;
    for (const chunk of b.body) {
      if (chunk.length < PIECE_BYTES) small.push(chunk);
      else {
        flush();
        pieces.push(chunk);
      }
    }
    small.push(b.tail);
  }
  flush();
  return pieces;
}

/** Writes `pieces` in order (corked: one system call where the output can write several); `output.write`'s answer. */
function writePieces(output: Writable, pieces: readonly Buffer[]): boolean {
  if (pieces.length === 1) return output.write(pieces[0] as Buffer);
  output.cork();
  let accepted = true;
  try {
    for (const piece of pieces) accepted = output.write(piece);
  } finally {
    output.uncork();
  }
  return accepted;
}
