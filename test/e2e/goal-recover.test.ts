/**
 * `serve --recover` resumes goal runs whose driver is gone (issue 14, "Many servers, one store"), with the built
 * server as real subprocesses on real stdio and real worker subprocesses (the logging agent, which logs every
 * execution with the pid of the server that started it, outside the servers):
 *
 * A server drives a goal run whose phase has three tasks — two finish, one is slow — and is killed -9 while the slow
 * one runs. Two servers started with `--recover` on the same store then finish the goal without any `x/goal.resume`:
 * exactly one of them drives it (one server logs the take-over, one server ran the interrupted task again), the phase is
 * not started again, and the completed tasks do not run again (product attempts and the execution log).
 *
 * Runs on a SQLite file always, and on PostgreSQL too when ACP_ORCHESTRATOR_TEST_PG is set (test/support/postgres.ts).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { describePostgres, dropSchema, eventually, freshSchema, urlWithSchema } from "../support/postgres.js";
import { startServer, tempDir, type Notification, type ServerHandle } from "../support/server-process.js";

/** Three independent items: the heuristic leader derives one criterion per item and one task per criterion. */
const GOAL = "Prepare the release:\n- Write the changelog\n- Update the version number\n- Draft the announcement";

interface GoalStatus {
  status: string;
  phaseIndex: number;
  productId?: string;
  endReason?: string;
  acceptance: { passed: number; total: number };
}
interface ProductStatus {
  tasks: { taskId: string; status: string; attempts: number }[];
}

const isGoal = (goalRunId: string, method: string) => (n: Notification) =>
  n.method === method && n.params.goalRunId === goalRunId;

const schemas: string[] = [];
afterAll(async () => {
  if (process.env.ACP_ORCHESTRATOR_TEST_PG) for (const s of schemas) await dropSchema(s);
});

async function goalRecoveredByOneServer(statePath: string): Promise<void> {
  const workspace = tempDir("acp-orch-goal-recover-");
  const log = join(workspace, "executions.jsonl");
  const script = compileLoggingAgent(tempDir("acp-orch-goal-agent-"));
  const agent = (agentId: string, env: Record<string, string>) => ({
    agentId,
    command: process.execPath,
    args: [script],
    env: { LOGGING_AGENT_LOG: log, ...env },
  });
  // Roster order [quick, slow, builtin-worker] (builtinWorker: true puts it on the team) → t1 on quick, t2 on slow, t3 on the built-in worker. The slow agent
  // takes its sleep from the server's environment: ten minutes under the first server, the default after.
  writeFileSync(
    join(workspace, "acp-orchestrator.json"),
    JSON.stringify({
      agents: [agent("quick", { LOGGING_AGENT_MIN_MS: "10", LOGGING_AGENT_MAX_MS: "30" }), agent("slow", {})],
      builtinWorker: true,
    }),
  );
  // The default lease (30 s) with a recovery scan every second: the killed server is proven gone by its process
  // (SQLite, one host) or its liveness lock (PostgreSQL), never by an expiry. A short lease (3 s) let a recovering
  // server starved for 3 s on a busy machine lose the run to the other one while its agent ran on.
  const lease = { ACP_ORCHESTRATOR_RECOVER_SCAN_MS: "1000" };
  const first = await startServer({
    cwd: workspace,
    statePath,
    env: { ...lease, LOGGING_AGENT_MIN_MS: "600000", LOGGING_AGENT_MAX_MS: "600000" },
  });
  const { goalRunId } = await first.request<{ goalRunId: string }>("x/goal.start", { goal: GOAL, cwd: workspace });
  const phase = await first.waitFor(isGoal(goalRunId, "x/goal.phaseStarted"), 30_000);
  const productId = phase.params.productId as string;
  const taskDone = (taskId: string) => (n: Notification) =>
    n.method === "product.taskStatus" &&
    n.params.productId === productId &&
    n.params.taskId === taskId &&
    n.params.status === "completed";
  await first.waitFor(taskDone("t1"), 30_000);
  await first.waitFor(taskDone("t3"), 30_000);
  await eventually(
    () => readExecutionLog(log).some((l) => l.event === "start" && l.taskId === "t2"),
    30_000,
    "the slow task to start",
  );
  await first.kill();

  const recoverers: ServerHandle[] = await Promise.all(
    [0, 1].map(() =>
      startServer({ cwd: workspace, statePath, env: lease, args: ["--recover", "--log-level", "info"] }),
    ),
  );
  try {
    const [b, c] = recoverers as [ServerHandle, ServerHandle];
    await eventually(
      async () => (await b.request<GoalStatus>("x/goal.status", { goalRunId })).status === "completed",
      120_000,
      "the goal run to complete on the recovering servers",
    );
    const status = await c.request<GoalStatus>("x/goal.status", { goalRunId });
    const product = await c.request<ProductStatus>("product.status", { productId });
    const starts = readExecutionLog(log).filter((l) => l.event === "start");
    const t2again = starts.filter((l) => l.taskId === "t2" && l.attempt === 2);
    const pids = recoverers.map((s) => s.child.pid);
    expect({
      status: status.status,
      endReason: status.endReason,
      productId: status.productId,
      phaseIndex: status.phaseIndex,
      acceptance: { passed: status.acceptance.passed, total: status.acceptance.total },
      phasesStartedAgain: recoverers.flatMap((s) => s.notifications.filter(isGoal(goalRunId, "x/goal.phaseStarted")))
        .length,
      // Each server logs the goal runs it took over (fleet recovery, at info level).
      serversThatTookItOver: recoverers.filter((s) => s.stderr().includes("recovered a goal run whose driver is gone"))
        .length,
      tasks: product.tasks.map((t) => [t.taskId, t.status, t.attempts]),
      executions: starts.map((e) => `${e.taskId}@${e.attempt}`).sort(),
      reRunByARecoveringServer: t2again.length === 1 && pids.includes(t2again[0]?.ppid),
    }).toEqual({
      status: "completed",
      endReason: "achieved",
      productId,
      phaseIndex: 0,
      acceptance: { passed: 3, total: 3 },
      phasesStartedAgain: 0,
      serversThatTookItOver: 1,
      tasks: [
        ["t1", "completed", 1],
        ["t2", "completed", 2],
        ["t3", "completed", 1],
      ],
      executions: ["t1@1", "t2@1", "t2@2"],
      reRunByARecoveringServer: true,
    });
  } finally {
    await Promise.all(recoverers.map((s) => s.close()));
  }
}

describe("serve --recover takes over goal runs (SQLite)", () => {
  it("a goal run whose server was killed -9 is finished by exactly one of two --recover servers, nothing re-run", async () => {
    await goalRecoveredByOneServer(join(tempDir(), "state.db"));
  }, 240_000);
});

describePostgres("serve --recover takes over goal runs (PostgreSQL)", () => {
  it("a goal run whose server was killed -9 is finished by exactly one of two --recover servers, nothing re-run", async () => {
    const schema = freshSchema();
    schemas.push(schema);
    await goalRecoveredByOneServer(urlWithSchema(schema));
  }, 240_000);
});
