/**
 * Bad bytes and transport edge cases over the real stdio server (PROTOCOL.md sections 1-3): parse errors, batches,
 * envelopes that are not JSON-RPC, lenient line endings, chunking, Content-Length framing, initialization order,
 * unknown methods and notifications, method spellings, version negotiation, the notification prefix opt-in, and a
 * graceful exit when stdin closes. Every case checks the exact code, `data` and `id`, that the server keeps serving,
 * and that stdout carried nothing but JSON-RPC messages. Drives the built server byte by byte (no SDK).
 */
import { describe, expect, it } from "vitest";
import { isJsonRpcLine, startRawServer, tempDir, type RawServer } from "../support/server-process.js";
import { PRODUCT_METHODS, PRODUCT_NOTIFICATIONS } from "../support/protocol-names.js";

type Msg = Record<string, unknown>;

const INIT_PARAMS = { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "framing-tests", version: "1" } };

const line = (message: unknown): string => `${JSON.stringify(message)}\n`;
const req = (id: string | number, method: string, params: unknown = {}) => ({ jsonrpc: "2.0", id, method, params });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A raw server plus everything it wrote to stdout, byte for byte. */
interface Started {
  raw: RawServer;
  stdout(): string;
  /** Sends a request and resolves with the response that echoes its id. */
  call(id: string | number, method: string, params?: unknown): Promise<Msg>;
  /** The response with this id (a server → client request with the same id is not a response). */
  response(id: string | number | null): Promise<Msg>;
}

function start(): Started {
  const raw = startRawServer();
  let out = "";
  raw.child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")));
  const response = (id: string | number | null) => raw.next((m) => m.id === id && !("method" in m));
  return {
    raw,
    stdout: () => out,
    response,
    call(id, method, params = {}) {
      raw.send(req(id, method, params));
      return response(id);
    },
  };
}

async function startInitialized(): Promise<Started> {
  const s = start();
  const init = await s.call("init", "initialize", INIT_PARAMS);
  expect(init).toHaveProperty("result");
  return s;
}

/** One human sentence (PROTOCOL.md section 3): one line, starts upper-case, ends with a full stop. */
function expectOneSentence(message: unknown): void {
  expect(typeof message).toBe("string");
  const text = message as string;
  expect(text).toMatch(/^[A-Z]/);
  expect(text).toMatch(/\.$/);
  expect(text).not.toMatch(/\n/);
  expect(text).not.toMatch(/[.!?]\s+[A-Z]/);
}

/** Asserts the response is exactly `{jsonrpc, id, error: {code, message, data?}}` with this id, code and data. */
function expectError(res: Msg, id: string | number | null, code: number, data?: unknown): void {
  expect(Object.keys(res).sort()).toEqual(["error", "id", "jsonrpc"]);
  expect(res.jsonrpc).toBe("2.0");
  expect(res.id).toBe(id);
  const error = res.error as Msg;
  expect(error.code).toBe(code);
  expectOneSentence(error.message);
  if (data === undefined) expect(error).not.toHaveProperty("data");
  else expect(error.data).toEqual(data);
}

function expectResult(res: Msg, id: string | number): Msg {
  expect(Object.keys(res).sort()).toEqual(["id", "jsonrpc", "result"]);
  expect(res.id).toBe(id);
  return res.result as Msg;
}

/** Proves the server still serves: a valid request gets its answer. */
async function expectServing(s: Started, id: string | number): Promise<void> {
  expect(expectResult(await s.call(id, "product.list", {}), id)).toEqual({ products: expect.any(Array), dropped: 0 });
}

/**
 * Closes stdin and checks the graceful end (PROTOCOL.md section 1): exit code 0, stdout ended on a newline, every
 * stdout line one JSON-RPC message, and no `-32603` (a bug) anywhere.
 */
async function finish(s: Started): Promise<void> {
  expect(await s.raw.close()).toBe(0);
  const out = s.stdout();
  expect(out.endsWith("\n")).toBe(true);
  const lines = out.slice(0, -1).split("\n");
  for (const l of lines) expect(isJsonRpcLine(l), l).toBe(true);
  expect(out).not.toContain('"code":-32603');
}

describe("framing and envelope errors over stdio (PROTOCOL.md sections 1-3)", () => {
  it("answers a line that is not JSON with -32700 and id null, and keeps serving", async () => {
    const s = await startInitialized();
    s.raw.write("this is not json\n");
    expectError(await s.response(null), null, -32700);
    s.raw.write('{"jsonrpc":"2.0","id":1,"method":"product.list"\n'); // truncated object
    expectError(await s.response(null), null, -32700);
    s.raw.child.stdin.write(Buffer.from([0xff, 0xfe, 0x7b, 0x0a])); // not UTF-8
    expectError(await s.response(null), null, -32700);
    await expectServing(s, 2);
    await finish(s);
  });

  it("answers an empty and a non-empty batch with -32600 and id null, without running the batched request", async () => {
    const s = await startInitialized();
    s.raw.write("[]\n");
    expectError(await s.response(null), null, -32600);
    s.raw.write(`[${JSON.stringify(req(41, "product.list"))}]\n`);
    expectError(await s.response(null), null, -32600);
    await expectServing(s, 42);
    expect(s.raw.stdoutLines.some((l) => l.includes('"id":41'))).toBe(false);
    await finish(s);
  });

  it("answers objects that are not JSON-RPC with -32600 (id echoed when it is valid, else null)", async () => {
    const s = await startInitialized();
    s.raw.write('{"foo":1}\n');
    expectError(await s.response(null), null, -32600);
    s.raw.send({ jsonrpc: "1.0", id: 3, method: "product.list", params: {} });
    expectError(await s.response(3), 3, -32600);
    s.raw.send({ id: "no-version", method: "product.list", params: {} });
    expectError(await s.response("no-version"), "no-version", -32600);
    s.raw.send({ jsonrpc: "2.0", id: 4, method: 5, params: {} });
    expectError(await s.response(4), 4, -32600);
    s.raw.send({ jsonrpc: "2.0", id: { nested: true }, method: "product.list" });
    expectError(await s.response(null), null, -32600);
    s.raw.write("42\n");
    expectError(await s.response(null), null, -32600);
    s.raw.send({ jsonrpc: "2.0", id: null, method: "product.list", params: {} });
    expectError(await s.response(null), null, -32600);
    s.raw.send({ jsonrpc: "2.0", id: 6, method: "product.list", params: "all" });
    expectError(await s.response(6), 6, -32600);
    await expectServing(s, 5);
    // None of the refused requests ran: exactly one answer per refused line, one for each valid request.
    expect(s.raw.stdoutLines).toHaveLength(10);
    await finish(s);
  });

  it("accepts \\r\\n line endings and blank lines", async () => {
    const s = start();
    s.raw.write(`\r\n\n  \n${JSON.stringify(req(1, "initialize", INIT_PARAMS))}\r\n\r\n\n`);
    expectResult(await s.response(1), 1);
    s.raw.write(`${JSON.stringify(req(2, "product.list"))}\r\n\n\r\n${JSON.stringify(req(3, "_product.list"))}\r\n`);
    expect(expectResult(await s.response(2), 2)).toEqual({ products: [], dropped: 0 });
    expect(expectResult(await s.response(3), 3)).toEqual({ products: [], dropped: 0 });
    expect(s.raw.stdoutLines).toHaveLength(3); // no error answers to the blank lines
    await finish(s);
  });

  it("reads several messages from one write and one message split over several writes (even inside a UTF-8 character)", async () => {
    const s = start();
    s.raw.write(
      line(req(1, "initialize", INIT_PARAMS)) +
        line(req(2, "product.list")) +
        line(req("three", "product.status", { productId: "prd_none" })),
    );
    expectResult(await s.response(1), 1);
    expect(expectResult(await s.response(2), 2)).toEqual({ products: [], dropped: 0 });
    expectError(await s.response("three"), "three", -32002, { kind: "product", id: "prd_none" });

    const id = "prd_é€😀";
    const bytes = Buffer.from(line(req(4, "product.status", { productId: id })), "utf8");
    const cut = bytes.indexOf(Buffer.from("€", "utf8")) + 1; // in the middle of a 3-byte character
    const pieces = [
      bytes.subarray(0, 5),
      bytes.subarray(5, cut),
      bytes.subarray(cut, bytes.length - 1),
      bytes.subarray(bytes.length - 1),
    ];
    for (const piece of pieces) {
      s.raw.child.stdin.write(piece);
      await sleep(25);
    }
    expectError(await s.response(4), 4, -32002, { kind: "product", id });
    await expectServing(s, 5);
    await finish(s);
  });

  it("detects Content-Length framing from the first bytes and answers in the same framing", async () => {
    const s = start();
    let buffer = Buffer.alloc(0);
    const frames: Msg[] = [];
    s.raw.child.stdout.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const header = buffer.subarray(0, end).toString("latin1");
        const match = /^Content-Length: (\d+)$/im.exec(header);
        expect(match, `bad header ${header}`).not.toBeNull();
        const length = Number(match![1]);
        if (buffer.length < end + 4 + length) return;
        frames.push(JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString("utf8")) as Msg);
        buffer = buffer.subarray(end + 4 + length);
      }
    });
    const frame = (body: string) => `Content-Length: ${Buffer.byteLength(body, "utf8")}\r\n\r\n${body}`;
    const waitFrame = async (pred: (m: Msg) => boolean): Promise<Msg> => {
      for (let i = 0; i < 400; i++) {
        const found = frames.find(pred);
        if (found) return found;
        await sleep(10);
      }
      throw new Error(`no matching frame; got ${JSON.stringify(frames)}`);
    };

    const init = frame(JSON.stringify(req(1, "initialize", { ...INIT_PARAMS, protocolVersion: 1 })));
    s.raw.write(init.slice(0, 7)); // "Content" — not yet decidable
    await sleep(25);
    s.raw.write(init.slice(7));
    expect((await waitFrame((m) => m.id === 1)).result).toMatchObject({ protocolVersion: 1 });
    // Two frames in one write, the second one not JSON.
    s.raw.write(frame(JSON.stringify(req(2, "product.status", { productId: "prd_é" }))) + frame("{not json"));
    const notFound = await waitFrame((m) => m.id === 2);
    expect(notFound).toEqual({
      jsonrpc: "2.0",
      id: 2,
      error: { code: -32002, message: expect.any(String), data: { kind: "product", id: "prd_é" } },
    });
    const parse = await waitFrame((m) => m.id === null);
    expect(parse).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: expect.any(String) } });
    s.raw.write(frame(JSON.stringify(req(3, "product.nope"))));
    expect((await waitFrame((m) => m.id === 3)).error).toMatchObject({
      code: -32601,
      data: { method: "product.nope" },
    });

    expect(await s.raw.close()).toBe(0);
    const out = s.stdout();
    expect(out.startsWith("Content-Length: ")).toBe(true);
    expect(buffer.length).toBe(0); // nothing outside a frame
    expect(frames).toHaveLength(4);
    for (const m of frames) expect(isJsonRpcLine(JSON.stringify(m))).toBe(true);
  });

  it("answers a request before initialize with -32600 and ignores notifications before it", async () => {
    const s = start();
    s.raw.send({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId: "ses_x" } });
    expectError(await s.call(1, "product.list"), 1, -32600);
    expectError(await s.call("two", "session/new", { cwd: tempDir(), mcpServers: [] }), "two", -32600);
    expectError(await s.call(3, "no/such/method"), 3, -32600);
    expectResult(await s.call(4, "initialize", INIT_PARAMS), 4);
    await expectServing(s, 5);
    expect(s.raw.stdoutLines).toHaveLength(5);
    await finish(s);
  });

  it("answers an unknown method with -32601 and data {method} as spelled, and ignores an unknown notification", async () => {
    const s = await startInitialized();
    expectError(await s.call(1, "product.nope"), 1, -32601, { method: "product.nope" });
    expectError(await s.call(2, "_product.nope"), 2, -32601, { method: "_product.nope" });
    expectError(await s.call(3, "x/unknown"), 3, -32601, { method: "x/unknown" });
    const before = s.raw.stdoutLines.length;
    s.raw.send({ jsonrpc: "2.0", method: "product.nope", params: {} });
    s.raw.send({ jsonrpc: "2.0", method: "_vendor/notice", params: { a: 1 } });
    s.raw.send({ jsonrpc: "2.0", method: "$/unknown" });
    await expectServing(s, 4);
    expect(s.raw.stdoutLines.length - before).toBe(1); // only the answer to request 4
    await finish(s);
  });

  it("ignores responses to requests it never sent", async () => {
    const s = await startInitialized();
    const before = s.raw.stdoutLines.length;
    s.raw.send({ jsonrpc: "2.0", id: 99, result: {} });
    s.raw.send({ jsonrpc: "2.0", id: "x-98", error: { code: -32000, message: "Nobody asked." } });
    await expectServing(s, 1);
    expect(s.raw.stdoutLines.length - before).toBe(1);
    await finish(s);
  });

  it("serves extension methods under both spellings, and ACP methods only under their own name", async () => {
    const s = await startInitialized();
    expect(expectResult(await s.call(1, "product.list"), 1)).toEqual({ products: [], dropped: 0 });
    expect(expectResult(await s.call(2, "_product.list"), 2)).toEqual({ products: [], dropped: 0 });
    expectError(await s.call(3, "product.status", { productId: "prd_missing" }), 3, -32002, {
      kind: "product",
      id: "prd_missing",
    });
    expectError(await s.call(4, "_product.status", { productId: "prd_missing" }), 4, -32002, {
      kind: "product",
      id: "prd_missing",
    });
    expectError(await s.call(5, "_session/new", { cwd: tempDir(), mcpServers: [] }), 5, -32601, {
      method: "_session/new",
    });
    expectError(await s.call(6, "_initialize", INIT_PARAMS), 6, -32601, { method: "_initialize" });
    expect(expectResult(await s.call(7, "session/new", { cwd: tempDir(), mcpServers: [] }), 7)).toEqual({
      sessionId: expect.any(String),
      modes: expect.objectContaining({ currentModeId: "confirm" }),
      configOptions: expect.any(Array),
    });
    await finish(s);
  });

  it("answers initialize with protocolVersion 65535 with version 1 and exactly the capabilities of section 4", async () => {
    const s = start();
    const result = expectResult(await s.call(1, "initialize", { ...INIT_PARAMS, protocolVersion: 65535 }), 1);
    expect(result).toEqual({
      protocolVersion: 1,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { image: true, audio: false, embeddedContext: true },
        mcpCapabilities: { http: false, sse: false },
        sessionCapabilities: { list: {}, close: {}, resume: {}, delete: {}, additionalDirectories: {} },
        _meta: {
          "acp-orchestrator": {
            version: expect.any(String),
            methods: expect.any(Array),
            notifications: expect.any(Array),
          },
        },
      },
      agentInfo: { name: "acp-orchestrator", version: expect.any(String) },
      authMethods: [],
    });
    const meta = (result.agentCapabilities as { _meta: Record<string, { methods: string[]; notifications: string[] }> })
      ._meta["acp-orchestrator"]!;
    // Every extension method and notification, each once: all of section 5 (and whatever else is served).
    expect(meta.methods).toEqual(expect.arrayContaining(PRODUCT_METHODS));
    expect(meta.notifications).toEqual(expect.arrayContaining(PRODUCT_NOTIFICATIONS));
    expect(new Set(meta.methods).size).toBe(meta.methods.length);
    expect(new Set(meta.notifications).size).toBe(meta.notifications.length);
    // Every section 5 method is served under both spellings (params {} may be invalid, but never -32601).
    let id = 100;
    for (const method of PRODUCT_METHODS) {
      for (const spelling of [method, `_${method}`]) {
        const res = await s.call(++id, spelling, {});
        expect((res.error as Msg | undefined)?.code, spelling).not.toBe(-32601);
      }
    }
    // Version 0 is also answered with 1, never an error.
    expect(expectResult(await s.call(2, "initialize", { ...INIT_PARAMS, protocolVersion: 0 }), 2)).toMatchObject({
      protocolVersion: 1,
    });
    await finish(s);
  });

  it("sends product notifications as _product.* after the prefix opt-in, and bare without it", async () => {
    const planAndCollect = async (prefixed: boolean) => {
      const s = start();
      const capabilities = prefixed ? { _meta: { "acp-orchestrator": { extensionPrefix: "_" } } } : {};
      expectResult(await s.call(1, "initialize", { ...INIT_PARAMS, clientCapabilities: capabilities }), 1);
      const planned = expectResult(
        await s.call(2, "product.plan", { goal: "Write the release notes", cwd: tempDir() }),
        2,
      );
      expect(planned).toEqual({ productId: expect.any(String), phase: "planning" });
      const productId = planned.productId as string;
      const readyName = prefixed ? "_product.planReady" : "product.planReady";
      const ready = await s.raw.next((m) => m.method === readyName);
      expect((ready.params as Msg).productId).toBe(productId);
      // The same product through both spellings of product.status.
      const bare = expectResult(await s.call(3, "product.status", { productId }), 3);
      const underscored = expectResult(await s.call(4, "_product.status", { productId }), 4);
      expect(underscored).toEqual(bare);
      expect(bare.phase).toBe("awaiting_confirmation");
      const methods = s.raw.stdoutLines
        .map((l) => (JSON.parse(l) as Msg).method)
        .filter((m): m is string => typeof m === "string");
      await finish(s);
      return methods;
    };
    const withPrefix = await planAndCollect(true);
    expect(withPrefix).toContain("_product.planReady");
    expect(withPrefix).toContain("_product.leaderMessage");
    expect(withPrefix.every((m) => m.startsWith("_product."))).toBe(true);
    const bare = await planAndCollect(false);
    expect(bare).toContain("product.planReady");
    expect(bare).toContain("product.leaderMessage");
    expect(bare.every((m) => m.startsWith("product."))).toBe(true);
  });

  it("answers initialize piped in just before stdin closes, then exits 0", async () => {
    const s = start();
    s.raw.write(line(req(1, "initialize", INIT_PARAMS)));
    expect(await s.raw.close()).toBe(0);
    expect(s.raw.stdoutLines).toHaveLength(1);
    expect(JSON.parse(s.raw.stdoutLines[0]!)).toMatchObject({ jsonrpc: "2.0", id: 1, result: { protocolVersion: 1 } });
    expect(s.stdout().endsWith("\n")).toBe(true);
  });

  it("answers a last line without a newline before stdin closes", async () => {
    const s = start();
    s.raw.write(line(req(1, "initialize", INIT_PARAMS)) + JSON.stringify(req(2, "product.list")));
    expect(await s.raw.close()).toBe(0);
    expect(s.raw.stdoutLines.map((l) => (JSON.parse(l) as Msg).id)).toEqual([1, 2]);
  });
});
