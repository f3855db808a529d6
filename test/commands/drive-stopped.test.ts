/**
 * A `run` or `resume` whose server is killed while it follows the product (issue 28, human output): the connection's
 * close and the process's exit reach the command in either order. Whichever comes first, the one line names how the
 * server ended (the clean-clone CI once printed "(ACP connection closed)" because the close won the race).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { followToEnd } from "../../src/commands/drive.js";
import type { ServerSession } from "../../src/operator/server-client.js";

/** A session whose connection has closed; the process's exit is reported `exitAfterMs` later. */
function closedSession(how: string | undefined, exitAfterMs: number): ServerSession {
  return {
    request: () => Promise.reject(new Error("ACP connection closed\n    at stack line")),
    waitFor: () => new Promise(() => undefined),
    onNotification: () => undefined,
    ended: (withinMs) =>
      new Promise((resolve) => setTimeout(() => resolve(exitAfterMs <= withinMs ? how : undefined), exitAfterMs)),
  };
}

describe("followToEnd when the server goes away", () => {
  afterEach(() => vi.restoreAllMocks());

  it("names the signal even when the connection closed before the exit was seen", async () => {
    const lines: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk) => (lines.push(String(chunk)), true));
    vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const code = await followToEnd(closedSession("killed by SIGKILL", 50), "prd_x", { state: "/s.db" });
    expect(code).toBe(1);
    expect(lines).toEqual([
      "acp-orchestrator: the server stopped (killed by SIGKILL) while running prd_x — resume with: " +
        "acp-orchestrator resume prd_x --state /s.db\n",
    ]);
  });

  it("says what broke when the server is still running (the connection alone went)", async () => {
    const lines: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk) => (lines.push(String(chunk)), true));
    vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const code = await followToEnd(closedSession(undefined, 0), "prd_x", {});
    expect(code).toBe(1);
    expect(lines).toEqual([
      "acp-orchestrator: the server stopped while running prd_x (ACP connection closed) — resume with: " +
        "acp-orchestrator resume prd_x\n",
    ]);
  });
});
