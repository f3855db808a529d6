/**
 * Reading a model-backed leader's text (issue 3 item 2): finding its one fenced JSON answer (`extractJsonBlock`) and
 * streaming the prose around it to the user (`ProseStream`), plus the wording of zod issues for repair prompts.
 *
 * Owns: fence recognition and prose filtering. Pure: no I/O, never throws on any text.
 */
import type { z } from "zod";

/** What `extractJsonBlock` found: no JSON, one JSON value, or problems to send back in a repair prompt. */
export type ExtractedJson =
  | { kind: "none"; prose: string }
  | { kind: "one"; value: unknown; prose: string }
  | { kind: "invalid"; errors: string[]; prose: string };

interface Fence {
  /** Line indices of the opening and closing fence lines (`close` = lines.length when unclosed). */
  open: number;
  close: number;
  lang: string;
  content: string;
}

const FENCE = /^\s*```\s*([^\s`]*)[^`]*$/u;
const CLOSING_FENCE = /^\s*```\s*$/u;

function findFences(text: string): { lines: string[]; fences: Fence[] } {
  const lines = text.replace(/\r\n?/gu, "\n").split("\n");
  const fences: Fence[] = [];
  for (let i = 0; i < lines.length; i++) {
    const match = FENCE.exec(lines[i] ?? "");
    if (match === null) continue;
    let close = i + 1;
    while (close < lines.length && !CLOSING_FENCE.test(lines[close] ?? "")) close++;
    fences.push({
      open: i,
      close,
      lang: (match[1] ?? "").toLowerCase(),
      content: lines.slice(i + 1, close).join("\n"),
    });
    i = close;
  }
  return { lines, fences };
}

function isJsonFence(fence: Fence): boolean {
  if (fence.lang.startsWith("json")) return true;
  return fence.lang === "" && fence.content.trimStart().startsWith("{");
}

function tidy(text: string): string {
  return text.replace(/\n{3,}/gu, "\n\n").trim();
}

/**
 * Finds the JSON answer in a leader's text: the fenced code blocks tagged `json` (or untagged ones whose content
 * starts with `{`). Exactly one must be present and hold a JSON object; with none, a text that is a bare JSON object
 * as a whole is accepted too. `prose` is the text without the JSON block(s). Pure; never throws.
 */
export function extractJsonBlock(text: string): ExtractedJson {
  const { lines, fences } = findFences(text);
  const json = fences.filter(isJsonFence);
  const hidden = new Set<number>();
  for (const f of json) for (let i = f.open; i <= f.close; i++) hidden.add(i);
  const prose = tidy(lines.filter((_, i) => !hidden.has(i)).join("\n"));
  if (json.length === 0) {
    const whole = text.trim();
    if (whole.startsWith("{") && whole.endsWith("}")) {
      const parsed = parseJsonObject(whole);
      if (parsed.ok) return { kind: "one", value: parsed.value, prose: "" };
    }
    return { kind: "none", prose };
  }
  if (json.length > 1) {
    return {
      kind: "invalid",
      errors: [`the answer holds ${json.length} fenced JSON blocks; send exactly one`],
      prose,
    };
  }
  const only = json[0] as Fence;
  if (only.close >= lines.length) {
    return {
      kind: "invalid",
      errors: ["the fenced JSON block is not closed with ``` (was the answer cut off?)"],
      prose,
    };
  }
  const parsed = parseJsonObject(only.content);
  if (!parsed.ok) return { kind: "invalid", errors: [parsed.error], prose };
  return { kind: "one", value: parsed.value, prose };
}

function parseJsonObject(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `the fenced block is not valid JSON: ${(error as Error).message}` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, error: "the fenced JSON block must hold a JSON object ({…}), not an array or a single value" };
  }
  return { ok: true, value };
}

/**
 * Streams a leader's text without its JSON blocks: the prose reaches the user (`product.planningDelta`) while the
 * fenced `json` (or untagged) blocks, which a program reads, are held back. Fences split across chunks are handled;
 * a line is held only while it could still be a fence line. Other fenced blocks (```ts …) pass through.
 */
export class ProseStream {
  private inFence = false;
  private hideFence = false;
  private line = "";
  private decided: "emit" | "hide" | undefined;
  private emitted = false;

  constructor(private readonly sink: (text: string) => void) {}

  /** True once any text was passed to the sink. */
  get hasEmitted(): boolean {
    return this.emitted;
  }

  /** Feeds one chunk of agent text; forwards what is prose. */
  push(chunk: string): void {
    let out = "";
    for (const ch of chunk.replace(/\r/gu, "")) {
      if (this.decided !== undefined) {
        if (this.decided === "emit") out += ch;
        if (ch === "\n") this.endLine();
        continue;
      }
      this.line += ch;
      if (ch === "\n") {
        out += this.decideWholeLine();
        this.endLine();
        continue;
      }
      const start = this.line.trimStart();
      // A line that is, or may still become, a fence line is held until it is complete.
      if (start === "" || start.startsWith("```") || "```".startsWith(start)) continue;
      this.decided = this.inFence && this.hideFence ? "hide" : "emit";
      if (this.decided === "emit") out += this.line;
    }
    this.send(out);
  }

  /** Forwards a held partial line at the end of a turn (unless it is a fence line or inside a hidden block), and resets. */
  end(): void {
    if (this.decided === undefined && this.line !== "" && !this.line.trimStart().startsWith("```")) {
      if (!(this.inFence && this.hideFence)) this.send(this.line);
    }
    this.line = "";
    this.decided = undefined;
    this.inFence = false;
    this.hideFence = false;
  }

  /** Decides a complete line that was held: a fence line opens or closes a block; other lines follow the block. */
  private decideWholeLine(): string {
    const start = this.line.trimStart();
    if (this.inFence) {
      const hidden = this.hideFence;
      if (start.trimEnd() === "```") this.inFence = false;
      return hidden ? "" : this.line;
    }
    if (!start.startsWith("```")) return this.line;
    const lang = (start.slice(3).trim().split(/\s+/u)[0] ?? "").toLowerCase();
    this.inFence = true;
    this.hideFence = lang === "" || lang.startsWith("json");
    return this.hideFence ? "" : this.line;
  }

  private endLine(): void {
    this.line = "";
    this.decided = undefined;
  }

  private send(text: string): void {
    if (text === "") return;
    this.emitted = true;
    this.sink(text);
  }
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out === "" ? "(top level)" : out;
}

/** One sentence per zod issue, e.g. `tasks[0].title: Too small: expected string to have >=1 characters`. */
export function issuesOf(error: z.ZodError, prefix = ""): string[] {
  return error.issues.slice(0, 20).map((issue) => `${prefix}${formatPath(issue.path)}: ${issue.message}`);
}
