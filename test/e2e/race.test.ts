/**
 * Two server processes on one SQLite file race to resume the same product: exactly one drives it (issue 4, "Must
 * show"; DESIGN.md guarantee 6). Real processes throughout: the built server on real stdio, a real SQLite state file,
 * real worker subprocesses (test/fixtures/agents/logging-agent.ts, run through tsx), which log every execution — with
 * the pid of the server that started them — to a file outside the servers.
 *
 * Server 1 runs a six-task product on slow workers and is killed with SIGKILL mid-run (its lease stays in the store
 * until it expires: the servers run with a 2.4 s lease). Servers 2 and 3 start on the same state file; once the dead
 * owner's lease has expired, both are sent `product.resume` at the same moment. Exactly one answers `{phase:
 * "executing"}`, the other `-32012` naming the winner as owner; the winner completes the product; no task whose
 * completion was stored before the kill runs again, the loser starts no worker at all, and no task completes twice.
 */
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import type { Instance, Task, TaskState } from "../../protocol/common.js";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import { LeaseRecord } from "../../src/core/product/records.js";
import { ProductStore } from "../../src/core/product/store.js";
import { readExecutionLog as readLog } from "../fixtures/agents/execution-log.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";

const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const AGENT = fileURLToPath(new URL("../fixtures/agents/logging-agent.ts", import.meta.url));
const LEASE_TTL_MS = 2_400;

const INSTANCES: Instance[] = [
  { instanceId: "w1", agentId: "slow", role: "worker" },
  { instanceId: "w2", agentId: "slow", role: "worker" },
];
const task = (taskId: string, instanceId: string, dependsOn: string[] = []): Task => ({
  taskId,
  title: `Step ${taskId}`,
  description: `Do ${taskId}.`,
  instanceId,
  dependsOn,
});
/** Two independent chains that join, then a tail: several tasks are running at any moment of the first half. */
const TASKS: Task[] = [
  task("t1", "w1"),
  task("t2", "w2"),
  task("t3", "w1", ["t1"]),
  task("t4", "w2", ["t2"]),
  task("t5", "w1", ["t3", "t4"]),
  task("t6", "w2", ["t5"]),
];

interface RpcError {
  code: number;
  message: string;
  data?: { owner?: string };
}

function workspaceWithSlowAgent(logPath: string): string {
  const workspace = tempDir("acp-orch-race-");
  const config = {
    agents: [
      {
        agentId: "slow",
        command: process.execPath,
        args: ["--import", TSX, AGENT],
        env: { LOGGING_AGENT_LOG: logPath, LOGGING_AGENT_MIN_MS: "400", LOGGING_AGENT_MAX_MS: "400" },
      },
    ],
    maxParallelTasks: 2,
  };
  writeFileSync(join(workspace, "acp-orchestrator.json"), JSON.stringify(config));
  return workspace;
}

/** What the state file holds now (read in this process, as a third party would): task states and the lease. */
async function stored(statePath: string, productId: string) {
  const authority = SqliteAuthority.open(statePath);
  try {
    const store = new ProductStore(authority, 20);
    const { model } = await store.load(productId);
    const rec = await authority.get(model.state.projectId, "lease", productId);
    const lease = rec ? LeaseRecord.parse(rec.value) : null;
    return { tasks: model.state.tasks, lease };
  } finally {
    await authority.close();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("two servers on one SQLite file", () => {
  it("race to resume a product whose owner was killed: exactly one drives it, nothing runs twice", async () => {
    const logPath = join(tempDir(), "executions.log");
    const workspace = workspaceWithSlowAgent(logPath);
    const statePath = join(tempDir(), "state.db");
    const env = (owner: string) => ({
      ACP_ORCHESTRATOR_LEASE_TTL_MS: String(LEASE_TTL_MS),
      ACP_ORCHESTRATOR_OWNER_ID: owner,
    });

    // Three servers on one state file. Server 1 plans, confirms the six-task plan on the slow agent, and dies with
    // two tasks done.
    const [s1, s2, s3] = (await Promise.all(
      ["server-1", "server-2", "server-3"].map((owner) =>
        startServer({ statePath, cwd: workspace, env: env(owner), args: ["--log-level", "warn"] }),
      ),
    )) as [ServerHandle, ServerHandle, ServerHandle];
    const { productId } = await s1.request<{ productId: string }>("product.plan", { goal: "Race", cwd: workspace });
    await s1.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    await s1.request("product.confirm", { productId, instances: INSTANCES, tasks: TASKS });
    const doneIn1 = (n: { method: string; params: Record<string, unknown> }) =>
      n.method === "product.taskStatus" && n.params.status === "completed";
    await s1.waitFor((n) => doneIn1(n) && s1.notifications.filter(doneIn1).length >= 2, 30_000);
    await s1.waitFor(
      (n) =>
        n.method === "product.taskStatus" &&
        n.params.status === "running" &&
        n.params.taskId !== "t1" &&
        n.params.taskId !== "t2",
    );
    await s1.kill();
    // The dead owner's lease is renewed every 800 ms and lives 2.4 s: it is still live right after the kill, and
    // both other servers are refused with its owner until it expires.
    const early = (await Promise.all(
      [s2, s3].map((s) =>
        s.request("product.resume", { productId }).then(
          (r) => r,
          (e: unknown) => e,
        ),
      ),
    )) as RpcError[];
    // An owner id of another scheme proves nothing about its process (guarantee 13): respected, live, until it expires.
    expect(early.map((e) => [e.code, e.data])).toEqual([
      [-32012, { owner: "server-1", expiresAt: expect.any(String), live: true }],
      [-32012, { owner: "server-1", expiresAt: expect.any(String), live: true }],
    ]);
    const atKill = await stored(statePath, productId);
    const completedAtKill = atKill.tasks.filter((t) => t.status === "completed").map((t) => t.taskId);
    expect(completedAtKill.length).toBeGreaterThanOrEqual(2);
    expect(atKill.tasks.some((t) => t.status === "running")).toBe(true);
    expect(atKill.lease?.owner).toBe("server-1");

    await sleep(Math.max(0, Date.parse(atKill.lease?.expiresAt ?? "") - Date.now()) + 100);

    const answers = await Promise.all(
      [s2, s3].map((s) =>
        s.request("product.resume", { productId }).then(
          (r) => ({ ok: r }),
          (e: unknown) => ({ err: e as RpcError }),
        ),
      ),
    );
    const wonAt = answers.findIndex((a) => "ok" in a);
    const winner = wonAt === 0 ? s2 : s3;
    const loser = wonAt === 0 ? s3 : s2;
    const lost = answers[1 - wonAt] as { err?: RpcError };
    expect(answers.filter((a) => "ok" in a)).toEqual([{ ok: { productId, phase: "executing" } }]);
    expect(lost.err?.code).toBe(-32012);
    expect(lost.err?.data).toMatchObject({ owner: wonAt === 0 ? "server-2" : "server-3", live: true });

    // While the winner drives, the loser is refused every time, and it says who drives.
    const again = (await loser.request("product.resume", { productId }).catch((e: unknown) => e)) as RpcError;
    expect(again.code).toBe(-32012);
    // Issue 28 (true texts): a product whose owner is live and renewing has no recovery block; the owner says who.
    const seen = await loser.request<{ recovery?: unknown; owner?: { ownerId: string; live: boolean } }>(
      "product.status",
      { productId },
    );
    expect(seen.recovery).toBeUndefined();
    expect(seen.owner).toMatchObject({ ownerId: wonAt === 0 ? "server-2" : "server-3", live: true });

    const completed = await winner.waitFor(
      (n) => n.method === "product.completed" && n.params.productId === productId,
      30_000,
    );
    expect(completed.params.phase).toBe("completed");
    const listed = await loser.request<{ products: { productId: string; phase: string }[] }>("product.list", {});
    expect(listed.products.find((p) => p.productId === productId)?.phase).toBe("completed");
    const final = await loser.request<{ phase: string; tasks: TaskState[] }>("product.status", { productId });
    expect(final.phase).toBe("completed");
    expect(final.tasks.every((t) => t.status === "completed")).toBe(true);

    const log = readLog(logPath);
    const s1Pid = s1.child.pid;
    const winnerPid = winner.child.pid;
    const loserPid = loser.child.pid;
    // The loser never started a worker; after the kill only the winner did.
    expect(log.filter((l) => l.ppid === loserPid)).toEqual([]);
    expect(log.every((l) => l.ppid === s1Pid || l.ppid === winnerPid)).toBe(true);
    // Work stored as completed before the kill never ran again.
    for (const id of completedAtKill) {
      expect(
        log.filter((l) => l.event === "start" && l.taskId === id).map((l) => l.ppid),
        id,
      ).toEqual([s1Pid]);
    }
    // No task completed twice under the winner, and each task's final attempt is the winner's only run of it.
    for (const t of final.tasks) {
      const runs = log.filter((l) => l.taskId === t.taskId && l.ppid === winnerPid);
      expect(runs.filter((l) => l.event === "done").length, t.taskId).toBe(completedAtKill.includes(t.taskId) ? 0 : 1);
      expect(runs.filter((l) => l.event === "start").length, t.taskId).toBe(completedAtKill.includes(t.taskId) ? 0 : 1);
    }
    // A task interrupted by the kill was retried with its attempt counted.
    const interrupted = atKill.tasks.filter((t) => t.status === "running").map((t) => t.taskId);
    for (const id of interrupted) expect(final.tasks.find((t) => t.taskId === id)?.attempts, id).toBe(2);

    expect((await stored(statePath, productId)).lease).toBeNull();
    await Promise.all([s2.close(), s3.close()]);
  }, 60_000);
});
