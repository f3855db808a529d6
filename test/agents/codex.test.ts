/**
 * The published codex-acp (pinned) as leader and workers against the fake model's OpenAI Responses API (issue 11,
 * "Must show"): Codex plans (a fenced JSON block) and its workers run commands under the per-kind policy
 * `{"default": "deny", "rules": {"execute": "allow"}}`; Codex's `usage_update.used` (the context size, which the fake
 * model makes huge) is not counted as tokens; the policy `deny` gives a failed task whose error names the refused
 * command (not "cancelled without being asked to"), without a retry; kill -9 of the server while Codex is mid-turn
 * (its model reply held open, a helper that ignores SIGTERM started) leaves no process within 5 s, and the fake
 * model sees no request after the kill.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo } from "../support/git-repo.js";
import { tempDir, type ServerHandle } from "../support/server-process.js";
import { codexAgent, execStep } from "./support/codex-agent.js";
import type { ModelRequest } from "./support/fake-model.js";
import { markedProcesses, waitUntilGone } from "./support/processes.js";
import { answerStep, fencedJson, holdStep, routeScript, type WorkerStep } from "./support/scripts.js";
import { productCompleted, report, startSuiteServer, suiteModel, taskStatus } from "./support/suite.js";

interface Status {
  phase: string;
  tasks: {
    taskId: string;
    status: string;
    output?: string;
    error?: string;
    attempts: number;
    refusedPermissions?: { kind: string; title: string; by: string }[];
  }[];
  budget: { usedTokens: number; inputTokens: number; outputTokens: number; tokenSource: string };
}

/**
 * What the fake model answers Codex per request: far more than any estimate, so counting `used` would show (and below
 * Codex's context window of its fallback model metadata, 258,400, or Codex compacts its conversation).
 */
const HUGE_USAGE = { inputTokens: 150_000, outputTokens: 10_000 };

/** Plans with the built-in leader, then confirms `tasks` on one `agentId` instance instead (an edited plan). */
async function runEditedPlan(
  server: ServerHandle,
  cwd: string,
  agentId: string,
  tasks: { taskId: string; title: string; description: string; dependsOn?: string[] }[],
): Promise<string> {
  const { productId } = await server.request<{ productId: string }>("product.plan", {
    goal: tasks.map((t) => t.title).join("; "),
    cwd,
    allowedAgents: [agentId],
    leaderAgentId: "heuristic",
  });
  await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId, 60_000);
  await server.request("product.confirm", {
    productId,
    instances: [{ instanceId: "w1", agentId, role: "worker" }],
    tasks: tasks.map((t) => ({ ...t, instanceId: "w1", dependsOn: t.dependsOn ?? [], maxAttempts: 2 })),
  });
  return productId;
}

describe("codex-acp as leader and workers", () => {
  it("plans with codex-acp and runs codex-acp workers under {default: deny, rules: {execute: allow}}; usage_update is no usage", async () => {
    const plan = {
      name: "Notes by Codex",
      summary: "Codex writes the first note, then the second.",
      instances: [{ instanceId: "w1", agentId: "codex", role: "worker" }],
      tasks: [
        {
          taskId: "t1",
          title: "Write the first note",
          description: "Create first.md.",
          instanceId: "w1",
          dependsOn: [],
        },
        {
          taskId: "t2",
          title: "Write the second note",
          description: "Create second.md after the first.",
          instanceId: "w1",
          dependsOn: ["t1"],
        },
      ],
    };
    const work: Record<string, WorkerStep[]> = {
      t1: [execStep("printf 'hello from codex\\n' > first.md"), answerStep("Wrote first.md.")],
      t2: [execStep("printf 'second from codex\\n' > second.md"), answerStep("Wrote second.md.")],
    };
    const script = routeScript({
      leader: (kind) =>
        kind === "plan" ? { text: `Two notes in order.\n\n${fencedJson(plan)}` } : { text: "Nothing to change." },
      worker: (brief) => work[brief.taskId] ?? [],
    });
    const model = await suiteModel(async (request) => ({ ...(await script(request)), usage: HUGE_USAGE }));
    const lead = codexAgent({ agentId: "codex-lead", model, role: "leader" });
    const worker = codexAgent({ agentId: "codex", model });
    const repo = makeRepo({ "README.md": "# Project\n" });
    const server = await startSuiteServer([lead, worker], {
      leader: "codex-lead",
      permissions: { default: "deny", rules: { execute: "allow" } },
    });
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Write two notes with Codex, one after the other.",
      cwd: repo,
      allowedAgents: ["codex"],
    });
    const ready = await server.waitFor(
      (n) =>
        (n.method === "product.planReady" || n.method === "product.planFailed") && n.params.productId === productId,
      120_000,
    );
    expect(ready.method, JSON.stringify(ready.params)).toBe("product.planReady");
    await server.request("product.confirm", { productId });
    const done = await productCompleted(server, productId);
    const status = await server.request<Status>("product.status", { productId });
    expect(done.params.phase, JSON.stringify(status.tasks)).toBe("completed");
    expect(status.tasks.map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["t1", "completed", 1],
      ["t2", "completed", 1],
    ]);
    expect(git(repo, "show", `acp/${productId}:first.md`)).toBe("hello from codex");
    expect(git(repo, "show", `acp/${productId}:second.md`)).toBe("second from codex");

    // Codex reports no token usage in its prompt response; its usage_update carries `used` = the context in use
    // (here ≥ 450,000, what the fake model answered). That is not consumption: the product's tokens are estimated.
    const fromWorker = (r: ModelRequest) => r.client === worker.mark;
    const answered = model.usageOf(fromWorker);
    expect(answered.inputTokens).toBeGreaterThanOrEqual(4 * HUGE_USAGE.inputTokens);
    expect(status.budget.tokenSource).toBe("estimated");
    expect(status.budget.usedTokens).toBeGreaterThan(0);
    expect(status.budget.usedTokens).toBeLessThan(HUGE_USAGE.inputTokens);
    report(
      `codex-acp tokens: fake model answered ${answered.inputTokens} in / ${answered.outputTokens} out (usage_update ` +
        `used ≥ ${HUGE_USAGE.inputTokens + HUGE_USAGE.outputTokens}); charged ${status.budget.usedTokens} (estimated)`,
    );

    const t1Calls = model.log.filter((e) => fromWorker(e.request) && e.request.allText.includes("# Task t1:"));
    const endTurnAt = Math.max(...t1Calls.map((e) => e.answeredAt ?? 0));
    const t2Running = await taskStatus(server, productId, "t2", "running");
    report(`codex-acp end_turn → next task start: ${t2Running.receivedAt! - endTurnAt} ms (commit and merge included)`);

    expect(await server.close()).toBe(0);
    expect((await waitUntilGone([lead.mark, worker.mark], 5_000)).remaining).toEqual([]);
  });

  it("the policy deny fails a codex task with an error naming the refused command, without a retry", async () => {
    const model = await suiteModel(
      routeScript({ worker: () => [execStep("printf 'x\\n' > refused.txt"), answerStep("Done.")] }),
    );
    const worker = codexAgent({ agentId: "codex", model });
    const cwd = tempDir("codex-deny-");
    const server = await startSuiteServer([worker], { permissions: "deny" });
    const productId = await runEditedPlan(server, cwd, "codex", [
      { taskId: "t1", title: "Write refused.txt", description: "Create refused.txt." },
    ]);
    const failed = await taskStatus(server, productId, "t1", "failed");
    expect(failed.params.error).toMatch(/permission policy "deny" refused execute "printf 'x\\n' > refused\.txt"/);
    expect(failed.params.error).not.toMatch(/without being asked/);
    expect(failed.params.attempt).toBe(1);
    // No retry under the same policy: t1 ran once. (The built-in leader may then replace it with a fix-up task.)
    const t1Runs = server.notifications.filter(
      (n) => n.method === "product.taskStatus" && n.params.taskId === "t1" && n.params.status === "running",
    );
    expect(t1Runs).toHaveLength(1);
    const refused = server.notifications.filter(
      (n) =>
        n.method === "product.agentActivity" && n.params.taskId === "t1" && /refused/.test(String(n.params.toolName)),
    );
    expect(refused.map((n) => n.params.toolName)).toEqual([
      `printf 'x\\n' > refused.txt (execute): refused by the permission policy "deny"`,
    ]);
    expect(existsSync(join(cwd, "refused.txt"))).toBe(false);
    report(`codex-acp under deny: ${String(failed.params.error)}`);
    await server.request("product.cancel", { productId }).catch(() => undefined);
    expect(await server.close()).toBe(0);
    expect((await waitUntilGone([worker.mark], 5_000)).remaining).toEqual([]);
  });

  it("kill -9 of the server while codex is mid-turn: nothing remains within 5 s and the model sees no later request", async () => {
    const model = await suiteModel(
      routeScript({
        worker: () => [
          // A helper in a session of its own that ignores SIGTERM: a process group kill alone would miss it.
          execStep(
            `setsid -f bash -c 'trap "" TERM; exec sleep 600' </dev/null >/dev/null 2>&1; echo started`,
            "Starting a helper",
          ),
          holdStep("Thinking for a long while."),
        ],
      }),
    );
    const worker = codexAgent({ agentId: "codex", model });
    const server = await startSuiteServer([worker], { permissions: "allow" });
    await runEditedPlan(server, tempDir("codex-kill-"), "codex", [
      { taskId: "t1", title: "Start a watcher and think", description: "Start a helper, then think." },
    ]);
    // Codex's second model call of the turn is held open: it is mid-turn, its helper running.
    await model.waitForRequest((r) => r.client === worker.mark && r.assistantTurns === 1, 120_000);
    const before = markedProcesses([worker.mark]);
    expect(
      before.some((p) => p.command.includes("sleep 600")),
      JSON.stringify(before),
    ).toBe(true);
    const killedAt = Date.now();
    await server.kill();
    const gone = await waitUntilGone([worker.mark], 5_000);
    report(`kill -9 with codex mid-turn: ${before.length} processes gone after ${gone.elapsedMs} ms`);
    expect(gone.remaining).toEqual([]);
    // Anything already on its way would have arrived by now; nothing that could send one is left.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(model.requestsAfter(killedAt).filter((r) => r.client === worker.mark)).toEqual([]);
  });
});
