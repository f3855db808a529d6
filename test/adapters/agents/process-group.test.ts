/**
 * Agents started through a wrapper (`npx …`, `node --import tsx …`: the real agent is a grandchild) must not outlive a
 * cancel or a pool shutdown: the pool spawns each agent in its own process group and signals the whole group
 * (`killTree`). The wrapper here is a tiny node script that writes `wrapper.pid` and runs the wedged hanging agent
 * (ignores session/cancel, stdin EOF and SIGTERM) as its child; in mode `ignore-term` the wrapper ignores SIGTERM too.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AcpWorkerPool } from "../../../src/adapters/agents/acp-worker.js";
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

const GRACE_MS = 300;

const WRAPPER = `
import { spawn } from "node:child_process";
import { renameSync, writeFileSync } from "node:fs";
const [mode, command, ...args] = process.argv.slice(2);
if (mode === "ignore-term") process.on("SIGTERM", () => {});
writeFileSync("wrapper.pid.tmp", String(process.pid));
renameSync("wrapper.pid.tmp", "wrapper.pid");
const child = spawn(command, args, { stdio: "inherit" });
child.on("exit", (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)));
`;

let dir: string;
let pool: AcpWorkerPool | undefined;
const spawnedPids: number[] = [];

function makePool(): AcpWorkerPool {
  const wrapper = join(dir, "wrapper.mjs");
  const hanging = join(fixturesDir, "hanging-agent.ts");
  const wrapped = (agentId: string, mode: string) => ({
    agentId,
    command: process.execPath,
    args: [wrapper, mode, process.execPath, "--import", tsxLoader, hanging, "ignore-cancel"],
  });
  const registry = new AgentRegistry(
    parseAgentConfig(
      { agents: [wrapped("wrapped-wedged", "plain"), wrapped("wrapped-wedged-stubborn", "ignore-term")] },
      join(dir, "acp-orchestrator.json"),
    ),
  );
  pool = new AcpWorkerPool({ registry, logger: memoryLogger(), graceMs: GRACE_MS });
  return pool;
}

/** Both pids of a wrapped agent running in `cwd`: [wrapper, real agent]. */
async function pidsIn(cwd: string): Promise<[number, number]> {
  const pids: [number, number] = [await pidFile("wrapper", cwd), await pidFile("hanging-agent", cwd)];
  spawnedPids.push(...pids);
  return pids;
}

/** Liveness of `pids`, after giving a just-sent SIGKILL up to 1 s to land. */
async function aliveAfterSettling(pids: number[]): Promise<boolean[]> {
  for (let i = 0; i < 40 && pids.some(isAlive); i++) await sleep(25);
  return pids.map(isAlive);
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "acp-process-group-"));
  await writeFile(join(dir, "wrapper.mjs"), WRAPPER);
});
afterEach(async () => {
  await pool?.shutdown();
  pool = undefined;
  for (const pid of spawnedPids.splice(0)) {
    try {
      process.kill(pid, "SIGKILL"); // never leave an orphan behind, even when the test fails
    } catch {
      // gone, as it should be
    }
  }
  await rm(dir, { recursive: true, force: true });
});

describe("AcpWorkerPool with agents started through a wrapper", () => {
  it.each([
    ["a wrapper that dies on SIGTERM", "wrapped-wedged"],
    ["a wrapper that ignores SIGTERM", "wrapped-wedged-stubborn"],
  ])("a cancelled task leaves neither the wrapper nor the real agent alive (%s)", async (_label, agentId) => {
    const cwd = await mkdtemp(join(dir, "ws-"));
    const controller = new AbortController();
    const running = makePool().runTask(taskRequest(agentId, cwd, { signal: controller.signal }), recorder().events);
    const pids = await pidsIn(cwd);
    expect(pids.map(isAlive)).toEqual([true, true]);
    await sleep(100);
    controller.abort();
    expect(await running).toEqual({ outcome: "cancelled" });
    expect(await aliveAfterSettling(pids)).toEqual([false, false]);
  });

  it("shutdown() leaves neither the wrappers nor the real agents alive", async () => {
    const p = makePool();
    const [a, b] = [await mkdtemp(join(dir, "ws-")), await mkdtemp(join(dir, "ws-"))];
    const runA = p.runTask(taskRequest("wrapped-wedged", a), recorder().events);
    const runB = p.runTask(taskRequest("wrapped-wedged-stubborn", b), recorder().events);
    const pids = [...(await pidsIn(a)), ...(await pidsIn(b))];
    expect(pids.map(isAlive)).toEqual([true, true, true, true]);
    await p.shutdown();
    expect(await runA).toMatchObject({ outcome: "cancelled" });
    expect(await runB).toMatchObject({ outcome: "cancelled" });
    expect(await aliveAfterSettling(pids)).toEqual([false, false, false, false]);
  });
});
