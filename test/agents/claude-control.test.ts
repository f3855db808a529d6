/**
 * Pause, resume and cancel with the published Claude agents mid-turn (issue 11, build item 9; PROTOCOL.md sections 4
 * and 5), their model replies held open:
 * - `product.pause` stops a claude-agent-acp worker (nothing of it remains, the model hears nothing more while
 *   paused); `product.resume` runs the interrupted task again without charging an attempt, and the product completes
 *   with claude-code-acp's dependent task;
 * - `product.cancel` answers once a claude-code-acp worker is gone;
 * - `session/cancel` in an ACP session (claude-agent-acp leading, claude-code-acp working) answers the prompt
 *   `cancelled` within 3 s with nothing of the agents left.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sleep } from "../fixtures/agents/pool-helpers.js";
import { tempDir } from "../support/server-process.js";
import { claudeAgent, type SuiteAgent } from "./support/agents.js";
import type { ModelRequest } from "./support/fake-model.js";
import { markedProcesses, waitUntilGone } from "./support/processes.js";
import { answerStep, fencedJson, holdStep, routeScript, writeStep, type WorkerStep } from "./support/scripts.js";
import { productCompleted, report, runTasks, startSuiteServer, suiteModel } from "./support/suite.js";

interface Status {
  phase: string;
  tasks: { taskId: string; status: string; attempts: number; error?: string }[];
}

const from = (agent: SuiteAgent) => (r: ModelRequest) => r.client === agent.mark;
const POLICY = { default: "deny", rules: { edit: "allow" } };

describe("pause, resume and cancel with Claude agents", () => {
  it("pauses a claude-agent-acp worker mid-turn, resumes it to completion; cancels a claude-code-acp worker mid-turn", async () => {
    let holding = true;
    const firstStep =
      (file: string): WorkerStep =>
      (brief, request) =>
        holding ? holdStep()(brief, request) : writeStep(file, `# ${file}\n`)(brief, request);
    const model = await suiteModel(
      routeScript({
        worker: (brief) =>
          brief.taskId === "t1"
            ? [firstStep("first.md"), answerStep("Wrote first.md.")]
            : brief.taskId === "t2"
              ? [writeStep("second.md", "# second\n"), answerStep("Wrote second.md.")]
              : [holdStep()],
      }),
    );
    const agentWorker = claudeAgent({ agentId: "claude-agent", package: "claude-agent-acp", model });
    const codeWorker = claudeAgent({ agentId: "claude-code", package: "claude-code-acp", model });
    const server = await startSuiteServer([agentWorker, codeWorker], { permissions: POLICY });
    const pausedWs = tempDir("agents-pause-");
    const paused = await runTasks(
      server,
      pausedWs,
      [
        { taskId: "t1", agentId: "claude-agent", title: "Write the first file" },
        { taskId: "t2", agentId: "claude-code", title: "Write the second file", dependsOn: ["t1"] },
      ],
      { isolation: "shared" },
    );
    const cancelled = await runTasks(
      server,
      tempDir("agents-cancel-"),
      [{ taskId: "t9", agentId: "claude-code", title: "Think forever" }],
      { isolation: "shared" },
    );
    await Promise.all([model.waitForHeld(from(agentWorker), 180_000), model.waitForHeld(from(codeWorker), 180_000)]);

    // Pause: the worker is stopped (nothing of it remains) and t1 goes back to pending, its attempt not charged.
    expect(await server.request("product.pause", { productId: paused })).toEqual({
      productId: paused,
      phase: "paused",
    });
    const pausedAt = Date.now();
    const stopped = await waitUntilGone([agentWorker.mark], 5_000);
    report(`product.pause: claude-agent-acp gone ${stopped.elapsedMs} ms after pause answered`);
    expect(stopped.remaining).toEqual([]);
    const whilePaused = await server.request<Status>("product.status", { productId: paused });
    expect(whilePaused.phase).toBe("paused");
    expect(whilePaused.tasks.map((t) => [t.taskId, t.status])).toEqual([
      ["t1", "pending"],
      ["t2", "pending"],
    ]);

    // Cancel: answers once the claude-code worker is gone.
    expect(await server.request("product.cancel", { productId: cancelled })).toEqual({
      productId: cancelled,
      phase: "cancelled",
    });
    const cancelledAt = Date.now();
    expect(markedProcesses([codeWorker.mark]), "claude-code-acp still running after product.cancel answered").toEqual(
      [],
    );

    // Paused means quiet: no model request from either product for a while.
    await sleep(2_000);
    expect(model.requestsAfter(Math.min(pausedAt, cancelledAt)).map((r) => r.client)).toEqual([]);

    // Resume: t1 runs again (the interrupted attempt was not charged), then t2; the product completes.
    holding = false;
    expect(await server.request("product.resume", { productId: paused })).toEqual({
      productId: paused,
      phase: "executing",
    });
    const done = await productCompleted(server, paused);
    const status = await server.request<Status>("product.status", { productId: paused });
    expect(done.params.phase, JSON.stringify(status.tasks)).toBe("completed");
    expect(status.tasks.map((t) => [t.taskId, t.status])).toEqual([
      ["t1", "completed"],
      ["t2", "completed"],
    ]);
    expect(existsSync(join(pausedWs, "first.md"))).toBe(true);
    expect(existsSync(join(pausedWs, "second.md"))).toBe(true);
    const t1Runs = server.notifications.filter(
      (n) =>
        n.method === "product.taskStatus" &&
        n.params.productId === paused &&
        n.params.taskId === "t1" &&
        n.params.status === "running",
    );
    expect(t1Runs).toHaveLength(2);
    // From the model's end_turn of t1 (its last reply) to t2's start, shared isolation (no git step in between).
    const endTurnAt = Math.max(
      ...model.log.filter((e) => from(agentWorker)(e.request) && e.answeredAt !== undefined).map((e) => e.answeredAt!),
    );
    const t2Running = server.notifications.find(
      (n) =>
        n.method === "product.taskStatus" &&
        n.params.productId === paused &&
        n.params.taskId === "t2" &&
        n.params.status === "running",
    );
    report(`end_turn → next task start (shared isolation): ${t2Running!.receivedAt! - endTurnAt} ms`);
    expect((await server.request<Status>("product.status", { productId: cancelled })).phase).toBe("cancelled");
    expect(await server.close()).toBe(0);
    expect((await waitUntilGone([agentWorker.mark, codeWorker.mark], 5_000)).remaining).toEqual([]);
  });

  it("session/cancel answers the prompt cancelled within 3 s while claude-code-acp is mid-turn, leaving nothing", async () => {
    const plan = {
      name: "A long think",
      summary: "Claude Code thinks.",
      instances: [{ instanceId: "w1", agentId: "claude-code", role: "worker" }],
      tasks: [{ taskId: "t1", title: "Think", description: "Think hard.", instanceId: "w1", dependsOn: [] }],
    };
    const model = await suiteModel(
      routeScript({
        leader: (kind) => (kind === "plan" ? { text: `One task.\n\n${fencedJson(plan)}` } : { text: "Fine." }),
        worker: () => [holdStep()],
      }),
    );
    const lead = claudeAgent({ agentId: "lead", package: "claude-agent-acp", model, role: "leader" });
    const codeWorker = claudeAgent({ agentId: "claude-code", package: "claude-code-acp", model });
    const server = await startSuiteServer([lead, codeWorker], { leader: "lead", permissions: POLICY });
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", {
      cwd: tempDir("agents-session-cancel-"),
      mcpServers: [],
    });
    const prompt = server.request<{ stopReason: string }>("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "Think hard with Claude Code." }],
    });
    await model.waitForHeld(from(codeWorker), 180_000);
    const running = server.notifications.find(
      (n) => n.method === "session/update" && JSON.stringify(n.params).includes('"in_progress"'),
    );
    expect(running, "the task's tool call is in progress").toBeDefined();
    const cancelAt = Date.now();
    await server.connection.agent.notify("session/cancel", { sessionId });
    const answer = await prompt;
    const elapsed = Date.now() - cancelAt;
    report(`session/cancel with claude-code-acp mid-turn: prompt answered ${answer.stopReason} after ${elapsed} ms`);
    expect(answer).toEqual({ stopReason: "cancelled" });
    expect(elapsed).toBeLessThan(3_000);
    const gone = await waitUntilGone([codeWorker.mark], 5_000);
    expect(gone.remaining).toEqual([]);
    await sleep(1_000);
    expect(model.requestsAfter(cancelAt).filter(from(codeWorker))).toEqual([]);
    expect(await server.close()).toBe(0);
    expect((await waitUntilGone([lead.mark, codeWorker.mark], 5_000)).remaining).toEqual([]);
  });
});
