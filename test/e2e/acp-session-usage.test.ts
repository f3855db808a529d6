/**
 * Two ACP session guarantees over real stdio with the official SDK client (issue 13, PROTOCOL.md section 4), neither
 * covered by acp-plain-client.test.ts:
 * - `usage_update {used, size}` reports the tokens a session's product used against its token budget: `used` is the
 *   workers' token usage (inputTokens + outputTokens of their prompt responses), `size` the budget's maxTotalTokens;
 *   a worker's own `usage_update` (its context window) is never passed on as the product's usage.
 * - `session/cancel` while a worker's permission question waits for the client: the prompt answers `cancelled` within
 *   3 s, no `session/request_permission` reaches the client after the cancel, and a prompt sent right after the
 *   cancel is served.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

interface Update {
  sessionUpdate: string;
  used?: number;
  size?: number;
  toolCallId?: string;
  status?: string;
  content?: { type: string; text?: string };
}

const confirm = { outcome: { outcome: "selected", optionId: "confirm" } };

function updatesOf(server: ServerHandle, sessionId: string): Update[] {
  return server.notifications
    .filter((n) => n.method === "session/update" && n.params.sessionId === sessionId)
    .map((n) => n.params.update as Update);
}

function prompt(server: ServerHandle, sessionId: string, text: string): Promise<{ stopReason: string }> {
  return server.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
}

async function waitUntil(what: string, cond: () => boolean, timeoutMs = 30_000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("ACP session: usage_update and cancel during a worker's permission question", () => {
  it("usage_update reports the workers' tokens against the product's token budget, not their context size", async () => {
    const base = tempDir("acp-usage-");
    const workspace = tempDir("acp-usage-ws-");
    const plan = {
      name: "Parser",
      summary: "Write the parser, then its tests.",
      instances: [{ instanceId: "w1", agentId: "coder", role: "worker" }],
      tasks: [
        { taskId: "t1", title: "Write the parser", description: "Write parser.ts.", instanceId: "w1", dependsOn: [] },
        {
          taskId: "t2",
          title: "Test the parser",
          description: "Write parser.test.ts.",
          instanceId: "w1",
          dependsOn: ["t1"],
        },
      ],
      budget: { maxTotalTokens: 10_000 },
    };
    const script = (name: string, body: Record<string, unknown>): string => {
      const file = join(base, `${name}.script.json`);
      writeFileSync(file, JSON.stringify({ ...body, log: join(base, `${name}.jsonl`) }));
      return file;
    };
    const agent = (agentId: string, file: string) => ({
      agentId,
      role: agentId === "lead" ? "leader" : "worker",
      command: process.execPath,
      args: [...SCRIPTED_AGENT_ARGS],
      env: { SCRIPTED_AGENT_SCRIPT: file },
    });
    const config = join(base, "acp-orchestrator.json");
    writeFileSync(
      config,
      JSON.stringify({
        leader: "lead",
        agents: [
          agent("lead", script("lead", { leader: { plan: [{ text: "Two tasks.", json: plan }] } })),
          agent(
            "coder",
            script("coder", {
              worker: {
                default: {
                  // The worker's context window in use: not the product's usage.
                  actions: [{ usage: { used: 5_000, size: 200_000 } }, { say: "working… " }],
                  text: "done",
                  usage: { inputTokens: 120, outputTokens: 30 },
                },
              },
            }),
          ),
        ],
      }),
    );
    const server = await startServer({ cwd: workspace, args: ["--config", config], onPermission: () => confirm });
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", {
      cwd: workspace,
      mcpServers: [],
    });
    expect(await server.request("session/set_mode", { sessionId, modeId: "auto" })).toEqual({});
    expect(await prompt(server, sessionId, "Write the parser and its tests.")).toEqual({ stopReason: "end_turn" });

    const usage = updatesOf(server, sessionId).filter((u) => u.sessionUpdate === "usage_update");
    const seen = usage.map((u) => `${u.used}/${u.size}`);
    expect(usage.length, seen.join(" ")).toBeGreaterThanOrEqual(2);
    expect(
      usage.every((u) => u.size === 10_000),
      seen.join(" "),
    ).toBe(true);
    // Each task adds 120 + 30 tokens; the counts only grow, and end at both tasks' sum.
    expect(seen).toContain("150/10000");
    expect(usage.at(-1)?.used).toBe(300);
    const used = usage.map((u) => u.used ?? -1);
    expect(used).toEqual([...used].sort((a, b) => a - b));
    expect(usage.some((u) => u.used === 5_000 || u.size === 200_000)).toBe(false);
    expect(await server.close()).toBe(0);
  });

  it("a cancel withdraws the worker's pending question, sends no new one, and the next prompt is served", async () => {
    const base = tempDir("acp-cancel-ask-");
    const workspace = tempDir("acp-cancel-ask-ws-");
    const config = join(base, "acp-orchestrator.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: [
          {
            agentId: "asker",
            command: process.execPath,
            args: ["--import", tsxLoader, join(fixturesDir, "fs-agent.ts"), "permission"],
          },
        ],
      }),
    );
    const questions: { at: number; title: string }[] = [];
    const held: (() => void)[] = [];
    const server = await startServer({
      cwd: workspace,
      args: ["--config", config],
      onPermission: (p) => {
        const title = String((p.toolCall as { title?: string } | undefined)?.title ?? "");
        if (title.startsWith("Run this plan")) return confirm;
        questions.push({ at: Date.now(), title });
        // The client never answers a worker's question by itself: only the cancel can end it.
        return new Promise((resolveLater) => held.push(() => resolveLater({ outcome: { outcome: "cancelled" } })));
      },
    });
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", {
      cwd: workspace,
      mcpServers: [],
    });
    const turn = prompt(server, sessionId, "Check the permissions of the workspace");
    await waitUntil("a worker's permission question", () => questions.length > 0);
    expect(questions[0]?.title).toMatch(/^Task t\d+ ".*": /);
    const askedBeforeCancel = questions.length;
    const cancelledAt = Date.now();
    await server.connection.agent.notify("session/cancel", { sessionId });
    const next = prompt(server, sessionId, "/status");
    expect(await turn).toEqual({ stopReason: "cancelled" });
    const answeredIn = Date.now() - cancelledAt;
    expect(answeredIn).toBeLessThan(3_000);
    expect(await next).toEqual({ stopReason: "end_turn" });
    const after = updatesOf(server, sessionId);
    expect(
      after
        .filter((u) => u.sessionUpdate === "agent_message_chunk")
        .map((u) => u.content?.text ?? "")
        .join(""),
    ).toContain("paused");
    // The worker asked once; the cancel withdrew that question and the product paused: nothing reached the client
    // after the cancel (the worker's later questions, if it got to ask them, were answered `cancelled` by the server).
    expect(questions.slice(askedBeforeCancel)).toEqual([]);
    expect(askedBeforeCancel).toBe(1);
    process.stderr.write(`cancel answered in ${answeredIn} ms\n`);
    for (const release of held) release();
    expect(await server.close()).toBe(0);
  });
});
