/**
 * Wire error codes and the shapes of their `data` (PROTOCOL.md section 3).
 *
 * Owns: the numeric codes, one zod schema per error's `data`, the human catalogue the generated reference prints, and
 * the pure conversion of zod issues into `-32602` data. Must never build or throw JSON-RPC errors itself (that is the
 * server's job) and must never import anything but zod.
 */
import * as z from "zod";
import { lazySchema } from "./lazy-schema.js";

/** Every numeric error code the server puts on the wire (PROTOCOL.md section 3, plus ACP's `-32800`). */
export const ErrorCodes = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  RequestCancelled: -32800,
  NotFound: -32002,
  InvalidPhase: -32010,
  Busy: -32011,
  Conflict: -32012,
  PersistenceFailed: -32013,
  InvalidMutation: -32014,
  Ownership: -32016,
} as const;

export type ErrorCodeName = keyof typeof ErrorCodes;
export type ErrorCode = (typeof ErrorCodes)[ErrorCodeName];

/** `-32601` data: the method that was not found, as the client spelled it. */
export const MethodNotFoundData = lazySchema(() => z.object({ method: z.string() }), "MethodNotFoundData");
export type MethodNotFoundData = z.infer<typeof MethodNotFoundData>;

/** One params problem: `path` is the zod path into `params` (keys and array indices), `[]` for the object itself. */
export const ParamsIssue = lazySchema(
  () =>
    z.object({
      path: z.array(z.union([z.string(), z.number()])),
      message: z.string(),
    }),
  "ParamsIssue",
);
export type ParamsIssue = z.infer<typeof ParamsIssue>;

/** `-32602` data: every issue the method's params schema reported. */
export const InvalidParamsData = lazySchema(() => z.object({ issues: z.array(ParamsIssue) }), "InvalidParamsData");
export type InvalidParamsData = z.infer<typeof InvalidParamsData>;

/** What kind of record a `-32002` is about. */
export const NotFoundKind = lazySchema(
  () => z.enum(["product", "goalRun", "task", "checkpoint", "session"]),
  "NotFoundKind",
);
export type NotFoundKind = z.infer<typeof NotFoundKind>;

/** `-32002` data: the kind and id of the unknown record. */
export const NotFoundData = lazySchema(() => z.object({ kind: NotFoundKind, id: z.string() }), "NotFoundData");
export type NotFoundData = z.infer<typeof NotFoundData>;

/** `-32010` data: the current phase (or goal status) and the phases in which the operation is allowed. */
export const InvalidPhaseData = lazySchema(
  () => z.object({ phase: z.string(), allowed: z.array(z.string()) }),
  "InvalidPhaseData",
);
export type InvalidPhaseData = z.infer<typeof InvalidPhaseData>;

/** `-32011` data: the product whose leader turn is already running. */
export const BusyData = lazySchema(() => z.object({ productId: z.string() }), "BusyData");
export type BusyData = z.infer<typeof BusyData>;

/**
 * `-32012` data: the other owner of the lease, until when its lease runs and whether it is live (false when it is
 * known to be dead, PROTOCOL.md section 5), and/or the stored revision, when known.
 */
export const ConflictData = lazySchema(
  () =>
    z.object({
      owner: z.string().optional(),
      revision: z.number().int().optional(),
      expiresAt: z.string().optional(),
      live: z.boolean().optional(),
    }),
  "ConflictData",
);
export type ConflictData = z.infer<typeof ConflictData>;

/** `-32013` data: why the run-state authority refused or failed a read or a write, in plain words, and which it was. */
export const PersistenceFailedData = lazySchema(
  () => z.object({ cause: z.string(), operation: z.enum(["read", "write"]) }),
  "PersistenceFailedData",
);
export type PersistenceFailedData = z.infer<typeof PersistenceFailedData>;

/** `-32014` data: the 0-based index of the first rejected mutation of the batch and why it was rejected. */
export const InvalidMutationData = lazySchema(
  () => z.object({ index: z.number().int().min(0), reason: z.string() }),
  "InvalidMutationData",
);
export type InvalidMutationData = z.infer<typeof InvalidMutationData>;

/** `-32016` data: the owner the record has and the owner the request named. */
export const OwnershipData = lazySchema(() => z.object({ expected: z.string(), got: z.string() }), "OwnershipData");
export type OwnershipData = z.infer<typeof OwnershipData>;

/** One row of the error table of PROTOCOL.md section 3, for the generated reference and for lookups. */
export interface ErrorEntry {
  readonly code: ErrorCode;
  readonly name: ErrorCodeName;
  /** When the error is returned, one phrase. */
  readonly when: string;
  /** Schema of `data`; absent when the error carries no `data`. */
  readonly data?: z.ZodType;
}

/** The error table, in PROTOCOL.md order. Every code of `ErrorCodes` appears exactly once. */
export const errorCatalog: readonly ErrorEntry[] = [
  { code: ErrorCodes.ParseError, name: "ParseError", when: "the line is not JSON (answered with `id: null`)" },
  {
    code: ErrorCodes.InvalidRequest,
    name: "InvalidRequest",
    when: "not a JSON-RPC message, a batch, or any request other than `initialize` before `initialize` succeeded",
  },
  {
    code: ErrorCodes.MethodNotFound,
    name: "MethodNotFound",
    when: "unknown method (notifications with unknown methods are ignored)",
    data: MethodNotFoundData,
  },
  {
    code: ErrorCodes.InvalidParams,
    name: "InvalidParams",
    when: "params fail the method's schema (unknown keys included)",
    data: InvalidParamsData,
  },
  {
    code: ErrorCodes.InternalError,
    name: "InternalError",
    when: "a bug; the message is generic, details go to the log",
  },
  {
    code: ErrorCodes.RequestCancelled,
    name: "RequestCancelled",
    when: "the request was cancelled with `$/cancel_request` (ACP)",
  },
  {
    code: ErrorCodes.NotFound,
    name: "NotFound",
    when: "unknown product, goal run, task, checkpoint or session",
    data: NotFoundData,
  },
  {
    code: ErrorCodes.InvalidPhase,
    name: "InvalidPhase",
    when: "operation not allowed in the current phase/status",
    data: InvalidPhaseData,
  },
  {
    code: ErrorCodes.Busy,
    name: "Busy",
    when: "a leader turn for this product is already running",
    data: BusyData,
  },
  {
    code: ErrorCodes.Conflict,
    name: "Conflict",
    when: "a revision or lease held by another owner",
    data: ConflictData,
  },
  {
    code: ErrorCodes.PersistenceFailed,
    name: "PersistenceFailed",
    when: "the run-state authority refused or failed a write",
    data: PersistenceFailedData,
  },
  {
    code: ErrorCodes.InvalidMutation,
    name: "InvalidMutation",
    when: "a DAG mutation batch is rejected (cycle, unknown id, touches a running/completed task)",
    data: InvalidMutationData,
  },
  {
    code: ErrorCodes.Ownership,
    name: "Ownership",
    when: "`projectId`/`sessionId` given does not own the record",
    data: OwnershipData,
  },
];

/** The structural part of a zod error this module needs (works for `z.ZodError` and `z.core.$ZodError`). */
export interface IssueSource {
  readonly issues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[];
}

/**
 * Converts a failed params parse into the `data` of a `-32602` error (PROTOCOL.md section 3).
 *
 * Symbol path segments (never produced by JSON input) are stringified. Does NOT build the error object or its
 * message; does not log. Pure.
 */
export function invalidParamsData(error: IssueSource): InvalidParamsData {
  return {
    issues: error.issues.map((issue) => ({
      path: issue.path.map((segment) => (typeof segment === "number" ? segment : String(segment))),
      message: issue.message,
    })),
  };
}

/** The longest list of allowed values a message spells out; longer lists end with "…". */
const MAX_NAMED_VALUES = 20;

function valueList(values: readonly unknown[]): string {
  const named = values.slice(0, MAX_NAMED_VALUES).map((v) => (typeof v === "string" ? v : JSON.stringify(v)));
  return `${named.join(", ")}${values.length > MAX_NAMED_VALUES ? ", …" : ""}`;
}

/** The issue fields `plainIssueMessage` reads (zod's raw issue, as an error map receives it). */
interface RawIssueView {
  code?: string;
  input?: unknown;
  values?: readonly unknown[];
  discriminator?: string;
  inst?: { _zod?: { propValues?: Record<string, ReadonlySet<unknown>> } };
  /** too_small / too_big: what is bounded (`number`, `string`, `array`…), the bound, whether it is allowed. */
  origin?: string;
  minimum?: number | bigint;
  maximum?: number | bigint;
  inclusive?: boolean;
}

/** Nouns of what a length bound counts, by zod's `origin`. */
const COUNTED: Record<string, [string, string]> = {
  string: ["character", "characters"],
  array: ["item", "items"],
  set: ["item", "items"],
};

/**
 * A size or length bound in plain words (`must be at least 1`, `must not be empty`, `must be at most 1,000
 * characters long`, `must have at most 1000 items`), or `undefined` for a bound of another kind.
 */
function boundMessage(i: RawIssueView): string | undefined {
  const low = i.code === "too_small";
  const bound = low ? i.minimum : i.maximum;
  if (bound === undefined) return undefined;
  const n = Number(bound);
  if (i.origin === "number" || i.origin === "int" || i.origin === "bigint") {
    if (i.inclusive === false) return low ? `must be greater than ${n}` : `must be less than ${n}`;
    return low ? `must be at least ${n}` : `must be at most ${n}`;
  }
  const counted = COUNTED[i.origin ?? ""];
  if (!counted) return undefined;
  if (low && n === 1) return "must not be empty";
  const noun = n === 1 ? counted[0] : counted[1];
  const verb = i.origin === "string" ? "be" : "have";
  const tail = i.origin === "string" ? ` ${noun} long` : ` ${noun}`;
  return `must ${verb} ${low ? "at least" : "at most"} ${n}${tail}`;
}

/**
 * `schema.safeParse(value)`, with `plainIssueMessage`'s words in the issues when it fails. A value that parses is
 * parsed without an error map: passing one to zod 4 turns off its compiled fast path for objects (about 1.8 µs per
 * call instead of 0.06-0.15 µs for a one-field params object on this project's machine, the sequential request of
 * figure 2, issue 34), so only a failure is parsed a second time, with the map. Same result either way.
 */
export function safeParsePlain<T extends z.ZodType>(schema: T, value: unknown): z.ZodSafeParseResult<z.output<T>> {
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed : schema.safeParse(value, { error: plainIssueMessage });
}

/**
 * A zod error map (pass it as `safeParse(value, { error: plainIssueMessage })`) that says in plain words what zod's
 * defaults leave vague (a new user's trial read "goal invalid input: expected string, received undefined" and
 * "mutations[0].op invalid input"): a missing field `is required`; a value of a discriminated union whose
 * discriminator is missing or unknown `must be one of addTask, removeTask, …` (the issue's path ends at the
 * discriminator); a value outside an enum or literal `must be one of branch, merge`; a size or length bound
 * `must be at least 1`, `must not be empty`, `must have at most 1000 items` (a new user's trial read "maxParallelTasks
 * too small: expected number to be >=1"). Every other issue, and any message a schema sets itself, keeps zod's (a schema's own message takes precedence over an error map). The message is
 * completed by its path (`Invalid params: goal is required.`, server/wire-errors.ts); codes and `data.issues` shapes
 * are unchanged (PROTOCOL.md section 3). Pure.
 */
export function plainIssueMessage(issue: unknown): string | undefined {
  const i = issue as RawIssueView;
  if (i.code === "invalid_type" && i.input === undefined) return "is required";
  if (i.code === "too_small" || i.code === "too_big") return boundMessage(i);
  if (i.code === "invalid_value" && i.values !== undefined && i.values.length > 0) {
    return i.values.length === 1 ? `must be ${valueList(i.values)}` : `must be one of ${valueList(i.values)}`;
  }
  if (i.code === "invalid_union" && i.discriminator !== undefined) {
    const allowed = i.inst?._zod?.propValues?.[i.discriminator];
    if (allowed === undefined || allowed.size === 0) return undefined;
    const given =
      typeof i.input === "object" && i.input !== null ? (i.input as Record<string, unknown>)[i.discriminator] : null;
    if (given === null) return undefined; // not an object at all: zod's own message says so
    const list = valueList([...allowed]);
    return given === undefined
      ? `is required and must be one of ${list}`
      : `must be one of ${list}, not ${JSON.stringify(given)}`;
  }
  return undefined;
}
