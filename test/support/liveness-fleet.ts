/**
 * What the PostgreSQL liveness tests share (test/e2e/postgres-liveness.test.ts, postgres-partition.test.ts): the
 * logging agent's workspace and execution log, launching a confirmed product, reading a product's lease and project,
 * checking a product's stream for a task completed twice, run after completion, or lost, and dropping what a test
 * created. Runs only with ACP_ORCHESTRATOR_TEST_PG (see postgres.ts).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll } from "vitest";
import type { Instance, Task } from "../../protocol/common.js";
import type { PostgresAuthority } from "../../src/adapters/persistence/postgres-authority.js";
import { ProductEvent, productStream } from "../../src/core/product/records.js";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import type { ExecutionLogLine } from "../fixtures/agents/logging-agent.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { adminQuery, dropSchema, TEST_PG_URL } from "./postgres.js";
import { tempDir, type ServerHandle } from "./server-process.js";
import { recordedTasks } from "./task-events.js";

export const INSTANCES: Instance[] = [{ instanceId: "w1", agentId: "logger", role: "worker" }];
/** a → b: the victim is killed while `a` runs. */
export const CHAIN: Task[] = [
  { taskId: "a", title: "First", description: "First.", instanceId: "w1", dependsOn: [] },
  { taskId: "b", title: "Second", description: "Second.", instanceId: "w1", dependsOn: ["a"] },
];
export const ONE_TASK: Task[] = CHAIN.slice(0, 1);
/** Only the liveness lock can explain a takeover within seconds: leases live 60 s, the scan runs every 60 s. */
export const SLOW_FALLBACKS = { ACP_ORCHESTRATOR_LEASE_TTL_MS: "60000", ACP_ORCHESTRATOR_RECOVER_SCAN_MS: "60000" };

export function workspace(logPath: string, minMs: number, maxMs: number, retryMs?: number): string {
  const dir = tempDir("acp-orch-liveness-");
  const agentFile = compileLoggingAgent(dir);
  const env = {
    LOGGING_AGENT_LOG: logPath,
    LOGGING_AGENT_MIN_MS: String(minMs),
    LOGGING_AGENT_MAX_MS: String(maxMs),
    ...(retryMs !== undefined ? { LOGGING_AGENT_RETRY_MS: String(retryMs) } : {}),
  };
  const agents = [{ agentId: "logger", command: process.execPath, args: [agentFile], env }];
  writeFileSync(join(dir, "acp-orchestrator.json"), JSON.stringify({ agents, maxParallelTasks: 1 }));
  writeFileSync(logPath, "");
  return dir;
}

export function readLog(logPath: string): ExecutionLogLine[] {
  return readExecutionLog(logPath);
}

export async function launch(server: ServerHandle, cwd: string, goal: string, tasks = CHAIN): Promise<string> {
  const { productId } = await server.request<{ productId: string }>("product.plan", { goal, cwd });
  await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId, 60_000);
  await server.request("product.confirm", { productId, instances: INSTANCES, tasks });
  return productId;
}

export async function projectOf(authority: PostgresAuthority, productId: string): Promise<string> {
  return ((await authority.get("_", "product-index", productId))?.value as { projectId: string }).projectId;
}

export async function leaseOwner(
  authority: PostgresAuthority,
  projectId: string,
  productId: string,
): Promise<string | null> {
  const lease = await authority.get(projectId, "lease", productId);
  return lease ? (lease.value as { owner: string }).owner : null;
}

/** Problems in a product's stream: a task completed twice, or started again after its completion was persisted. */
export async function streamProblems(
  authority: PostgresAuthority,
  projectId: string,
  productId: string,
  tasks = CHAIN,
): Promise<string[]> {
  const problems: string[] = [];
  const completed = new Set<string>();
  for (const { event } of await authority.readEvents(projectId, productStream(productId), 0)) {
    for (const { taskId, status } of recordedTasks(ProductEvent.parse(event))) {
      if (status === "completed" && completed.has(taskId)) problems.push(`${productId}/${taskId}: completed twice`);
      if (status === "running" && completed.has(taskId)) problems.push(`${productId}/${taskId}: ran after completion`);
      if (status === "completed") completed.add(taskId);
    }
  }
  for (const task of tasks) if (!completed.has(task.taskId)) problems.push(`${productId}/${task.taskId}: lost`);
  return problems;
}

/** Schemas and roles a test file created, dropped after its last test (call once at module level). */
export function dropAfterAll(): { schemas: string[]; roles: string[] } {
  const schemas: string[] = [];
  const roles: string[] = [];
  afterAll(async () => {
    if (!TEST_PG_URL) return;
    for (const s of schemas) await dropSchema(s);
    for (const r of roles) await adminQuery(`DROP ROLE IF EXISTS ${r}`).catch(() => undefined);
  });
  return { schemas, roles };
}
