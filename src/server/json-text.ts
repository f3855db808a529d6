/**
 * Results that go out as already-serialised JSON text (issue 16): `JsonText` carries the text of a response result,
 * and `JsonTextMemo` keeps the text of the last answer per key, handing it out again while a new answer is
 * structurally the same, so a host polling `product.status` does not pay for serialising an unchanged answer.
 *
 * Owns the comparison and its JSON semantics only; the writer (framed-writer.ts) splices the text into the frame.
 * Never holds a reference into the answers it compares: what it compares against is its own copy.
 */

/**
 * A response result that is already JSON text: compact, with U+2028/U+2029 escaped (the framing's rules, PROTOCOL.md
 * section 1). `FramedMessageWriter` writes `text` as the `result` member verbatim. `T` is the type of the value
 * `text` encodes, for the handler's signature only.
 */
export class JsonText<T = unknown> {
  declare readonly value?: T;
  #text: string | undefined;
  #bytes: Buffer | undefined;
  #chunks: readonly Buffer[] | undefined;
  constructor(text: string) {
    this.#text = text;
  }

  /**
   * A result whose UTF-8 bytes were written directly, in pieces (issue 32: `product.list`, list-text.ts): `chunks` are
   * kept and written as they are; `bytes` and `text` join them only when asked.
   */
  static fromChunks<T = unknown>(chunks: readonly Buffer[]): JsonText<T> {
    const json = new JsonText<T>("");
    json.#text = undefined;
    json.#chunks = chunks;
    return json;
  }

  /** The text (decoded from `bytes` on first use when made by `fromChunks`). */
  get text(): string {
    return (this.#text ??= this.bytes.toString("utf8"));
  }

  /**
   * `text` as UTF-8, encoded on first use and kept: the writer copies these bytes into its output instead of encoding
   * the text again for every frame that carries it (issue 16, request path). Must not be modified.
   */
  get bytes(): Buffer {
    return (this.#bytes ??= this.#chunks ? Buffer.concat(this.#chunks) : Buffer.from(this.#text as string, "utf8"));
  }

  /** `bytes` as pieces in order (those given to `fromChunks`, else `bytes` alone); the writer writes these. */
  get chunks(): readonly Buffer[] {
    return this.#chunks ?? [this.bytes];
  }
}

/** U+2028 or U+2029 (a non-global pattern: `test` keeps no position between calls). */
const LINE_SEPARATORS = /[\u2028\u2029]/;

/** Compact JSON with U+2028/U+2029 escaped, so no line-splitting reader can break a message. Throws on BigInt/cycles. */
export function serializeJson(value: unknown): string {
  // A number's JSON holds no string, so nothing to escape (the id of most responses; issue 16, request path).
  if (typeof value === "number") return JSON.stringify(value);
  const json = JSON.stringify(value);
  if (typeof json !== "string") throw new TypeError("The message is not serialisable.");
  return escapeLineSeparators(json);
}

/** `json` with every U+2028/U+2029 escaped (`serializeJson`'s last step, for JSON text put together elsewhere). */
export function escapeLineSeparators(json: string): string {
  // Most answers hold neither: the test is a scan (none at all for a one-byte string), where a replace with a
  // callback cost ~80 ms of CPU on the 26 MB product.list of 100,000 products (issue 32).
  if (!LINE_SEPARATORS.test(json)) return json;
  return json.replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"));
}

/** Deepest nesting `JsonTextMemo` copies or compares; anything deeper is serialised every time. */
const MAX_DEPTH = 32;

/**
 * A plain-data value: strings, finite numbers, booleans, null, arrays of them, and objects of them (see `plainCopy`),
 * an object kept as its member names and values in order (`PlainObject`), so comparing needs no key list.
 */
type Plain = string | number | boolean | null | Plain[] | PlainObject;

/** An object of the JSON data model: `keys[i]`'s value is `values[i]`, in member order. */
class PlainObject {
  constructor(
    readonly keys: string[],
    readonly values: Plain[],
  ) {}
}

/** Marks a value `plainCopy` refuses (it would not survive `JSON.stringify` unchanged, or is too deep). */
const NOT_PLAIN = Symbol("not plain");

/**
 * A copy of `value` in the JSON data model, sharing only strings (immutable), or `NOT_PLAIN` when `value` holds
 * anything `JSON.stringify` would transform or reject: a non-finite number, a bigint, a function or symbol, an
 * `undefined` array element, an object that is not a plain object (a class instance, a `Date`, anything with
 * `toJSON`), or nesting deeper than `MAX_DEPTH`. Object members whose value is `undefined` are left out, as
 * `JSON.stringify` leaves them out.
 */
function plainCopy(value: unknown, depth: number): Plain | typeof NOT_PLAIN {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : NOT_PLAIN;
    case "object": {
      if (value === null) return null;
      if (depth >= MAX_DEPTH) return NOT_PLAIN;
      if (Array.isArray(value)) {
        const out: Plain[] = new Array<Plain>(value.length);
        for (let i = 0; i < value.length; i += 1) {
          const item: unknown = value[i];
          if (item === undefined) return NOT_PLAIN;
          const copy = plainCopy(item, depth + 1);
          if (copy === NOT_PLAIN) return NOT_PLAIN;
          out[i] = copy;
        }
        return out;
      }
      if (!isPlainObject(value)) return NOT_PLAIN;
      const out = new PlainObject([], []);
      for (const key of Object.keys(value)) {
        const member = (value as Record<string, unknown>)[key];
        if (member === undefined) continue;
        const copy = plainCopy(member, depth + 1);
        if (copy === NOT_PLAIN) return NOT_PLAIN;
        out.keys.push(key);
        out.values.push(copy);
      }
      return out;
    }
    default:
      return NOT_PLAIN;
  }
}

/** An object `JSON.stringify` writes member by member: its prototype is `Object.prototype` or null, no `toJSON`. */
function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return (proto === Object.prototype || proto === null) && (value as { toJSON?: unknown }).toJSON === undefined;
}

/**
 * True when `JSON.stringify(value)` would give the same text as `JSON.stringify(copy)`, for a `copy` made by
 * `plainCopy`: the same members in the same order (members whose value is `undefined` skipped), the same array
 * lengths, equal strings, numbers and booleans. False, never an error, for anything `plainCopy` would refuse.
 */
function sameJson(value: unknown, copy: Plain, depth: number): boolean {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value === copy;
    case "number":
      // -0 and 0 are both written as 0.
      return value === copy && Number.isFinite(value);
    case "object": {
      if (value === null) return copy === null;
      if (copy === null || typeof copy !== "object" || depth >= MAX_DEPTH) return false;
      if (Array.isArray(value)) {
        if (!Array.isArray(copy) || copy.length !== value.length) return false;
        for (let i = 0; i < value.length; i += 1) {
          const item: unknown = value[i];
          if (item === undefined || !sameJson(item, copy[i] as Plain, depth + 1)) return false;
        }
        return true;
      }
      if (!(copy instanceof PlainObject) || !isPlainObject(value)) return false;
      const { keys, values } = copy;
      let next = 0;
      for (const key in value) {
        if (!Object.hasOwn(value, key)) return false;
        const member = (value as Record<string, unknown>)[key];
        if (member === undefined) continue;
        if (keys[next] !== key || !sameJson(member, values[next] as Plain, depth + 1)) return false;
        next += 1;
      }
      return next === keys.length;
    }
    default:
      return false;
  }
}

/** Default number of keys `JsonTextMemo` remembers. */
const DEFAULT_MEMO_KEYS = 64;
/** Default largest text, in UTF-16 code units, `JsonTextMemo` remembers: larger answers are serialised every time. */
const DEFAULT_MEMO_CHARS = 256 * 1024;

/**
 * The JSON text of the last answer given per key, for answers that repeat (a host polling `product.status`, issue 16).
 * `text(key, value)` serialises `value` (as `serializeJson`), unless the last value remembered for `key` was
 * structurally the same JSON: then it returns the remembered `JsonText` itself (the same object, its encoded bytes
 * included) without serialising. What it compares against is its own plain-data copy of that earlier value (strings
 * shared, every object and array its own), so nothing the caller changes in place afterwards, in the old value or the
 * new, can make it hand out stale text: equal answers give byte-identical frames, and a different answer is always
 * serialised anew.
 *
 * Bounded: at most `maxKeys` keys (the least recently used is forgotten first) and only texts up to `maxChars` code
 * units; a value with anything `JSON.stringify` would transform (a `Date`, `toJSON`, a class instance, a non-finite
 * number) is serialised every time and not remembered. Throws what `serializeJson` throws.
 */
export class JsonTextMemo {
  private readonly entries = new Map<string, { copy: Plain; json: JsonText; version: string | undefined }>();
  /** The key used last (the last in `entries`' order), when it is remembered. */
  private newest: string | undefined;

  constructor(
    private readonly maxKeys = DEFAULT_MEMO_KEYS,
    private readonly maxChars = DEFAULT_MEMO_CHARS,
  ) {}

  /**
   * The JSON text of `value`, as `JsonText`, remembered under `key` (see the class). With `version`, the caller's
   * promise that every value it passes for `key` with this same version is the same answer (status.ts
   * `inspectVersioned`): when the remembered text was given for that version, it is returned without comparing.
   */
  text<T>(key: string, value: T, version?: string): JsonText<T> {
    const last = this.entries.get(key);
    if (last !== undefined && ((version !== undefined && last.version === version) || sameJson(value, last.copy, 0))) {
      last.version = version;
      // Most recently used last; a key that already is needs no move (a Map's delete and set allocate).
      if (key !== this.newest) {
        this.entries.delete(key);
        this.entries.set(key, last);
        this.newest = key;
      }
      return last.json as JsonText<T>;
    }
    if (last !== undefined) this.entries.delete(key);
    const json = new JsonText<T>(serializeJson(value));
    if (json.text.length <= this.maxChars) {
      const copy = plainCopy(value, 0);
      if (copy !== NOT_PLAIN) {
        this.entries.set(key, { copy, json, version });
        this.newest = key;
        if (this.entries.size > this.maxKeys) this.entries.delete(this.entries.keys().next().value as string);
      }
    }
    return json;
  }

  /** Forgets what was remembered under `key` (e.g. the product was deleted). */
  forget(key: string): void {
    this.entries.delete(key);
    if (this.newest === key) this.newest = undefined;
  }

  /** How many keys are remembered (for tests). */
  get size(): number {
    return this.entries.size;
  }
}
