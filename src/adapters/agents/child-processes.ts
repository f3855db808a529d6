/**
 * Child process tracking for agent subprocesses (workers and leaders): no child outlives the server. Every spawned
 * agent is registered here; on any exit of this process every child still alive is SIGKILLed (the last line of
 * defence — the pools stop their children gracefully first). A SIGKILL of the server cannot run this hook; then the
 * children see their stdin close and exit by themselves.
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
          c.kill("SIGKILL");
        } catch {
          // already gone
        }
      }
    });
  }
}

/** Resolves after `ms` milliseconds without keeping the process alive. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });
}
