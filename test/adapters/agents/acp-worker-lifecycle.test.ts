import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AcpWorkerPool } from "../../../src/adapters/agents/acp-worker.js";
import type { AcpWorkerPoolOptions } from "../../../src/adapters/agents/acp-worker.js";
import {
  fixtureRegistry,
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
const dirs: string[] = [];
let pool: AcpWorkerPool | undefined;

async function workspace(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "acp-worker-life-"));
  dirs.push(dir);
  return dir;
}

function makePool(options: Partial<AcpWorkerPoolOptions> = {}): AcpWorkerPool {
  pool = new AcpWorkerPool({ registry: fixtureRegistry(), logger: memoryLogger(), graceMs: GRACE_MS, ...options });
  return pool;
}

let cwd: string;
beforeEach(async () => {
  cwd = await workspace();
});
afterEach(async () => {
  await pool?.shutdown();
  pool = undefined;
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

describe("AcpWorkerPool cancellation, timeout and shutdown", () => {
  it("cancels a hanging agent on abort within the grace period, and the process is gone", async () => {
    const controller = new AbortController();
    const logger = memoryLogger();
    const running = makePool({ logger }).runTask(
      taskRequest("hanging", cwd, { signal: controller.signal }),
      recorder().events,
    );
    const pid = await pidFile("hanging-agent", cwd);
    expect(isAlive(pid)).toBe(true);
    await sleep(100);
    const t0 = Date.now();
    controller.abort();
    expect(await running).toEqual({ outcome: "cancelled" });
    expect(Date.now() - t0).toBeLessThan(GRACE_MS + 1_000);
    expect(() => process.kill(pid, 0)).toThrow();
    // It answered session/cancel and exited on stdin EOF: no signal was needed.
    expect(logger.entries.map((e) => e.msg)).not.toContain("agent still running; sending SIGTERM");
  });

  it("kills an agent that ignores session/cancel and SIGTERM: SIGKILL after one grace period", async () => {
    const controller = new AbortController();
    const running = makePool().runTask(taskRequest("wedged", cwd, { signal: controller.signal }), recorder().events);
    const pid = await pidFile("hanging-agent", cwd);
    await sleep(100);
    const t0 = Date.now();
    controller.abort();
    expect(await running).toEqual({ outcome: "cancelled" });
    const elapsed = Date.now() - t0;
    // The grace is for the cancelled prompt to answer; an agent that did not gets SIGKILL at once.
    expect(elapsed).toBeGreaterThanOrEqual(GRACE_MS - 20);
    expect(elapsed).toBeLessThan(GRACE_MS + 1_500);
    expect(() => process.kill(pid, 0)).toThrow();
  });

  it("fails with 'timed out after N ms' when a task runs past taskTimeoutMs", async () => {
    const result = await makePool({ taskTimeoutMs: 800 }).runTask(taskRequest("hanging", cwd), recorder().events);
    expect(result.outcome === "failed" && result.error).toMatch(/^timed out after 800 ms — stderr tail: /);
  });

  it("shutdown stops every running task and resolves only once every child has exited", async () => {
    const p = makePool();
    const [dirA, dirB] = [await workspace(), await workspace()];
    const a = p.runTask(taskRequest("hanging", dirA), recorder().events);
    const b = p.runTask(taskRequest("wedged", dirB), recorder().events);
    const pids = [await pidFile("hanging-agent", dirA), await pidFile("hanging-agent", dirB)];
    expect(pids.map(isAlive)).toEqual([true, true]);
    expect(p.runningCount).toBe(2);
    await p.shutdown();
    expect(pids.map(isAlive)).toEqual([false, false]);
    expect(await a).toEqual({ outcome: "cancelled" });
    expect(await b).toEqual({ outcome: "cancelled" });
    expect(p.runningCount).toBe(0);
    expect(await p.runTask(taskRequest("builtin-worker", cwd), recorder().events)).toEqual({ outcome: "cancelled" });
  });

  it("SIGKILLs every worker still alive when the server process exits unexpectedly", async () => {
    const host = spawn(process.execPath, ["--import", tsxLoader, join(fixturesDir, "exit-host.ts"), cwd], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    host.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    const code = await new Promise<number | null>((resolve) => host.once("exit", resolve));
    expect(code).toBe(0);
    const pid = Number(out.trim());
    expect(pid).toBeGreaterThan(0);
    for (let i = 0; i < 40 && isAlive(pid); i++) await sleep(25);
    expect(isAlive(pid)).toBe(false);
  });
});
