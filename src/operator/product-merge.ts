/**
 * Bringing a completed `branch`-mode product into the branch checked out in a directory (issue 29): `merge ID` and the
 * dashboard's merge button. The same rules as `integration.mode: merge`, through the workspace adapter's target merge
 * (fast-forward or merge commit, never a rewrite; deferred, with nothing touched, while a merge, rebase, cherry-pick,
 * revert or bisect is in progress or uncommitted changes are in the way; a conflict changes nothing).
 *
 * Owns the preconditions and the outcome's sentence. Records nothing in the store (the product is finished).
 */
import { runGit } from "../adapters/workspace/git-cli.js";
import { GitWorkspace } from "../adapters/workspace/git-workspace.js";
import { mergeLeftOpen, type IntegrationLike } from "./integration-text.js";
import { ChangeUnavailable } from "./product-git.js";
import type { RunStateReader } from "./run-state-reader.js";

/** What a merge did: `merged` true when the branch moved; `message` one sentence either way. */
export interface MergeOutcome {
  merged: boolean;
  message: string;
}

/**
 * Merges product `productId`'s integration branch into the branch checked out in `cwd`. Throws `ChangeUnavailable`
 * when the product is not completed, has no integration branch, was merged already, `cwd` is not on a branch or does
 * not hold the product's head; not_found for an unknown product.
 */
export async function mergeProduct(reader: RunStateReader, productId: string, cwd: string): Promise<MergeOutcome> {
  const status = await reader.productStatus(productId);
  const integration = status.integration as
    | { mode?: string; branch?: string; head?: string; state?: string }
    | undefined;
  if (status.phase !== "completed") {
    throw new ChangeUnavailable(`Product ${productId} is ${String(status.phase)}; only a completed product is merged.`);
  }
  if (!integration?.head || !integration.branch) {
    throw new ChangeUnavailable(`Product ${productId} has no integration branch (it ran in a shared folder).`);
  }
  if (integration.mode === "merge" && integration.state === "integrated") {
    throw new ChangeUnavailable(
      `Product ${productId} was already merged into its target branch (integration "merge").`,
    );
  }
  const branch = await runGit(cwd, ["symbolic-ref", "-q", "--short", "HEAD"]);
  if (branch.code !== 0)
    throw new ChangeUnavailable(`${cwd} is not on a branch (a detached HEAD or not a git checkout).`);
  const target = branch.stdout.trim();
  const known = await runGit(cwd, ["cat-file", "-e", `${integration.head}^{commit}`]);
  if (known.code !== 0) {
    throw new ChangeUnavailable(
      `The repository at ${cwd} does not hold ${integration.branch} (${integration.head.slice(0, 12)}).`,
    );
  }
  const name = typeof status.name === "string" ? status.name : productId;
  const outcome = await new GitWorkspace().integrateInto(
    cwd,
    target,
    integration.head,
    `Merge ${integration.branch}: ${name}\n\nProduct: ${productId}\n`,
  );
  if (outcome.state === "integrated") {
    return {
      merged: true,
      message: `merged ${integration.branch} into ${target} (now at ${outcome.head.slice(0, 12)})`,
    };
  }
  if (outcome.state === "conflict") {
    return {
      merged: false,
      message: `${integration.branch} conflicts with ${target} in ${outcome.files.join(", ")}; nothing was changed.`,
    };
  }
  return { merged: false, message: outcome.reason };
}

/**
 * True when a completed `merge`-mode product recorded its merge as deferred or conflicting, and its target branch in
 * its folder `cwd` now holds the integration head (the user merged it since, with `merge ID` or by hand: the store is not
 * written after a product ended). False when anything is unknown or git cannot tell.
 */
export async function mergedSinceDeferral(status: Record<string, unknown>, cwd: string): Promise<boolean> {
  const i = status.integration as (IntegrationLike & { head?: string }) | undefined;
  if (!mergeLeftOpen(i, status.phase) || !i?.head || !i.targetBranch) return false;
  const r = await runGit(cwd, ["merge-base", "--is-ancestor", i.head, `refs/heads/${i.targetBranch}`]).catch(
    () => null,
  );
  return r?.code === 0;
}
