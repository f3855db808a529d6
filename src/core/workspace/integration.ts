/**
 * Isolation and integration decisions (DESIGN.md, Workspaces and integration; guarantee 11; PROTOCOL.md section 5):
 * which isolation a product gets, the names of its branch and refs, what a task attempt is based on, the commit
 * message of an attempt, how a recorded step reads back after a crash, and how workspace events change a product's
 * state (the reducer part `applyWorkspaceEvent`, called by product/evolve.ts).
 *
 * Pure: no I/O, no clock. The orchestrator (product/workspace-coordinator.ts) performs the steps through `WorkspacePort`.
 */
import type { Integration, Isolation, TaskState } from "../../../protocol/common.js";
import { topologicalOrder } from "../dag/graph.js";
import type { WorkspaceInfo } from "../ports.js";
import type { ProductEvent, ProductState } from "../product/records.js";
import type { IntegrationRecord, IsolationRequest, PendingIntegration } from "./records.js";

/** The product's integration branch, short name: `acp/<productId>`. */
export const integrationBranch = (productId: string): string => `acp/${refComponent(productId)}`;

/** Full ref of the integration branch. */
export const integrationRef = (productId: string): string => `refs/heads/${integrationBranch(productId)}`;

/** Every other ref the product makes lives under this prefix (kept attempts, heads a rollback left). */
export const productRefPrefix = (productId: string): string => `refs/acp-orchestrator/${refComponent(productId)}/`;

/** The ref that keeps a task attempt's commit (integrated or not), for inspection. */
export const attemptRef = (productId: string, taskId: string, attempt: number): string =>
  `${productRefPrefix(productId)}attempts/${refComponent(taskId)}/${attempt}`;

/**
 * Guarantee 11 (no commit lost): the ref that will keep attempt `attempt` of `taskId`. A replay or a rollback sets a
 * task's attempts back, so attempt n runs again while `attempts/<task>/<n>` still keeps the earlier run's commit; the
 * new run then gets `attempts/<task>/<n>-<k>` (k = 2, 3, …: the first name `readRef` finds no commit under), so the
 * recorded ref is always the one that holds the attempt's commit.
 */
export async function freeAttemptRef(
  productId: string,
  taskId: string,
  attempt: number,
  readRef: (ref: string) => Promise<string | null>,
): Promise<string> {
  const first = attemptRef(productId, taskId, attempt);
  let ref = first;
  for (let k = 2; (await readRef(ref)) !== null; k++) ref = `${first}-${k}`;
  return ref;
}

/** The ref that keeps the head a rollback left behind (`n` counts rollbacks that kept one). */
export const keptHeadRef = (productId: string, n: number): string => `${productRefPrefix(productId)}rollback/${n}`;

/**
 * One ref path component from an id: characters git refuses in ref names (space, `~^:?*[\`, `..`, a leading `.`,
 * a trailing `.lock`) become `_`. Ids are validated ids (no control characters) already.
 */
export function refComponent(id: string): string {
  let out = id
    .replace(/[\s~^:?*[\\\]@{}]/g, "_")
    .replace(/\.\.+/g, "_")
    .replace(/\/+/g, "_");
  if (out.startsWith(".")) out = `_${out.slice(1)}`;
  if (out.endsWith(".lock")) out = `${out.slice(0, -5)}_lock`;
  return out.slice(0, 200) || "_";
}

/** The decision recorded by `workspaceChosen`. */
export interface IsolationChoice {
  isolation: Isolation;
  reason?: string;
  integration?: { mode: "branch" | "merge"; branch: string; base: string; targetBranch?: string };
}

/**
 * Decides a product's isolation at confirmation: `worktree` when asked or by default for a git checkout with a
 * commit; `shared` when asked, or when `cwd` cannot host worktrees (the reason says why). A requested `worktree` on a
 * workspace that cannot host it runs `shared` with the reason (the product still runs). `merge` without a target
 * takes the branch checked out at confirmation; on a detached HEAD it falls back to `branch` mode with a reason.
 */
export function chooseIsolation(
  productId: string,
  request: IsolationRequest | undefined,
  info: WorkspaceInfo,
): IsolationChoice {
  if (request?.isolation === "shared")
    return { isolation: "shared", reason: "Shared isolation was requested: every task runs in cwd." };
  if (info.kind === "none") return { isolation: "shared", reason: info.reason };
  const mode = request?.integration?.mode ?? "branch";
  const target = request?.integration?.targetBranch ?? info.branch ?? undefined;
  const integration: IsolationChoice["integration"] = { mode, branch: integrationBranch(productId), base: info.head };
  if (mode === "merge") {
    if (target) integration.targetBranch = target;
    else {
      integration.mode = "branch";
      return {
        isolation: "worktree",
        reason:
          "Integration mode merge needs a target branch and cwd has a detached HEAD; the result stays on the integration branch.",
        integration,
      };
    }
  }
  return { isolation: "worktree", integration };
}

/** The base of a task attempt: the integration head, which holds every integrated dependency (guarantee 11). */
export function attemptBase(integration: IntegrationRecord): string {
  return integration.head;
}

/** The commit message of a task attempt: title, a short description, and the trailers `Product:`, `Task:`, `Attempt:`. */
export function attemptMessage(
  productId: string,
  task: Pick<TaskState, "taskId" | "title" | "description">,
  attempt: number,
): string {
  const title = task.title.replace(/\s+/g, " ").trim().slice(0, 200) || task.taskId;
  const body = task.description.trim().slice(0, 2_000);
  return `${title}\n\n${body ? `${body}\n\n` : ""}Product: ${productId}\nTask: ${task.taskId}\nAttempt: ${attempt}\n`;
}

/** The message of a merge commit into the integration branch or the target. */
export function mergeMessage(productId: string, what: string): string {
  return `Merge ${what}\n\nProduct: ${productId}\n`;
}

/** The `error` of an attempt whose commit conflicts with the integration head (one sentence naming the files). */
export function conflictError(files: readonly string[]): string {
  const shown = files.slice(0, 20).join(", ");
  const more = files.length > 20 ? ` and ${files.length - 20} more` : "";
  return `The task's changes conflict with the integration branch in ${shown || "(unknown files)"}${more}; a fix-up must start from the new head.`;
}

/**
 * The plain-words problem when the integration branch is not at the head the orchestrator recorded (guarantee 16:
 * every branch move is verified against the ref itself), or `null` when it is. `found` is the ref's commit now
 * (`null`: missing).
 */
export function branchMovedProblem(branch: string, expected: string, found: string | null): string | null {
  if (found === expected) return null;
  return `The integration branch ${branch} was moved outside the orchestrator: expected head ${expected}, found ${found ?? "no branch"}. Nothing was merged or overwritten.`;
}

/** What to do about a moved integration branch (the recovery's remediation). */
export const BRANCH_MOVED_REMEDIATION =
  "Move the integration branch back to the expected head (git update-ref), or roll back to a checkpoint, then call product.resume.";

/** What to do when a task's worktree could not be prepared even after the adapter's retries (no attempt is spent). */
export const PREPARE_REMEDIATION =
  "Check that the repository is healthy (git worktree list, free disk space, permissions), then call product.resume.";

/**
 * How a recorded merge (`integrating`) reads back after a crash, from the branch head seen now: `moved` (the merge
 * happened: record it), `notMoved` (redo the move from `from`), or `diverged` (someone else moved the branch: the
 * attempt fails, nothing is overwritten).
 */
export function pendingOutcome(
  pending: PendingIntegration,
  observedHead: string | null,
): "moved" | "notMoved" | "diverged" {
  if (observedHead === pending.to) return "moved";
  if (observedHead === pending.from) return "notMoved";
  return "diverged";
}

/** The `integration` of `product.status` (PROTOCOL.md section 5): the persisted record without internal fields. */
export function integrationView(record: IntegrationRecord): Integration {
  return {
    mode: record.mode,
    branch: record.branch,
    head: record.head,
    ...(record.targetBranch !== undefined ? { targetBranch: record.targetBranch } : {}),
    state: record.state,
    merged: [...record.merged],
    ...(record.conflict ? { conflict: { ...record.conflict, files: [...record.conflict.files] } } : {}),
    ...(record.reason !== undefined ? { reason: record.reason } : {}),
  };
}

/**
 * A plain note for status: why a product is shared, or a warning when shared tasks may run in parallel (more than one
 * task at a time is allowed — by `maxParallelTasks` and by the plan's instances, each running one task at a time — and
 * the plan has two tasks neither of which depends on the other: a strict chain never runs two tasks at once, so it gets
 * no warning).
 */
export function isolationNote(s: ProductState, maxParallelTasks: number): string | undefined {
  if (s.isolation !== "shared") return s.isolationReason;
  // An instance runs one task at a time (DESIGN.md, Execution model): the plan's seats bound the product too.
  const atOnce = Math.min(maxParallelTasks, s.plan?.instances.length ?? maxParallelTasks);
  const parallel =
    atOnce > 1 && !isChain(s.tasks)
      ? ` Up to ${atOnce} tasks run at once in the same folder and may overwrite each other's edits; use isolation "worktree" in a git repository, or maxParallelTasks 1.`
      : "";
  return `${s.isolationReason ?? "Every task runs in cwd."}${parallel}`;
}

export type WorkspaceEvent = Extract<
  ProductEvent,
  { type: "workspaceChosen" | "integrating" | "taskIntegrated" | "attemptKept" | "branchMoved" | "integrationEnded" }
>;

/** True for the events `applyWorkspaceEvent` handles. */
export function isWorkspaceEvent(event: ProductEvent): event is WorkspaceEvent {
  return (
    event.type === "workspaceChosen" ||
    event.type === "integrating" ||
    event.type === "taskIntegrated" ||
    event.type === "attemptKept" ||
    event.type === "branchMoved" ||
    event.type === "integrationEnded"
  );
}

/** Applies one workspace event to a product state, in place. Never throws; never validates (the caller did). */
export function applyWorkspaceEvent(s: ProductState, event: WorkspaceEvent): void {
  switch (event.type) {
    case "workspaceChosen":
      s.isolation = event.isolation;
      if (event.reason !== undefined) s.isolationReason = event.reason;
      else delete s.isolationReason;
      if (event.integration) {
        s.integration = {
          mode: event.integration.mode,
          branch: event.integration.branch,
          base: event.integration.base,
          head: event.integration.base,
          ...(event.integration.targetBranch !== undefined ? { targetBranch: event.integration.targetBranch } : {}),
          state: "pending",
          merged: [],
          kept: 0,
        };
      } else delete s.integration;
      return;
    case "integrating":
      if (s.integration) {
        s.integration.pending = event.pending;
        s.integration.state = "integrating";
      }
      return;
    case "taskIntegrated":
      if (s.integration) {
        s.integration.head = event.head;
        s.integration.merged.push(event.taskId);
        s.integration.state = "pending";
        delete s.integration.pending;
        delete s.integration.conflict;
      }
      return;
    case "attemptKept":
      if (s.integration) {
        delete s.integration.pending;
        s.integration.state = "pending";
        if (event.files.length > 0) s.integration.conflict = { taskId: event.taskId, files: [...event.files] };
      }
      return;
    case "branchMoved":
      if (s.integration) {
        s.integration.head = event.to;
        s.integration.merged = [...event.merged];
        s.integration.kept += 1;
        s.integration.moving = { from: event.from, to: event.to, keptAs: event.keptAs };
        s.integration.state = "pending";
        delete s.integration.pending;
        delete s.integration.conflict;
      }
      return;
    case "integrationEnded":
      if (s.integration) {
        s.integration.state = event.state;
        if (event.state === "conflict") s.integration.conflict = { files: [...(event.files ?? [])] };
        else if (event.state === "integrated") delete s.integration.conflict;
        if (event.reason !== undefined) s.integration.reason = event.reason;
        else delete s.integration.reason;
      }
      return;
  }
}

/**
 * True when no two of `tasks` can run at the same time: every one depends, directly or not, on the one before it in
 * topological order (which holds exactly when each consecutive pair of that order is a direct dependency). False for a
 * graph that cannot be ordered (not for this note to judge).
 */
function isChain(tasks: readonly TaskState[]): boolean {
  let order: TaskState[];
  try {
    order = topologicalOrder(tasks);
  } catch {
    return false;
  }
  for (let i = 1; i < order.length; i += 1) {
    if (!(order[i] as TaskState).dependsOn.includes((order[i - 1] as TaskState).taskId)) return false;
  }
  return true;
}
