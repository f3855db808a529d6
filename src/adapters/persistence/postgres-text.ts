/**
 * How the PostgreSQL backend turns arguments into SQL values and stored text back into values (postgres-authority.ts).
 *
 * Owns the few rules PostgreSQL adds to the authority contract: text cannot hold U+0000 (such ids are refused as
 * invalid arguments) and the code-point successor of a prefix for index range scans. The stored-JSON rules shared
 * with SQLite (`parseStored`, `toJson`) live in authority-checks.ts. Pure; never touches a connection.
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

/** A positive safe integer setting, else `AuthorityFailure` naming it. */
export function positive(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new AuthorityFailure(`${what} must be a positive integer, got ${String(value)}.`);
  }
  return value;
}
