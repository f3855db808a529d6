/**
 * Issue 10 findings 1, 4 and 8 over real stdio: the built server, a real SQLite state file, real worker subprocesses
 * (the logging agent, which records every execution in a file outside the servers: the counter of worker runs).
 *
 * - Finding 1 (guarantee 15): a stored plan that parses but breaks the DAG rules (a dependency on an unknown task, two
 *   tasks with one id, a cycle) or a task event for a task the plan does not have. Before the fix `product.resume` of
 *   the first two threw inside the scheduler's start, outside any handler, and the process exited 1 taking every
 *   product with it; the cycle stayed `executing` forever; the intruding task ran. Now each is refused (`-32010`
 *   with the cause, `recovery` in status), no worker runs for it, the server stays up and another product resumes
 *   and completes on the same server.
 * - Finding 4 (guarantee 2): the state file unlinked under a running server. Before the fix writes kept "succeeding"
 *   into the unlinked file and a restart found nothing. Now the running product pauses with
 *   `product.persistenceError` naming the deleted file, every later write is refused with `-32013`, and a restart
 *   shows no product a write was acknowledged for after the unlink.
 * - Finding 8 (guarantee 13): repeated SIGTERM/SIGINT during shutdown. Before the fix a second signal killed the
 *   server before it released its leases (the next server then waited for the lease). Now the extra signals are
 *   ignored until the leases are released: the process exits 0, the running task is stored `pending` with its
 *   interruption note, no lease is left in the file, and a new server resumes it without re-running completed work.
 * - Finding 10 (PROTOCOL.md section 3): `-32013` on a failed read said "failed to persist the change". Now its data
 *   says `operation: "read"` and its message says the authority failed to read.
 */
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { Instance, Task, TaskState } from "../../protocol/common.js";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import { DEFAULT_PRODUCT_OPTIONS } from "../../src/core/product/context.js";
import type { ProductEvent } from "../../src/core/product/records.js";
import { ProductStore } from "../../src/core/product/store.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { eventually } from "../support/eventually.js";
import { isJsonRpcLine, startServer, tempDir, type Notification } from "../support/server-process.js";
import { TestHost, startHostedServer } from "../support/test-host.js";

const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const AGENT = fileURLToPath(new URL("../fixtures/agents/logging-agent.ts", import.meta.url));
const PROJECT = "findings";

/** A workspace whose registry has one logging agent `logger` (each turn takes `turnMs`). */
function workspaceWithAgent(logPath: string, turnMs: number, extraEnv: Record<string, string> = {}): string {
  const workspace = tempDir("acp-orch-findings-");
  const env = {
    LOGGING_AGENT_LOG: logPath,
    LOGGING_AGENT_MIN_MS: String(turnMs),
    LOGGING_AGENT_MAX_MS: String(turnMs),
    ...extraEnv,
  };
  const config = { agents: [{ agentId: "logger", command: process.execPath, args: ["--import", TSX, AGENT], env }] };
  writeFileSync(join(workspace, "acp-orchestrator.json"), JSON.stringify(config));
  return workspace;
}

const INSTANCES: Instance[] = [{ instanceId: "w1", agentId: "logger", role: "worker" }];
const chain = (ids: string[]): Task[] =>
  ids.map((taskId, i) => ({
    taskId,
    title: `Step ${taskId}`,
    description: `Do ${taskId}.`,
    instanceId: "w1",
    dependsOn: i === 0 ? [] : [ids[i - 1] as string],
  }));

/**
 * The events of a product confirmed by a server that then died (phase `executing`, no lease): the plan as given,
 * then `extra` events (e.g. a task event).
 */
function confirmedProduct(productId: string, cwd: string, tasks: Task[], extra: ProductEvent[] = []): ProductEvent[] {
  const at = new Date().toISOString();
  const plan = { productId, version: 1, name: productId, summary: "Seeded", instances: INSTANCES, tasks };
  return [
    { v: 1, at, type: "created", productId, projectId: PROJECT, name: productId, goal: `Goal of ${productId}`, cwd },
    { v: 1, at, type: "dialogue", role: "user", text: `Goal of ${productId}` },
    { v: 1, at, type: "planProposed", plan },
    { v: 1, at, type: "confirmed", plan },
    ...extra,
  ];
}

interface RpcError {
  code: number;
  message: string;
  data?: Record<string, unknown>;
}

async function refusal(p: Promise<unknown>): Promise<RpcError> {
  try {
    await p;
  } catch (err) {
    return err as RpcError;
  }
  throw new Error("the request was expected to be refused");
}

const completedOf = (productId: string) => (n: Notification) =>
  n.method === "product.completed" && n.params.productId === productId;

describe("finding 1 over stdio: a stored state that breaks the DAG rules (guarantee 15)", () => {
  it("refuses each bad product with its cause, runs no worker for it, stays up, and another product completes", async () => {
    const logPath = join(tempDir(), "executions.log");
    const workspace = workspaceWithAgent(logPath, 20);
    const statePath = join(tempDir(), "state.db");
    const at = new Date().toISOString();
    const bad: [string, Task[], ProductEvent[], RegExp][] = [
      [
        "prd_unknown_dep",
        chain(["a", "b"]).map((t) => (t.taskId === "b" ? { ...t, dependsOn: ["ghost"] } : t)),
        [],
        /unknown task ghost/,
      ],
      [
        "prd_duplicate_id",
        [...chain(["a", "b"]), { ...chain(["b"])[0]!, dependsOn: ["a"] }],
        [],
        /Task id b is used twice/,
      ],
      [
        "prd_cycle",
        chain(["a", "b", "c"]).map((t) => (t.taskId === "a" ? { ...t, dependsOn: ["c"] } : t)),
        [],
        /cycle/,
      ],
      [
        "prd_intruder",
        chain(["a", "b"]),
        [
          {
            v: 1,
            at,
            type: "task",
            task: {
              taskId: "intruder",
              title: "Intruder",
              description: "Not planned.",
              instanceId: "w1",
              dependsOn: [],
              status: "pending",
              attempts: 0,
            },
          },
        ],
        /task intruder, which the plan does not have/,
      ],
    ];
    const authority = SqliteAuthority.open(statePath);
    const store = new ProductStore(authority, DEFAULT_PRODUCT_OPTIONS.checkpointHistory);
    for (const [productId, tasks, extra] of bad)
      await store.create(PROJECT, productId, confirmedProduct(productId, workspace, tasks, extra));
    await store.create(PROJECT, "prd_healthy", confirmedProduct("prd_healthy", workspace, chain(["h1", "h2"])));
    await authority.close();

    const s = await startServer({ statePath, cwd: workspace, args: ["--log-level", "warn"] });
    for (const [productId, , , cause] of bad) {
      const error = await refusal(s.request("product.resume", { productId }));
      expect({ code: error.code, message: error.message }, productId).toEqual({
        code: -32010,
        message: expect.stringMatching(cause),
      });
      const status = await s.request<{ phase: string; recovery?: { cause: string; resumable: boolean } }>(
        "product.status",
        { productId },
      );
      expect(status.recovery, productId).toMatchObject({ cause: expect.stringMatching(cause), resumable: false });
    }
    // The server is still up and serves another product of the same file to completion.
    expect(s.child.exitCode).toBeNull();
    expect(await s.request("product.resume", { productId: "prd_healthy" })).toEqual({
      productId: "prd_healthy",
      phase: "executing",
    });
    const done = await s.waitFor(completedOf("prd_healthy"), 60_000);
    expect(done.params.phase).toBe("completed");
    // Worker runs: the healthy product's two tasks, nothing of the bad ones (the intruder above all).
    const runs = readExecutionLog(logPath).filter((l) => l.event === "start");
    expect(runs.map((l) => `${l.productId}/${l.taskId}`).sort()).toEqual(["prd_healthy/h1", "prd_healthy/h2"]);
    // The bad products are still refused after all that, and still listed (nothing hidden).
    for (const [productId] of bad)
      expect((await refusal(s.request("product.resume", { productId }))).code).toBe(-32010);
    const listed = await s.request<{ products: { productId: string }[]; dropped: number }>("product.list", {});
    expect(listed.products.map((p) => p.productId).sort()).toEqual([...bad.map(([id]) => id), "prd_healthy"].sort());
    expect(await s.close()).toBe(0);
    for (const l of s.stdoutLines) expect(isJsonRpcLine(l), l).toBe(true);
  }, 120_000);
});

describe("finding 4 over stdio: the state file unlinked under a running server (guarantee 2)", () => {
  it("pauses the running product with product.persistenceError, refuses later writes, and a restart lacks nothing acknowledged", async () => {
    const logPath = join(tempDir(), "executions.log");
    const workspace = workspaceWithAgent(logPath, 400);
    const statePath = join(tempDir(), "state.db");
    const s1 = await startServer({ statePath, cwd: workspace, args: ["--log-level", "warn"] });
    const { productId } = await s1.request<{ productId: string }>("product.plan", { goal: "Chain", cwd: workspace });
    await s1.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    await s1.request("product.confirm", { productId, instances: INSTANCES, tasks: chain(["t1", "t2", "t3", "t4"]) });
    await s1.waitFor(
      (n) => n.method === "product.taskStatus" && n.params.status === "running" && n.params.taskId === "t1",
    );

    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${statePath}${suffix}`, { force: true });
    // The next write (t1's completion, or the lease's heartbeat) fails: the product pauses and the client is told.
    const lost = await s1.waitFor(
      (n) => n.method === "product.persistenceError" && n.params.productId === productId,
      60_000,
    );
    expect(String(lost.params.error)).toMatch(/deleted while the server was running/);
    const status = await s1.request<{ phase: string; recovery?: { cause: string } }>("product.status", { productId });
    expect(status.phase).toBe("paused");
    expect(status.recovery?.cause).toMatch(/deleted while the server was running/);
    // Every later write is refused, with -32013 on a write: nothing is acknowledged that would be lost.
    const planRefused = await refusal(s1.request("product.plan", { goal: "After the unlink", cwd: workspace }));
    expect({ code: planRefused.code, operation: planRefused.data?.operation }).toEqual({
      code: -32013,
      operation: "write",
    });
    const resumeRefused = await refusal(s1.request("product.resume", { productId }));
    expect(resumeRefused.code).toBe(-32013);
    // No task started after the unlink: t1 was running before it (its agent may or may not have logged its start by
    // the time the first failed write, t1's result, the lease's heartbeat or the progress header, stopped it).
    const started = readExecutionLog(logPath)
      .filter((l) => l.event === "start")
      .map((l) => l.taskId);
    expect(started.filter((taskId) => taskId !== "t1")).toEqual([]);
    expect(await s1.close()).toBe(0);

    // The restart opens what is at the path: a fresh file, holding no product a write was acknowledged for after the
    // unlink (there was none to hold), and the server works on it.
    const s2 = await startServer({ statePath, cwd: workspace, args: ["--log-level", "warn"] });
    const listed = await s2.request<{ products: unknown[]; dropped: number }>("product.list", {});
    expect(listed).toEqual({ products: [], dropped: 0 });
    const fresh = await s2.request<{ productId: string }>("product.plan", { goal: "On the new file", cwd: workspace });
    await s2.waitFor((n) => n.method === "product.planReady" && n.params.productId === fresh.productId);
    expect(existsSync(statePath)).toBe(true);
    expect(await s2.close()).toBe(0);
  }, 120_000);
});

describe("finding 8 over stdio: repeated signals during shutdown (guarantee 13)", () => {
  it("ignores further SIGTERM/SIGINT until the leases are released; exits 0 with the running task stored pending", async () => {
    const logPath = join(tempDir(), "executions.log");
    // The agent takes 1 s to stop (cancel, stdin closed, SIGTERM), so the shutdown outlasts the test's next signals
    // whatever the load (a shutdown done before the next signal was handled left nothing to ignore: it failed 1 in 5
    // at load 10, when the signals came while the agent was still starting and was killed at once).
    const workspace = workspaceWithAgent(logPath, 30_000, { LOGGING_AGENT_STOP_MS: "1000" });
    const statePath = join(tempDir(), "state.db");
    const s1 = await startServer({ statePath, cwd: workspace, args: ["--log-level", "info"] });
    const { productId } = await s1.request<{ productId: string }>("product.plan", { goal: "Chain", cwd: workspace });
    await s1.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    await s1.request("product.confirm", { productId, instances: INSTANCES, tasks: chain(["t1", "t2"]) });
    await s1.waitFor(
      (n) => n.method === "product.taskStatus" && n.params.status === "running" && n.params.taskId === "t1",
    );
    // The agent has the prompt (not still starting up: a worker stopped while it initializes is killed at once).
    const started = () => readExecutionLog(logPath).some((l) => l.event === "start" && l.taskId === "t1");
    await eventually(started, 60_000, "the agent to start t1");

    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      s1.child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    s1.child.kill("SIGTERM");
    // Keep signalling (SIGTERM and SIGINT, every 5 ms) until the process is gone.
    let sent = 1;
    const hammer = setInterval(() => {
      if (s1.child.exitCode !== null || s1.child.signalCode !== null) return;
      s1.child.kill(sent % 2 === 0 ? "SIGTERM" : "SIGINT");
      sent += 1;
    }, 5);
    const exit = await exited;
    clearInterval(hammer);
    expect(exit).toEqual({ code: 0, signal: null });

    // What the file says: no lease left, the running task back to pending with its interruption note.
    const db = new Database(statePath, { readonly: true });
    try {
      expect(db.prepare("SELECT COUNT(*) FROM records WHERE kind = 'lease'").pluck().get()).toBe(0);
    } finally {
      db.close();
    }
    const s2 = await startServer({ statePath, cwd: workspace, args: ["--log-level", "warn"] });
    const status = await s2.request<{
      phase: string;
      tasks: (TaskState & { interruption?: string })[];
      owner?: unknown;
    }>("product.status", { productId });
    expect({ phase: status.phase, owner: status.owner, t1: status.tasks[0]?.status }).toEqual({
      phase: "executing",
      owner: undefined,
      t1: "pending",
    });
    expect(await s2.close()).toBe(0);
    expect(s1.stderr()).toMatch(/already stopping: the signal is ignored until the product leases are released/);
    process.stderr.write(`[durability-findings] ${sent} signals sent during shutdown; exit code 0\n`);
  }, 120_000);
});

describe("finding 10 over stdio: -32013 on a read says it was a read", () => {
  it("answers a product.status whose host read fails with operation read and a message about a read", async () => {
    const host = new TestHost();
    const server = await startHostedServer(host, { args: ["--log-level", "warn"] });
    host.failNext("get", { code: -32603, message: "The host's store is offline" });
    let error: { code: number; message: string; data?: Record<string, unknown> } | undefined;
    try {
      await server.request("product.status", { productId: "prd_anything" });
    } catch (err) {
      error = err as typeof error;
    }
    expect({ code: error?.code, operation: error?.data?.operation, message: error?.message }).toEqual({
      code: -32013,
      operation: "read",
      message: expect.stringMatching(/failed to read .*offline/),
    });
    expect(error?.message).not.toMatch(/persist|paused/);
    expect(await server.close()).toBe(0);
  }, 60_000);
});
