/**
 * Fresh-user findings on the operator commands (issue 15), each against a store written by a real server run:
 * `status` of a product that is planned but not confirmed shows the proposed plan; `list` on a state file that does
 * not exist says so in one sentence (where the path came from, what creates it) and creates nothing; `status` states
 * isolation, integration and each task's commit and changed files in words, not as JSON.
 */
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { startServer, tempDir } from "../support/server-process.js";

describe("operator commands for a new user", () => {
  it("status of a planned, unconfirmed product shows the proposed plan", async () => {
    const dir = tempDir("acp-orch-fresh-");
    const statePath = join(dir, "state.db");
    const server = await startServer({ statePath, cwd: dir, args: ["--log-level", "warn"] });
    try {
      const ready = server.waitFor((n) => n.method === "product.planReady", 60_000);
      const { productId } = await server.request<{ productId: string }>("product.plan", {
        goal: "- Write a README\n- Write a changelog",
        cwd: dir,
      });
      await ready;
      const status = await runCli(["status", productId, "--state", statePath], dir);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toContain("phase:       awaiting_confirmation");
      // It said "progress: 0/0 completed, ..." (no task exists before confirmation).
      expect(status.stdout).toMatch(/^progress: +planned: 2 tasks, awaiting confirmation$/m);
      expect(status.stdout).toMatch(/plan v1 \(2 tasks, not confirmed yet\):/);
      expect(status.stdout).toMatch(/^t1 +\S+ +- +Write a README$/m);
      expect(status.stdout).toMatch(/^t2 +\S+ +\S+ +Write a changelog$/m);
    } finally {
      await server.close();
    }
  }, 120_000);

  it("list on a state file that does not exist names it and where it came from, and creates nothing", async () => {
    const dir = tempDir("acp-orch-fresh-");
    const given = await runCli(["list", "--state", join(dir, "missing", "state.db")], dir);
    expect(given.code).toBe(2);
    expect(given.stderr.trim()).toBe(
      `acp-orchestrator: There is no state file at ${join(dir, "missing", "state.db")} (given by --state): nothing has run with this store yet. ` +
        `Pass --state with the file or postgres:// URL a server used, or start a run here with "acp-orchestrator run --goal TEXT".`,
    );
    const byDefault = await runCli(["list"], dir, { XDG_STATE_HOME: join(dir, "xdg"), ACP_ORCHESTRATOR_STATE: "" });
    expect(byDefault.code).toBe(2);
    expect(byDefault.stderr).toContain(
      `There is no state file at ${join(dir, "xdg", "acp-orchestrator", "state.db")} (the default state file)`,
    );
    const byEnv = await runCli(["list"], dir, { ACP_ORCHESTRATOR_STATE: join(dir, "env.db") });
    expect(byEnv.stderr).toContain(`(from $ACP_ORCHESTRATOR_STATE)`);
    expect(existsSync(join(dir, "missing"))).toBe(false);
    expect(existsSync(join(dir, "xdg"))).toBe(false);
    expect(existsSync(join(dir, "env.db"))).toBe(false);
  }, 60_000);

  it("status states isolation, integration, commits and changed files in words", async () => {
    const repo = tempDir("acp-orch-fresh-git-");
    const git = (...args: string[]) => spawnSync("git", args, { cwd: repo, encoding: "utf8" });
    git("init", "-q", "-b", "main");
    writeFileSync(join(repo, "README.md"), "# repo\n");
    git("add", "README.md");
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init");
    const statePath = join(repo, "..", `${repo.split("/").pop() ?? "x"}-state.db`);
    const run = await runCli(
      ["run", "--state", statePath, "--yes", "--goal", "- Write a README\n- Write a changelog"],
      repo,
    );
    expect(run.code, run.stderr).toBe(0);
    const id = /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";
    const status = await runCli(["status", id, "--state", statePath], repo);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain("isolation:   worktree (each task attempt in its own git worktree)");
    expect(status.stdout).toMatch(new RegExp(`^integration: integrated on branch acp/${id}, head [0-9a-f]{12}$`, "m"));
    expect(status.stdout).toMatch(/^ +merged: t\d, t\d$/m);
    expect(status.stdout).toMatch(/^ +t1 +commit: [0-9a-f]{40} on \S+$/m);
    expect(status.stdout).toMatch(/^ +t1 +changed: \S+/m);
    expect(status.stdout).not.toMatch(/\{"/);
  }, 120_000);
});
