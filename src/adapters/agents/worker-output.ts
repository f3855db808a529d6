/**
 * What a worker's `session/update` stream becomes (DESIGN.md, Agents; issue 11, output and activity): the task's
 * text with separate agent messages kept apart, and one activity per tool call.
 *
 * Owns: message boundaries (a changed `messageId`, or a tool call between two messages, starts a new message after a
 * blank line), the tool calls seen so far (`toolCallId` → kind and title, for activities and for permission requests
 * that lack them), and one-line titles. Pure: no I/O.
 */

/** Longest activity title kept; longer ones are cut with an ellipsis. */
export const MAX_ACTIVITY_TITLE_CHARS = 200;

/** The first non-blank line of `title`, trimmed and cut to `MAX_ACTIVITY_TITLE_CHARS` ("…" marks a cut). Pure. */
export function oneLine(title: string): string {
  const lines = title.split(/\r?\n/).map((l) => l.trim());
  const first = lines.find((l) => l !== "") ?? "";
  const more = lines.filter((l) => l !== "").length > 1;
  if (first.length > MAX_ACTIVITY_TITLE_CHARS) return `${first.slice(0, MAX_ACTIVITY_TITLE_CHARS - 1)}…`;
  return more ? `${first} …` : first;
}

/**
 * Joins agent message chunks into one text. A chunk that starts a new message (its `messageId` differs from the
 * previous chunk's, or a tool call came in between) is preceded by a blank line, so separate messages are never glued
 * together. Chunks without a `messageId` continue the current message unless a tool call came in between.
 */
export class MessageJoiner {
  private lastMessageId: string | undefined;
  private toolSinceText = false;
  private tail = "";
  private any = false;

  /** Returns `chunk` with the separator it needs in front (`""`, `"\n"` or `"\n\n"`). */
  text(chunk: string, messageId: string | undefined): string {
    let prefix = "";
    const newMessage =
      this.any &&
      (this.toolSinceText ||
        (messageId !== undefined && this.lastMessageId !== undefined && messageId !== this.lastMessageId));
    if (newMessage) {
      const leading = /^\n*/.exec(chunk)?.[0].length ?? 0;
      const trailing = /\n*$/.exec(this.tail)?.[0].length ?? 0;
      prefix = "\n".repeat(Math.max(0, 2 - trailing - leading));
    }
    if (messageId !== undefined) this.lastMessageId = messageId;
    this.toolSinceText = false;
    const out = prefix + chunk;
    if (out !== "") {
      this.any = true;
      this.tail = (this.tail + out).slice(-2);
    }
    return out;
  }

  /** A tool call was reported: the next text starts a new message. */
  toolCall(): void {
    this.toolSinceText = true;
  }
}

/** What is known about one tool call of the worker. */
export interface KnownToolCall {
  kind: string | undefined;
  /** One-line title ("" when none was given yet). */
  title: string;
}

/**
 * The worker's tool calls by `toolCallId`. `record` returns the one-line title to announce when it is new or changed
 * (one activity per tool call, updated as its title changes), else `undefined`.
 */
export class ToolCallLedger {
  private readonly calls = new Map<string, KnownToolCall>();
  /** Bound on remembered tool calls (oldest forgotten first). */
  constructor(private readonly max = 10_000) {}

  record(toolCallId: string, title: string | null | undefined, kind: string | null | undefined): string | undefined {
    const known = this.calls.get(toolCallId);
    const line = title === null || title === undefined ? undefined : oneLine(title);
    if (known === undefined) {
      if (this.calls.size >= this.max) {
        const oldest = this.calls.keys().next().value;
        if (oldest !== undefined) this.calls.delete(oldest);
      }
      const entry: KnownToolCall = { kind: kind ?? undefined, title: line ?? "" };
      this.calls.set(toolCallId, entry);
      return entry.title !== "" ? entry.title : (entry.kind ?? "other");
    }
    if (kind !== null && kind !== undefined) known.kind = kind;
    if (line !== undefined && line !== "" && line !== known.title) {
      known.title = line;
      return line;
    }
    return undefined;
  }

  get(toolCallId: string): KnownToolCall | undefined {
    return this.calls.get(toolCallId);
  }
}

/**
 * A task attempt's output text, at most `max` UTF-16 code units (what is past the bound is dropped). Kept compact
 * while it grows: appending tens of thousands of small chunks to one string builds a rope of as many nodes (about
 * 60 bytes each on top of the text, and all of it long-lived), so chunks are collected in a list and joined into one
 * flat block every `BLOCK_CHUNKS` chunks; `text` joins the blocks once (issue 16, memory). Pure.
 */
export class OutputBuffer {
  private static readonly BLOCK_CHUNKS = 512;
  private readonly blocks: string[] = [];
  private chunks: string[] = [];
  private chars = 0;

  constructor(private readonly max: number) {}

  /** Appends `text`, cut at the bound. */
  append(text: string): void {
    if (this.chars >= this.max || text === "") return;
    const piece = text.length <= this.max - this.chars ? text : text.slice(0, this.max - this.chars);
    this.chunks.push(piece);
    this.chars += piece.length;
    if (this.chunks.length >= OutputBuffer.BLOCK_CHUNKS) {
      this.blocks.push(this.chunks.join(""));
      this.chunks = [];
    }
  }

  /** Code units kept so far (at most `max`). */
  get length(): number {
    return this.chars;
  }

  /** The whole text kept so far, as one flat string. */
  get text(): string {
    if (this.chunks.length > 0) {
      this.blocks.push(this.chunks.join(""));
      this.chunks = [];
    }
    if (this.blocks.length > 1) this.blocks.splice(0, this.blocks.length, this.blocks.join(""));
    return this.blocks[0] ?? "";
  }
}
