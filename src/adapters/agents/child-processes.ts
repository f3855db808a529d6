/**
 * Child process tracking for agent subprocesses (workers and leaders): no child outlives the server. Every spawned
 * agent is started in its own process group (`detached: true`, stdio still piped, never unref'd) so that a wrapper command
 * (`npx …`, `node --import tsx …`, a shell script) and the real agent it spawns are stopped together: `killTree`
 * signals the whole group. Every spawned agent is registered here; on any exit of this process every child group
 * still alive is SIGKILLed (the last line of defence — the pools stop their children gracefully first). A SIGKILL of
 * the server cannot run this hook (and, the groups being detached, the kernel does not reach them either); then the
 * children see their stdin close and exit by themselves. Never unrefs a child, never kills a process it did not spawn.
 */
import type { ChildProcess } from "node:child_process";

const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Registers a spawned agent process so that it is killed if this process exits. Idempotent per child. */
export function trackChild(child: ChildProcess): void {
  liveChildren.add(child);
  child.once("exit", () => liveChildren.delete(child));
  child.once("error", () => {
    if (child.pid === undefined) liveChildren.delete(child);
  });
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on("exit", () => {
      for (const c of liveChildren) {
        try {
          killTree(c, "SIGKILL");
        } catch {
          // already gone
        }
      }
    });
  }
}

/**
 * Sends `signal` to the whole process group led by `child` (the agent was spawned with `detached: true`, so its pid is
 * its group id): the wrapper and every descendant that stayed in the group receive it. Falls back to
 * `child.kill(signal)` when the group cannot be signalled (no pid, group already gone, a platform without process
 * groups). Does not wait for anything to exit; never throws. Descendants that started their own session/group escape
 * it (by their own choice).
 */
export function killTree(child: ChildProcess, signal: NodeJS.Signals): void {
  const pid = child.pid;
  if (pid !== undefined && process.platform !== "win32") {
    try {
      process.kill(-pid, signal);
      return;
    } catch {
      // no such group (already reaped) or not permitted: fall back to the direct child
    }
  }
  try {
    child.kill(signal);
  } catch {
    // already gone
  }
}

/** Resolves after `ms` milliseconds without keeping the process alive. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });
}
