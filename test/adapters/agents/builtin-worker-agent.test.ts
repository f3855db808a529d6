import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { client, methods, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import type { ClientContext, PromptResponse, SessionNotification } from "@agentclientprotocol/sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { formatTaskBrief } from "../../../src/adapters/agents/acp-worker.js";
import {
  createBuiltinWorkerAgent,
  notePathFor,
  taskFactsOf,
} from "../../../src/adapters/agents/builtin-worker-agent.js";
import { memoryLogger, taskRequest } from "../../fixtures/agents/pool-helpers.js";

const FIXED_NOW = new Date("2030-01-02T03:04:05.000Z");
let cwd: string;
const extraDirs: string[] = [];

beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), "acp-builtin-"));
});
afterEach(async () => {
  for (const dir of [cwd, ...extraDirs.splice(0)]) await rm(dir, { recursive: true, force: true });
});

/** Connects an in-process ACP client to the built-in worker and runs `op` with the session updates it receives. */
async function withWorker<T>(
  op: (ctx: ClientContext, updates: SessionNotification[]) => Promise<T>,
  stepDelayMs = 0,
): Promise<T> {
  const updates: SessionNotification[] = [];
  const worker = createBuiltinWorkerAgent({ logger: memoryLogger(), now: () => FIXED_NOW, stepDelayMs });
  return client({ name: "test-client" })
    .onNotification(methods.client.session.update, ({ params }) => {
      updates.push(params);
    })
    .connectWith(worker, async (ctx) => {
      const init = await ctx.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: {},
      });
      expect(init.protocolVersion).toBe(PROTOCOL_VERSION);
      return op(ctx, updates);
    });
}

async function promptBrief(ctx: ClientContext, dir: string, taskId = "t1", title = "Document the API") {
  const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: dir, mcpServers: [] });
  const request = taskRequest("builtin-worker", dir);
  const brief = formatTaskBrief({ ...request, task: { ...request.task, taskId, title } });
  const response = ctx.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: brief.text }],
    _meta: { "acp-orchestrator": brief.meta },
  });
  return { sessionId, response };
}

describe("built-in worker agent", () => {
  it("writes a note inside the session cwd and reports it as one edit tool call", async () => {
    const { response, updates } = await withWorker(async (ctx, updates) => {
      const { response } = await promptBrief(ctx, cwd);
      return { response: await response, updates };
    });
    expect(response).toEqual({ stopReason: "end_turn" });
    const note = await readFile(join(cwd, "notes", "t1-document-the-api.md"), "utf8");
    expect(note).toBe(
      [
        "# Document the API",
        "",
        "- Task: `t1`",
        "- Product: `prd_1`",
        "- Attempt: 1",
        "- Written: 2030-01-02T03:04:05.000Z by the acp-orchestrator built-in worker",
        "",
        "## Description",
        "",
        "Write down how the public API is called.",
        "",
        "## Acceptance criteria",
        "",
        "Every exported function is listed.",
        "",
        "## What the dependencies produced",
        "",
        "- **Survey the code** (`t0`):",
        "  Found 3 exported functions: a, b, c.",
        "",
      ].join("\n"),
    );
    const kinds = updates.map((u) => u.update.sessionUpdate);
    expect(kinds.filter((k) => k === "agent_message_chunk").length).toBeGreaterThanOrEqual(2);
    const toolCalls = updates.map((u) => u.update).filter((u) => u.sessionUpdate === "tool_call");
    expect(toolCalls).toEqual([
      expect.objectContaining({
        title: "Write notes/t1-document-the-api.md",
        kind: "edit",
        status: "completed",
        locations: [{ path: join(cwd, "notes", "t1-document-the-api.md") }],
      }),
    ]);
  });

  it("answers session/cancel with stopReason cancelled", async () => {
    const response = await withWorker(async (ctx, updates) => {
      const { sessionId, response } = await promptBrief(ctx, cwd);
      while (updates.length === 0) await new Promise((r) => setTimeout(r, 5));
      await ctx.notify(methods.agent.session.cancel, { sessionId });
      return response;
    }, 10_000);
    expect(response).toEqual({ stopReason: "cancelled" });
    expect(existsSync(join(cwd, "notes"))).toBe(false);
  });

  it("never writes outside the session cwd, even through a symlinked notes folder", async () => {
    const outside = await mkdtemp(join(tmpdir(), "acp-builtin-outside-"));
    extraDirs.push(outside);
    await symlink(outside, join(cwd, "notes"));
    const error: unknown = await withWorker(async (ctx) => {
      const { response } = await promptBrief(ctx, cwd);
      return response.then(
        (r: PromptResponse) => r,
        (e: unknown) => e,
      );
    });
    expect(error).toBeInstanceOf(RequestError);
    expect((error as RequestError).message).toMatch(/outside the session cwd/);
    expect(await readdir(outside)).toEqual([]);
  });

  it("sanitises task ids and titles into a file name under notes/", async () => {
    expect(notePathFor("../../etc", "passwd")).toBe("notes/etc-passwd.md");
    expect(notePathFor("t/1", "Ünïcode & spaces!!")).toBe("notes/t-1-n-code-spaces.md");
    expect(notePathFor("", "")).toBe("notes/task-note.md");
    await withWorker(async (ctx) => {
      const { response } = await promptBrief(ctx, cwd, "../evil", "../../../tmp/x");
      expect(await response).toEqual({ stopReason: "end_turn" });
    });
    expect(await readdir(join(cwd, "notes"))).toEqual(["evil-tmp-x.md"]);
  });

  it("takes the task from the brief's header when the prompt has no _meta", () => {
    const { text } = formatTaskBrief(taskRequest("builtin-worker", cwd));
    expect(taskFactsOf({ prompt: [{ type: "text", text }] })).toMatchObject({
      taskId: "t1",
      title: "Document the API",
      description: "Write down how the public API is called.",
    });
    expect(taskFactsOf({ prompt: [{ type: "text", text: "Just tidy up\nplease" }] })).toMatchObject({
      taskId: "task",
      title: "Just tidy up",
    });
  });

  it("rejects a relative session cwd", async () => {
    await withWorker(async (ctx) => {
      await expect(ctx.request(methods.agent.session.new, { cwd: "relative/dir", mcpServers: [] })).rejects.toThrow(
        /absolute/,
      );
    });
  });
});
