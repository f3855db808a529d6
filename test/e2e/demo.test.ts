/**
 * `acp-orchestrator demo` (what `npm run demo` runs after the build) exits 0: it spawns the real server, drives it
 * through plan → confirm → execution with built-in worker subprocesses, and prints the final table (issue 2).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CLI } from "../support/server-process.js";

describe("acp-orchestrator demo", () => {
  it("runs a product end to end and exits 0", () => {
    const run = spawnSync(process.execPath, [CLI, "demo", "--goal", "- Write a README\n- Then write a changelog"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toContain("plan (2 tasks):");
    expect(run.stdout).toMatch(/\[completed\] t1 /);
    expect(run.stdout).toMatch(/\[completed\] t2 /);
    expect(run.stdout).toContain("All 2 tasks completed.");
    expect(run.stdout).toMatch(/t1-write-a-readme\.md/);
    expect(run.stdout).toContain("demo: OK");
    // Says that the folder it named is gone (a new user looked for the notes after it exited).
    const removed = /removed (\S+) \(run with --keep/.exec(run.stdout);
    expect(removed).not.toBeNull();
    expect(existsSync(removed![1]!)).toBe(false);
  });
});
