/**
 * The team the user configured is the team that runs (issue 28), through `acp-orchestrator run` end to end: with two
 * configured agents the plan uses those two only (the built-in worker takes nothing), seats go up to the config's
 * `maxParallelTasks` (no cap at 3), `--agents` narrows the team, and an unknown agent is refused.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { runCli } from "../support/cli-run.js";
import { tempDir } from "../support/server-process.js";

const GOAL = Array.from({ length: 12 }, (_, i) => `- Write note number ${i + 1}`).join("\n");

/** A config of two logging agents (each task sleeps 2-2.5 s, so overlapping starts are unmistakable). */
function team(dir: string, extra: Record<string, unknown> = {}): { config: string; log: string } {
  const agentFile = compileLoggingAgent(dir);
  const log = join(dir, "executions.jsonl");
  writeFileSync(log, "");
  const agent = (agentId: string) => ({
    agentId,
    command: process.execPath,
    args: [agentFile],
    env: { LOGGING_AGENT_LOG: log, LOGGING_AGENT_MIN_MS: "2000", LOGGING_AGENT_MAX_MS: "2500" },
  });
  const config = join(dir, "agents.json");
  writeFileSync(config, JSON.stringify({ agents: [agent("alpha"), agent("beta")], maxParallelTasks: 6, ...extra }));
  return { config, log };
}

/** The agent of every task line of `run`'s printed plan (`  t1    Title  [alpha]`). */
function planAgents(stdout: string): string[] {
  return [...stdout.matchAll(/^ {2}t\d+ .*\[([^\]]+)\]$/gmu)].map((m) => m[1] as string);
}

/** The most executions that were running at one moment, from the log's start/done times. */
function peakConcurrency(log: string): number {
  const moments = readExecutionLog(log).map((l) => ({ at: Date.parse(l.at), delta: l.event === "start" ? 1 : -1 }));
  moments.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let now = 0;
  let peak = 0;
  for (const m of moments) peak = Math.max(peak, (now += m.delta));
  return peak;
}

describe.concurrent("the configured team runs (issue 28)", () => {
  it("2 agents, maxParallelTasks 6, 12 independent tasks: 6 run at once, none on the built-in worker", async () => {
    const dir = tempDir("team-");
    const { config, log } = team(dir);
    const run = await runCli(
      ["run", "--goal", GOAL, "--yes", "--config", config, "--state", join(dir, "state.db"), "--cwd", dir],
      dir,
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const agents = planAgents(run.stdout);
    expect(agents).toHaveLength(12);
    expect(new Set(agents)).toEqual(new Set(["alpha", "beta"]));
    expect(agents.filter((a) => a === "alpha")).toHaveLength(6);
    const lines = readExecutionLog(log);
    expect(lines.filter((l) => l.event === "done")).toHaveLength(12);
    expect(peakConcurrency(log)).toBe(6);
  });

  it("run --agents beta plans on beta alone; an agent the config does not have is refused", async () => {
    const dir = tempDir("team-agents-");
    const { config, log } = team(dir, { maxParallelTasks: 2 });
    const goal = "- Write note one\n- Write note two";
    const state = join(dir, "state.db");
    const run = await runCli(
      ["run", "--goal", goal, "--agents", "beta", "--yes", "--config", config, "--state", state, "--cwd", dir],
      dir,
    );
    expect(run.code).toBe(0);
    expect(planAgents(run.stdout)).toEqual(["beta", "beta"]);
    expect(readExecutionLog(log).filter((l) => l.event === "done")).toHaveLength(2);
    const refused = await runCli(
      ["run", "--goal", goal, "--agents", "gamma", "--yes", "--config", config, "--state", state, "--cwd", dir],
      dir,
    );
    // One plain sentence naming the unknown agent and the ones there are, exit 2, no stack (a new user's trial).
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      `acp-orchestrator: --agents names "gamma", which is not an agent of the registry (its agents: alpha, beta, ` +
        `builtin-worker). See "acp-orchestrator help run".\n`,
    );
    expect(refused.stdout).toBe("");
  });
});
