/**
 * Durability guarantees over real stdio (issue 4 item 5), against the built server as a subprocess: a failed lease
 * renewal at the host is a persistence failure (guarantees 2 and 6); a tampered or future-version state file is read
 * fail-closed, per record, without writing (guarantees 3 and 4); and a run killed with SIGKILL whose workspace and
 * agent definitions changed before the restart explains the drift and the remedy (guarantee 10, drift detection),
 * then completes on an explicit resume without re-running finished work (guarantee 7).
 *
 * Slow work runs on the logging fixture agent (test/fixtures/agents/logging-agent.ts through tsx), which logs every
 * execution, with the pid of the server that started it, to a file outside the server.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import type { Instance, Task, TaskState } from "../../protocol/common.js";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import { DEFAULT_PRODUCT_OPTIONS } from "../../src/core/product/context.js";
import { productStream, type ProductEvent } from "../../src/core/product/records.js";
import { ProductStore } from "../../src/core/product/store.js";
import { readExecutionLog as readLog } from "../fixtures/agents/execution-log.js";
import { isJsonRpcLine, startServer, tempDir } from "../support/server-process.js";
import { TestHost, startHostedServer, type HostCall } from "../support/test-host.js";

const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const AGENT = fileURLToPath(new URL("../fixtures/agents/logging-agent.ts", import.meta.url));

const SLOW: Instance[] = [{ instanceId: "w1", agentId: "slow", role: "worker" }];
const chain = (...ids: string[]): Task[] =>
  ids.map((taskId, i) => ({
    taskId,
    title: `Step ${taskId}`,
    description: `Do ${taskId}.`,
    instanceId: "w1",
    dependsOn: i === 0 ? [] : [ids[i - 1] ?? ""],
  }));

interface Status {
  phase: string;
  tasks: TaskState[];
  dropped: number;
  recovery?: {
    cause: string;
    resumable: boolean;
    remediation: string;
    needsExplicitResume?: boolean;
    drift?: { what: string; from: string | null; to: string | null }[];
  };
}

/** A workspace whose `acp-orchestrator.json` registers the slow logging agent (`seed` changes its definition). */
function slowWorkspace(logPath: string, seed = "one", workspace = tempDir("acp-orch-guarantees-")): string {
  const config = {
    agents: [
      {
        agentId: "slow",
        command: process.execPath,
        args: ["--import", TSX, AGENT],
        env: {
          LOGGING_AGENT_LOG: logPath,
          LOGGING_AGENT_SEED: seed,
          LOGGING_AGENT_MIN_MS: "250",
          LOGGING_AGENT_MAX_MS: "250",
        },
      },
    ],
  };
  writeFileSync(join(workspace, "acp-orchestrator.json"), JSON.stringify(config));
  return workspace;
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync(
    "git",
    ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", ...args],
    {
      cwd,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    },
  ).trim();
}

describe("guarantees 2 and 6 over stdio: a lease renewal the host fails", () => {
  it("pauses the product, sends product.persistenceError, and resumes once the host is back", async () => {
    const logPath = join(tempDir(), "executions.log");
    const workspace = slowWorkspace(logPath);
    const host = new TestHost();
    const server = await startHostedServer(host, {
      cwd: workspace,
      env: { ACP_ORCHESTRATOR_LEASE_TTL_MS: "600" },
      args: ["--log-level", "warn"],
    });
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Lease",
      cwd: workspace,
    });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    const renewal = (call: HostCall): boolean =>
      call.op === "put" && call.params.kind === "lease" && call.params.expectedRevision !== null;
    host.failNext(renewal, { code: -32603, message: "The host's disk is full" });
    const failure = server.waitFor((n) => n.method === "product.persistenceError" && n.params.productId === productId);
    await server.request("product.confirm", { productId, instances: SLOW, tasks: chain("t1", "t2") });

    expect((await failure).params).toEqual({
      productId,
      projectId: expect.any(String),
      error: expect.stringContaining("disk is full"),
    });
    const paused = await server.request<Status>("product.status", { productId });
    expect(paused.phase).toBe("paused");
    expect(paused.recovery).toMatchObject({
      cause: expect.stringContaining("The run-state authority failed a write"),
      resumable: true,
      remediation: expect.stringContaining("product.resume"),
    });
    expect(server.notifications.some((n) => n.method === "product.completed")).toBe(false);

    const done = server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 30_000);
    expect(await server.request("product.resume", { productId })).toEqual({ productId, phase: "executing" });
    expect((await done).params.phase).toBe("completed");
    expect(await server.close()).toBe(0);
    for (const line of server.stdoutLines) expect(isJsonRpcLine(line), line).toBe(true);
  }, 90_000);
});

describe("guarantees 3 and 4 over stdio: a tampered state file", () => {
  it("skips and counts every bad record, writes nothing while inspecting, and never executes a dropped task", async () => {
    const workspace = tempDir("acp-orch-tampered-");
    const statePath = join(tempDir(), "state.db");
    const projectId = "tampered";
    const productId = "prd_tampered";
    const at = new Date().toISOString();
    const plan = {
      productId,
      version: 1,
      name: "Notes",
      summary: "Two notes.",
      instances: [{ instanceId: "w", agentId: "builtin-worker", role: "worker" }],
      tasks: [
        { taskId: "a", title: "Note a", description: "Write note a.", instanceId: "w", dependsOn: [] },
        { taskId: "b", title: "Note b", description: "Write note b.", instanceId: "w", dependsOn: ["a"] },
      ],
    };
    const recovery = {
      cause: "The product was paused by the client.",
      resumable: true,
      remediation: "Call product.resume to continue.",
    };
    const seeded: ProductEvent[] = [
      { v: 1, at, type: "created", productId, projectId, name: "Notes", goal: "Write notes", cwd: workspace },
      { v: 1, at, type: "confirmed", plan },
      { v: 1, at, type: "phase", phase: "paused", recovery },
    ];
    const evil = {
      taskId: "evil",
      title: "Evil",
      description: "rm -rf ~",
      instanceId: "w",
      dependsOn: [],
      status: "pending",
      attempts: 0,
    };
    const seed = SqliteAuthority.open(statePath);
    const store = new ProductStore(seed, DEFAULT_PRODUCT_OPTIONS.checkpointHistory);
    await store.create(projectId, productId, seeded);
    await seed.appendEvents(
      projectId,
      productStream(productId),
      [
        { v: 2, at, type: "task", task: evil },
        { v: 1, at, type: "task", task: { ...plan.tasks[0], status: "completed", attempts: -1, output: "forged" } },
        { v: 1, at, type: "usage", taskId: "a", inputTokens: Number.NaN, outputTokens: 1e300, estimated: false },
      ],
      seeded.length,
    );
    await seed.put(projectId, "snapshot", productId, { v: 2, state: { tasks: [evil] } }, null);
    const snapshotOf = async () => {
      const events = await seed.readEvents(projectId, productStream(productId), 0);
      const records = await Promise.all(
        ["product", "snapshot", "lease"].map(
          async (kind) => (await seed.get(projectId, kind, productId))?.revision ?? null,
        ),
      );
      return { events: events.length, records };
    };
    const before = await snapshotOf();

    const server = await startServer({ statePath, cwd: workspace, args: ["--log-level", "warn"] });
    const status = await server.request<Status>("product.status", { productId });
    await server.request("product.list", {});
    await server.request("product.checkpoints", { productId });
    expect(await snapshotOf()).toEqual(before);

    expect(status.dropped).toBe(4);
    expect(status.tasks.map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["a", "pending", 0],
      ["b", "pending", 0],
    ]);
    // Fail closed: events were lost, so the product is not run again at all (nothing from a dropped record executes).
    expect((status as unknown as { recovery?: { resumable: boolean } }).recovery).toMatchObject({ resumable: false });
    await expect(server.request("product.resume", { productId })).rejects.toMatchObject({ code: -32010 });
    expect(await snapshotOf()).toEqual(before);
    const started = server.notifications.filter(
      (n) => n.method === "product.taskStatus" && n.params.status === "running",
    );
    expect(started).toEqual([]);
    expect(await server.close()).toBe(0);
    await seed.close();
  }, 90_000);
});

describe("guarantee 10 and drift detection over stdio: a killed run whose workspace and agents changed", () => {
  it("reports which input changed, old → new, and completes on an explicit resume without repeating work", async () => {
    const logPath = join(tempDir(), "executions.log");
    const workspace = tempDir("acp-orch-drift-");
    git(workspace, "init", "-q");
    git(workspace, "commit", "-q", "--allow-empty", "-m", "start");
    const headBefore = git(workspace, "rev-parse", "HEAD");
    slowWorkspace(logPath, "one", workspace);
    const statePath = join(tempDir(), "state.db");
    // The same owner id across the restart: a process restarted under its old id takes its own lease back at once.
    const env = { ACP_ORCHESTRATOR_OWNER_ID: "drift-owner" };

    const first = await startServer({ statePath, cwd: workspace, env, args: ["--log-level", "warn"] });
    const { productId } = await first.request<{ productId: string }>("product.plan", { goal: "Drift", cwd: workspace });
    await first.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    await first.request("product.confirm", { productId, instances: SLOW, tasks: chain("t1", "t2", "t3") });
    await first.waitFor(
      (n) => n.method === "product.taskStatus" && n.params.taskId === "t2" && n.params.status === "running",
      90_000,
    );
    await first.kill();

    // While it was down: a commit moved HEAD, and the slow agent's definition changed.
    git(workspace, "commit", "-q", "--allow-empty", "-m", "moved on");
    const headAfter = git(workspace, "rev-parse", "HEAD");
    slowWorkspace(logPath, "two", workspace);

    const second = await startServer({ statePath, cwd: workspace, env, args: ["--log-level", "warn"] });
    const status = await second.request<Status>("product.status", { productId });
    expect(status.phase).toBe("executing");
    expect(status.recovery?.cause).toContain("No process is driving this product");
    expect(status.recovery?.cause).toContain(
      `the workspace git HEAD moved (${headBefore.slice(0, 12)} → ${headAfter.slice(0, 12)})`,
    );
    expect(status.recovery?.cause).toContain("the agent definitions in the registry changed");
    expect(status.recovery).toMatchObject({ resumable: true, needsExplicitResume: true });
    expect(status.recovery?.remediation).toContain("product.resume");
    expect(status.recovery?.drift).toEqual([
      { what: "gitHead", from: headBefore, to: headAfter },
      {
        what: "agents",
        from: expect.stringMatching(/^ag1:/),
        to: expect.stringMatching(/^ag1:/),
        // The owner's per-agent fingerprint names the agent whose definition changed (issue 28 case 6).
        agents: [{ agentId: "slow", change: "changed" }],
      },
    ]);

    const done = second.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 90_000);
    expect(await second.request("product.resume", { productId })).toEqual({ productId, phase: "executing" });
    expect((await done).params.phase).toBe("completed");
    const after = await second.request<Status>("product.status", { productId });
    expect(after.recovery).toBeUndefined();
    expect(after.tasks.map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["t1", "completed", 1],
      ["t2", "completed", 2],
      ["t3", "completed", 1],
    ]);
    const starts = readLog(logPath).filter((l) => l.event === "start");
    expect(starts.filter((l) => l.taskId === "t1").map((l) => l.ppid)).toEqual([first.child.pid]);
    expect(starts.filter((l) => l.ppid === second.child.pid).map((l) => l.taskId)).toEqual(["t2", "t3"]);
    expect(await second.close()).toBe(0);
  }, 240_000);
});
