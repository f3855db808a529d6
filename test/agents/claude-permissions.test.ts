/**
 * Permission refusals with the published Claude agents (issue 11 "Must show"):
 * - headless with the policy `deny`, a claude-agent-acp and a claude-code-acp worker that try to write end their
 *   turns normally, yet each task fails with an error naming the refused action (kind and title) and the policy, is
 *   not retried under the same policy, keeps the refusal in `refusedPermissions`, and no file is written;
 * - in an ACP session, a claude-code-acp worker's write (its request has no `kind`: the IDE is asked with the `edit`
 *   of its earlier `tool_call`) refused by the IDE is shown in the session: the task's tool call says what was
 *   refused and by whom.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../support/server-process.js";
import { claudeAgent } from "./support/agents.js";
import { answerStep, fencedJson, routeScript, writeStep } from "./support/scripts.js";
import { productCompleted, report, runTasks, startSuiteServer, suiteModel, taskStatus } from "./support/suite.js";

interface Status {
  phase: string;
  tasks: {
    taskId: string;
    status: string;
    attempts: number;
    error?: string;
    output?: string;
    refusedPermissions?: { kind: string; title: string; by: string }[];
  }[];
}

describe("Claude agents and refused permissions", () => {
  it('"deny" fails the task of claude-agent-acp and claude-code-acp, naming the refused write; no retry, no file', async () => {
    const model = await suiteModel(
      routeScript({
        worker: () => [writeStep("notes/denied.md", "should never exist\n"), answerStep("I could not write the note.")],
      }),
    );
    const agentWorker = claudeAgent({ agentId: "claude-agent", package: "claude-agent-acp", model });
    const codeWorker = claudeAgent({ agentId: "claude-code", package: "claude-code-acp", model });
    const server = await startSuiteServer([agentWorker, codeWorker], { permissions: "deny" });
    const cases = [
      { agent: agentWorker, cwd: tempDir("agents-deny-agent-") },
      { agent: codeWorker, cwd: tempDir("agents-deny-code-") },
    ];
    const products = await Promise.all(
      cases.map(({ agent, cwd }) =>
        runTasks(
          server,
          cwd,
          [{ taskId: "t1", agentId: agent.entry.agentId, title: "Write the note", maxAttempts: 3 }],
          {
            isolation: "shared",
          },
        ),
      ),
    );
    for (const [i, { agent, cwd }] of cases.entries()) {
      const productId = products[i]!;
      const failed = await taskStatus(server, productId, "t1", "failed", 180_000);
      const error = String(failed.params.error);
      report(`${agent.packageName} under "deny": ${error}`);
      expect(error).toMatch(
        new RegExp(
          `^The permission policy "deny" refused edit "Write [^"]*notes/denied\\.md" to agent "${agent.entry.agentId}"`,
        ),
      );
      expect(error).toContain("end_turn");
      const done = await productCompleted(server, productId);
      expect(done.params.phase).toBe("failed");
      // Not retried under the same policy: t1 ran once. (The built-in leader, consulted on the final failure, may
      // add a fix-up task; under the same policy it is refused the same way.)
      expect(
        server.notifications.filter(
          (n) =>
            n.method === "product.taskStatus" &&
            n.params.productId === productId &&
            n.params.taskId === "t1" &&
            n.params.status === "running",
        ),
      ).toHaveLength(1);
      expect(failed.params.attempt).toBe(1);
      const status = await server.request<Status>("product.status", { productId });
      expect(status.tasks.flatMap((t) => t.refusedPermissions ?? [])).toContainEqual({
        kind: "edit",
        title: expect.stringMatching(/^Write .*notes\/denied\.md$/),
        by: "policy",
      });
      expect(existsSync(join(cwd, "notes", "denied.md"))).toBe(false);
      // The refusal was announced as the tool call's activity.
      expect(
        server.notifications.some(
          (n) =>
            n.method === "product.agentActivity" &&
            n.params.productId === productId &&
            /notes\/denied\.md \(edit\): refused by the permission policy "deny"/.test(String(n.params.toolName)),
        ),
      ).toBe(true);
    }
    expect(await server.close()).toBe(0);
  });

  it("an IDE refusal of a claude-code-acp write in an ACP session is shown in the session", async () => {
    const plan = {
      name: "One note",
      summary: "Claude Code writes one note.",
      instances: [{ instanceId: "w1", agentId: "claude-code", role: "worker" }],
      tasks: [
        {
          taskId: "t1",
          title: "Write the note",
          description: "Create notes/ide.md.",
          instanceId: "w1",
          dependsOn: [],
          maxAttempts: 1,
        },
      ],
    };
    const model = await suiteModel(
      routeScript({
        leader: (kind) => (kind === "plan" ? { text: `One task.\n\n${fencedJson(plan)}` } : { text: "Fine." }),
        worker: () => [
          writeStep("notes/ide.md", "refused by the IDE\n"),
          answerStep("The write was refused; no note."),
        ],
      }),
    );
    const lead = claudeAgent({ agentId: "lead", package: "claude-agent-acp", model, role: "leader" });
    const codeWorker = claudeAgent({ agentId: "claude-code", package: "claude-code-acp", model });
    const workspace = tempDir("agents-ide-");
    const forwarded: Record<string, unknown>[] = [];
    const server = await startSuiteServer(
      [lead, codeWorker],
      { leader: "lead", permissions: "allow" },
      {
        onPermission: (params) => {
          const toolCall = params.toolCall as { toolCallId: string };
          if (toolCall.toolCallId.startsWith("plan-")) return { outcome: { outcome: "selected", optionId: "confirm" } };
          forwarded.push(params);
          const options = params.options as { optionId: string; kind: string }[];
          return {
            outcome: { outcome: "selected", optionId: options.find((o) => o.kind === "reject_once")!.optionId },
          };
        },
      },
    );
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", {
      cwd: workspace,
      mcpServers: [],
    });
    const answer = await server.request<{ stopReason: string }>("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "Write one note with Claude Code." }],
    });
    expect(answer).toEqual({ stopReason: "end_turn" });

    // The IDE was asked (not the "allow" policy), with the kind of claude-code's earlier tool_call.
    expect(forwarded).toHaveLength(1);
    expect(forwarded[0]).toMatchObject({
      sessionId,
      toolCall: {
        toolCallId: expect.stringMatching(/^prd_[^/]+\/t1\//),
        title: expect.stringMatching(/^Task t1 "Write the note": Write .*notes\/ide\.md$/),
        kind: "edit",
      },
    });
    expect(existsSync(join(workspace, "notes", "ide.md"))).toBe(false);

    // The session shows the refusal on the task's tool call.
    const updates = server.notifications
      .filter((n) => n.method === "session/update" && n.params.sessionId === sessionId)
      .map(
        (n) =>
          n.params.update as {
            sessionUpdate: string;
            toolCallId?: string;
            status?: string;
            content?: { content?: { text?: string } }[];
          },
      );
    const taskUpdates = updates.filter((u) => /^prd_[^/]+\/t1$/.test(u.toolCallId ?? ""));
    const last = taskUpdates.at(-1);
    const shown = (last?.content ?? []).map((c) => c.content?.text ?? "").join("\n");
    report(`IDE refusal as shown in the session: ${JSON.stringify(shown)}`);
    expect(shown).toMatch(/refused by you: edit "Write [^"]*notes\/ide\.md"/i);
    expect(await server.close()).toBe(0);
  });
});
