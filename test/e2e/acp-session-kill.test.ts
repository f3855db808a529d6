/**
 * A server killed -9 while an ACP session's turn runs a product keeps what the session showed so far (PROTOCOL.md
 * section 4: `session/list`, `session/load`): its title (the plan's name) and what the leader said before the plan.
 * Before, the session record was written only when the turn ended, so a kill mid-run left the goal's first line as
 * the title and no leader message (a new user's report, 2026-12-06).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { startServer, tempDir, type Notification } from "../support/server-process.js";

/** A worker that never ends its turn on its own. */
const HANG = {
  agentId: "hang",
  command: process.execPath,
  args: ["--import", tsxLoader, join(fixturesDir, "fs-agent.ts"), "hang"],
};

interface Update {
  sessionUpdate: string;
  status?: string;
  title?: string;
  content?: { type: string; text?: string };
}

const updateOf = (n: Notification): Update => n.params.update as Update;

it("kill -9 mid-run: session/list keeps the plan's title, session/load replays the leader's message", async () => {
  const workspace = tempDir("acp-kill-ws-");
  const base = tempDir("acp-kill-");
  const config = join(base, "acp-orchestrator.json");
  writeFileSync(config, JSON.stringify({ agents: [HANG] }));
  const statePath = join(base, "state.db");
  const first = await startServer({ cwd: base, statePath, args: ["--config", config] });
  const { sessionId } = await first.request<{ sessionId: string }>("session/new", { cwd: workspace, mcpServers: [] });
  await first.request("session/set_mode", { sessionId, modeId: "auto" });
  const turn = first
    .request("session/prompt", { sessionId, prompt: [{ type: "text", text: "- Write the parser\n- Then test it" }] })
    .catch((err: unknown) => err);
  const mine = (n: Notification) => n.method === "session/update" && n.params.sessionId === sessionId;
  await first.waitFor((n) => mine(n) && updateOf(n).status === "in_progress", 60_000);

  const updates = first.notifications.filter(mine).map(updateOf);
  const beforePlan = updates.slice(
    0,
    updates.findIndex((u) => u.sessionUpdate === "plan"),
  );
  const said = beforePlan
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map((u) => u.content?.text ?? "")
    .join("")
    .trim();
  const title = updates.filter((u) => u.sessionUpdate === "session_info_update").at(-1)?.title;
  expect(said).not.toBe("");
  expect(title).toBeDefined();
  expect(title).not.toBe("Write the parser");
  await first.kill();
  await turn;

  const second = await startServer({ cwd: base, statePath, args: ["--config", config] });
  try {
    const listed = await second.request<{ sessions: { sessionId: string; title?: string }[] }>("session/list", {});
    expect(listed.sessions).toEqual([expect.objectContaining({ sessionId, title })]);
    await second.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
    const replayed = second.notifications
      .filter(mine)
      .map(updateOf)
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => u.content?.text ?? "")
      .join("");
    expect(replayed).toContain(said);
  } finally {
    await second.request("session/close", { sessionId }).catch(() => undefined);
    await second.close();
  }
}, 120_000);
