/**
 * The ACP session surface for a plain ACP client (PROTOCOL.md section 4, issue 3 item 1): the built server as a
 * subprocess, driven by the official ACP SDK client, which answers `session/request_permission` like an IDE. Tasks run
 * on built-in worker subprocesses. Every `session/update` and permission request is checked against the ACP v1 JSON
 * Schema shipped in the SDK (`schema/v1/schema.json`).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { isJsonRpcLine, startServer, tempDir, type ServerHandle } from "../support/server-process.js";

// ---------------------------------------------------------------------------------------------------------------
// A small JSON Schema (2020-12 subset) checker for the ACP schema: $ref/$defs, allOf/anyOf/oneOf, const, enum, type,
// required, properties, additionalProperties, items, minimum/maximum. Enough for the shapes used by session/update.

type Json = unknown;
type Schema = boolean | { [key: string]: Json };
const acpSchemaPath = createRequire(import.meta.url).resolve("@agentclientprotocol/sdk/schema/v1/schema.json");
const acpSchema = JSON.parse(readFileSync(acpSchemaPath, "utf8")) as { $defs: Record<string, Schema> };

function typeOk(type: string, v: Json): boolean {
  switch (type) {
    case "null":
      return v === null;
    case "boolean":
      return typeof v === "boolean";
    case "string":
      return typeof v === "string";
    case "integer":
      return Number.isInteger(v);
    case "number":
      return typeof v === "number";
    case "array":
      return Array.isArray(v);
    case "object":
      return typeof v === "object" && v !== null && !Array.isArray(v);
    default:
      return false;
  }
}

function check(schema: Schema, v: Json, path: string): string[] {
  if (schema === true) return [];
  if (schema === false) return [`${path}: no value allowed`];
  const errors: string[] = [];
  const s = schema;
  if (typeof s.$ref === "string") {
    const name = s.$ref.replace("#/$defs/", "");
    const target = acpSchema.$defs[name];
    if (target === undefined) return [`${path}: unknown $ref ${s.$ref}`];
    errors.push(...check(target, v, path));
  }
  if (Array.isArray(s.allOf)) for (const sub of s.allOf as Schema[]) errors.push(...check(sub, v, path));
  if (Array.isArray(s.anyOf) && !(s.anyOf as Schema[]).some((sub) => check(sub, v, path).length === 0)) {
    errors.push(`${path}: matches none of anyOf`);
  }
  if (Array.isArray(s.oneOf)) {
    const matching = (s.oneOf as Schema[]).filter((sub) => check(sub, v, path).length === 0).length;
    if (matching !== 1) errors.push(`${path}: matches ${matching} of oneOf (${JSON.stringify(v).slice(0, 200)})`);
  }
  if ("const" in s && JSON.stringify(s.const) !== JSON.stringify(v))
    errors.push(`${path}: not ${JSON.stringify(s.const)}`);
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v)))
    errors.push(`${path}: not in enum`);
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    if (!types.some((t) => typeOk(t, v))) return [...errors, `${path}: not of type ${types.join("|")}`];
  }
  if (typeof v === "number") {
    if (typeof s.minimum === "number" && v < s.minimum) errors.push(`${path}: below ${s.minimum}`);
    if (typeof s.maximum === "number" && v > s.maximum) errors.push(`${path}: above ${s.maximum}`);
  }
  if (Array.isArray(v) && s.items !== undefined)
    v.forEach((item, i) => errors.push(...check(s.items as Schema, item, `${path}[${i}]`)));
  if (typeOk("object", v)) {
    const obj = v as Record<string, Json>;
    if (Array.isArray(s.required))
      for (const key of s.required as string[]) if (!(key in obj)) errors.push(`${path}.${key}: required`);
    const props = (s.properties ?? {}) as Record<string, Schema>;
    for (const [key, value] of Object.entries(obj)) {
      if (key in props) errors.push(...check(props[key]!, value, `${path}.${key}`));
      else if (s.additionalProperties === false) errors.push(`${path}.${key}: not allowed`);
      else if (typeof s.additionalProperties === "object")
        errors.push(...check(s.additionalProperties as Schema, value, `${path}.${key}`));
    }
  }
  return errors;
}

/** Errors of `value` against the ACP v1 schema definition `name` (empty = valid). */
function acpErrors(name: string, value: unknown): string[] {
  return check({ $ref: `#/$defs/${name}` }, value, name);
}

// ---------------------------------------------------------------------------------------------------------------

interface Update {
  sessionUpdate: string;
  toolCallId?: string;
  status?: string;
  kind?: string;
  title?: string;
  content?: unknown;
  entries?: { content: string; priority: string; status: string }[];
}
interface Status {
  phase: string;
  tasks: { taskId: string; title: string; status: string; output?: string }[];
}

/** The session's updates about its products (session-level ones, commands and title, left out). */
function updatesOf(server: ServerHandle, sessionId: string): Update[] {
  return server.notifications
    .filter((n) => n.method === "session/update" && n.params.sessionId === sessionId)
    .map((n) => n.params.update as Update)
    .filter((u) => u.sessionUpdate !== "available_commands_update" && u.sessionUpdate !== "session_info_update");
}

/** The task id of a task's tool call id (`<productId>/<taskId>`, PROTOCOL.md section 4), else `undefined`. */
function taskIdOf(u: Update): string | undefined {
  return /^prd_[^/]+\/([^/]+)$/.exec(u.toolCallId ?? "")?.[1];
}

function textOf(updates: Update[], kind = "agent_message_chunk"): string {
  return updates
    .filter((u) => u.sessionUpdate === kind)
    .map((u) => (u.content as { text: string }).text)
    .join("");
}

/** Every session/update notification the server sent was a valid ACP `SessionNotification`. */
function expectValidUpdates(server: ServerHandle): void {
  const notes = server.notifications.filter((n) => n.method === "session/update");
  expect(notes.length).toBeGreaterThan(0);
  for (const n of notes) expect(acpErrors("SessionNotification", n.params), JSON.stringify(n.params)).toEqual([]);
}

const confirm = { outcome: { outcome: "selected", optionId: "confirm" } };
const revise = { outcome: { outcome: "selected", optionId: "revise" } };

async function newSession(server: ServerHandle, cwd: string): Promise<string> {
  const { sessionId } = await server.request<{ sessionId: string }>("session/new", { cwd, mcpServers: [] });
  return sessionId;
}

function prompt(server: ServerHandle, sessionId: string, text: string): Promise<{ stopReason: string }> {
  return server.request<{ stopReason: string }>("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
}

describe.concurrent("ACP session surface over stdio", () => {
  it("runs prompt → plan → permission → execution (one tool call per task) → summary → end_turn", async () => {
    const workspace = tempDir("acp-session-ws-");
    const asked: { params: Record<string, unknown>; updatesBefore: number }[] = [];
    const server: ServerHandle = await startServer({
      cwd: workspace,
      onPermission: (params) => {
        asked.push({ params, updatesBefore: updatesOf(server, params.sessionId as string).length });
        return confirm;
      },
    });
    const sessionId = await newSession(server, workspace);
    const answer = await prompt(server, sessionId, "Describe the architecture, then document the API");
    expect(answer).toEqual({ stopReason: "end_turn" });

    const updates = updatesOf(server, sessionId);
    // The plan is confirmed through exactly one permission request with confirm/revise, after the plan was shown.
    expect(asked).toHaveLength(1);
    const request = asked[0]!;
    expect(acpErrors("RequestPermissionRequest", request.params)).toEqual([]);
    expect(request.params.sessionId).toBe(sessionId);
    expect(request.params.options).toEqual([
      expect.objectContaining({ optionId: "confirm", kind: "allow_once" }),
      expect.objectContaining({ optionId: "revise", kind: "reject_once" }),
    ]);
    const before = updates.slice(0, request.updatesBefore);
    expect(before[0]?.sessionUpdate).toBe("agent_message_chunk");
    expect(before.at(-1)?.sessionUpdate).toBe("plan");
    expect(textOf(before)).toContain("Here is the plan");

    const status = await server.request<Status>("product.status", {
      productId: (await server.request<{ products: { productId: string }[] }>("product.list", {})).products[0]!
        .productId,
    });
    expect(status.phase).toBe("completed");
    const taskIds = status.tasks.map((t) => t.taskId);
    expect(taskIds).toEqual(["t1", "t2"]);

    // Execution: each task is one tool_call (kind other, id = task id) moving pending → in_progress → completed.
    const after = updates.slice(request.updatesBefore);
    for (const task of status.tasks) {
      const own = after.filter((u) => taskIdOf(u) === task.taskId);
      expect(own[0]).toMatchObject({ sessionUpdate: "tool_call", kind: "other", title: task.title, status: "pending" });
      expect(own.slice(1).every((u) => u.sessionUpdate === "tool_call_update" && u.title === task.title)).toBe(true);
      expect(own.map((u) => u.status)).toEqual(["pending", "in_progress", "completed"]);
      expect(own.at(-1)?.content).toEqual([{ type: "content", content: { type: "text", text: task.output } }]);
      expect(task.output?.length).toBeGreaterThan(0);
    }
    // t2 depends on t1: it starts only after t1 completed.
    const order = after.map((u) => `${taskIdOf(u) ?? ""}:${u.status ?? ""}`);
    expect(order.indexOf("t1:completed")).toBeLessThan(order.indexOf("t2:in_progress"));
    // Every plan update carries every entry; the last one shows everything completed.
    const plans = updates.filter((u) => u.sessionUpdate === "plan");
    expect(plans.length).toBeGreaterThan(2);
    for (const p of plans) expect(p.entries?.map((e) => e.content)).toEqual(status.tasks.map((t) => t.title));
    expect(plans.at(-1)?.entries?.every((e) => e.status === "completed" && e.priority === "medium")).toBe(true);
    // The turn ends with a summary message.
    expect(updates.at(-1)?.sessionUpdate).toBe("agent_message_chunk");
    expect(textOf([updates.at(-1)!])).toMatch(/^Done: all 2 tasks completed/);
    // The kinds, collapsed: message → plan → (confirm) → tool calls/plans → message.
    const kinds = updates.map((u) => u.sessionUpdate).filter((k, i, all) => k !== all[i - 1]);
    expect(kinds[0]).toBe("agent_message_chunk");
    expect(kinds.at(-1)).toBe("agent_message_chunk");
    expect(new Set(kinds)).toEqual(new Set(["agent_message_chunk", "plan", "tool_call", "tool_call_update"]));

    expectValidUpdates(server);
    expect(await server.close()).toBe(0);
    expect(server.stdoutLines.filter((l) => l.trim() !== "").every(isJsonRpcLine)).toBe(true);
  });

  it("revises the plan, then confirms the revision; a dismissed question and a typed GO also confirm", async () => {
    const workspace = tempDir("acp-session-ws-");
    const answers = [revise, confirm, { outcome: { outcome: "cancelled" } }];
    const asked: Record<string, unknown>[] = [];
    const server = await startServer({
      cwd: workspace,
      onPermission: (params) => {
        asked.push(params);
        return answers.shift();
      },
    });
    const sessionId = await newSession(server, workspace);
    expect(await prompt(server, sessionId, "Write the release notes, then publish them")).toEqual({
      stopReason: "end_turn",
    });
    expect(textOf(updatesOf(server, sessionId))).toContain("Tell me what to change in the plan.");
    const firstPlan = updatesOf(server, sessionId)
      .filter((u) => u.sessionUpdate === "plan")
      .at(-1)!;
    expect(firstPlan.entries).toHaveLength(2);

    const mark = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "Remove task 2")).toEqual({ stopReason: "end_turn" });
    const second = updatesOf(server, sessionId).slice(mark);
    const revisedPlan = second.find((u) => u.sessionUpdate === "plan")!;
    expect(revisedPlan.entries?.map((e) => e.content)).toEqual([firstPlan.entries![0]!.content]);
    expect(second.filter((u) => u.sessionUpdate === "tool_call")).toHaveLength(1);
    expect(textOf(second)).toContain("Done: all 1 task completed");
    expect(asked).toHaveLength(2);
    expect((asked[1]!.toolCall as { title: string }).title).toMatch(/^Run this plan: /);

    // A new product in the same session (the last one is completed): the question is dismissed, then "GO" runs it.
    const mark2 = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "Summarise the changes, then file them")).toEqual({
      stopReason: "end_turn",
    });
    expect(textOf(updatesOf(server, sessionId).slice(mark2))).toContain('reply "confirm" to run it');
    expect(
      updatesOf(server, sessionId)
        .slice(mark2)
        .some((u) => u.sessionUpdate === "tool_call"),
    ).toBe(false);
    const mark3 = updatesOf(server, sessionId).length;
    expect(await prompt(server, sessionId, "GO")).toEqual({ stopReason: "end_turn" });
    expect(asked).toHaveLength(3);
    expect(textOf(updatesOf(server, sessionId).slice(mark3))).toContain("Done: all 2 tasks completed");

    const list = await server.request<{ products: { phase: string }[] }>("product.list", {});
    expect(list.products.map((p) => p.phase).sort()).toEqual(["completed", "completed"]);
    expectValidUpdates(server);
    expect(await server.close()).toBe(0);
  });

  it("ends the turn when a task waits for an answer; the next prompt answers it and the task runs again", async () => {
    const workspace = tempDir("acp-session-ws-");
    const config = join(tempDir(), "acp-orchestrator.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: [
          {
            agentId: "asking",
            command: process.execPath,
            args: ["--import", tsxLoader, join(fixturesDir, "asking-agent.ts")],
          },
        ],
      }),
    );
    const server = await startServer({ cwd: workspace, args: ["--config", config], onPermission: () => confirm });
    const sessionId = await newSession(server, workspace);
    expect(await prompt(server, sessionId, "Design the schema, then write the code")).toEqual({
      stopReason: "end_turn",
    });
    const first = updatesOf(server, sessionId);
    expect(textOf([first.at(-1)!]).trimEnd()).toBe(
      'Task t1 "Design the schema" needs an answer: Which database should the service use?\nReply with your answer and the task will run again.',
    );
    expect(first.filter((u) => taskIdOf(u) === "t1").at(-1)).toMatchObject({
      status: "pending",
      content: [
        {
          type: "content",
          content: { type: "text", text: "Waiting for an answer: Which database should the service use?" },
        },
      ],
    });
    const { products } = await server.request<{ products: { productId: string; phase: string }[] }>("product.list", {});
    expect(products[0]?.phase).toBe("executing");

    expect(await prompt(server, sessionId, "PostgreSQL")).toEqual({ stopReason: "end_turn" });
    const second = updatesOf(server, sessionId).slice(first.length);
    expect(textOf(second)).toContain("Passed your answer to task t1");
    expect(second.filter((u) => taskIdOf(u) === "t1").map((u) => u.status)).toEqual([
      "pending",
      "in_progress",
      "pending",
    ]);
    expect(textOf([second.at(-1)!])).toContain("needs an answer");
    const status = await server.request<{ tasks: { taskId: string; attempts: number; description: string }[] }>(
      "product.status",
      {
        productId: products[0]!.productId,
      },
    );
    expect(status.tasks[0]).toMatchObject({ taskId: "t1", attempts: 2 });
    expect(status.tasks[0]?.description).toContain("PostgreSQL");
    expectValidUpdates(server);
    expect(await server.close()).toBe(0);
  });

  it("persists sessions: list, load after a restart replays the conversation and plan, then the session continues", async () => {
    const workspace = tempDir("acp-session-ws-");
    const statePath = join(tempDir(), "state.db");
    const first = await startServer({ cwd: workspace, statePath, onPermission: () => revise });
    const sessionId = await newSession(first, workspace);
    expect(await prompt(first, sessionId, "Write the user guide, then review it")).toEqual({ stopReason: "end_turn" });
    const spoken = textOf(updatesOf(first, sessionId));
    expect(await first.close()).toBe(0);

    const second = await startServer({ cwd: workspace, statePath, onPermission: () => confirm });
    const listed = await second.request<{
      sessions: { sessionId: string; cwd: string; title?: string; updatedAt: string }[];
    }>("session/list", {});
    expect(listed.sessions).toEqual([
      { sessionId, cwd: workspace, title: "Write the user guide, then review it", updatedAt: expect.any(String) },
    ]);
    expect(await second.request("session/list", { cwd: tempDir() })).toEqual({ sessions: [] });

    const loaded = await second.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
    expect(loaded).toMatchObject({ modes: { currentModeId: "confirm" }, configOptions: expect.any(Array) });
    // Replayed before the answer: the user's goal, what the agent said, then the latest plan.
    const replay = updatesOf(second, sessionId);
    expect(replay[0]).toMatchObject({
      sessionUpdate: "user_message_chunk",
      content: { type: "text", text: "Write the user guide, then review it" },
    });
    expect(textOf(replay)).toBe(spoken);
    expect(replay.at(-1)).toMatchObject({
      sessionUpdate: "plan",
      entries: [{ status: "pending" }, { status: "pending" }],
    });

    // The plan was shown before the restart, so a typed confirm runs it.
    expect(await prompt(second, sessionId, "confirm")).toEqual({ stopReason: "end_turn" });
    expect(textOf(updatesOf(second, sessionId).slice(replay.length))).toContain("Done: all 2 tasks completed");
    expect(await second.request("session/close", { sessionId })).toEqual({});
    const unknown = await second
      .request("session/load", { sessionId: "ses_missing", cwd: workspace, mcpServers: [] })
      .catch((e: unknown) => e);
    expect(unknown).toMatchObject({ code: -32002 });
    expectValidUpdates(second);
    expect(await second.close()).toBe(0);
  });
});
