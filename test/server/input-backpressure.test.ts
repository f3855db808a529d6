/**
 * Input backpressure of the stdio transport (src/server/framing.ts): while the writer's backlog is above its limit the
 * reader stops delivering requests, so a client that never reads its answers cannot grow the server's memory; once
 * the output is read, every request is answered, in order, and an end of input seen meanwhile is still honoured.
 */
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineMethod } from "../../protocol/method-spec.js";
import type { Logger } from "../../src/core/ports.js";
import { createFramedTransport, type FramedTransport } from "../../src/server/framing.js";
import { RpcConnection } from "../../src/server/rpc-connection.js";

const initialize = defineMethod({
  method: "initialize",
  extension: false,
  params: z.looseObject({ protocolVersion: z.number().int() }),
  result: z.object({ protocolVersion: z.number() }),
  summary: "Handshake.",
});
const big = defineMethod({
  method: "test.big",
  extension: true,
  params: z.object({ n: z.number().int() }),
  result: z.object({ n: z.number(), blob: z.string() }),
  summary: "Answers with a large result.",
});
const note = defineMethod({
  method: "test.note",
  extension: true,
  params: z.object({}),
  result: z.object({}),
  summary: "Sends a notification of its own, then answers.",
});

const silent: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silent,
} as unknown as Logger;

/** Size of one `test.big` result, and the backlog limit of the transport under test (four results' worth). */
const BLOB_BYTES = 256 * 1024;
const LIMIT = 4 * BLOB_BYTES;

interface Harness {
  input: PassThrough;
  output: PassThrough;
  transport: FramedTransport;
  connection: RpcConnection;
  /** `n` of every `test.big` request dispatched to its handler, in dispatch order. */
  dispatched: number[];
  closed: () => boolean;
}

const connections: RpcConnection[] = [];
afterEach(() => {
  for (const c of connections.splice(0)) c.dispose();
});

function start(): Harness {
  const input = new PassThrough();
  // A tiny output buffer that nobody reads: every answer stays in the writer's backlog.
  const output = new PassThrough({ highWaterMark: 1024 });
  const transport = createFramedTransport(input, output, { logger: silent, maxOutputBacklogBytes: LIMIT });
  const connection = new RpcConnection({
    reader: transport.reader,
    writer: transport.writer,
    methods: [initialize, big, note],
    logger: silent,
  });
  connections.push(connection);
  const dispatched: number[] = [];
  const blob = "x".repeat(BLOB_BYTES);
  connection.handle(initialize, () => Promise.resolve({ protocolVersion: 1 }));
  connection.handle(big, (params) => {
    dispatched.push(params.n);
    return Promise.resolve({ n: params.n, blob });
  });
  connection.handle(note, async () => {
    await connection.notify("test/progress", { from: "server" });
    return {};
  });
  let closed = false;
  connection.onClose(() => {
    closed = true;
  });
  connection.listen();
  return { input, output, transport, connection, dispatched, closed: () => closed };
}

const line = (value: unknown) => `${JSON.stringify(value)}\n`;
const request = (id: number | string, method: string, params: object) => line({ jsonrpc: "2.0", id, method, params });

async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Starts reading `output`; resolves with the parsed messages once `count` lines arrived. */
function readLines(output: PassThrough, count: number): Promise<Record<string, unknown>[]> {
  return new Promise((resolve) => {
    const out: Record<string, unknown>[] = [];
    let buffer = "";
    output.setEncoding("utf8");
    output.on("data", (chunk: string) => {
      buffer += chunk;
      let end: number;
      while ((end = buffer.indexOf("\n")) >= 0) {
        out.push(JSON.parse(buffer.slice(0, end)) as Record<string, unknown>);
        buffer = buffer.slice(end + 1);
      }
      if (out.length >= count) resolve(out);
    });
  });
}

describe("input backpressure", () => {
  it("stops dispatching requests while answers are not read, keeps the backlog bounded, then answers all in order", async () => {
    const h = start();
    const count = 200;
    let text = request(0, "initialize", { protocolVersion: 1 });
    for (let n = 1; n <= count; n++) text += request(n, "test.big", { n });
    h.input.write(text); // One chunk holding every request, as a pipelining client sends them.
    await settle();
    const first = h.dispatched.length;
    // Without backpressure all 200 would be dispatched (≈ 50 MB of answers queued); here a handful at most.
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(LIMIT / BLOB_BYTES + 2);
    expect(h.transport.writer.backlogBytes).toBeLessThanOrEqual(LIMIT + 2 * (BLOB_BYTES + 100));
    await settle(50);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(h.dispatched.length).toBe(first);
    expect(h.transport.writer.backlogBytes).toBeLessThanOrEqual(LIMIT + 2 * (BLOB_BYTES + 100));

    const replies = await readLines(h.output, count + 1);
    expect(replies.map((r) => r["id"])).toEqual(Array.from({ length: count + 1 }, (_, i) => i));
    expect(replies.slice(1).every((r) => (r["result"] as { blob: string }).blob.length === BLOB_BYTES)).toBe(true);
    expect(h.dispatched).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    expect(h.closed()).toBe(false);
  });

  it("keeps malformed-input errors and server notifications in order, and ends only after the paused input drained", async () => {
    const h = start();
    let text = request(0, "initialize", { protocolVersion: 1 });
    for (let n = 1; n <= 20; n++) text += request(n, "test.big", { n });
    text += "this is not json\n";
    text += request("note", "test.note", {});
    text += request(21, "test.big", { n: 21 });
    h.input.write(text);
    h.input.end(); // EOF arrives while the reader is held back.
    await settle();
    expect(h.dispatched.length).toBeLessThan(20);
    expect(h.closed()).toBe(false);

    const replies = await readLines(h.output, 25);
    const order = replies.map((r) => ("id" in r ? r["id"] : r["method"]));
    // Answers of concurrent requests may come in any order (JSON-RPC); "note" waits for its notification's write, so
    // the answer to request 21, delivered in the same batch, may overtake it.
    expect(order.filter((x) => x !== "note")).toEqual([
      ...Array.from({ length: 21 }, (_, i) => i),
      null, // the -32700 for the malformed line, in input order
      "test/progress",
      21,
    ]);
    // The handler's own notification goes out before its answer.
    expect(order.indexOf("test/progress")).toBeLessThan(order.indexOf("note"));
    expect((replies[21] as { error: { code: number } }).error.code).toBe(-32700);
    await settle();
    expect(h.closed()).toBe(true);
  });
});
