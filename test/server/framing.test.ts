import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import type { Message } from "vscode-jsonrpc/node";
import { checkEnvelope, createFramedTransport, type FramedTransportOptions } from "../../src/server/framing.js";
import { JsonText, serializeJson } from "../../src/server/json-text.js";

/** An in-process transport: the test writes raw bytes to `input` and reads raw bytes from `output`. */
function setup(options: FramedTransportOptions = {}) {
  const input = new PassThrough();
  const output = new PassThrough();
  const transport = createFramedTransport(input, output, options);
  const received: Message[] = [];
  let closed = false;
  transport.reader.onClose(() => {
    closed = true;
  });
  transport.reader.listen((message) => received.push(message));
  let raw = "";
  output.setEncoding("utf8");
  output.on("data", (chunk: string) => {
    raw += chunk;
  });
  return {
    input,
    output,
    transport,
    received,
    isClosed: () => closed,
    raw: () => raw,
    /** Complete NDJSON lines written so far, parsed. */
    replies: () =>
      raw
        .split("\n")
        .slice(0, -1)
        .map((line) => JSON.parse(line) as { id: unknown; error?: { code: number; message: string } }),
  };
}

/** Lets pending stream events and promise callbacks run. */
async function settle(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Splits `Content-Length` framed output into parsed messages; throws on a framing mistake. */
function parseFramed(raw: string): unknown[] {
  const out: unknown[] = [];
  let rest = Buffer.from(raw, "utf8");
  while (rest.length > 0) {
    const end = rest.indexOf("\r\n\r\n");
    const header = /^Content-Length: (\d+)$/.exec(rest.subarray(0, end).toString("latin1"));
    if (end < 0 || header === null) throw new Error(`Bad framing: ${rest.toString()}`);
    const length = Number(header[1]);
    out.push(JSON.parse(rest.subarray(end + 4, end + 4 + length).toString("utf8")));
    rest = rest.subarray(end + 4 + length);
  }
  return out;
}

const request = (id: number, method = "test.echo", params: object = {}) => ({ jsonrpc: "2.0", id, method, params });
const line = (value: unknown) => `${JSON.stringify(value)}\n`;

describe("newline-delimited JSON input", () => {
  it("reassembles a message split across chunks, including inside a multi-byte UTF-8 character", async () => {
    const t = setup();
    const bytes = Buffer.from(line(request(1, "test.echo", { text: "héllo 🌍" })), "utf8");
    const emoji = bytes.indexOf(Buffer.from("🌍", "utf8"));
    for (const [start, end] of [
      [0, 5],
      [5, emoji + 2],
      [emoji + 2, bytes.length],
    ] as const) {
      t.input.write(bytes.subarray(start, end));
      await settle(1);
    }
    await settle();
    expect(t.received).toEqual([request(1, "test.echo", { text: "héllo 🌍" })]);
  });

  it("has a dispatch epoch only while it hands messages over, moving with each chunk read", async () => {
    // RunStateAuthority.shareChangeMarks reuses a store look only at an equal epoch (issue 16): NaN outside delivery.
    const input = new PassThrough();
    const { reader } = createFramedTransport(input, new PassThrough(), {});
    const seen: number[] = [];
    reader.listen(() => seen.push(reader.dispatchEpoch));
    expect(reader.dispatchEpoch).toBeNaN();
    input.write(line(request(1)) + line(request(2)));
    await settle();
    input.write(line(request(3)));
    await settle();
    expect(seen).toHaveLength(3);
    expect(seen[0]).toBe(seen[1]);
    expect(seen[2]).toBeGreaterThan(seen[0] as number);
    expect(reader.dispatchEpoch).toBeNaN();
  });

  it("delivers many messages from one chunk in order", async () => {
    const t = setup();
    t.input.write(line(request(1)) + line(request(2)) + line({ jsonrpc: "2.0", method: "note" }));
    await settle();
    expect(t.received.map((m) => (m as { id?: number }).id ?? "note")).toEqual([1, 2, "note"]);
  });

  it("strips a trailing \\r and skips blank lines without answering them", async () => {
    const t = setup();
    t.input.write(`\n\r\n   \n${JSON.stringify(request(1))}\r\n\r\n\t\n${JSON.stringify(request(2))}\r\n`);
    await settle();
    expect(t.received).toEqual([request(1), request(2)]);
    expect(t.raw()).toBe("");
  });

  it("delivers a last line that has no newline when the input ends, then fires onClose", async () => {
    const t = setup();
    t.input.end(JSON.stringify(request(9)));
    await settle();
    expect(t.received).toEqual([request(9)]);
    expect(t.isClosed()).toBe(true);
  });

  it("answers a line that is not JSON with -32700 and id null, and keeps reading", async () => {
    const t = setup();
    t.input.write(`{bad json\n${JSON.stringify(request(2))}\n`);
    await settle();
    expect(t.replies()).toEqual([
      { jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.stringMatching(/not valid JSON/) } },
    ]);
    expect(t.received).toEqual([request(2)]);
  });

  it("answers invalid UTF-8 with -32700", async () => {
    const t = setup();
    t.input.write(
      Buffer.concat([
        Buffer.from('{"jsonrpc":"2.0","method":"a","params":{"t":"'),
        Buffer.from([0xc3, 0x28]),
        Buffer.from('"}}\n'),
      ]),
    );
    await settle();
    expect(t.replies()[0]?.error?.code).toBe(-32700);
    expect(t.received).toEqual([]);
  });
});

describe("JSON-RPC envelope validation", () => {
  const invalid: [string, string, unknown][] = [
    ["an empty batch", "[]", null],
    ["a batch", JSON.stringify([request(1)]), null],
    ["an object that is no message", '{"foo":1}', null],
    ["a wrong jsonrpc version (answered with its id)", JSON.stringify({ jsonrpc: "1.0", id: 7, method: "a" }), 7],
    ["a missing jsonrpc", JSON.stringify({ id: "x", method: "a" }), "x"],
    ["a method that is not a string", '{"jsonrpc":"2.0","method":5}', null],
    ["a request with id null", '{"jsonrpc":"2.0","id":null,"method":"a"}', null],
    ["an id of a wrong type", '{"jsonrpc":"2.0","id":{"a":1},"method":"a"}', null],
    ["params that are a string", '{"jsonrpc":"2.0","id":3,"method":"a","params":"x"}', 3],
    ["params that are null", '{"jsonrpc":"2.0","id":3,"method":"a","params":null}', 3],
    ["a response without result or error", '{"jsonrpc":"2.0","id":4}', 4],
    [
      "a response with both result and error",
      '{"jsonrpc":"2.0","id":4,"result":1,"error":{"code":1,"message":"m"}}',
      4,
    ],
    ["a response with a malformed error", '{"jsonrpc":"2.0","id":5,"error":"boom"}', 5],
    ["a number", "42", null],
    ["a string", '"hello"', null],
    ["null", "null", null],
  ];

  it.each(invalid)("answers %s with -32600", async (_name, text, id) => {
    const t = setup();
    t.input.write(`${text}\n${JSON.stringify(request(100))}\n`);
    await settle();
    const replies = t.replies();
    expect(replies).toEqual([{ jsonrpc: "2.0", id, error: { code: -32600, message: expect.any(String) } }]);
    expect(replies[0]?.error?.message).toMatch(/^[A-Z].*\.$/);
    expect(t.received).toEqual([request(100)]);
  });

  it("lets valid requests, notifications and responses through", () => {
    const valid = [
      request(1),
      { jsonrpc: "2.0", id: "s-1", method: "a", params: [1, 2] },
      { jsonrpc: "2.0", method: "note" },
      { jsonrpc: "2.0", id: 1, result: null },
      { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } },
    ];
    for (const message of valid) expect(checkEnvelope(message)).toEqual({ ok: true, message });
  });
});

describe("Content-Length framing", () => {
  const framed = (value: unknown, headerName = "Content-Length") => {
    const body = JSON.stringify(value);
    return `${headerName}: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };

  it("is detected from the first bytes and used for replies too", async () => {
    const t = setup();
    t.input.write(framed(request(1, "a", { text: "ü" })) + framed(request(2)));
    await settle();
    expect(t.transport.framing()).toBe("content-length");
    expect(t.received).toEqual([request(1, "a", { text: "ü" }), request(2)]);
    await t.transport.writer.write({ jsonrpc: "2.0", id: 1, result: { ok: "é" } } as Message);
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { ok: "é" } });
    expect(t.raw()).toBe(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });

  it("accepts a lower-case header name after leading whitespace, extra headers and byte-by-byte delivery", async () => {
    const t = setup();
    const body = JSON.stringify(request(3));
    const bytes = Buffer.from(
      `\r\n  content-length: ${Buffer.byteLength(body)}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n${body}`,
    );
    for (const byte of bytes) {
      t.input.write(Buffer.from([byte]));
      await settle(1);
    }
    await settle();
    expect(t.received).toEqual([request(3)]);
    expect(t.transport.framing()).toBe("content-length");
  });

  it("answers a body that is not JSON with -32700 in the same framing and keeps reading", async () => {
    const t = setup();
    t.input.write(`Content-Length: 4\r\n\r\n{bad${framed(request(2))}`);
    await settle();
    expect(parseFramed(t.raw())).toEqual([
      { jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.stringMatching(/not valid JSON/) } },
    ]);
    expect(t.received).toEqual([request(2)]);
  });

  it("answers a header without a valid Content-Length with -32700 and resynchronises on the next header", async () => {
    const t = setup();
    t.input.write(`${framed(request(1))}Content-Length: x\r\n\r\n{"junk":1}${framed(request(5))}`);
    await settle();
    expect(parseFramed(t.raw())).toEqual([
      { jsonrpc: "2.0", id: null, error: { code: -32700, message: "The message header has no valid Content-Length." } },
    ]);
    expect(t.received).toEqual([request(1), request(5)]);
  });

  it("can be forced, and NDJSON is used by the writer before anything was read", async () => {
    const auto = setup();
    expect(auto.transport.framing()).toBeUndefined();
    await auto.transport.writer.write({ jsonrpc: "2.0", method: "early" } as Message);
    expect(auto.raw()).toBe('{"jsonrpc":"2.0","method":"early"}\n');

    const forced = setup({ framing: "ndjson" });
    forced.input.write(`${line(request(1))}`);
    await settle();
    expect(forced.transport.framing()).toBe("ndjson");
    expect(forced.received).toEqual([request(1)]);
  });
});

describe("maximum message size", () => {
  it("answers an oversize NDJSON line with -32600 once, drops it without buffering it, and keeps reading", async () => {
    const t = setup({ maxMessageBytes: 1024 });
    const huge = JSON.stringify(request(1, "a", { blob: "x".repeat(10_000) }));
    for (let i = 0; i < huge.length; i += 100) {
      t.input.write(huge.slice(i, i + 100));
      await settle(1);
    }
    t.input.write(`\n${line(request(2))}`);
    await settle();
    expect(t.replies()).toEqual([
      { jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringMatching(/maximum size/) } },
    ]);
    expect(t.received).toEqual([request(2)]);
  });

  it("answers an oversize line that follows a message of the same chunk even when no more input comes", async () => {
    const t = setup({ maxMessageBytes: 1024 });
    // A first message alone lets the reader's batch grow past one, so the next two go in one turn.
    t.input.write(line(request(0)));
    await settle();
    t.input.write(`${line(request(1))}${JSON.stringify(request(2, "a", { blob: "x".repeat(5000) }))}`);
    await settle();
    expect(t.received).toEqual([request(0), request(1)]);
    expect(t.replies()).toEqual([
      { jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringMatching(/maximum size/) } },
    ]);
  });

  it("answers an oversize Content-Length body with -32600 and skips exactly its bytes", async () => {
    const t = setup({ maxMessageBytes: 1024 });
    const body = JSON.stringify(request(1, "a", { blob: "x".repeat(5000) }));
    t.input.write(`Content-Length: ${body.length}\r\n\r\n${body.slice(0, 2000)}`);
    await settle();
    t.input.write(body.slice(2000));
    const next = JSON.stringify(request(2));
    t.input.write(`Content-Length: ${next.length}\r\n\r\n${next}`);
    await settle();
    expect(parseFramed(t.raw())).toEqual([
      { jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringMatching(/maximum size/) } },
    ]);
    expect(t.received).toEqual([request(2)]);
  });
});

describe("writer", () => {
  it("writes one compact line per message, in call order, with no raw newline inside", async () => {
    const t = setup();
    const messages = [
      { jsonrpc: "2.0", method: "a", params: { text: "line1\nline2\r\n", sep: "\u2028\u2029" } },
      { jsonrpc: "2.0", id: 1, result: { nested: { ok: true } } },
    ] as unknown as Message[];
    await Promise.all(messages.map((m) => t.transport.writer.write(m)));
    const lines = t.raw().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe("");
    expect(lines[0]).not.toMatch(/[\r\u2028\u2029]/);
    expect(lines.slice(0, 2).map((l) => JSON.parse(l) as unknown)).toEqual(messages);
  });

  it("writes a JsonText result verbatim, in the bytes an ordinary response with that result would have", async () => {
    const result = { text: "a\u2028b\n", list: [1, { x: null }] };
    for (const framing of ["ndjson", "content-length"] as const) {
      const plain = setup({ framing });
      const spliced = setup({ framing });
      for (const id of [7, 'id \u2029 "quoted"']) {
        await plain.transport.writer.write({ jsonrpc: "2.0", id, result } as unknown as Message);
        await spliced.transport.writer.write({
          jsonrpc: "2.0",
          id,
          result: new JsonText(serializeJson(result)),
        } as unknown as Message);
      }
      expect(spliced.raw()).toBe(plain.raw());
      expect(spliced.raw()).not.toMatch(/[\u2028\u2029]/);
    }
  });

  it("writes spliced and ordinary frames queued in one turn as the bytes ordinary frames would be, in order", async () => {
    // Spliced results are copied into the batch as UTF-8 bytes (issue 16, request path): multi-byte and astral text,
    // string and number ids, notifications between them, and the same JsonText object in several frames.
    const result = { text: "é 日本 \u{1F600} \u2028", n: [1, 2] };
    const shared = new JsonText(serializeJson(result));
    const messages = (splice: boolean) =>
      [
        { jsonrpc: "2.0", id: 1, result: splice ? shared : result },
        { jsonrpc: "2.0", method: "note", params: { text: "ü\u2029" } },
        { jsonrpc: "2.0", id: "ß-2", result: splice ? shared : result },
        { jsonrpc: "2.0", id: 3, result: { plain: "ö" } },
        { jsonrpc: "2.0", id: 4, result: splice ? new JsonText(serializeJson("ø")) : "ø" },
      ] as unknown as Message[];
    for (const framing of ["ndjson", "content-length"] as const) {
      const plain = setup({ framing });
      const spliced = setup({ framing });
      await Promise.all(messages(false).map((m) => plain.transport.writer.write(m)));
      await Promise.all(messages(true).map((m) => spliced.transport.writer.write(m)));
      expect(spliced.raw()).toBe(plain.raw());
      const parsed = framing === "ndjson" ? spliced.replies() : parseFramed(spliced.raw());
      expect(parsed).toEqual(JSON.parse(JSON.stringify(messages(false))));
    }
  });

  it("writes a JsonText made of pieces (large ones written as they are) as the bytes of the joined text", async () => {
    // Issue 32: a 22 MB product.list answer is written in 1 MiB buffers, never copied into one; small pieces and
    // multi-byte text around the large ones, between ordinary frames of the same turn.
    const big = (c: string, n: number) => Buffer.from(`"${c.repeat(n)}"`, "utf8");
    const pieces = [Buffer.from("[", "utf8"), big("a", 70_000), Buffer.from(",", "utf8"), big("é", 40_000)];
    pieces.push(Buffer.from(',"日本",', "utf8"), big("z", 200_000), Buffer.from("]", "utf8"));
    const text = Buffer.concat(pieces).toString("utf8");
    const messages = (splice: boolean) =>
      [
        { jsonrpc: "2.0", method: "note", params: { n: 1 } },
        { jsonrpc: "2.0", id: 1, result: splice ? JsonText.fromChunks(pieces) : JSON.parse(text) },
        { jsonrpc: "2.0", id: 2, result: "after" },
      ] as unknown as Message[];
    for (const framing of ["ndjson", "content-length"] as const) {
      const plain = setup({ framing });
      const spliced = setup({ framing });
      await Promise.all(messages(false).map((m) => plain.transport.writer.write(m)));
      await Promise.all(messages(true).map((m) => spliced.transport.writer.write(m)));
      expect(spliced.raw().length).toBe(plain.raw().length);
      expect(spliced.raw() === plain.raw()).toBe(true);
    }
    expect(JsonText.fromChunks(pieces).text).toBe(text);
  });

  it("post settles once: without an error when the output took the frame, with one when it never will", async () => {
    const t = setup();
    const outcomes: (Error | undefined)[] = [];
    t.transport.writer.post({ jsonrpc: "2.0", id: 1, result: new JsonText("[1]") } as unknown as Message, (e) =>
      outcomes.push(e),
    );
    t.transport.writer.post({ jsonrpc: "2.0", id: 2, result: { big: 1n } } as unknown as Message, (e) =>
      outcomes.push(e),
    );
    await settle();
    expect(outcomes).toEqual([undefined, undefined]);
    expect(t.replies()).toEqual([
      { jsonrpc: "2.0", id: 1, result: [1] },
      { jsonrpc: "2.0", id: 2, error: { code: -32603, message: expect.any(String) } },
    ]);
    t.transport.writer.post({ jsonrpc: "2.0", method: "n", params: { big: 1n } } as unknown as Message, (e) =>
      outcomes.push(e),
    );
    t.output.destroy();
    await settle();
    t.transport.writer.post({ jsonrpc: "2.0", id: 3, result: null } as unknown as Message, (e) => outcomes.push(e));
    await settle();
    expect(outcomes).toHaveLength(4);
    expect(outcomes[2]).toBeInstanceOf(Error);
    expect(outcomes[3]?.message).toMatch(/closed/);
  });

  it("replaces a response whose result cannot be serialised by a -32603 for the same id", async () => {
    const t = setup();
    await t.transport.writer.write({ jsonrpc: "2.0", id: 8, result: { big: 1n } } as unknown as Message);
    expect(t.replies()).toEqual([{ jsonrpc: "2.0", id: 8, error: { code: -32603, message: expect.any(String) } }]);
    await expect(
      t.transport.writer.write({ jsonrpc: "2.0", method: "n", params: { big: 1n } } as unknown as Message),
    ).rejects.toThrow();
  });

  it("rejects writes once the output is destroyed", async () => {
    const t = setup();
    t.output.destroy();
    await settle();
    await expect(t.transport.writer.write({ jsonrpc: "2.0", method: "late" } as Message)).rejects.toThrow(/closed/);
  });

  it("respects backpressure: write promises stay pending while the reader is paused, and memory stays bounded", async () => {
    const input = new PassThrough();
    const output = new PassThrough({ highWaterMark: 64 });
    const { writer } = createFramedTransport(input, output);
    const payload = "y".repeat(200);
    const count = 50;
    const done: boolean[] = Array.from({ length: count }, () => false);
    const writes = Array.from({ length: count }, (_, i) =>
      writer.write({ jsonrpc: "2.0", method: "bulk", params: { i, payload } } as Message).then(() => {
        done[i] = true;
      }),
    );
    let flushed = false;
    const flushing = writer.flush().then(() => {
      flushed = true;
    });
    await settle(10);
    // The first message went into the stream's buffer (write returned false); nothing else was accepted.
    expect(done.filter(Boolean)).toEqual([]);
    expect(flushed).toBe(false);
    expect(output.writableLength + output.readableLength).toBeLessThan(2 * (payload.length + 100));

    let text = "";
    output.setEncoding("utf8");
    output.on("data", (chunk: string) => {
      text += chunk;
    });
    await Promise.all(writes);
    await flushing;
    expect(flushed).toBe(true);
    const received = text
      .split("\n")
      .slice(0, -1)
      .map((l) => (JSON.parse(l) as { params: { i: number } }).params.i);
    expect(received).toEqual(Array.from({ length: count }, (_, i) => i));
  });

  it("drops an oversize response unread and hands on a local -32600 for its id; an oversize request is still answered", async () => {
    const t = setup({ maxMessageBytes: 100_000, maxResponseBytes: 1024 });
    const answer = JSON.stringify({ jsonrpc: "2.0", id: 7, result: { events: ["x".repeat(5000)], more: true } });
    for (let i = 0; i < answer.length; i += 500) {
      t.input.write(answer.slice(i, i + 500));
      await settle(1);
    }
    t.input.write(`\n${line({ id: "a-1", jsonrpc: "2.0", error: { code: 1, message: "x".repeat(2000) } })}`);
    t.input.write(line({ jsonrpc: "2.0", id: 8, result: { small: true } }));
    await settle();
    const local = (id: number | string) => ({
      jsonrpc: "2.0",
      id,
      error: { code: -32600, message: expect.stringMatching(/dropped unread/), data: { maxResponseBytes: 1024 } },
    });
    expect(t.received).toEqual([local(7), local("a-1"), { jsonrpc: "2.0", id: 8, result: { small: true } }]);
    expect(t.replies()).toEqual([]);
    // A request over the response bound (not a response) is delivered: only maxMessageBytes bounds requests.
    const big = request(9, "a", { blob: "x".repeat(5000) });
    t.input.write(line(big));
    await settle();
    expect(t.received.at(-1)).toEqual(big);
  });
});
