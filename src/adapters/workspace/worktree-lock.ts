/**
 * Serialises worktree administration (`git worktree add/move/remove/prune/list`) per repository common dir, within
 * this process and across processes (issue 26, case 8: several servers on one repository made `git worktree add`
 * fail with "failed to read .git/worktrees/…/commondir" while another add was half done).
 *
 * Across processes the lock is a file, `<common dir>/acp-orchestrator/worktree-admin.lock`, created with `O_EXCL`
 * (`open(…, "wx")`) and holding `<pid> <hostname> <ms since epoch>`; a waiter retries with backoff (5 ms doubling to
 * 100 ms). A lock whose holder is provably gone (same host, process gone) or that is older than `STALE_MS` is broken:
 * renamed away, then checked to be the one judged stale (a fresh lock renamed by mistake is put back). Within the
 * process a promise chain per common dir keeps the file from being contended by the process's own calls.
 *
 * Owns the lock file only; must never hold it across anything but one git administration command.
 */
import { closeSync, openSync, unlinkSync, writeSync } from "node:fs";
import { readFile, rename, unlink, link, mkdir } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";

/** A lock older than this (ms) is taken as left by a holder that died without removing it. */
const STALE_MS = 120_000;
/** A waiter gives up after this long (ms) and runs without the lock (git itself still refuses a real collision). */
const WAIT_MS = 120_000;

const chains = new Map<string, Promise<unknown>>();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/** True when the lock text names a holder that is gone or too old to be alive. */
function stale(text: string, now: number): boolean {
  const [pid, host, at] = text.trim().split(" ");
  const ms = Number(at);
  if (!Number.isFinite(ms) || now - ms > STALE_MS) return true;
  return host === hostname() && Number.isInteger(Number(pid)) && !alive(Number(pid));
}

async function tryBreak(path: string, judged: string): Promise<void> {
  const aside = `${path}.stale-${process.pid}-${Math.random().toString(36).slice(2)}`;
  try {
    await rename(path, aside);
  } catch {
    return; // someone else broke or released it
  }
  const moved = await readFile(aside, "utf8").catch(() => "");
  if (moved !== judged) await link(aside, path).catch(() => undefined); // a live lock: put it back unless replaced
  await unlink(aside).catch(() => undefined);
}

/** Takes the lock file; false when it waited too long and goes on without it. */
async function acquire(path: string): Promise<boolean> {
  const started = Date.now();
  let wait = 5;
  for (;;) {
    try {
      // Synchronous: a few microseconds each, where a promise per call waits for a thread pool turn (issue 34).
      const fd = openSync(path, "wx", 0o644);
      try {
        writeSync(fd, `${process.pid} ${hostname()} ${Date.now()}\n`);
      } finally {
        closeSync(fd);
      }
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        await mkdir(join(path, ".."), { recursive: true });
        continue;
      }
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const text = await readFile(path, "utf8").catch(() => null);
    if (text !== null && text.trim() !== "" && stale(text, Date.now())) {
      await tryBreak(path, text);
      continue;
    }
    if (Date.now() - started > WAIT_MS) return false;
    await sleep(wait + Math.floor(Math.random() * wait));
    wait = Math.min(100, wait * 2);
  }
}

/**
 * Runs `work` while holding the worktree-administration lock of the repository whose common dir is `commonDir`
 * (absolute). Resolves or rejects with `work`'s outcome; the lock is released either way. Waits at most about two
 * minutes for another holder, then runs anyway (a holder that slow is taken as hung).
 */
export async function withWorktreeAdmin<T>(commonDir: string, work: () => Promise<T>): Promise<T> {
  const previous = chains.get(commonDir) ?? Promise.resolve();
  const run = previous.then(async () => {
    const path = join(commonDir, "acp-orchestrator", "worktree-admin.lock");
    const held = await acquire(path);
    try {
      return await work();
    } finally {
      if (held)
        try {
          unlinkSync(path);
        } catch {
          // already gone (broken as stale by another process)
        }
    }
  });
  const settled = run.catch(() => undefined);
  chains.set(commonDir, settled);
  void settled.then(() => {
    if (chains.get(commonDir) === settled) chains.delete(commonDir);
  });
  return run;
}
