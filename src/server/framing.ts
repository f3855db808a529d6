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
 *
 * The parts live beside this file: framing-decision.ts (the shared decision), envelope.ts (envelope validation),
 * framed-reader.ts (input) and framed-writer.ts (output). This file builds a transport from them.
 */
import type { Writable } from "node:stream";
import type { Logger } from "../core/ports.js";
import { FramingDecision, type Framing } from "./framing-decision.js";
import { FramedMessageReader } from "./framed-reader.js";
import { FramedMessageWriter } from "./framed-writer.js";

export type { Framing } from "./framing-decision.js";
export { checkEnvelope, type EnvelopeCheck } from "./envelope.js";
export { FramedMessageReader } from "./framed-reader.js";
export { DEFAULT_WRITABLE_BACKLOG_BYTES, FramedMessageWriter } from "./framed-writer.js";

/** Default maximum size of one message body in bytes (64 MiB). */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * Default maximum size of a response to one of the server's own requests (32 MiB): the largest is a host's
 * `runState/readEvents` page, which PROTOCOL.md section 7 bounds well below this.
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

/** Default writer backlog, in bytes, above which the reader stops consuming input (8 MiB). */
export const DEFAULT_MAX_OUTPUT_BACKLOG_BYTES = 8 * 1024 * 1024;

export interface FramedTransportOptions {
  /** `auto` (default) detects the framing from the first non-whitespace bytes; the others force it. */
  framing?: "auto" | Framing;
  /** Largest accepted message body in bytes; a bigger one is answered `-32600` and dropped. Default 64 MiB. */
  maxMessageBytes?: number;
  /**
   * Largest accepted response to one of the server's own requests, in bytes (newline-delimited framing); a bigger one
   * is dropped unread and its request fails with a local `-32600`. Default `DEFAULT_MAX_RESPONSE_BYTES`, never more
   * than `maxMessageBytes`.
   */
  maxResponseBytes?: number;
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
 * resumes when the writer has drained to the limit, and per event-loop turn it hands over no more messages than
 * the answers of which fit below the limit (the headroom over the size of a large recent answer, at most
 * `MAX_MESSAGES_PER_TURN`), so that their answers are queued before the next batch is considered. Order is kept and nothing is dropped; writes
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
    maxResponseBytes: Math.min(
      options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    ),
    logger: options.logger,
    gate: {
      blocked: () => writer.backlogExceeds(backlogLimit),
      unblocked: () => writer.whenWritable(backlogLimit),
      allowance: () => Math.floor((backlogLimit - writer.backlogBytes) / Math.max(1, writer.recentFrameChars)),
    },
    reply: (message) => {
      writer.write(message).catch((error: unknown) => {
        options.logger?.warn({ err: error }, "Could not write the error response to malformed input");
      });
    },
  });
  // A burst of pipelined requests is answered in a few writes, not one per request (issue 16, request overhead).
  writer.holdWhile(() => reader.deliveryPending);
  return { reader, writer, framing: () => decision.value };
}
