/**
 * Guarantee 12 (no orphans, even after kill -9) at the adapter level: every agent runs behind a watchdog in its own
 * process group. The helper agent starts two helpers that ignore SIGTERM, one in its group and one that moved to a
 * session of its own. Whether the server is SIGKILLed mid-turn or the agent exits on its own, within 5 s neither the
 * agent nor any helper is left.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AcpWorkerPool } from "../../../src/adapters/agents/acp-worker.js";
import { AgentProcess } from "../../../src/adapters/agents/agent-process.js";
import { AgentRegistry, parseAgentConfig } from "../../../src/adapters/agents/registry.js";
import {
  fixturesDir,
  isAlive,
  memoryLogger,
  pidFile,
  recorder,
  sleep,
  taskRequest,
  tsxLoader,
} from "../../fixtures/agents/pool-helpers.js";

const dirs: string[] = [];
const pids: number[] = [];
let pool: AcpWorkerPool | undefined;

async function workspace(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "acp-watchdog-"));
  dirs.push(dir);
  return dir;
}

/** Waits up to `ms` for every pid to be gone; returns those still alive. */
async function survivors(list: number[], ms = 5_000): Promise<number[]> {
  const until = Date.now() + ms;
  while (Date.now() < until && list.some(isAlive)) await sleep(50);
  return list.filter(isAlive);
}

async function helperPids(cwd: string): Promise<number[]> {
  const found = [
    await pidFile("helper-agent", cwd),
    await pidFile("helper-grouped", cwd),
    await pidFile("helper-escaped", cwd),
  ];
  pids.push(...found);
  return found;
}

afterEach(async () => {
  await pool?.shutdown();
  pool = undefined;
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, "SIGKILL"); // never leave an orphan behind, even when the test fails
    } catch {
      // gone, as it should be
    }
  }
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

function helperPool(mode: string): AcpWorkerPool {
  const registry = new AgentRegistry(
    parseAgentConfig(
      {
        agents: [
          {
            agentId: "helper",
            command: process.execPath,
            args: ["--import", tsxLoader, join(fixturesDir, "helper-agent.ts"), mode],
          },
        ],
      },
      join(fixturesDir, "acp-orchestrator.json"),
    ),
  );
  pool = new AcpWorkerPool({ registry, logger: memoryLogger(), graceMs: 300 });
  return pool;
}

describe("the agent watchdog", () => {
  it("kill -9 of the server mid-turn: within 5 s no agent and no helper remains", async () => {
    const cwd = await workspace();
    const host = spawn(process.execPath, ["--import", tsxLoader, join(fixturesDir, "kill-host.ts"), cwd], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    host.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    for (let i = 0; i < 1_200 && !out.includes("ready"); i++) await sleep(25);
    expect(out).toContain("ready");
    const running = await helperPids(cwd);
    expect(running.map(isAlive)).toEqual([true, true, true]);
    host.kill("SIGKILL");
    expect(await survivors(running)).toEqual([]);
  });

  it.each(["exit", "end"])(
    "an agent that started SIGTERM-proof helpers leaves none behind when its attempt ends (%s)",
    async (mode) => {
      const cwd = await workspace();
      const result = await helperPool(mode).runTask(taskRequest("helper", cwd), recorder().events);
      expect(result.outcome).toBe(mode === "end" ? "completed" : "failed");
      expect(await survivors(await helperPids(cwd), 1_000)).toEqual([]);
    },
  );

  it("a worker stuck in session/new fails after startTimeoutMs naming the stage, and is not charged", async () => {
    const registry = new AgentRegistry(
      parseAgentConfig(
        {
          agents: [
            {
              agentId: "stuck",
              command: process.execPath,
              args: ["--import", tsxLoader, join(fixturesDir, "auth-agent.ts")],
              env: { AUTH_AGENT_STUCK: "1" },
            },
          ],
        },
        join(fixturesDir, "acp-orchestrator.json"),
      ),
    );
    // 10 s: the agent runs through tsx, and on a loaded machine it reached no further than initialize within 4 s.
    pool = new AcpWorkerPool({ registry, logger: memoryLogger(), graceMs: 300, startTimeoutMs: 10_000 });
    const result = await pool.runTask(taskRequest("stuck", await workspace()), recorder().events);
    expect(result).toMatchObject({ outcome: "failed", prompted: false });
    expect(result.outcome === "failed" && result.error).toMatch(
      /^agent "stuck" did not start within 10000 ms \(stage session\/new did not finish\)/,
    );
  });

  it("reports a missing command as a spawn failure with its error code", async () => {
    const agent = AgentProcess.spawn({ command: join(fixturesDir, "no-such-agent"), args: [], cwd: tmpdir() });
    expect(await agent.spawnFailed).toMatchObject({ code: "ENOENT" });
    expect((await agent.exited).code).toBe(127);
  });
});
