/**
 * A scripted fake model server on 127.0.0.1 for the real-agent suite (issue 11, build item 9).
 *
 * Owns: one HTTP server, a table of API routes (each provider's wire format lives in its own file and registers a
 * route here: `anthropic-messages.ts`; an OpenAI Responses route can be added beside it), the log of every request
 * received (with the time it arrived and the exact token counts answered), held replies, and the script that decides
 * each reply. It never answers from a real model and never listens on anything but loopback.
 *
 * A script is one function: it gets the request (parsed, with provider-neutral views such as `system`, `lastUserText`
 * and `toolResults`) and returns a provider-neutral `ScriptedReply` (text, tool calls, exact usage, or `hold`). Each
 * route turns that reply into its own wire format (streaming SSE or plain JSON).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/** One tool call the model makes (`input` is the tool's JSON arguments). */
export interface ScriptedToolCall {
  name: string;
  input: Record<string, unknown>;
  /** Default: a fresh id in the provider's style. */
  id?: string;
}

/** Token counts answered in a reply's `usage` (exact: agents' accounting is compared with them). */
export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
}

/** What the model says to one request, in provider-neutral terms. */
export interface ScriptedReply {
  /** Assistant text (streamed in a few deltas). */
  text?: string;
  /** Tool calls after the text; the turn then stops for tool use. */
  toolCalls?: ScriptedToolCall[];
  /** Default: derived from the request number (see `defaultUsage`). */
  usage?: ModelUsage;
  /**
   * Start the reply (headers, the first event) and then hold it open until `release()` or the client goes away:
   * the agent is mid-turn with its model request open.
   */
  hold?: boolean;
  /** Answer with this HTTP status and error body instead (e.g. 500 to see an agent's error path). */
  httpError?: { status: number; message: string };
}

/** A request as the script and the tests see it. */
export interface ModelRequest {
  /** 1, 2, 3… in arrival order. */
  seq: number;
  /** Which API route answered it (e.g. `"anthropic-messages"`). */
  api: string;
  /** The client tag from a `urlFor(tag)` base URL (`/a/<tag>/…`), "" when the plain `url` was used. */
  client: string;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body (or `undefined`). */
  body: unknown;
  /** Epoch milliseconds when the request arrived (`Date.now()`). */
  receivedAt: number;
  /** True when the client asked for a streamed (SSE) reply. */
  stream: boolean;
  /** The system prompt as plain text ("" when none). */
  system: string;
  /** Names of the tools the request offers. */
  toolNames: string[];
  /** Text of the last user message ("" when it holds only tool results). */
  lastUserText: string;
  /** Tool results in the request's last user message (a follow-up after the model's tool calls). */
  toolResults: { toolCallId: string; content: string; isError: boolean }[];
  /** Every message's text, concatenated (for matching a prompt anywhere in the conversation). */
  allText: string;
  /** How many assistant (model) turns the conversation already holds: 0 for a turn's first call. */
  assistantTurns: number;
}

/** One log entry: the request, and once answered, what was answered. */
export interface ModelLogEntry {
  request: ModelRequest;
  reply?: ScriptedReply;
  /** The usage actually sent (absent for held replies that never finished, and for errors). */
  usage?: ModelUsage;
  /** Epoch milliseconds when the reply was complete (absent while held). */
  answeredAt?: number;
  held: boolean;
}

export type ModelScript = (request: ModelRequest) => ScriptedReply | Promise<ScriptedReply>;

/** A provider's wire format: how to recognise its requests, read them, and write a reply. */
export interface ApiRoute {
  api: string;
  /** True when this route answers `method path` (path without the query string). */
  matches(method: string, path: string): boolean;
  /** Provider-neutral views of the parsed body. */
  describe(
    body: unknown,
    path: string,
  ): Pick<
    ModelRequest,
    "stream" | "system" | "toolNames" | "lastUserText" | "toolResults" | "allText" | "assistantTurns"
  >;
  /**
   * Writes `reply` with `usage` to `res`. For `hold`, writes the start of the reply and returns without ending it
   * (the server ends it on release). Returns when everything that should be written now is written.
   */
  write(res: ServerResponse, request: ModelRequest, reply: ScriptedReply, usage: ModelUsage): Promise<void>;
  /** Finishes a held reply (the server calls it on `release()`). */
  finishHeld(res: ServerResponse, request: ModelRequest, reply: ScriptedReply, usage: ModelUsage): Promise<void>;
  /** Answers a request that is not a model call (e.g. a token count); `undefined` when it is a model call. */
  auxiliary?(request: ModelRequest): { status: number; body: unknown } | undefined;
}

/** Default usage of request `seq`: distinct, exact numbers (input 1000 + 10·seq, output 20 + seq). */
export function defaultUsage(seq: number): ModelUsage {
  return { inputTokens: 1_000 + 10 * seq, outputTokens: 20 + seq };
}

export interface FakeModel {
  /** `http://127.0.0.1:PORT` (no trailing slash). */
  readonly url: string;
  /**
   * A base URL whose requests are logged with `client: tag` (`http://127.0.0.1:PORT/a/<tag>`): give each agent its
   * own, so the log says which agent sent what. `tag` is `[A-Za-z0-9._-]+`.
   */
  urlFor(tag: string): string;
  readonly port: number;
  /** Every request received, in arrival order. */
  readonly log: ModelLogEntry[];
  /** Replaces the script (applies to requests arriving from now on). */
  setScript(script: ModelScript): void;
  /** Resolves with the first log entry (already there or future) whose request matches `pred`. */
  waitForRequest(pred: (request: ModelRequest) => boolean, timeoutMs?: number): Promise<ModelLogEntry>;
  /** Resolves with the first entry (already held or future) whose reply is held open and whose request matches. */
  waitForHeld(pred: (request: ModelRequest) => boolean, timeoutMs?: number): Promise<ModelLogEntry>;
  /** Finishes every held reply (each as its script said, without `hold`). */
  release(): Promise<void>;
  /** Requests that arrived after `epochMs`. */
  requestsAfter(epochMs: number): ModelRequest[];
  /** Sum of the usage answered to requests matching `pred` (default all). */
  usageOf(pred?: (request: ModelRequest) => boolean): ModelUsage;
  /** Closes the server and every open connection. */
  close(): Promise<void>;
}

export interface FakeModelOptions {
  routes: ApiRoute[];
  script: ModelScript;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (data += chunk));
    req.on("end", () => resolve(data));
    req.on("error", reject);
  });
}

/**
 * Starts the fake model on 127.0.0.1 (a free port). Requests no route matches get 404 and are logged (api `"none"`),
 * so a test sees any call it did not expect. A script that throws answers 500 with the message.
 */
export async function startFakeModel(options: FakeModelOptions): Promise<FakeModel> {
  let script = options.script;
  const log: ModelLogEntry[] = [];
  const waiters: { pred: (r: ModelRequest) => boolean; resolve: (e: ModelLogEntry) => void }[] = [];
  const heldWaiters: { pred: (r: ModelRequest) => boolean; resolve: (e: ModelLogEntry) => void }[] = [];
  const heldReplies: { entry: ModelLogEntry; res: ServerResponse; route: ApiRoute; usage: ModelUsage }[] = [];
  const sockets = new Set<Socket>();
  let seq = 0;

  const record = (entry: ModelLogEntry): void => {
    log.push(entry);
    for (const w of [...waiters]) {
      if (w.pred(entry.request)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(entry);
      }
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const receivedAt = Date.now();
    const text = await readBody(req);
    const fullPath = (req.url ?? "/").split("?")[0] ?? "/";
    const tagged = /^\/a\/([A-Za-z0-9._-]+)(\/.*)$/.exec(fullPath);
    const client = tagged?.[1] ?? "";
    const path = tagged?.[2] ?? fullPath;
    const method = req.method ?? "GET";
    let body: unknown;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = text;
    }
    const route = options.routes.find((r) => r.matches(method, path));
    const base = { seq: ++seq, client, method, path, headers: req.headers, body, receivedAt };
    if (route === undefined) {
      record({
        request: {
          ...base,
          api: "none",
          stream: false,
          system: "",
          toolNames: [],
          lastUserText: "",
          toolResults: [],
          allText: "",
          assistantTurns: 0,
        },
        held: false,
      });
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { type: "not_found_error", message: `no route for ${method} ${path}` } }));
      return;
    }
    const request: ModelRequest = { ...base, api: route.api, ...route.describe(body, path) };
    const auxiliary = route.auxiliary?.(request);
    if (auxiliary !== undefined) {
      const entry: ModelLogEntry = { request, held: false, answeredAt: Date.now() };
      record(entry);
      res.writeHead(auxiliary.status, { "content-type": "application/json" });
      res.end(JSON.stringify(auxiliary.body));
      return;
    }
    const entry: ModelLogEntry = { request, held: false };
    record(entry);
    let reply: ScriptedReply;
    try {
      reply = await script(request);
    } catch (error) {
      reply = { httpError: { status: 500, message: `fake model script failed: ${String(error)}` } };
    }
    entry.reply = reply;
    if (reply.httpError !== undefined) {
      res.writeHead(reply.httpError.status, { "content-type": "application/json" });
      res.end(JSON.stringify({ type: "error", error: { type: "api_error", message: reply.httpError.message } }));
      entry.answeredAt = Date.now();
      return;
    }
    const usage = reply.usage ?? defaultUsage(request.seq);
    if (reply.hold === true) {
      entry.held = true;
      heldReplies.push({ entry, res, route, usage });
      await route.write(res, request, reply, usage);
      for (const w of [...heldWaiters]) {
        if (w.pred(request)) {
          heldWaiters.splice(heldWaiters.indexOf(w), 1);
          w.resolve(entry);
        }
      }
      return;
    }
    await route.write(res, request, reply, usage);
    entry.usage = usage;
    entry.answeredAt = Date.now();
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(error));
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    urlFor(tag) {
      if (!/^[A-Za-z0-9._-]+$/.test(tag)) throw new Error(`fake model: bad client tag ${JSON.stringify(tag)}`);
      return `http://127.0.0.1:${port}/a/${tag}`;
    },
    log,
    setScript(next) {
      script = next;
    },
    waitForRequest(pred, timeoutMs = 60_000) {
      const found = log.find((e) => pred(e.request));
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          const seen = log.map(
            (e) => `${e.request.seq} ${e.request.method} ${e.request.path}: ${e.request.lastUserText.slice(0, 80)}`,
          );
          reject(new Error(`fake model: no matching request within ${timeoutMs} ms; received:\n${seen.join("\n")}`));
        }, timeoutMs);
        waiters.push({
          pred,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
        });
      });
    },
    waitForHeld(pred, timeoutMs = 60_000) {
      const found = heldReplies.find((h) => pred(h.entry.request));
      if (found) return Promise.resolve(found.entry);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          const seen = log.map((e) => `${e.request.seq} ${e.request.client} ${e.request.path} held=${e.held}`);
          reject(new Error(`fake model: no matching held reply within ${timeoutMs} ms; received:\n${seen.join("\n")}`));
        }, timeoutMs);
        heldWaiters.push({
          pred,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
        });
      });
    },
    async release() {
      const held = heldReplies.splice(0);
      for (const h of held) {
        if (h.res.writableEnded || h.res.destroyed) continue;
        await h.route.finishHeld(h.res, h.entry.request, { ...h.entry.reply, hold: false }, h.usage);
        h.entry.usage = h.usage;
        h.entry.answeredAt = Date.now();
      }
    },
    requestsAfter(epochMs) {
      return log.filter((e) => e.request.receivedAt > epochMs).map((e) => e.request);
    },
    usageOf(pred = () => true) {
      let inputTokens = 0;
      let outputTokens = 0;
      for (const e of log) {
        if (e.usage === undefined || !pred(e.request)) continue;
        inputTokens += e.usage.inputTokens;
        outputTokens += e.usage.outputTokens;
      }
      return { inputTokens, outputTokens };
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
