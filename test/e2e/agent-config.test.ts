/**
 * Configuration errors of agents over stdio (issue 11; DESIGN.md "Processes"): a missing command and an agent that
 * requires authentication pause the product with a recovery naming the agent and the fix — no retry, no leader
 * consultation, nothing charged — and `check-agents` reports both (exit 1). With `auth: {methodId}` and its key the
 * same agent authenticates and works.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { CLI, startServer, tempDir } from "../support/server-process.js";

interface Status {
  phase: string;
  tasks: { taskId: string; status: string; attempts: number; error?: string }[];
  budget: { usedTokens: number };
  recovery?: { cause: string; resumable: boolean; remediation: string };
}

const authAgent = (agentId: string, extra: Record<string, unknown> = {}) => ({
  agentId,
  command: process.execPath,
  args: ["--import", tsxLoader, join(fixturesDir, "auth-agent.ts")],
  ...extra,
});

function writeConfig(dir: string, config: Record<string, unknown>): string {
  const file = join(dir, "agents.json");
  writeFileSync(file, JSON.stringify(config));
  return file;
}

describe.concurrent("agent configuration errors", () => {
  it.each([
    ["a missing command", { agentId: "ghost", command: "/nonexistent/ghost-acp" }, /fix "command" of agent "ghost"/],
    ["an agent that requires authentication", authAgent("locked"), /Give agent "locked" its credentials.*"api-key"/],
  ])("%s pauses the product with the fix: no retry, no consultation, nothing charged", async (_label, agent, fix) => {
    const workspace = tempDir("agent-config-");
    const config = writeConfig(workspace, { agents: [agent] });
    const server = await startServer({ cwd: workspace, args: ["--config", config] });
    const agentId = String(agent.agentId);
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Write the parser",
      cwd: workspace,
      allowedAgents: [agentId],
    });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    await server.request("product.confirm", { productId });
    await server.waitFor(
      (n) => n.method === "product.taskStatus" && n.params.productId === productId && n.params.status === "pending",
    );
    let status = await server.request<Status>("product.status", { productId });
    // Polled until paused, with a bound for a hang only (seven servers run side by side on a busy machine).
    for (const deadline = Date.now() + 60_000; status.phase !== "paused" && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 100));
      status = await server.request<Status>("product.status", { productId });
    }
    expect(status.phase).toBe("paused");
    expect(status.recovery?.resumable).toBe(true);
    expect(status.recovery?.cause).toContain(`"${agentId}"`);
    expect(status.recovery?.remediation).toMatch(fix);
    expect(status.tasks.map((t) => [t.status, t.attempts])).toEqual(
      status.tasks.map((_, i) => (i === 0 ? ["pending", 1] : ["pending", 0])),
    );
    expect(status.budget.usedTokens).toBe(0);
    const running = server.notifications.filter(
      (n) => n.method === "product.taskStatus" && n.params.productId === productId && n.params.status === "running",
    );
    expect(running).toHaveLength(1);
    expect(server.notifications.filter((n) => n.method === "product.dagMutated")).toEqual([]);
    expect(await server.close()).toBe(0);
  });

  it.each([
    [
      "a missing command",
      { agentId: "ghost-lead", command: "/nonexistent/ghost-acp" },
      /fix "command" of agent "ghost-lead"/,
    ],
    ["an agent that requires authentication", authAgent("locked-lead"), /Give agent "locked-lead" its credentials/],
  ])(
    "a leader with %s pauses the product before its plan with the fix; product.message plans again",
    async (_label, agent, fix) => {
      const workspace = tempDir("leader-config-");
      const config = writeConfig(workspace, { agents: [agent], leader: agent.agentId });
      const server = await startServer({ cwd: workspace, args: ["--config", config] });
      const { productId } = await server.request<{ productId: string }>("product.plan", {
        goal: "Write the parser",
        cwd: workspace,
      });
      const failed = await server.waitFor((n) => n.method === "product.planFailed" && n.params.productId === productId);
      expect(failed.params.error).toMatch(fix);
      let status = await server.request<Status>("product.status", { productId });
      expect(status.phase).toBe("paused");
      expect(status.recovery?.resumable).toBe(true);
      expect(status.recovery?.cause).toMatch(new RegExp(`^The leader could not plan: .*"${agent.agentId}"`));
      expect(status.recovery?.remediation).toMatch(fix);
      expect(status.recovery?.remediation).toMatch(/then send product\.message \(e\.g\. "plan again"\) to plan\.$/);
      expect(status.budget.usedTokens).toBe(0);
      // product.resume has no plan to run: it says what to do instead.
      const resumed = await server.request("product.resume", { productId }).then(
        () => new Error("product.resume was accepted"),
        (e: unknown) => e as Error,
      );
      expect(resumed.message).toMatch(/paused before it had a plan .*send product\.message to plan again/);
      // A message plans again (one leader start, no retry): still broken, so paused again with the same fix.
      const again = await server.request<{ response: string }>("product.message", { productId, content: "plan again" });
      expect(again.response).toMatch(fix);
      status = await server.request<Status>("product.status", { productId });
      expect(status.phase).toBe("paused");
      const planFailures = server.notifications.filter(
        (n) => n.method === "product.planFailed" && n.params.productId === productId,
      );
      expect(planFailures).toHaveLength(2);
      expect(await server.close()).toBe(0);
    },
  );

  it("a goal run whose leader cannot start is blocked with the fix and spends no phase, also after a resume", async () => {
    const workspace = tempDir("goal-config-");
    const config = writeConfig(workspace, {
      agents: [{ agentId: "ghost-lead", command: "/nonexistent/ghost-acp" }],
      leader: "ghost-lead",
    });
    const server = await startServer({ cwd: workspace, args: ["--config", config] });
    const { goalRunId } = await server.request<{ goalRunId: string }>("x/goal.start", {
      goal: "Write the changelog",
      cwd: workspace,
    });
    const isBlocked = (n: { method: string; params: Record<string, unknown> }) =>
      n.method === "x/goal.statusChanged" && n.params.goalRunId === goalRunId && n.params.status === "blocked";
    await server.waitFor(isBlocked);
    interface GoalStatus {
      status: string;
      phaseIndex: number;
      noProgressCount: number;
      productId?: string;
      usedTokens: number;
      failedReason?: string;
    }
    const first = await server.request<GoalStatus>("x/goal.status", { goalRunId });
    expect(first).toMatchObject({ status: "blocked", phaseIndex: 0, noProgressCount: 0, usedTokens: 0 });
    expect(first.productId).toBeUndefined();
    const blocked = server.notifications.find(isBlocked);
    expect(first.failedReason).toMatch(/fix "command" of agent "ghost-lead".*then call x\/goal\.resume\.$/);
    // Resuming with the agent still broken blocks it again, at the same phase: nothing was charged.
    await server.request("x/goal.resume", { goalRunId });
    await server.waitFor((n) => isBlocked(n) && n !== blocked);
    const second = await server.request<GoalStatus>("x/goal.status", { goalRunId });
    expect(second).toMatchObject({ status: "blocked", phaseIndex: 0, noProgressCount: 0, usedTokens: 0 });
    expect(
      server.notifications.filter(
        (n) =>
          n.params.goalRunId === goalRunId &&
          (n.method === "x/goal.phaseStarted" || n.method === "x/goal.phaseAssessed"),
      ),
    ).toEqual([]);
    expect(await server.close()).toBe(0);
  });

  it("check-agents reports every agent: ok, or the stage that failed and its fix; exit 1 when any fails", () => {
    const dir = tempDir("check-agents-");
    const config = writeConfig(dir, {
      agents: [
        { agentId: "ghost", command: "/nonexistent/ghost-acp" },
        authAgent("locked"),
        authAgent("keyed", { auth: { methodId: "api-key" }, env: { AUTH_AGENT_KEY: "secret" } }),
      ],
    });
    const run = spawnSync(process.execPath, [CLI, "check-agents", "--config", config], { cwd: dir, encoding: "utf8" });
    expect(run.status).toBe(1);
    const lines = run.stdout.split("\n");
    expect(lines[0]).toMatch(/^agent\s+status\s+capabilities\s+auth methods$/);
    expect(lines.find((l) => l.startsWith("ghost "))).toMatch(/error \(spawn\)/);
    expect(lines.find((l) => l.startsWith("locked "))).toMatch(/error \(session\/new\)\s+-\s+api-key/);
    expect(lines.find((l) => l.startsWith("keyed "))).toMatch(/^keyed\s+ok\s+-\s+api-key/);
    // The built-in worker is not on a configured team (issue 28), so it is not checked (a new user's trial)...
    expect(lines.find((l) => l.startsWith("builtin-worker "))).toBeUndefined();
    expect(run.stdout).toContain(
      'ghost: Could not start agent "ghost": the command "/nonexistent/ghost-acp" was not found.',
    );
    expect(run.stdout).toMatch(/locked: Agent "locked" requires authentication: session\/new answered error -32000/);
    // ...but with no agent configured it is the team, and checked.
    const bare = spawnSync(process.execPath, [CLI, "check-agents"], {
      cwd: tempDir("check-agents-none-"),
      encoding: "utf8",
    });
    expect(bare.status, bare.stderr).toBe(0);
    expect(bare.stdout.split("\n").find((l) => l.startsWith("builtin-worker "))).toMatch(/ ok /);
  });

  it("an agent with auth: {methodId} and its key authenticates and completes its task", async () => {
    const workspace = tempDir("agent-auth-");
    const config = writeConfig(workspace, {
      agents: [authAgent("keyed", { auth: { methodId: "api-key" }, env: { AUTH_AGENT_KEY: "secret" } })],
    });
    const server = await startServer({ cwd: workspace, args: ["--config", config] });
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Write the parser",
      cwd: workspace,
      allowedAgents: ["keyed"],
    });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    await server.request("product.confirm", { productId });
    const done = await server.waitFor(
      (n) => n.method === "product.completed" && n.params.productId === productId,
      60_000,
    );
    expect(done.params.phase).toBe("completed");
    expect(await server.close()).toBe(0);
  });
});
