/**
 * The core's domain error family (STYLE.md, "Two error families").
 *
 * Owns `DomainError` (a string `code` plus typed `details`) and the small constructor helpers that build one with a
 * plain one-sentence message. The server maps the codes to the numeric wire codes of PROTOCOL.md section 3; this
 * file must never know those numbers, import a `node:` module, or build JSON-RPC errors itself.
 */

/** The `details` carried by each domain error code; mirrors the `data` column of PROTOCOL.md section 3. */
export interface DomainErrorDetails {
  /** An unknown product, goal run, task, checkpoint or session. */
  not_found: { kind: string; id: string };
  /** An operation not allowed in the current phase (or task status). */
  invalid_phase: { phase: string; allowed: string[] };
  /** A leader turn for this product is already running. */
  busy: { productId: string };
  /** A revision or lease is held by another owner (DESIGN.md guarantees 6 and 13). */
  conflict: ConflictDetails;
  /** The run-state authority refused or failed a read or a write (DESIGN.md guarantee 2). */
  persistence_failed: { cause: string; operation: "read" | "write" };
  /** A DAG mutation batch was rejected; `index` is the 0-based position of the offending mutation. */
  invalid_mutation: { index: number; reason: string };
  /** The `projectId`/`sessionId` given does not own the record. */
  ownership: { expected: string; got: string };
  /** A plan that fails DAG validation; `index` is the offending task's (or instance's) index when known. */
  invalid_plan: { reason: string; index?: number };
  /** Any other input the core refuses (a bad argument that passed the wire schema). */
  invalid_input: { reason: string };
}

/** One of the domain error codes. */
export type DomainErrorCode = keyof DomainErrorDetails;

/**
 * An expected failure of a domain operation, with a machine-readable `code` and typed `details`.
 *
 * The message is one plain human sentence that says what was wrong and, where it helps, what to do. Build instances
 * through the helpers below (`notFound`, `invalidPhase`, …) so messages stay consistent. A `DomainError` is never a
 * bug: anything else thrown from the core is one, and the server turns it into an internal error.
 */
export class DomainError<C extends DomainErrorCode = DomainErrorCode> extends Error {
  override readonly name = "DomainError";

  constructor(
    readonly code: C,
    message: string,
    readonly details: DomainErrorDetails[C],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * True when `error` is a `DomainError`, and, when `code` is given, one with that code (narrowing `details`).
 * Does NOT match errors from other realms by shape; only real instances.
 */
export function isDomainError<C extends DomainErrorCode>(error: unknown, code?: C): error is DomainError<C> {
  return error instanceof DomainError && (code === undefined || error.code === code);
}

// ---------------------------------------------------------------------------------------------------------------
// Constructor helpers. Each returns (never throws) the error so call sites read `throw notFound("product", id)`.

/** "Product prd_x was not found." `kind` is a lower-case noun such as `product`, `goal run`, `task`, `checkpoint`. */
export function notFound(kind: string, id: string): DomainError<"not_found"> {
  return new DomainError("not_found", `${capitalise(kind)} ${id} was not found.`, { kind, id });
}

/**
 * "Product prd_x is completed; pause is allowed only while executing or paused."
 *
 * `phase` is the current phase (or task status), `allowed` the phases in which the operation is permitted.
 * `context.subject` names the thing ("Product prd_x", "Task t3"; default "The product"), `context.operation` the
 * attempted operation ("pause"; default "this operation").
 */
export function invalidPhase(
  phase: string,
  allowed: readonly string[],
  context: { subject?: string; operation?: string } = {},
): DomainError<"invalid_phase"> {
  const subject = context.subject ?? "The product";
  const operation = context.operation ?? "this operation";
  const where =
    allowed.length === 0 ? "never allowed here" : `allowed only while ${joinWords(allowed.map(humanise), "or")}`;
  return new DomainError("invalid_phase", `${subject} is ${humanise(phase)}; ${operation} is ${where}.`, {
    phase,
    allowed: [...allowed],
  });
}

/**
 * "This server is shutting down; product prd_x was not changed …" (code `busy`, PROTOCOL.md section 3): a request
 * that would load or drive a product, arriving after `ProductService.shutdown` began, is refused rather than start
 * work nobody will stop.
 */
export function shuttingDown(productId: string, outcome = "was not changed"): DomainError<"busy"> {
  return new DomainError(
    "busy",
    `This server is shutting down, so product ${productId} ${outcome}; send the request again to a running server.`,
    { productId },
  );
}

/** "A leader turn for product prd_x is already running; wait for it to finish and try again." */
export function busy(productId: string): DomainError<"busy"> {
  return new DomainError(
    "busy",
    `A leader turn for product ${productId} is already running; wait for it to finish and try again.`,
    { productId },
  );
}

/**
 * `conflict` details (PROTOCOL.md section 3, `-32012` data): the lease's owner, when it expires (ISO-8601 UTC, as far
 * as this process believes it) and whether that owner is live (false when the lease expired or its process is
 * provably gone, guarantee 13); or the record's current revision.
 */
export interface ConflictDetails {
  owner?: string;
  revision?: number;
  expiresAt?: string;
  live?: boolean;
}

/**
 * A revision or lease held by someone else (DESIGN.md guarantees 6 and 13). `subject` names the record ("Product
 * prd_x"; default "The record"). The message says to reload rather than retry blindly, and when a lease will expire.
 */
export function conflict(details: ConflictDetails, subject = "The record"): DomainError<"conflict"> {
  const clean: ConflictDetails = {};
  if (details.owner !== undefined) clean.owner = details.owner;
  if (details.revision !== undefined) clean.revision = details.revision;
  if (details.expiresAt !== undefined) clean.expiresAt = details.expiresAt;
  if (details.live !== undefined) clean.live = details.live;
  const message =
    clean.owner !== undefined
      ? clean.expiresAt !== undefined && clean.live !== false
        ? `${subject} is being driven by another server process (owner ${clean.owner}) whose lease runs until ` +
          `${clean.expiresAt}; use that process, or retry after that time if it stopped.`
        : `${subject} is held by another owner (${clean.owner}); stop that process or wait for its lease to expire.`
      : clean.revision !== undefined
        ? `${subject} was changed by someone else (now at revision ${clean.revision}); reload it before writing again.`
        : `${subject} was changed by someone else; reload it before writing again.`;
  return new DomainError("conflict", message, clean);
}

/**
 * The run-state authority failed a write (DESIGN.md guarantee 2) or, with `operation: "read"`, a read. `cause` may be
 * anything thrown; its message is kept in `details.cause` and the original value as the error's `cause`.
 */
export function persistenceFailed(
  cause: unknown,
  operation: "read" | "write" = "write",
): DomainError<"persistence_failed"> {
  const text = describeCause(cause);
  return new DomainError(
    "persistence_failed",
    operation === "write"
      ? `The run-state authority failed a write (${text}); the product is paused until it is resumed.`
      : `The run-state authority failed a read (${text}); nothing was changed, try again once it is reachable.`,
    { cause: text, operation },
    { cause },
  );
}

/** "Mutation 2 was rejected: task t9 does not exist." `index` is 0-based; `reason` is one sentence. */
export function invalidMutation(index: number, reason: string): DomainError<"invalid_mutation"> {
  return new DomainError("invalid_mutation", `Mutation ${index} was rejected: ${lowerFirst(stripDot(reason))}.`, {
    index,
    reason,
  });
}

/** "The record belongs to prj_a, not prj_b." `subject` names the record (default "The record"). */
export function ownership(expected: string, got: string, subject = "The record"): DomainError<"ownership"> {
  return new DomainError("ownership", `${subject} belongs to ${expected}, not ${got}.`, { expected, got });
}

/** "The plan is invalid: task t2 depends on unknown task t9." `index` is the offending task's index when known. */
export function invalidPlan(reason: string, index?: number): DomainError<"invalid_plan"> {
  const details: { reason: string; index?: number } = { reason };
  if (index !== undefined) details.index = index;
  return new DomainError("invalid_plan", `The plan is invalid: ${lowerFirst(stripDot(reason))}.`, details);
}

/** Any other refused input; `reason` is used as the message (one sentence). */
export function invalidInput(reason: string): DomainError<"invalid_input"> {
  return new DomainError("invalid_input", `${stripDot(reason)}.`, { reason });
}

// ---------------------------------------------------------------------------------------------------------------
// Message helpers

function capitalise(text: string): string {
  return text.length === 0 ? text : text.charAt(0).toUpperCase() + text.slice(1);
}

/** Lower-cases the first letter unless the first word looks like an identifier or acronym (`Task t1` → `task t1`). */
function lowerFirst(text: string): string {
  const first = /^\S+/.exec(text)?.[0] ?? "";
  if (first.length > 1 && first === first.toUpperCase()) return text;
  return text.charAt(0).toLowerCase() + text.slice(1);
}

function stripDot(text: string): string {
  return text.trim().replace(/[.\s]+$/u, "");
}

/** `awaiting_confirmation` → `awaiting confirmation`. */
function humanise(word: string): string {
  return word.replace(/_/g, " ");
}

/** `["a"]` → `a`; `["a","b"]` → `a or b`; `["a","b","c"]` → `a, b or c`. */
function joinWords(words: readonly string[], conjunction: string): string {
  if (words.length <= 1) return words.join("");
  return `${words.slice(0, -1).join(", ")} ${conjunction} ${words[words.length - 1] ?? ""}`;
}

function describeCause(cause: unknown): string {
  if (cause instanceof Error) return cause.message || cause.name;
  if (typeof cause === "string") return cause;
  try {
    return JSON.stringify(cause) ?? String(cause);
  } catch {
    return String(cause);
  }
}
