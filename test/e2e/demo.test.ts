/**
 * `acp-orchestrator demo` (what `npm run demo` runs after the build) exits 0: it spawns the real server, drives it
 * through plan → confirm → execution with worker subprocesses and prints the final table (issue 2). Issue 15: it keeps
 * the workspace and state unless --clean and says where; it honours --config, --state and --log-level; it shows
 * durations, the parallel lanes and each task's last output line.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { CLI, tempDir } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

function demo(args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, "demo", ...args], { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("acp-orchestrator demo", () => {
  it("runs a product end to end, shows durations, lanes and last output lines, and keeps what it made", async () => {
    const cwd = tempDir("acp-orch-demo-");
    const run = await demo(
      ["--goal", "- Write a README\n- In parallel, write a changelog\n- Then review everything"],
      cwd,
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`plan "README, changelog and everything" (3 tasks):`);
    expect(run.stdout).toMatch(/\[completed\] t1 Write a README \(attempt 1, [\d.]+ m?s\)/);
    expect(run.stdout).toContain("All 3 tasks completed.");
    expect(run.stdout).toMatch(/^TASK +STATUS +ATTEMPTS +DURATION +LANE +AGENT +TITLE$/m);
    expect(run.stdout).toMatch(/^t1 +completed +1 +[\d.]+ m?s +[12] +builtin-worker +Write a README$/m);
    expect(run.stdout).toMatch(/^parallel lanes \(/m);
    expect(run.stdout).toMatch(/^lane 1 \|\[t1=*\]/m);
    expect(run.stdout).toMatch(/^last output line of each task:\n {2}t1 {2}\S.*\n {2}t2 {2}\S.*\n {2}t3 {2}\S/m);
    expect(run.stdout).toMatch(/t1-write-a-readme\.md/);
    expect(run.stdout).toContain("demo: OK");
    // Kept, and said where (a new user looked for the notes after it exited).
    const kept = /^kept: workspace (\S+), state (\S+) \(--clean removes them\)$/m.exec(run.stdout);
    expect(kept).not.toBeNull();
    const [, workspace, state] = kept as unknown as [string, string, string];
    expect(existsSync(join(workspace, "notes", "t1-write-a-readme.md"))).toBe(true);
    const id = /^product: (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";
    expect(run.stdout).toContain(`look again: acp-orchestrator status ${id} --state ${state}`);
    const status = await runCli(["status", id, "--state", state], cwd);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain("phase:       completed");
  }, 120_000);

  it("honours --config, --state and --log-level, runs tasks in parallel lanes, and --clean removes its folder", async () => {
    const dir = tempDir("acp-orch-demo-config-");
    const scriptFile = join(dir, "script.json");
    const tasks: Record<string, unknown> = {};
    for (const id of ["t1", "t2", "t3"])
      tasks[id] = { actions: [{ say: `${id} working\n` }, { sleep: 1500 }], text: `${id}: last words` };
    writeFileSync(scriptFile, JSON.stringify({ worker: { tasks } }));
    const config = join(dir, "team.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: [
          {
            agentId: "scripted",
            role: "worker",
            command: process.execPath,
            args: [...SCRIPTED_AGENT_ARGS],
            env: { SCRIPTED_AGENT_SCRIPT: scriptFile },
          },
        ],
      }),
    );
    // A --state folder must exist (only the default state file's folder is made).
    mkdirSync(join(dir, "mine"));
    const state = join(dir, "mine", "demo-state.db");
    const run = await demo(
      [
        "--config",
        config,
        "--state",
        state,
        "--log-level",
        "debug",
        "--clean",
        "--goal",
        "- Write the parser\n- In parallel, write the tests\n- Then write the docs",
      ],
      dir,
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`state:     ${state}`);
    expect(run.stdout).toContain(`config:    ${config}`);
    expect(run.stdout).toMatch(/^t1 +completed +1 +[\d.]+ s +\d +scripted +Write the parser$/m);
    expect(run.stdout).toContain("parallel lanes (up to 2 tasks at once):");
    expect(run.stdout).toMatch(/^lane 2 \|.*\[t2/m);
    expect(run.stdout).toMatch(/^ {2}t1 {2}t1: last words$/m);
    expect(run.stdout).toMatch(/^ {2}t3 {2}t3: last words$/m);
    // The server logged at debug level, as plain lines on stderr, never JSON (issue 28: human lines only).
    expect(run.stderr).toMatch(/^acp-orchestrator: debug: /m);
    expect(run.stderr).not.toMatch(/^\{/m);
    // --clean removed the temporary folder, not the store it was given.
    const removed = /^removed (\S+) \(the state in (\S+) stays\)$/m.exec(run.stdout);
    expect(removed?.[2]).toBe(state);
    expect(existsSync(removed?.[1] ?? "/")).toBe(false);
    expect(existsSync(dirname(state))).toBe(true);
    const list = await runCli(["list", "--state", state], dir);
    expect(list.stdout).toMatch(/prd_\w+ +completed +3\/3 /);
  }, 120_000);

  it("refuses --keep with --clean, and a bad --log-level, in one sentence", async () => {
    const cwd = tempDir("acp-orch-demo-");
    const both = await demo(["--keep", "--clean"], cwd);
    expect(both.code).toBe(2);
    expect(both.stderr).toBe(
      `acp-orchestrator: "demo" takes --keep or --clean, not both. See "acp-orchestrator help demo".\n`,
    );
    const level = await demo(["--log-level", "loud"], cwd);
    expect(level.code).toBe(2);
    expect(level.stderr).toContain(
      'The option --log-level of "demo" must be one of trace, debug, info, warn, error, fatal, silent.',
    );
  }, 60_000);
});
