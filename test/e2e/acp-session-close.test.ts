/**
 * A closed session takes no prompt until it is loaded again (regression: an adversarial tester ran a whole product
 * through a session after session/close).
 */
import { describe, expect, it } from "vitest";
import { startServer, tempDir } from "../support/server-process.js";

describe("session/close", () => {
  it("refuses prompts on a closed session with -32002 until session/load opens it again", async () => {
    const cwd = tempDir("acp-orch-close-");
    const server = await startServer({ cwd });
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", { cwd, mcpServers: [] });
    expect(await server.request("session/close", { sessionId })).toEqual({});

    const prompt = { sessionId, prompt: [{ type: "text", text: "- Write a README" }] };
    await expect(server.request("session/prompt", prompt)).rejects.toMatchObject({
      code: -32002,
      data: { kind: "session", id: sessionId },
    });
    expect(server.notifications.filter((n) => n.method === "product.planReady")).toEqual([]);

    expect(await server.request("session/load", { sessionId, cwd, mcpServers: [] })).toMatchObject({
      modes: { currentModeId: "confirm" },
    });
    expect(await server.request("session/prompt", prompt)).toMatchObject({ stopReason: "end_turn" });
    expect(await server.close()).toBe(0);
  });
});
