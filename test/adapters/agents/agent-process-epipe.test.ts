/**
 * Writing to an agent that already exited (issue 26, case 3): the write fails with EPIPE on the agent's stdin, which
 * ends that agent's use, never the server process (no uncaught `error` event).
 */
import { describe, expect, it } from "vitest";
import { AgentProcess } from "../../../src/adapters/agents/agent-process.js";
import { tempDir } from "../../support/server-process.js";

describe("AgentProcess stdin", () => {
  it("survives writes to an agent that exits without reading them", async () => {
    const agent = AgentProcess.spawn({
      command: process.execPath,
      args: ["-e", "setTimeout(() => process.exit(3), 300)"],
      cwd: tempDir("acp-orch-epipe-"),
    });
    // 16 MiB queued while the agent reads nothing: the pipe fills, the agent exits, the queued writes meet EPIPE.
    const chunk = Buffer.alloc(1024 * 1024, 120);
    for (let i = 0; i < 16; i++) agent.stdin.write(chunk);
    agent.stdin.end();
    expect((await agent.exited).code).toBe(3);
    // The failed write destroys the stream (it closes); the process got no uncaught error.
    await new Promise<void>((done) => (agent.stdin.closed ? done() : agent.stdin.once("close", () => done())));
    expect(agent.stdin.destroyed).toBe(true);
  });
});
