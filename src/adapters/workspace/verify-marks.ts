/**
 * What a verify worktree looked like when the orchestrator last prepared it, so the next preparation can tell what a
 * check changed without asking git (DESIGN.md guarantee 17; docs/VERIFY.md "Verify worktrees"; issue 30 bench).
 *
 * Two marks, both taken right after the worktree was made exactly a candidate's tree and before any check ran in it:
 * - the index: its bytes as `checkout -f` wrote them (no skip-worktree or assume-unchanged bit) and its times. Putting
 *   them back before the next checkout undoes whatever a check did to the index (bits, entries, a split index) without
 *   reading it; the stat data in it still lets `checkout -f` find every tracked file a check changed (its ctime moved:
 *   the kernel sets ctime on every change and no process can set it back), and git's racy-entry rule is kept (an
 *   entry not older than the index file is compared by content: the index keeps the mtime git wrote it with).
 * - the folders: device, inode, mode, mtime and ctime (nanoseconds) of every folder of the worktree, its root
 *   included. A file or folder can only appear, vanish or be renamed by changing the folder that holds it, which moves
 *   that folder's ctime; so when every marked folder is unchanged, no path was added anywhere and the worktree holds
 *   exactly the entries it held when marked (their contents are the index's business). Marks are trusted only when
 *   the file system's clock has moved past the newest folder ctime before the check starts (`settleClock`): a change
 *   in the same clock tick as the marking could otherwise leave a folder's ctime as it was.
 *
 * Which folders there are is learnt by walking the worktree (`markFolders`: every folder read), or, after a
 * preparation, proved without reading any folder (`remarkFolders`): every folder of the last marks is lstat'ed, and
 * each must be a folder whose link count is 2 plus the number of its subfolders among the marks. On file systems that
 * count a folder's subfolders in its link count (ext4, xfs, tmpfs: a folder's `..` entries link to it), that proves
 * the worktree has no other folder, so the set is the same; the walk certifies it for the worktree first (every folder
 * it read had exactly that count, and one had a subfolder), and anything else (a count that does not match, a folder
 * gone, a file system counting otherwise, like btrfs's 1) falls back to the walk. At 10,000 files in 100 folders that
 * is 101 lstat calls instead of reading 10,000 entries.
 *
 * Owns reading and comparing these marks; decides nothing about git. Any error reading them reads as "changed".
 */
import { lstatSync } from "node:fs";
import { lstat, readdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

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
  /** The worktree's folders. */
  folders: FolderMarks;
}

/** The folders of a worktree and their marks. */
export interface FolderMarks {
  /** Folder path (absolute) → its mark; the root is among them. */
  dirs: Map<string, DirMark>;
  /**
   * True once a walk found every folder's link count to be 2 plus its subfolders (and some folder with one): the file
   * system counts subfolders, so `remarkFolders` may prove the set of folders by link counts.
   */
  countsSubfolders: boolean;
}

interface FolderStat {
  dev: bigint;
  ino: bigint;
  mode: bigint;
  nlink: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  isDirectory(): boolean;
}

function markOf(s: FolderStat): DirMark {
  return `${s.dev}:${s.ino}:${s.mode}:${s.mtimeNs}:${s.ctimeNs}`;
}

/**
 * Marks every folder under `root` by walking it (symlinks are not followed; `root` included), and tells whether the
 * file system counts subfolders in link counts (`FolderMarks.countsSubfolders`). Rejects when a folder cannot be read
 * (the caller then does not skip anything next time).
 */
export async function markFolders(root: string): Promise<FolderMarks> {
  const dirs = new Map<string, DirMark>();
  let counted = true;
  let nested = false;
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
        let subfolders = 0;
        for (const entry of entries) {
          if (!entry.isDirectory()) continue;
          subfolders++;
          next.push(join(dir, entry.name));
        }
        if (info.nlink !== 2n + BigInt(subfolders)) counted = false;
        if (subfolders > 0) nested = true;
      }),
    );
    level = next;
  }
  return { dirs, countsSubfolders: counted && nested };
}

/**
 * The marks of the same folders as `last`, read again now, when the worktree provably has exactly those folders
 * (see the file comment: every one is still a folder, and its link count is 2 plus its subfolders among them); else
 * undefined (the caller walks). Reads no folder: one lstat per marked folder.
 */
export function remarkFolders(last: FolderMarks): FolderMarks | undefined {
  if (!last.countsSubfolders) return undefined;
  const subfolders = new Map<string, bigint>();
  for (const dir of last.dirs.keys()) subfolders.set(dir, 0n);
  for (const dir of last.dirs.keys()) {
    const parent = dirname(dir);
    const count = subfolders.get(parent);
    if (count !== undefined && parent !== dir) subfolders.set(parent, count + 1n);
  }
  const dirs = new Map<string, DirMark>();
  for (const [dir, count] of subfolders) {
    const info = lstatSync(dir, { bigint: true, throwIfNoEntry: false });
    if (!info?.isDirectory() || info.nlink !== 2n + count) return undefined;
    dirs.set(dir, markOf(info));
  }
  return { dirs, countsSubfolders: true };
}

/**
 * True when every marked folder is still there with the same mark (so no path was added or removed anywhere). One
 * synchronous lstat per folder: a hundred take well under a millisecond, where as many promises cost several.
 */
export function foldersUnchanged(folders: FolderMarks): boolean {
  for (const [dir, mark] of folders.dirs) {
    const info = lstatSync(dir, { bigint: true, throwIfNoEntry: false });
    if (!info?.isDirectory() || markOf(info) !== mark) return false;
  }
  return true;
}

/**
 * Waits until the file system's clock (the ctime of `probe`, a file this module rewrites on the same file system) is
 * past the newest ctime among the folders' marks, so that any later change of a marked folder gets a newer ctime. Resolves false
 * when it did not within `limitMs` (the marks must then not be trusted).
 */
export async function settleClock(folders: FolderMarks, probe: string, limitMs = 2_000): Promise<boolean> {
  let newest = 0n;
  for (const mark of folders.dirs.values()) {
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
