/**
 * Persisted shapes of isolation and integration (DESIGN.md guarantee 11; PROTOCOL.md section 5, Isolation and
 * integration): the workspace events of a product's stream and the integration state they reduce to.
 *
 * Every step that moves a git ref is one of these events, appended BEFORE the ref moves: `workspaceChosen` (before the
 * integration branch is created), `integrating` (before a task's commit is kept and merged), `attemptKept` (before a
 * conflicting attempt's commit is kept), `branchMoved` (before a rollback moves the branch), `integrationEnded` with
 * `state: "integrating"` (before the end merge into the target). `taskIntegrated` and the final `integrationEnded`
 * record what happened. This file holds schemas only: the reducer and the decisions are in integration.ts.
 */
import * as z from "zod";
import {
  boundChangedFiles,
  ChangedFiles,
  CommitId,
  Count,
  Id,
  Integration,
  Isolation,
} from "../../../protocol/common.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";

const base = () => ({ v: z.literal(1), at: z.string().min(1) });
const RefName = lazySchema(() => z.string().min(1).max(1_000), "RefName");

/** What `product.plan` asked for; decided at confirmation. */
export const IsolationRequest = lazySchema(
  () =>
    z.object({
      isolation: Isolation.optional(),
      integration: z
        .object({ mode: z.enum(["branch", "merge"]).optional(), targetBranch: z.string().min(1).max(250).optional() })
        .optional(),
    }),
  "IsolationRequest",
);
export type IsolationRequest = z.infer<typeof IsolationRequest>;

/** A merge of a task attempt's commit that was decided and recorded but whose ref move is not yet confirmed. */
export const PendingIntegration = lazySchema(
  () =>
    z
      .object({
        taskId: Id,
        attempt: Count,
        commit: CommitId,
        /** At most `CHANGED_FILES_SAMPLE` paths (older records are cut on read); `changedFilesTotal` counts them all. */
        changedFiles: ChangedFiles,
        changedFilesTotal: Count.optional(),
        /** The ref that keeps the attempt's commit (`refs/acp-orchestrator/<productId>/attempts/<taskId>/<attempt>`). */
        ref: RefName,
        /** The integration head expected before the move, and the head after it. */
        from: CommitId,
        to: CommitId,
        /** The worker's output and the attempt's input hash, so the task can be completed after a crash. */
        output: z.string(),
        inputHash: z.string().min(1).max(200).optional(),
      })
      .overwrite((p) => boundChangedFiles(p, "changedFiles", "changedFilesTotal")),
  "PendingIntegration",
);
export type PendingIntegration = z.infer<typeof PendingIntegration>;

/** The integration state kept in a product's state (and snapshots). */
export const IntegrationRecord = lazySchema(
  () =>
    Integration.extend({
      /** The commit the branch was created from at confirmation. */
      base: CommitId,
      pending: PendingIntegration.optional(),
      /** How many old heads rollbacks kept so far (names of the keep refs). */
      kept: Count,
      /** The last rollback's move, until it is verified (`from` is kept as `keptAs`, then the branch goes to `to`). */
      moving: z.object({ from: CommitId, to: CommitId, keptAs: RefName }).optional(),
    }),
  "IntegrationRecord",
);
export type IntegrationRecord = z.infer<typeof IntegrationRecord>;

export const WorkspaceChosenEvent = lazySchema(
  () =>
    z.object({
      ...base(),
      type: z.literal("workspaceChosen"),
      isolation: Isolation,
      /** Why `shared` (plain words); absent for `worktree`. */
      reason: z.string().max(2_000).optional(),
      integration: z
        .object({
          mode: z.enum(["branch", "merge"]),
          branch: RefName,
          base: CommitId,
          targetBranch: RefName.optional(),
        })
        .optional(),
    }),
  "WorkspaceChosenEvent",
);

/**
 * The workspace events' schemas, for ProductEvent's union (product/records.ts), built when called: a function rather
 * than an array, because these schemas are plain zod objects and an array would build them when this module loads,
 * which a start of `serve` does before it answers `initialize` (issue 34, cold start: several ms of CPU there).
 */
export const workspaceEvents = () =>
  [
    WorkspaceChosenEvent,
    z.object({ ...base(), type: z.literal("integrating"), pending: PendingIntegration }),
    z
      .object({
        ...base(),
        type: z.literal("taskIntegrated"),
        taskId: Id,
        attempt: Count,
        commit: CommitId,
        head: CommitId,
        changedFiles: ChangedFiles,
        changedFilesTotal: Count.optional(),
      })
      .overwrite((e) => boundChangedFiles(e, "changedFiles", "changedFilesTotal")),
    /** A conflicting (or otherwise failed) attempt's commit is kept under `ref` for inspection. */
    z
      .object({
        ...base(),
        type: z.literal("attemptKept"),
        taskId: Id,
        attempt: Count,
        commit: CommitId,
        ref: RefName,
        files: ChangedFiles,
        filesTotal: Count.optional(),
      })
      .overwrite((e) => boundChangedFiles(e, "files", "filesTotal")),
    /** Rollback: the branch moves `from` → `to`; `from` stays reachable under `keptAs`; `merged` is the restored list. */
    z.object({
      ...base(),
      type: z.literal("branchMoved"),
      from: CommitId,
      to: CommitId,
      keptAs: RefName,
      merged: z.array(Id),
    }),
    z
      .object({
        ...base(),
        type: z.literal("integrationEnded"),
        state: z.enum(["integrating", "integrated", "conflict", "pending", "deferred"]),
        targetHead: CommitId.optional(),
        files: ChangedFiles.optional(),
        filesTotal: Count.optional(),
        /** Why the result was not merged into the target (`deferred`), or why the branch cannot be called integrated. */
        reason: z.string().max(2_000).optional(),
      })
      .overwrite((e) => boundChangedFiles(e, "files", "filesTotal")),
  ] as const;

/**
 * One compare-and-swap ref move of `WorkspacePort.moveRefs` (ports.ts; issue 33): `ref` to `to` only if it is at
 * `expected` (`null`: only if absent), with `moveRef`'s meaning; in one call each move is decided by its own swap
 * alone (the others do not depend on it), and a port that talks to a remote makes one push of them all.
 */
export interface RefMove {
  ref: string;
  to: string;
  expected: string | null;
}
