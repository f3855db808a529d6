/**
 * `product.status` answer versions with real processes (issue 16, status.ts `inspectVersioned`): server A answers
 * pipelined bursts of `product.status` for products that server B (same SQLite file) and A itself change — a plan
 * mutation while awaiting confirmation, a cancel, a cancel pipelined by A in the same chunk as status requests. Every
 * burst sent after a change was acknowledged must show it in every answer, byte-identical within the burst, and
 * equal to what the writing server itself answers.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startRawServer, startServer, tempDir, type RawServer, type ServerHandle } from "../support/server-process.js";

const started: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

let nextId = 1000;

function statusLine(id: number, productId: string): string {
  return `${JSON.stringify({ jsonrpc: "2.0", id, method: "product.status", params: { productId } })}\n`;
}

async function answerLine(server: RawServer, id: number): Promise<string> {
  await server.next((m) => m.id === id);
  const line = server.stdoutLines.find((l) => l.startsWith(`{"jsonrpc":"2.0","id":${id},`));
  if (line === undefined) throw new Error(`no answer line for ${id}`);
  return line;
}

/** `n` status requests in one write; the results (ids removed), in id order. */
async function burst(server: RawServer, productId: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, () => nextId++);
  server.write(ids.map((id) => statusLine(id, productId)).join(""));
  const out: string[] = [];
  for (const id of ids) out.push((await answerLine(server, id)).replace(/^\{"jsonrpc":"2.0","id":\d+,/, ""));
  return out;
}

function resultOf(text: string): Record<string, unknown> {
  return (JSON.parse(`{${text}`) as { result: Record<string, unknown> }).result;
}

async function expectBurstEquals(a: RawServer, productId: string, expected: Record<string, unknown>): Promise<void> {
  const lines = await burst(a, productId, 20);
  expect(new Set(lines).size).toBe(1);
  expect(resultOf(lines[0] as string)).toEqual(expected);
}

describe("product.status bursts across two servers on one SQLite file", () => {
  it("shows another server's mutate and cancel, and its own pipelined cancel, in every later answer", async () => {
    const dir = tempDir("acp-orch-burst-");
    const cwd = tempDir("acp-orch-burst-ws-");
    const statePath = join(dir, "state.db");
    const b: ServerHandle = await startServer({ statePath, cwd });
    started.push(b);
    const a = startRawServer({ statePath, cwd });
    started.push(a);
    a.send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "burst", version: "1" } },
    });
    await a.next((m) => m.id === 1);

    const { productId } = await b.request<{ productId: string }>("product.plan", {
      goal: "Write a README, then add a usage example.",
      cwd,
    });
    await b.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    await expectBurstEquals(a, productId, await b.request("product.status", { productId }));

    // B changes the plan while it awaits confirmation: only events move, the phase stays.
    const before = await b.request<{ plan: { tasks: { taskId: string }[] } }>("product.status", { productId });
    const taskId = before.plan.tasks[0]?.taskId as string;
    await b.request("product.mutate", {
      productId,
      mutations: [{ op: "updateTask", taskId, patch: { description: "Changed by B." } }],
    });
    const mutated = await b.request("product.status", { productId });
    expect(JSON.stringify(mutated)).toContain("Changed by B.");
    await expectBurstEquals(a, productId, mutated);

    await b.request("product.cancel", { productId });
    await expectBurstEquals(a, productId, await b.request("product.status", { productId }));

    // A second product: A cancels it itself, pipelined in one chunk between status requests.
    const second = await b.request<{ productId: string }>("product.plan", { goal: "Add a CHANGELOG.", cwd });
    await b.waitFor((n) => n.method === "product.planReady" && n.params.productId === second.productId);
    await expectBurstEquals(a, second.productId, await b.request("product.status", { productId: second.productId }));
    const ids = Array.from({ length: 7 }, () => nextId++);
    a.write(
      ids
        .map((id, i) =>
          i === 3
            ? `${JSON.stringify({ jsonrpc: "2.0", id, method: "product.cancel", params: { productId: second.productId } })}\n`
            : statusLine(id, second.productId),
        )
        .join(""),
    );
    for (const id of ids) await answerLine(a, id);
    const cancelled = await b.request("product.status", { productId: second.productId });
    expect(cancelled.phase).toBe("cancelled");
    await expectBurstEquals(a, second.productId, cancelled);
    // And the first product is still answered right after the other one's answers were kept.
    await expectBurstEquals(a, productId, await b.request("product.status", { productId }));
  }, 60_000);
});
