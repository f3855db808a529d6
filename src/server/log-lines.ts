/**
 * Human log lines (issue 28: human commands print human lines only): one pino JSON line becomes one plain line such
 * as `acp-orchestrator: warning: the lease's owner process is gone; … (productId prd_1, owner vm:1:2:3)`.
 *
 * Used by the logger's `pretty` format (logger.ts): `run`, `resume`, the control verbs, `demo` and `ui` show their
 * server's logs this way on stderr, while `serve` keeps JSON lines for machines. Pure; never throws.
 */

/** pino's numeric levels, as words a person reads. */
const LEVEL_WORDS: Readonly<Record<number, string>> = {
  10: "trace",
  20: "debug",
  30: "info",
  40: "warning",
  50: "error",
  60: "fatal",
};

/** Fields every pino line has, or that say nothing to a person reading a terminal. */
const HIDDEN_FIELDS = new Set(["level", "time", "pid", "hostname", "msg", "v"]);

/** Longest rendering of one field's value; a longer one is cut with "…". */
const MAX_FIELD_CHARS = 200;

/**
 * The human line of one pino JSON line (`line` may end with a newline): `acp-orchestrator: LEVEL: msg (k v, …)`, the
 * error under `err` as its message only. A line that is not a JSON object (a sentence the server printed itself) is
 * returned as it came. Always ends with one newline.
 */
export function humanLogLine(line: string): string {
  const text = line.replace(/\r?\n$/u, "");
  let record: unknown;
  try {
    record = JSON.parse(text);
  } catch {
    return `${text}\n`;
  }
  if (typeof record !== "object" || record === null || Array.isArray(record)) return `${text}\n`;
  const fields = record as Record<string, unknown>;
  const level = typeof fields.level === "number" ? (LEVEL_WORDS[fields.level] ?? `level ${fields.level}`) : "log";
  const msg = typeof fields.msg === "string" && fields.msg !== "" ? fields.msg : "(no message)";
  const context = Object.entries(fields)
    .filter(([key, value]) => !HIDDEN_FIELDS.has(key) && value !== undefined)
    .map(([key, value]) => `${key} ${fieldText(key, value)}`);
  return `acp-orchestrator: ${level}: ${msg}${context.length > 0 ? ` (${context.join(", ")})` : ""}\n`;
}

/** A field's value in a few words: strings as they are, an error by its message, anything else as compact JSON. */
function fieldText(key: string, value: unknown): string {
  let text: string;
  if (typeof value === "string") text = value;
  else if (key === "err" && typeof value === "object" && value !== null && "message" in value)
    text = String((value as { message: unknown }).message);
  else text = JSON.stringify(value) ?? String(value);
  text = text.replace(/\s+/gu, " ").trim();
  return text.length > MAX_FIELD_CHARS ? `${text.slice(0, MAX_FIELD_CHARS - 1)}…` : text;
}
