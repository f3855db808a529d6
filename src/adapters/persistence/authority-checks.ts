/**
 * Argument and revision checks, and the stored-JSON rules, shared by the authorities (memory, SQLite, PostgreSQL), so both answer the port's contract
 * (src/core/ports.ts `RunStateAuthority`) with the same errors. Invalid arguments are programming errors, but the port
 * says every non-conflict failure is an `AuthorityFailure`, so they are reported as one (and change nothing). Lone
 * surrogates are refused because SQLite would store them as U+FFFD and two different ids could then collide.
 * This file must never perform I/O.
 */
import type { CreationPageOptions } from "../../core/creation-order.js";
import { AuthorityConflict, AuthorityFailure, STORED_TEXT_LENGTH, type AppendedEvents } from "../../core/ports.js";

/** Throws `AuthorityConflict` (with the current revision) unless `current` is what `expected` says. */
export function checkRevisionMatches(
  projectId: string,
  kind: string,
  id: string,
  current: number | undefined,
  expected: number | null,
): void {
  if (current === undefined && expected === null) return;
  if (current === expected) return;
  const where = `${kind} "${id}" of project "${projectId}"`;
  if (current === undefined) {
    throw new AuthorityConflict(`The ${where} does not exist (expected revision ${expected}).`);
  }
  const wanted = expected === null ? "to be absent" : `at revision ${expected}`;
  throw new AuthorityConflict(`The ${where} is at revision ${current}, expected ${wanted}.`, { revision: current });
}

export function checkName(value: unknown, what: string): void {
  if (typeof value !== "string" || value.length === 0)
    throw new AuthorityFailure(`${what} must be a non-empty string.`);
  if (/\p{Cs}/u.test(value)) throw new AuthorityFailure(`${what} must be well-formed Unicode (no lone surrogates).`);
}

export function checkPrefix(prefix: unknown): void {
  if (typeof prefix !== "string") throw new AuthorityFailure("prefix must be a string.");
  if (/\p{Cs}/u.test(prefix)) throw new AuthorityFailure("prefix must be well-formed Unicode (no lone surrogates).");
}

export function checkKey(projectId: string, kind: string, id: string): void {
  checkName(projectId, "projectId");
  checkName(kind, "kind");
  checkName(id, "id");
}

export function checkStream(projectId: string, stream: string): void {
  checkName(projectId, "projectId");
  checkName(stream, "stream");
}

export function checkValue(value: unknown, what: string): void {
  if (typeof value !== "object" || value === null)
    throw new AuthorityFailure(`${what} must be a JSON object or array.`);
}

export function checkRevision(revision: number): void {
  if (!Number.isSafeInteger(revision) || revision < 1) {
    throw new AuthorityFailure(`expectedRevision must be null or a positive integer, got ${String(revision)}.`);
  }
}

export function checkSeq(seq: number, what: string): void {
  if (!Number.isSafeInteger(seq) || seq < 0)
    throw new AuthorityFailure(`${what} must be a non-negative integer, got ${String(seq)}.`);
}

export function checkLimit(limit: number | undefined): void {
  if (limit === undefined) return;
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new AuthorityFailure(`limit must be a positive integer, got ${String(limit)}.`);
}

/** Refuses a prune that would delete the stream's last event (its numbering must go on; `RunStateAuthority.pruneEvents`). */
export function checkPruneBound(stream: string, beforeSeq: number, lastSeq: number): void {
  if (beforeSeq > 1 && beforeSeq > lastSeq) {
    throw new AuthorityFailure(
      `Cannot prune events before ${beforeSeq} of stream "${stream}": its last sequence number is ${lastSeq}, and the last event is always kept.`,
    );
  }
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

/** The message of a thrown value, for error texts. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The one record kind `listByCreation` serves: the backends index the creation key of these only (issue 32). */
export const CREATION_KIND = "product";

/** Checks the arguments of `listByCreation` (creation-order.ts `CreationPageOptions`); throws `AuthorityFailure`. */
export function checkCreationPage(kind: string, options: CreationPageOptions): void {
  checkName(kind, "kind");
  if (kind !== CREATION_KIND) throw new AuthorityFailure(`listByCreation lists ${CREATION_KIND} records only.`);
  if (typeof options !== "object" || options === null) throw new AuthorityFailure("options must be an object.");
  if (!Number.isSafeInteger(options.limit) || options.limit < 1)
    throw new AuthorityFailure(`limit must be a positive integer, got ${String(options.limit)}.`);
  if (options.projectId !== undefined) checkName(options.projectId, "projectId");
  if (options.after !== undefined) {
    if (typeof options.after.createdAt !== "string") throw new AuthorityFailure("after.createdAt must be a string.");
    checkName(options.after.id, "after.id");
  }
  if (options.containing !== undefined && typeof options.containing !== "string")
    throw new AuthorityFailure("containing must be a string.");
}

/** An `appendEvents` answer stating the summed length of the appended events' stored JSON texts (non-enumerable). */
export function appendedEvents(lastSeq: number, texts: readonly string[]): AppendedEvents {
  let textLength = 0;
  for (const text of texts) textLength += text.length;
  const appended: AppendedEvents = { lastSeq };
  Object.defineProperty(appended, STORED_TEXT_LENGTH, { value: textLength });
  return appended;
}
