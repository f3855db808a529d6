/**
 * The method table (STYLE.md: one method, one declaration): every request the server serves, every notification
 * either side sends, and every request the server makes of the client, each declared once with its zod schemas.
 *
 * Handler registration, handler types (`ParamsOf`, `ResultOf`, `NotificationParams`, …), params validation, the
 * `initialize` method list and the generated reference (protocol/METHODS.md, protocol/schema.json) all come from
 * here. This file declares; it must never implement behaviour or import anything outside protocol/.
 */
import type { z } from "zod";
import * as acp from "./acp.js";
import {
  AbsolutePath,
  Budget,
  BudgetStatus,
  Count,
  Id,
  Instance,
  Mutation,
  Phase,
  Plan,
  Progress,
  Recovery,
  Task,
  TaskPatch,
  TaskState,
  TaskStatus,
  Timestamp,
} from "./common.js";
import * as goal from "./goal.js";
import * as host from "./host.js";
import { defineMethod, defineNotification, type MethodSpec, type NotificationSpec } from "./method-spec.js";
import * as product from "./product.js";
import * as verify from "./verify.js";

/** A spec whose `method` keeps its literal type, so the typed maps below can look it up by name. */
type Named<S, M extends string> = S & { readonly method: M };

/**
 * `defineMethod` that keeps the method name's literal type (method-spec.ts widens it to `string`).
 * Does nothing at runtime beyond `defineMethod`.
 */
function method<const M extends string, P extends z.ZodType, R extends z.ZodType>(
  spec: MethodSpec<P, R> & { readonly method: M },
): Named<MethodSpec<P, R>, M> {
  return defineMethod(spec) as Named<MethodSpec<P, R>, M>;
}

/** `defineNotification` that keeps the notification name's literal type. */
function notification<const M extends string, P extends z.ZodType>(
  spec: NotificationSpec<P> & { readonly method: M },
): Named<NotificationSpec<P>, M> {
  return defineNotification(spec) as Named<NotificationSpec<P>, M>;
}

const ANY_PHASE: readonly Phase[] = Phase.options;
const NON_TERMINAL: readonly Phase[] = ["planning", "awaiting_confirmation", "executing", "paused"];
const SETTLED_OR_RUNNING: readonly Phase[] = ["executing", "paused", "completed", "failed"];

// ---------------------------------------------------------------------------------------------------------------
// Requests the server serves

/** The stable ACP v1 methods (PROTOCOL.md section 4). Served under their names only. */
export const acpMethods = [
  method({
    method: "initialize",
    extension: false,
    params: acp.InitializeParams,
    result: acp.InitializeResult,
    summary:
      "Negotiates the protocol version (an unsupported one is answered with 1, never an error) and advertises the " +
      "capabilities, every extension method and every extension notification.",
  }),
  method({
    method: "session/new",
    extension: false,
    params: acp.SessionNewParams,
    result: acp.SessionNewResult,
    summary:
      "Creates a session: a conversation with the leader about one product at a time. Answers its id, modes and " +
      "config options, then announces the commands (`available_commands_update`).",
  }),
  method({
    method: "session/load",
    extension: false,
    params: acp.SessionLoadParams,
    result: acp.SessionLoadResult,
    summary:
      "Replays the session's conversation (user and leader messages, the latest plan, each task's tool call in its " +
      "latest state) as `session/update` notifications, then answers `{modes, configOptions}` and announces the " +
      "commands (`available_commands_update`).",
  }),
  method({
    method: "session/resume",
    extension: false,
    params: acp.SessionResumeParams,
    result: acp.SessionResumeResult,
    summary:
      "Opens a stored session again without replaying anything; answers `{modes, configOptions}` and announces the " +
      "commands (`available_commands_update`).",
  }),
  method({
    method: "session/delete",
    extension: false,
    params: acp.SessionDeleteParams,
    result: acp.SessionDeleteResult,
    summary:
      "Forgets the session (its running turn is cancelled); an unknown id succeeds silently, and the session leaves " +
      "`session/list`. The products it started are kept.",
  }),
  method({
    method: "session/set_mode",
    extension: false,
    params: acp.SessionSetModeParams,
    result: acp.SessionSetModeResult,
    summary:
      "Switches the session's mode (`confirm`, `auto`, `goal`), announced by `current_mode_update`; an unknown " +
      "mode is `-32602`.",
  }),
  method({
    method: "session/set_config_option",
    extension: false,
    params: acp.SessionSetConfigOptionParams,
    result: acp.SessionSetConfigOptionResult,
    summary:
      "Sets one config option (`leader`, `parallelism`, `isolation`) for products started later in the session; " +
      "answers the complete list, also announced by `config_option_update`. An unknown option or value is `-32602`.",
  }),
  method({
    method: "session/list",
    extension: false,
    params: acp.SessionListParams,
    result: acp.SessionListResult,
    summary: "Lists the sessions, optionally only those of one `cwd`.",
  }),
  method({
    method: "session/close",
    extension: false,
    params: acp.SessionCloseParams,
    result: acp.SessionCloseResult,
    summary: "Cancels the session's ongoing work as `session/cancel` would, frees the session, and answers `{}`.",
  }),
  method({
    method: "session/prompt",
    extension: false,
    params: acp.SessionPromptParams,
    result: acp.SessionPromptResult,
    summary:
      "Runs one turn: the first prompt (or any prompt once the product is terminal) starts a product with the text " +
      "as its goal; later prompts confirm the plan or are messages to the leader. Ends with `end_turn`, or " +
      "`cancelled` after `session/cancel`.",
  }),
] as const;

/** The `product.*` extension methods (PROTOCOL.md section 5). Each is also served with a leading `_`. */
export const productMethods = [
  method({
    method: "product.plan",
    extension: true,
    params: product.PlanParams,
    result: product.PlanResult,
    summary:
      "Starts a product and its planning dialogue; answers before any notification about the product is sent, and " +
      "the leader works asynchronously. `allowedAgents` omitted = every ready agent, `[]` = the leader alone.",
  }),
  method({
    method: "product.message",
    extension: true,
    params: product.MessageParams,
    result: product.MessageResult,
    summary:
      "Sends a user message to the leader (with `askId` when it answers a `product.leaderAsk`); during planning " +
      "the answer may carry a revised plan, during execution DAG mutations.",
    allowedIn: ["planning", "awaiting_confirmation", "executing", "paused"],
  }),
  method({
    method: "product.confirm",
    extension: true,
    params: product.ConfirmParams,
    result: product.ConfirmResult,
    summary:
      "Confirms the plan and starts execution; `instances` and `tasks`, when given, are the user's edited plan, " +
      "else the leader's plan runs. The plan is persisted before the first task starts.",
    allowedIn: ["awaiting_confirmation"],
  }),
  method({
    method: "product.status",
    extension: true,
    params: product.StatusParams,
    result: product.StatusResult,
    summary:
      "Reports the product's phase, plan, task states, progress, budget use, checkpoints, dropped records and, " +
      "for a paused or failed run, how to recover. Never writes.",
    allowedIn: ANY_PHASE,
  }),
  method({
    method: "product.list",
    extension: true,
    params: product.ListParams,
    result: product.ListResult,
    summary: "Lists products, persisted ones included, optionally filtered by project and phase. Never writes.",
  }),
  method({
    method: "product.pause",
    extension: true,
    params: product.PauseParams,
    result: product.PauseResult,
    summary: "Stops scheduling and interrupts running tasks; idempotent on a paused product.",
    allowedIn: ["executing", "paused"],
  }),
  method({
    method: "product.resume",
    extension: true,
    params: product.ResumeParams,
    result: product.ResumeResult,
    summary:
      "Resumes a paused product, or an executing one without a live owner (after a restart); " +
      "`additionalBudget` raises the limits.",
    allowedIn: ["paused", "executing"],
  }),
  method({
    method: "product.cancel",
    extension: true,
    params: product.CancelParams,
    result: product.CancelResult,
    summary: "Cancels the product for good (terminal).",
    allowedIn: NON_TERMINAL,
  }),
  method({
    method: "product.checkpoint",
    extension: true,
    params: product.CheckpointParams,
    result: product.CheckpointResult,
    summary: "Takes a manual checkpoint of the persisted state.",
    allowedIn: SETTLED_OR_RUNNING,
  }),
  method({
    method: "product.checkpoints",
    extension: true,
    params: product.CheckpointsParams,
    result: product.CheckpointsResult,
    summary: "Lists the product's checkpoints, oldest first.",
    allowedIn: ANY_PHASE,
  }),
  method({
    method: "product.rollback",
    extension: true,
    params: product.RollbackParams,
    result: product.RollbackResult,
    summary:
      "Restores a checkpoint (default: the latest) as the latest state and resumes through the normal resume path.",
    allowedIn: SETTLED_OR_RUNNING,
  }),
  method({
    method: "product.replayTask",
    extension: true,
    params: product.ReplayTaskParams,
    result: product.ReplayTaskResult,
    summary:
      "Resets a completed, failed or skipped task and everything downstream of it to `pending` and runs them again.",
    allowedIn: SETTLED_OR_RUNNING,
  }),
  method({
    method: "product.mutate",
    extension: true,
    params: product.MutateParams,
    result: product.MutateResult,
    summary: "Applies a batch of DAG mutations, all or nothing; a rejected batch is `-32014` with the failing index.",
    allowedIn: ["awaiting_confirmation", "executing", "paused"],
  }),
  method({
    method: "product.delete",
    extension: true,
    params: product.DeleteParams,
    result: product.DeleteResult,
    summary: "Deletes the product and its stored records; a live run is stopped first.",
    allowedIn: ANY_PHASE,
  }),
] as const;

/** The `x/goal.*` extension methods (PROTOCOL.md section 6). Each is also served with a leading `_`. */
export const goalMethods = [
  method({
    method: "x/goal.start",
    extension: true,
    params: goal.GoalStartParams,
    result: goal.GoalStartResult,
    summary:
      "Starts a goal run and answers at once: the leader derives acceptance criteria, then phases (one product each) " +
      "run and are assessed until every criterion passes, progress stalls, a budget is spent, or the user stops it.",
  }),
  method({
    method: "x/goal.status",
    extension: true,
    params: goal.GoalStatusParams,
    result: goal.GoalStatusResult,
    summary: "The goal run's status, rebuilt from its events: criteria, phase, queued messages, tokens used.",
  }),
  method({
    method: "x/goal.list",
    extension: true,
    params: goal.GoalListParams,
    result: goal.GoalListResult,
    summary: "Goal runs of one project, or of every project (persisted ones too).",
  }),
  method({
    method: "x/goal.pause",
    extension: true,
    params: goal.GoalPauseParams,
    result: goal.GoalPauseResult,
    summary: "Pauses the goal run and its running phase's product; no phase or leader turn starts until resumed.",
  }),
  method({
    method: "x/goal.resume",
    extension: true,
    params: goal.GoalResumeParams,
    result: goal.GoalResumeResult,
    summary:
      "Resumes a paused, blocked or budget-limited goal run (with `additionalBudget`, spent counters kept), or one " +
      "whose server stopped; a stopped or ended run cannot be resumed.",
  }),
  method({
    method: "x/goal.stop",
    extension: true,
    params: goal.GoalStopParams,
    result: goal.GoalStopResult,
    summary: "Stops the goal run for good and pauses its running phase's product.",
  }),
  method({
    method: "x/goal.edit",
    extension: true,
    params: goal.GoalEditParams,
    result: goal.GoalEditResult,
    summary: "Replaces the goal; the edit is recorded now and takes effect at the next phase boundary.",
  }),
  method({
    method: "x/goal.message",
    extension: true,
    params: goal.GoalMessageParams,
    result: goal.GoalMessageResult,
    summary: "Queues a message for the leader; queued messages are applied at the next phase boundary, in order, once.",
  }),
] as const;

/** Every request the server serves. */
export const serverMethods = [...acpMethods, ...productMethods, ...goalMethods] as const;

// ---------------------------------------------------------------------------------------------------------------
// Notifications

/** Notifications the client sends to the server. */
export const clientNotifications = [
  notification({
    method: "session/cancel",
    extension: false,
    params: acp.SessionCancelParams,
    summary: "Cancels the session's running prompt: the product is paused and the prompt answers `cancelled`.",
  }),
] as const;

/** The standard ACP notification the server sends. Never carries product notifications. */
export const acpServerNotifications = [
  notification({
    method: "session/update",
    extension: false,
    params: acp.SessionUpdateParams,
    summary:
      "Streams a session's leader text (`agent_message_chunk`), the plan (`plan`, every entry each time) and one " +
      "tool call per task (`tool_call`, `tool_call_update`).",
  }),
] as const;

/** The `product.*` notifications (PROTOCOL.md section 5). Sent bare, or with `_` when the client asked for it. */
export const productNotifications = [
  notification({
    method: "product.planningDelta",
    extension: true,
    params: product.PlanningDeltaNotification,
    summary: "Leader text as it streams during planning.",
  }),
  notification({
    method: "product.leaderMessage",
    extension: true,
    params: product.LeaderMessageNotification,
    summary: "A complete message from the leader.",
  }),
  notification({
    method: "product.leaderAsk",
    extension: true,
    params: product.LeaderAskNotification,
    summary: "The leader needs answers before it can plan; answer with `product.message` and the `askId`.",
  }),
  notification({
    method: "product.planReady",
    extension: true,
    params: product.PlanReadyNotification,
    summary: "The plan is ready; the product awaits confirmation.",
  }),
  notification({
    method: "product.planFailed",
    extension: true,
    params: product.PlanFailedNotification,
    summary: "The leader could not produce a valid plan.",
  }),
  notification({
    method: "product.teamRoster",
    extension: true,
    params: product.TeamRosterNotification,
    summary: "The agents working on the product; once per start and per resume.",
  }),
  notification({
    method: "product.dagTopology",
    extension: true,
    params: product.DagTopologyNotification,
    summary: "The whole DAG; on start, resume, mutation and rollback.",
  }),
  notification({
    method: "product.taskStatus",
    extension: true,
    params: product.TaskStatusNotification,
    summary: "A task changed status; `question` is set when it waits for an answer.",
  }),
  notification({
    method: "product.taskOutputDelta",
    extension: true,
    params: product.TaskOutputDeltaNotification,
    summary: "Worker text of a running task as it streams.",
  }),
  notification({
    method: "product.agentActivity",
    extension: true,
    params: product.AgentActivityNotification,
    summary: "A worker reported a tool call.",
  }),
  notification({
    method: "product.taskOverloaded",
    extension: true,
    params: product.TaskOverloadedNotification,
    summary: "A running task's model provider is overloaded: its worker retries later, in the same attempt.",
  }),
  notification({
    method: "product.dagMutated",
    extension: true,
    params: product.DagMutatedNotification,
    summary: "One mutation was applied to the DAG, by the leader or the user.",
  }),
  notification({
    method: "product.budgetUpdate",
    extension: true,
    params: product.BudgetUpdateNotification,
    summary: "Token and time use so far.",
  }),
  notification({
    method: "product.budgetWarning",
    extension: true,
    params: product.BudgetWarningNotification,
    summary: "A budget limit reached 80 %; sent once.",
  }),
  notification({
    method: "product.budgetExceeded",
    extension: true,
    params: product.BudgetExceededNotification,
    summary: "A budget limit was exceeded; the product is paused (not failed).",
  }),
  notification({
    method: "product.checkpoint",
    extension: true,
    params: product.CheckpointNotification,
    summary: "A checkpoint was taken.",
  }),
  notification({
    method: "product.persistenceError",
    extension: true,
    params: product.PersistenceErrorNotification,
    summary: "A write to the run-state authority failed; the product is paused.",
  }),
  notification({
    method: "product.taskIntegrated",
    extension: true,
    params: product.TaskIntegratedNotification,
    summary: "A task attempt's commit was merged into the product's integration branch (isolation `worktree`).",
  }),
  notification({
    method: "product.taskVerified",
    extension: true,
    params: verify.TaskVerifiedNotification,
    summary:
      "A candidate's verification commands ran to their end (guarantee 17): each check's name, outcome, exit code, duration and output tail.",
  }),
  notification({
    method: "product.integrated",
    extension: true,
    params: product.IntegratedNotification,
    summary: "The end of a `worktree` product's integration, whatever the outcome (`integration.state`).",
  }),
  notification({
    method: "product.ownershipLost",
    extension: true,
    params: product.OwnershipLostNotification,
    summary: "Another server took the product over; this server stopped driving it and sends nothing more about it.",
  }),
  notification({
    method: "product.completed",
    extension: true,
    params: product.CompletedNotification,
    summary: "The product finished: `completed` when every remaining task completed, else `failed`.",
  }),
] as const;

/** The `x/goal.*` notifications (PROTOCOL.md section 6). Sent bare, or with `_` when the client asked for it. */
export const goalNotifications = [
  notification({
    method: "x/goal.started",
    extension: true,
    params: goal.GoalStartedNotification,
    summary: "The goal run started; the leader derived these acceptance criteria.",
  }),
  notification({
    method: "x/goal.phaseStarted",
    extension: true,
    params: goal.GoalPhaseStartedNotification,
    summary: "A phase started as a product (confirmed automatically).",
  }),
  notification({
    method: "x/goal.phaseAssessed",
    extension: true,
    params: goal.GoalPhaseAssessedNotification,
    summary:
      "The leader assessed a finished phase: which criteria pass, which passed for the first time, which regressed.",
  }),
  notification({
    method: "x/goal.statusChanged",
    extension: true,
    params: goal.GoalStatusChangedNotification,
    summary: "The goal run's status changed.",
  }),
  notification({
    method: "x/goal.ended",
    extension: true,
    params: goal.GoalEndedNotification,
    summary: "The goal run ended, with the reason and a summary.",
  }),
] as const;

// ---------------------------------------------------------------------------------------------------------------
// Requests the server makes of the client

/** Server → client requests: the host run-state authority (PROTOCOL.md section 7) and ACP permission requests. */
export const hostRequests = [
  method({
    method: "runState/get",
    extension: true,
    params: host.RunStateGetParams,
    result: host.RunStateGetResult,
    summary: "Reads one record; `record: null` when it does not exist.",
  }),
  method({
    method: "runState/put",
    extension: true,
    params: host.RunStatePutParams,
    result: host.RunStatePutResult,
    summary:
      "Writes one record if its revision is `expectedRevision` (`null`: must not exist); a mismatch is `-32012`.",
  }),
  method({
    method: "runState/delete",
    extension: true,
    params: host.RunStateDeleteParams,
    result: host.RunStateDeleteResult,
    summary: "Deletes one record, if its revision is `expectedRevision` when that is given.",
  }),
  method({
    method: "runState/list",
    extension: true,
    params: host.RunStateListParams,
    result: host.RunStateListResult,
    summary: "Lists the records of one kind in one project, ordered by id, optionally filtered by id prefix.",
  }),
  method({
    method: "runState/appendEvents",
    extension: true,
    params: host.RunStateAppendEventsParams,
    result: host.RunStateAppendEventsResult,
    summary: "Appends events if the stream's last sequence number is `expectedSeq`; a mismatch is `-32012`.",
  }),
  method({
    method: "runState/readEvents",
    extension: true,
    params: host.RunStateReadEventsParams,
    result: host.RunStateReadEventsResult,
    summary:
      "Reads the events of a stream after `afterSeq`, oldest first, at most `limit` when given; `more` says whether " +
      "events follow the last one returned.",
  }),
  method({
    method: "runState/deleteStream",
    extension: true,
    params: host.RunStateDeleteStreamParams,
    result: host.RunStateDeleteStreamResult,
    summary: "Deletes a whole event stream; `deleted: false` when it held no event.",
  }),
  method({
    method: "session/request_permission",
    extension: false,
    params: acp.RequestPermissionParams,
    result: acp.RequestPermissionResult,
    summary:
      "Asks the user to confirm the plan (options `confirm`/allow_once and `revise`/reject_once), or forwards a " +
      "worker's permission request.",
  }),
] as const;

// ---------------------------------------------------------------------------------------------------------------
// Typed maps

export type ServerMethod = (typeof serverMethods)[number];
export type ServerMethodName = ServerMethod["method"];
export type ProductMethodName = (typeof productMethods)[number]["method"];

/** Parsed params a handler of `M` receives. */
export type ParamsOf<M extends ServerMethodName> = z.output<Extract<ServerMethod, { readonly method: M }>["params"]>;
/** Params of `M` as a client writes them (before defaults and transforms). */
export type ParamsInputOf<M extends ServerMethodName> = z.input<
  Extract<ServerMethod, { readonly method: M }>["params"]
>;
/** The result a handler of `M` returns. */
export type ResultOf<M extends ServerMethodName> = z.output<Extract<ServerMethod, { readonly method: M }>["result"]>;

export type AnyNotification =
  | (typeof clientNotifications)[number]
  | (typeof acpServerNotifications)[number]
  | (typeof productNotifications)[number]
  | (typeof goalNotifications)[number];
export type NotificationName = AnyNotification["method"];
export type ProductNotificationName = (typeof productNotifications)[number]["method"];

/** Params of notification `N`. */
export type NotificationParams<N extends NotificationName> = z.output<
  Extract<AnyNotification, { readonly method: N }>["params"]
>;

export type HostRequest = (typeof hostRequests)[number];
export type HostRequestName = HostRequest["method"];
/** Params the server sends with host request `M`. */
export type HostParamsOf<M extends HostRequestName> = z.output<Extract<HostRequest, { readonly method: M }>["params"]>;
/** The parsed answer to host request `M`. */
export type HostResultOf<M extends HostRequestName> = z.output<Extract<HostRequest, { readonly method: M }>["result"]>;

// ---------------------------------------------------------------------------------------------------------------
// Lookups

/** Bare names of every extension method the server serves, in table order (for `initialize`'s `_meta`). */
export const extensionMethodNames: readonly string[] = serverMethods.filter((m) => m.extension).map((m) => m.method);

/** Bare names of every extension notification the server sends, in table order (for `initialize`'s `_meta`). */
export const extensionNotificationNames: readonly string[] = [...productNotifications, ...goalNotifications].map(
  (n) => n.method,
);

const serverMethodByWireName: ReadonlyMap<string, ServerMethod> = new Map(
  serverMethods.flatMap((m): [string, ServerMethod][] =>
    m.extension
      ? [
          [m.method, m],
          [`_${m.method}`, m],
        ]
      : [[m.method, m]],
  ),
);

/**
 * Finds the served method for a wire name: an extension method under its bare or `_`-prefixed spelling
 * (PROTOCOL.md section 2), a standard ACP method under its name only. Returns `undefined` for anything else
 * (the caller answers `-32601`). Does not validate params.
 */
export function findServerMethod(wireName: string): ServerMethod | undefined {
  return serverMethodByWireName.get(wireName);
}

/**
 * The wire name to send a server → client notification or request under: `_`-prefixed for extension messages when
 * the client asked for the ACP spelling (PROTOCOL.md section 2), else the bare name. Standard ACP names never change.
 */
export function outboundName(spec: { readonly method: string; readonly extension: boolean }, prefix: "" | "_"): string {
  return spec.extension ? `${prefix}${spec.method}` : spec.method;
}

// ---------------------------------------------------------------------------------------------------------------
// Named shared shapes (for the generated reference)

/** A shared shape that gets its own named definition in protocol/schema.json and its own entry in METHODS.md. */
export interface NamedSchema {
  readonly id: string;
  readonly schema: z.ZodType;
  readonly description: string;
}

/** Shared shapes referenced by name from the method definitions, in reference order. */
export const namedSchemas: readonly NamedSchema[] = [
  {
    id: "AbsolutePath",
    schema: AbsolutePath,
    description: "An absolute filesystem path (POSIX, drive or UNC); a relative one is -32602.",
  },
  { id: "Id", schema: Id, description: "An identifier: 1-200 characters, no control characters." },
  { id: "Timestamp", schema: Timestamp, description: "An ISO-8601 UTC timestamp string." },
  { id: "Count", schema: Count, description: "A non-negative integer." },
  { id: "Phase", schema: Phase, description: "The phase of a product." },
  { id: "TaskStatus", schema: TaskStatus, description: "The status of a task." },
  { id: "Instance", schema: Instance, description: "One worker seat in a product." },
  {
    id: "InstanceInput",
    schema: product.InstanceInput,
    description: "`Instance` as a client sends it; unknown keys are -32602.",
  },
  { id: "Task", schema: Task, description: "One DAG node." },
  { id: "TaskInput", schema: product.TaskInput, description: "`Task` as a client sends it; unknown keys are -32602." },
  { id: "TaskPatch", schema: TaskPatch, description: "The fields an `updateTask` mutation may change." },
  {
    id: "Budget",
    schema: Budget,
    description: "Token and wall-time limits (tokens: integers; durations: milliseconds).",
  },
  {
    id: "BudgetInput",
    schema: product.BudgetInput,
    description: "`Budget` as a client sends it; unknown keys are -32602.",
  },
  { id: "Plan", schema: Plan, description: "A plan: the team (instances) and the DAG (tasks)." },
  { id: "TaskState", schema: TaskState, description: "A task with its run state." },
  { id: "Mutation", schema: Mutation, description: "One change to the DAG, discriminated by `op`." },
  {
    id: "MutationInput",
    schema: product.MutationInput,
    description: "`Mutation` as a client sends it; unknown keys are -32602.",
  },
  { id: "Recovery", schema: Recovery, description: "How to recover a paused or failed run, in plain words." },
  { id: "Progress", schema: Progress, description: "Task counts by state." },
  { id: "BudgetStatus", schema: BudgetStatus, description: "Budget use so far and the limits in force." },
  {
    id: "ContentBlock",
    schema: acp.ContentBlock,
    description: "ACP content: text, image, audio, resource_link or resource.",
  },
  { id: "McpServer", schema: acp.McpServer, description: "ACP MCP server configuration (stdio has no `type`)." },
  {
    id: "ClientCapabilities",
    schema: acp.ClientCapabilities,
    description: 'ACP client capabilities, with this server\'s `_meta["acp-orchestrator"]` flags.',
  },
  { id: "SessionInfo", schema: acp.SessionInfo, description: "ACP session summary." },
  { id: "StopReason", schema: acp.StopReason, description: "Why an ACP prompt turn ended." },
  {
    id: "SessionUpdate",
    schema: acp.SessionUpdate,
    description: "ACP session update, discriminated by `sessionUpdate`.",
  },
  {
    id: "ToolCallContent",
    schema: acp.ToolCallContent,
    description: "ACP tool call content, discriminated by `type`.",
  },
  {
    id: "ToolCallUpdate",
    schema: acp.ToolCallUpdate,
    description: "ACP tool call fields; only `toolCallId` is required.",
  },
  {
    id: "PermissionOption",
    schema: acp.PermissionOption,
    description: "One answer offered by `session/request_permission`.",
  },
  { id: "GoalStatus", schema: goal.GoalStatus, description: "The status of a goal run." },
  { id: "GoalEndReason", schema: goal.GoalEndReason, description: "Why a goal run ended." },
  {
    id: "GoalBudgetInput",
    schema: goal.GoalBudgetInput,
    description: "A goal run's budget: `Budget` plus `maxPhases`; unknown keys are -32602.",
  },
];
