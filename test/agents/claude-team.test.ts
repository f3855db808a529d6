/**
 * The Claude agents as a team (issue 11, "Must show"): the published claude-agent-acp leads (its plan is a fenced
 * JSON block the fake model writes), claude-agent-acp and claude-code-acp work, in a real git repository with
 * worktree isolation and the policy `{"default": "deny", "rules": {"edit": "allow"}}` (claude-code's permission
 * request has no `kind`: it comes from its earlier `tool_call`). The product completes with both files on the
 * integration branch; the tokens charged for the claude-agent task equal what the fake model answered; the suite prints
 * the time from the model's `end_turn` to the next task's start.
 */
import { describe, expect, it } from "vitest";
import { git, makeRepo } from "../support/git-repo.js";
import { claudeAgent } from "./support/agents.js";
import type { ModelRequest } from "./support/fake-model.js";
import { answerStep, fencedJson, routeScript, writeStep, type WorkerStep } from "./support/scripts.js";
import { productCompleted, report, startSuiteServer, suiteModel, taskStatus } from "./support/suite.js";
import { waitUntilGone } from "./support/processes.js";

interface Status {
  phase: string;
  tasks: { taskId: string; status: string; output?: string; error?: string; attempts: number }[];
  budget: { usedTokens: number; inputTokens: number; outputTokens: number; tokenSource: string };
}

const PLAN = {
  name: "Notes by two Claudes",
  summary: "Claude Agent writes the first note, Claude Code the second one after it.",
  instances: [
    { instanceId: "w1", agentId: "claude-agent", role: "worker" },
    { instanceId: "w2", agentId: "claude-code", role: "worker" },
  ],
  tasks: [
    {
      taskId: "t1",
      title: "Write the first note",
      description: "Create notes/first.md saying hello.",
      instanceId: "w1",
      dependsOn: [],
      maxAttempts: 1,
    },
    {
      taskId: "t2",
      title: "Write the second note",
      description: "Create notes/second.md after the first one.",
      instanceId: "w2",
      dependsOn: ["t1"],
      maxAttempts: 1,
    },
  ],
};

const WORK: Record<string, WorkerStep[]> = {
  t1: [writeStep("notes/first.md", "# First\n\nhello from claude-agent-acp\n"), answerStep("Wrote notes/first.md.")],
  t2: [writeStep("notes/second.md", "# Second\n\nhello from claude-code-acp\n"), answerStep("Wrote notes/second.md.")],
};

describe("Claude agents as leader and workers", () => {
  it("plans with claude-agent-acp, runs claude-agent-acp and claude-code-acp workers under {default: deny, rules: {edit: allow}}, counts claude-agent's tokens exactly", async () => {
    const model = await suiteModel(
      routeScript({
        leader: (kind) =>
          kind === "plan"
            ? { text: `Two notes, one after the other.\n\n${fencedJson(PLAN)}` }
            : { text: "Nothing to change." },
        worker: (brief) => WORK[brief.taskId] ?? [],
      }),
    );
    const lead = claudeAgent({ agentId: "lead", package: "claude-agent-acp", model, role: "leader" });
    const agentWorker = claudeAgent({ agentId: "claude-agent", package: "claude-agent-acp", model });
    const codeWorker = claudeAgent({ agentId: "claude-code", package: "claude-code-acp", model });
    const repo = makeRepo({ "README.md": "# Project\n" });
    const server = await startSuiteServer([lead, agentWorker, codeWorker], {
      leader: "lead",
      permissions: { default: "deny", rules: { edit: "allow" } },
    });

    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Write two notes: the first by Claude Agent, the second by Claude Code after it.",
      cwd: repo,
      allowedAgents: ["claude-agent", "claude-code"],
    });
    const ready = await server.waitFor(
      (n) =>
        (n.method === "product.planReady" || n.method === "product.planFailed") && n.params.productId === productId,
      120_000,
    );
    expect(ready.method, JSON.stringify(ready.params)).toBe("product.planReady");
    expect(
      (ready.params.plan as { tasks: { taskId: string; instanceId: string; dependsOn: string[] }[] }).tasks,
    ).toEqual([
      expect.objectContaining({ taskId: "t1", instanceId: "w1", dependsOn: [] }),
      expect.objectContaining({ taskId: "t2", instanceId: "w2", dependsOn: ["t1"] }),
    ]);
    await server.request("product.confirm", { productId });

    const done = await productCompleted(server, productId);
    const status = await server.request<Status>("product.status", { productId });
    expect(done.params.phase, JSON.stringify(status.tasks)).toBe("completed");
    expect(status.tasks.map((t) => [t.taskId, t.status])).toEqual([
      ["t1", "completed"],
      ["t2", "completed"],
    ]);
    // Both notes reached the integration branch; the user's branch is untouched.
    const branch = `acp/${productId}`;
    expect(git(repo, "show", `${branch}:notes/first.md`)).toContain("hello from claude-agent-acp");
    expect(git(repo, "show", `${branch}:notes/second.md`)).toContain("hello from claude-code-acp");
    expect(git(repo, "ls-tree", "--name-only", "main")).toBe("README.md");

    // Tokens: claude-agent-acp reports its model usage; claude-code-acp reports none (estimated), so the product is
    // "mixed". The claude-agent worker's share equals exactly what the fake model answered it.
    const fromAgentWorker = (r: ModelRequest) => r.client === agentWorker.mark;
    const counted = model.usageOf(fromAgentWorker);
    expect(counted.inputTokens).toBeGreaterThan(0);
    const budgetUpdates = server.notifications.filter(
      (n) => n.method === "product.budgetUpdate" && n.params.productId === productId,
    );
    const afterT1 = budgetUpdates.find((n) => n.params.inputTokens === counted.inputTokens);
    expect(afterT1?.params, `budget updates: ${JSON.stringify(budgetUpdates.map((n) => n.params))}`).toMatchObject({
      inputTokens: counted.inputTokens,
      outputTokens: counted.outputTokens,
    });
    expect(status.budget.tokenSource).toBe("mixed");
    expect(status.budget.inputTokens).toBeGreaterThanOrEqual(counted.inputTokens);
    report(
      `claude-agent-acp tokens: fake model answered ${counted.inputTokens} in / ${counted.outputTokens} out; ` +
        `charged ${String(afterT1?.params.inputTokens)} / ${String(afterT1?.params.outputTokens)}`,
    );

    // From the model's end_turn for t1 to t2's start (no 2 s grace after the turn).
    const t1Requests = model.log.filter((e) => fromAgentWorker(e.request) && e.answeredAt !== undefined);
    const endTurnAt = Math.max(...t1Requests.map((e) => e.answeredAt!));
    const t1Completed = await taskStatus(server, productId, "t1", "completed");
    const t2Running = await taskStatus(server, productId, "t2", "running");
    const gap = t2Running.receivedAt! - endTurnAt;
    report(
      `end_turn → next task start: ${gap} ms (end_turn → t1 completed ${t1Completed.receivedAt! - endTurnAt} ms; ` +
        `worktree commit and merge included)`,
    );
    expect(gap).toBeGreaterThanOrEqual(0);

    expect(await server.close()).toBe(0);
    const gone = await waitUntilGone([lead.mark, agentWorker.mark, codeWorker.mark], 5_000);
    expect(gone.remaining).toEqual([]);
  });
});
