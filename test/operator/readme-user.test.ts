/**
 * Findings of a new user who used the command line from the README alone, each against the built CLI and a store
 * written by a real server run: the resume command `status` prints names the agent config the run used, as `run`'s
 * own hint does.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { tempDir } from "../support/server-process.js";

describe("the command line for a user who read only the README", () => {
  it("status's resume command carries the --config and --state the run used, as run's own hint does", async () => {
    const dir = tempDir("acp-orch-readme-");
    // An agent that cannot start: the run pauses at once with a recovery that names the resume command.
    writeFileSync(
      join(dir, "agents.json"),
      JSON.stringify({ agents: [{ agentId: "broken", role: "worker", command: join(dir, "no-such-agent") }] }),
    );
    const run = await runCli(
      ["run", "--config", "agents.json", "--state", "s.db", "--agents", "broken", "--yes", "--goal", "- Write a README"],
      dir,
    );
    expect(run.code, run.stderr).toBe(1);
    const id = /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";
    const flags = ` --state ${join(dir, "s.db")} --config ${join(dir, "agents.json")}`;
    expect(run.stdout).toContain(`resume with: acp-orchestrator resume ${id}${flags}\n`);
    const status = await runCli(["status", id, "--state", "s.db"], dir);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^phase: +paused$/m);
    expect(status.stdout).toContain(`"acp-orchestrator resume ${id}${flags}"`);
  }, 120_000);
});
