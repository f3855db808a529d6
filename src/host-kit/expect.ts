/**
 * The few assertions the authority conformance rules use (authority-rules.ts), without a test framework, so the same
 * rules run under vitest (test/authority/) and in `acp-orchestrator check-host` against a host's process.
 *
 * Owns only comparison and plain-words failure messages. Semantics follow vitest's matchers of the same names:
 * `toEqual` compares recursively and treats a property that is `undefined` like a missing one; `toMatchObject` checks
 * that the object contains the expected properties (recursively, arrays element by element).
 */

/** A rule's expectation did not hold. The message says what was expected and what came back. */
export class ExpectationFailure extends Error {
  override readonly name = "ExpectationFailure";
}

const MAX_SHOWN = 200;

/** A short readable form of a value for messages. */
function show(value: unknown): string {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  let text: string;
  try {
    text = typeof value === "string" ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

/** Deep equality with vitest `toEqual` semantics (undefined properties ignored, NaN equals NaN). */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (!isObject(a) || !isObject(b)) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) if (!deepEqual(a[key], b[key])) return false;
  return true;
}

/** True when `actual` contains everything `expected` has (vitest `toMatchObject`). */
function matches(actual: unknown, expected: unknown): boolean {
  if (!isObject(expected)) return deepEqual(actual, expected);
  if (!isObject(actual)) return false;
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => matches(actual[i], e))
    );
  }
  return Object.entries(expected).every(([key, value]) => key in actual && matches(actual[key], value));
}

/** The assertions on one value. Each throws `ExpectationFailure` when it does not hold. */
export interface Assertions {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toBeNull(): void;
  toBeInstanceOf(type: abstract new (...args: never[]) => unknown): void;
  toHaveLength(length: number): void;
  toMatch(pattern: RegExp): void;
  toMatchObject(expected: object): void;
  resolves: { toBeUndefined(): Promise<void> };
}

/** Starts an assertion on `actual`. */
export function expect(actual: unknown): Assertions {
  const fail = (message: string): never => {
    throw new ExpectationFailure(message);
  };
  return {
    toBe: (expected) => {
      if (!Object.is(actual, expected)) fail(`expected ${show(expected)}, got ${show(actual)}`);
    },
    toEqual: (expected) => {
      if (!deepEqual(actual, expected)) fail(`expected ${show(expected)}, got ${show(actual)}`);
    },
    toBeNull: () => {
      if (actual !== null) fail(`expected null, got ${show(actual)}`);
    },
    toBeInstanceOf: (type) => {
      if (!(actual instanceof type)) fail(`expected ${type.name}, got ${show(actual)}`);
    },
    toHaveLength: (length) => {
      const got = isObject(actual) && "length" in actual ? actual.length : undefined;
      if (got !== length) fail(`expected ${length} items, got ${show(got)}`);
    },
    toMatch: (pattern) => {
      if (typeof actual !== "string" || !pattern.test(actual))
        fail(`expected text matching ${pattern}, got ${show(actual)}`);
    },
    toMatchObject: (expected) => {
      if (!matches(actual, expected)) fail(`expected an object containing ${show(expected)}, got ${show(actual)}`);
    },
    resolves: {
      toBeUndefined: async () => {
        const value = await (actual as Promise<unknown>);
        if (value !== undefined) fail(`expected the call to resolve with nothing, got ${show(value)}`);
      },
    },
  };
}
