/**
 * zod schemas of every `product.*` request (params and result) and notification of PROTOCOL.md section 5.
 *
 * Request params are strict: an unknown key — at the top level or inside a nested object the client writes (budget,
 * instances, tasks, mutations) — fails with `-32602`, so a typo such as `productID` is reported instead of ignored.
 * The only extra key allowed on a params object is an optional `_meta` object (ACP extensibility). Results and
 * notifications are what the server sends; they are plain objects built from the shared shapes of common.ts.
 * This file must never import anything but zod and common.ts, and must never describe a shape PROTOCOL.md does not.
 */
import * as z from "zod";
import {
  CommitId,
  Integration,
  Isolation,
  AbsolutePath,
  Budget,
  BudgetStatus,
  Count,
  Id,
  Instance,
  Mutation,
  Owner,
  Phase,
  Plan,
  Progress,
  Recovery,
  Task,
  TaskState,
  TaskStatus,
  Timestamp,
} from "./common.js";
import { lazySchema } from "./lazy-schema.js";
import { VerificationView, VerifyConfig } from "./verify.js";
import { WorkspaceRemote } from "./workspace-remote.js";

/** The optional `_meta` object every request params object may carry. */
export const RequestMeta = lazySchema(() => z.record(z.string(), z.unknown()), "RequestMeta");

/**
 * Builds a strict request params object from `shape` plus an optional `_meta` object.
 * Unknown keys fail the parse (PROTOCOL.md section 3, `-32602`).
 */
export function requestParams<S extends z.ZodRawShape>(shape: S) {
  return z.strictObject({ ...shape, _meta: RequestMeta.optional() });
}

// ---------------------------------------------------------------------------------------------------------------
// Strict input variants of the shared shapes (what a client writes; unknown keys rejected)

/** `Budget` as a client sends it: unknown keys rejected. */
export const BudgetInput = lazySchema(() => Budget.strict(), "BudgetInput");
export type BudgetInput = z.infer<typeof BudgetInput>;

/** `Instance` as a client sends it (an edited plan): unknown keys rejected. */
export const InstanceInput = lazySchema(() => Instance.strict(), "InstanceInput");
export type InstanceInput = z.infer<typeof InstanceInput>;

/** `Task` as a client sends it (an edited plan, an `addTask` mutation): unknown keys rejected. */
export const TaskInput = lazySchema(() => Task.strict(), "TaskInput");
export type TaskInput = z.infer<typeof TaskInput>;

/** `Mutation` as a client sends it: each variant strict, `addTask.task` strict. Output type equals `Mutation`. */
export const MutationInput = lazySchema(() => {
  const [addTaskOp, removeTaskOp, updateTaskOp, reassignOp, addDependencyOp, removeDependencyOp] = Mutation.options;
  return z.discriminatedUnion("op", [
    addTaskOp.extend({ task: TaskInput }).strict(),
    removeTaskOp.strict(),
    updateTaskOp.strict(),
    reassignOp.strict(),
    addDependencyOp.strict(),
    removeDependencyOp.strict(),
  ]);
}, "MutationInput");
export type MutationInput = z.infer<typeof MutationInput>;

/** A non-empty text that is not only whitespace; an empty one reports one issue, not two. */
const Text = (max: number) =>
  z
    .string()
    .min(1, { abort: true })
    .max(max, { abort: true })
    .refine((s) => s.trim().length > 0, { message: "must not be blank" });

// ---------------------------------------------------------------------------------------------------------------
// Requests

export const PlanParams = lazySchema(
  () =>
    requestParams({
      goal: Text(100_000),
      cwd: AbsolutePath,
      projectId: Id.optional(),
      sessionId: Id.optional(),
      name: z.string().min(1).max(500).optional(),
      /** At most this many tasks of this product run at once (default: the server's configured `maxParallelTasks`). */
      maxParallelTasks: z.number().int().min(1).max(1_000).optional(),
      leaderAgentId: Id.optional(),
      /** Presence-based: omitted = every ready agent; `[]` = the leader alone. */
      allowedAgents: z.array(Id).max(1_000).optional(),
      budget: BudgetInput.optional(),
      /** `worktree` (default for a git cwd with a commit) or `shared` (PROTOCOL.md section 5, Isolation and integration). */
      isolation: Isolation.optional(),
      /** How the result reaches the user: `branch` (default) or `merge` into `targetBranch` (default: the branch at confirm). */
      integration: z
        .object({ mode: z.enum(["branch", "merge"]).optional(), targetBranch: z.string().min(1).max(250).optional() })
        .strict()
        .optional(),
      /** Green-only integration (docs/VERIFY.md): the commands a candidate must pass; default: the config file's. */
      verify: VerifyConfig.optional(),
      /**
       * A remote-backed product: its code travels through this git remote (worktrees from a local mirror, the
       * integration branch and attempt refs pushed; PROTOCOL.md section 5, "Code through a git remote"). Absent: the
       * repository at `cwd`.
       */
      workspace: WorkspaceRemote.optional(),
    }),
  "PlanParams",
);
export type PlanParams = z.infer<typeof PlanParams>;

export const PlanResult = lazySchema(() => z.object({ productId: Id, phase: z.literal("planning") }), "PlanResult");
export type PlanResult = z.infer<typeof PlanResult>;

export const MessageParams = lazySchema(
  () =>
    requestParams({
      productId: Id,
      content: Text(100_000),
      askId: Id.optional(),
    }),
  "MessageParams",
);
export type MessageParams = z.infer<typeof MessageParams>;

export const MessageResult = lazySchema(
  () =>
    z.object({
      response: z.string(),
      plan: Plan.optional(),
      mutations: z.array(Mutation).optional(),
    }),
  "MessageResult",
);
export type MessageResult = z.infer<typeof MessageResult>;

export const ConfirmParams = lazySchema(
  () =>
    requestParams({
      productId: Id,
      instances: z.array(InstanceInput).max(1_000).optional(),
      tasks: z.array(TaskInput).max(10_000).optional(),
      budget: BudgetInput.optional(),
    }),
  "ConfirmParams",
);
export type ConfirmParams = z.infer<typeof ConfirmParams>;

export const ConfirmResult = lazySchema(
  () => z.object({ productId: Id, ok: z.literal(true), phase: z.literal("executing") }),
  "ConfirmResult",
);
export type ConfirmResult = z.infer<typeof ConfirmResult>;

/**
 * Params of a method that takes only a product id. Each method gets its own instance, so every method has its own
 * definition in the generated JSON Schema.
 */
const productIdParams = () => requestParams({ productId: Id });
export type ProductIdParams = z.infer<ReturnType<typeof productIdParams>>;

export const StatusParams = lazySchema(() => productIdParams(), "StatusParams");
export type StatusParams = ProductIdParams;

export const StatusResult = lazySchema(
  () =>
    z.object({
      productId: Id,
      projectId: Id,
      name: z.string(),
      phase: Phase,
      plan: Plan.optional(),
      tasks: z.array(TaskState),
      progress: Progress,
      budget: BudgetStatus,
      /** Number of checkpoints kept. */
      checkpoints: Count,
      lastCheckpointAt: Timestamp.optional(),
      /** Stored records that failed validation and were skipped (DESIGN.md guarantee 4). */
      dropped: Count,
      recovery: Recovery.optional(),
      /** How tasks run: each attempt in its own git worktree, or all in `cwd` (PROTOCOL.md section 5). */
      isolation: Isolation.optional(),
      /** Why the product runs `shared` (not a git checkout, no commit yet, asked for), or a warning about sharing. */
      isolationNote: z.string().optional(),
      integration: Integration.optional(),
      /** Green-only integration (docs/VERIFY.md): the configured checks and the newest verifications, oldest first. */
      verification: z
        .object({
          when: z.enum(["each", "end"]),
          commands: z.array(z.string()),
          results: z.array(VerificationView),
          note: z.string().optional(),
        })
        .optional(),
      /** Who holds the product's lease (present while a lease exists). */
      owner: Owner.optional(),
    }),
  "StatusResult",
);
export type StatusResult = z.infer<typeof StatusResult>;

/** The most products one `product.list` page may ask for (`limit`, PROTOCOL.md section 5). */
export const LIST_LIMIT_MAX = 1_000;

/**
 * Where a `product.list` page resumes: the last listed product's creation time (its header's `createdAt`) and id. On
 * the wire it is the opaque `cursor` / `nextCursor` string (`encodeListCursor`).
 */
export interface ListPosition {
  createdAt: string;
  productId: string;
}

/** The `nextCursor` text of a position: base64url of `[createdAt, productId]` as JSON. Pure. */
export function encodeListCursor(position: ListPosition): string {
  const bytes = new TextEncoder().encode(JSON.stringify([position.createdAt, position.productId]));
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The position a `cursor` names, or `undefined` when it is not one `encodeListCursor` could have written. Pure. */
export function decodeListCursor(cursor: string): ListPosition | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  try {
    const binary = atob(cursor.replace(/-/g, "+").replace(/_/g, "/"));
    const text = new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
    const parsed = z.tuple([Timestamp, Id]).safeParse(JSON.parse(text));
    return parsed.success ? { createdAt: parsed.data[0], productId: parsed.data[1] } : undefined;
  } catch {
    return undefined;
  }
}

/** `cursor`: a `nextCursor` an earlier `product.list` answered (bounded, decoded before any read). */
export const ListCursor = lazySchema(
  () =>
    z
      .string()
      .max(1_000, { abort: true })
      .refine((c) => decodeListCursor(c) !== undefined, { message: "is not a cursor that product.list returned" }),
  "ListCursor",
);

/**
 * `limit` (1 to `LIST_LIMIT_MAX`) asks for one page, oldest first, and `cursor` for the page after an earlier one;
 * without `limit` every product is listed (a `cursor` alone pages with the largest `limit`).
 */
export const ListParams = lazySchema(
  () =>
    requestParams({
      projectId: Id.optional(),
      phase: Phase.optional(),
      limit: z.number().int().min(1).max(LIST_LIMIT_MAX).optional(),
      cursor: ListCursor.optional(),
    }),
  "ListParams",
);
export type ListParams = z.infer<typeof ListParams>;

export const ProductSummary = lazySchema(
  () =>
    z.object({
      productId: Id,
      projectId: Id,
      name: z.string(),
      phase: Phase,
      progress: Progress,
      updatedAt: Timestamp,
      /** Who drives an executing product, and whether that owner is live. */
      owner: Owner.optional(),
    }),
  "ProductSummary",
);
export type ProductSummary = z.infer<typeof ProductSummary>;

/**
 * `dropped`: header and index records that did not parse (guarantee 4); their products stay reachable by id. With a
 * `limit`, only those this page read. `nextCursor`: present when products after this page remain (paged requests only).
 */
export const ListResult = lazySchema(
  () => z.object({ products: z.array(ProductSummary), dropped: Count, nextCursor: z.string().optional() }),
  "ListResult",
);
export type ListResult = z.infer<typeof ListResult>;

export const PauseParams = lazySchema(() => productIdParams(), "PauseParams");
export type PauseParams = ProductIdParams;
export const PauseResult = lazySchema(() => z.object({ productId: Id, phase: z.literal("paused") }), "PauseResult");
export type PauseResult = z.infer<typeof PauseResult>;

export const ResumeParams = lazySchema(
  () => requestParams({ productId: Id, additionalBudget: BudgetInput.optional() }),
  "ResumeParams",
);
export type ResumeParams = z.infer<typeof ResumeParams>;
export const ResumeResult = lazySchema(
  () => z.object({ productId: Id, phase: z.literal("executing") }),
  "ResumeResult",
);
export type ResumeResult = z.infer<typeof ResumeResult>;

export const CancelParams = lazySchema(() => productIdParams(), "CancelParams");
export type CancelParams = ProductIdParams;
export const CancelResult = lazySchema(
  () => z.object({ productId: Id, phase: z.literal("cancelled") }),
  "CancelResult",
);
export type CancelResult = z.infer<typeof CancelResult>;

export const CheckpointParams = lazySchema(() => productIdParams(), "CheckpointParams");
export type CheckpointParams = ProductIdParams;
export const CheckpointResult = lazySchema(() => z.object({ checkpointId: Id, at: Timestamp }), "CheckpointResult");
export type CheckpointResult = z.infer<typeof CheckpointResult>;

export const CheckpointsParams = lazySchema(() => productIdParams(), "CheckpointsParams");
export type CheckpointsParams = ProductIdParams;
export const CheckpointSummary = lazySchema(
  () => z.object({ checkpointId: Id, at: Timestamp, completed: Count, total: Count }),
  "CheckpointSummary",
);
export type CheckpointSummary = z.infer<typeof CheckpointSummary>;
/** Oldest first. */
export const CheckpointsResult = lazySchema(
  () => z.object({ checkpoints: z.array(CheckpointSummary) }),
  "CheckpointsResult",
);
export type CheckpointsResult = z.infer<typeof CheckpointsResult>;

/** `checkpointId` omitted = the latest checkpoint. */
export const RollbackParams = lazySchema(
  () => requestParams({ productId: Id, checkpointId: Id.optional() }),
  "RollbackParams",
);
export type RollbackParams = z.infer<typeof RollbackParams>;
export const RollbackResult = lazySchema(
  () => z.object({ productId: Id, checkpointId: Id, phase: Phase }),
  "RollbackResult",
);
export type RollbackResult = z.infer<typeof RollbackResult>;

export const ReplayTaskParams = lazySchema(() => requestParams({ productId: Id, taskId: Id }), "ReplayTaskParams");
export type ReplayTaskParams = z.infer<typeof ReplayTaskParams>;
/** `reset`: the task and every task downstream of it, now `pending`. */
export const ReplayTaskResult = lazySchema(() => z.object({ productId: Id, reset: z.array(Id) }), "ReplayTaskResult");
export type ReplayTaskResult = z.infer<typeof ReplayTaskResult>;

export const MutateParams = lazySchema(
  () => requestParams({ productId: Id, mutations: z.array(MutationInput).max(1_000) }),
  "MutateParams",
);
export type MutateParams = z.infer<typeof MutateParams>;
/** `version`: the plan version after the batch was applied. */
export const MutateResult = lazySchema(
  () => z.object({ productId: Id, applied: Count, version: Count }),
  "MutateResult",
);
export type MutateResult = z.infer<typeof MutateResult>;

export const DeleteParams = lazySchema(() => productIdParams(), "DeleteParams");
export type DeleteParams = ProductIdParams;
export const DeleteResult = lazySchema(() => z.object({ deleted: z.boolean() }), "DeleteResult");
export type DeleteResult = z.infer<typeof DeleteResult>;

// ---------------------------------------------------------------------------------------------------------------
// Notifications (server → client); every one carries `productId`

/** Builds a notification params object: `productId` plus `shape`. */
function notificationParams<S extends z.ZodRawShape>(shape: S) {
  return z.object({ productId: Id, ...shape });
}

/** Leader text as it streams during planning. */
export const PlanningDeltaNotification = lazySchema(
  () => notificationParams({ text: z.string() }),
  "PlanningDeltaNotification",
);
export const LeaderMessageNotification = lazySchema(
  () => notificationParams({ message: z.string() }),
  "LeaderMessageNotification",
);

export const LeaderQuestion = lazySchema(
  () => z.object({ question: z.string(), options: z.array(z.string()).optional() }),
  "LeaderQuestion",
);
export type LeaderQuestion = z.infer<typeof LeaderQuestion>;
export const LeaderAskNotification = lazySchema(
  () => notificationParams({ askId: Id, questions: z.array(LeaderQuestion) }),
  "LeaderAskNotification",
);

export const PlanReadyNotification = lazySchema(() => notificationParams({ plan: Plan }), "PlanReadyNotification");
export const PlanFailedNotification = lazySchema(
  () => notificationParams({ error: z.string() }),
  "PlanFailedNotification",
);

export const RosterAgent = lazySchema(
  () => z.object({ agentId: Id, role: z.string(), name: z.string() }),
  "RosterAgent",
);
export type RosterAgent = z.infer<typeof RosterAgent>;
/** Sent once per start and per resume. */
export const TeamRosterNotification = lazySchema(
  () => notificationParams({ agents: z.array(RosterAgent) }),
  "TeamRosterNotification",
);

export const DagNode = lazySchema(
  () =>
    z.object({
      id: Id,
      title: z.string(),
      instanceId: Id,
      dependsOn: z.array(Id),
      status: TaskStatus,
    }),
  "DagNode",
);
export type DagNode = z.infer<typeof DagNode>;
/** Sent on start, resume, mutation and rollback. */
export const DagTopologyNotification = lazySchema(
  () => notificationParams({ nodes: z.array(DagNode) }),
  "DagTopologyNotification",
);

export const TaskStatusNotification = lazySchema(
  () =>
    notificationParams({
      taskId: Id,
      status: TaskStatus,
      /** 1-based attempt number (0 before the first attempt). */
      attempt: Count,
      error: z.string().optional(),
      question: z.string().optional(),
    }),
  "TaskStatusNotification",
);

export const TaskOutputDeltaNotification = lazySchema(
  () => notificationParams({ taskId: Id, text: z.string() }),
  "TaskOutputDeltaNotification",
);
export const AgentActivityNotification = lazySchema(
  () => notificationParams({ taskId: Id, toolName: z.string() }),
  "AgentActivityNotification",
);

/**
 * A running task's model provider is overloaded or rate limiting (issue 28): its worker waits `retryInMs` and tries
 * again in the same attempt (no attempt is spent). `message`: "waiting: provider overloaded, retry in 20 s".
 */
export const TaskOverloadedNotification = lazySchema(
  () =>
    notificationParams({
      taskId: Id,
      attempt: z.number().int().min(1),
      retry: z.number().int().min(1),
      retryInMs: z.number().int().min(0),
      message: z.string().max(500),
    }),
  "TaskOverloadedNotification",
);

export const DagMutatedNotification = lazySchema(
  () => notificationParams({ mutation: Mutation, by: z.enum(["leader", "user"]) }),
  "DagMutatedNotification",
);

export const BudgetUpdateNotification = lazySchema(
  () =>
    notificationParams({
      inputTokens: Count,
      outputTokens: Count,
      elapsedMs: Count,
      maxTotalTokens: z.number().int().positive().optional(),
    }),
  "BudgetUpdateNotification",
);

/** Shape shared by `product.budgetWarning` (once, at 80 % of a limit) and `product.budgetExceeded` (paused). */
const budgetLimitShape = () => ({
  usedTokens: Count,
  maxTotalTokens: z.number().int().positive().optional(),
  /** Which limit tripped, in plain words. */
  reason: z.string(),
});
export const BudgetWarningNotification = lazySchema(
  () => notificationParams(budgetLimitShape()),
  "BudgetWarningNotification",
);
export const BudgetExceededNotification = lazySchema(
  () => notificationParams(budgetLimitShape()),
  "BudgetExceededNotification",
);

export const CheckpointNotification = lazySchema(
  () => notificationParams({ checkpointId: Id, at: Timestamp }),
  "CheckpointNotification",
);

/** The product is paused (DESIGN.md guarantee 2). */
export const PersistenceErrorNotification = lazySchema(
  () => notificationParams({ projectId: Id, error: z.string() }),
  "PersistenceErrorNotification",
);

/** A task attempt's commit was merged into the integration branch (isolation `worktree`). */
export const TaskIntegratedNotification = lazySchema(
  () =>
    notificationParams({
      taskId: Id,
      commit: CommitId,
      /** At most `CHANGED_FILES_SAMPLE` (1,000) paths; `changedFilesTotal` counts them all when there are more. */
      changedFiles: z.array(z.string()),
      changedFilesTotal: Count.optional(),
    }),
  "TaskIntegratedNotification",
);

/** At the end of a `worktree` product, whatever the outcome. */
export const IntegratedNotification = lazySchema(
  () => notificationParams({ integration: Integration }),
  "IntegratedNotification",
);
/**
 * Another server took the product over; this server stopped driving it (DESIGN.md guarantee 13). `ownerId` is the
 * owner id this server held the lease under; `error` says what happened and where to follow the product.
 */
export const OwnershipLostNotification = lazySchema(
  () => notificationParams({ ownerId: z.string(), error: z.string() }),
  "OwnershipLostNotification",
);

export const CompletedNotification = lazySchema(
  () =>
    notificationParams({
      projectId: Id,
      phase: z.enum(["completed", "failed"]),
      summary: z.string(),
    }),
  "CompletedNotification",
);
