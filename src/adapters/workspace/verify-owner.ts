/**
 * Who uses a verify folder, and removing the folders of processes that are gone (docs/VERIFY.md, "Verify
 * worktrees"; issue 30 follow-up: a `verify` CLI or a server killed with SIGKILL left its verify worktree behind, and
 * a registered git worktree with it).
 *
 * Each verify folder `<git-common-dir>/acp-orchestrator/verify/<name>/` (a product's, a goal run's, or one `verify`
 * command's) holds a file `owner` with the owner id of the process that made its worktrees, in the format of the
 * product leases (adapters/system/process-liveness.ts: host, pid, start time, boot and pid namespace). A process
 * sweeps the repository's verify folders before its first verification there (`sweepStaleVerifyDirs`): a folder whose
 * owner is provably `dead` is moved aside (an atomic rename) and removed, and git's registrations of its worktrees are
 * pruned. A folder whose owner is alive, or whose liveness cannot be told (another host, no start time, no `owner`
 * file), is never touched. Claiming a folder (writing `owner`) and judging it happen under the repository's worktree
 * administration lock (worktree-lock.ts), so a sweep never removes a folder a live process has just claimed.
 *
 * Owns the `owner` files and the `.trash-*` folders under `verify/`; never signals or waits for any process.
 */
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { nodeCrypto } from "../system/node-builtins.js";
import type { OwnerLivenessVerdict } from "../../core/ports.js";
import { runGit } from "./git-cli.js";
import { withWorktreeAdmin } from "./worktree-lock.js";

/** The file in a verify folder naming the process that uses it. */
export const VERIFY_OWNER_FILE = "owner";

/** This process's owner id and a liveness verdict for another's (ProcessLiveness is the real one). */
export interface VerifyOwnerLiveness {
  readonly ownerId: string;
  check(ownerId: string): OwnerLivenessVerdict;
}

/** The folder under the repository's common dir that holds every verify folder. */
export function verifyRoot(commonDir: string): string {
  return join(commonDir, "acp-orchestrator", "verify");
}

/** Makes `dir` (a verify folder) if needed and marks it as this process's, under the worktree administration lock. */
export async function claimVerifyDir(commonDir: string, dir: string, liveness: VerifyOwnerLiveness): Promise<void> {
  await withWorktreeAdmin(commonDir, async () => {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, VERIFY_OWNER_FILE), `${liveness.ownerId}\n`);
  });
}

/**
 * Removes verify folder `dir` (none there is fine): renames it aside first, so a half-done removal (a kill) leaves a
 * `.trash-*` folder with the same `owner` that the next sweep removes, then deletes it and prunes git's registrations
 * of the worktrees that were in it.
 */
export async function discardVerifyDir(cwd: string, commonDir: string, dir: string): Promise<void> {
  const trash = trashPath(commonDir);
  const moved = await withWorktreeAdmin(commonDir, () =>
    rename(dir, trash).then(
      () => true,
      (err: NodeJS.ErrnoException) => {
        if (err.code === "ENOENT") return false;
        throw err;
      },
    ),
  );
  if (!moved) return;
  await rm(trash, { recursive: true, force: true });
  await withWorktreeAdmin(commonDir, () => runGit(cwd, [`--git-dir=${commonDir}`, "worktree", "prune"]));
}

/**
 * Removes every verify folder of the repository (common dir `commonDir`, any checkout `cwd`) whose `owner` is `dead`
 * by `liveness`, and prunes git's registrations of their worktrees. Resolves the names removed. A folder that cannot
 * be judged or moved is left as it is; rejects only when the removal of a moved folder fails.
 */
export async function sweepStaleVerifyDirs(
  cwd: string,
  commonDir: string,
  liveness: VerifyOwnerLiveness,
): Promise<string[]> {
  const root = verifyRoot(commonDir);
  const names = await readdir(root).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of names) {
    const dir = join(root, name);
    const trash = trashPath(commonDir);
    const moved = await withWorktreeAdmin(commonDir, async () => {
      const owner = (await readFile(join(dir, VERIFY_OWNER_FILE), "utf8").catch(() => "")).trim();
      if (owner === "" || liveness.check(owner) !== "dead") return false;
      return rename(dir, trash).then(
        () => true,
        () => false,
      );
    });
    if (!moved) continue;
    await rm(trash, { recursive: true, force: true });
    removed.push(name);
  }
  if (removed.length > 0) {
    await withWorktreeAdmin(commonDir, () => runGit(cwd, [`--git-dir=${commonDir}`, "worktree", "prune"]));
  }
  return removed;
}

function trashPath(commonDir: string): string {
  return join(verifyRoot(commonDir), `.trash-${process.pid}-${nodeCrypto().randomBytes(6).toString("hex")}`);
}
