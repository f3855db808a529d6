/**
 * Goal runs over real stdio (PROTOCOL.md section 6, issue 5 "Must show"): the built server as a subprocess, the
 * official ACP SDK client, the heuristic leader, and real worker subprocesses (the built-in worker and the
 * `logging-agent` fixture, which logs every task execution to a file outside the server).
 *
 * - a three-item goal reaches `achieved`, with the notification sequence, `x/goal.status` and `x/goal.list` checked;
 * - kill -9 during a phase, restart on the same state file, `x/goal.resume`: the goal finishes and the completed tasks
 *   of that phase are not run again;
 * - one case each of invalid params (-32602), an unknown goal run (-32002, kind goalRun) and a wrong status (-32010).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { isJsonRpcLine, startServer, tempDir, type Notification, type ServerHandle } from "../support/server-process.js";

/** Three independent items: the heuristic leader derives one criterion per item and one task per criterion. */
const GOAL = "Prepare the release:\n- Write the changelog\n- Update the version number\n- Draft the announcement";

interface GoalStatus {
  goalRunId: string;
  status: string;
  goal: string;
  originalGoal: string;
  phaseIndex: number;
  productId?: string;
  progressSummary: string;
  acceptance: { passed: number; total: number; criteria: { id: string; text: string; passed: boolean }[] };
  queuedMessages: number;
  noProgressCount: number;
  usedTokens: number;
  endReason?: string;
}
interface ProductStatus {
  phase: string;
  tasks: { taskId: string; instanceId: string; status: string; attempts: number }[];
}
interface RpcError {
  code: number;
  message: string;
  data?: Record<string, unknown>;
}

const isGoal = (goalRunId: string, method: string) => (n: Notification) => n.method === method && n.params.goalRunId === goalRunId;

/** The error a request was refused with (the SDK rejects with the JSON-RPC error object). */
async function refusal(server: ServerHandle, method: string, params: unknown): Promise<RpcError> {
  try {
    await server.request(method, params);
  } catch (err) {
    return err as RpcError;
  }
  throw new Error(`${method} was expected to fail`);
}

describe("goal runs over stdio", () => {
  it("a three-item goal reaches achieved through the heuristic leader and the built-in worker", async () => {
    const workspace = tempDir("acp-orch-goal-ws-");
    const server = await startServer({ cwd: workspace });
    const { goalRunId } = await server.request<{ goalRunId: string }>("x/goal.start", { goal: GOAL, cwd: workspace });
    expect(goalRunId).toMatch(/\S/);
    const ended = await server.waitFor(isGoal(goalRunId, "x/goal.ended"), 60_000);
    expect(ended.params).toMatchObject({ goalRunId, endReason: "achieved" });

    // The notification sequence: started (criteria) → phaseStarted → the phase's product notifications →
    // phaseAssessed → statusChanged {completed} → ended {achieved}.
    const started = server.notifications.find(isGoal(goalRunId, "x/goal.started"));
    expect(started?.params.criteria).toEqual([
      { id: "c1", text: "Write the changelog" },
      { id: "c2", text: "Update the version number" },
      { id: "c3", text: "Draft the announcement" },
    ]);
    const phase = server.notifications.find(isGoal(goalRunId, "x/goal.phaseStarted"));
    expect(phase?.params).toMatchObject({ goalRunId, phaseIndex: 0 });
    const productId = phase?.params.productId as string;
    const sequence = server.notifications
      .filter((n) => n.params.goalRunId === goalRunId || n.params.productId === productId)
      .map((n) => (n.method.startsWith("product.") ? "product.*" : n.method))
      .filter((m, i, all) => m !== "product.*" || all[i - 1] !== "product.*");
    expect(sequence).toEqual([
      "x/goal.started",
      "x/goal.phaseStarted",
      "product.*",
      "x/goal.phaseAssessed",
      "x/goal.statusChanged",
      "x/goal.ended",
    ]);
    const productMethods = new Set(server.notifications.filter((n) => n.params.productId === productId).map((n) => n.method));
    for (const m of ["product.teamRoster", "product.dagTopology", "product.taskStatus", "product.completed"]) expect(productMethods).toContain(m);
    expect(server.notifications.find(isGoal(goalRunId, "x/goal.phaseAssessed"))?.params).toEqual({
      goalRunId,
      phaseIndex: 0,
      passed: 3,
      total: 3,
      newlyPassed: ["c1", "c2", "c3"],
      regressed: [],
    });
    expect(server.notifications.filter(isGoal(goalRunId, "x/goal.statusChanged")).map((n) => n.params.status)).toEqual(["completed"]);

    const status = await server.request<GoalStatus>("x/goal.status", { goalRunId });
    expect(status).toMatchObject({
      goalRunId,
      status: "completed",
      endReason: "achieved",
      goal: GOAL,
      originalGoal: GOAL,
      phaseIndex: 1,
      productId,
      queuedMessages: 0,
      noProgressCount: 0,
      acceptance: { passed: 3, total: 3 },
    });
    expect(status.acceptance.criteria.every((c) => c.passed)).toBe(true);
    expect(status.usedTokens).toBeGreaterThan(0);
    const product = await server.request<ProductStatus>("product.status", { productId });
    expect(product.phase).toBe("completed");
    expect(product.tasks.map((t) => [t.status, t.attempts])).toEqual([
      ["completed", 1],
      ["completed", 1],
      ["completed", 1],
    ]);

    const list = await server.request<{ goals: unknown[] }>("_x/goal.list", {});
    expect(list.goals).toContainEqual({ goalRunId, status: "completed", goal: GOAL, phaseIndex: 1 });

    expect(await server.close()).toBe(0);
    expect(server.stdoutLines.every(isJsonRpcLine)).toBe(true);
  });

  it("kill -9 during a phase, restart, x/goal.resume: the goal finishes without re-running the phase's completed tasks", async () => {
    const workspace = tempDir("acp-orch-goal-crash-");
    const statePath = join(tempDir(), "state.db");
    const log = join(workspace, "executions.jsonl");
    const agent = (agentId: string, env: Record<string, string>) => ({
      agentId,
      command: process.execPath,
      args: ["--import", tsxLoader, join(fixturesDir, "logging-agent.ts")],
      env: { LOGGING_AGENT_LOG: log, ...env },
    });
    // Roster order [quick, slow, builtin-worker] → t1 on quick, t2 on slow, t3 on the built-in worker. The slow
    // agent takes its sleep from the server's environment: ten minutes in the first process, the default after.
    writeFileSync(
      join(workspace, "acp-orchestrator.json"),
      JSON.stringify({ agents: [agent("quick", { LOGGING_AGENT_MIN_MS: "10", LOGGING_AGENT_MAX_MS: "30" }), agent("slow", {})] }),
    );
    // Short product leases, so the killed server's lease expires quickly (DESIGN.md guarantee 6).
    const lease = { ACP_ORCHESTRATOR_LEASE_TTL_MS: "1500" };
    const first = await startServer({
      cwd: workspace,
      statePath,
      env: { ...lease, LOGGING_AGENT_MIN_MS: "600000", LOGGING_AGENT_MAX_MS: "600000" },
    });
    const { goalRunId } = await first.request<{ goalRunId: string }>("x/goal.start", { goal: GOAL, cwd: workspace });
    const phase = await first.waitFor(isGoal(goalRunId, "x/goal.phaseStarted"), 30_000);
    const productId = phase.params.productId as string;
    const taskDone = (taskId: string) => (n: Notification) =>
      n.method === "product.taskStatus" && n.params.productId === productId && n.params.taskId === taskId && n.params.status === "completed";
    await first.waitFor(taskDone("t1"), 30_000);
    await first.waitFor(taskDone("t3"), 30_000);
    await first.waitFor(
      (n) => n.method === "product.taskStatus" && n.params.taskId === "t2" && n.params.status === "running" && n.params.productId === productId,
    );
    const starts = () =>
      existsSync(log)
        ? readFileSync(log, "utf8")
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l) as { event: string; taskId: string; attempt: number })
            .filter((e) => e.event === "start")
        : [];
    await waitForFile(() => starts().some((e) => e.taskId === "t2"));
    await first.kill();

    const second = await startServer({ cwd: workspace, statePath, env: lease });
    const idle = await second.request<GoalStatus>("x/goal.status", { goalRunId });
    expect(idle).toMatchObject({ status: "running", productId, phaseIndex: 0, acceptance: { passed: 0, total: 3 } });
    expect(idle.progressSummary).toContain("x/goal.resume");

    const ended = second.waitFor(isGoal(goalRunId, "x/goal.ended"), 60_000);
    await resumeWhenLeaseFree(second, goalRunId);
    expect((await ended).params).toMatchObject({ endReason: "achieved" });
    const status = await second.request<GoalStatus>("x/goal.status", { goalRunId });
    expect(status).toMatchObject({ status: "completed", phaseIndex: 1, productId, acceptance: { passed: 3, total: 3 } });
    // Same product (the phase was not started again); no second phase.
    expect(second.notifications.filter(isGoal(goalRunId, "x/goal.phaseStarted"))).toHaveLength(0);
    const product = await second.request<ProductStatus>("product.status", { productId });
    expect(product.tasks.map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["t1", "completed", 1],
      ["t2", "completed", 2],
      ["t3", "completed", 1],
    ]);
    // The executions the workers logged outside the server: t1 once, t2 twice (interrupted, then again).
    expect(starts().map((e) => `${e.taskId}@${e.attempt}`)).toEqual(["t1@1", "t2@1", "t2@2"]);
    expect(await second.close()).toBe(0);
    expect([...first.stdoutLines, ...second.stdoutLines].every(isJsonRpcLine)).toBe(true);
  });

  it("refuses invalid params, unknown goal runs and operations in the wrong status, and keeps serving", async () => {
    const workspace = tempDir("acp-orch-goal-err-");
    const server = await startServer({ cwd: workspace });

    const invalid = await refusal(server, "x/goal.start", { goal: "Do it", cwd: "relative/path" });
    expect(invalid.code).toBe(-32602);
    expect(invalid.data?.issues).toEqual([expect.objectContaining({ path: ["cwd"] })]);

    const unknown = await refusal(server, "x/goal.status", { goalRunId: "goal_nope" });
    expect(unknown.code).toBe(-32002);
    expect(unknown.data).toEqual({ kind: "goalRun", id: "goal_nope" });

    const { goalRunId } = await server.request<{ goalRunId: string }>("x/goal.start", { goal: GOAL, cwd: workspace });
    expect(await server.request("x/goal.stop", { goalRunId, reason: "test" })).toEqual({ goalRunId, status: "stopped" });
    const wrong = await refusal(server, "_x/goal.resume", { goalRunId, additionalBudget: { maxTotalTokens: 1_000 } });
    expect(wrong.code).toBe(-32010);
    expect(wrong.data).toEqual({ phase: "stopped", allowed: ["paused", "blocked", "budget_limited"] });
    expect(wrong.message).toMatch(/stopped/);

    const status = await server.request<GoalStatus>("x/goal.status", { goalRunId });
    expect(status).toMatchObject({ status: "stopped", endReason: "stopped" });
    expect(await server.close()).toBe(0);
    expect(server.stdoutLines.every(isJsonRpcLine)).toBe(true);
  });
});

/** Polls a file-backed condition (the fixture agent's log) every 20 ms, for at most 20 s. */
async function waitForFile(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the agent's execution log");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * `x/goal.resume` after a crash. The killed process may still hold the product's lease (DESIGN.md guarantee 6) until
 * it expires; the resume is then refused with -32012 (recording nothing) and tried again.
 */
async function resumeWhenLeaseFree(server: ServerHandle, goalRunId: string): Promise<void> {
  const deadline = Date.now() + 45_000;
  for (;;) {
    try {
      expect(await server.request("x/goal.resume", { goalRunId })).toEqual({ goalRunId, status: "running" });
      return;
    } catch (err) {
      if ((err as RpcError).code !== -32012 || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}
