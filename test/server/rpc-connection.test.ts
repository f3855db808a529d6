import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ResponseError } from "vscode-jsonrpc/node";
import { z } from "zod";
import { AbsolutePath } from "../../protocol/common.js";
import { InvalidParamsData } from "../../protocol/errors.js";
import { defineMethod, defineNotification, type MethodSpec } from "../../protocol/method-spec.js";
import type { Logger } from "../../src/core/ports.js";
import { createFramedTransport } from "../../src/server/framing.js";
import { createLogger } from "../../src/server/logger.js";
import { ConnectionClosedError, RequestTimeoutError } from "../../src/adapters/persistence/host-requester.js";
import { ExtensionNotUsedError, RpcConnection, type ErrorMapper } from "../../src/server/rpc-connection.js";
import { notFound } from "../../src/server/wire-errors.js";

// ---------------------------------------------------------------------------------------------------------------
// Test method table (the real one lives in protocol/methods.ts; the connection takes any table)

const initialize = defineMethod({
  method: "initialize",
  extension: false,
  params: z.looseObject({ protocolVersion: z.number().int() }),
  result: z.object({ protocolVersion: z.number() }),
  summary: "Handshake.",
});
const sessionNew = defineMethod({
  method: "session/new",
  extension: false,
  params: z.object({ cwd: AbsolutePath, mcpServers: z.array(z.unknown()) }),
  result: z.object({ sessionId: z.string() }),
  summary: "Starts a session.",
});
const productPlan = defineMethod({
  method: "product.plan",
  extension: true,
  params: z.object({ goal: z.string().min(1), cwd: AbsolutePath }),
  result: z.object({ productId: z.string(), phase: z.literal("planning") }),
  summary: "Starts a product.",
});
const wait = defineMethod({
  method: "test.wait",
  extension: true,
  params: z.object({}),
  result: z.object({ cancelled: z.boolean() }),
  summary: "Waits until released or cancelled.",
});
const fast = defineMethod({
  method: "test.fast",
  extension: true,
  params: z.object({}),
  result: z.object({ fast: z.literal(true) }),
  summary: "Answers at once.",
});
const fail = defineMethod({
  method: "test.fail",
  extension: true,
  params: z.object({ kind: z.enum(["bug", "domain", "wire", "abort"]) }),
  result: z.object({}),
  summary: "Throws.",
});
const late = defineMethod({
  method: "test.late",
  extension: true,
  params: z.object({}),
  result: z.object({ aborted: z.boolean() }),
  summary: "Looks at its signal only once released.",
});
const stop = defineMethod({
  method: "test.stop",
  extension: true,
  params: z.object({}),
  result: z.object({ aborted: z.boolean() }),
  summary: "Aborts every running request, itself included, then waits for its own signal.",
});
const unhandled = defineMethod({
  method: "test.unhandled",
  extension: true,
  params: z.object({}),
  result: z.object({}),
  summary: "Declared without a handler.",
});
const asyncSchema = defineMethod({
  method: "test.asyncSchema",
  extension: true,
  params: z.object({}).refine(async () => Promise.resolve(true)),
  result: z.object({}),
  summary: "A table bug: a schema that cannot be parsed synchronously.",
});
const sessionCancel = defineNotification({
  method: "session/cancel",
  extension: false,
  params: z.object({ sessionId: z.string() }),
  summary: "Cancels a turn.",
});
const methods: readonly MethodSpec[] = [
  initialize,
  sessionNew,
  productPlan,
  wait,
  late,
  fast,
  stop,
  fail,
  unhandled,
  asyncSchema,
];

class UnknownProduct extends Error {
  constructor(readonly productId: string) {
    super(`no product ${productId}`);
  }
}

const mapError: ErrorMapper = (error) =>
  error instanceof UnknownProduct ? notFound("product", error.productId) : undefined;

// ---------------------------------------------------------------------------------------------------------------
// Harness: a server connection over PassThrough pipes, and a raw client speaking NDJSON to it

interface LogEntry {
  level: string;
  obj: object;
  msg: string | undefined;
}

function memoryLogger(entries: LogEntry[]): Logger {
  const at =
    (level: string) =>
    (obj: object, msg?: string): void => {
      entries.push({ level, obj, msg });
    };
  const logger: Logger = {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: () => logger,
  };
  return logger;
}

type Wire = {
  id?: unknown;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
};

interface Harness {
  connection: RpcConnection;
  input: PassThrough;
  output: PassThrough;
  logs: LogEntry[];
  send(value: unknown): void;
  next(): Promise<Wire>;
  call(id: number, method: string, params?: object): Promise<Wire>;
  cancelSeen: Set<number>;
  released: { resolve: () => void; late: () => void };
}

const harnesses: Harness[] = [];

afterEach(() => {
  vi.useRealTimers();
  for (const h of harnesses.splice(0)) h.connection.dispose();
});

function start(options: { logger?: Logger; register?: boolean; hold?: Promise<unknown> } = {}): Harness {
  const input = new PassThrough();
  const output = new PassThrough();
  const logs: LogEntry[] = [];
  const logger = options.logger ?? memoryLogger(logs);
  const { reader, writer, framing } = createFramedTransport(input, output, { logger });
  const connection = new RpcConnection({ reader, writer, methods, logger, mapError, framing });
  const cancelSeen = new Set<number>();
  let release: () => void = () => {};
  let releaseLate: () => void = () => {};
  const released = { resolve: () => release(), late: () => releaseLate() };

  if (options.register !== false) {
    connection.handle(initialize, (params) =>
      Promise.resolve({ protocolVersion: Math.min(params.protocolVersion, 1) }),
    );
    connection.handle(sessionNew, () => Promise.resolve({ sessionId: "ses_1" }));
    connection.handle(productPlan, (params) =>
      Promise.resolve({ productId: `prd_${params.goal}`, phase: "planning" as const }),
    );
    connection.handle(wait, (_params, ctx) => {
      return new Promise((resolve) => {
        release = () => resolve({ cancelled: false });
        ctx.signal.addEventListener("abort", () => {
          if (typeof ctx.requestId === "number") cancelSeen.add(ctx.requestId);
          resolve({ cancelled: true });
        });
      });
    });
    connection.handle(stop, (_params, ctx) => {
      connection.abortInFlight();
      return new Promise((resolve) => {
        if (ctx.signal.aborted) resolve({ aborted: true });
        else ctx.signal.addEventListener("abort", () => resolve({ aborted: true }));
      });
    });
    connection.handle(late, async (_params, ctx) => {
      await new Promise<void>((resolve) => (releaseLate = resolve));
      const signal = ctx.signal;
      return { aborted: signal.aborted };
    });
    connection.handle(fast, () => Promise.resolve({ fast: true as const }));
    connection.handle(asyncSchema, () => Promise.resolve({}));
    connection.handle(fail, (params, ctx) => {
      if (params.kind === "bug") throw new Error("secret detail: /etc/passwd");
      if (params.kind === "domain") throw new UnknownProduct("prd_x");
      if (params.kind === "wire") throw new ResponseError(-32011, "Busy.", { productId: "prd_y" });
      return new Promise((_resolve, reject) => {
        ctx.signal.addEventListener("abort", () => reject(new Error("aborted")));
      });
    });
  }
  if (options.hold !== undefined) connection.holdUntil(options.hold);
  connection.listen();

  const lines: string[] = [];
  const waiters: (() => void)[] = [];
  let buffer = "";
  output.setEncoding("utf8");
  output.on("data", (chunk: string) => {
    buffer += chunk;
    let end: number;
    while ((end = buffer.indexOf("\n")) >= 0) {
      lines.push(buffer.slice(0, end));
      buffer = buffer.slice(end + 1);
    }
    for (const wake of waiters.splice(0)) wake();
  });
  const next = async (): Promise<Wire> => {
    while (lines.length === 0) await new Promise<void>((resolve) => waiters.push(resolve));
    return JSON.parse(lines.shift()!) as Wire;
  };
  const send = (value: unknown) => {
    input.write(typeof value === "string" ? value : `${JSON.stringify(value)}\n`);
  };
  const harness: Harness = {
    connection,
    input,
    output,
    logs,
    send,
    next,
    call: async (id, method, params) => {
      send({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
      return next();
    },
    cancelSeen,
    released,
  };
  harnesses.push(harness);
  return harness;
}

async function initialized(options: { logger?: Logger } = {}): Promise<Harness> {
  const h = start(options);
  const reply = await h.call(0, "initialize", { protocolVersion: 1 });
  expect(reply.result).toEqual({ protocolVersion: 1 });
  return h;
}

async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

// ---------------------------------------------------------------------------------------------------------------

describe("initialize gate", () => {
  it("answers any request before initialize with -32600, known or unknown", async () => {
    const h = start();
    for (const [id, method] of [
      [1, "session/new"],
      [2, "product.plan"],
      [3, "nope"],
    ] as const) {
      const reply = await h.call(id, method, {});
      expect(reply).toEqual({
        jsonrpc: "2.0",
        id,
        error: { code: -32600, message: "The server is not initialized; send initialize first." },
      });
    }
    expect(h.connection.initialized).toBe(false);
  });

  it("ignores notifications before initialize", async () => {
    const h = start();
    const seen: string[] = [];
    h.connection.handleNotification(sessionCancel, (params) => {
      seen.push(params.sessionId);
    });
    h.send({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId: "early" } });
    await h.call(0, "initialize", { protocolVersion: 1 });
    h.send({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId: "late" } });
    await h.call(1, "test.fast", {});
    expect(seen).toEqual(["late"]);
  });

  it("serves a request pipelined right behind initialize in the same batch as initialized", async () => {
    const h = start();
    // A first exchange lets the reader's batch grow past one message per turn.
    expect((await h.call(1, "test.fast", {})).error?.code).toBe(-32600);
    h.send(
      `${JSON.stringify({ jsonrpc: "2.0", id: 2, method: "initialize", params: { protocolVersion: 1 } })}\n` +
        `${JSON.stringify({ jsonrpc: "2.0", id: 3, method: "test.fast", params: {} })}\n`,
    );
    const replies = [await h.next(), await h.next()];
    expect(replies).toEqual([
      { jsonrpc: "2.0", id: 2, result: { protocolVersion: 1 } },
      { jsonrpc: "2.0", id: 3, result: { fast: true } },
    ]);
  });

  it("serves other methods once initialize succeeded, and answers initialize again", async () => {
    const h = await initialized();
    expect((await h.call(1, "session/new", { cwd: "/w", mcpServers: [] })).result).toEqual({ sessionId: "ses_1" });
    expect((await h.call(2, "initialize", { protocolVersion: 7 })).result).toEqual({ protocolVersion: 1 });
  });

  it("stays uninitialized when initialize fails validation", async () => {
    const h = start();
    expect((await h.call(1, "initialize", { protocolVersion: "x" })).error?.code).toBe(-32602);
    expect((await h.call(2, "test.fast", {})).error?.code).toBe(-32600);
  });
});

describe("holdUntil (issue 34: serve answers initialize before its store is open)", () => {
  /** True when `reply` is still pending after a few turns. */
  async function stillPending(reply: Promise<unknown>): Promise<boolean> {
    let settled = false;
    void reply.then(() => (settled = true));
    await settle();
    return !settled;
  }

  it("answers a first initialize at once and the requests behind it, in order, once the hold settles", async () => {
    let open!: () => void;
    const h = start({ hold: new Promise<void>((resolve) => (open = resolve)) });
    h.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } });
    h.send({ jsonrpc: "2.0", id: 2, method: "test.fast", params: {} });
    h.send({ jsonrpc: "2.0", id: 3, method: "session/new", params: { cwd: "/w", mcpServers: [] } });
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 1, result: { protocolVersion: 1 } });
    const second = h.next();
    expect(await stillPending(second)).toBe(true);
    open();
    expect(await second).toEqual({ jsonrpc: "2.0", id: 2, result: { fast: true } });
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 3, result: { sessionId: "ses_1" } });
  });

  it("keeps an initialize behind a request held before it, and delivers both when the hold rejects", async () => {
    let fail!: (reason: Error) => void;
    const h = start({ hold: new Promise<void>((_resolve, reject) => (fail = reject)) });
    h.send({ jsonrpc: "2.0", id: 1, method: "test.fast", params: {} });
    h.send({ jsonrpc: "2.0", id: 2, method: "initialize", params: { protocolVersion: 1 } });
    const first = h.next();
    expect(await stillPending(first)).toBe(true);
    fail(new Error("the store cannot be opened"));
    expect((await first).error?.code).toBe(-32600); // before initialize, in input order
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 2, result: { protocolVersion: 1 } });
    expect((await h.call(3, "test.fast", {})).result).toEqual({ fast: true });
  });
});

describe("method resolution", () => {
  it("answers an unknown method with -32601 and data.method as spelled", async () => {
    const h = await initialized();
    const reply = await h.call(1, "product.nope", {});
    expect(reply.error).toEqual({
      code: -32601,
      message: expect.stringMatching(/product\.nope/),
      data: { method: "product.nope" },
    });
  });

  it("serves an extension method under its bare name and with a leading underscore", async () => {
    const h = await initialized();
    const bare = await h.call(1, "product.plan", { goal: "g", cwd: "/w" });
    const underscored = await h.call(2, "_product.plan", { goal: "g", cwd: "/w" });
    expect(bare.result).toEqual({ productId: "prd_g", phase: "planning" });
    expect(underscored.result).toEqual(bare.result);
  });

  it("does not serve an ACP method with a leading underscore", async () => {
    const h = await initialized();
    const reply = await h.call(1, "_session/new", { cwd: "/w", mcpServers: [] });
    expect(reply.error).toMatchObject({ code: -32601, data: { method: "_session/new" } });
  });

  it("answers a declared method without a handler with -32601", async () => {
    const h = await initialized();
    expect((await h.call(1, "test.unhandled", {})).error).toMatchObject({
      code: -32601,
      data: { method: "test.unhandled" },
    });
  });

  it("refuses a handler for a method that is not in the table, or a second handler", () => {
    const h = start({ register: false });
    expect(() => h.connection.handle("product.other", () => Promise.resolve({}))).toThrow(/not in the method table/);
    h.connection.handle(fast, () => Promise.resolve({ fast: true as const }));
    expect(() => h.connection.handle("test.fast", () => Promise.resolve({}))).toThrow(/already has a handler/);
  });

  it("ignores unknown notifications silently", async () => {
    const h = await initialized();
    h.send({ jsonrpc: "2.0", method: "product.unknownNote", params: {} });
    h.send({ jsonrpc: "2.0", method: "_session/cancel", params: { sessionId: "s" } });
    expect((await h.call(1, "test.fast", {})).id).toBe(1);
  });
});

describe("params validation", () => {
  it("answers params that fail the schema with -32602, a one-sentence message and data.issues", async () => {
    const h = await initialized();
    const reply = await h.call(1, "product.plan", { goal: "g", cwd: "relative/dir" });
    expect(reply.error).toEqual({
      code: -32602,
      message: "Invalid params: cwd must be an absolute path.",
      data: { issues: [{ path: ["cwd"], message: "must be an absolute path" }] },
    });
    expect(InvalidParamsData.safeParse(reply.error?.data).success).toBe(true);
  });

  it("validates missing params as {} and reports every issue", async () => {
    const h = await initialized();
    const reply = await h.call(1, "product.plan");
    const data = InvalidParamsData.parse(reply.error?.data);
    expect(reply.error?.code).toBe(-32602);
    expect(data.issues.map((issue) => issue.path)).toEqual([["goal"], ["cwd"]]);
    expect(reply.error?.message).toMatch(/^Invalid params: goal .*\(and 1 more problem\)\.$/);
  });

  it("answers by-position params with -32602", async () => {
    const h = await initialized();
    expect((await h.call(1, "product.plan", ["g", "/w"])).error?.code).toBe(-32602);
  });
});

describe("errors thrown by handlers", () => {
  it("answers an unexpected exception with a generic -32603 and logs the stack", async () => {
    const h = await initialized();
    const reply = await h.call(1, "test.fail", { kind: "bug" });
    expect(reply.error).toEqual({
      code: -32603,
      message: "An internal error occurred; the details are in the server log.",
    });
    const entry = h.logs.find((e) => e.level === "error" && (e.obj as { method?: string }).method === "test.fail");
    expect(((entry?.obj as { err?: Error }).err as Error).stack).toMatch(/secret detail/);
  });

  it("maps a domain error through mapError", async () => {
    const h = await initialized();
    const reply = await h.call(1, "test.fail", { kind: "domain" });
    expect(reply.error).toMatchObject({ code: -32002, data: { kind: "product", id: "prd_x" } });
  });

  it("answers -32603 when a params schema itself throws (a bug of the table), and logs it", async () => {
    const h = await initialized();
    expect((await h.call(1, "test.asyncSchema", {})).error?.code).toBe(-32603);
    expect(h.logs.some((e) => e.level === "error" && e.msg?.includes("Params schema threw"))).toBe(true);
  });

  it("passes a ResponseError through unchanged", async () => {
    const h = await initialized();
    expect((await h.call(1, "test.fail", { kind: "wire" })).error).toEqual({
      code: -32011,
      message: "Busy.",
      data: { productId: "prd_y" },
    });
  });
});

describe("concurrency and cancellation", () => {
  it("answers a fast request while a slow one is still pending", async () => {
    const h = await initialized();
    h.send({ jsonrpc: "2.0", id: 1, method: "test.wait", params: {} });
    h.send({ jsonrpc: "2.0", id: 2, method: "_test.fast", params: {} });
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 2, result: { fast: true } });
    h.released.resolve();
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 1, result: { cancelled: false } });
  });

  // Issue 16: vscode-jsonrpc's queue dispatched one message per setImmediate and the reader handed one per turn, so
  // a burst of N pipelined requests took 2N turns. Now the connection dispatches as messages arrive, a batch a turn.
  it("dispatches a burst of pipelined requests in far fewer event-loop turns than requests, in input order", async () => {
    const h = start({ register: false });
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn += 1;
      if (ticking) setImmediate(tick);
    };
    const dispatched: { id: unknown; turn: number }[] = [];
    h.connection.handle(initialize, () => Promise.resolve({ protocolVersion: 1 }));
    h.connection.handle(fast, (_params, ctx) => {
      dispatched.push({ id: ctx.requestId, turn });
      return Promise.resolve({ fast: true as const });
    });
    const seen: string[] = [];
    h.connection.handleNotification(sessionCancel, (params) => {
      seen.push(`${params.sessionId}@${dispatched.length}`);
    });
    await h.call(0, "initialize", { protocolVersion: 1 });
    const n = 300;
    let text = "";
    for (let id = 1; id <= n; id++) {
      text += `${JSON.stringify({ jsonrpc: "2.0", id, method: "test.fast", params: {} })}\n`;
      if (id === 150)
        text += `${JSON.stringify({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId: "s" } })}\n`;
    }
    setImmediate(tick);
    h.send(text);
    const answers: Wire[] = [];
    for (let i = 0; i < n; i++) answers.push(await h.next());
    ticking = false;
    expect(answers.map((a) => a.id)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect(dispatched.map((d) => d.id)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect(seen).toEqual(["s@150"]);
    expect(new Set(dispatched.map((d) => d.turn)).size).toBeLessThanOrEqual(n / 10);
  });

  it("aborts the handler's signal on vscode-jsonrpc $/cancelRequest", async () => {
    const h = await initialized();
    h.send({ jsonrpc: "2.0", id: 5, method: "test.wait", params: {} });
    await settle();
    h.send({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 5 } });
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 5, result: { cancelled: true } });
    expect([...h.cancelSeen]).toEqual([5]);
  });

  it("aborts the handler's signal on ACP $/cancel_request and answers -32800 when the handler rejects", async () => {
    const h = await initialized();
    h.send({ jsonrpc: "2.0", id: "r-6", method: "test.fail", params: { kind: "abort" } });
    await settle();
    h.send({ jsonrpc: "2.0", method: "$/cancel_request", params: { requestId: "r-6" } });
    expect(await h.next()).toEqual({
      jsonrpc: "2.0",
      id: "r-6",
      error: { code: -32800, message: "The request was cancelled." },
    });
  });

  it("a handler that reads its signal only after the cancellation came sees it aborted (the signal is made lazily)", async () => {
    const h = await initialized();
    for (const [id, cancel] of [
      [11, { jsonrpc: "2.0", method: "$/cancel_request", params: { requestId: 11 } }],
      [12, { jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 12 } }],
    ] as const) {
      h.send({ jsonrpc: "2.0", id, method: "test.late", params: {} });
      await settle();
      h.send(cancel);
      await settle();
      h.released.late();
      expect(await h.next()).toEqual({ jsonrpc: "2.0", id, result: { aborted: true } });
    }
    h.send({ jsonrpc: "2.0", id: 13, method: "test.late", params: {} });
    await settle();
    h.connection.abortInFlight();
    h.released.late();
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 13, result: { aborted: true } });
    h.send({ jsonrpc: "2.0", id: 14, method: "test.late", params: {} });
    await settle();
    h.released.late();
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 14, result: { aborted: false } });
  });

  it("aborts a request whose handler called abortInFlight before it returned its promise", async () => {
    // Requests are tracked for cancellation only once their handler returned a promise (issue 16, request path); one
    // that was still running its synchronous part when abortInFlight came is aborted all the same.
    const h = await initialized();
    expect(await h.call(21, "test.stop", {})).toEqual({ jsonrpc: "2.0", id: 21, result: { aborted: true } });
  });

  it("aborts running handlers on dispose", async () => {
    const h = await initialized();
    h.send({ jsonrpc: "2.0", id: 9, method: "test.wait", params: {} });
    await settle();
    h.connection.dispose();
    expect([...h.cancelSeen]).toEqual([9]);
  });
});

describe("robustness", () => {
  it("keeps serving after malformed input of every kind", async () => {
    const h = await initialized();
    const bad = [
      "{bad json\n",
      "[]\n",
      `[${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "test.fast" })}]\n`,
      '{"foo":1}\n',
      '{"jsonrpc":"1.0","id":2,"method":"test.fast"}\n',
      '{"jsonrpc":"2.0","method":5}\n',
    ];
    const expected = [-32700, -32600, -32600, -32600, -32600, -32600];
    for (const [i, text] of bad.entries()) {
      h.send(text);
      expect((await h.next()).error?.code).toBe(expected[i]);
      expect((await h.call(100 + i, "test.fast", {})).result).toEqual({ fast: true });
    }
  });

  it("routes vscode-jsonrpc's own log lines to the injected logger, not the console", async () => {
    const spy = vi.spyOn(console, "error");
    const h = await initialized();
    h.send({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "client could not parse" } });
    await h.call(1, "test.fast", {});
    expect(h.logs.some((e) => e.level === "error" && (e.obj as { source?: string }).source === "vscode-jsonrpc")).toBe(
      true,
    );
    expect(spy).not.toHaveBeenCalled();
    spy.mockRestore();
  });

  it("speaks Content-Length framing to a client that uses it", async () => {
    const h = start();
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } });
    h.input.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    let raw = "";
    h.output.on("data", (chunk: string) => {
      raw += chunk;
    });
    await vi.waitFor(() => expect(raw).toMatch(/\}$/));
    const reply = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { protocolVersion: 1 } });
    expect(raw).toBe(`Content-Length: ${Buffer.byteLength(reply)}\r\n\r\n${reply}`);
  });

  it("still answers requests that arrived just before the input ended; idle() resolves once they are written", async () => {
    const h = await initialized();
    const closed = new Promise<void>((resolve) => h.connection.onClose(resolve));
    h.input.end(
      `${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "test.wait", params: {} })}\n` +
        `${JSON.stringify({ jsonrpc: "2.0", id: 2, method: "test.fast", params: {} })}\n`,
    );
    await closed;
    let idle = false;
    const idling = h.connection.idle().then(() => {
      idle = true;
    });
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 2, result: { fast: true } });
    await settle();
    expect(idle).toBe(false);
    h.connection.abortInFlight();
    expect(await h.next()).toEqual({ jsonrpc: "2.0", id: 1, result: { cancelled: true } });
    await idling;
    expect(idle).toBe(true);
  });

  it("rejects a pending server → client request with ConnectionClosedError when the input ends", async () => {
    const h = await initialized();
    const pending = h.connection.request("session/request_permission", { sessionId: "s" });
    await h.next();
    h.input.end();
    await expect(pending).rejects.toBeInstanceOf(ConnectionClosedError);
  });

  it("fires onClose when the input ends", async () => {
    const h = await initialized();
    const closed = new Promise<void>((resolve) => h.connection.onClose(resolve));
    h.input.end();
    await closed;
    expect(h.connection.initialized).toBe(true);
  });
});

describe("client notifications", () => {
  it("dispatches a registered notification with validated params and drops invalid ones", async () => {
    const h = await initialized();
    const seen: string[] = [];
    h.connection.handleNotification(sessionCancel, (params, ctx) => {
      seen.push(`${ctx.method}:${params.sessionId}`);
    });
    h.send({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId: "s1" } });
    h.send({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId: 42 } });
    await h.call(1, "test.fast", {});
    expect(seen).toEqual(["session/cancel:s1"]);
    expect(h.logs.some((e) => e.level === "warn" && e.msg?.includes("invalid params"))).toBe(true);
  });
});

describe("server → client traffic", () => {
  it("sends a plain ACP connection ACP traffic only: extension notifications are dropped, extension requests refused", async () => {
    const h = await initialized();
    await h.connection.notify("product.taskStatus", { productId: "p", taskId: "t" });
    await h.connection.notify("x/goal.started", { goalRunId: "g" });
    await h.connection.notify("session/update", { sessionId: "s" });
    expect((await h.next()).method).toBe("session/update");
    await expect(h.connection.request("runState/get", { projectId: "p" })).rejects.toBeInstanceOf(
      ExtensionNotUsedError,
    );
    expect(h.connection.usesExtension).toBe(false);
    expect(await h.call(9, "test.fast", {})).toMatchObject({ id: 9, result: { fast: true } });
  });

  it("after one `_` extension call, sends extension traffic with the `_` spelling", async () => {
    const h = await initialized();
    expect(await h.call(1, "_product.plan", { goal: "g", cwd: "/tmp" })).toMatchObject({
      result: { productId: "prd_g" },
    });
    // A later bare call does not change the spelling: the first call decides.
    await h.call(2, "test.fast", {});
    await h.connection.notify("product.taskStatus", { productId: "p" });
    await h.connection.notify("session/update", { sessionId: "s" });
    expect((await h.next()).method).toBe("_product.taskStatus");
    expect((await h.next()).method).toBe("session/update");
  });

  it("after one bare extension call, sends extension traffic bare", async () => {
    const h = await initialized();
    await h.call(1, "product.plan", { goal: "g", cwd: "/tmp" });
    await h.call(2, "_test.fast", {});
    await h.connection.notify("x/goal.started", { goalRunId: "g" });
    expect((await h.next()).method).toBe("x/goal.started");
  });

  it("lets the declared prefix win over the spelling of the calls, for notifications and requests", async () => {
    const h = await initialized();
    h.connection.declareExtension("_");
    await h.call(1, "product.plan", { goal: "g", cwd: "/tmp" });
    for (const method of [
      "product.taskStatus",
      "x/goal.started",
      "session/update",
      "fs/read_text_file",
      "$/progress",
      "_already",
    ]) {
      await h.connection.notify(method, { n: 1 });
    }
    const sent: string[] = [];
    for (let i = 0; i < 6; i++) sent.push((await h.next()).method!);
    expect(sent).toEqual([
      "_product.taskStatus",
      "_x/goal.started",
      "session/update",
      "fs/read_text_file",
      "$/progress",
      "_already",
    ]);
  });

  it("sends extension traffic to a client that declared the extension without a prefix: bare until its first call", async () => {
    const h = await initialized();
    h.connection.declareExtension();
    await h.connection.notify("product.taskStatus", { productId: "p" });
    expect((await h.next()).method).toBe("product.taskStatus");
    await h.call(1, "_test.fast", {});
    await h.connection.notify("product.taskStatus", { productId: "p" });
    expect((await h.next()).method).toBe("_product.taskStatus");
  });

  it("never throws from notify once the connection is disposed", async () => {
    const h = await initialized();
    h.connection.dispose();
    await expect(h.connection.notify("product.taskStatus", {})).resolves.toBeUndefined();
  });

  it("round-trips a server → client request, prefixed when asked", async () => {
    const h = await initialized();
    h.connection.declareExtension("_");
    const pending = h.connection.request(
      "runState/get",
      { projectId: "p", kind: "product", id: "x" },
      { timeoutMs: 5000 },
    );
    const outbound = await h.next();
    expect(outbound).toMatchObject({ method: "_runState/get", params: { projectId: "p", kind: "product", id: "x" } });
    h.send({ jsonrpc: "2.0", id: outbound.id, result: { record: null } });
    await expect(pending).resolves.toEqual({ record: null });

    const permission = h.connection.request("session/request_permission", { sessionId: "s" });
    const asked = await h.next();
    expect(asked.method).toBe("session/request_permission");
    h.send({ jsonrpc: "2.0", id: asked.id, error: { code: -32012, message: "Conflict.", data: { revision: 3 } } });
    await expect(permission).rejects.toMatchObject({ code: -32012, data: { revision: 3 } });
  });

  it("rejects a request the client does not answer in time and cancels it with ACP's $/cancel_request only (NDJSON)", async () => {
    const h = await initialized();
    h.connection.declareExtension();
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const pending = h.connection.request("runState/put", { projectId: "p" }, { timeoutMs: 30_000 });
    const rejection = expect(pending).rejects.toBeInstanceOf(RequestTimeoutError);
    const outbound = await h.next();
    vi.advanceTimersByTime(30_000);
    await rejection;
    expect(await h.next()).toEqual({ jsonrpc: "2.0", method: "$/cancel_request", params: { requestId: outbound.id } });
    await h.connection.notify("session/update", { marker: true });
    expect((await h.next()).method).toBe("session/update");
  });

  it("cancels its own request with $/cancelRequest only on a Content-Length connection", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    const logger = memoryLogger([]);
    const { reader, writer, framing } = createFramedTransport(input, output, { logger });
    const connection = new RpcConnection({ reader, writer, methods, logger, framing });
    connection.handle(initialize, () => Promise.resolve({ protocolVersion: 1 }));
    connection.listen();
    let text = "";
    output.setEncoding("utf8");
    output.on("data", (chunk: string) => (text += chunk));
    const frame = (message: unknown): string => {
      const body = JSON.stringify(message);
      return `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    };
    const bodies = (): Record<string, unknown>[] =>
      text
        .split(/Content-Length: \d+\r\n\r\n/)
        .filter((b) => b !== "")
        .map((b) => JSON.parse(b) as Record<string, unknown>);
    const until = async (pred: () => boolean): Promise<void> => {
      while (!pred()) await new Promise<void>((resolve) => setTimeout(resolve, 5));
    };
    try {
      input.write(frame({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1 } }));
      await until(() => bodies().length === 1);
      const controller = new AbortController();
      const pending = connection.request(
        "session/request_permission",
        { sessionId: "s" },
        { signal: controller.signal },
      );
      await until(() => bodies().length === 2);
      controller.abort(new Error("withdrawn"));
      await expect(pending).rejects.toThrow("withdrawn");
      void connection.notify("session/update", { marker: true });
      await until(() => bodies().some((b) => b.method === "session/update"));
      const outbound = bodies()[1]!;
      expect(bodies().slice(2)).toEqual([
        { jsonrpc: "2.0", method: "$/cancelRequest", params: { id: outbound.id } },
        { jsonrpc: "2.0", method: "session/update", params: { marker: true } },
      ]);
    } finally {
      connection.dispose();
    }
  });

  it("rejects with the signal's reason when aborted, and at once when already aborted", async () => {
    const h = await initialized();
    const controller = new AbortController();
    const pending = h.connection.request(
      "session/request_permission",
      { sessionId: "s" },
      { signal: controller.signal },
    );
    await h.next();
    controller.abort(new Error("turn cancelled"));
    await expect(pending).rejects.toThrow("turn cancelled");
    await expect(
      h.connection.request("session/x", {}, { signal: AbortSignal.abort(new Error("already")) }),
    ).rejects.toThrow("already");
  });

  it("flush resolves once everything written was accepted", async () => {
    const h = await initialized();
    h.connection.declareExtension();
    void h.connection.notify("product.budgetUpdate", { productId: "p" });
    await h.connection.flush();
    expect((await h.next()).method).toBe("product.budgetUpdate");
  });
});

describe("createLogger", () => {
  it("writes JSON lines to the given file (never stdout), including vscode-jsonrpc's own lines", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rpc-log-"));
    try {
      const file = join(dir, "nested", "server.log");
      const stdout = vi.spyOn(process.stdout, "write");
      const logger = createLogger({ level: "debug", file });
      const h = await initialized({ logger });
      h.send({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "client could not parse" } });
      await h.call(1, "test.fail", { kind: "bug" });
      logger.flush();
      const entries = readFileSync(file, "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { level: number; msg: string; source?: string; err?: { stack: string } });
      expect(entries.some((e) => e.source === "vscode-jsonrpc" && e.level === 50)).toBe(true);
      expect(entries.find((e) => e.err !== undefined)?.err?.stack).toMatch(/secret detail/);
      expect(stdout).not.toHaveBeenCalled();
      stdout.mockRestore();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
