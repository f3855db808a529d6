/**
 * MCP pass-through with a published agent (issue 28): the IDE's MCP servers reach the team. An ACP client opens a
 * session with one stdio MCP server (test/agents/fixtures/notes-mcp-server.mjs, whose file path is given as an `env`
 * secret) and prompts; the heuristic leader plans, and the claude-agent-acp worker — started by the orchestrator with
 * that server in its `session/new` — calls the server's `write_note` tool as the fake model tells it to. The note
 * lands in the file, and the secret is nowhere in the store.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../support/server-process.js";
import { claudeAgent } from "./support/agents.js";
import { answerStep, routeScript, toolNamed, type WorkerStep } from "./support/scripts.js";
import { report, startSuiteServer, suiteModel } from "./support/suite.js";

const FIXTURE = join(import.meta.dirname, "fixtures", "notes-mcp-server.mjs");

/** A call of the MCP tool `write_note` (claude-agent-acp offers it as `mcp__notes__write_note`). */
const noteStep: WorkerStep = (brief, request) => ({
  text: "Writing the note through the notes server.",
  toolCalls: [
    {
      name: toolNamed(request, "write_note") ?? "mcp__notes__write_note",
      input: { text: `note from ${brief.taskId}` },
    },
  ],
});

describe("MCP servers of the ACP session", () => {
  it("a claude-agent-acp worker calls a tool of the session's stdio MCP server; its side effect is seen", async () => {
    const model = await suiteModel(routeScript({ worker: () => [noteStep, answerStep("The note is written.")] }));
    const worker = claudeAgent({ agentId: "claude-agent", package: "claude-agent-acp", model });
    const workspace = tempDir("agents-mcp-");
    const notes = join(tempDir("agents-mcp-notes-"), "notes.txt");
    const statePath = join(tempDir("agents-mcp-state-"), "state.db");
    const server = await startSuiteServer(
      [worker],
      {},
      {
        statePath,
        onPermission: (params) => {
          const toolCall = params.toolCall as { toolCallId: string };
          if (toolCall.toolCallId.startsWith("plan-")) return { outcome: { outcome: "selected", optionId: "confirm" } };
          const options = params.options as { optionId: string; kind: string }[];
          return { outcome: { outcome: "selected", optionId: options.find((o) => o.kind === "allow_once")!.optionId } };
        },
      },
    );
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", {
      cwd: workspace,
      mcpServers: [
        { name: "notes", command: process.execPath, args: [FIXTURE], env: [{ name: "NOTES_MCP_FILE", value: notes }] },
      ],
    });
    const answer = await server.request<{ stopReason: string }>("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "- Write the note" }],
    });
    expect(answer).toEqual({ stopReason: "end_turn" });

    const offered = model.log.filter((e) => e.request.toolNames.some((n) => n.endsWith("write_note")));
    report(`MCP tool offered to the worker as: ${offered[0]?.request.toolNames.find((n) => n.endsWith("write_note"))}`);
    expect(offered.length).toBeGreaterThan(0);
    expect(existsSync(notes)).toBe(true);
    expect(readFileSync(notes, "utf8")).toMatch(/^note from t1$/mu);
    expect(await server.close()).toBe(0);
    // The secret (the env value) was never written to the store.
    for (const file of [statePath, `${statePath}-wal`].filter((f) => existsSync(f))) {
      expect(readFileSync(file).includes(Buffer.from(notes)), file).toBe(false);
    }
  });
});
