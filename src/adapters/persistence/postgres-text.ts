/**
 * How the PostgreSQL backend turns arguments into SQL values and stored text back into values (postgres-authority.ts).
 *
 * Owns the few rules PostgreSQL adds to the authority contract: text cannot hold U+0000 (such ids are refused as
 * invalid arguments), stored JSON that does not parse comes back as its raw text (the caller's schema check fails
 * closed, guarantee 4), and the code-point successor of a prefix for index range scans. Pure; never touches a
 * connection.
 */
import { AuthorityFailure } from "../../core/ports.js";
import { checkKey, checkName } from "./authority-checks.js";

/**
 * The smallest string above every string that starts with `prefix` in code-point order, or `null` when there is
 * none (the prefix is empty or made only of U+10FFFF). Surrogate code points are skipped: they never occur in ids.
 */
export function successor(prefix: string): string | null {
  const points = [...prefix].map((c) => c.codePointAt(0) ?? 0);
  while (points.length > 0) {
    const last = points.pop() ?? 0;
    if (last < 0x10ffff) {
      const next = last === 0xd7ff ? 0xe000 : last + 1;
      return String.fromCodePoint(...points, next);
    }
  }
  return null;
}

/** PostgreSQL text cannot hold U+0000: such ids are refused (as invalid arguments) instead of failing in the driver. */
export function checkNameText(value: string, what: string): void {
  checkName(value, what);
  if (value.includes("\u0000")) throw new AuthorityFailure(`${what} must not contain the character U+0000.`);
}

/** `checkKey` plus the U+0000 rule for each part. Throws `AuthorityFailure`. */
export function checkKeyText(projectId: string, kind: string, id: string): void {
  checkKey(projectId, kind, id);
  checkNameText(projectId, "projectId");
  checkNameText(kind, "kind");
  checkNameText(id, "id");
}

/** Parses stored JSON; text that does not parse is returned as is, for the caller's validation to reject. */
export function parseStored(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** `value` as JSON text; throws `AuthorityFailure` when it is not an object or array or cannot be serialised. */
export function toJson(value: unknown, what: string): string {
  if (typeof value !== "object" || value === null)
    throw new AuthorityFailure(`${what} must be a JSON object or array.`);
  let json: unknown;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new AuthorityFailure(`${what} cannot be serialised to JSON: ${messageOf(error)}`, { cause: error });
  }
  if (typeof json !== "string") throw new AuthorityFailure(`${what} cannot be serialised to JSON.`);
  return json;
}

/** A positive safe integer setting, else `AuthorityFailure` naming it. */
export function positive(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new AuthorityFailure(`${what} must be a positive integer, got ${String(value)}.`);
  }
  return value;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
