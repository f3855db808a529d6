/**
 * GitWorkspaceProbe: the `WorkspaceProbe` port over a git checkout on the local filesystem (issue 4, drift
 * detection). It reads the commit HEAD points at straight from the repository files (`.git/HEAD`, loose refs,
 * `packed-refs`; worktrees and `gitdir:` files included), so it needs no `git` binary and starts no process.
 *
 * It only ever reads: it never runs git, never takes a lock, never writes into the repository. Anything it cannot
 * read or understand makes it answer `null` ("not a git checkout"), never throw.
 */
import { readFile, stat } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";
import type { WorkspaceProbe } from "../../core/ports.js";

const SHA = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;
/** Symbolic refs followed at most this deep (a loop of refs must not hang the probe). */
const MAX_REF_DEPTH = 5;

async function readText(path: string): Promise<string | null> {
  try {
    return await readFile(path, "utf8");
  } catch {
    return null;
  }
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The git directory of the checkout containing `cwd`, walking up to the filesystem root: a `.git` directory, or the
 * directory a `.git` file points at (`gitdir: …`, as in worktrees and submodules). `null` when there is none.
 */
export async function findGitDir(cwd: string): Promise<string | null> {
  let dir = resolve(cwd);
  for (;;) {
    const candidate = join(dir, ".git");
    if (await isDirectory(candidate)) return candidate;
    const pointer = await readText(candidate);
    if (pointer !== null) {
      const m = /^gitdir:\s*(.+?)\s*$/m.exec(pointer);
      if (m?.[1]) return isAbsolute(m[1]) ? m[1] : resolve(dir, m[1]);
      return null;
    }
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/** Where shared refs live: `commondir` of a worktree's git dir, else the git dir itself. */
async function commonDirOf(gitDir: string): Promise<string> {
  const common = (await readText(join(gitDir, "commondir")))?.trim();
  if (!common) return gitDir;
  return isAbsolute(common) ? common : resolve(gitDir, common);
}

/** Resolves a ref name (`refs/heads/main`) to a commit: loose ref in the git dir or the common dir, then packed-refs. */
async function resolveRef(gitDir: string, commonDir: string, ref: string, depth: number): Promise<string | null> {
  if (depth > MAX_REF_DEPTH || ref.includes("..")) return null;
  for (const base of gitDir === commonDir ? [gitDir] : [gitDir, commonDir]) {
    const text = (await readText(join(base, ref)))?.trim();
    if (!text) continue;
    if (SHA.test(text)) return text;
    const sym = /^ref:\s*(\S+)$/.exec(text);
    if (sym?.[1]) return resolveRef(gitDir, commonDir, sym[1], depth + 1);
  }
  const packed = await readText(join(commonDir, "packed-refs"));
  if (packed === null) return null;
  for (const line of packed.split(/\r?\n/)) {
    const [sha, name] = line.trim().split(/\s+/);
    if (name === ref && sha && SHA.test(sha)) return sha;
  }
  return null;
}

/**
 * Reads the workspace's git HEAD from the repository files. Stateless; safe to share between products.
 */
export class GitWorkspaceProbe implements WorkspaceProbe {
  /**
   * The commit HEAD of the checkout containing `cwd` points at (hex), or `null` when `cwd` is not inside a git
   * checkout, HEAD names a branch without commits, or anything cannot be read. Never throws; reads only.
   */
  async gitHead(cwd: string): Promise<string | null> {
    try {
      const gitDir = await findGitDir(cwd);
      if (gitDir === null) return null;
      const head = (await readText(join(gitDir, "HEAD")))?.trim();
      if (!head) return null;
      if (SHA.test(head)) return head;
      const ref = /^ref:\s*(\S+)$/.exec(head)?.[1];
      if (!ref) return null;
      return await resolveRef(gitDir, await commonDirOf(gitDir), ref, 0);
    } catch {
      return null;
    }
  }
}
