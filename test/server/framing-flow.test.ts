/**
 * The framed writer's flow control (issue 7, request overhead and notification streaming): frames queued in the same
 * turn go out as one chunk of at most the output's high-water mark, in order; `backlogBytes` / `whenWritable` let a
 * producer that cannot await each write (a streaming worker) hold back until a slow reader caught up.
 */
import { PassThrough } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import type { Message } from "vscode-jsonrpc/node";
import { createFramedTransport } from "../../src/server/framing.js";

/** Lets pending stream events and promise callbacks run. */
async function settle(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** An output that records the size of every chunk handed to it. */
function recordingOutput(highWaterMark?: number) {
  const output = new PassThrough(highWaterMark === undefined ? {} : { highWaterMark });
  const chunks: number[] = [];
  const write = output.write.bind(output) as (chunk: string, encoding: BufferEncoding) => boolean;
  output.write = ((chunk: string, encoding: BufferEncoding) => {
    chunks.push(Buffer.byteLength(chunk));
    return write(chunk, encoding);
  }) as typeof output.write;
  return { output, chunks };
}

const note = (i: number, text = "x") =>
  ({ jsonrpc: "2.0", method: "product.taskOutputDelta", params: { i, text } }) as Message;

function lines(raw: string): { params: { i: number } }[] {
  return raw
    .split("\n")
    .slice(0, -1)
    .map((l) => JSON.parse(l) as { params: { i: number } });
}

describe("framed writer batching", () => {
  it("hands the frames queued in one turn to the output as one chunk, in call order", async () => {
    const { output, chunks } = recordingOutput();
    const { writer } = createFramedTransport(new PassThrough(), output);
    let raw = "";
    output.setEncoding("utf8").on("data", (c: string) => (raw += c));
    await Promise.all(Array.from({ length: 100 }, (_, i) => writer.write(note(i))));
    expect(chunks).toHaveLength(1);
    expect(lines(raw).map((m) => m.params.i)).toEqual(Array.from({ length: 100 }, (_, i) => i));
  });

  it("never joins more than the output's high-water mark into one chunk, but sends a larger frame alone", async () => {
    const { output, chunks } = recordingOutput(1024);
    const { writer } = createFramedTransport(new PassThrough(), output);
    let raw = "";
    output.setEncoding("utf8").on("data", (c: string) => (raw += c));
    const big = "b".repeat(5000);
    await Promise.all([...Array.from({ length: 60 }, (_, i) => writer.write(note(i))), writer.write(note(60, big))]);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.slice(0, -1).every((n) => n <= 1024)).toBe(true);
    expect(chunks[chunks.length - 1]).toBeGreaterThan(5000);
    expect(lines(raw).map((m) => m.params.i)).toEqual(Array.from({ length: 61 }, (_, i) => i));
  });
});

describe("framed writer backlog", () => {
  it("counts what a slow reader has not taken yet, and whenWritable waits until it is below the limit", async () => {
    const output = new PassThrough({ highWaterMark: 256 });
    const { writer } = createFramedTransport(new PassThrough(), output);
    const writes = Array.from({ length: 200 }, (_, i) => writer.write(note(i, "y".repeat(100))));
    await settle();
    expect(writer.backlogBytes).toBeGreaterThan(20_000);
    let writable = false;
    const waiting = writer.whenWritable(4096).then(() => {
      writable = true;
    });
    await settle(5);
    expect(writable).toBe(false);

    let raw = "";
    output.setEncoding("utf8").on("data", (c: string) => (raw += c));
    await waiting;
    expect(writer.backlogBytes).toBeLessThanOrEqual(4096);
    await Promise.all(writes);
    expect(writer.backlogBytes).toBe(0);
    expect(lines(raw)).toHaveLength(200);
    await expect(writer.whenWritable(0)).resolves.toBeUndefined();
  });

  it("stops holding producers back once the output is gone (the writes fail instead)", async () => {
    const output = new PassThrough({ highWaterMark: 64 });
    const { writer } = createFramedTransport(new PassThrough(), output);
    const writes = Array.from({ length: 50 }, (_, i) =>
      writer.write(note(i, "z".repeat(100))).catch((e: unknown) => e),
    );
    await settle();
    const waiting = writer.whenWritable(0);
    output.destroy();
    await expect(waiting).resolves.toBeUndefined();
    const outcomes = await Promise.all(writes);
    expect(outcomes.some((o) => o instanceof Error)).toBe(true);
  });
});

describe("framed writer: answers to pipelined requests (issue 16, request overhead)", () => {
  /** A transport whose listener answers every request one turn after delivery, as the connection's dispatch does. */
  function answering() {
    const input = new PassThrough();
    const { output, chunks } = recordingOutput();
    const { reader, writer } = createFramedTransport(input, output);
    let raw = "";
    output.setEncoding("utf8").on("data", (c: string) => (raw += c));
    reader.listen((message) => {
      const id = (message as unknown as { id: number }).id;
      setImmediate(() => void writer.write({ jsonrpc: "2.0", id, result: { id } } as Message));
    });
    const request = (id: number) => `${JSON.stringify({ jsonrpc: "2.0", id, method: "product.status", params: {} })}\n`;
    return { input, chunks, request, raw: () => raw };
  }

  it("holds the answers of a burst of pipelined requests and writes them in a few chunks, all in order", async () => {
    const { input, chunks, request, raw } = answering();
    const n = 200;
    input.write(Array.from({ length: n }, (_, i) => request(i)).join(""));
    while (raw().split("\n").length <= n) await settle(1);
    const ids = raw()
      .split("\n")
      .slice(0, -1)
      .map((l) => (JSON.parse(l) as { id: number }).id);
    expect(ids).toEqual(Array.from({ length: n }, (_, i) => i));
    // One chunk per answer without the hold; with it at most one per 16 held turns (plus the last partial batches).
    expect(chunks.length).toBeLessThanOrEqual(Math.ceil(n / 8));
  });

  it("does not hold the answer of a request with nothing behind it", async () => {
    const { input, chunks, request, raw } = answering();
    input.write(request(1));
    await settle(2);
    expect(chunks).toHaveLength(1);
    expect(raw()).toBe(`${JSON.stringify({ jsonrpc: "2.0", id: 1, result: { id: 1 } })}\n`);
  });
});

/** V8's full collection, for tests that check what is no longer referenced. */
function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

describe("framed writer memory", () => {
  it("drops the frames it has written while a slow reader keeps its queue from ever running empty", async () => {
    // The producer writes whenever the backlog is under 4 KiB (as a streaming worker behind the output gate does)
    // and the reader takes a little each turn, so frames are always queued behind the output.
    const output = new PassThrough({ highWaterMark: 1024 });
    const { writer } = createFramedTransport(new PassThrough(), output);
    const early: WeakRef<Promise<void>>[] = [];
    let sent = 0;
    let received = 0;
    for (let round = 0; round < 300; round++) {
      while (writer.backlogBytes < 4096) {
        const written = writer.write(note(sent, "z".repeat(60)));
        if (sent < 100) early.push(new WeakRef(written));
        sent += 1;
      }
      await settle(1);
      const chunk = output.read() as Buffer | null;
      if (chunk !== null) received += chunk.toString("utf8").split("\n").length - 1;
      await settle(1);
    }
    expect(received).toBeGreaterThan(1_000);
    expect(writer.backlogBytes).toBeGreaterThan(1024);
    await settle();
    collectGarbage();
    // A written frame's promise is referenced by nothing once the writer let go of its queue entry.
    expect(early.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);
  });
});
