/**
 * `product.status` stays fresh across servers while its answers are remembered and its store look is shared (issue
 * 16): server A answers bursts of pipelined `product.status` requests, written in one chunk, for a product that
 * server B drives on the same SQLite file. A burst sent after B acknowledged a change always reflects it, in every
 * answer; the answers of one burst are byte-identical while nothing changed. Real processes, real stdio, a real file.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startRawServer, startServer, tempDir, type RawServer, type ServerHandle } from "../support/server-process.js";

const started: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

let nextId = 100;

/** Writes `n` `product.status` requests to `server` in one write; resolves with the raw answer lines, in id order. */
async function burst(server: RawServer, productId: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, () => nextId++);
  server.write(
    ids
      .map((id) => `${JSON.stringify({ jsonrpc: "2.0", id, method: "product.status", params: { productId } })}\n`)
      .join(""),
  );
  const lines: string[] = [];
  for (const id of ids) {
    await server.next((m) => m.id === id);
    const line = server.stdoutLines.find((l) => l.startsWith(`{"jsonrpc":"2.0","id":${id},`));
    if (line === undefined) throw new Error(`no answer line for ${id}`);
    lines.push(line);
  }
  return lines;
}

/** The phase each answer line reports. */
function phases(lines: string[]): string[] {
  return lines.map((l) => (JSON.parse(l) as { result: { phase: string } }).result.phase);
}

/** The answer lines with their ids removed, to compare results. */
function results(lines: string[]): string[] {
  return lines.map((l) => l.replace(/^\{"jsonrpc":"2.0","id":\d+,/, ""));
}

describe("product.status across two servers on one SQLite file", () => {
  it("reflects, in every answer of a pipelined burst, each change the other server acknowledged before it", async () => {
    const dir = tempDir("acp-orch-fresh-");
    const cwd = tempDir("acp-orch-fresh-ws-");
    const statePath = join(dir, "state.db");
    const b: ServerHandle = await startServer({ statePath, cwd });
    started.push(b);
    const a = startRawServer({ statePath, cwd });
    started.push(a);
    a.send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "fresh", version: "1" } },
    });
    await a.next((m) => m.id === 1);

    const { productId } = await b.request<{ productId: string }>("product.plan", {
      goal: "Write a README, then add a usage example.",
      cwd,
    });
    await b.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);

    const waiting = await burst(a, productId, 40);
    expect(new Set(phases(waiting))).toEqual(new Set(["awaiting_confirmation"]));
    // Unchanged product: one text for every answer.
    expect(new Set(results(waiting)).size).toBe(1);

    // B starts the run; it is acknowledged before A is asked again.
    await b.request("product.confirm", { productId });
    const afterConfirm = await burst(a, productId, 40);
    expect(phases(afterConfirm)).not.toContain("awaiting_confirmation");

    // B finishes it (the built-in workers answer at once); every later burst says so.
    await b.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 30_000);
    const done = await burst(a, productId, 40);
    expect(new Set(phases(done))).toEqual(new Set(["completed"]));
    expect(new Set(results(done)).size).toBe(1);
    expect(JSON.parse(done[0] as string).result.progress).toMatchObject({ completed: 2, total: 2 });
  });
});
