/**
 * What a verify worktree looked like when the orchestrator last prepared it, so the next preparation can tell what a
 * check changed without asking git (DESIGN.md guarantee 17; docs/VERIFY.md "Verify worktrees"; issue 30 bench).
 *
 * Two marks, both taken right after the worktree was made exactly a candidate's tree and before any check ran in it:
 * - the index: its bytes as `checkout -f` wrote them (no skip-worktree or assume-unchanged bit). Putting them back
 *   before the next checkout undoes whatever a check did to the index (bits, entries, a split index) without reading
 *   it; the stat data in it still lets `checkout -f` find every tracked file a check changed (its ctime moved: the
 *   kernel sets ctime on every change and no process can set it back), and git's racy-entry rule is kept (entries
 *   written in the same second as the index were smudged when it was written).
 * - the folders: device, inode, mode, mtime and ctime (nanoseconds) of every folder of the worktree, its root
 *   included. A file or folder can only appear, vanish or be renamed by changing the folder that holds it, which moves
 *   that folder's ctime; so when every marked folder is unchanged, no path was added anywhere and the worktree holds
 *   exactly the entries it held when marked (their contents are the index's business). Marks are trusted only when
 *   the file system's clock has moved past the newest folder ctime before the check starts (`settleClock`): a change
 *   in the same clock tick as the marking could otherwise leave a folder's ctime as it was.
 *
 * Owns reading and comparing these marks; decides nothing about git. Any error reading them reads as "changed".
 */
import { lstat, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** A folder's identity and change times, as one comparable string. */
type DirMark = string;

/** The marks of one prepared verify worktree. */
export interface WorktreeMarks {
  /** The index file's bytes as the preparation left them. */
  index: Buffer;
  /**
   * The index file's access and modification times as git wrote them. Put back with the bytes, so that git's racy
   * check still sees entries written in the index's own second as unproven and compares their content: a check
   * that rewrote a file in that second with its size and mtime kept is found (an index rewritten now would vouch
   * for them by stat alone).
   */
  indexTimes: { atime: Date; mtime: Date };
  /** Folder path (absolute) → its mark; the root is among them. */
  dirs: Map<string, DirMark>;
}

function markOf(s: { dev: bigint; ino: bigint; mode: bigint; mtimeNs: bigint; ctimeNs: bigint }): DirMark {
  return `${s.dev}:${s.ino}:${s.mode}:${s.mtimeNs}:${s.ctimeNs}`;
}

/**
 * Marks every folder under `root` (symlinks are not followed; `root` included). Rejects when one cannot be read
 * (the caller then does not skip anything next time).
 */
export async function markFolders(root: string): Promise<Map<string, DirMark>> {
  const dirs = new Map<string, DirMark>();
  let level = [root];
  while (level.length > 0) {
    const next: string[] = [];
    await Promise.all(
      level.map(async (dir) => {
        const [info, entries] = await Promise.all([
          lstat(dir, { bigint: true }),
          readdir(dir, { withFileTypes: true }),
        ]);
        if (!info.isDirectory()) throw new Error(`${dir} is not a folder`);
        dirs.set(dir, markOf(info));
        for (const entry of entries) if (entry.isDirectory()) next.push(join(dir, entry.name));
      }),
    );
    level = next;
  }
  return dirs;
}

/** True when every marked folder is still there with the same mark (so no path was added or removed anywhere). */
export async function foldersUnchanged(dirs: Map<string, DirMark>): Promise<boolean> {
  try {
    const same = await Promise.all(
      [...dirs].map(async ([dir, mark]) => {
        const info = await lstat(dir, { bigint: true });
        return info.isDirectory() && markOf(info) === mark;
      }),
    );
    return same.every(Boolean);
  } catch {
    return false;
  }
}

/**
 * Waits until the file system's clock (the ctime of `probe`, a file this module rewrites on the same file system) is
 * past the newest ctime among `dirs`, so that any later change of a marked folder gets a newer ctime. Resolves false
 * when it did not within `limitMs` (the marks must then not be trusted).
 */
export async function settleClock(dirs: Map<string, DirMark>, probe: string, limitMs = 2_000): Promise<boolean> {
  let newest = 0n;
  for (const mark of dirs.values()) {
    const ctime = BigInt(mark.slice(mark.lastIndexOf(":") + 1));
    if (ctime > newest) newest = ctime;
  }
  const started = Date.now();
  for (;;) {
    await writeFile(probe, `${started}\n`);
    if ((await lstat(probe, { bigint: true })).ctimeNs > newest) return true;
    if (Date.now() - started > limitMs) return false;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
