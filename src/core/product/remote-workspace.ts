/**
 * The confirmation step of a remote-backed product (issue 33; PROTOCOL.md section 5, "Code through a git remote"):
 * its isolation is always `worktree` in a mirror of the remote, its integration mode `branch` (the result is the
 * pushed `acp/<productId>`), and its base the remote's `baseRef` (default: the remote's HEAD) as fetched now.
 * Used by workspace-coordinator.ts; must never import I/O.
 */
import type { WorkspaceRemote } from "../../../protocol/workspace-remote.js";
import type { Phase } from "../../../protocol/common.js";
import { DomainError, invalidInput } from "../errors.js";
import type { WorkspacePort } from "../ports.js";
import type { PendingIntegration } from "../workspace/records.js";
import { integrationBranch } from "../workspace/integration.js";
import type { NewEvent } from "./decide.js";

/** The remediation of a product paused because its git remote could not be reached or refused a push. */
export const REMOTE_REMEDIATION =
  "Make the git remote reachable and let it accept pushes to the product's refs (check its URL, network, credentials and hooks), then call product.resume; nothing recorded is lost.";

/**
 * The `workspaceChosen` event of a remote-backed product: fetches the remote into the mirror (`inspect`) and reads
 * the base. Throws `invalid_input` naming the remote when it cannot be reached, has no commit, or has no `baseRef`
 * (the product stays in `planning`: a remote product never falls back to sharing `cwd`).
 */
export async function remoteWorkspaceChosen(
  productId: string,
  workspace: WorkspaceRemote,
  port: WorkspacePort,
): Promise<NewEvent> {
  const info = await port.inspect(workspace.remote);
  if (info.kind === "none") throw invalidInput(info.reason);
  let base = info.head;
  if (workspace.baseRef !== undefined) {
    const found = await port.readRef(workspace.remote, workspace.baseRef);
    if (found === null)
      throw invalidInput(`The base ref ${workspace.baseRef} does not exist on the git remote ${workspace.remote}`);
    base = found;
  }
  return {
    type: "workspaceChosen",
    isolation: "worktree",
    integration: { mode: "branch", branch: integrationBranch(productId), base },
  };
}

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** Fetches a remote product's mirror (no-op for a local port); the plain-words problem when it fails, else `null`. */
export async function refreshProblem(port: WorkspacePort, repo: string): Promise<string | null> {
  try {
    await port.refresh?.(repo);
    return null;
  } catch (err) {
    return messageOf(err);
  }
}

/**
 * Fetches a remote product's mirror before a resume settles what was recorded (no-op for a local port). A remote
 * that is still away refuses the resume (`invalid_phase`, naming the remote); nothing recorded changes.
 */
export async function refreshForResume(port: WorkspacePort, repo: string, productId: string, phase: Phase) {
  const problem = await refreshProblem(port, repo);
  if (problem !== null)
    throw new DomainError("invalid_phase", `Product ${productId} cannot resume yet: ${problem}`, {
      phase,
      allowed: [],
    });
}

/**
 * Keeps a recorded merge's attempt commit under its ref and moves the integration branch `branchRef` from
 * `pending.from` to `pending.to` by compare-and-swap: one `moveRefs` call when the port has it (a remote product's
 * two refs in one push: 1 push per task instead of 2), else two `moveRef` calls, attempt ref first. Returns whether
 * the branch is at `pending.to` afterwards (the attempt ref's answer does not matter: an existing ref keeps the
 * commit either way). Throws as the port does (a remote away or refusing).
 */
export async function keepAndMoveBranch(
  port: WorkspacePort,
  repo: string,
  branchRef: string,
  pending: PendingIntegration,
): Promise<boolean> {
  const keep = { ref: pending.ref, to: pending.commit, expected: null };
  const move = { ref: branchRef, to: pending.to, expected: pending.from };
  if (port.moveRefs) return (await port.moveRefs(repo, [keep, move]))[1] === true;
  await port.moveRef(repo, keep.ref, keep.to, keep.expected);
  return port.moveRef(repo, move.ref, move.to, move.expected);
}
