/**
 * Goal runs over real stdio (PROTOCOL.md section 6, issue 5 "Must show"): the built server as a subprocess, the
 * official ACP SDK client, the heuristic leader and built-in worker subprocesses.
 *
 * - a three-item goal reaches `achieved`, with the notification sequence, `x/goal.status` and `x/goal.list` checked;
 * - one case each of invalid params (-32602), an unknown goal run (-32002, kind goalRun) and a wrong status (-32010).
 *
 * The crash case (kill -9 during a phase) is in goal-restart.test.ts.
 */
import { describe, expect, it } from "vitest";
import {
  isJsonRpcLine,
  startServer,
  tempDir,
  type Notification,
  type ServerHandle,
} from "../support/server-process.js";

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

const isGoal = (goalRunId: string, method: string) => (n: Notification) =>
  n.method === method && n.params.goalRunId === goalRunId;

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
    // x/goal.start answers before any notification about the goal run (it answers at once, the loop runs after).
    const answered = server.stdoutLines.findIndex((l) => l.includes('"result"') && l.includes(goalRunId));
    const firstNote = server.stdoutLines.findIndex((l) => l.includes('"method"') && l.includes(goalRunId));
    expect(answered).toBeGreaterThanOrEqual(0);
    if (firstNote >= 0) expect(answered).toBeLessThan(firstNote);
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
    const productMethods = new Set(
      server.notifications.filter((n) => n.params.productId === productId).map((n) => n.method),
    );
    for (const m of ["product.teamRoster", "product.dagTopology", "product.taskStatus", "product.completed"])
      expect(productMethods).toContain(m);
    expect(server.notifications.find(isGoal(goalRunId, "x/goal.phaseAssessed"))?.params).toEqual({
      goalRunId,
      phaseIndex: 0,
      passed: 3,
      total: 3,
      newlyPassed: ["c1", "c2", "c3"],
      regressed: [],
    });
    expect(server.notifications.filter(isGoal(goalRunId, "x/goal.statusChanged")).map((n) => n.params.status)).toEqual([
      "completed",
    ]);

    const status = await server.request<GoalStatus>("x/goal.status", { goalRunId });
    expect(status).toMatchObject({
      goalRunId,
      status: "completed",
      endReason: "achieved",
      goal: GOAL,
      originalGoal: GOAL,
      phaseIndex: 0,
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
    expect(list.goals).toContainEqual({ goalRunId, status: "completed", goal: GOAL, phaseIndex: 0 });

    expect(await server.close()).toBe(0);
    expect(server.stdoutLines.every(isJsonRpcLine)).toBe(true);
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
    expect(await server.request("x/goal.stop", { goalRunId, reason: "test" })).toEqual({
      goalRunId,
      status: "stopped",
    });
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
