/**
 * `session/cancel` over real stdio (PROTOCOL.md section 4, ACP prompt-turn cancellation): during planning, during the
 * plan's permission request, and during execution, the prompt answers `{stopReason: "cancelled"}` (never an error).
 * An executing product is paused and its worker process is gone by the time the answer arrives; a planning product
 * keeps its phase and the next prompt continues the dialogue (a plan the user has not seen is shown, not run). The
 * planning case uses a model-backed leader (test/fixtures/agents/scripted-agent.ts) that takes a while to answer.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixturesDir, isAlive, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

interface Update {
  sessionUpdate: string;
  toolCallId?: string;
  status?: string;
  content?: { text?: string };
}
interface Status {
  phase: string;
  tasks: { taskId: string; status: string; attempts: number }[];
  recovery?: { cause: string };
}

const confirm = { outcome: { outcome: "selected", optionId: "confirm" } };

/** The plan the scripted leader answers with: one task on the built-in worker. */
const PLAN = {
  name: "Release notes",
  summary: "Write the release notes.",
  instances: [{ instanceId: "w1", agentId: "builtin-worker", role: "worker" }],
  tasks: [
    { taskId: "t1", title: "Write the notes", description: "Write notes/release.md.", instanceId: "w1", dependsOn: [] },
  ],
};

function updatesOf(server: ServerHandle, sessionId: string): Update[] {
  return server.notifications
    .filter((n) => n.method === "session/update" && n.params.sessionId === sessionId)
    .map((n) => n.params.update as Update);
}

function prompt(server: ServerHandle, sessionId: string, text: string): Promise<{ stopReason: string }> {
  return server.request<{ stopReason: string }>("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
}

function cancel(server: ServerHandle, sessionId: string): Promise<void> {
  return server.connection.agent.notify("session/cancel", { sessionId });
}

async function onlyProduct(server: ServerHandle): Promise<Status & { productId: string }> {
  const { products } = await server.request<{ products: { productId: string }[] }>("product.list", {});
  expect(products).toHaveLength(1);
  const productId = products[0]!.productId;
  return { productId, ...(await server.request<Status>("product.status", { productId })) };
}

function pids(workspace: string): number[] {
  const file = join(workspace, ".fs-agent.pids");
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number) : [];
}

describe.concurrent("session/cancel over stdio", () => {
  it("during planning: answers cancelled while the leader thinks; a later 'yes' shows the finished plan before running it", async () => {
    // A model-backed leader (the scripted agent) that takes 1.5 s to plan, so the cancel surely lands during planning.
    const workspace = tempDir("acp-cancel-ws-");
    const script = join(workspace, "lead.script.json");
    writeFileSync(
      script,
      JSON.stringify({ leader: { plan: [{ text: "Thinking it over.", json: PLAN, delayMs: 1_500 }] } }),
    );
    const config = join(tempDir("acp-cancel-"), "acp-orchestrator.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: [
          {
            agentId: "lead",
            role: "leader",
            command: process.execPath,
            args: [...SCRIPTED_AGENT_ARGS],
            env: { SCRIPTED_AGENT_SCRIPT: script },
          },
        ],
        leader: "lead",
      }),
    );
    const asked: string[] = [];
    const server = await startServer({
      cwd: workspace,
      args: ["--config", config],
      onPermission: (params) => {
        asked.push((params.toolCall as { toolCallId: string }).toolCallId);
        return confirm;
      },
    });
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", {
      cwd: workspace,
      mcpServers: [],
    });
    const answer = prompt(server, sessionId, "Write the release notes");
    await cancel(server, sessionId);
    expect(await answer).toEqual({ stopReason: "cancelled" });
    expect(asked).toEqual([]);
    // "Paused" for a planning product: it keeps its phase (pause is only for executing/paused) and nothing runs.
    const during = await onlyProduct(server);
    expect(during.phase).toBe("planning");
    expect(updatesOf(server, sessionId).some((u) => u.sessionUpdate === "tool_call")).toBe(false);

    // "yes" while (or after) the leader finishes: the plan is shown and asked for, never run unseen.
    const mark = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "yes")).toEqual({ stopReason: "end_turn" });
    expect(asked).toHaveLength(1);
    const next = updatesOf(server, sessionId).slice(mark);
    const said = next
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => u.content?.text ?? "")
      .join("");
    expect(said).toContain("Thinking it over.");
    const planAt = next.findIndex((u) => u.sessionUpdate === "plan");
    const firstTool = next.findIndex((u) => u.sessionUpdate === "tool_call");
    expect(planAt).toBeGreaterThanOrEqual(0);
    expect(planAt).toBeLessThan(firstTool);
    expect(said).toContain("Done: all 1 task completed.");
    const done = await onlyProduct(server);
    expect(done.phase).toBe("completed");
    expect(done.tasks.map((t) => t.taskId)).toEqual(["t1"]);
    expect(await server.close()).toBe(0);
  });

  it("during the permission request: answers cancelled, runs nothing, and the plan can still be confirmed later", async () => {
    const workspace = tempDir("acp-cancel-ws-");
    let sessionId = "";
    let turn = 0;
    const server: ServerHandle = await startServer({
      cwd: workspace,
      onPermission: async () => {
        if (++turn > 1) return confirm;
        // Like an IDE whose user pressed stop while the question was open: cancel, then withdraw the question.
        await cancel(server, sessionId);
        return { outcome: { outcome: "cancelled" } };
      },
    });
    ({ sessionId } = await server.request<{ sessionId: string }>("session/new", { cwd: workspace, mcpServers: [] }));
    expect(await prompt(server, sessionId, "Write the guide, then review it")).toEqual({ stopReason: "cancelled" });
    const parked = await onlyProduct(server);
    expect(parked.phase).toBe("awaiting_confirmation");
    expect(parked.tasks).toEqual([]);
    expect(updatesOf(server, sessionId).some((u) => u.sessionUpdate === "tool_call")).toBe(false);

    expect(await prompt(server, sessionId, "confirm")).toEqual({ stopReason: "end_turn" });
    expect(turn).toBe(1); // the plan had been shown: the typed confirm runs it without asking again
    expect((await onlyProduct(server)).phase).toBe("completed");
    expect(await server.close()).toBe(0);
  });

  it("during execution: answers cancelled once the worker process is gone; the product is paused and resumable", async () => {
    const base = tempDir("acp-cancel-");
    const workspace = tempDir("acp-cancel-ws-");
    const config = join(base, "acp-orchestrator.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: [
          {
            agentId: "hang",
            command: process.execPath,
            args: ["--import", tsxLoader, join(fixturesDir, "fs-agent.ts"), "hang"],
          },
        ],
      }),
    );
    // Uses the extension (PROTOCOL.md section 2) to see the worker's output delta, i.e. that the worker runs.
    const server = await startServer({
      cwd: workspace,
      args: ["--config", config],
      onPermission: () => confirm,
      clientCapabilities: { _meta: { "acp-orchestrator": {} } },
    });
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", {
      cwd: workspace,
      mcpServers: [],
    });
    const answer = prompt(server, sessionId, "Describe the architecture, then document the API");
    await server.waitFor(
      (n) =>
        n.method === "session/update" &&
        /^prd_[^/]+\/t1$/.test((n.params.update as Update).toolCallId ?? "") &&
        (n.params.update as Update).status === "in_progress",
    );
    await server.waitFor((n) => n.method === "product.taskOutputDelta" && n.params.taskId === "t1");
    const workers = pids(workspace);
    expect(workers).toHaveLength(1);
    expect(isAlive(workers[0]!)).toBe(true);
    await cancel(server, sessionId);
    expect(await answer).toEqual({ stopReason: "cancelled" });
    // No orphan: the worker exited before the turn answered.
    expect(workers.filter(isAlive)).toEqual([]);
    const paused = await onlyProduct(server);
    expect(paused.phase).toBe("paused");
    expect(paused.tasks.find((t) => t.taskId === "t1")).toMatchObject({ status: "pending", attempts: 1 });
    expect(paused.recovery?.cause).toContain("paused");
    // The interrupted task's tool call went back to pending before the answer; nothing was sent after it.
    const t1 = updatesOf(server, sessionId)
      .filter((u) => /^prd_[^/]+\/t1$/.test(u.toolCallId ?? ""))
      .map((u) => u.status);
    expect(t1).toEqual(["pending", "in_progress", "pending"]);
    expect(await server.close()).toBe(0);
    expect(pids(workspace).filter(isAlive)).toEqual([]);
  });
});
