/**
 * `check-host --deadline` (issue 31): the whole check ends at its deadline and kills the host's whole process group,
 * a grandchild that holds the host's stdout included. The garbage host (test/fixtures/hosts/garbage-host.mjs) never
 * answers, ignores SIGTERM and the end of its stdin; the per-request timeout is set above the deadline, so only the
 * deadline can end the check. Before: no deadline, and the grandchild stayed alive after check-host ended.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CLI, REPO_ROOT, tempDir } from "../support/server-process.js";

const HOST = join(REPO_ROOT, "test", "fixtures", "hosts", "garbage-host.mjs");

/** True while `pid` names a live process (a zombie, killed and not reaped yet, counts as gone). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** True while some live process (not a zombie) is in process group `pgid`, by a scan of /proc. */
function groupAlive(pgid: number): boolean {
  for (const entry of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, , group] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(group) === pgid && state !== "Z") return true;
    } catch {
      // Gone meanwhile.
    }
  }
  return false;
}

describe("check-host --deadline", () => {
  it("ends a check of a garbage host at 30 s, exits 1, and leaves no process of the host's group behind", async () => {
    const dir = tempDir("acp-orch-check-deadline-");
    const pidFile = join(dir, "pids.json");
    const started = performance.now();
    const child = spawn(
      process.execPath,
      [CLI, "check-host", "--deadline", "30s", "--timeout-ms", "120000", "--", process.execPath, HOST, pidFile],
      { cwd: dir, stdio: ["ignore", "pipe", "ignore"] },
    );
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    const seconds = (performance.now() - started) / 1000;
    const pids = JSON.parse(readFileSync(pidFile, "utf8")) as { host: number; grandchild: number };
    process.stderr.write(`host-check-deadline: check-host ended after ${seconds.toFixed(1)} s (code ${code})\n`);

    expect(code).toBe(1);
    expect(seconds).toBeLessThanOrEqual(35);
    expect(out).toMatch(/deadline of 30000 ms passed/);
    expect(out).toMatch(/\d+ passed, [1-9]\d* failed/);
    // The host led its own process group (check-host started it so); nothing of it is left.
    expect(alive(pids.host)).toBe(false);
    expect(alive(pids.grandchild)).toBe(false);
    expect(groupAlive(pids.host)).toBe(false);
  }, 60_000);
});
