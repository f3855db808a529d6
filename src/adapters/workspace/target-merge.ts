/**
 * The end merge of `integration.mode: merge` into the user's branch (DESIGN.md, Workspaces and integration; guarantee
 * 16: the user's checkout, index and in-progress git operation are never touched behind their back).
 *
 * The merge is computed without any checkout (`git merge-tree --write-tree` + `commit-tree`, so a conflict names every
 * conflicting file and changes nothing). The user's branch then moves only if nothing of the user's is in the way:
 * - a merge, rebase, cherry-pick, revert or bisect in progress in the user's checkout (or, in any other worktree, one
 *   that involves the branch), or the branch checked out in another worktree: `deferred`, nothing touched;
 * - the branch checked out in the user's checkout: staged or unstaged changes in a file the merge changes: `deferred`;
 *   otherwise a fast-forward of the checkout to the computed commit (`git merge --ff-only`, which changes index and
 *   working tree only for the files the merge changes and refuses, changing nothing, when a file is in the way: then
 *   `deferred` too). There is never a `git merge --abort`: there is never a half-done merge of ours to abort.
 * - the branch not checked out: a compare-and-swap of the ref.
 *
 * Owns those checks and the move; it reads the user's git directories as files and never writes in them, except the
 * fast-forward itself.
 */
import { lstat, readdir, readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { TargetOutcome } from "../../core/ports.js";
import { git, runGit } from "./git-cli.js";

/** In-progress operation markers in a git directory, and the words that name them. */
const IN_PROGRESS: readonly [string, string][] = [
  ["MERGE_HEAD", "a merge"],
  ["rebase-merge", "a rebase"],
  ["rebase-apply", "a rebase (or git am)"],
  ["CHERRY_PICK_HEAD", "a cherry-pick"],
  ["REVERT_HEAD", "a revert"],
  ["sequencer", "a cherry-pick or revert sequence"],
  ["BISECT_LOG", "a bisect"],
];

function lines(text: string): string[] {
  return text.split("\n").filter((l) => l.length > 0);
}

async function present(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Whether `path` exists, without following a symlink at it. */
async function lexists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

async function text(path: string): Promise<string> {
  return readFile(path, "utf8").then(
    (t) => t.trim(),
    () => "",
  );
}

/** The merged tree of two commits, or the conflicting files (every one). Writes objects only. */
export async function mergeTree(
  cwd: string,
  a: string,
  b: string,
): Promise<{ kind: "tree"; tree: string } | { kind: "conflict"; files: string[] }> {
  const r = await runGit(cwd, ["merge-tree", "--write-tree", "--name-only", "--no-messages", a, b]);
  const out = lines(r.stdout);
  if (r.code === 0 && out[0]) return { kind: "tree", tree: out[0] };
  if (r.code === 1) return { kind: "conflict", files: [...new Set(out.slice(1))].sort() };
  throw new Error(`git merge-tree failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().split("\n")[0] ?? ""}`);
}

/**
 * Why the user's repository cannot take a move of `ref` now, or `null`: an operation in progress in `ownGitDir` (the
 * user's checkout), or in another worktree whose HEAD or rebase is on `ref`, or `ref` checked out in another
 * worktree. Worktrees under `<common>/acp-orchestrator/` (the orchestrator's own) are not the user's. Reads files only.
 */
async function blockedBy(common: string, ownGitDir: string, ref: string): Promise<string | null> {
  const dirs = [common];
  try {
    for (const name of await readdir(join(common, "worktrees"))) dirs.push(join(common, "worktrees", name));
  } catch {
    // no linked worktrees
  }
  const ours = join(common, "acp-orchestrator") + "/";
  for (const dir of dirs) {
    const own = resolve(dir) === resolve(ownGitDir);
    if (!own && resolve(await text(join(dir, "gitdir"))).startsWith(ours)) continue;
    const head = await text(join(dir, "HEAD"));
    const rebasing =
      (await text(join(dir, "rebase-merge", "head-name"))) || (await text(join(dir, "rebase-apply", "head-name")));
    const involved = own || head === `ref: ${ref}` || rebasing === ref;
    if (!involved) continue;
    for (const [marker, words] of IN_PROGRESS) {
      if (await present(join(dir, marker))) {
        const where = own ? "the checkout" : `the worktree of ${dir}`;
        return `${words[0]?.toUpperCase()}${words.slice(1)} is in progress in ${where}; the orchestrator leaves it alone.`;
      }
    }
    if (!own && head === `ref: ${ref}`) return `The branch is checked out in another worktree (${dir}).`;
  }
  return null;
}

/** At most 20 paths, comma-separated, then "and N more". */
function boundedList(paths: readonly string[]): string {
  return paths.slice(0, 20).join(", ") + (paths.length > 20 ? ` and ${paths.length - 20} more` : "");
}

/**
 * The untracked (not ignored) files of the checkout at `cwd` at paths the merge from `current` to `commit` adds,
 * sorted, relative to the repository's top: what makes `git merge --ff-only` refuse ("untracked working tree files
 * would be overwritten"; a new user's trial: the refusal named none of them). Reads only.
 */
async function untrackedInTheWay(cwd: string, current: string, commit: string): Promise<string[]> {
  const top = (await git(cwd, ["rev-parse", "--show-toplevel"])).trim();
  const added = (
    await git(top, ["diff-tree", "-r", "--no-renames", "--diff-filter=A", "--name-only", "-z", current, commit])
  )
    .split("\0")
    .filter(Boolean);
  const onDisk: string[] = [];
  for (const path of added) if (await lexists(join(top, path))) onDisk.push(path);
  const untracked: string[] = [];
  for (let i = 0; i < onDisk.length; i += 500) {
    const chunk = onDisk.slice(i, i + 500);
    const listed = await git(top, [
      "--literal-pathspecs",
      "ls-files",
      "--others",
      "--exclude-standard",
      "-z",
      "--",
      ...chunk,
    ]);
    untracked.push(...listed.split("\0").filter(Boolean));
  }
  return [...new Set(untracked)].sort();
}

/** The merge result of `head` into `current` (the target's head): the commit to move to, or the conflict. */
async function targetCommit(
  cwd: string,
  current: string,
  head: string,
  message: string,
): Promise<{ commit: string } | { files: string[] }> {
  const base = await runGit(cwd, ["merge-base", current, head]);
  const common = base.code === 0 ? base.stdout.trim() : null;
  if (common === current) return { commit: head };
  if (common === head) return { commit: current };
  const tree = await mergeTree(cwd, current, head);
  if (tree.kind === "conflict") return { files: tree.files };
  return { commit: (await git(cwd, ["commit-tree", tree.tree, "-p", current, "-p", head, "-F", "-"], message)).trim() };
}

/**
 * Brings `head` into the branch `target` of the repository at `cwd` (see the file comment). `moveRef` is the
 * adapter's compare-and-swap. Returns `integrated` with the target's new head, `conflict` with every conflicting file,
 * or `deferred` with the reason (then nothing of the user's changed: the result stays on the integration branch).
 * Throws when git fails, or when the branch moved while it was being merged (nothing changed then either).
 */
export async function integrateIntoTarget(
  cwd: string,
  target: string,
  head: string,
  message: string,
  moveRef: (ref: string, to: string, expected: string | null) => Promise<boolean>,
): Promise<TargetOutcome> {
  const ref = `refs/heads/${target}`;
  const found = await runGit(cwd, ["rev-parse", "-q", "--verify", `${ref}^{commit}`]);
  const current = found.code === 0 ? found.stdout.trim() : null;
  if (current === null) {
    if (await moveRef(ref, head, null)) return { state: "integrated", head };
    throw new Error(`The branch ${target} appeared while it was being created; nothing was changed.`);
  }
  const common = resolve(cwd, (await git(cwd, ["rev-parse", "--path-format=absolute", "--git-common-dir"])).trim());
  const ownGitDir = resolve(cwd, (await git(cwd, ["rev-parse", "--path-format=absolute", "--git-dir"])).trim());
  const blocked = await blockedBy(common, ownGitDir, ref);
  if (blocked) return { state: "deferred", reason: `${target} was not changed: ${blocked}` };
  const outcome = await targetCommit(cwd, current, head, message);
  if ("files" in outcome) return { state: "conflict", files: outcome.files };
  if (outcome.commit === current) return { state: "integrated", head: current };
  const checkedOut = (await text(join(ownGitDir, "HEAD"))) === `ref: ${ref}`;
  if (!checkedOut) {
    if (await moveRef(ref, outcome.commit, current)) return { state: "integrated", head: outcome.commit };
    throw new Error(`The branch ${target} moved while the product was being merged into it; nothing was changed.`);
  }
  const touched = new Set(
    (await git(cwd, ["diff-tree", "-r", "--no-renames", "--name-only", "-z", current, outcome.commit]))
      .split("\0")
      .filter(Boolean),
  );
  const staged = (await git(cwd, ["diff-index", "--cached", "--no-renames", "--name-only", "-z", current]))
    .split("\0")
    .filter(Boolean);
  const unstaged = (await git(cwd, ["diff-files", "--no-renames", "--name-only", "-z"])).split("\0").filter(Boolean);
  const inWay = [...new Set([...staged, ...unstaged])].filter((f) => touched.has(f)).sort();
  if (inWay.length > 0) {
    return {
      state: "deferred",
      reason: `${target} was not changed: the checkout has uncommitted changes in files the merge changes (${boundedList(inWay)}).`,
    };
  }
  const ff = await runGit(cwd, ["merge", "--ff-only", "--no-edit", "-q", outcome.commit]);
  if (ff.code !== 0) {
    const untracked = await untrackedInTheWay(cwd, current, outcome.commit);
    if (untracked.length > 0) {
      return {
        state: "deferred",
        reason:
          `${target} was not changed: the checkout has untracked files where the merge writes (${boundedList(untracked)}); ` +
          "move or remove them and merge again.",
      };
    }
    const line = (ff.stderr || ff.stdout).trim().split("\n")[0] ?? "";
    return { state: "deferred", reason: `${target} was not changed: git refused to update the checkout (${line}).` };
  }
  return { state: "integrated", head: outcome.commit };
}
