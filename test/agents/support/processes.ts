/**
 * Finding the processes a suite agent started, through /proc (Linux): every process whose environment carries the
 * agent's `AGENT_SUITE_MARK` value (agents.ts) — the agent itself and everything it started (a Bash tool's shell, a
 * helper that ignores SIGTERM or moved to a session of its own), unless a process cleared its environment on purpose.
 * Zombies count as gone.
 */
import { readdirSync, readFileSync } from "node:fs";
import { MARK_VARIABLE } from "./agents.js";

export interface MarkedProcess {
  pid: number;
  /** The command line, arguments joined by spaces. */
  command: string;
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z";
  } catch {
    return true;
  }
}

/** Live processes whose environment holds `AGENT_SUITE_MARK=<one of marks>`. */
export function markedProcesses(marks: readonly string[]): MarkedProcess[] {
  const needles = marks.map((m) => `\0${MARK_VARIABLE}=${m}\0`);
  const found: MarkedProcess[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const environ = `\0${readFileSync(`/proc/${entry}/environ`, "latin1")}`;
      if (!needles.some((n) => environ.includes(n))) continue;
      if (isZombie(Number(entry))) continue;
      const command = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim();
      found.push({ pid: Number(entry), command });
    } catch {
      // gone meanwhile, or not readable
    }
  }
  return found;
}

/**
 * Polls until no process carries any of `marks`, or `timeoutMs` passes. Resolves with how long it took (ms since the
 * call) and what was still alive at the end (empty on success).
 */
export async function waitUntilGone(
  marks: readonly string[],
  timeoutMs: number,
): Promise<{ elapsedMs: number; remaining: MarkedProcess[] }> {
  const started = Date.now();
  for (;;) {
    const remaining = markedProcesses(marks);
    const elapsedMs = Date.now() - started;
    if (remaining.length === 0 || elapsedMs >= timeoutMs) return { elapsedMs, remaining };
    await new Promise((r) => setTimeout(r, 50));
  }
}
