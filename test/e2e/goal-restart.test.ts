/**
 * Goal runs survive kill -9 (issue 5 "Must show"): the built server as a subprocess on real stdio runs a goal whose
 * phase has three tasks on three workers — two finish, one is slow — and is SIGKILLed while the slow one runs. A new
 * server on the same state file does not drive the goal until `x/goal.resume`, which re-attaches to the phase's
 * product: the goal finishes without running the completed tasks again (checked through `product.status` attempts and
 * the `logging-agent` fixture's execution log, written outside the server) and without starting the phase again.
 *
 * The logging agent is transpiled to one plain `.mjs` file so that no TypeScript loader slows down each agent start.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { isJsonRpcLine, startServer, tempDir, type Notification } from "../support/server-process.js";
import { resumeGoalWhenLeaseFree } from "../support/goal-run.js";

/** Three independent items: the heuristic leader derives one criterion per item and one task per criterion. */
const GOAL = "Prepare the release:\n- Write the changelog\n- Update the version number\n- Draft the announcement";

interface GoalStatus {
  status: string;
  phaseIndex: number;
  productId?: string;
  progressSummary: string;
  acceptance: { passed: number; total: number };
}
interface ProductStatus {
  tasks: { taskId: string; status: string; attempts: number }[];
}

const isGoal = (goalRunId: string, method: string) => (n: Notification) =>
  n.method === method && n.params.goalRunId === goalRunId;

describe("goal runs over stdio: crash and restart", () => {
  it("kill -9 during a phase, restart, x/goal.resume: the goal finishes without re-running the phase's completed tasks", async () => {
    const workspace = tempDir("acp-orch-goal-crash-");
    const statePath = join(tempDir(), "state.db");
    const log = join(workspace, "executions.jsonl");
    const script = compileLoggingAgent(tempDir("acp-orch-goal-agent-"));
    const agent = (agentId: string, env: Record<string, string>) => ({
      agentId,
      command: process.execPath,
      args: [script],
      env: { LOGGING_AGENT_LOG: log, ...env },
    });
    // Roster order [quick, slow, builtin-worker] (builtinWorker: true puts it on the team) → t1 on quick, t2 on slow, t3 on the built-in worker. The slow
    // agent takes its sleep from the server's environment: ten minutes in the first process, the default after.
    writeFileSync(
      join(workspace, "acp-orchestrator.json"),
      JSON.stringify({
        agents: [agent("quick", { LOGGING_AGENT_MIN_MS: "10", LOGGING_AGENT_MAX_MS: "30" }), agent("slow", {})],
        builtinWorker: true,
      }),
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
      n.method === "product.taskStatus" &&
      n.params.productId === productId &&
      n.params.taskId === taskId &&
      n.params.status === "completed";
    await first.waitFor(taskDone("t1"), 30_000);
    await first.waitFor(taskDone("t3"), 30_000);
    await first.waitFor(
      (n) =>
        n.method === "product.taskStatus" &&
        n.params.taskId === "t2" &&
        n.params.status === "running" &&
        n.params.productId === productId,
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
    await resumeGoalWhenLeaseFree(second, goalRunId);
    expect((await ended).params).toMatchObject({ endReason: "achieved" });
    const status = await second.request<GoalStatus>("x/goal.status", { goalRunId });
    expect(status).toMatchObject({
      status: "completed",
      phaseIndex: 0,
      productId,
      acceptance: { passed: 3, total: 3 },
    });
    // Same product (the phase was not started again); no second phase.
    expect(second.notifications.filter(isGoal(goalRunId, "x/goal.phaseStarted"))).toHaveLength(0);
    const product = await second.request<ProductStatus>("product.status", { productId });
    expect(product.tasks.map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["t1", "completed", 1],
      ["t2", "completed", 2],
      ["t3", "completed", 1],
    ]);
    // The executions the workers logged outside the server: t1 once, t2 twice (interrupted, then again).
    expect(
      starts()
        .map((e) => `${e.taskId}@${e.attempt}`)
        .sort(),
    ).toEqual(["t1@1", "t2@1", "t2@2"]);
    expect(await second.close()).toBe(0);
    expect([...first.stdoutLines, ...second.stdoutLines].every(isJsonRpcLine)).toBe(true);
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

/** Transpiles the logging agent fixture to one plain ESM file runnable by `node` (as test/e2e/crash-resume.test.ts). */
function compileLoggingAgent(dir: string): string {
  const source = readFileSync(fileURLToPath(new URL("../fixtures/agents/logging-agent.ts", import.meta.url)), "utf8");
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  const sdk = pathToFileURL(createRequire(import.meta.url).resolve("@agentclientprotocol/sdk")).href;
  const file = join(dir, "logging-agent.mjs");
  writeFileSync(file, outputText.replaceAll('from "@agentclientprotocol/sdk"', `from ${JSON.stringify(sdk)}`));
  return file;
}
