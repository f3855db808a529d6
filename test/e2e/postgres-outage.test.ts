/**
 * A PostgreSQL server that goes away mid-run (issue 14, "Must show"; DESIGN.md guarantee 2): every product the server
 * drives pauses with `product.persistenceError`; when the database is back, `product.resume` completes the run and no
 * task whose completion was persisted before the outage runs again.
 *
 * The test starts its own private cluster (scripts/pg-test-cluster.sh start), stops its server mid-run (`pause`) and
 * starts it again (`resume`) on the same port and data. Runs only with ACP_ORCHESTRATOR_TEST_PG, like every Postgres
 * suite (it needs the same PostgreSQL installation).
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import type { Instance, Task, TaskState } from "../../protocol/common.js";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import type { ExecutionLogLine } from "../fixtures/agents/logging-agent.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { describePostgres, eventually } from "../support/postgres.js";
import { REPO_ROOT, startServer, tempDir } from "../support/server-process.js";

const SCRIPT = join(REPO_ROOT, "scripts", "pg-test-cluster.sh");
const INSTANCES: Instance[] = [{ instanceId: "w1", agentId: "logger", role: "worker" }];
const CHAIN: Task[] = ["a", "b", "c", "d", "e"].map((taskId, i, ids) => ({
  taskId,
  title: `Step ${taskId}`,
  description: `Do ${taskId}.`,
  instanceId: "w1",
  dependsOn: i === 0 ? [] : [ids[i - 1] ?? ""],
}));

let clusterDir: string | undefined;
afterAll(() => {
  if (clusterDir) execFileSync("bash", [SCRIPT, "stop", clusterDir], { stdio: "ignore" });
});

function cluster(...args: string[]): string {
  return execFileSync("bash", [SCRIPT, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
}

describePostgres("a database that goes away mid-run", () => {
  it("pauses the product with product.persistenceError; when back, resume completes with nothing re-run", async () => {
    const exports = cluster("start");
    const value = (name: string): string => new RegExp(`^export ${name}=(.*)$`, "m").exec(exports)?.[1] ?? "";
    clusterDir = value("ACP_ORCHESTRATOR_TEST_PG_DIR");
    const url = value("ACP_ORCHESTRATOR_TEST_PG");

    const cwd = tempDir("acp-orch-outage-");
    const logPath = join(cwd, "executions.jsonl");
    writeFileSync(logPath, "");
    const agents = [
      {
        agentId: "logger",
        command: process.execPath,
        args: [compileLoggingAgent(cwd)],
        env: {
          LOGGING_AGENT_LOG: logPath,
          LOGGING_AGENT_SEED: "outage",
          LOGGING_AGENT_MIN_MS: "600",
          LOGGING_AGENT_MAX_MS: "600",
        },
      },
    ];
    writeFileSync(join(cwd, "acp-orchestrator.json"), JSON.stringify({ agents }));
    const log = (): ExecutionLogLine[] => readExecutionLog(logPath);

    // Leases renewed every second: the lost database is noticed within about a second even between task writes.
    const server = await startServer({
      statePath: url,
      cwd,
      env: { ACP_ORCHESTRATOR_LEASE_TTL_MS: "3000" },
      args: ["--log-level", "warn"],
    });
    try {
      const { productId } = await server.request<{ productId: string }>("product.plan", { goal: "Outage", cwd });
      await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId, 60_000);
      await server.request("product.confirm", { productId, instances: INSTANCES, tasks: CHAIN });
      await server.waitFor(
        (n) => n.method === "product.taskStatus" && n.params.taskId === "b" && n.params.status === "completed",
        60_000,
      );

      cluster("pause", clusterDir);
      const error = await server.waitFor(
        (n) => n.method === "product.persistenceError" && n.params.productId === productId,
        30_000,
      );
      cluster("resume", clusterDir);

      // The pool reconnects on the next query; a resume while connections are being replaced may fail once.
      const status = await server.request<{ phase: string; tasks: TaskState[] }>("product.status", { productId });
      const persisted = new Set(status.tasks.filter((t) => t.status === "completed").map((t) => t.taskId));
      const resumedAt = new Date().toISOString();
      const done = server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 60_000);
      await eventually(
        () =>
          server.request("product.resume", { productId }).then(
            () => true,
            () => false,
          ),
        30_000,
        "product.resume to succeed",
      );
      expect((await done).params.phase).toBe("completed");

      const final = await server.request<{ tasks: TaskState[] }>("product.status", { productId });
      const rerun = log().filter((l) => l.event === "start" && l.at >= resumedAt && persisted.has(l.taskId));
      expect({
        errorNamed: typeof error.params.error === "string" && error.params.error.length > 0,
        pausedPhase: status.phase,
        persistedBefore: persisted.has("a") && persisted.has("b"),
        rerun: rerun.map((l) => l.taskId),
        final: final.tasks.map((t) => [t.taskId, t.status]),
      }).toEqual({
        errorNamed: true,
        pausedPhase: "paused",
        persistedBefore: true,
        rerun: [],
        final: CHAIN.map((t) => [t.taskId, "completed"]),
      });
    } finally {
      await server.close();
    }
  }, 180_000);
});
