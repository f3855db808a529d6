/**
 * Ownership errors over the real stdio server (PROTOCOL.md section 3, -32016 `{expected, got}`): `session/load` with a
 * `cwd` other than the session's own, and `product.plan` naming a session of another project. Each refusal must carry
 * a one-sentence message and the exact data, change nothing (no replayed updates, no product created), and leave the
 * server serving; stdout carries only JSON-RPC and the process exits 0 when stdin closes.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isJsonRpcLine, startRawServer, tempDir, type RawServer } from "../support/server-process.js";

type Msg = Record<string, unknown>;

const INIT_PARAMS = {
  protocolVersion: 1,
  clientCapabilities: {},
  clientInfo: { name: "ownership-tests", version: "1" },
};

let raw: RawServer;
let workspace: string;
let other: string;
let nextId = 0;

/** Sends a request under a fresh id and resolves with the response echoing that id. */
async function call(method: string, params: unknown = {}): Promise<Msg> {
  const id = ++nextId;
  raw.send({ jsonrpc: "2.0", id, method, params });
  return raw.next((m) => m.id === id && !("method" in m));
}

function result<T = Msg>(res: Msg): T {
  expect(Object.keys(res).sort(), JSON.stringify(res)).toEqual(["id", "jsonrpc", "result"]);
  return res.result as T;
}

/** Asserts a -32016 error with a one-sentence message; returns its `data`. */
function expectOwnership(res: Msg): Msg {
  expect(Object.keys(res).sort(), JSON.stringify(res)).toEqual(["error", "id", "jsonrpc"]);
  const error = res.error as { code: number; message: string; data: Msg };
  expect(error.code).toBe(-32016);
  expect(error.message).toMatch(/^[A-Z][^\n]*\.$/);
  expect(error.message).not.toMatch(/[.!?]\s+[A-Z]/);
  return error.data;
}

beforeAll(async () => {
  workspace = tempDir("acp-orch-ws-");
  other = join(workspace, "elsewhere");
  mkdirSync(other);
  raw = startRawServer({ cwd: workspace });
  result(await call("initialize", INIT_PARAMS));
});

afterAll(async () => {
  await raw?.close();
});

describe("ownership (-32016)", () => {
  it("refuses session/load with another cwd, replaying nothing, and loads with the session's own cwd", async () => {
    const { sessionId } = result<{ sessionId: string }>(await call("session/new", { cwd: workspace, mcpServers: [] }));
    // session/new announces the session's commands right after its answer (PROTOCOL.md section 4): wait for that
    // update so it is not mistaken for output of the refused load below.
    await raw.next(
      (m) =>
        (m.params as { update?: { sessionUpdate?: string } } | undefined)?.update?.sessionUpdate ===
        "available_commands_update",
      30_000,
    );
    const before = raw.stdoutLines.length;
    const refused = await call("session/load", { sessionId, cwd: other, mcpServers: [] });
    expect(expectOwnership(refused)).toEqual({ expected: workspace, got: other });
    expect((refused.error as { message: string }).message).toContain(sessionId);
    // Only the error itself was written: no session/update of the refused load.
    expect(raw.stdoutLines.slice(before).filter((l) => l.includes("session/update"))).toEqual([]);
    expect(result(await call("session/load", { sessionId, cwd: workspace, mcpServers: [] }))).toHaveProperty(
      "modes.currentModeId",
    );
    expect(result(await call("session/load", { sessionId, cwd: `${workspace}/`, mcpServers: [] }))).toHaveProperty(
      "modes.currentModeId",
    );
  });

  it("refuses product.plan naming a session of another project, creating nothing; its own project is accepted", async () => {
    const { sessionId } = result<{ sessionId: string }>(await call("session/new", { cwd: workspace, mcpServers: [] }));
    const count = async () => result<{ products: unknown[] }>(await call("product.list", {})).products.length;
    const before = await count();
    const goal = "- Write the parser";

    const refused = await call("product.plan", { goal, cwd: workspace, projectId: "prj_someone_else", sessionId });
    const data = expectOwnership(refused);
    expect(data).toEqual({ expected: expect.any(String), got: "prj_someone_else" });
    expect(data.expected).not.toBe("prj_someone_else");
    expect(await count()).toBe(before);

    // The session's own project (the default for its cwd, or named explicitly) is accepted.
    const planned = result<{ productId: string; phase: string }>(
      await call("product.plan", { goal, cwd: workspace, sessionId }),
    );
    expect(planned.phase).toBe("planning");
    const explicit = result<{ phase: string }>(
      await call("product.plan", { goal, cwd: workspace, projectId: data.expected, sessionId }),
    );
    expect(explicit.phase).toBe("planning");
    // An unknown session id is only recorded on the product, as before.
    expect(
      result<{ phase: string }>(await call("product.plan", { goal, cwd: workspace, sessionId: "ses_unknown" })).phase,
    ).toBe("planning");
    expect(await count()).toBe(before + 3);
  });

  it("wrote only JSON-RPC on stdout and exits 0 when stdin closes", async () => {
    expect(raw.stdoutLines.filter((l) => l.trim() !== "").every(isJsonRpcLine)).toBe(true);
    expect(await raw.close()).toBe(0);
  });
});
