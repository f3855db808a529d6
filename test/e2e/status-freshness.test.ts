/**
 * `product.status` stays fresh across servers while its answers are remembered and its store look is shared (issue
 * 16): server A answers bursts of pipelined `product.status` requests, written in one chunk, for products that server
 * B (same SQLite file) and A itself change. A burst sent after a change was acknowledged always reflects it, in every
 * answer; the answers of one burst are byte-identical while nothing changed, and equal to what the writing server
 * itself answers. Real processes, real stdio, a real file.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startRawServer, startServer, tempDir, type RawServer, type ServerHandle } from "../support/server-process.js";

const started: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

let nextId = 100;

/** One `product.status` request line. */
function statusLine(id: number, productId: string): string {
  return `${JSON.stringify({ jsonrpc: "2.0", id, method: "product.status", params: { productId } })}\n`;
}

/** The raw answer line to request `id`, once it arrived. */
async function answerLine(server: RawServer, id: number): Promise<string> {
  await server.next((m) => m.id === id);
  const line = server.stdoutLines.find((l) => l.startsWith(`{"jsonrpc":"2.0","id":${id},`));
  if (line === undefined) throw new Error(`no answer line for ${id}`);
  return line;
}

/** Writes `n` `product.status` requests to `server` in one write; resolves with the raw answer lines, in id order. */
async function burst(server: RawServer, productId: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, () => nextId++);
  server.write(ids.map((id) => statusLine(id, productId)).join(""));
  const lines: string[] = [];
  for (const id of ids) lines.push(await answerLine(server, id));
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

/** A burst of 20 on `a`: one text for every answer, whose result is `expected`. */
async function expectBurstEquals(a: RawServer, productId: string, expected: Record<string, unknown>): Promise<void> {
  const lines = await burst(a, productId, 20);
  expect(new Set(results(lines)).size).toBe(1);
  expect((JSON.parse(lines[0] as string) as { result: unknown }).result).toEqual(expected);
}

/** Server B (an SDK-style handle) and server A (raw stdio, initialized) on one SQLite file, both in `cwd`. */
async function twoServers(): Promise<{ a: RawServer; b: ServerHandle; cwd: string }> {
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
  return { a, b, cwd };
}

/** B plans a product from `goal` and waits until its plan is ready. */
async function planned(b: ServerHandle, goal: string, cwd: string): Promise<string> {
  const { productId } = await b.request<{ productId: string }>("product.plan", { goal, cwd });
  await b.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
  return productId;
}

describe("product.status across two servers on one SQLite file", () => {
  it("reflects, in every answer of a pipelined burst, each change the other server acknowledged before it", async () => {
    const { a, b, cwd } = await twoServers();
    const productId = await planned(b, "Write a README, then add a usage example.", cwd);

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

  it("shows another server's mutate and cancel, and its own pipelined cancel, in every later answer", async () => {
    const { a, b, cwd } = await twoServers();
    const productId = await planned(b, "Write a README, then add a usage example.", cwd);
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
    const second = await planned(b, "Add a CHANGELOG.", cwd);
    await expectBurstEquals(a, second, await b.request("product.status", { productId: second }));
    const ids = Array.from({ length: 7 }, () => nextId++);
    a.write(
      ids
        .map((id, i) =>
          i === 3
            ? `${JSON.stringify({ jsonrpc: "2.0", id, method: "product.cancel", params: { productId: second } })}\n`
            : statusLine(id, second),
        )
        .join(""),
    );
    for (const id of ids) await answerLine(a, id);
    const cancelled = await b.request("product.status", { productId: second });
    expect(cancelled.phase).toBe("cancelled");
    await expectBurstEquals(a, second, cancelled);
    // And the first product is still answered right after the other one's answers were kept.
    await expectBurstEquals(a, productId, await b.request("product.status", { productId }));
  }, 60_000);
});
