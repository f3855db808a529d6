/**
 * Structural bounds of every inbound request's params, checked before the method's zod schema runs (DESIGN.md
 * guarantee 14: every input has a size limit that is checked before any work proportional to it).
 *
 * zod checks an array's `max` only after it parsed every element, and runs a string's refinements after a failed
 * `max` unless the check aborts; the schemas abort on their string limits (protocol/common.ts), and this walk bounds
 * everything else — arrays, free-form objects such as `_meta` and `rawInput`, nesting — with a few generous limits
 * no valid request comes near. The walk stops at the first violation, reads only lengths (never string contents),
 * and visits at most `MAX_INPUT_NODES` values, so its cost is bounded whatever the input's size.
 *
 * It never changes the params and knows nothing of any method; the per-field limits are the schemas'.
 */

/** Longest string anywhere in a request's params (characters). Field limits are smaller (PROTOCOL.md section 5). */
export const MAX_INPUT_STRING_CHARS = 1_048_576;
/** Most elements of any array, and most keys of any object, in a request's params. */
export const MAX_INPUT_ITEMS = 10_000;
/** Deepest nesting of arrays and objects in a request's params. */
export const MAX_INPUT_DEPTH = 64;
/** Most values (objects, arrays, strings, numbers...) in a request's params. */
export const MAX_INPUT_NODES = 1_000_000;

/** One violation, in the shape of a `-32602` issue: where and what. */
export interface BoundsIssue {
  path: (string | number)[];
  message: string;
}

/** A value waiting to be visited, with the way back to the root (paths are built only for a violation). */
interface Visit {
  value: unknown;
  key: string | number | null;
  parent: Visit | null;
  depth: number;
}

function pathOf(visit: Visit): (string | number)[] {
  const path: (string | number)[] = [];
  for (let v: Visit | null = visit; v && v.key !== null; v = v.parent) path.unshift(v.key);
  return path;
}

/**
 * Returns the first bound `params` breaks, or `null` when it is within every bound. Cost: at most `MAX_INPUT_NODES`
 * visits of O(1) each (an array's or object's size is checked before its items are queued). Never throws for JSON
 * values.
 */
export function checkInputBounds(params: unknown): BoundsIssue | null {
  if (isSmallFlatObject(params)) return null;
  let nodes = 0;
  const stack: Visit[] = [{ value: params, key: null, parent: null, depth: 0 }];
  while (stack.length > 0) {
    const visit = stack.pop() as Visit;
    const { value } = visit;
    if (++nodes > MAX_INPUT_NODES) {
      return { path: [], message: `has more than ${MAX_INPUT_NODES} values; split the request` };
    }
    if (typeof value === "string") {
      if (value.length > MAX_INPUT_STRING_CHARS) {
        return {
          path: pathOf(visit),
          message: `is too long: ${value.length} characters, at most ${MAX_INPUT_STRING_CHARS} are accepted`,
        };
      }
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (visit.depth >= MAX_INPUT_DEPTH) {
      return { path: pathOf(visit), message: `is nested more than ${MAX_INPUT_DEPTH} levels deep` };
    }
    const depth = visit.depth + 1;
    if (Array.isArray(value)) {
      if (value.length > MAX_INPUT_ITEMS) {
        return { path: pathOf(visit), message: `has ${value.length} items, at most ${MAX_INPUT_ITEMS} are accepted` };
      }
      for (let i = value.length - 1; i >= 0; i--)
        stack.push({ value: value[i] as unknown, key: i, parent: visit, depth });
      continue;
    }
    const keys = Object.keys(value);
    if (keys.length > MAX_INPUT_ITEMS) {
      return { path: pathOf(visit), message: `has ${keys.length} keys, at most ${MAX_INPUT_ITEMS} are accepted` };
    }
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i] as string;
      if (key.length > MAX_INPUT_STRING_CHARS) return { path: pathOf(visit), message: "has a key that is too long" };
      stack.push({ value: (value as Record<string, unknown>)[key], key, parent: visit, depth });
    }
  }
  return null;
}

/** Most members of an object `isSmallFlatObject` answers for; larger ones take the walk. */
const SMALL_OBJECT_MEMBERS = 64;

/**
 * True when `params` is an object of at most `SMALL_OBJECT_MEMBERS` members, none of them an object or array, every
 * key and string within `MAX_INPUT_STRING_CHARS`: within every bound, as the walk would find, without allocating
 * anything (most requests, e.g. `product.status {productId}`; issue 16, request path). False means "walk it", not
 * "out of bounds".
 */
function isSmallFlatObject(params: unknown): boolean {
  if (typeof params !== "object" || params === null || Array.isArray(params)) return false;
  let members = 0;
  for (const key in params) {
    if (++members > SMALL_OBJECT_MEMBERS || key.length > MAX_INPUT_STRING_CHARS) return false;
    const value = (params as Record<string, unknown>)[key];
    if (typeof value === "string") {
      if (value.length > MAX_INPUT_STRING_CHARS) return false;
    } else if (typeof value === "object" && value !== null) return false;
  }
  return true;
}
