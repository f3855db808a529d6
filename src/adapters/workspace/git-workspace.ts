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
import { readdirSync, statSync } from "node:fs";
import { lstat, mkdir, readdir, realpath, rm } from "node:fs/promises";
import { basename, dirname, join, resolve, sep } from "node:path";
import { CHANGED_FILES_SAMPLE } from "../../../protocol/common.js";
import type {
  CaptureResult,
  Logger,
  MergeOutcome,
  TargetOutcome,
  WorkspaceInfo,
  WorkspacePort,
} from "../../core/ports.js";
import type { RefMove } from "../../core/workspace/records.js";
import { captureCommit } from "./capture-commit.js";
import { FilterOverrides } from "./filter-overrides.js";
import { git, runGit } from "./git-cli.js";
import { KnownCommits } from "./known-commits.js";
import { PreparedIndexes } from "./prepared-index.js";
import { integrateIntoTarget, mergeTree } from "./target-merge.js";
import {
  clearIndexBits,
  commonDirLookup,
  component,
  ensureSubfolder,
  findAdminDir,
  moveWorktree,
  subfolderLookup,
  verifyGitfile,
  type WorktreeRepo,
  type WorktreeRun,
  worktreeGit,
} from "./worktree-git.js";
import { withWorktreeAdmin } from "./worktree-lock.js";

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
 * stale file from `checkout -f` and from the next capture; skipped when `bitsFree`: the index is still the one the
 * orchestrator's last capture staged, prepared-index.ts), and bisect, merge, rebase and sequencer state. Bisect refs
 * are per-worktree refs, which git keeps loose in the worktree's own git dir (never packed): with no
 * `<git dir>/refs/bisect` (and no reftable there) there is none and no git command is run for them. Throws when git
 * fails (the caller then starts a fresh worktree).
 */
async function forgetAttemptState(repo: WorktreeRepo, run: WorktreeRun, bitsFree: boolean): Promise<void> {
  if (!bitsFree) await clearIndexBits(run);
  // One listing of the admin folder instead of a removal attempt per name (most are never there).
  const present = new Set(readdirSync(repo.gitDir));
  const left = OPERATION_STATE.filter((name) => present.has(name));
  await Promise.all(left.map((name) => rm(join(repo.gitDir, name), { recursive: true, force: true })));
  if (!present.has("reftable") && !(present.has("refs") && (await exists(join(repo.gitDir, "refs", "bisect"))))) return;
  const bisectRefs = lines(await run(["for-each-ref", "--format=%(refname)", "refs/bisect/"]));
  for (const ref of bisectRefs) await run(["update-ref", "-d", ref]);
}

/** The paths of a NUL-separated `--name-only -z` listing. */
function paths(out: string): string[] {
  return out.split("\0").filter((f) => f.length > 0);
}

/**
 * Every path that differs between the trees of two commits or trees (no renames: both names of one). `diff-tree`
 * reads the index before anything else although a diff of two trees never uses it: it is pointed at a file that does
 * not exist (`NO_INDEX` in the admin folder; git then reads an empty index) instead of the worktree's, a full read of
 * every entry at 10,000 files. Should someone put a file there, the answer is the same (or git fails on a malformed
 * one, and the capture with it).
 */
async function changedPaths(run: WorktreeRun, repo: WorktreeRepo, from: string, to: string): Promise<string[]> {
  const env = { GIT_INDEX_FILE: join(repo.gitDir, NO_INDEX) };
  return paths(await run(["diff-tree", "-r", "--no-renames", "--name-only", "-z", from, to], undefined, env));
}

/** A file name in a worktree's admin folder that nothing writes (see `changedPaths`). */
const NO_INDEX = "acp-orchestrator-no-index";

/**
 * Stages everything the worktree holds that differs from `base` from the worker's index, with its bits cleared and the
 * base's tree read into it (the capture without a prepared copy of the index), and writes its tree. Returns the tree
 * (`null` when nothing changed and no tree was needed) and every changed path (no renames). Throws when git fails.
 */
async function stageFromWorkerIndex(run: WorktreeRun, base: string): Promise<{ tree: string | null; all: string[] }> {
  // The worker's index is a cache only: no bit it set may hide a file, and the stage starts from the base's tree.
  // `--reset`, not `-m`: the stage may hold an earlier capture's entries (a capture again after a re-prepare of the
  // same worktree) or unmerged ones (the worker's own `git merge`), which `-m` refuses ("not uptodate", "resolve
  // your current index first"); `--reset` replaces them and still keeps the stat data of entries equal to the
  // base's, so `add -A` rereads only the files that changed. No `-u`: the files are not touched.
  await clearIndexBits(run);
  await run(["read-tree", "--reset", base]);
  await run(["add", "-A"]);
  const all = paths(await run(["diff-index", "--cached", "--no-renames", "--name-only", "-z", base]));
  return { tree: all.length === 0 ? null : (await run(["write-tree"])).trim(), all };
}

/** Backoff (ms) between the tries of a worktree preparation that failed (issue 26: not the agent's fault). */
const PREPARE_RETRY_MS = [100, 300, 800, 2_000, 4_000];

function lines(text: string): string[] {
  return text.split("\n").filter((l) => l.length > 0);
}

/** Prefix of a parked worktree's folder name; `component` never produces `~`, so no attempt path starts with it. */
const SPARE_PREFIX = "~spare-";
/** A product id that is a folder name of its own: nothing `component` rewrites, and never `.` or `..`. */
const OWN_FOLDER = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$/u;

async function exists(path: string): Promise<boolean> {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Options of a `GitWorkspace`. */
export interface GitWorkspaceOptions {
  /** Where a failed try of a worktree preparation is reported (warn, `"worktree preparation failed; trying again"`). */
  logger?: Pick<Logger, "warn">;
}

export class GitWorkspace implements WorkspacePort {
  constructor(private readonly options: GitWorkspaceOptions = {}) {}

  /** Git common directory per cwd (a repository does not move while the server runs). */
  private readonly commonDir = commonDirLookup();
  /** Where each product cwd lies in its repository (issue 31: the agent's cwd is that folder of its worktree). */
  private readonly subfolder = subfolderLookup();
  /** Parked worktrees per product folder, ready for that product's next attempt (see the file comment). */
  private readonly spares = new Map<string, string[]>();
  /** Parked worktrees a `prepare` took and is moving: a concurrent `release` of one of them leaves it alone. */
  private readonly claimed = new Set<string>();
  private spareSeq = 0;
  /** Prepared index copies and the indexes captures left (prepared-index.ts). */
  private readonly indexes = new PreparedIndexes();
  /** The commits made here, with parents and trees (known-commits.ts). */
  private readonly known = new KnownCommits();
  /** Filter overrides per worktree, reused while the configuration files are unchanged (filter-overrides.ts). */
  private readonly filters = new FilterOverrides();

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

  private async productDir(cwd: string, productId: string): Promise<string> {
    return join(await this.commonDir(cwd), "acp-orchestrator", "worktrees", component(productId));
  }

  async attemptPath(cwd: string, productId: string, taskId: string, attempt: number): Promise<string> {
    return join(await this.productDir(cwd, productId), `${component(taskId)}-${attempt}`);
  }

  async attemptCwd(cwd: string, worktree: string): Promise<string> {
    const sub = await this.subfolder(cwd);
    return sub === "" ? worktree : join(worktree, ...sub.split("/"));
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

  /**
   * `moveRef` for several refs (ports.ts), each its own compare-and-swap: all of them in one `update-ref --stdin`
   * transaction first (one git process for a task's attempt ref and integration branch), which moves every ref or
   * none; when it refuses (a ref not at its expected value), each move is made alone with `moveRef`'s answer.
   */
  async moveRefs(cwd: string, moves: readonly RefMove[]): Promise<boolean[]> {
    const plain = (text: string) => /^[^\s]+$/.test(text);
    const batch =
      moves.length > 1 &&
      new Set(moves.map((m) => m.ref)).size === moves.length &&
      moves.every((m) => plain(m.ref) && plain(m.to) && (m.expected === null || plain(m.expected)));
    if (batch) {
      const input = moves
        .map((m) => (m.expected === null ? `create ${m.ref} ${m.to}\n` : `update ${m.ref} ${m.to} ${m.expected}\n`))
        .join("");
      const r = await runGit(cwd, ["update-ref", "-m", "acp-orchestrator", "--stdin"], input);
      if (r.code === 0) return moves.map(() => true);
    }
    const answers: boolean[] = [];
    for (const m of moves) answers.push(await this.moveRef(cwd, m.ref, m.to, m.expected));
    return answers;
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
   * worktree at `path` whose gitfile is intact is kept as it is (a repeated prepare after a crash). A failure is tried
   * again with backoff (about 7 s in all) before it is thrown: preparation failures are the repository's, not the
   * agent's (issue 26), and concurrent administration of one repository is serialised (worktree-lock.ts).
   */
  async prepare(cwd: string, path: string, base: string): Promise<void> {
    for (let tryNo = 0; ; tryNo++) {
      try {
        await this.prepareOnce(cwd, path, base);
        break;
      } catch (err) {
        const wait = PREPARE_RETRY_MS[tryNo];
        if (wait === undefined) throw err;
        this.options.logger?.warn(
          { path, try: tryNo + 1, retryInMs: wait, err: err instanceof Error ? err.message : String(err) },
          "worktree preparation failed; trying again",
        );
        await new Promise((done) => setTimeout(done, wait));
      }
    }
    await ensureSubfolder(path, await this.subfolder(cwd));
  }

  private async prepareOnce(cwd: string, path: string, base: string): Promise<void> {
    const common = await this.commonDir(cwd);
    if (await exists(join(path, ".git"))) {
      const gitDir = await findAdminDir(common, path);
      if (
        gitDir !== null &&
        (await verifyGitfile({ workTree: path, gitDir }).then(
          () => true,
          () => false,
        ))
      ) {
        this.indexes.forget(path);
        return;
      }
    }
    const spare = this.takeSpare(dirname(path));
    if (spare !== undefined) {
      try {
        await rm(path, { recursive: true, force: true });
        if (!(await withWorktreeAdmin(common, () => moveWorktree(cwd, common, spare, path))))
          throw new Error(`git refused to move the parked worktree ${spare}`);
        this.claimed.delete(spare);
        const gitDir = await findAdminDir(common, path);
        if (gitDir === null) throw new Error(`git does not list the moved worktree ${path}`);
        const repo = { workTree: path, gitDir };
        await verifyGitfile(repo);
        const run = await worktreeGit(repo, this.filters);
        await forgetAttemptState(repo, run, await this.indexes.bitsFree(repo));
        await run(["checkout", "-q", "-f", "--detach", base]);
        await run(["clean", "-ffdxq"]);
        await this.indexes.keep(repo, base);
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
    // Checkout without filters: `worktree add --no-checkout`, then a checkout with the explicit repository.
    await withWorktreeAdmin(common, () =>
      git(cwd, ["worktree", "add", "--detach", "-f", "-q", "--no-checkout", path, base]),
    );
    const gitDir = await findAdminDir(common, path);
    if (gitDir === null) throw new Error(`git does not list the new worktree ${path}`);
    const repo = { workTree: path, gitDir };
    const run = await worktreeGit(repo, this.filters);
    await run(["checkout", "-q", "-f", "--detach", base]);
    await this.indexes.keep(repo, base);
  }

  /** Takes a parked worktree of the product folder `dir` (synchronously, so two prepares never take the same one). */
  private takeSpare(dir: string): string | undefined {
    const spare = this.spares.get(dir)?.pop();
    if (spare !== undefined) this.claimed.add(spare);
    return spare;
  }

  /**
   * The repository of the worktree at `path` (an attempt path of this adapter, so the common dir is four folders up:
   * `<common>/acp-orchestrator/worktrees/<product>/<attempt>`), with its gitfile verified. Throws
   * `WorktreeTamperedError` when the worker changed `.git`, an `Error` when git knows no such worktree.
   */
  private async worktreeRepo(path: string): Promise<WorktreeRepo> {
    const common = resolve(path, "..", "..", "..", "..");
    const gitDir = await findAdminDir(common, path);
    if (gitDir === null) throw new Error(`${path} is not a worktree this repository knows.`);
    const repo = { workTree: path, gitDir };
    await verifyGitfile(repo);
    return repo;
  }

  /**
   * Commits everything the worktree holds that differs from `base`, the commit the orchestrator prepared it at
   * (guarantee 16): loose edits and whatever the worker committed itself (its HEAD is ignored), as ONE commit whose
   * only parent is `base` (the worker's own commits are squashed). New, modified, deleted and renamed files count
   * (both names of a rename); at most `CHANGED_FILES_SAMPLE` of them are named, `changedFilesTotal` counts all.
   * Runs git with the worktree's repository named explicitly, no hook, no fsmonitor, no filter; throws
   * `WorktreeTamperedError` when the gitfile is not the one git wrote. The commit is written as an object only; no
   * ref moves (the caller keeps it under a ref).
   */
  async capture(path: string, message: string, base: string): Promise<CaptureResult> {
    const repo = await this.worktreeRepo(path);
    const run = await worktreeGit(repo, this.filters);
    const prepared = await this.indexes.take(repo, base);
    if (prepared === null) {
      const { tree, all } = await stageFromWorkerIndex(run, base);
      await this.indexes.settle(repo, null);
      return this.commitCapture(run, repo, { tree, all }, base, message);
    }
    const env = { GIT_INDEX_FILE: prepared };
    await run(["add", "-A"], undefined, env);
    const tree = (await run(["write-tree"], undefined, env)).trim();
    await this.indexes.settle(repo, prepared);
    const baseTree = this.known.treeOf(base);
    // The base's tree known: the same tree changed nothing; another one is listed while its commit is written.
    if (baseTree === tree) return { commit: null, changedFiles: [], changedFilesTotal: 0 };
    if (baseTree === undefined)
      return this.commitCapture(run, repo, { tree, all: await changedPaths(run, repo, base, tree) }, base, message);
    return this.commitCapture(run, repo, { tree, all: changedPaths(run, repo, base, tree) }, base, message);
  }

  /**
   * Ends a capture: the commit of `staged.tree` on `base` (none when no path changed), recorded as known, and the
   * changed paths, which may still be listed while the commit is written (`all` a promise).
   */
  private async commitCapture(
    run: WorktreeRun,
    repo: WorktreeRepo,
    staged: { tree: string | null; all: string[] | Promise<string[]> },
    base: string,
    message: string,
  ): Promise<CaptureResult> {
    const { tree } = staged;
    const listed = Array.isArray(staged.all) ? staged.all : null;
    if (tree === null || listed?.length === 0) return { commit: null, changedFiles: [], changedFilesTotal: 0 };
    // No ref moves here: the core records the commit, then keeps it under the attempt's ref (moveRef).
    const bornAfter = this.known.tick();
    const [all, written] = await Promise.all([staged.all, captureCommit(run, repo, tree, base, message)]);
    if (all.length === 0) return { commit: null, changedFiles: [], changedFilesTotal: 0 };
    this.known.record(written.commit, [base], tree, written.fresh ? bornAfter : undefined);
    return {
      commit: written.commit,
      tree,
      changedFiles: all.slice(0, CHANGED_FILES_SAMPLE),
      changedFilesTotal: all.length,
    };
  }

  /**
   * Merges `commit` into `head` as objects only (no checkout, no ref move). A merge commit carries the tree id
   * `merge-tree` wrote; a fast-forward carries none (the caller knows it from the capture, or reads it).
   */
  async merge(cwd: string, head: string, commit: string, message: string): Promise<MergeOutcome> {
    // A commit captured here on `head` itself (its only parent) is a fast-forward: no need to ask git.
    if (this.known.parentOf(commit) === head) return { kind: "fastForward", commit };
    // One merge base decides both fast-forwards (head is an ancestor of commit, or the reverse), unless what was
    // recorded here proves neither can be (known-commits.ts).
    if (!this.known.divergent(head, commit)) {
      const mergeBase = await runGit(cwd, ["merge-base", head, commit]);
      const common = mergeBase.code === 0 ? mergeBase.stdout.trim() : null;
      if (common === head) return { kind: "fastForward", commit };
      if (common === commit) return { kind: "fastForward", commit: head };
    }
    const tree = await mergeTree(cwd, head, commit);
    if (tree.kind === "conflict") return tree;
    const merged = (await git(cwd, ["commit-tree", tree.tree, "-p", head, "-p", commit, "-F", "-"], message)).trim();
    this.known.record(merged, [head, commit], tree.tree);
    return { kind: "merge", commit: merged, tree: tree.tree };
  }

  /**
   * Ends the use of the worktree at `path`. With `reuse`, an attempt's worktree is parked for the product's next
   * `prepare` (moved out of the attempt's path; removed instead if that fails); otherwise, and for a parked one, it is
   * removed and forgotten by git. A parked worktree a `prepare` is taking right now is left to it. Missing is fine.
   */
  async release(cwd: string, path: string, options?: { reuse?: boolean }): Promise<void> {
    if (this.claimed.has(path)) return;
    this.indexes.forget(path);
    const dir = dirname(path);
    const parked = this.spares.get(dir);
    if (parked?.includes(path))
      this.spares.set(
        dir,
        parked.filter((p) => p !== path),
      );
    if (options?.reuse === true && !basename(path).startsWith(SPARE_PREFIX) && (await exists(join(path, ".git")))) {
      const spare = join(dir, `${SPARE_PREFIX}${process.pid}-${++this.spareSeq}`);
      const common = await this.commonDir(cwd);
      const moved = await withWorktreeAdmin(common, () => moveWorktree(cwd, common, path, spare).catch(() => false));
      if (moved) {
        this.spares.set(dir, [...(this.spares.get(dir) ?? []), spare]);
        return;
      }
    }
    await this.remove(cwd, path);
  }

  /** Removes a worktree and git's record of it; missing is fine. */
  private async remove(cwd: string, path: string): Promise<void> {
    const common = await this.commonDir(cwd);
    const r = await withWorktreeAdmin(common, () => runGit(cwd, ["worktree", "remove", "--force", "--force", path]));
    if (r.code !== 0) {
      await rm(path, { recursive: true, force: true });
      await withWorktreeAdmin(common, () => runGit(cwd, ["worktree", "prune"]));
    }
  }

  async leftovers(cwd: string, productId: string): Promise<string[]> {
    const dir = await this.productDir(cwd, productId);
    const found = new Set<string>();
    const common = await this.commonDir(cwd);
    const listed = await withWorktreeAdmin(common, () => runGit(cwd, ["worktree", "list", "--porcelain"]));
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

  /**
   * Removes `<git-common-dir>/acp-orchestrator/worktrees/<productId>/` with every worktree left in it and git's
   * records of them. Only when `productId` is that folder's name as it is (`OWN_FOLDER`: no name `component` would
   * rewrite, which another product could share) and the folder, resolved through any symbolic link on the way, is a
   * real folder at exactly that place in the repository's git directory; else nothing is touched. Missing is fine.
   */
  async removeProductFolder(cwd: string, productId: string): Promise<void> {
    if (!OWN_FOLDER.test(productId) || component(productId) !== productId) return;
    const dir = await this.productDir(cwd, productId);
    const info = await lstat(dir).catch(() => undefined);
    if (!info?.isDirectory()) return;
    const common = await this.commonDir(cwd);
    const expected = join(await realpath(common), "acp-orchestrator", "worktrees", productId);
    if ((await realpath(dir).catch(() => "")) !== expected) return;
    for (const path of await this.leftovers(cwd, productId)) {
      if (this.claimed.has(path)) continue;
      this.indexes.forget(path);
      await this.remove(cwd, path);
    }
    this.spares.delete(dir);
    await withWorktreeAdmin(common, async () => {
      await rm(dir, { recursive: true, force: true });
      await runGit(cwd, ["worktree", "prune"]);
    });
  }

  async integrateInto(cwd: string, target: string, head: string, message: string): Promise<TargetOutcome> {
    return integrateIntoTarget(cwd, target, head, message, (ref, to, expected) => this.moveRef(cwd, ref, to, expected));
  }
}
