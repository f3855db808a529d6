/**
 * A plain ACP client over real stdio (issue 13, PROTOCOL.md sections 2 and 4): the official SDK client, no `_meta`,
 * only `session/*`, drives a whole product, a revision, every command, a cancel and resume, an auto-mode and a
 * goal-mode run, and receives nothing but ACP messages (every one also checked against the ACP v1 JSON Schema by
 * test/support/acp-schema.ts). Who hears what: one `_product.*` call makes a client hear `_product.*` notifications,
 * a bare call bare ones, and the `_meta` opt-in's prefix wins. Each advertised session capability is exercised.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";

interface Update {
  sessionUpdate: string;
  toolCallId?: string;
  title?: string;
  status?: string;
  messageId?: string;
  content?: { type: string; text?: string } | { type: string; content: { text: string } }[];
  availableCommands?: { name: string }[];
  configOptions?: { id: string; currentValue: string; options: { value: string }[] }[];
  currentModeId?: string;
  entries?: unknown[];
}
interface Setup {
  sessionId: string;
  modes: { currentModeId: string; availableModes: { id: string }[] };
  configOptions: { id: string; category: string; currentValue: string; options: { value: string }[] }[];
}

const confirm = { outcome: { outcome: "selected", optionId: "confirm" } };
const revise = { outcome: { outcome: "selected", optionId: "revise" } };
const GOAL = "- Write the parser\n- Then write the tests for the parser";

function updatesOf(server: ServerHandle, sessionId: string): Update[] {
  return server.notifications
    .filter((n) => n.method === "session/update" && n.params.sessionId === sessionId)
    .map((n) => n.params.update as Update);
}

function said(updates: Update[]): string {
  return updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map((u) => (u.content as { text: string }).text)
    .join("");
}

function prompt(server: ServerHandle, sessionId: string, text: string): Promise<{ stopReason: string }> {
  return server.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
}

/** PROTOCOL.md section 2: a plain ACP connection receives ACP traffic only. */
function expectOnlyAcp(server: ServerHandle): void {
  const methods = new Set<string>();
  for (const line of server.stdoutLines) {
    const m = JSON.parse(line) as { method?: string };
    if (m.method !== undefined) methods.add(m.method);
  }
  for (const method of methods)
    expect(["session/update", "session/request_permission", "$/cancel_request"]).toContain(method);
}

/** The updates of one answer: every agent message ends with a blank line; each message has its own id. */
function expectSeparatedMessages(updates: Update[]): void {
  const byId = new Map<string, string>();
  for (const u of updates) {
    if (u.sessionUpdate !== "agent_message_chunk") continue;
    expect(u.messageId).toEqual(expect.any(String));
    byId.set(u.messageId!, (byId.get(u.messageId!) ?? "") + (u.content as { text: string }).text);
  }
  for (const text of byId.values()) expect(text.endsWith("\n\n"), JSON.stringify(text)).toBe(true);
}

async function waitUntil(what: string, cond: () => boolean, timeoutMs = 20_000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("a plain ACP client over stdio", () => {
  it("runs a whole product, a revision and every command with nothing but ACP", async () => {
    const workspace = tempDir("acp-plain-ws-");
    const answers = [confirm, revise];
    const asked: Record<string, unknown>[] = [];
    const server = await startServer({
      cwd: workspace,
      onPermission: (params) => {
        asked.push(params);
        return answers.shift() ?? confirm;
      },
    });
    const setup = await server.request<Setup>("session/new", { cwd: workspace, mcpServers: [] });
    const { sessionId } = setup;
    expect(setup.modes.currentModeId).toBe("confirm");
    expect(setup.modes.availableModes.map((m) => m.id)).toEqual(["confirm", "auto", "goal"]);
    expect(setup.configOptions.map((o) => [o.id, o.category])).toEqual([
      ["leader", "model"],
      ["parallelism", "_parallelism"],
      ["isolation", "_isolation"],
      ["integration", "_integration"],
    ]);
    for (const o of setup.configOptions) expect(o.options.map((v) => v.value)).toContain(o.currentValue);
    const commands = await server.waitFor(
      (n) => (n.params.update as Update | undefined)?.sessionUpdate === "available_commands_update",
    );
    expect((commands.params.update as Update).availableCommands!.map((c) => c.name)).toEqual([
      "status",
      "pause",
      "resume",
      "cancel",
      "checkpoint",
      "rollback",
      "replay",
      "goal",
    ]);

    // A whole product: plan, the permission question, execution, summary.
    expect(await prompt(server, sessionId, GOAL)).toEqual({ stopReason: "end_turn" });
    const first = updatesOf(server, sessionId);
    const question = asked[0]!.toolCall as {
      toolCallId: string;
      title: string;
      kind: string;
      rawInput: { productId: string; plan: { version: number; tasks: unknown[] } };
    };
    const productId = question.rawInput.productId;
    expect(question.toolCallId).toBe(`plan-${productId}-v${question.rawInput.plan.version}`);
    expect(question.kind).toBe("think");
    expect(question.title).toMatch(/^Run this plan: /);
    expect(question.rawInput.plan.tasks).toHaveLength(2);
    // One title everywhere (issue 28): the goal's first line while the leader plans, then the plan's name (the
    // product's name: test/e2e/human-output.test.ts), also the session's title in session/list. Nothing but ACP here:
    // a product.* request would subscribe this client to product.* notifications.
    const titles = first
      .filter((u) => u.sessionUpdate === "session_info_update")
      .map((u) => (u as { title: string }).title);
    expect(titles).toEqual(["Write the parser", "Parser and tests for the parser"]);
    expect(question.title).toBe("Run this plan: Parser and tests for the parser");
    const sessions = await server.request<{ sessions: { sessionId: string; title?: string }[] }>("session/list", {});
    expect(sessions.sessions.find((x) => x.sessionId === sessionId)?.title).toBe("Parser and tests for the parser");
    const toolUpdates = first.filter((u) => u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update");
    expect(new Set(toolUpdates.map((u) => u.toolCallId))).toEqual(new Set([`${productId}/t1`, `${productId}/t2`]));
    expect(toolUpdates.every((u) => typeof u.title === "string" && u.title !== "")).toBe(true);
    expect(said(first)).toContain("Done: all 2 tasks completed.");
    expectSeparatedMessages(first);

    // Commands on the completed product.
    const mark = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "/status")).toEqual({ stopReason: "end_turn" });
    expect(said(updatesOf(server, sessionId).slice(mark))).toContain("completed; 2 of 2 tasks completed");
    let at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "/checkpoint")).toEqual({ stopReason: "end_turn" });
    const checkpointId = /Checkpoint (\S+) taken/.exec(said(updatesOf(server, sessionId).slice(at)))?.[1];
    expect(checkpointId).toEqual(expect.any(String));
    at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "/replay t2")).toEqual({ stopReason: "end_turn" });
    expect(said(updatesOf(server, sessionId).slice(at))).toContain("Task t2 will run again; reset: t2");
    at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, `/rollback ${checkpointId!}`)).toEqual({ stopReason: "end_turn" });
    expect(said(updatesOf(server, sessionId).slice(at))).toContain(`Rolled back to checkpoint ${checkpointId!}`);
    at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "/pause")).toEqual({ stopReason: "end_turn" });
    expect(said(updatesOf(server, sessionId).slice(at))).toMatch(/Paused "|\/pause: /);
    at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "/resume")).toEqual({ stopReason: "end_turn" });
    expect(said(updatesOf(server, sessionId).slice(at))).toMatch(/Done: all 2 tasks completed|\/resume: /);
    at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "/cancel")).toEqual({ stopReason: "end_turn" });
    expect(said(updatesOf(server, sessionId).slice(at))).toMatch(/Cancelled "|\/cancel: /);

    // A revision: a new product (the last is terminal), its plan revised, then confirmed by a typed word.
    at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "- Write the guide\n- Then review the guide")).toEqual({
      stopReason: "end_turn",
    });
    expect(said(updatesOf(server, sessionId).slice(at))).toContain("Tell me what to change in the plan.");
    expect(await prompt(server, sessionId, "Remove task 2")).toEqual({ stopReason: "end_turn" });
    const revised = asked.at(-1)!.toolCall as { toolCallId: string };
    expect(revised.toolCallId).toMatch(/-v2$/);
    expect(said(updatesOf(server, sessionId).slice(at))).toContain("Done: all 1 task completed.");

    // /goal starts a goal run whatever the mode, and the turn follows it to its end.
    at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "/goal - Write the notes\n- Then write the summary")).toEqual({
      stopReason: "end_turn",
    });
    expect(said(updatesOf(server, sessionId).slice(at))).toContain("Goal run achieved");
    at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "/status")).toEqual({ stopReason: "end_turn" });
    expect(said(updatesOf(server, sessionId).slice(at))).toMatch(/Goal run \S+: completed \(achieved\)/);

    expectOnlyAcp(server);
    expect(await server.close()).toBe(0);
  });

  it("switches modes: auto runs without a question, goal reaches achieved with the built-in agents", async () => {
    const workspace = tempDir("acp-plain-ws-");
    const asked: unknown[] = [];
    const server = await startServer({ cwd: workspace, onPermission: (p) => (asked.push(p), confirm) });
    const { sessionId } = await server.request<Setup>("session/new", { cwd: workspace, mcpServers: [] });

    expect(await server.request("session/set_mode", { sessionId, modeId: "auto" })).toEqual({});
    await server.waitFor((n) => (n.params.update as Update | undefined)?.currentModeId === "auto");
    expect(await prompt(server, sessionId, GOAL)).toEqual({ stopReason: "end_turn" });
    expect(asked).toEqual([]);
    expect(said(updatesOf(server, sessionId))).toContain("Done: all 2 tasks completed.");

    expect(await server.request("session/set_mode", { sessionId, modeId: "goal" })).toEqual({});
    const at = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "- Write the parser\n- Then write the docs")).toEqual({
      stopReason: "end_turn",
    });
    const goal = updatesOf(server, sessionId).slice(at);
    expect(said(goal)).toContain("Acceptance criteria:");
    expect(said(goal)).toMatch(/Phase 1 assessed: \d+ of \d+ criteria pass/);
    expect(said(goal)).toContain("Goal run achieved");
    expect(goal.some((u) => u.sessionUpdate === "tool_call")).toBe(true);
    expect(goal.some((u) => u.sessionUpdate === "plan")).toBe(true);
    expect(asked).toEqual([]);

    const bad = await server.request("session/set_mode", { sessionId, modeId: "turbo" }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ code: -32602 });
    expectOnlyAcp(server);
    expect(await server.close()).toBe(0);
  });

  it("cancels during execution: cancelled within 3 s, no question after it, and prompts 0 ms and 50 ms later are served", async () => {
    const base = tempDir("acp-plain-");
    const workspace = tempDir("acp-plain-ws-");
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
    const requests: { at: number; method: string }[] = [];
    const server = await startServer({
      cwd: workspace,
      args: ["--config", config],
      onPermission: () => {
        requests.push({ at: Date.now(), method: "session/request_permission" });
        return confirm;
      },
    });
    const { sessionId } = await server.request<Setup>("session/new", { cwd: workspace, mcpServers: [] });
    const running = (): boolean =>
      updatesOf(server, sessionId).some(
        (u) => u.status === "in_progress" && /^prd_[^/]+\/t1$/.test(u.toolCallId ?? ""),
      );

    for (const delayMs of [0, 50]) {
      const turn = prompt(
        server,
        sessionId,
        delayMs === 0 ? "Describe the architecture, then document the API" : "resume",
      );
      await waitUntil("a running task", running);
      const mark = server.notifications.length;
      const cancelledAt = Date.now();
      await server.connection.agent.notify("session/cancel", { sessionId });
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      const next = prompt(server, sessionId, "/status");
      expect(await turn).toEqual({ stopReason: "cancelled" });
      expect(Date.now() - cancelledAt).toBeLessThan(3_000);
      expect(await next).toEqual({ stopReason: "end_turn" });
      expect(requests.filter((r) => r.at >= cancelledAt)).toEqual([]);
      expect(said(updatesOf(server, sessionId).slice(-3))).toContain("paused");
      // Forget the in-progress marks of this round.
      server.notifications.splice(0, mark);
    }
    expectOnlyAcp(server);
    expect(await server.close()).toBe(0);
  });

  it("exercises each session capability: load, resume, delete, list, set_config_option", async () => {
    const workspace = tempDir("acp-plain-ws-");
    const statePath = join(tempDir(), "state.db");
    const first = await startServer({ cwd: workspace, statePath, onPermission: () => revise });
    const { sessionId } = await first.request<Setup>("session/new", { cwd: workspace, mcpServers: [] });
    const changed = await first.request<{ configOptions: Setup["configOptions"] }>("session/set_config_option", {
      sessionId,
      configId: "parallelism",
      value: "2",
    });
    expect(changed.configOptions.map((o) => o.id)).toEqual(["leader", "parallelism", "isolation", "integration"]);
    expect(changed.configOptions.find((o) => o.id === "parallelism")?.currentValue).toBe("2");
    const announced = await first.waitFor(
      (n) => (n.params.update as Update | undefined)?.sessionUpdate === "config_option_update",
    );
    expect((announced.params.update as Update).configOptions).toEqual(changed.configOptions);
    for (const [configId, value] of [
      ["parallelism", "3"],
      ["speed", "2"],
      ["isolation", true],
    ] as const) {
      const refused = await first
        .request("session/set_config_option", { sessionId, configId, value })
        .catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: -32602 });
    }
    expect(await prompt(first, sessionId, GOAL)).toEqual({ stopReason: "end_turn" });
    expect(await first.close()).toBe(0);

    const second = await startServer({ cwd: workspace, statePath, onPermission: () => confirm });
    // Load: everything replayed before the answer (the commands too), nothing after it.
    const loaded = await second.request<Omit<Setup, "sessionId">>("session/load", {
      sessionId,
      cwd: workspace,
      mcpServers: [],
    });
    const atAnswer = second.notifications.length;
    expect(loaded.configOptions.find((o) => o.id === "parallelism")?.currentValue).toBe("2");
    const replay = updatesOf(second, sessionId);
    expect(replay[0]).toMatchObject({ sessionUpdate: "user_message_chunk" });
    expect(replay.some((u) => u.sessionUpdate === "plan")).toBe(true);
    expect(replay.some((u) => u.sessionUpdate === "available_commands_update")).toBe(true);

    // Resume: nothing replayed but the commands, before the answer; nothing after either.
    const mark = second.notifications.length;
    expect(mark).toBe(atAnswer);
    const resumed = await second.request<Omit<Setup, "sessionId">>("session/resume", { sessionId, cwd: workspace });
    expect(resumed.modes.currentModeId).toBe("confirm");
    expect(second.notifications.slice(mark).map((n) => (n.params.update as Update).sessionUpdate)).toEqual([
      "available_commands_update",
    ]);
    const afterResume = second.notifications.length;
    const missing = await second
      .request("session/resume", { sessionId: "ses_missing", cwd: workspace })
      .catch((e: unknown) => e);
    expect(missing).toMatchObject({ code: -32002 });

    // Delete: an unknown id succeeds; a deleted session leaves session/list; its product stays.
    expect(await second.request("session/delete", { sessionId: "ses_missing" })).toEqual({});
    expect(second.notifications.length).toBe(afterResume);
    expect((await second.request<{ sessions: unknown[] }>("session/list", {})).sessions).toHaveLength(1);
    expect(await second.request("session/delete", { sessionId })).toEqual({});
    expect(await second.request("session/list", {})).toEqual({ sessions: [] });
    const gone = await second
      .request("session/load", { sessionId, cwd: workspace, mcpServers: [] })
      .catch((e: unknown) => e);
    expect(gone).toMatchObject({ code: -32002 });
    expectOnlyAcp(second);
    expect(await second.close()).toBe(0);
  });
});

describe("who hears what (PROTOCOL.md section 2)", () => {
  async function run(capabilities: Record<string, unknown> | undefined, call: string | undefined): Promise<string[]> {
    const workspace = tempDir("acp-plain-ws-");
    const server = await startServer({ cwd: workspace, ...(capabilities ? { clientCapabilities: capabilities } : {}) });
    if (call !== undefined) {
      const e = await server.request(call, { productId: "prd_missing" }).catch((err: unknown) => err);
      expect(e).toMatchObject({ code: -32002 });
    }
    const { sessionId } = await server.request<Setup>("session/new", { cwd: workspace, mcpServers: [] });
    expect(await prompt(server, sessionId, GOAL)).toEqual({ stopReason: "end_turn" });
    const methods = [...new Set(server.notifications.map((n) => n.method))].filter((m) => m !== "session/update");
    expect(await server.close()).toBe(0);
    return methods;
  }

  it("a client that called _product.status once hears _product.*; product.status, bare ones; the _meta prefix wins", async () => {
    // Four independent servers, one product each: run side by side (one after another took 56 s at load 17).
    const [underscored, bare, declared, plain] = await Promise.all([
      run(undefined, "_product.status"),
      run(undefined, "product.status"),
      run({ _meta: { "acp-orchestrator": { extensionPrefix: "_" } } }, "product.status"),
      run(undefined, undefined),
    ]);
    expect(underscored.length).toBeGreaterThan(3);
    expect(underscored.every((m) => m.startsWith("_product."))).toBe(true);
    expect(bare).toContain("product.taskStatus");
    expect(bare.every((m) => m.startsWith("product."))).toBe(true);
    expect(declared).toContain("_product.taskStatus");
    expect(declared.every((m) => m.startsWith("_product."))).toBe(true);
    expect(plain).toEqual([]);
  });
});
