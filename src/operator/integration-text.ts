/**
 * What the CLI says about a worktree product's integration (PROTOCOL.md section 5, "Isolation and integration"), in
 * `run`/`resume`'s result line and `status`. A new user's trial read "merged into main" for a merge that was
 * deferred (their checkout had untracked files in the way): the target is named as merged only when it was, and a
 * deferred or conflicting merge says why and how to finish it.
 */
import { shellWord } from "./cli-verbs.js";

/** The integration fields these sentences read (`product.status`'s `integration`). */
export interface IntegrationLike {
  mode?: string;
  branch?: string;
  state?: string;
  targetBranch?: string;
  merged?: string[];
  reason?: string;
  conflict?: { taskId?: string; files?: string[] };
}

/**
 * One clause after the branch name: `merged into main`, `not merged into main: <why>`, or `integration <state>` for
 * a `branch`-mode product. `mergedSince`: the target was found to hold the branch's head although the product
 * recorded a deferral (the user ran `merge ID` since; the store is not written after a product ended).
 */
export function integrationClause(i: IntegrationLike, mergedSince = false): string {
  const target = i.mode === "merge" ? i.targetBranch : undefined;
  if (target === undefined) return `integration ${i.state ?? "pending"}`;
  if (i.state === "integrated") return `merged into ${target}`;
  if (mergedSince) return `merged into ${target} since (its merge was deferred when the product ended)`;
  if (i.state === "deferred") return `not merged into ${target}: ${i.reason ?? "the merge was deferred"}`;
  if (i.state === "conflict") {
    const files = i.conflict?.files?.join(", ") || "unknown files";
    return `not merged into ${target}: it conflicts in ${files}`;
  }
  return `not merged into ${target} yet (integration ${i.state ?? "pending"})`;
}

/**
 * True when a completed `merge`-mode product's merge into its target was left undone (deferred or conflicting): the
 * case in which `finishMergeCommand` names a command and `mergedSinceDeferral` (product-merge.ts) asks git.
 */
export function mergeLeftOpen(i: IntegrationLike | undefined, phase: unknown): boolean {
  return phase === "completed" && i?.mode === "merge" && (i.state === "deferred" || i.state === "conflict");
}

/**
 * The command that finishes a merge the product could not make (deferred or conflicting, `merge` mode, completed),
 * with `flags` (the store flags, cli-verbs.ts `storeFlags`) and the product's folder; `undefined` when nothing is left.
 */
export function finishMergeCommand(
  i: IntegrationLike,
  productId: string,
  phase: string,
  cwd: string | undefined,
  flags = "",
  mergedSince = false,
): string | undefined {
  if (mergedSince || !mergeLeftOpen(i, phase)) return undefined;
  const where = cwd === undefined ? "" : ` --cwd ${shellWord(cwd)}`;
  return `acp-orchestrator merge ${productId}${flags}${where}`;
}
