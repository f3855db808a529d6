/**
 * The control verbs (issue 29): `pause`, `cancel`, `checkpoint`, `retry`, `rollback`, `confirm`, `answer`, `message`,
 * `delete` (and `resume`, in run.ts). Each files a control request through the run-state authority for the server
 * that owns the product (src/operator/control-client.ts; docs/PROTOCOL.md "Control requests") and prints its answer.
 * When no server takes it (nobody owns the product), the verb takes ownership as `resume` does: it starts a server
 * of its own on the store, calls the same JSON-RPC method, and, when that leaves the product executing, follows it
 * to its end (Ctrl-C pauses).
 *
 * Owns the verbs' arguments, the choice between asking and taking ownership, and what is printed.
 */
import { existsSync, readFileSync } from "node:fs";
import { describeLocation, openStore, stateLocation } from "../adapters/persistence/open-store.js";
import { ProcessLiveness } from "../adapters/system/process-liveness.js";
import { isDomainError } from "../core/errors.js";
import { AuthorityFailure } from "../core/ports.js";
import type { ControlMethod } from "../core/product/control-requests.js";
import { RequestId } from "../core/product/control-requests.js";
import { requestControl, type ControlCall, type ControlOutcome } from "../operator/control-client.js";
import { inCliWords, storeFlags } from "../operator/cli-verbs.js";
import { orNotFound } from "../operator/not-found.js";
import { openReader } from "../operator/open-reader.js";
import { withServer } from "../operator/server-client.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";
import {
  DRIVE_OPTIONS,
  answeredByServer,
  commandFlags,
  followToEnd,
  serveArgs,
  stoppedNote,
  write,
  type DriveValues,
} from "./drive.js";

const OPTIONS = {
  ...DRIVE_OPTIONS,
  "request-id": { type: "string" },
  "timeout-ms": { type: "string" },
  json: { type: "boolean" },
} as const;

interface ControlValues extends DriveValues {
  "request-id"?: string;
  "timeout-ms"?: string;
  json?: boolean;
}

/** What a verb asks for, from its arguments. */
type VerbCall = Omit<ControlCall, "requestId" | "answerMs">;

/** Methods that leave a product executing in the server that ran them: a server of our own then follows it. */
const STARTS_EXECUTION: readonly ControlMethod[] = [
  "product.resume",
  "product.confirm",
  "product.rollback",
  "product.replayTask",
];

/** One line saying what the answer means. */
export function describeAnswer(call: VerbCall, result: Record<string, unknown>): string {
  const id = call.productId;
  switch (call.method) {
    case "product.pause":
      return `paused ${id}`;
    case "product.resume":
      return `resumed ${id}`;
    case "product.cancel":
      return `cancelled ${id}`;
    case "product.checkpoint":
      return `checkpoint ${String(result.checkpointId)} of ${id} at ${String(result.at)}`;
    case "product.rollback":
      return `rolled ${id} back to ${String(result.checkpointId)}; phase ${String(result.phase)}`;
    case "product.replayTask": {
      const reset = Array.isArray(result.reset) ? (result.reset as string[]) : [];
      return `reset ${reset.join(", ")} of ${id}: ${reset.length === 1 ? "it runs" : "they run"} again`;
    }
    case "product.confirm":
      return `confirmed ${id}; executing`;
    case "product.message":
      return String(result.response ?? "");
    case "product.mutate":
      return `applied ${String(result.applied)} mutations to ${id}; plan version ${String(result.version)}`;
    case "product.delete":
      return result.deleted === true ? `deleted ${id}` : `nothing to delete: ${id} was not in the store`;
  }
}

function timeoutOf(values: ControlValues, command: string): number | undefined {
  const text = values["timeout-ms"];
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`--timeout-ms must be a positive integer, not "${text}".`, command);
  return n;
}

/**
 * Files `call` for the product's owner and prints the outcome. Resolves with the exit code, or `undefined` when no
 * server took the request (it was withdrawn: nothing ran) and the caller should take ownership.
 */
export async function tryControlFirst(
  values: ControlValues,
  call: VerbCall,
  command = "control",
): Promise<number | undefined> {
  const requestId = values["request-id"];
  if (requestId !== undefined && !RequestId.safeParse(requestId).success) {
    throw new UsageError(`--request-id takes 1 to 100 letters, digits, ".", "_" or "-", not "${requestId}".`, command);
  }
  const answerMs = timeoutOf(values, command);
  const location = stateLocation(values.state);
  if (location.kind === "sqlite" && !existsSync(location.path)) {
    throw new AuthorityFailure(`There is no state file at ${location.path}: nothing has run with this store yet.`);
  }
  const authority = await openStore(location);
  let outcome: ControlOutcome;
  try {
    outcome = await requestControl(authority, new ProcessLiveness(), {
      ...call,
      ...(requestId !== undefined ? { requestId } : {}),
      ...(answerMs !== undefined ? { answerMs } : {}),
    });
  } catch (err) {
    if (isDomainError(err, "not_found")) {
      process.stderr.write(`acp-orchestrator: ${err.message.replace(/\.$/, "")} in ${describeLocation(location)}.\n`);
      return 1;
    }
    throw err;
  } finally {
    await authority.close();
  }
  // Unclaimed with no owner: nothing ran, and this command's own server runs it next (its outcome is what is printed).
  const handedOver = outcome.kind === "unclaimed" && outcome.owner === undefined;
  if (values.json && !handedOver) write(`${JSON.stringify(outcome)}\n`);
  switch (outcome.kind) {
    case "done":
      if (!values.json) {
        write(`${describeAnswer(call, outcome.result)}\n`);
        write(
          `  (by ${outcome.by}: accepted after ${outcome.acceptedAfterMs} ms, answered after ${outcome.answeredAfterMs} ms)\n`,
        );
      }
      return 0;
    case "refused":
      process.stderr.write(
        `acp-orchestrator: ${inCliWords(outcome.error.message, call.productId, storeFlags(values.state))}\n`,
      );
      return outcome.invalidRecord ? 1 : refusalExitCode(outcome.error.code);
    case "unanswered":
      process.stderr.write(
        `acp-orchestrator: ${outcome.by} accepted request ${outcome.requestId} but ` +
          (outcome.ownerDead ? "its process died before it answered" : "has not answered yet") +
          `; see "acp-orchestrator status ${call.productId}" for what happened.\n`,
      );
      return 1;
    case "unclaimed":
      if (outcome.owner === undefined) return undefined;
      process.stderr.write(
        `acp-orchestrator: the server that owns ${call.productId} (${outcome.owner}) did not take the request; ` +
          "it may be an older acp-orchestrator. Nothing was changed.\n",
      );
      return 1;
  }
}

/**
 * A product verb given a goal run id (`goal_…`): one sentence that says what a goal run is steered by and names its
 * current product, with the command for it (a new user's trial: "pause goal_…" said only that there was no product).
 * The command line has no goal-run verbs: x/goal.* is the ACP client's (docs/HOSTS.md). Exit 2; 1 when it is unknown.
 */
export async function refuseGoalRun(state: string | undefined, goalRunId: string, verb: string): Promise<number> {
  const { reader, where } = await openReader(state);
  try {
    return await orNotFound(where, async () => {
      const goal = (await reader.goalStatus(goalRunId)) as { status: string; productId?: string };
      const product = goal.productId;
      const then =
        verb === "pause" ? "; the goal run then waits, blocked, until its client resumes it (x/goal.resume)" : "";
      const current =
        product === undefined
          ? ""
          : ` Its current product is ${product}: "acp-orchestrator ${verb} ${product}" acts on that product alone${then}.`;
      process.stderr.write(
        `acp-orchestrator: ${goalRunId} is a goal run (${goal.status}), not a product: "${verb}" acts on a product, ` +
          `and a goal run is steered by the ACP client that started it (x/goal.pause, x/goal.resume, x/goal.stop; ` +
          `docs/HOSTS.md).${current}\n`,
      );
      return 2;
    });
  } finally {
    await reader.close();
  }
}

/** With no owner: a server of our own runs the method, and follows the product when it is left executing. */
async function takeOwnership(values: ControlValues, call: VerbCall): Promise<number> {
  // A server killed under this command is reported once, by withServer, with the command that resumes the product.
  const note = () => stoppedNote(call.productId, values);
  return withServer({ serveArgs: serveArgs(values), cwd: process.cwd(), stoppedNote: note }, async (session) => {
    const { productId } = call;
    try {
      if (call.waitingTask !== undefined) {
        const status = await session.request<{ tasks: { taskId: string; status: string }[] }>("product.status", {
          productId,
        });
        const first = status.tasks.find((t) => t.status === "waiting");
        if (first?.taskId !== call.waitingTask) {
          const task = status.tasks.find((t) => t.taskId === call.waitingTask);
          process.stderr.write(
            `acp-orchestrator: ${
              !task
                ? `Product ${productId} has no task ${call.waitingTask}.`
                : task.status !== "waiting"
                  ? `Task ${call.waitingTask} is ${task.status}, not waiting for an answer.`
                  : `Task ${first?.taskId ?? ""} waits for an answer before ${call.waitingTask}: answer it first.`
            }\n`,
          );
          return 1;
        }
      }
      const result = await session.request<Record<string, unknown>>(call.method, { ...call.params, productId });
      if (values.json) write(`${JSON.stringify({ kind: "done", result, by: "this command's server" })}\n`);
      else write(`${describeAnswer(call, result)}\n  (no server owned ${productId}: done by this command's server)\n`);
      if (!STARTS_EXECUTION.includes(call.method)) return 0;
      const status = await session.request<{ phase: string }>("product.status", { productId });
      return status.phase === "executing" ? followToEnd(session, productId, values) : 0;
    } catch (err) {
      if (!answeredByServer(err)) throw err; // the connection is gone: withServer says how the server ended
      const e = err as { message?: string; code: number; data?: unknown };
      if (values.json) write(`${JSON.stringify(refusedByOwnServer(e))}\n`);
      process.stderr.write(
        `acp-orchestrator: ${inCliWords(e.message ?? String(err), productId, commandFlags(values))}\n`,
      );
      return refusalExitCode(WIRE_CODE_NAMES[e.code] ?? String(e.code));
    }
  });
}

/**
 * The exit code of a refused request (docs/OPERATOR.md "Exit codes"): 2 when what the user gave is invalid
 * (`invalid_input`, e.g. a `confirm --edit` plan without titles: the same kind of mistake as an unreadable --edit
 * file, which is a UsageError), else 1. Owner and own-server refusals alike (a new user's trial got 1 and 2). A
 * stored request record the owner refused as not valid (`--request-id` of a damaged record) is 1: the command line
 * was fine.
 */
function refusalExitCode(code: string): number {
  return code === "invalid_input" ? 2 : 1;
}

/** PROTOCOL.md section 3's numeric codes by the names a control request's refusal carries (control-client.ts). */
const WIRE_CODE_NAMES: Readonly<Record<number, string>> = {
  [-32602]: "invalid_input",
  [-32002]: "not_found",
  [-32010]: "invalid_phase",
  [-32011]: "busy",
  [-32012]: "conflict",
  [-32013]: "persistence_failed",
  [-32014]: "invalid_mutation",
  [-32016]: "ownership",
};

/**
 * `--json`'s outcome for a request this command's own server refused: the shape of an owner's refusal
 * (`{kind: "refused", error: {code, message, details}}`), with the wire code beside the name (a new user's trial got
 * `{"kind":"unclaimed"}` here, the outcome of the first attempt, not of the request).
 */
function refusedByOwnServer(e: { message?: string; code: number; data?: unknown }) {
  const code = WIRE_CODE_NAMES[e.code] ?? String(e.code);
  const error = { code, wireCode: e.code, message: e.message ?? "", details: e.data ?? {} };
  return { kind: "refused", error, by: "this command's server" };
}

interface VerbSpec {
  name: string;
  args: string;
  summary: string;
  details: string;
  /** Positionals after the product id: [min, max, what]. */
  extra: [number, number, string];
  extraOptions?: Record<string, { type: "string" | "boolean" }>;
  /** The Options lines of `extraOptions` (each `  --name VALUE  what it does`, ending with a newline). */
  extraHelp?: string;
  toCall(productId: string, extra: string[], values: Record<string, unknown>): VerbCall;
}

const COMMON_HELP = `Options:
  --state PATH|URL   the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --config FILE      agent registry file, for a server of this command's own (when no server owns the product)
  --request-id ID    idempotence key: the same id is the same request (answered again, never run twice)
  --timeout-ms N     how long the owner may take to answer once it accepted (default 120000)
  --json             print the outcome as JSON
  --log-level LEVEL  the log level of a server of this command's own, plain lines on stderr (default warn)
`;

/** What each option's value is called in a usage line. */
const VALUE_NAMES: Readonly<Record<string, string>> = {
  state: "PATH|URL",
  config: "FILE",
  "log-level": "LEVEL",
  "request-id": "ID",
  "timeout-ms": "N",
  edit: "plan.json",
};

/**
 * A verb's usage line, its options generated from the option table its parser uses (`parseCommandArgs`), so the two
 * cannot drift (a new user's trial: `help retry` and `help confirm` named three of their six and seven options).
 */
export function verbSynopsis(name: string, args: string, options: Readonly<Record<string, { type: string }>>): string {
  const flags = Object.entries(options).map(([option, { type }]) =>
    type === "boolean" ? `[--${option}]` : `[--${option} ${VALUE_NAMES[option] ?? "VALUE"}]`,
  );
  return [name, "ID", ...(args ? [args] : []), ...flags].join(" ");
}

function verb(spec: VerbSpec): Command {
  const options = { ...spec.extraOptions, ...OPTIONS };
  const synopsis = verbSynopsis(spec.name, spec.args, options);
  return {
    name: spec.name,
    synopsis,
    options,
    summary: spec.summary,
    help: `Usage: acp-orchestrator ${synopsis}

${spec.details}
The server that owns product ID executes it (it is asked through the store and answers within a second); when no
server owns it, this command starts one of its own, as "resume" does${
      STARTS_EXECUTION.includes(spec.toCall("x", ["x", "x"], {}).method)
        ? ", and follows the product to its end (Ctrl-C pauses it)"
        : ""
    }.

${COMMON_HELP}${spec.extraHelp ?? ""}`,
    async run(argv) {
      const { values, positionals } = parseCommandArgs(spec.name, argv, options);
      const [min, max, what] = spec.extra;
      expectPositionals(spec.name, positionals, 1 + min, 1 + max, `a product id${what ? ` and ${what}` : ""}`);
      const [productId, ...extra] = positionals as [string, ...string[]];
      if (productId.startsWith("goal_")) return refuseGoalRun(values.state, productId, spec.name);
      const call = spec.toCall(productId, extra, values);
      const asked = await tryControlFirst(values, call, spec.name);
      return asked ?? takeOwnership(values, call);
    },
  };
}

/** `confirm --edit plan.json`: the edited plan's instances, tasks and budget (PROTOCOL.md `product.confirm`). */
function editedPlan(path: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new UsageError(`--edit ${path} is not a readable JSON file (${(err as Error).message}).`, "confirm");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(`--edit ${path} must hold a plan object with "tasks" (and "instances", "budget").`, "confirm");
  }
  const plan = parsed as Record<string, unknown>;
  const edit: Record<string, unknown> = {};
  for (const key of ["instances", "tasks", "budget"]) if (plan[key] !== undefined) edit[key] = plan[key];
  return edit;
}

export const controlCommands: readonly Command[] = [
  verb({
    name: "pause",
    args: "",
    summary: "pause a product: running tasks stop and are written back, resumable",
    details: "Pauses product ID: scheduling stops, running workers are stopped and their tasks written back.",
    extra: [0, 0, ""],
    toCall: (productId) => ({ productId, method: "product.pause" }),
  }),
  verb({
    name: "cancel",
    args: "",
    summary: "cancel a product for good",
    details: "Cancels product ID for good (terminal): running workers are stopped, unfinished tasks are cancelled.",
    extra: [0, 0, ""],
    toCall: (productId) => ({ productId, method: "product.cancel" }),
  }),
  verb({
    name: "checkpoint",
    args: "",
    summary: "take a manual checkpoint of a product",
    details: "Takes a manual checkpoint of product ID (rollback can restore it).",
    extra: [0, 0, ""],
    toCall: (productId) => ({ productId, method: "product.checkpoint" }),
  }),
  verb({
    name: "retry",
    args: "TASK",
    summary: "run a task and everything downstream of it again",
    details:
      "Resets task TASK of product ID (completed, failed or skipped) and every task downstream of it to pending.",
    extra: [1, 1, "a task id"],
    toCall: (productId, [taskId]) => ({ productId, method: "product.replayTask", params: { taskId } }),
  }),
  verb({
    name: "rollback",
    args: "[CHECKPOINT]",
    summary: "restore a checkpoint (default: the latest) and run on from it",
    details:
      "Restores CHECKPOINT (default: the latest; see status ID) of product ID as its latest state, moves its integration\nbranch back with it (the head it leaves stays reachable), and runs on from there.",
    extra: [0, 1, "a checkpoint id"],
    toCall: (productId, [checkpointId]) => ({
      productId,
      method: "product.rollback",
      ...(checkpointId !== undefined ? { params: { checkpointId } } : {}),
    }),
  }),
  verb({
    name: "confirm",
    args: "",
    summary: "confirm a product's plan (or an edited one) and start it",
    details:
      'Confirms the plan of product ID, waiting for confirmation, and starts it. With --edit, the file\'s "tasks",\n"instances" and "budget" (the shape of product.status\'s plan) replace the leader\'s.',
    extra: [0, 0, ""],
    extraOptions: { edit: { type: "string" } },
    extraHelp: `  --edit plan.json   confirm this edited plan instead of the leader's ("tasks", "instances", "budget")\n`,
    toCall: (productId, _extra, values) => ({
      productId,
      method: "product.confirm",
      ...(typeof values.edit === "string" ? { params: editedPlan(values.edit) } : {}),
    }),
  }),
  verb({
    name: "answer",
    args: "TASK TEXT",
    summary: "answer the question of a waiting task",
    details: "Answers the question task TASK of product ID waits on with TEXT; the task runs again with the answer.",
    extra: [2, 2, "a task id and the answer"],
    toCall: (productId, [taskId, text]) => ({
      productId,
      method: "product.message",
      params: { content: text },
      ...(taskId !== undefined ? { waitingTask: taskId } : {}),
    }),
  }),
  verb({
    name: "message",
    args: "TEXT",
    summary: "send a message to a product's leader",
    details:
      "Sends TEXT to the leader of product ID; while it plans the answer may revise the plan, while it runs it may\nchange the DAG. The leader's answer is printed.",
    extra: [1, 1, "the message"],
    toCall: (productId, [content]) => ({ productId, method: "product.message", params: { content } }),
  }),
  verb({
    name: "delete",
    args: "",
    summary: "delete a product and everything it stored (a live run is stopped first)",
    details:
      "Deletes product ID: a live run is stopped first; its records, worktrees and branches are removed (the user's\nbranches are not touched).",
    extra: [0, 0, ""],
    toCall: (productId) => ({ productId, method: "product.delete" }),
  }),
];
