/**
 * The transcript format (protocol/TRANSCRIPTS.md): JSON Lines, one line per message with its direction, plus the
 * pattern operators that `recv` lines may use and `send` lines may reference.
 *
 * Owns: the zod schema of every line, the operator grammar (`$any`, `$type`, `$regex`, `$capture`, `$ref`,
 * `$template`, `$literal`, `$absent`, `$exact`), parsing a file into validated lines with `FILE:LINE:` errors, the
 * static checks (a `send` line uses only `$ref`/`$template`/`$literal`; every `$ref` names something captured on an
 * earlier line), and serialising lines back to JSONL. It must never run a process, touch the filesystem or match
 * messages (matcher.ts does that).
 */
import * as z from "zod";
import { lazySchema } from "../../protocol/lazy-schema.js";

/** Names every replay defines before the first line: the fresh workspace directory of the transcript. */
export const PREDEFINED_NAMES: readonly string[] = ["workspace"];

/** A JSON value as it appears in a transcript line. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Placeholder types accepted by `{"$type": …}`. */
export const PLACEHOLDER_TYPES = [
  "string",
  "number",
  "integer",
  "boolean",
  "object",
  "array",
  "null",
  "iso-date",
  "uuid",
] as const;
export type PlaceholderType = (typeof PLACEHOLDER_TYPES)[number];

/** Every operator key. An object with any key starting with `$` must be exactly one well-formed operator. */
export const OPERATOR_KEYS = [
  "$any",
  "$absent",
  "$type",
  "$regex",
  "$flags",
  "$capture",
  "$ref",
  "$template",
  "$literal",
  "$exact",
] as const;

/** Operators that a `send` line may use (they resolve to concrete values before the line is written). */
const SEND_OPERATORS = new Set(["$ref", "$template", "$literal"]);

/** A capture/reference name: starts with a letter, then letters, digits or `_` (also a valid regex group name). */
export const NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_]*$/;

/** `${name}` occurrences in `$template` and `$regex` sources. */
export const INTERPOLATION = /\$\{([A-Za-z][A-Za-z0-9_]*)\}/g;

const JsonValue: z.ZodType<Json> = lazySchema(
  () =>
    z.lazy(() =>
      z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(JsonValue), z.record(z.string(), JsonValue)]),
    ),
  "JsonValue",
);

/** The optional first line: what the transcript is about. */
export const HeaderLine = lazySchema(
  () =>
    z
      .object({
        transcript: z
          .object({
            version: z.literal(1),
            title: z.string().min(1),
            description: z.string().optional(),
          })
          .strict(),
      })
      .strict(),
  "HeaderLine",
);

/** A free-text note; ignored by the replayer. */
export const CommentLine = lazySchema(() => z.object({ comment: z.string() }).strict(), "CommentLine");

/** A JSON value written by the client (patterns resolved first). Arrays are allowed: a batch is a valid test input. */
export const SendMessageLine = lazySchema(
  () =>
    z
      .object({
        dir: z.literal("send"),
        msg: z.union([z.record(z.string(), JsonValue), z.array(JsonValue)]),
      })
      .strict(),
  "SendMessageLine",
);

/** Bytes written verbatim by the client, plus a newline: for input that is not JSON at all. */
export const SendRawLine = lazySchema(
  () => z.object({ dir: z.literal("send"), raw: z.string() }).strict(),
  "SendRawLine",
);

/** A message the server must send: a partial-object pattern, with an optional timeout and ordering constraint. */
export const RecvLine = lazySchema(
  () =>
    z
      .object({
        dir: z.literal("recv"),
        msg: z.record(z.string(), JsonValue),
        /** How long to wait for a fitting message, in milliseconds (default: the replayer's, 10 000). */
        timeoutMs: z.number().int().positive().max(600_000).optional(),
        /** The message must have arrived after the one matched by the nearest earlier `ordered` line. */
        ordered: z.boolean().optional(),
      })
      .strict(),
  "RecvLine",
);

export type HeaderLine = z.infer<typeof HeaderLine>;
export type CommentLine = z.infer<typeof CommentLine>;
export type SendMessageLine = z.infer<typeof SendMessageLine>;
export type SendRawLine = z.infer<typeof SendRawLine>;
export type RecvLine = z.infer<typeof RecvLine>;
export type TranscriptLine = HeaderLine | CommentLine | SendMessageLine | SendRawLine | RecvLine;

/** A validated line with its 1-based line number in the file. */
export type NumberedLine =
  | { line: number; kind: "header"; value: HeaderLine }
  | { line: number; kind: "comment"; value: CommentLine }
  | { line: number; kind: "send"; value: SendMessageLine }
  | { line: number; kind: "raw"; value: SendRawLine }
  | { line: number; kind: "recv"; value: RecvLine };

/** A parsed, validated transcript. */
export interface Transcript {
  /** Where it came from (a path, or a label for in-memory transcripts). */
  readonly source: string;
  readonly title: string | undefined;
  readonly lines: readonly NumberedLine[];
}

/** A transcript that does not parse or validate; `problems` are `SOURCE:LINE: message` strings, one per problem. */
export class TranscriptFormatError extends Error {
  override readonly name = "TranscriptFormatError";
  constructor(
    readonly source: string,
    readonly problems: readonly string[],
  ) {
    super(`${source} is not a valid transcript:\n  ${problems.join("\n  ")}`);
  }
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else out += out === "" ? String(segment) : `.${String(segment)}`;
  }
  return out === "" ? "(line)" : out;
}

/** A dotted path for messages: `msg.params.nodes[0].id`. */
export function joinPath(base: string, key: string | number): string {
  if (typeof key === "number") return `${base}[${key}]`;
  return base === "" ? key : `${base}.${key}`;
}

function isPlainObject(value: unknown): value is Record<string, Json> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** True when `value` is an object with at least one key starting with `$` (an operator, well-formed or not). */
export function isOperator(value: unknown): boolean {
  return isPlainObject(value) && Object.keys(value).some((k) => k.startsWith("$"));
}

/**
 * Checks one operator object and returns what is wrong with it (empty when well-formed). Allowed shapes:
 * `{$any: true}`, `{$absent: true}`, `{$type: T}`, `{$regex: S, $flags?: F}`, `{$capture: N, $type?: T}`,
 * `{$capture: N, $regex: S, $flags?: F}`, `{$ref: N}`, `{$template: S}`, `{$literal: X}`, `{$exact: {...}}`.
 */
export function operatorProblems(op: Record<string, Json>): string[] {
  const keys = Object.keys(op);
  const unknown = keys.filter((k) => !(OPERATOR_KEYS as readonly string[]).includes(k));
  if (unknown.length > 0) {
    return [
      `unknown operator key ${unknown.join(", ")} (operators: ${OPERATOR_KEYS.join(", ")}; use $literal for a literal $ key)`,
    ];
  }
  const has = (k: string) => Object.hasOwn(op, k);
  const only = (...allowed: string[]) => keys.every((k) => allowed.includes(k));
  const problems: string[] = [];
  const checkRegex = () => {
    if (typeof op.$regex !== "string") return problems.push("$regex must be a string");
    if (has("$flags") && (typeof op.$flags !== "string" || !/^[imsu]*$/.test(op.$flags))) {
      return problems.push("$flags must be a string of i, m, s, u");
    }
    try {
      new RegExp(op.$regex.replace(INTERPOLATION, "x"), typeof op.$flags === "string" ? op.$flags : "");
    } catch (err) {
      problems.push(`$regex does not compile: ${err instanceof Error ? err.message : String(err)}`);
    }
    return 0;
  };
  const checkType = () => {
    if (!(PLACEHOLDER_TYPES as readonly string[]).includes(op.$type as string)) {
      problems.push(`$type must be one of ${PLACEHOLDER_TYPES.join(", ")}`);
    }
  };
  if (has("$any")) {
    if (!only("$any") || op.$any !== true) problems.push('write {"$any": true} alone');
  } else if (has("$absent")) {
    if (!only("$absent") || op.$absent !== true) problems.push('write {"$absent": true} alone');
  } else if (has("$capture")) {
    if (!NAME_PATTERN.test(String(op.$capture)) || typeof op.$capture !== "string") {
      problems.push("$capture must be a name: a letter, then letters, digits or _");
    }
    if (!only("$capture", "$type", "$regex", "$flags") || (has("$type") && has("$regex"))) {
      problems.push("$capture may be combined with $type or with $regex (and $flags), not both, nothing else");
    }
    if (has("$type")) checkType();
    if (has("$regex")) checkRegex();
    if (has("$flags") && !has("$regex")) problems.push("$flags needs $regex");
  } else if (has("$regex")) {
    if (!only("$regex", "$flags")) problems.push("$regex may only be combined with $flags (or $capture)");
    checkRegex();
  } else if (has("$type")) {
    if (!only("$type")) problems.push("$type may only be combined with $capture");
    checkType();
  } else if (has("$ref")) {
    if (!only("$ref") || typeof op.$ref !== "string" || !NAME_PATTERN.test(op.$ref)) {
      problems.push('write {"$ref": "name"} alone');
    }
  } else if (has("$template")) {
    if (!only("$template") || typeof op.$template !== "string")
      problems.push('write {"$template": "text ${name}"} alone');
  } else if (has("$literal")) {
    if (!only("$literal")) problems.push("$literal must be alone");
  } else if (has("$exact")) {
    if (!only("$exact") || !isPlainObject(op.$exact)) problems.push("$exact must be alone and hold an object pattern");
  } else {
    problems.push("$flags needs $regex");
  }
  return problems;
}

/** Names a regex source binds through named groups `(?<name>…)`. */
export function regexGroupNames(source: string): string[] {
  return [...source.matchAll(/\(\?<([A-Za-z][A-Za-z0-9_]*)>/g)].map((m) => m[1]!);
}

/** Names that `${name}` interpolations in `text` refer to. */
export function interpolatedNames(text: string): string[] {
  return [...text.matchAll(INTERPOLATION)].map((m) => m[1]!);
}

/**
 * Walks a pattern (or a send message) and reports operator problems, operators not allowed in `send` lines,
 * references to names not yet bound, and the names this pattern binds (added to `bound` in traversal order, so a
 * later part of the same pattern may refer to an earlier capture). Pure apart from mutating `bound`.
 */
function checkPattern(
  value: Json,
  path: string,
  direction: "send" | "recv",
  bound: Set<string>,
  problems: string[],
): void {
  if (Array.isArray(value)) {
    value.forEach((v, i) => checkPattern(v, joinPath(path, i), direction, bound, problems));
    return;
  }
  if (!isPlainObject(value)) return;
  if (!isOperator(value)) {
    for (const [k, v] of Object.entries(value)) checkPattern(v, joinPath(path, k), direction, bound, problems);
    return;
  }
  const op = value;
  const opProblems = operatorProblems(op);
  if (opProblems.length > 0) {
    for (const p of opProblems) problems.push(`${path}: ${p}`);
    return;
  }
  const opKey = Object.keys(value).find((k) => k !== "$flags" && k !== "$type") ?? "$type";
  const keyForSend = Object.keys(value).find((k) => !SEND_OPERATORS.has(k));
  if (direction === "send" && keyForSend !== undefined) {
    problems.push(`${path}: ${keyForSend} is for recv lines; a send line may only use $ref, $template and $literal`);
    return;
  }
  const needs = (name: string, how: string) => {
    if (!bound.has(name)) problems.push(`${path}: ${how} "${name}" is not captured on an earlier line`);
  };
  if (opKey === "$ref") needs(String(value.$ref), "$ref");
  if (opKey === "$template") for (const n of interpolatedNames(String(value.$template))) needs(n, "${…} in $template");
  if (typeof value.$regex === "string") {
    for (const n of interpolatedNames(value.$regex)) needs(n, "${…} in $regex");
    for (const n of regexGroupNames(value.$regex)) bound.add(n);
  }
  if (opKey === "$capture") bound.add(String(value.$capture));
  if (opKey === "$exact") checkPattern(value.$exact as Json, path, direction, bound, problems);
}

function classify(value: unknown): { kind: NumberedLine["kind"]; schema: z.ZodType } | string {
  if (!isPlainObject(value)) return "a line must be a JSON object";
  if (Object.hasOwn(value, "transcript")) return { kind: "header", schema: HeaderLine };
  if (Object.hasOwn(value, "comment")) return { kind: "comment", schema: CommentLine };
  if (value.dir === "send") {
    return Object.hasOwn(value, "raw")
      ? { kind: "raw", schema: SendRawLine }
      : { kind: "send", schema: SendMessageLine };
  }
  if (value.dir === "recv") return { kind: "recv", schema: RecvLine };
  return 'a line is {"dir": "send"|"recv", ...}, {"comment": ...} or a first-line {"transcript": ...} header';
}

/**
 * Parses and validates transcript text (JSON Lines; blank lines and a trailing `\r` are ignored).
 *
 * Collects every problem before throwing one `TranscriptFormatError` whose `problems` read `SOURCE:LINE: what`.
 * Checks: each line is JSON and fits its zod schema; a header appears only on the first line; operators are
 * well-formed; `send` lines use only `$ref`/`$template`/`$literal`; every referenced name was captured on an earlier
 * line (or is predefined: `workspace`); the transcript has at least one `send` or `recv` line. Does NOT read files.
 */
export function parseTranscript(text: string, source: string): Transcript {
  const problems: string[] = [];
  const lines: NumberedLine[] = [];
  const bound = new Set<string>(PREDEFINED_NAMES);
  const rows = text.split("\n");
  let title: string | undefined;
  let seenContent = false;
  rows.forEach((row, index) => {
    const lineNo = index + 1;
    const content = row.endsWith("\r") ? row.slice(0, -1) : row;
    if (content.trim() === "") return;
    const first = !seenContent;
    seenContent = true;
    let value: unknown;
    try {
      value = JSON.parse(content);
    } catch (err) {
      problems.push(`${source}:${lineNo}: not JSON (${err instanceof Error ? err.message : String(err)})`);
      return;
    }
    const kind = classify(value);
    if (typeof kind !== "string" && kind.kind === "header" && !first) {
      problems.push(`${source}:${lineNo}: the {"transcript": …} header must be the first line`);
    }
    if (typeof kind === "string") {
      problems.push(`${source}:${lineNo}: ${kind}`);
      return;
    }
    const parsed = kind.schema.safeParse(value);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        problems.push(`${source}:${lineNo}: ${formatPath(issue.path)}: ${issue.message}`);
      }
      return;
    }
    if (kind.kind === "header") title = (parsed.data as HeaderLine).transcript.title;
    if (kind.kind === "send" || kind.kind === "recv") {
      const msg = (parsed.data as SendMessageLine | RecvLine).msg as Json;
      const lineProblems: string[] = [];
      checkPattern(msg, "msg", kind.kind, bound, lineProblems);
      for (const p of lineProblems) problems.push(`${source}:${lineNo}: ${p}`);
    }
    lines.push({ line: lineNo, kind: kind.kind, value: parsed.data } as NumberedLine);
  });
  if (problems.length === 0 && !lines.some((l) => l.kind === "send" || l.kind === "raw" || l.kind === "recv")) {
    problems.push(`${source}: the transcript has no send or recv line`);
  }
  if (problems.length > 0) throw new TranscriptFormatError(source, problems);
  return { source, title, lines };
}

/** Serialises lines as JSONL (one compact JSON object per line, trailing newline). Pure. */
export function formatTranscript(lines: readonly TranscriptLine[]): string {
  return lines.map((l) => JSON.stringify(l)).join("\n") + "\n";
}

/**
 * The names a pattern binds (`$capture`, regex named groups) and the names it uses (`$ref`, `${name}` in `$template`
 * and `$regex`), in traversal order. Does not validate the pattern. Pure.
 */
export function namesIn(pattern: Json): { captures: string[]; refs: string[] } {
  const captures: string[] = [];
  const refs: string[] = [];
  const walk = (value: Json): void => {
    if (Array.isArray(value)) return value.forEach(walk);
    if (!isPlainObject(value)) return;
    if (!isOperator(value)) return Object.values(value).forEach(walk);
    if (typeof value.$capture === "string") captures.push(value.$capture);
    if (typeof value.$ref === "string") refs.push(value.$ref);
    if (typeof value.$template === "string") refs.push(...interpolatedNames(value.$template));
    if (typeof value.$regex === "string") {
      refs.push(...interpolatedNames(value.$regex));
      captures.push(...regexGroupNames(value.$regex));
    }
    if (value.$exact !== undefined) walk(value.$exact);
  };
  walk(pattern);
  return { captures, refs };
}
