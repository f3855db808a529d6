/**
 * The transcript matcher (protocol/TRANSCRIPTS.md, "Matching"): decides whether a received JSON-RPC message fits a
 * `recv` pattern, binds captures, resolves `send` lines into concrete messages, and explains mismatches.
 *
 * Owns: partial-object matching, the semantics of every operator, capture bindings (tentative until the whole
 * message fits), `${name}` interpolation, the differences list and the "closest message" scoring. Pure: it must
 * never do I/O, never keep state between calls, and never mutate the bindings it is given.
 */
import { INTERPOLATION, isOperator, joinPath, type Json } from "./format.js";

/** Values captured so far, by name. */
export type Bindings = ReadonlyMap<string, Json>;

/** One place where a message differs from its pattern. `expected`/`actual` are short human renderings. */
export interface Difference {
  /** Dotted path into the message (`result.phase`, `params.nodes[1].status`); `(message)` for the root. */
  readonly path: string;
  readonly expected: string;
  readonly actual: string;
}

/** The outcome of matching one message against one pattern. */
export interface MatchOutcome {
  readonly ok: boolean;
  /** The bindings including this message's captures (only meaningful when `ok`). */
  readonly bindings: Map<string, Json>;
  /** Every difference found (only the first when `collectAll` was false). */
  readonly differences: readonly Difference[];
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Deep equality of JSON values (key order ignored, array order not). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined);
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined);
  return ak.length === bk.length && ak.every((k) => Object.hasOwn(bo, k) && jsonEqual(ao[k], bo[k]));
}

/** A short rendering of a value for reports: compact JSON cut at `max` characters; `(missing)` for undefined. */
export function show(value: unknown, max = 160): string {
  if (value === undefined) return "(missing)";
  const text = JSON.stringify(value) ?? String(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Replaces every `${name}` in `text` by the bound value (strings as is, other values as JSON), escaped for a regex
 * when `forRegex`. Returns `undefined` and the first unbound name when one is not bound.
 */
export function interpolate(
  text: string,
  bindings: Bindings,
  forRegex = false,
): { ok: true; text: string } | { ok: false; unbound: string } {
  let unbound: string | undefined;
  const out = text.replace(INTERPOLATION, (_whole, name: string) => {
    if (!bindings.has(name)) {
      unbound ??= name;
      return "";
    }
    const value = bindings.get(name);
    const raw = typeof value === "string" ? value : JSON.stringify(value);
    return forRegex ? escapeRegex(raw) : raw;
  });
  return unbound === undefined ? { ok: true, text: out } : { ok: false, unbound };
}

function typeFits(type: string, value: unknown): boolean {
  switch (type) {
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number";
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "boolean":
      return typeof value === "boolean";
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    case "array":
      return Array.isArray(value);
    case "null":
      return value === null;
    case "iso-date":
      return typeof value === "string" && ISO_DATE.test(value) && !Number.isNaN(Date.parse(value));
    case "uuid":
      return typeof value === "string" && UUID.test(value);
    default:
      return false;
  }
}

class Walk {
  readonly differences: Difference[] = [];
  constructor(
    readonly bindings: Map<string, Json>,
    private readonly collectAll: boolean,
  ) {}

  get done(): boolean {
    return !this.collectAll && this.differences.length > 0;
  }

  diff(path: string, expected: string, actual: unknown): void {
    this.differences.push({ path: path === "" ? "(message)" : path, expected, actual: show(actual) });
  }

  bind(name: string, value: unknown, path: string): void {
    if (this.bindings.has(name)) {
      const bound = this.bindings.get(name);
      if (!jsonEqual(bound, value)) this.diff(path, `the value captured as "${name}", ${show(bound)}`, value);
      return;
    }
    this.bindings.set(name, value as Json);
  }

  regex(source: string, flags: string, value: unknown, path: string): boolean {
    if (typeof value !== "string") {
      this.diff(path, `a string matching /${source}/`, value);
      return false;
    }
    const resolved = interpolate(source, this.bindings, true);
    if (!resolved.ok) {
      this.diff(path, `/${source}/ (but "${resolved.unbound}" is not captured)`, value);
      return false;
    }
    const match = new RegExp(resolved.text, flags).exec(value);
    if (!match) {
      this.diff(path, `a string matching /${source}/`, value);
      return false;
    }
    for (const [name, group] of Object.entries(match.groups ?? {})) {
      if (group !== undefined) this.bind(name, group, path);
    }
    return true;
  }

  match(pattern: Json, value: unknown, path: string): void {
    if (this.done) return;
    if (isOperator(pattern)) return this.operator(pattern as Record<string, Json>, value, path);
    if (Array.isArray(pattern)) {
      if (!Array.isArray(value)) return this.diff(path, `an array of ${pattern.length}`, value);
      if (value.length !== pattern.length) {
        this.diff(path, `an array of ${pattern.length} item(s)`, `${value.length} item(s): ${show(value, 120)}`);
        if (!this.collectAll) return;
      }
      pattern.forEach((p, i) => this.match(p, value[i], joinPath(path, i)));
      return;
    }
    if (typeof pattern === "object" && pattern !== null) {
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        return this.diff(path, "an object", value);
      }
      const obj = value as Record<string, unknown>;
      for (const [key, sub] of Object.entries(pattern)) {
        this.match(sub, Object.hasOwn(obj, key) ? obj[key] : undefined, joinPath(path, key));
        if (this.done) return;
      }
      return;
    }
    if (pattern !== value) this.diff(path, show(pattern), value);
  }

  private operator(op: Record<string, Json>, value: unknown, path: string): void {
    if (Object.hasOwn(op, "$absent")) {
      if (value !== undefined) this.diff(path, "no such key", value);
      return;
    }
    if (value === undefined && !Object.hasOwn(op, "$exact")) {
      this.diff(path, describeOperator(op), value);
      return;
    }
    if (Object.hasOwn(op, "$any")) return;
    if (Object.hasOwn(op, "$capture")) {
      if (typeof op.$type === "string" && !typeFits(op.$type, value)) return this.diff(path, `a ${op.$type}`, value);
      if (typeof op.$regex === "string" && !this.regex(op.$regex, String(op.$flags ?? ""), value, path)) return;
      return this.bind(String(op.$capture), value, path);
    }
    if (Object.hasOwn(op, "$regex")) {
      this.regex(String(op.$regex), String(op.$flags ?? ""), value, path);
      return;
    }
    if (Object.hasOwn(op, "$type")) {
      if (!typeFits(String(op.$type), value)) this.diff(path, `a ${String(op.$type)}`, value);
      return;
    }
    if (Object.hasOwn(op, "$ref")) {
      const name = String(op.$ref);
      if (!this.bindings.has(name)) return this.diff(path, `the value captured as "${name}" (not captured yet)`, value);
      const bound = this.bindings.get(name);
      if (!jsonEqual(bound, value)) this.diff(path, `${show(bound)} (captured as "${name}")`, value);
      return;
    }
    if (Object.hasOwn(op, "$template")) {
      const resolved = interpolate(String(op.$template), this.bindings);
      if (!resolved.ok) return this.diff(path, `a template using "${resolved.unbound}" (not captured yet)`, value);
      if (value !== resolved.text) this.diff(path, show(resolved.text), value);
      return;
    }
    if (Object.hasOwn(op, "$literal")) {
      if (!jsonEqual(op.$literal, value)) this.diff(path, show(op.$literal), value);
      return;
    }
    if (Object.hasOwn(op, "$exact")) {
      const pattern = op.$exact as Record<string, Json>;
      if (typeof value !== "object" || value === null || Array.isArray(value))
        return this.diff(path, "an object", value);
      for (const key of Object.keys(value)) {
        if (!Object.hasOwn(pattern, key)) {
          this.diff(joinPath(path, key), "no such key ($exact)", (value as Record<string, unknown>)[key]);
          if (this.done) return;
        }
      }
      this.match(pattern, value, path);
    }
  }
}

/** A one-phrase description of what an operator expects, for reports. */
export function describeOperator(op: Record<string, Json>): string {
  if (Object.hasOwn(op, "$capture")) return `any value (captured as "${String(op.$capture)}")`;
  if (Object.hasOwn(op, "$any")) return "any value";
  if (Object.hasOwn(op, "$type")) return `a ${String(op.$type)}`;
  if (Object.hasOwn(op, "$regex")) return `a string matching /${String(op.$regex)}/`;
  if (Object.hasOwn(op, "$ref")) return `the value captured as "${String(op.$ref)}"`;
  if (Object.hasOwn(op, "$template")) return `the string ${show(op.$template)}`;
  if (Object.hasOwn(op, "$literal")) return show(op.$literal);
  return show(op);
}

/**
 * Matches `value` (a received message) against `pattern` (a `recv` line's `msg`) with partial-object semantics:
 * every key of a pattern object must fit (extra keys in the message are fine), arrays must have the same length and
 * fit item by item, other values must be equal, and operators decide for themselves. Captures bind in traversal
 * order; a capture of an already bound name must equal it. Returns new bindings (the input map is not changed).
 * With `collectAll`, keeps going after the first difference (for reports).
 */
export function matchMessage(pattern: Json, value: unknown, bindings: Bindings, collectAll = false): MatchOutcome {
  const walk = new Walk(new Map(bindings), collectAll);
  walk.match(pattern, value, "");
  return { ok: walk.differences.length === 0, bindings: walk.bindings, differences: walk.differences };
}

/** A `send` line that cannot be resolved: a `$ref` or `${name}` whose name is not bound at run time. */
export class UnboundNameError extends Error {
  override readonly name = "UnboundNameError";
  constructor(
    readonly path: string,
    readonly unbound: string,
  ) {
    super(`${path}: "${unbound}" was never captured (did an earlier recv line match a different message?)`);
  }
}

/**
 * Resolves a `send` line's message into the concrete JSON to write: `$ref` → the bound value, `$template` → the
 * interpolated string, `$literal` → its content verbatim. Throws `UnboundNameError` for an unbound name. Other
 * operators are rejected by the format check before this is called; if one slips through it is an Error.
 */
export function resolveSend(message: Json, bindings: Bindings, path = "msg"): Json {
  if (Array.isArray(message)) return message.map((m, i) => resolveSend(m, bindings, joinPath(path, i)));
  if (typeof message !== "object" || message === null) return message;
  if (isOperator(message)) {
    message = message as Record<string, Json>;
    if (Object.hasOwn(message, "$literal")) return message.$literal as Json;
    if (Object.hasOwn(message, "$ref")) {
      const name = String(message.$ref);
      if (!bindings.has(name)) throw new UnboundNameError(path, name);
      return bindings.get(name) as Json;
    }
    if (Object.hasOwn(message, "$template")) {
      const resolved = interpolate(String(message.$template), bindings);
      if (!resolved.ok) throw new UnboundNameError(path, resolved.unbound);
      return resolved.text;
    }
    throw new Error(`${path}: ${Object.keys(message).join(", ")} cannot be used in a send line`);
  }
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(message)) out[k] = resolveSend(v, bindings, joinPath(path, k));
  return out;
}

/** The received message that comes closest to a pattern, with every difference. */
export interface ClosestMessage {
  /** Position of the message among the received ones (0-based, arrival order). */
  readonly index: number;
  readonly message: unknown;
  readonly differences: readonly Difference[];
}

/**
 * Picks, among `candidates`, the message closest to `pattern`: fewest differences, where a different `method` or `id`
 * (when the pattern names one) counts as far worse than any number of differing fields. Ties go to the earliest
 * arrival. Returns `undefined` when there is no candidate. Pure.
 */
export function closestMessage(
  pattern: Json,
  candidates: readonly { index: number; message: unknown }[],
  bindings: Bindings,
): ClosestMessage | undefined {
  let best: (ClosestMessage & { score: number }) | undefined;
  for (const c of candidates) {
    const outcome = matchMessage(pattern, c.message, bindings, true);
    let score = outcome.differences.length;
    for (const d of outcome.differences) {
      if (d.path === "method") score += 1000;
      if (d.path === "id") score += 500;
      if (d.path === "(message)") score += 2000;
    }
    if (best === undefined || score < best.score) {
      best = { index: c.index, message: c.message, differences: outcome.differences, score };
    }
  }
  if (!best) return undefined;
  return { index: best.index, message: best.message, differences: best.differences };
}
