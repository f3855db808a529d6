/**
 * A `run` or `resume` whose server is killed while it follows the product (issue 28, human output): one line names
 * how the server ended, printed once. The connection's close and the process's exit reach the command in either
 * order; the clean-clone CI once printed "(ACP connection closed)" (the close won), and once the line twice (the
 * follow and withServer each printed it). followToEnd now leaves a lost connection to withServer, which reports the
 * server's end once it has seen the exit; an error the server answered is followToEnd's to print.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { followToEnd } from "../../src/commands/drive.js";
import type { ServerSession } from "../../src/operator/server-client.js";

/** A session whose every request fails with `error`. */
function failingSession(error: Error): ServerSession {
  return {
    request: () => Promise.reject(error),
    waitFor: () => new Promise(() => undefined),
    onNotification: () => undefined,
  };
}

function captureOutput(): string[] {
  const lines: string[] = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk) => (lines.push(String(chunk)), true));
  vi.spyOn(process.stdout, "write").mockImplementation(() => true);
  return lines;
}

describe("followToEnd when the server goes away", () => {
  afterEach(() => vi.restoreAllMocks());

  it("leaves a lost connection to withServer: it rejects with it and prints nothing", async () => {
    const lines = captureOutput();
    const closed = new Error("ACP connection closed");
    await expect(followToEnd(failingSession(closed), "prd_x", { state: "/s.db" })).rejects.toBe(closed);
    expect(lines).toEqual([]);
  });

  it("prints an error the server answered, with the resume command, once", async () => {
    const lines = captureOutput();
    const answered = Object.assign(new Error("The run-state authority failed to read the stored state."), {
      code: -32013,
    });
    expect(await followToEnd(failingSession(answered), "prd_x", { state: "/s.db" })).toBe(1);
    expect(lines).toEqual([
      "acp-orchestrator: following prd_x failed (The run-state authority failed to read the stored state.) — " +
        "resume with: acp-orchestrator resume prd_x --state /s.db\n",
    ]);
  });
});
