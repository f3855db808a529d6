/**
 * Many servers, one PostgreSQL store (issue 14, "Must show"), with the built server as real subprocesses on real
 * stdio and real worker subprocesses (the logging agent, which logs every execution, with the pid of the server that
 * started it, to a file outside the servers):
 *
 * - Fleet recovery: four servers with `--recover` on one database drive 40 products at once; two are killed -9
 *   mid-run; the other two finish every product. Asserted from the database and the workers' log: every task of every
 *   product completed exactly once in the final state; no task ran again after its completion was persisted (no
 *   `running` event after its `completed` event, and every `done` a surviving server's worker logged is the task's
 *   only persisted completion); each product was driven by one server at a time (in the workers' log, the servers
 *   that started a product's tasks never interleave: A, then B, never A again).
 * - A pause sent to a server that does not own the product reaches the owner through the database within 1 s
 *   (measured from the request to the owner's own notification of the interrupted task, three times, printed).
 * - A pause, a mutation and a cancel sent to a server that does not own the product reach the owner through the
 *   database (control requests + LISTEN/NOTIFY), far sooner than any heartbeat (the leases here live 60 s).
 *
 * Runs only with ACP_ORCHESTRATOR_TEST_PG (see test/support/postgres.ts).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import type { Instance, Task, TaskState } from "../../protocol/common.js";
import { PostgresAuthority } from "../../src/adapters/persistence/postgres-authority.js";
import { ProductEvent, productStream } from "../../src/core/product/records.js";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import type { ExecutionLogLine } from "../fixtures/agents/logging-agent.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { describePostgres, dropSchema, eventually, freshSchema, urlWithSchema } from "../support/postgres.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";
import { recordedTasks } from "../support/task-events.js";

const INSTANCES: Instance[] = [
  { instanceId: "w1", agentId: "logger", role: "worker" },
  { instanceId: "w2", agentId: "logger", role: "worker" },
];
/** a → (b, c) → d */
const DIAMOND: Task[] = [
  { taskId: "a", title: "Start", description: "Start.", instanceId: "w1", dependsOn: [] },
  { taskId: "b", title: "Left", description: "Left.", instanceId: "w1", dependsOn: ["a"] },
  { taskId: "c", title: "Right", description: "Right.", instanceId: "w2", dependsOn: ["a"] },
  { taskId: "d", title: "Join", description: "Join.", instanceId: "w2", dependsOn: ["b", "c"] },
];

const schemas: string[] = [];
afterAll(async () => {
  if (process.env.ACP_ORCHESTRATOR_TEST_PG) for (const s of schemas) await dropSchema(s);
});

/** A workspace whose registry has the compiled logging agent (sleeping `minMs`-`maxMs` per task). */
function fleetWorkspace(logPath: string, minMs: number, maxMs: number): string {
  const dir = tempDir("acp-orch-fleet-");
  const agentFile = compileLoggingAgent(dir);
  const agents = [
    {
      agentId: "logger",
      command: process.execPath,
      args: [agentFile],
      env: {
        LOGGING_AGENT_LOG: logPath,
        LOGGING_AGENT_SEED: "fleet",
        LOGGING_AGENT_MIN_MS: String(minMs),
        LOGGING_AGENT_MAX_MS: String(maxMs),
      },
    },
  ];
  writeFileSync(join(dir, "acp-orchestrator.json"), JSON.stringify({ agents, maxParallelTasks: 2 }));
  writeFileSync(logPath, "");
  return dir;
}

function readLog(logPath: string): ExecutionLogLine[] {
  return readExecutionLog(logPath);
}

/** Plans and confirms one product on `server`; resolves with its id once it executes. */
async function launch(server: ServerHandle, cwd: string, goal: string, tasks: Task[]): Promise<string> {
  const { productId } = await server.request<{ productId: string }>("product.plan", { goal, cwd });
  await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId, 60_000);
  await server.request("product.confirm", { productId, instances: INSTANCES, tasks });
  return productId;
}

describePostgres("many servers on one PostgreSQL store", () => {
  it("four servers drive 40 products; two are killed -9; with --recover the others finish every product once", async () => {
    const schema = freshSchema();
    schemas.push(schema);
    const url = urlWithSchema(schema);
    const logPath = join(tempDir(), "executions.jsonl");
    const cwd = fleetWorkspace(logPath, 150, 400);
    // The default lease lifetime (30 s): the killed servers are noticed through their liveness locks within a second,
    // so nothing here waits for a lease to expire. A 3 s lifetime made a survivor starved for 3 s on a loaded machine
    // lose its lease while its agent ran on; another survivor then ran the task again (only one completion was
    // recorded, as guarantee 7 requires, but the agents' log showed two runs: the stop-39 CI failure).
    const env = {};
    const servers = await Promise.all(
      // A wide fence bound, still inside the lease lifetime (docs/FLEET.md): this test is about recovering from
      // kill -9, not about self-fencing (postgres-partition tests that); a survivor starved for 5 s on a loaded 2-core
      // machine fenced itself and another server re-ran the attempt it had finished but not yet recorded.
      [0, 1, 2, 3].map(() =>
        startServer({
          statePath: url,
          cwd,
          env,
          args: ["--recover", "--log-level", "warn", "--liveness-fence-ms", "20000"],
        }),
      ),
    );
    const productIds: string[] = [];
    await Promise.all(
      servers.map(async (server, s) => {
        for (let i = 0; i < 10; i += 1) productIds.push(await launch(server, cwd, `Fleet ${s}-${i}`, DIAMOND));
      }),
    );
    // Kill two servers once a quarter of the 160 tasks are done and both still have work in flight.
    const victims = [servers[0], servers[1]] as ServerHandle[];
    const victimPids = new Set(victims.map((v) => v.child.pid));
    await eventually(() => readLog(logPath).filter((l) => l.event === "done").length >= 40, 180_000, "40 tasks done");
    await Promise.all(victims.map((v) => v.kill()));
    const survivors = [servers[2], servers[3]] as ServerHandle[];

    const authority = await PostgresAuthority.open(url, { maxConnections: 2 });
    try {
      const phases = async (): Promise<string[]> => {
        const { products } = await (survivors[0] as ServerHandle).request<{
          products: { productId: string; phase: string }[];
        }>("product.list", {});
        return products.filter((p) => productIds.includes(p.productId)).map((p) => p.phase);
      };
      await eventually(
        async () => (await phases()).filter((p) => p === "completed").length === 40,
        300_000,
        "40 completed",
      );

      const log = readLog(logPath);
      const problems: string[] = [];
      for (const productId of productIds) {
        const status = await (survivors[1] as ServerHandle).request<{ phase: string; tasks: TaskState[] }>(
          "product.status",
          { productId },
        );
        if (status.tasks.some((t) => t.status !== "completed")) problems.push(`${productId}: not every task completed`);
        // From the stream: one completion per task, and nothing started after it.
        const projectId = (await authority.get("_", "product-index", productId))?.value as { projectId: string };
        const events = await authority.readEvents(projectId.projectId, productStream(productId), 0);
        const completedAt = new Map<string, number>();
        for (const { seq, event } of events) {
          for (const { taskId, status: taskStatus } of recordedTasks(ProductEvent.parse(event))) {
            if (taskStatus === "completed") {
              if (completedAt.has(taskId)) problems.push(`${productId}/${taskId}: completed twice`);
              completedAt.set(taskId, seq);
            } else if (taskStatus === "running" && completedAt.has(taskId)) {
              problems.push(`${productId}/${taskId}: ran again after its completion was persisted`);
            }
          }
        }
        // From the workers' log: one owner at a time, and survivors never finished a task twice.
        const mine = log.filter((l) => l.productId === productId);
        const owners: number[] = [];
        for (const line of mine.filter((l) => l.event === "start")) {
          if (owners.at(-1) !== line.ppid) owners.push(line.ppid);
        }
        if (new Set(owners).size !== owners.length)
          problems.push(`${productId}: owners interleaved ${owners.join(",")}`);
        for (const task of DIAMOND) {
          const survivorsDone = mine.filter(
            (l) => l.event === "done" && l.taskId === task.taskId && !victimPids.has(l.ppid),
          );
          if (survivorsDone.length > 1)
            problems.push(`${productId}/${task.taskId}: finished ${survivorsDone.length} times`);
        }
      }
      const recovered = productIds.filter(
        (id) =>
          log.some((l) => l.productId === id && victimPids.has(l.ppid)) &&
          log.some((l) => l.productId === id && !victimPids.has(l.ppid)),
      );
      expect({ problems, recoveredSome: recovered.length > 0 }).toEqual({ problems: [], recoveredSome: true });
    } finally {
      await authority.close();
      await Promise.all(survivors.map((s) => s.close()));
    }
  }, 600_000);

  it("a pause sent to a server that does not own the product reaches the owner through the database within 1 s", async () => {
    const schema = freshSchema();
    schemas.push(schema);
    const url = urlWithSchema(schema);
    const logPath = join(tempDir(), "executions.jsonl");
    // Tasks that outlive the test: nothing completes, so every task notification after a pause comes from it.
    const cwd = fleetWorkspace(logPath, 60_000, 60_000);
    // Leases live 60 s (renewed every 20 s) and the fleet's fallback scan runs every 20 s: an owner that hears of the
    // pause within a second heard of it through the database's change feed (LISTEN/NOTIFY), not a periodic check.
    const env = { ACP_ORCHESTRATOR_LEASE_TTL_MS: "60000" };
    const owner = await startServer({ statePath: url, cwd, env, args: ["--log-level", "warn"] });
    const other = await startServer({ statePath: url, cwd, env, args: ["--log-level", "warn"] });
    try {
      const productId = await launch(owner, cwd, "Pause latency", DIAMOND);
      const rounds: { reachedOwnerMs: number; answeredMs: number; ownerPhase: string }[] = [];
      for (let round = 0; round < 3; round += 1) {
        let mark = owner.notifications.length;
        await owner.waitFor(
          (n) =>
            owner.notifications.indexOf(n) >= mark &&
            n.method === "product.taskStatus" &&
            n.params.productId === productId &&
            n.params.status === "running",
          60_000,
        );
        mark = owner.notifications.length;
        const reached = owner
          .waitFor(
            (n) =>
              owner.notifications.indexOf(n) >= mark &&
              n.method === "product.taskStatus" &&
              n.params.productId === productId &&
              n.params.status === "pending",
            10_000,
          )
          .then(() => performance.now());
        const sent = performance.now();
        const answer = await other.request<{ phase: string }>("product.pause", { productId });
        const answered = performance.now();
        const reachedAt = await reached;
        const ownerView = await owner.request<{ phase: string }>("product.status", { productId });
        expect(answer.phase).toBe("paused");
        rounds.push({
          reachedOwnerMs: Math.round(reachedAt - sent),
          answeredMs: Math.round(answered - sent),
          ownerPhase: ownerView.phase,
        });
        await owner.request("product.resume", { productId });
      }
      process.stderr.write(
        `pause forwarded through PostgreSQL: ${rounds
          .map((r) => `reached the owner in ${r.reachedOwnerMs} ms (answer to the client in ${r.answeredMs} ms)`)
          .join("; ")}\n`,
      );
      expect(rounds.map((r) => ({ ownerPhase: r.ownerPhase, withinOneSecond: r.reachedOwnerMs < 1_000 }))).toEqual(
        rounds.map(() => ({ ownerPhase: "paused", withinOneSecond: true })),
      );
    } finally {
      await Promise.all([owner.close(), other.close()]);
    }
  }, 180_000);

  it("a pause, a mutation and a cancel sent to a server that does not own the product reach the owner", async () => {
    const schema = freshSchema();
    schemas.push(schema);
    const url = urlWithSchema(schema);
    const logPath = join(tempDir(), "executions.jsonl");
    const cwd = fleetWorkspace(logPath, 1500, 1500);
    // Leases live 60 s (renewed every 20 s): whatever arrives within seconds came through the database's feed.
    const env = { ACP_ORCHESTRATOR_LEASE_TTL_MS: "60000" };
    const owner = await startServer({ statePath: url, cwd, env, args: ["--log-level", "warn"] });
    const other = await startServer({ statePath: url, cwd, env, args: ["--log-level", "warn"] });
    try {
      const productId = await launch(owner, cwd, "Forwarded controls", DIAMOND);
      await owner.waitFor((n) => n.method === "product.taskStatus" && n.params.status === "running", 60_000);

      const pausedAtOwner = owner.waitFor(
        (n) => n.method === "product.taskStatus" && n.params.status === "pending",
        10_000,
      );
      const started = Date.now();
      const paused = await other.request("product.pause", { productId });
      const pauseMs = Date.now() - started;
      await pausedAtOwner;
      const ownerView = await owner.request<{ phase: string; owner?: unknown }>("product.status", { productId });

      await owner.request("product.resume", { productId });
      await owner.waitFor(
        (n) => n.method === "product.taskStatus" && n.params.status === "running" && Date.now() > started,
        60_000,
      );
      const mutated = await other.request<{ applied: number }>("product.mutate", {
        productId,
        mutations: [
          {
            op: "addTask",
            task: { taskId: "e", title: "Extra", description: "Extra.", instanceId: "w1", dependsOn: ["d"] },
          },
        ],
      });
      const cancelled = await other.request("product.cancel", { productId });
      const finalView = await owner.request<{ phase: string; tasks: TaskState[] }>("product.status", { productId });

      expect({
        paused,
        fast: pauseMs < 10_000,
        ownerPhase: ownerView.phase,
        applied: mutated.applied,
        cancelled,
        finalPhase: finalView.phase,
        hasE: finalView.tasks.some((t) => t.taskId === "e"),
      }).toEqual({
        paused: { productId, phase: "paused" },
        fast: true,
        ownerPhase: "paused",
        applied: 1,
        cancelled: { productId, phase: "cancelled" },
        finalPhase: "cancelled",
        hasE: true,
      });
    } finally {
      await Promise.all([owner.close(), other.close()]);
    }
  }, 180_000);
});
