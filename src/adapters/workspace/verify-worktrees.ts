/**
 * GitVerifier: the `VerifyPort` over a local git repository (DESIGN.md guarantee 17; docs/VERIFY.md).
 *
 * Each product gets at most `parallel` verify worktrees under `<git-common-dir>/acp-orchestrator/verify/<productId>/`
 * (outside the user's working tree, apart from every worker's worktree). A worktree is made once per server process
 * and then reused for every candidate of the product (the cost per task at 10,000 files is what changed, not the whole
 * checkout): `checkout -f --detach <candidate>` and `clean -ffdx` give exactly the candidate's tree (tracked files are
 * the candidate's; untracked and ignored files are gone; skip-worktree and assume-unchanged bits a check set are
 * undone first, by putting back the index as the last preparation left it). `clean` is skipped when no folder of the
 * worktree changed since then (verify-marks.ts), so a check that leaves nothing costs one git process. Every git command names the worktree's git directory and work tree explicitly (`--git-dir`,
 * `--work-tree`), with hooks, fsmonitor and signing off, so nothing a check left in the folder (a rewritten `.git`
 * file, a config) redirects the orchestrator's own git commands (guarantee 16). Adding, removing and pruning verify
 * worktrees is serialised with the task worktrees' administration of the same repository (worktree-lock.ts, issue
 * 26: a concurrent `worktree add` can fail half done). A worktree found at a slot's path when a process first uses
 * the slot (a dead server's) is removed and made anew. Each product folder names the process using it (verify-owner.ts),
 * and before its first verification in a repository a process removes the verify folders of processes that are
 * provably gone (a server or a `verify` command killed with SIGKILL), never one whose owner may be alive.
 *
 * The commands themselves run the candidate's code with the server's privileges: that is what verification is. The
 * processes are confined in lifetime (watchdog, timeout), not in what they may touch.
 */
import { rmSync, utimesSync, writeFileSync } from "node:fs";
import { lstat, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { CheckCommand, VerifyPort, VerifyRun } from "../../core/workspace/verify-port.js";
import { git, runGit } from "./git-cli.js";
import { ProcessLiveness } from "../system/process-liveness.js";
import { runCheckCommand } from "./verify-process.js";
import {
  foldersUnchanged,
  markFolders,
  remarkFolders,
  settleClock,
  type FolderMarks,
  type WorktreeMarks,
} from "./verify-marks.js";
import {
  claimVerifyDir,
  discardVerifyDir,
  sweepStaleVerifyDirs,
  verifyRoot,
  type VerifyOwnerLiveness,
} from "./verify-owner.js";
import {
  clearIndexBits,
  commonDirLookup,
  component,
  ensureSubfolder,
  subfolderLookup,
  type WorktreeRun,
} from "./worktree-git.js";
import { withWorktreeAdmin } from "./worktree-lock.js";

interface Slot {
  path: string;
  /** The worktree's own git directory (`<common>/worktrees/<name>`), read when this process made it. */
  gitDir: string;
  /** What the last preparation left (verify-marks.ts); absent before the first, or when they could not be taken. */
  marks?: WorktreeMarks;
}

/**
 * `-c` options of every git command in a verify worktree: whatever configuration a check wrote (repository,
 * worktree or global), stat data is compared in full (ctime included) and no entry is skipped or hidden, so
 * `checkout -f` sees every file a check changed.
 */
const STAT_CONFIG: readonly string[] = [
  "-c",
  "core.trustctime=true",
  "-c",
  "core.checkStat=default",
  "-c",
  "core.ignoreStat=false",
  "-c",
  "core.sparseCheckout=false",
  "-c",
  "core.splitIndex=false",
];

interface Pool {
  /** Slots made by this process and free now. */
  free: Slot[];
  /** Slots in use or free (≤ the largest `parallel` asked). */
  made: number;
  /** Runs waiting for a slot, in order. */
  waiting: (() => void)[];
}

export class GitVerifier implements VerifyPort {
  private readonly commonDir = commonDirLookup();
  private readonly subfolder = subfolderLookup();
  private readonly pools = new Map<string, Pool>();
  /** The sweep of stale verify folders, once per repository (common dir) for this verifier's lifetime. */
  private readonly sweeps = new Map<string, Promise<unknown>>();
  private readonly liveness: VerifyOwnerLiveness;

  constructor(private readonly options: { env?: Record<string, string>; liveness?: VerifyOwnerLiveness } = {}) {
    this.liveness = options.liveness ?? new ProcessLiveness();
  }

  private async productDir(cwd: string, productId: string): Promise<string> {
    return join(verifyRoot(await this.commonDir(cwd)), component(productId));
  }

  /**
   * Removes the repository's verify folders whose owner process is gone (verify-owner.ts), once per repository; the
   * first verification there waits for it, and a server calls it when a product of the repository starts executing
   * (so a stale folder goes at start-up even when no check runs). Best effort: a failure (not a repository,
   * say) leaves them for the next process; never rejects.
   */
  async sweep(cwd: string): Promise<void> {
    await this.sweepOnce(cwd).catch(() => undefined);
  }

  private async sweepOnce(cwd: string): Promise<void> {
    const common = await this.commonDir(cwd);
    let sweep = this.sweeps.get(common);
    if (!sweep) {
      sweep = sweepStaleVerifyDirs(cwd, common, this.liveness).catch(() => undefined);
      this.sweeps.set(common, sweep);
    }
    await sweep;
  }

  async treeOf(cwd: string, commit: string): Promise<string> {
    const common = await this.commonDir(cwd);
    return (await git(cwd, [`--git-dir=${common}`, "rev-parse", "--verify", "-q", `${commit}^{tree}`])).trim();
  }

  async run(request: {
    cwd: string;
    productId: string;
    commit: string;
    tree?: string;
    commands: CheckCommand[];
    env: Record<string, string>;
    parallel: number;
    signal: AbortSignal;
  }): Promise<VerifyRun | null> {
    await this.sweepOnce(request.cwd);
    const key = await this.productDir(request.cwd, request.productId);
    const slot = await this.acquire(key, request);
    if (slot === null) return null;
    let broken = false;
    try {
      if (request.signal.aborted) return null;
      await this.checkout(request.cwd, slot, request.commit);
      // Issue 31: the checks run where the product's cwd lies in the repository (created empty when the candidate lacks it).
      const where = await ensureSubfolder(slot.path, await this.subfolder(request.cwd));
      const tree = request.tree ?? (await this.treeOf(request.cwd, request.commit));
      const checks: VerifyRun["checks"] = [];
      for (const command of request.commands) {
        const outcome = await runCheckCommand({
          run: command.run,
          cwd: where,
          env: { ...this.options.env, ...request.env },
          timeoutMs: command.timeoutMs,
          signal: request.signal,
        });
        if (outcome.aborted) return null;
        // No verdict on the candidate: the command never ran (the caller treats it as the run failing, not as red).
        if (outcome.startFailed)
          throw new Error(`The check "${command.name}" could not be started: ${outcome.outputTail}`);
        checks.push({
          name: command.name,
          ok: outcome.ok,
          exitCode: outcome.exitCode,
          ...(outcome.timedOut ? { timedOut: true } : {}),
          durationMs: outcome.durationMs,
          outputTail: outcome.outputTail,
        });
        if (!outcome.ok) break;
      }
      return { tree, ok: checks.every((c) => c.ok), checks };
    } catch (err) {
      broken = true;
      throw err;
    } finally {
      this.releaseSlot(key, slot, broken);
    }
  }

  /** A free slot of the product, a new one while fewer than `parallel` exist, else waits for one. */
  private async acquire(
    key: string,
    request: { cwd: string; productId: string; parallel: number; signal: AbortSignal },
  ): Promise<Slot | null> {
    let pool = this.pools.get(key);
    if (!pool) {
      pool = { free: [], made: 0, waiting: [] };
      this.pools.set(key, pool);
    }
    for (;;) {
      if (request.signal.aborted) return null;
      const free = pool.free.pop();
      if (free) return free;
      if (pool.made < request.parallel) {
        const n = ++pool.made;
        try {
          return await this.makeSlot(request.cwd, join(key, `slot-${n}`));
        } catch (err) {
          pool.made--;
          throw err;
        }
      }
      await new Promise<void>((resolveWait) => {
        const wake = (): void => {
          request.signal.removeEventListener("abort", wake);
          resolveWait();
        };
        pool.waiting.push(wake);
        request.signal.addEventListener("abort", wake, { once: true });
      });
    }
  }

  private releaseSlot(key: string, slot: Slot, broken: boolean): void {
    const pool = this.pools.get(key);
    if (!pool) return;
    if (broken) pool.made--;
    else pool.free.push(slot);
    pool.waiting.shift()?.();
  }

  /** Makes a fresh verify worktree at `path` (removing whatever is there) and reads its git directory. */
  private async makeSlot(cwd: string, path: string): Promise<Slot> {
    const common = await this.commonDir(cwd);
    await withWorktreeAdmin(common, () =>
      runGit(cwd, [`--git-dir=${common}`, "worktree", "remove", "--force", "--force", path]),
    );
    await rm(path, { recursive: true, force: true });
    await withWorktreeAdmin(common, () => runGit(cwd, [`--git-dir=${common}`, "worktree", "prune"]));
    await claimVerifyDir(common, join(path, ".."), this.liveness);
    const head = (await git(cwd, [`--git-dir=${common}`, "rev-parse", "--verify", "HEAD^{commit}"])).trim();
    await withWorktreeAdmin(common, () =>
      git(cwd, [`--git-dir=${common}`, "worktree", "add", "--detach", "-f", "-q", path, head]),
    );
    const dotGit = (await readFile(join(path, ".git"), "utf8")).trim();
    const m = /^gitdir: (.+)$/.exec(dotGit);
    if (!m?.[1]) throw new Error(`The verify worktree at ${path} has no git directory.`);
    return { path, gitDir: resolve(path, m[1]) };
  }

  /**
   * Puts exactly `commit`'s tree in the slot (see the file comment): the index as the last preparation left it (or,
   * the first time, its bits cleared), `checkout -f`, and `clean -ffdx` unless no folder changed since the last
   * preparation (verify-marks.ts: then no path was added, and there is nothing to clean). One git process per check
   * when the check left nothing behind, two when it did.
   */
  private async checkout(cwd: string, slot: Slot, commit: string): Promise<void> {
    const run: WorktreeRun = (args, input) =>
      git(cwd, [`--git-dir=${slot.gitDir}`, `--work-tree=${slot.path}`, ...STAT_CONFIG, ...args], input);
    const marks = slot.marks;
    slot.marks = undefined;
    const index = join(slot.gitDir, "index");
    await restoreGitfile(slot);
    if (marks) putIndexBack(index, marks);
    else await clearIndexBits(run);
    const untouched = marks !== undefined && foldersUnchanged(marks.folders);
    await run(["checkout", "-q", "-f", "--detach", commit]);
    if (!untouched) await run(["clean", "-ffdxq"]);
    slot.marks = await this.mark(slot, index, marks?.folders);
  }

  /**
   * The slot's marks after a preparation, or undefined when they cannot be taken or trusted (the next one cleans).
   * The folders are those of `last` when their link counts prove the worktree has no other (verify-marks.ts), else
   * walked.
   */
  private async mark(slot: Slot, index: string, last?: FolderMarks): Promise<WorktreeMarks | undefined> {
    try {
      const folders = (last && remarkFolders(last)) ?? (await markFolders(slot.path));
      if (!(await settleClock(folders, `${slot.path}.clock`))) return undefined;
      const { atime, mtime } = await stat(index);
      return { index: await readFile(index), indexTimes: { atime, mtime }, folders };
    } catch {
      return undefined;
    }
  }

  async release(cwd: string, productId: string): Promise<void> {
    const key = await this.productDir(cwd, productId);
    const pool = this.pools.get(key);
    if (pool && pool.made > pool.free.length) return; // a run is using a slot: its product is still verifying
    this.pools.delete(key);
    await discardVerifyDir(cwd, await this.commonDir(cwd), key);
  }
}

/**
 * Puts the saved index back as a new file with the times git wrote it with (verify-marks.ts). A check can reach the
 * worktree's git directory through `.git` and leave anything at `index` (a symlink or a hard link to a file outside,
 * a folder): whatever is there is removed, never written through, and the file is created exclusively. Synchronous:
 * three calls on one file, cheaper than as many promises.
 */
function putIndexBack(index: string, marks: WorktreeMarks): void {
  rmSync(index, { recursive: true, force: true });
  writeFileSync(index, marks.index, { flag: "wx" });
  utimesSync(index, marks.indexTimes.atime, marks.indexTimes.mtime);
}

/**
 * Puts the slot's `.git` file back (a check may have rewritten it, so the next check's own git commands see this
 * worktree). Written in place when it is still a plain file of one link (the folder is not touched, so its mark
 * holds); anything else there (a symlink, a hard link, a folder) is removed first, never written through.
 */
async function restoreGitfile(slot: Slot): Promise<void> {
  const path = join(slot.path, ".git");
  const info = await lstat(path).catch(() => null);
  if (info !== null && !(info.isFile() && info.nlink === 1)) await rm(path, { recursive: true, force: true });
  await writeFile(path, `gitdir: ${slot.gitDir}\n`);
}
