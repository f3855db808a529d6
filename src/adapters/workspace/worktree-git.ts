/**
 * Git calls inside a task's worktree that a worker cannot redirect (DESIGN.md guarantee 16, "a worktree is data,
 * never configuration"). Every call names its repository explicitly: `--git-dir` is the worktree's admin folder under
 * `<common dir>/worktrees/` (found from the common dir's own back-pointers, never from the worktree's `.git` file) and
 * `--work-tree` is the worktree; hooks and fsmonitor are off (git-cli.ts) and every clean/smudge/process filter the
 * repository's configuration defines is overridden with an empty command, so checking out or adding files runs no
 * program at all; the settings that decide what the index caches (assume-unchanged on every write, ctime checks,
 * sparse checkout, split index) are pinned (`INDEX_CONFIG`), so a worker's `git config` cannot make a capture miss a
 * change. Before a worktree's result is captured its gitfile is verified: a `.git` that is not exactly the
 * gitfile git wrote (a folder, a symlink, another target) is tampering, reported as `WorktreeTamperedError`.
 *
 * Owns: finding a repository's common dir and a worktree's admin folder, the explicit-repository argument list, the
 * filter overrides, the gitfile check, clearing the index bits a worker (or a check) set, moving a worktree, and the
 * safe path component of the folders under `<common dir>/acp-orchestrator/`. Must never discover a repository from inside a worktree and
 * never write to the worktree's `.git`.
 */
import { lstatSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { mkdir, realpath } from "node:fs/promises";
import { basename, dirname, join, resolve, sep } from "node:path";
import { type FilterOverrides, filterOverrides } from "./filter-overrides.js";
import { git, runGit } from "./git-cli.js";

/** A path component made of safe characters only (ids are validated ids already; this is a second fence). */
export function component(text: string): string {
  return text.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 100) || "_";
}

/**
 * A memoised lookup of the git common directory (absolute) of the repository at a cwd: one `git rev-parse` per cwd for
 * the lookup's lifetime (a repository does not move while the server runs); a failed lookup is forgotten, so the next
 * call asks git again. Rejects with `GitError` when `cwd` is not in a repository.
 */
export function commonDirLookup(): (cwd: string) => Promise<string> {
  const dirs = new Map<string, Promise<string>>();
  return (cwd) => {
    let dir = dirs.get(cwd);
    if (!dir) {
      dir = git(cwd, ["rev-parse", "--path-format=absolute", "--git-common-dir"]).then((out) => resolve(out.trim()));
      dir.catch(() => dirs.delete(cwd));
      dirs.set(cwd, dir);
    }
    return dir;
  };
}

/**
 * A memoised lookup of where a cwd lies in its repository's working tree: its path relative to the top level
 * (`git rev-parse --show-prefix`, `/`-separated, no trailing slash; `""` at the top level), one git process per cwd
 * for the lookup's lifetime; a failed lookup is forgotten. Rejects with `GitError` when `cwd` is not in a working
 * tree. Issue 31: a product whose cwd is `pkg/sub` of its repository runs its workers and checks in `pkg/sub` of
 * their worktrees.
 */
export function subfolderLookup(): (cwd: string) => Promise<string> {
  const prefixes = new Map<string, Promise<string>>();
  return (cwd) => {
    let prefix = prefixes.get(cwd);
    if (!prefix) {
      prefix = git(cwd, ["rev-parse", "--show-prefix"]).then((out) => out.trim().replace(/\/+$/, ""));
      prefix.catch(() => prefixes.delete(cwd));
      prefixes.set(cwd, prefix);
    }
    return prefix;
  };
}

/**
 * Makes sure the folder `subfolder` (relative, `/`-separated) of the worktree at `worktree` exists, creating it empty
 * when the checked-out commit lacks it (a folder only in the user's checkout, or empty there, so never committed), and
 * returns its absolute path. Throws when it cannot be created or resolves outside the worktree (a symbolic link at
 * the base commit): the agent's cwd must be inside its own worktree.
 */
export async function ensureSubfolder(worktree: string, subfolder: string): Promise<string> {
  const dir = join(worktree, ...subfolder.split("/"));
  if (subfolder === "") return dir;
  await mkdir(dir, { recursive: true });
  const [top, real] = await Promise.all([realpath(worktree), realpath(dir)]);
  if (real !== top && !real.startsWith(top + sep))
    throw new Error(`The folder ${subfolder} of the worktree ${worktree} resolves to ${real}, outside the worktree.`);
  return dir;
}

/** Runs one git command inside a worktree with its repository named explicitly and returns its stdout. */
export type WorktreeRun = (args: readonly string[], input?: string, env?: Record<string, string>) => Promise<string>;

/**
 * Clears the skip-worktree and assume-unchanged bits of every index entry of the worktree `run` works in (a worker or
 * a check could hide files from `checkout -f`, `clean` and `add -A` with them). Throws when git fails.
 */
export async function clearIndexBits(run: WorktreeRun): Promise<void> {
  const entries = (await run(["ls-files", "-v", "-z"])).split("\0").filter((entry) => entry.length > 2);
  // `ls-files -v` tags a skip-worktree entry `S`, and lowercases every tag of an assume-unchanged one: an entry with
  // both bits is `s`, which must lose both.
  const skipped = entries.filter((entry) => entry[0] === "S" || entry[0] === "s").map((entry) => entry.slice(2));
  const assumed = entries.filter((entry) => /^[a-z]$/.test(entry[0] as string)).map((entry) => entry.slice(2));
  // One flag per command: git 2.39 applies only one of --no-skip-worktree/--no-assume-unchanged to --stdin paths.
  if (skipped.length > 0) await run(["update-index", "--no-skip-worktree", "-z", "--stdin"], `${skipped.join("\0")}\0`);
  if (assumed.length > 0)
    await run(["update-index", "--no-assume-unchanged", "-z", "--stdin"], `${assumed.join("\0")}\0`);
}

/** The worktree's `.git` was changed by someone else than git (the worker): its capture must not go on. */
export class WorktreeTamperedError extends Error {
  override readonly name = "WorktreeTamperedError";
}

/** A worktree and the admin folder git made for it: what every call inside the worktree names explicitly. */
export interface WorktreeRepo {
  /** The worktree (absolute). */
  workTree: string;
  /** Its admin folder, `<common dir>/worktrees/<name>` (absolute). */
  gitDir: string;
}

async function readText(path: string): Promise<string | null> {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/**
 * The admin folder of the worktree at `workTree`: the entry of `<commonDir>/worktrees/` whose `gitdir` file points at
 * `<workTree>/.git` (the name git chose is tried first, then every entry). `null` when git knows no such worktree.
 * Reads only the common dir, never the worktree.
 */
export async function findAdminDir(commonDir: string, workTree: string): Promise<string | null> {
  const admin = join(commonDir, "worktrees");
  const wanted = resolve(workTree, ".git");
  const matches = async (name: string): Promise<boolean> => {
    const back = await readText(join(admin, name, "gitdir"));
    return back !== null && resolve(back.trim()) === wanted;
  };
  const guess = workTree.split("/").pop() ?? "";
  if (guess && (await matches(guess))) return join(admin, guess);
  let names: string[];
  try {
    names = readdirSync(admin);
  } catch {
    return null;
  }
  for (const name of names) if (name !== guess && (await matches(name))) return join(admin, name);
  return null;
}

/**
 * Verifies that `<workTree>/.git` is still the regular file git wrote, pointing at `gitDir`; throws
 * `WorktreeTamperedError` saying what was found otherwise (guarantee 16). Reads only.
 */
export async function verifyGitfile(repo: WorktreeRepo): Promise<void> {
  const path = join(repo.workTree, ".git");
  let kind: string;
  try {
    const info = lstatSync(path);
    kind = info.isSymbolicLink() ? "a symlink" : info.isDirectory() ? "a folder" : info.isFile() ? "file" : "special";
  } catch {
    throw new WorktreeTamperedError(`The worker removed its worktree's .git file (${path}).`);
  }
  if (kind !== "file") {
    throw new WorktreeTamperedError(
      `The worker replaced its worktree's .git file with ${kind === "special" ? "a special file" : kind} (${path}).`,
    );
  }
  const text = ((await readText(path)) ?? "").trim();
  const target = /^gitdir: (.+)$/.exec(text)?.[1];
  if (target === undefined || resolve(repo.workTree, target) !== resolve(repo.gitDir)) {
    const shown = target !== undefined ? `at ${target}` : `to something that is not a gitfile`;
    throw new WorktreeTamperedError(
      `The worker pointed its worktree's .git file ${shown.slice(0, 300)} instead of the worktree's own git directory ${repo.gitDir}.`,
    );
  }
}

/**
 * `git -c …` options of every command inside a task worktree that keep the index a faithful cache of the files, whatever
 * configuration a worker wrote with its own `git config` (the repository's or its worktree's, `git sparse-checkout`):
 * - `core.ignoreStat=false`: else every entry git checks out or adds gets the assume-unchanged bit, and the next
 *   `add -A` never looks at those files again (the prepared index would hide the next worker's edits);
 * - `core.trustctime=true`, `core.checkStat=default`: else a rewrite of the same size with its mtime put back
 *   (`touch -d`) matches the cached stat data and is not staged;
 * - `core.sparseCheckout=false`, `index.sparse=false`: else `checkout -f` of a reused worktree applies the sparse
 *   patterns an earlier worker set (files missing from the worktree, skip-worktree bits in the index);
 * - `core.splitIndex=false`: the index is one self-contained file (no shared index elsewhere in the admin folder).
 */
const INDEX_CONFIG: readonly string[] = [
  "-c",
  "core.ignoreStat=false",
  "-c",
  "core.trustctime=true",
  "-c",
  "core.checkStat=default",
  "-c",
  "core.sparseCheckout=false",
  "-c",
  "index.sparse=false",
  "-c",
  "core.splitIndex=false",
];

/**
 * A runner of git commands inside one worktree with its repository named explicitly, filters overridden and the index
 * settings of `INDEX_CONFIG` (see the file comment). The overrides are taken once per runner, from `filters` (which
 * reuses them while the configuration files are unchanged: filter-overrides.ts) or read from the configuration: make
 * one per operation (prepare, capture).
 */
export async function worktreeGit(repo: WorktreeRepo, filters?: FilterOverrides): Promise<WorktreeRun> {
  const explicit = [
    `--git-dir=${repo.gitDir}`,
    `--work-tree=${repo.workTree}`,
    ...INDEX_CONFIG,
    ...(await (filters ? filters.of(repo) : filterOverrides(repo))),
  ];
  return (args, input, env) => git(repo.workTree, [...explicit, ...args], input, env);
}

/** Whether anything is at `path` (a symlink too, wherever it points). */
function present(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Moves the linked worktree at `from` to `to` (which must not exist, or be an empty folder) as `git worktree move`
 * does: renames the folder, then points the admin folder's `gitdir` file at the new `.git` (gitrepository-layout(5):
 * `worktrees/<id>/gitdir`, the absolute path of the worktree's `.git`; written aside and renamed into place), with no
 * git process and no read of the worktree's index (issue 34). Done so only where git would move it without a
 * question: `from` is a folder (not a symlink a worker put in its place), the gitfile is the absolute one git wrote
 * (`verifyGitfile`), the worktree is not locked (`<admin>/locked`) and has no submodule git dirs (`<admin>/modules`).
 * Anything else runs `git worktree move` itself, which may refuse. The new `gitdir` is written before the folder moves,
 * to a new file (`O_EXCL`: never through a symlink a worker planted in the admin folder), then renamed over the old one.
 * Resolves true when the worktree moved, false when git refused; rejects when a write or rename fails (nothing moved
 * when the folder's rename fails). Call it holding the worktree-administration lock (worktree-lock.ts).
 */
export async function moveWorktree(cwd: string, commonDir: string, from: string, to: string): Promise<boolean> {
  const gitDir = await findAdminDir(commonDir, from);
  const folder = lstatSync(from, { throwIfNoEntry: false })?.isDirectory() === true;
  const plain =
    gitDir !== null &&
    folder &&
    /^gitdir: \//.test((await readText(join(from, ".git"))) ?? "") &&
    (await verifyGitfile({ workTree: from, gitDir }).then(
      () => true,
      () => false,
    )) &&
    !present(join(gitDir, "locked")) &&
    !present(join(gitDir, "modules"));
  if (!plain) return (await runGit(cwd, ["worktree", "move", from, to])).code === 0;
  const aside = join(
    gitDir,
    `gitdir.acp-orchestrator-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`,
  );
  writeFileSync(aside, `${join(realpathSync(dirname(to)), basename(to), ".git")}\n`, { flag: "wx" });
  try {
    renameSync(from, to);
  } catch (err) {
    rmSync(aside, { force: true });
    throw err;
  }
  renameSync(aside, join(gitDir, "gitdir"));
  return true;
}
