/**
 * A passive message splitter for the recorder and the replayer: turns the bytes of one direction of a JSON-RPC
 * stdio stream into messages, without changing or consuming the stream.
 *
 * Owns: newline-delimited JSON (trailing `\r` stripped, blank lines skipped) and LSP `Content-Length` framing,
 * detected once from the first non-whitespace bytes, as PROTOCOL.md section 1 describes. It must never write to any
 * stream and never throw on malformed input: a line that is not JSON is reported as `raw` with its parse error.
 */

/** One framed unit read from the stream. `value` is set when `text` parsed as JSON. */
export interface TappedMessage {
  /** The message text (a line without its newline, or a Content-Length body). */
  readonly text: string;
  /** The parsed JSON, or `undefined` when `text` is not JSON (see `parseError`). */
  readonly value: unknown;
  readonly parseError?: string;
}

const CONTENT_LENGTH = /^content-length:/i;
const NEWLINE = 0x0a;

/**
 * Splits a byte stream into messages as it arrives. Feed it with `push(chunk)` in arrival order and call `end()` when
 * the stream ends (a final line without a newline is then emitted). Never throws.
 */
export class MessageTap {
  private buffer: Buffer = Buffer.alloc(0);
  private framing: "ndjson" | "content-length" | undefined;

  constructor(private readonly onMessage: (message: TappedMessage) => void) {}

  /** Consumes one chunk; emits every complete message in it. */
  push(chunk: Buffer | string): void {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    this.buffer = this.buffer.length === 0 ? bytes : Buffer.concat([this.buffer, bytes]);
    this.drain();
  }

  /** Emits what is left (a last line without newline). Call once, when the stream ended. */
  end(): void {
    if (this.framing !== "content-length" && this.buffer.length > 0) {
      const rest = this.buffer.toString("utf8");
      this.buffer = Buffer.alloc(0);
      this.emitLine(rest);
    }
  }

  private drain(): void {
    for (;;) {
      if (this.framing === undefined) {
        const text = this.buffer.toString("utf8").trimStart();
        if (text === "") return;
        if (text.length < "content-length:".length && "content-length:".startsWith(text.toLowerCase())) return;
        this.framing = CONTENT_LENGTH.test(text) ? "content-length" : "ndjson";
      }
      if (this.framing === "ndjson") {
        const i = this.buffer.indexOf(NEWLINE);
        if (i < 0) return;
        const line = this.buffer.subarray(0, i).toString("utf8");
        this.buffer = this.buffer.subarray(i + 1);
        this.emitLine(line);
        continue;
      }
      const headerEnd = this.buffer.indexOf("\r\n\r\n");
      if (headerEnd < 0) return;
      const header = this.buffer.subarray(0, headerEnd).toString("ascii");
      const length = /content-length:\s*(\d+)/i.exec(header);
      if (!length) {
        // Not a valid header block: report it and skip past it so the tap keeps going.
        this.buffer = this.buffer.subarray(headerEnd + 4);
        this.onMessage({ text: header, value: undefined, parseError: "missing Content-Length header" });
        continue;
      }
      const size = Number(length[1]);
      if (this.buffer.length < headerEnd + 4 + size) return;
      const body = this.buffer.subarray(headerEnd + 4, headerEnd + 4 + size).toString("utf8");
      this.buffer = this.buffer.subarray(headerEnd + 4 + size);
      this.emitParsed(body);
    }
  }

  private emitLine(line: string): void {
    const text = line.endsWith("\r") ? line.slice(0, -1) : line;
    if (text.trim() === "") return;
    this.emitParsed(text);
  }

  private emitParsed(text: string): void {
    try {
      this.onMessage({ text, value: JSON.parse(text) as unknown });
    } catch (err) {
      this.onMessage({ text, value: undefined, parseError: err instanceof Error ? err.message : String(err) });
    }
  }
}
