/**
 * The filter overrides of the git commands run inside a task worktree (DESIGN.md guarantee 16: a `.gitattributes` a
 * worker wrote names a filter, the configuration defines it, and git would run it on checkout or add), read from the
 * configuration once per set of configuration files rather than once per operation (issue 34: that `git config`
 * process was a sixth of the worktree path's processes at 10,000 files).
 *
 * Which filters are defined is read by git itself (`git config --get-regexp`, every scope: system, global, the
 * repository's, the worktree's). The answer is reused for a worktree only while every file git can read it from is
 * provably the same file with the same content: a file mark (device, inode, size, mtime and ctime in ns, or
 * "missing") of each of them is taken before the read and compared before each reuse. A worker's `git config`
 * (repository, `--worktree`, `--global`, `--system` as the user running the server) writes one of them and so is
 * seen at the next operation. The marked files (`configFiles`): the system file (git names it: `git config --system
 * --edit` with an editor that prints the name; it honours `GIT_CONFIG_SYSTEM`), every global file git may read
 * (`GIT_CONFIG_GLOBAL`, `$XDG_CONFIG_HOME/git/config` or `~/.config/git/config`, `~/.gitconfig`), the common
 * dir's `config`, the worktree's `config.worktree` and its `commondir` pointer (which says which `config` git reads).
 * Marking a file git does not read (the system file under `GIT_CONFIG_NOSYSTEM`) only costs a re-read. Not reused:
 * - when any configuration has an `include.path` or `includeIf.*.path` (the included file, and an `onbranch:`
 *   condition a worker's checkout decides, are not marked): read per operation, as before;
 * - when a marked file changed less than `SETTLED_MS` before its mark (a later write in the same tick of the
 *   filesystem's clock could leave the mark unchanged), or is not a regular file, or cannot be stat'ed;
 * - when the system file's name cannot be learnt.
 * Owns its in-memory records only; runs `git config` (reads only).
 */
import { readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { runGit } from "./git-cli.js";
import type { WorktreeRepo } from "./worktree-git.js";

/** A marked file changed at least this long (ms) before its mark, else the answer is not reused. */
export const SETTLED_MS = 3_000;

const KEYS = "^(filter\\..+\\.(clean|smudge|process|required)|include\\.path|includeif\\..+\\.path)$";

/** The mark of the file at `path` (followed through symbolic links), `missing`, or `null` when it cannot be trusted. */
async function configMark(path: string, settledBefore: bigint): Promise<string | null> {
  try {
    const s = statSync(path, { bigint: true });
    if (!s.isFile() || s.ctimeNs >= settledBefore || s.mtimeNs >= settledBefore) return null;
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT" || code === "ENOTDIR" ? "missing" : null;
  }
}

/**
 * The global files git may read with this process's environment (git-config(1), FILES), every one of them whichever
 * git picks (a relative `GIT_CONFIG_GLOBAL` is git's: relative to the worktree it runs in).
 */
function globalFiles(workTree: string): string[] {
  const env = process.env;
  const home = env.HOME ?? homedir();
  const files = [join(home, ".gitconfig"), join(home, ".config", "git", "config")];
  if (env.XDG_CONFIG_HOME) files.push(join(env.XDG_CONFIG_HOME, "git", "config"));
  if (env.GIT_CONFIG_GLOBAL) files.push(resolve(workTree, env.GIT_CONFIG_GLOBAL));
  return files;
}

/** The common dir of a worktree this adapter made (`<common>/worktrees/<name>`). */
function commonOf(repo: WorktreeRepo): string {
  return resolve(repo.gitDir, "..", "..");
}

/** Whether the pointer file at `path` (a relative path is relative to `from`) names `target`. */
async function pointsAt(path: string, from: string, target: string): Promise<boolean> {
  try {
    return resolve(from, readFileSync(path, "utf8").trim()) === target;
  } catch {
    return false;
  }
}

/** The `-c filter.<name>.…=` options that switch off every filter named in `git config --get-regexp` output. */
function overridesOf(names: Iterable<string>): string[] {
  const out: string[] = [];
  const all = [...names];
  for (const name of all) for (const key of ["clean", "smudge", "process"]) out.push("-c", `filter.${name}.${key}=`);
  for (const name of all) out.push("-c", `filter.${name}.required=false`);
  return out;
}

/**
 * Reads the filter overrides for `repo` (`git config --get-regexp`, every scope). `reusable`: no include directive
 * anywhere and git answered (exit 0, or 1 for "no such key").
 */
async function readOverrides(repo: WorktreeRepo): Promise<{ overrides: string[]; reusable: boolean }> {
  const r = await runGit(repo.workTree, [`--git-dir=${repo.gitDir}`, "config", "--name-only", "--get-regexp", KEYS]);
  const names = new Set<string>();
  let includes = false;
  for (const line of r.stdout.split("\n")) {
    const key = line.trim();
    if (key === "include.path" || /^includeif\..+\.path$/.test(key)) includes = true;
    const m = /^filter\.(.+)\.(?:clean|smudge|process|required)$/.exec(key);
    if (m?.[1]) names.add(m[1]);
  }
  return { overrides: overridesOf(names), reusable: !includes && (r.code === 0 || r.code === 1) };
}

/** The filter overrides for `repo`, read now (no reuse): what `FilterOverrides.of` answers. */
export async function filterOverrides(repo: WorktreeRepo): Promise<string[]> {
  return (await readOverrides(repo)).overrides;
}

export class FilterOverrides {
  /** Per admin folder: the marks of the configuration files and the overrides read with them. */
  private readonly known = new Map<string, { marks: string; overrides: string[] }>();
  /** The system configuration file git reads, per `GIT_CONFIG_SYSTEM` value; `null` when it could not be learnt. */
  private readonly systemFiles = new Map<string, Promise<string | null>>();

  /**
   * `git -c filter.<name>.clean= -c filter.<name>.smudge= -c filter.<name>.process= -c filter.<name>.required=false`
   * for every filter driver the configuration git reads for `repo` defines (see the file comment for when the last
   * answer is reused). Reads configuration only.
   */
  async of(repo: WorktreeRepo): Promise<string[]> {
    const files = await this.configFiles(repo);
    let marks = files === null ? null : await this.marks(files);
    // After the marks: the `commondir` git follows must name the common dir whose `config` is marked.
    if (marks !== null && !(await pointsAt(join(repo.gitDir, "commondir"), repo.gitDir, commonOf(repo)))) marks = null;
    const kept = this.known.get(repo.gitDir);
    if (marks !== null && kept?.marks === marks) return kept.overrides;
    this.known.delete(repo.gitDir);
    const read = await readOverrides(repo);
    if (marks !== null && read.reusable) {
      if (this.known.size >= 10_000) this.known.delete(this.known.keys().next().value as string);
      this.known.set(repo.gitDir, { marks, overrides: read.overrides });
    }
    return read.overrides;
  }

  /** Forgets what was read for the worktree whose admin folder is `gitDir` (removed, or made anew). */
  forget(gitDir: string): void {
    this.known.delete(gitDir);
  }

  /** Every configuration file git may read for `repo` (see the file comment), or `null` when one cannot be named. */
  private async configFiles(repo: WorktreeRepo): Promise<string[] | null> {
    const system = await this.system(repo);
    if (system === null) return null;
    const common = commonOf(repo);
    return [
      system,
      ...globalFiles(repo.workTree),
      join(common, "config"),
      join(repo.gitDir, "config.worktree"),
      join(repo.gitDir, "commondir"),
    ];
  }

  /** The marks of `files`, taken now, or `null` when one cannot be trusted (too recent, not a file). */
  private async marks(files: string[]): Promise<string | null> {
    const settledBefore = BigInt(Date.now() - SETTLED_MS) * 1_000_000n;
    const marks = await Promise.all(files.map((file) => configMark(file, settledBefore)));
    return marks.some((m) => m === null) ? null : files.map((file, i) => `${file}\0${marks[i]}`).join("\0");
  }

  /**
   * The system configuration file, as git names it: `git config --system --edit` with `GIT_EDITOR` a command that
   * prints its argument (NUL-terminated) instead of editing it (`GIT_EDITOR` wins over any `core.editor`). Learnt
   * once per `GIT_CONFIG_SYSTEM` value; `null` when git does not answer one absolute path.
   */
  private system(repo: WorktreeRepo): Promise<string | null> {
    const key = process.env.GIT_CONFIG_SYSTEM ?? "";
    let file = this.systemFiles.get(key);
    if (file === undefined) {
      const args = [`--git-dir=${repo.gitDir}`, "config", "--system", "--edit"];
      file = runGit(repo.workTree, args, undefined, { GIT_EDITOR: "printf '%s\\0'" }).then(
        (r) => {
          const parts = r.stdout.split("\0");
          const path = parts[0] ?? "";
          return r.code === 0 && parts.length === 2 && parts[1] === "" && path.startsWith("/") ? path : null;
        },
        () => null,
      );
      this.systemFiles.set(key, file);
    }
    return file;
  }
}
