/**
 * A server's whole process tree, for tests that make a machine "go away": the server, its agent watchdogs, their
 * agents and whatever those started (found through the parent pid in `/proc/<pid>/stat`; Linux only).
 *
 * `freezeTree` SIGSTOPs the root and then, level by level, every descendant, until a pass finds no process it has not
 * stopped (a stopped process starts nothing new, so this ends). `killTree` SIGKILLs a frozen tree. A process that
 * exits meanwhile is skipped.
 */
import { readdirSync, readFileSync } from "node:fs";

/** The parent pid of every live process, from `/proc/<pid>/stat` (field 4, after the last `)` of the command name). */
function parents(): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      byPid.set(Number(entry), Number(fields[1]));
    } catch {
      // The process exited between the listing and the read.
    }
  }
  return byPid;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/**
 * Stops `root` and every process descended from it (SIGSTOP), top-down, and returns their pids (root first).
 * Afterwards none of them runs another instruction until killed or continued.
 */
export function freezeTree(root: number): number[] {
  signal(root, "SIGSTOP");
  const stopped = [root];
  const seen = new Set(stopped);
  for (;;) {
    const fresh: number[] = [];
    for (const [pid, ppid] of parents()) if (seen.has(ppid) && !seen.has(pid)) fresh.push(pid);
    if (fresh.length === 0) return stopped;
    for (const pid of fresh) {
      signal(pid, "SIGSTOP");
      seen.add(pid);
      stopped.push(pid);
    }
  }
}

/** SIGKILLs every pid of a tree `freezeTree` returned (a stopped process dies of SIGKILL without running again). */
export function killTree(pids: readonly number[]): void {
  for (const pid of pids) signal(pid, "SIGKILL");
}
