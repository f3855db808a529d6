/**
 * A product deleted from another shell while `run` follows it (a new user's trial, items 1 and 2), through the built
 * CLI with real server and agent subprocesses on a real git repository: `run` ends with exit 1 and one sentence saying
 * the product was deleted, never "resume with …" (a deleted product cannot be resumed); the product's folder of
 * worktrees under `.git/acp-orchestrator/worktrees/` is gone, and nothing else of the user's `.git` is touched (a
 * folder of another product beside it stays).
 */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { runCli } from "../support/cli-run.js";
import { git, makeRepo } from "../support/git-repo.js";
import { tempDir } from "../support/server-process.js";

/** Resolves once the execution log has `count` start lines (the agents write them as each task begins). */
async function startsLogged(log: string, count: number): Promise<void> {
  while (readExecutionLog(log).filter((l) => l.event === "start").length < count) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("delete while run follows the product", () => {
  it("run says the product was deleted (exit 1, no resume command); its worktrees folder is gone", async () => {
    const repo = makeRepo();
    const dir = tempDir("delete-running-");
    const agentFile = compileLoggingAgent(dir);
    const log = join(dir, "executions.jsonl");
    writeFileSync(log, "");
    const config = join(dir, "agents.json");
    // Each task takes a minute: both still run when the product is deleted.
    writeFileSync(
      config,
      JSON.stringify({
        agents: [
          {
            agentId: "notes",
            command: process.execPath,
            args: [agentFile],
            env: { LOGGING_AGENT_LOG: log, LOGGING_AGENT_MIN_MS: "60000", LOGGING_AGENT_MAX_MS: "60000" },
          },
        ],
      }),
    );
    const state = join(dir, "state.db");
    const common = ["--config", config, "--state", state];
    // Another product's folder (and a file in it): delete must leave everything but its own product's folder.
    const worktrees = join(repo, ".git", "acp-orchestrator", "worktrees");
    mkdirSync(join(worktrees, "prd_someoneelse"), { recursive: true });
    writeFileSync(join(worktrees, "prd_someoneelse", "keep.txt"), "kept\n");

    const run = runCli(["run", "--goal", "- Write note one\n- Write note two", "--yes", ...common], repo);
    await startsLogged(log, 2);
    const productId = readExecutionLog(log)[0]?.productId ?? "";
    expect(existsSync(join(worktrees, productId))).toBe(true);

    const deleted = await runCli(["delete", productId, ...common], repo);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toMatch(new RegExp(`^deleted ${productId}$`, "mu"));

    const ran = await run;
    expect(ran.code).toBe(1);
    expect(ran.stderr).toBe(
      `acp-orchestrator: product ${productId} was deleted while this command ran it; there is nothing left to resume.\n`,
    );
    expect(ran.stdout).not.toContain("resume with");

    // Item 2: the product's folder is gone; the other product's folder and file stay, as does the user's checkout.
    expect(readdirSync(worktrees)).toEqual(["prd_someoneelse"]);
    expect(readdirSync(join(worktrees, "prd_someoneelse"))).toEqual(["keep.txt"]);
    expect(git(repo, "worktree", "list", "--porcelain").match(/^worktree /gmu)).toHaveLength(1);
    expect(git(repo, "status", "--porcelain")).toBe("");
  }, 180_000);
});
