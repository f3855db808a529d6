/**
 * GitWorkspace: the `WorkspacePort` over a local git repository (DESIGN.md, Workspaces and integration; guarantee 11).
 *
 * Task attempts get detached worktrees under `<git-common-dir>/acp-orchestrator/worktrees/<productId>/`, so they never
 * show in the user's `git status`. Results are committed in the worktree with plumbing (`add -A`, `write-tree`,
 * `commit-tree`: no hook, no second scan of the tree), merged without any checkout (`git merge-tree --write-tree` +
 * `git commit-tree`), and every ref move is `git update-ref <ref> <new> <old>`: a compare-and-swap on the expected
 * head, so a step repeated after a crash either finds the ref where it left it or refuses. Hooks and commit signing
 * are switched off for the commands it runs (they are the orchestrator's commits, not the user's).
 *
 * Reuse (issue 12, cost per task): checking out every file of a large repository for each attempt dominates the cost
 * of isolation (seconds at 10,000 files). A worktree released with `reuse` is parked in the product's folder under a
 * name no attempt path can take (`~spare-<pid>-<n>`), and the product's next `prepare` moves it to the new attempt's
 * path, then `checkout -f` to the base and `clean -ffdx`: only the files that differ are written, and nothing of the
 * previous attempt survives (tracked files are the base's, untracked and ignored files are gone). Parked worktrees are
 * listed by `leftovers`, so the orchestrator removes them like any other (`release` without reuse) when the product
 * stops, and a resumed product prunes a dead owner's. The pool is in memory: a restarted server starts empty.
 *
 * It decides nothing (the core does: src/core/workspace/) and must never touch the user's working tree or branches,
 * except `integrateInto` a target branch when the product's integration mode is `merge`.
 */
import { mkdir, readdir, rm, stat } from "node:fs/promises";
import { basename, dirname, join, resolve, sep } from "node:path";
import type { MergeOutcome, WorkspaceInfo, WorkspacePort } from "../../core/ports.js";
import { git, runGit } from "./git-cli.js";

/** Per-worktree operation state a worker's own git commands can leave behind (files and folders in its git dir). */
const OPERATION_STATE = [
  "BISECT_LOG",
  "BISECT_START",
  "BISECT_TERMS",
  "BISECT_NAMES",
  "BISECT_EXPECTED_REV",
  "BISECT_ANCESTORS_OK",
  "MERGE_HEAD",
  "MERGE_MSG",
  "MERGE_MODE",
  "MERGE_RR",
  "AUTO_MERGE",
  "CHERRY_PICK_HEAD",
  "REVERT_HEAD",
  "REBASE_HEAD",
  "ORIG_HEAD",
  "sequencer",
  "rebase-merge",
  "rebase-apply",
];

/**
 * Clears what an earlier attempt's own git commands left in a parked worktree beyond its files, so a reused worktree
 * is exactly a fresh one (guarantee 11): index entries marked skip-worktree or assume-unchanged (which would hide a
 * stale file from `checkout -f` and from the next capture), and bisect, merge, rebase and sequencer state.
 * Throws when git fails (the caller then starts a fresh worktree).
 */
async function forgetAttemptState(path: string): Promise<void> {
  const entries = (await git(path, ["ls-files", "-v", "-z"])).split("\0").filter((entry) => entry.length > 2);
  const skipped = entries.filter((entry) => entry[0] === "S").map((entry) => entry.slice(2));
  const assumed = entries.filter((entry) => /^[a-z]$/.test(entry[0] as string)).map((entry) => entry.slice(2));
  // One flag per command: git 2.39 applies only one of --no-skip-worktree/--no-assume-unchanged to --stdin paths.
  if (skipped.length > 0)
    await git(path, ["update-index", "--no-skip-worktree", "-z", "--stdin"], `${skipped.join("\0")}\0`);
  if (assumed.length > 0)
    await git(path, ["update-index", "--no-assume-unchanged", "-z", "--stdin"], `${assumed.join("\0")}\0`);
  const gitDir = resolve(path, (await git(path, ["rev-parse", "--git-dir"])).trim());
  await Promise.all(OPERATION_STATE.map((name) => rm(join(gitDir, name), { recursive: true, force: true })));
  const bisectRefs = (await git(path, ["for-each-ref", "--format=%(refname)", "refs/bisect/"]))
    .split("\n")
    .filter(Boolean);
  for (const ref of bisectRefs) await git(path, ["update-ref", "-d", ref]);
}

/** `git -c …` options for commands that could run the user's hooks or ask for a signature. */
const QUIET = ["-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", "-c", "advice.detachedHead=false"];

/** A path component made of safe characters only (task ids are validated ids already; this is a second fence). */
function component(text: string): string {
  return text.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 100) || "_";
}

function lines(text: string): string[] {
  return text.split("\n").filter((l) => l.length > 0);
}

/** Prefix of a parked worktree's folder name; `component` never produces `~`, so no attempt path starts with it. */
const SPARE_PREFIX = "~spare-";

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

export class GitWorkspace implements WorkspacePort {
  /** Git common directory per cwd (a repository does not move while the server runs). */
  private readonly commonDirs = new Map<string, Promise<string>>();
  /** Parked worktrees per product folder, ready for that product's next attempt (see the file comment). */
  private readonly spares = new Map<string, string[]>();
  /** Parked worktrees a `prepare` took and is moving: a concurrent `release` of one of them leaves it alone. */
  private readonly claimed = new Set<string>();
  private spareSeq = 0;

  async inspect(cwd: string): Promise<WorkspaceInfo> {
    try {
      const inside = await runGit(cwd, ["rev-parse", "--is-inside-work-tree"]);
      if (inside.code !== 0 || inside.stdout.trim() !== "true") {
        return { kind: "none", reason: `${cwd} is not inside a git working tree, so tasks share it.` };
      }
      const head = await runGit(cwd, ["rev-parse", "-q", "--verify", "HEAD^{commit}"]);
      if (head.code !== 0) {
        return {
          kind: "none",
          reason: `The git repository at ${cwd} has no commit yet, so there is nothing to branch from and tasks share the folder; commit once to get one worktree per task.`,
        };
      }
      const branch = await runGit(cwd, ["symbolic-ref", "-q", "--short", "HEAD"]);
      return { kind: "git", head: head.stdout.trim(), branch: branch.code === 0 ? branch.stdout.trim() || null : null };
    } catch (err) {
      return {
        kind: "none",
        reason: `git cannot be run here (${err instanceof Error ? err.message : String(err)}), so tasks share ${cwd}.`,
      };
    }
  }

  private commonDir(cwd: string): Promise<string> {
    let dir = this.commonDirs.get(cwd);
    if (!dir) {
      dir = git(cwd, ["rev-parse", "--path-format=absolute", "--git-common-dir"]).then((out) => resolve(out.trim()));
      dir.catch(() => this.commonDirs.delete(cwd));
      this.commonDirs.set(cwd, dir);
    }
    return dir;
  }

  private async productDir(cwd: string, productId: string): Promise<string> {
    return join(await this.commonDir(cwd), "acp-orchestrator", "worktrees", component(productId));
  }

  async attemptPath(cwd: string, productId: string, taskId: string, attempt: number): Promise<string> {
    return join(await this.productDir(cwd, productId), `${component(taskId)}-${attempt}`);
  }

  async readRef(cwd: string, ref: string): Promise<string | null> {
    const r = await runGit(cwd, ["rev-parse", "-q", "--verify", `${ref}^{commit}`]);
    return r.code === 0 ? r.stdout.trim() : null;
  }

  async moveRef(cwd: string, ref: string, to: string, expected: string | null): Promise<boolean> {
    const r = await runGit(cwd, ["update-ref", "-m", "acp-orchestrator", ref, to, expected ?? ""]);
    if (r.code === 0) return true;
    return (await this.readRef(cwd, ref)) === to;
  }

  async deleteRefs(cwd: string, refs: string[], prefix?: string): Promise<void> {
    const all = new Set(refs);
    if (prefix)
      for (const name of lines(await git(cwd, ["for-each-ref", "--format=%(refname)", prefix]))) all.add(name);
    const existing: string[] = [];
    for (const ref of all) if ((await runGit(cwd, ["show-ref", "--verify", "-q", ref])).code === 0) existing.push(ref);
    if (existing.length === 0) return;
    await git(cwd, ["update-ref", "--stdin"], existing.map((ref) => `delete ${ref}\n`).join(""));
  }

  /**
   * Creates the attempt's worktree at `path`, checked out at `base`: a parked worktree of the same product when there
   * is one (moved to `path`, forced to `base`, every untracked and ignored file removed), else a new one. An existing
   * worktree at `path` is kept as it is (a repeated prepare after a crash).
   */
  async prepare(cwd: string, path: string, base: string): Promise<void> {
    if (await exists(join(path, ".git"))) {
      const existing = await runGit(path, ["rev-parse", "--show-toplevel"]);
      if (existing.code === 0 && resolve(existing.stdout.trim()) === resolve(path)) return;
    }
    const spare = this.takeSpare(dirname(path));
    if (spare !== undefined) {
      try {
        await rm(path, { recursive: true, force: true });
        await git(cwd, ["worktree", "move", spare, path]);
        this.claimed.delete(spare);
        await forgetAttemptState(path);
        await git(path, [...QUIET, "checkout", "-q", "-f", "--detach", base]);
        await git(path, ["clean", "-ffdxq"]);
        return;
      } catch {
        // Anything unexpected (a folder the worker made unremovable, a damaged worktree): start afresh.
        this.claimed.delete(spare);
        await this.remove(cwd, spare);
        await this.remove(cwd, path);
      }
    }
    await rm(path, { recursive: true, force: true });
    await mkdir(dirname(path), { recursive: true });
    await git(cwd, [...QUIET, "worktree", "add", "--detach", "-f", "-q", path, base]);
  }

  /** Takes a parked worktree of the product folder `dir` (synchronously, so two prepares never take the same one). */
  private takeSpare(dir: string): string | undefined {
    const spare = this.spares.get(dir)?.pop();
    if (spare !== undefined) this.claimed.add(spare);
    return spare;
  }

  /**
   * Commits everything that changed in the worktree (new, modified, deleted and renamed files: both names of a
   * rename are listed) as a child of its HEAD, without hooks and with one scan of the tree (`add -A`). The commit is
   * written as an object only; no ref moves (the caller keeps it under a ref).
   */
  async capture(path: string, message: string): Promise<{ commit: string | null; changedFiles: string[] }> {
    await git(path, ["add", "-A"]);
    const changedFiles = (await git(path, ["diff", "--cached", "--no-renames", "--name-only", "-z"]))
      .split("\0")
      .filter((f) => f.length > 0);
    if (changedFiles.length === 0) return { commit: null, changedFiles };
    const tree = (await git(path, ["write-tree"])).trim();
    // No ref moves here: the core records the commit, then keeps it under the attempt's ref (moveRef).
    const commitTree = async (env?: Record<string, string>) =>
      (await git(path, [...QUIET, "commit-tree", tree, "-p", "HEAD", "-F", "-"], message, env)).trim();
    const known = async (commit: string) =>
      (await git(path, ["for-each-ref", "--count=1", "--points-at", commit])).trim() !== "";
    // A re-run after a rollback that writes the same tree on the same base within the same second would get the very
    // commit an earlier run made (same tree, parent, message and time): a later timestamp keeps each run's commit new.
    let commit = await commitTree();
    for (let later = 1; later <= 60 && (await known(commit)); later++) {
      const date = `${Math.floor(Date.now() / 1000) + later} +0000`;
      commit = await commitTree({ GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date });
    }
    return { commit, changedFiles };
  }

  async merge(cwd: string, head: string, commit: string, message: string): Promise<MergeOutcome> {
    // One merge base decides both fast-forwards (head is an ancestor of commit, or the reverse).
    const mergeBase = await runGit(cwd, ["merge-base", head, commit]);
    const common = mergeBase.code === 0 ? mergeBase.stdout.trim() : null;
    if (common === head) return { kind: "fastForward", commit };
    if (common === commit) return { kind: "fastForward", commit: head };
    const tree = await this.mergeTree(cwd, head, commit);
    if (tree.kind === "conflict") return tree;
    const merged = await git(cwd, [...QUIET, "commit-tree", tree.tree, "-p", head, "-p", commit, "-F", "-"], message);
    return { kind: "merge", commit: merged.trim() };
  }

  /** The merged tree of two commits, or the conflicting files. Writes objects only. */
  private async mergeTree(
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
   * Ends the use of the worktree at `path`. With `reuse`, an attempt's worktree is parked for the product's next
   * `prepare` (moved out of the attempt's path; removed instead if that fails); otherwise, and for a parked one, it is
   * removed and forgotten by git. A parked worktree a `prepare` is taking right now is left to it. Missing is fine.
   */
  async release(cwd: string, path: string, options?: { reuse?: boolean }): Promise<void> {
    if (this.claimed.has(path)) return;
    const dir = dirname(path);
    const parked = this.spares.get(dir);
    if (parked?.includes(path))
      this.spares.set(
        dir,
        parked.filter((p) => p !== path),
      );
    if (options?.reuse === true && !basename(path).startsWith(SPARE_PREFIX) && (await exists(join(path, ".git")))) {
      const spare = join(dir, `${SPARE_PREFIX}${process.pid}-${++this.spareSeq}`);
      if ((await runGit(cwd, ["worktree", "move", path, spare])).code === 0) {
        this.spares.set(dir, [...(this.spares.get(dir) ?? []), spare]);
        return;
      }
    }
    await this.remove(cwd, path);
  }

  /** Removes a worktree and git's record of it; missing is fine. */
  private async remove(cwd: string, path: string): Promise<void> {
    const r = await runGit(cwd, ["worktree", "remove", "--force", "--force", path]);
    if (r.code !== 0) {
      await rm(path, { recursive: true, force: true });
      await runGit(cwd, ["worktree", "prune"]);
    }
  }

  async leftovers(cwd: string, productId: string): Promise<string[]> {
    const dir = await this.productDir(cwd, productId);
    const found = new Set<string>();
    const listed = await runGit(cwd, ["worktree", "list", "--porcelain"]);
    for (const line of lines(listed.stdout)) {
      if (!line.startsWith("worktree ")) continue;
      const path = resolve(line.slice("worktree ".length));
      if (path.startsWith(dir + sep)) found.add(path);
    }
    try {
      for (const name of await readdir(dir)) found.add(join(dir, name));
    } catch {
      // no directory: nothing left over
    }
    return [...found].sort();
  }

  async integrateInto(
    cwd: string,
    target: string,
    head: string,
    message: string,
  ): Promise<{ state: "integrated"; head: string } | { state: "conflict"; files: string[] }> {
    const ref = `refs/heads/${target}`;
    const current = await this.readRef(cwd, ref);
    if (current === null) {
      if (await this.moveRef(cwd, ref, head, null)) return { state: "integrated", head };
      throw new Error(`The branch ${target} appeared while it was being created; nothing was changed.`);
    }
    const checkedOut = (await runGit(cwd, ["symbolic-ref", "-q", "--short", "HEAD"])).stdout.trim() === target;
    if (checkedOut) {
      // The user's working tree follows its branch: git updates both, or neither (abort on a conflict).
      const r = await runGit(cwd, [...QUIET, "merge", "--no-edit", "-m", message, head]);
      if (r.code === 0) return { state: "integrated", head: (await git(cwd, ["rev-parse", "HEAD"])).trim() };
      const files = lines((await runGit(cwd, ["diff", "--name-only", "--diff-filter=U"])).stdout);
      await runGit(cwd, ["merge", "--abort"]);
      return { state: "conflict", files: files.length > 0 ? files : lines(r.stdout).slice(0, 20) };
    }
    const outcome = await this.merge(cwd, current, head, message);
    if (outcome.kind === "conflict") return { state: "conflict", files: outcome.files };
    if (await this.moveRef(cwd, ref, outcome.commit, current)) return { state: "integrated", head: outcome.commit };
    throw new Error(`The branch ${target} moved while the product was being merged into it; nothing was changed.`);
  }
}
