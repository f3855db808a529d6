/**
 * What `GitWorkspace` remembers between the steps of one task worktree so the steady state runs no git command the
 * raw git floor would not (issue 34: the worktree path close to `checkout -f` + `clean` + `add -A` + `write-tree`),
 * without giving up a rule of guarantee 16.
 *
 * - The prepared index: right after `prepare` checked the worktree out at its base and cleaned it, the worktree's
 *   index holds exactly the base's tree with fresh stat data and no bit a worker set. A copy of it is kept in the
 *   worktree's admin folder (`<git dir>/acp-orchestrator-prepared-index`, a new inode, so the worker's own git
 *   commands, which replace `index` by renaming over it, never change it), with its file mark. The first capture on
 *   that base stages from the copy (`GIT_INDEX_FILE`) instead of clearing the worker's index bits and reading the
 *   base's tree into it: the same stage, capture against the prepared base, one index scan instead of three. A copy
 *   whose mark moved (anything wrote to it) or a capture on another base is not used: the caller does the full
 *   capture.
 * - The index a capture staged from the prepared copy left: its mark, per admin folder. When the next `prepare` of
 *   that worktree finds the index unchanged, no bit can be set in it (it was staged from a bit-free index by the
 *   orchestrator's git, which sets none: worktree-git.ts `INDEX_CONFIG`) and clearing the bits is skipped; any other
 *   index (the worker's, one a full capture left) is cleared as before.
 *
 * A file mark is device, inode, size, mtime and ctime (ns) of the file itself (`lstat`: a symlink has no mark): a write
 * in place changes ctime (which no user can set back), a replacement changes the inode. The copy is written to a new
 * file (`O_EXCL`) and renamed into place, so a symlink a worker planted at its name is replaced, never written
 * through. Owns the copy files and the in-memory records only; never runs git.
 */
import { constants, lstatSync, renameSync } from "node:fs";
import { copyFile, rm } from "node:fs/promises";
import { join } from "node:path";
import type { WorktreeRepo } from "./worktree-git.js";

/** The copy of the prepared index in a worktree's admin folder. */
export const PREPARED_INDEX = "acp-orchestrator-prepared-index";

/** One version of a file (see the file comment), or `null` when it is missing. */
export async function fileMark(path: string): Promise<string | null> {
  try {
    const s = lstatSync(path, { bigint: true });
    return s.isFile() ? `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}` : null;
  } catch {
    return null;
  }
}

/** Capture-left index marks remembered at most (a worktree removed without reuse is never asked about again). */
const LEFT_KEPT = 10_000;

export class PreparedIndexes {
  /** Per worktree path: its admin folder, the base it was prepared at and the mark of the prepared copy. */
  private readonly prepared = new Map<string, { gitDir: string; base: string; mark: string }>();
  /** Per admin folder: the mark of the index the last capture left. */
  private readonly left = new Map<string, string>();

  /**
   * Keeps a copy of the index `prepare` just made at `base` (the worktree is checked out and clean). When the copy
   * cannot be made (a file in the way of its temporary name, a full disk) none is kept: the capture is the full one.
   */
  async keep(repo: WorktreeRepo, base: string): Promise<void> {
    const copy = join(repo.gitDir, PREPARED_INDEX);
    this.prepared.delete(repo.workTree);
    const fresh = `${copy}.${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    try {
      await copyFile(join(repo.gitDir, "index"), fresh, constants.COPYFILE_EXCL);
      renameSync(fresh, copy);
    } catch {
      await rm(fresh, { force: true }).catch(() => undefined);
      return;
    }
    const mark = await fileMark(copy);
    if (mark !== null) this.prepared.set(repo.workTree, { gitDir: repo.gitDir, base, mark });
  }

  /**
   * The prepared copy to stage a capture on `base` from, or `null` (none kept, another base, another admin folder, or
   * written since): a copy is handed out once, the capture consumes it (`settle`).
   */
  async take(repo: WorktreeRepo, base: string): Promise<string | null> {
    const kept = this.prepared.get(repo.workTree);
    this.prepared.delete(repo.workTree);
    if (kept === undefined || kept.base !== base || kept.gitDir !== repo.gitDir) return null;
    const copy = join(repo.gitDir, PREPARED_INDEX);
    return (await fileMark(copy)) === kept.mark ? copy : null;
  }

  /**
   * Ends a capture: the index it staged (`staged`, the prepared copy, when it used one) becomes the worktree's index
   * (what the full capture leaves there too: the base's tree and every change), and that index's mark is kept. Only
   * an index staged from the prepared copy is vouched for: one the full capture left was the worker's before.
   */
  async settle(repo: WorktreeRepo, staged: string | null): Promise<void> {
    this.left.delete(repo.gitDir);
    if (staged === null) return;
    const index = join(repo.gitDir, "index");
    renameSync(staged, index);
    const mark = await fileMark(index);
    if (mark === null) return;
    // A worktree removed without reuse is never asked about again: the oldest records go first.
    if (this.left.size >= LEFT_KEPT) this.left.delete(this.left.keys().next().value as string);
    this.left.set(repo.gitDir, mark);
  }

  /**
   * True when the worktree's index is still the one the last capture left (so it has no bit a worker set). Asked once
   * per capture: the record is dropped.
   */
  async bitsFree(repo: WorktreeRepo): Promise<boolean> {
    const mark = this.left.get(repo.gitDir);
    this.left.delete(repo.gitDir);
    return mark !== undefined && (await fileMark(join(repo.gitDir, "index"))) === mark;
  }

  /**
   * Forgets the prepared copy of the worktree at `path` (removed, or prepared in a way that keeps none); the file goes
   * with the admin folder, or is overwritten by the next `keep`.
   */
  forget(path: string): void {
    this.prepared.delete(path);
  }
}
