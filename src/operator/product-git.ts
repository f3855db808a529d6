/**
 * A product's change as git sees it (issue 29): the commits a task or a whole product moved from and to, read from
 * `product.status` (TaskWorkspace `baseCommit`/`commit`, Integration `head`) and the product's `created` event (its
 * `cwd`, the repository), and the diff between them. Used by the `diff` and `merge` commands and the dashboard.
 *
 * Owns that resolution and the read-only git calls (through git-cli.ts: explicit repository, hooks and fsmonitor
 * off). It never moves a ref or touches a working tree; `merge` does that through the workspace adapter.
 */
import { runGit } from "../adapters/workspace/git-cli.js";
import type { RunStateReader } from "./run-state-reader.js";

interface TaskView {
  taskId: string;
  status: string;
  dependsOn: string[];
  workspace?: { baseCommit: string; commit?: string; branch?: string };
}

/** What a product's (or one task's) change is, in git terms. */
export interface ChangeRange {
  /** The product's repository directory (its `cwd`). */
  cwd: string;
  base: string;
  head: string;
  /** What the range is of, for messages: `task t2` or `product prd_…`. */
  what: string;
}

/** Refusal of a diff or merge, one plain sentence. */
export class ChangeUnavailable extends Error {
  override readonly name = "ChangeUnavailable";
}

/** The product's `cwd`, from its `created` event. Throws not_found for an unknown product. */
export async function productCwd(reader: RunStateReader, productId: string): Promise<string> {
  const [first] = await reader.productEvents(productId, 0, 1);
  const created = first?.event;
  if (!created || created.type !== "created") {
    throw new ChangeUnavailable(`The first stored event of ${productId} is not its creation; its folder is unknown.`);
  }
  return created.cwd;
}

/**
 * The commits of `taskId`'s last attempt, or of the whole product (`taskId` undefined: from the commit its integration
 * branch was created from at confirmation, where its first tasks started, to the integration head; a retry or
 * rollback does not move it). Throws `ChangeUnavailable` when the product did not run isolated in worktrees
 * or the task has no commit yet; not_found for an unknown product.
 */
export async function changeRange(reader: RunStateReader, productId: string, taskId?: string): Promise<ChangeRange> {
  const status = await reader.productStatus(productId);
  const cwd = await productCwd(reader, productId);
  const tasks = (status.tasks ?? []) as TaskView[];
  if (status.isolation !== "worktree") {
    throw new ChangeUnavailable(
      `Product ${productId} ran in a shared folder (isolation "shared"), so its changes are not commits of their own; see git diff in ${cwd}.`,
    );
  }
  if (taskId !== undefined) {
    const task = tasks.find((t) => t.taskId === taskId);
    if (!task) throw new ChangeUnavailable(`Product ${productId} has no task ${taskId}.`);
    if (!task.workspace) throw new ChangeUnavailable(`Task ${taskId} of ${productId} has not run yet.`);
    const head = task.workspace.commit;
    if (head === undefined)
      throw new ChangeUnavailable(
        `Task ${taskId} of ${productId} has no commit (it is ${task.status}, or changed nothing).`,
      );
    return { cwd, base: task.workspace.baseCommit, head, what: `task ${taskId}` };
  }
  const integration = status.integration as { head?: string; branch?: string } | undefined;
  // The base the integration branch was created from, never a later attempt's: after a retry or rollback the first
  // tasks start on the integration head, and a diff from there would hide what a merge still brings in.
  const root = await reader.integrationBase(productId);
  if (!integration?.head || root === undefined) {
    throw new ChangeUnavailable(`Product ${productId} has no integrated work yet.`);
  }
  return { cwd, base: root, head: integration.head, what: `product ${productId}` };
}

/**
 * `git diff base head` of `range` (with `--stat` first), coloured when `color`. Resolves with git's output; throws
 * `ChangeUnavailable` when git refuses (e.g. the commits are not in that repository any more).
 */
export async function diffText(range: ChangeRange, options: { color: boolean; stat?: boolean }): Promise<string> {
  const args = [
    "-c",
    `color.ui=${options.color ? "always" : "never"}`,
    "diff",
    "--no-ext-diff",
    "--no-textconv",
    ...(options.stat === false ? [] : ["--stat", "--patch"]),
    range.base,
    range.head,
    "--",
  ];
  const r = await runGit(range.cwd, args);
  if (r.code !== 0) {
    const line = (r.stderr || r.stdout).trim().split("\n")[0] ?? "";
    throw new ChangeUnavailable(`git could not diff ${range.what} in ${range.cwd} (${line}).`);
  }
  return r.stdout;
}
