/**
 * Dead owners do not block; frozen ones do (DESIGN.md guarantee 13, PROTOCOL.md section 5 "Ownership"; issue 10
 * findings 8 and 9, "Must show"). Real processes throughout: the built server on real stdio with its default owner id
 * (host, pid, process start time), a real SQLite state file, real worker subprocesses that log every execution to a
 * file outside the servers.
 *
 * - kill -9 of a server mid-run, then a new server on the same state: `product.list` shows the dead owner with
 *   `live: false`, and `product.resume` answers `executing` at once although the dead owner's 30 s lease has not
 *   expired; no task whose completion was stored runs again.
 * - A server that is only frozen (SIGSTOP) is respected until its lease expires (`-32012` with `{owner, expiresAt,
 *   live: true}`); once another server took the product over, the frozen one, woken with SIGCONT, tells its client
 *   `product.ownershipLost` and starts no worker again.
 */
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { Instance, Task, TaskState } from "../../protocol/common.js";
import { readExecutionLog as readLog } from "../fixtures/agents/execution-log.js";
import { startServer, tempDir, type Notification, type ServerHandle } from "../support/server-process.js";

const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const AGENT = fileURLToPath(new URL("../fixtures/agents/logging-agent.ts", import.meta.url));

const INSTANCES: Instance[] = [{ instanceId: "w1", agentId: "slow", role: "worker" }];
const TASKS: Task[] = ["t1", "t2", "t3", "t4", "t5"].map((taskId, i, all) => ({
  taskId,
  title: `Step ${taskId}`,
  description: `Do ${taskId}.`,
  instanceId: "w1",
  dependsOn: i === 0 ? [] : [all[i - 1] as string],
}));

interface RpcError {
  code: number;
  data?: { owner?: string; expiresAt?: string; live?: boolean };
}

/** A workspace whose registry has one slow logging agent (each turn takes `turnMs`). */
function workspaceWithSlowAgent(logPath: string, turnMs: number): string {
  const workspace = tempDir("acp-orch-owner-");
  const env = {
    LOGGING_AGENT_LOG: logPath,
    LOGGING_AGENT_MIN_MS: String(turnMs),
    LOGGING_AGENT_MAX_MS: String(turnMs),
  };
  const config = { agents: [{ agentId: "slow", command: process.execPath, args: ["--import", TSX, AGENT], env }] };
  writeFileSync(join(workspace, "acp-orchestrator.json"), JSON.stringify(config));
  return workspace;
}

const isCompletion = (n: Notification) => n.method === "product.taskStatus" && n.params.status === "completed";

/** Plans and confirms the chain on `s`; resolves once `done` tasks completed and the next one runs. */
async function runUntil(s: ServerHandle, workspace: string, done: number): Promise<string> {
  const { productId } = await s.request<{ productId: string }>("product.plan", { goal: "Chain", cwd: workspace });
  await s.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
  await s.request("product.confirm", { productId, instances: INSTANCES, tasks: TASKS });
  await s.waitFor((n) => isCompletion(n) && s.notifications.filter(isCompletion).length >= done, 60_000);
  await s.waitFor(
    (n) => n.method === "product.taskStatus" && n.params.status === "running" && n.params.taskId === `t${done + 1}`,
    60_000,
  );
  return productId;
}

describe("owner liveness over stdio (guarantee 13)", () => {
  it("a new server resumes at once after kill -9 of the owner, and no completed task runs again", async () => {
    const logPath = join(tempDir(), "executions.log");
    const workspace = workspaceWithSlowAgent(logPath, 300);
    const statePath = join(tempDir(), "state.db");
    // Default owner ids and the default 30 s lease: only liveness can explain a take-over within it.
    const s1 = await startServer({ statePath, cwd: workspace, args: ["--log-level", "warn"] });
    const productId = await runUntil(s1, workspace, 2);
    await s1.kill();

    const s2 = await startServer({ statePath, cwd: workspace, args: ["--log-level", "warn"] });
    const listed = await s2.request<{
      products: { productId: string; owner?: { ownerId: string; expiresAt: string; live: boolean } }[];
    }>("product.list", {});
    const owner = listed.products.find((p) => p.productId === productId)?.owner;
    expect(owner?.ownerId).toMatch(new RegExp(`:${s1.child.pid}:\\d+:[0-9a-f]{8}$`));
    expect(owner?.live).toBe(false);
    expect(Date.parse(owner?.expiresAt ?? "")).toBeGreaterThan(Date.now() + 10_000);

    const started = Date.now();
    const resumed = await s2.request("product.resume", { productId });
    const resumeMs = Date.now() - started;
    expect(resumed).toEqual({ productId, phase: "executing" });
    process.stderr.write(`[owner-liveness] product.resume after kill -9 answered in ${resumeMs} ms\n`);

    const completed = await s2.waitFor(
      (n) => n.method === "product.completed" && n.params.productId === productId,
      60_000,
    );
    expect(completed.params.phase).toBe("completed");
    const final = await s2.request<{ tasks: TaskState[]; owner?: unknown }>("product.status", { productId });
    expect(final.tasks.every((t) => t.status === "completed")).toBe(true);
    const log = readLog(logPath);
    for (const id of ["t1", "t2"]) {
      expect(
        log.filter((l) => l.event === "start" && l.taskId === id).map((l) => l.ppid),
        id,
      ).toEqual([s1.child.pid]);
    }
    for (const id of ["t4", "t5"]) {
      expect(
        log.filter((l) => l.event === "done" && l.taskId === id).map((l) => l.ppid),
        id,
      ).toEqual([s2.child.pid]);
    }
    await s2.close();
  }, 120_000);

  /**
   * SIGSTOPs `server` at a moment when it holds no SQLite write lock. A process frozen inside a commit keeps SQLite's
   * single writer lock, and every other process's write then fails "database is locked" (a property of SQLite, not of
   * leases: PostgreSQL's statement timeouts bound it); this test is about the lease, so it freezes between writes.
   */
  async function freezeBetweenWrites(server: ServerHandle, statePath: string): Promise<void> {
    const probe = new Database(statePath, { timeout: 0 });
    try {
      for (let i = 0; i < 50; i++) {
        server.child.kill("SIGSTOP");
        try {
          probe.prepare("BEGIN IMMEDIATE").run();
          probe.prepare("ROLLBACK").run();
          return;
        } catch {
          server.child.kill("SIGCONT");
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }
      throw new Error("the server held the SQLite write lock every time it was frozen");
    } finally {
      probe.close();
    }
  }

  it("a frozen owner is respected until its lease expires, then told product.ownershipLost when it wakes", async () => {
    const logPath = join(tempDir(), "executions.log");
    const workspace = workspaceWithSlowAgent(logPath, 1_500);
    const statePath = join(tempDir(), "state.db");
    const env = { ACP_ORCHESTRATOR_LEASE_TTL_MS: "3000" };
    const s1 = await startServer({ statePath, cwd: workspace, env, args: ["--log-level", "warn"] });
    const s2 = await startServer({ statePath, cwd: workspace, env, args: ["--log-level", "warn"] });
    const productId = await runUntil(s1, workspace, 1);

    await freezeBetweenWrites(s1, statePath);
    try {
      const refused = (await s2.request("product.resume", { productId }).catch((e: unknown) => e)) as RpcError;
      expect(refused.code).toBe(-32012);
      expect(refused.data).toMatchObject({ owner: expect.stringMatching(`:${s1.child.pid}:`), live: true });
      const expiresAt = Date.parse(refused.data?.expiresAt ?? "");
      expect(expiresAt).toBeGreaterThan(Date.now());

      // Once the frozen owner's lease ran out, the product is taken over.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now()) + 200));
      expect(await s2.request("product.resume", { productId })).toEqual({ productId, phase: "executing" });
    } finally {
      s1.child.kill("SIGCONT");
    }

    const lost = await s1.waitFor(
      (n) => n.method === "product.ownershipLost" && n.params.productId === productId,
      30_000,
    );
    expect(lost.params).toMatchObject({
      ownerId: expect.stringMatching(`:${s1.child.pid}:`),
      error: expect.any(String),
    });
    const completed = await s2.waitFor(
      (n) => n.method === "product.completed" && n.params.productId === productId,
      90_000,
    );
    expect(completed.params.phase).toBe("completed");
    // After it was told, the old owner started nothing more.
    const lostAt = Date.now();
    const afterLoss = readLog(logPath).filter(
      (l) => l.ppid === s1.child.pid && l.event === "start" && Date.parse(l.at) > lostAt,
    );
    expect(afterLoss).toEqual([]);
    await Promise.all([s1.close(), s2.close()]);
  }, 120_000);
});
