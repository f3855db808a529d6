/**
 * Params validation with a memory of the last flat params each method accepted (issue 34, request path): a host
 * polling `product.status {productId}` sends the same params every time, and zod's parse of them was about a fifth of
 * the server's work on such a request. Every params schema of the method table is a pure function of its input (its
 * refinements read nothing but the value), so params equal to ones it accepted before give an equal output.
 *
 * Owns that memory only: never changes what is accepted, the output, or the issues of a refusal (a refusal is never
 * remembered, and every input that differs is parsed by its schema).
 */
import type { z } from "zod";
import { safeParsePlain } from "../../protocol/errors.js";

/** A flat params object a method accepted: its members in order, and what its schema made of it. */
interface Accepted {
  keys: string[];
  values: unknown[];
  data: Record<string, unknown>;
}

/** Most members of a params object (and of its output) the memo keeps; larger ones are parsed every time. */
const MAX_MEMBERS = 16;

/**
 * `safeParsePlain(spec.params, params ?? {})` for a method or notification spec, answered without parsing when `params` has the same members, in the
 * same order, with the same values (`Object.is`) as the last params of `spec` that were accepted, and both that input
 * and its output were flat (at most `MAX_MEMBERS` members, each a string, number, boolean or null): then the answer is
 * a fresh copy of that output, so a handler that changes its params changes nothing kept. One entry per spec.
 * Throws what the schema throws (an async refinement).
 */
export class ParamsMemo {
  private readonly accepted = new Map<object, Accepted>();

  parse(spec: { params: z.ZodType }, params: unknown): z.ZodSafeParseResult<unknown> {
    const last = this.accepted.get(spec);
    if (last !== undefined && sameMembers(params, last)) return { success: true, data: { ...last.data } };
    const parsed = safeParsePlain(spec.params, params ?? {});
    if (parsed.success) this.remember(spec, params, parsed.data);
    return parsed;
  }

  private remember(spec: object, params: unknown, data: unknown): void {
    const input = flatMembers(params);
    const output = flatMembers(data);
    if (input === undefined || output === undefined) {
      this.accepted.delete(spec);
      return;
    }
    this.accepted.set(spec, { keys: input.keys, values: input.values, data: { ...(data as Record<string, unknown>) } });
  }
}

/**
 * True when `params` is a plain object (as `flatMembers` remembers: an array with the same members, e.g. by-position
 * `[]` for a remembered `{}`, is not one) with exactly `last`'s members, in order, with the same values.
 */
function sameMembers(params: unknown, last: Accepted): boolean {
  if (typeof params !== "object" || params === null || Object.getPrototypeOf(params) !== Object.prototype) return false;
  const { keys, values } = last;
  let n = 0;
  for (const key in params) {
    if (keys[n] !== key || !Object.is(values[n], (params as Record<string, unknown>)[key])) return false;
    n += 1;
  }
  return n === keys.length;
}

/**
 * The members of `value` when it is a plain object (prototype `Object.prototype`) of at most `MAX_MEMBERS` own members,
 * each a string, number, boolean or null; else `undefined`.
 */
function flatMembers(value: unknown): { keys: string[]; values: unknown[] } | undefined {
  if (typeof value !== "object" || value === null || Object.getPrototypeOf(value) !== Object.prototype)
    return undefined;
  const keys: string[] = [];
  const values: unknown[] = [];
  for (const key in value) {
    if (!Object.hasOwn(value, key) || keys.length >= MAX_MEMBERS) return undefined;
    const member: unknown = (value as Record<string, unknown>)[key];
    if (member !== null && typeof member !== "string" && typeof member !== "number" && typeof member !== "boolean")
      return undefined;
    keys.push(key);
    values.push(member);
  }
  return { keys, values };
}
