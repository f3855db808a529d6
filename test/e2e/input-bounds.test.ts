/**
 * Issue 10 finding 5 (DESIGN.md guarantee 14): every input's size limit is checked before work proportional to it.
 * A 50 MB id and a 20 MB prompt sent to the built server over real stdio get a clean -32602 naming the field, the
 * server's peak memory stays bounded (the old code spread the 50 MB id into an array of 50 M strings: 1.5 GB), nothing
 * reaches the state file, and the connection keeps serving.
 */
import { readFileSync, statSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRawServer, tempDir, type RawServer } from "../support/server-process.js";
import { join } from "node:path";

/** Peak resident memory of a process so far (VmHWM), in MiB. Linux only. */
function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmHWM:\s+(\d+)\s+kB/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/**
 * A 50 MB line costs its input chunks, its joined buffer, its text and the parsed string (4-5 x 50 MB, freed only when
 * the collector runs) over an ~80 MB baseline: 440-451 MiB measured on CI. The code before the input bounds peaked at
 * 1,454 MiB on the same request, so this bound still fails it by more than 2x.
 */
const PEAK_BOUND_MIB = 600;

let server: RawServer;
let statePath: string;
let nextId = 1;

async function call(method: string, params: unknown): Promise<Record<string, unknown>> {
  const id = nextId++;
  server.send({ jsonrpc: "2.0", id, method, params });
  return server.next((m) => m.id === id, 120_000);
}

beforeAll(async () => {
  statePath = join(tempDir(), "state.db");
  server = startRawServer({ statePath });
  const init = await call("initialize", { protocolVersion: 1, clientCapabilities: {} });
  expect(init.result).toBeDefined();
});

afterAll(async () => {
  await server.close();
});

describe("oversized input over stdio", () => {
  it("answers a 50 MB productId with -32602 on productId, within a bounded peak memory", async () => {
    const answer = await call("product.status", { productId: "x".repeat(50 * 1024 * 1024) });

    expect(answer.error).toMatchObject({ code: -32602, data: { issues: [{ path: ["productId"] }] } });
    expect(peakRssMiB(server.child.pid as number)).toBeLessThan(PEAK_BOUND_MIB);
  });

  it("answers a 50 MB id ending in a control character with one issue (the character check never runs)", async () => {
    const answer = await call("product.status", { productId: `${"y".repeat(50 * 1024 * 1024)}\u0001` });

    expect((answer.error as { data: { issues: unknown[] } }).data.issues).toHaveLength(1);
    expect(peakRssMiB(server.child.pid as number)).toBeLessThan(PEAK_BOUND_MIB);
  });

  it("answers a 20 MB session/prompt with -32602 on its text and writes nothing to the state file", async () => {
    const created = await call("session/new", { cwd: tempDir(), mcpServers: [] });
    const sessionId = (created.result as { sessionId: string }).sessionId;
    const before = statSync(statePath).size;

    const answer = await call("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "a".repeat(20 * 1024 * 1024) }],
    });

    expect(answer.error).toMatchObject({ code: -32602, data: { issues: [{ path: ["prompt", 0, "text"] }] } });
    expect(statSync(statePath).size).toBe(before);
    expect(peakRssMiB(server.child.pid as number)).toBeLessThan(PEAK_BOUND_MIB);
  });

  it("refuses a prompt whose text passes 100,000 characters, like a goal", async () => {
    const created = await call("session/new", { cwd: tempDir(), mcpServers: [] });
    const sessionId = (created.result as { sessionId: string }).sessionId;

    const answer = await call("session/prompt", {
      sessionId,
      prompt: [
        { type: "text", text: "b".repeat(60_000) },
        { type: "text", text: "c".repeat(60_000) },
      ],
    });

    expect(answer.error).toMatchObject({
      code: -32602,
      data: { issues: [{ path: ["prompt"], message: expect.stringContaining("100000 characters") }] },
    });
  });

  it("answers an array of a million ids with -32602 before parsing its items", async () => {
    const answer = await call("product.plan", {
      goal: "g",
      cwd: tempDir(),
      allowedAgents: Array.from({ length: 1_000_000 }, () => "a"),
    });

    expect(answer.error).toMatchObject({ code: -32602, data: { issues: [{ path: ["allowedAgents"] }] } });
  });

  it("keeps serving afterwards", async () => {
    const answer = await call("product.list", {});

    expect(answer.result).toMatchObject({ products: [] });
  });
});
