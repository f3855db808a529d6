/**
 * A workspace that does not exist is refused up front (-32602 at `cwd`) by product.plan, x/goal.start and session/new,
 * instead of being accepted and failing every task later with a confusing spawn error (found by a new user).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startRawServer, tempDir } from "../support/server-process.js";

describe("workspace check", () => {
  it("refuses a cwd that does not exist, or is a file, and keeps serving", async () => {
    const server = startRawServer();
    server.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } });
    await server.next((m) => m.id === 1);
    const missing = join(tempDir(), "does", "not", "exist");
    const calls: [number, string, Record<string, unknown>][] = [
      [2, "product.plan", { goal: "Write docs", cwd: missing }],
      [3, "x/goal.start", { goal: "Write docs", cwd: missing }],
      [4, "session/new", { cwd: missing, mcpServers: [] }],
      [5, "_product.plan", { goal: "Write docs", cwd: "/proc/self/status" }],
    ];
    for (const [id, method, params] of calls) server.send({ jsonrpc: "2.0", id, method, params });
    for (const [id] of calls) {
      const answer = await server.next((m) => m.id === id);
      const error = answer.error as { code: number; message: string; data: { issues: { path: unknown[] }[] } };
      expect(error.code, JSON.stringify(answer)).toBe(-32602);
      expect(error.data.issues[0]?.path).toEqual(["cwd"]);
      expect(error.message).toMatch(/cwd must be/);
    }
    const ok = tempDir();
    server.send({ jsonrpc: "2.0", id: 6, method: "product.plan", params: { goal: "Write docs", cwd: ok } });
    expect((await server.next((m) => m.id === 6)).result).toMatchObject({ phase: "planning" });
    expect(await server.close()).toBe(0);
  });
});
