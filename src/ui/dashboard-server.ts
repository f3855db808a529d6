/**
 * The dashboard's HTTP server (issue 15, `acp-orchestrator ui`): a web page over one store, bound to 127.0.0.1 by
 * default. Read routes (GET and HEAD):
 * - `/`, `/app.js`, `/app.css`, `/vendor.js`, `/vendor.css`: the page (page.ts, and the bundled d3-zoom/diff2html);
 * - `/api/overview`: products and goal runs (dashboard-data.ts `overview`);
 * - `/api/products/ID`: one product with its laid-out DAG; `/api/products/ID/tasks/TASK/output`: a task's full
 *   output as text/plain;
 * - `/api/goals/ID`: one goal run;
 * - `/api/stream?path=P` (server-sent events, event-streams.ts): the JSON of route P (one of the three above) as a
 *   `view` event at once and again whenever it changes; the store is polled every `pollMs`, so it works on SQLite and
 *   PostgreSQL while other servers write the store; a read that fails is sent as a `problem` event and polling goes
 *   on. Backpressure, the per-client buffer cap and the stream cap are event-streams.ts's.
 * Mutating routes (POST only, control-routes.ts) exist only when `control` is given.
 * An unknown product or goal run is 404 with `{error}`; a request whose Host header is not a loopback name while the
 * server is bound to loopback is 403 (a web page elsewhere must not read the store through DNS rebinding).
 *
 * Never writes the store through its reader (guarantee 3): the reader is opened read-only.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { isDomainError } from "../core/errors.js";
import type { Logger } from "../core/ports.js";
import type { RunStateReader } from "../operator/run-state-reader.js";
import { goalView, overview, productView, taskOutput } from "./dashboard-data.js";
import { EventStreams, type StreamFrame, type StreamLimits } from "./event-streams.js";
import { HttpError, decodeSegment, hostName, isLoopback, send, sendJson } from "./http-kit.js";
import { PAGE_CSS, PAGE_HTML, PAGE_SCRIPT } from "./page.js";

export interface DashboardOptions {
  reader: RunStateReader;
  /** The store as logs may show it (no password), shown on the page. */
  where: string;
  logger: Logger;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 picks a free port. Default 0. */
  port?: number;
  /** How often a stream re-reads the store, in ms. Default 500. */
  pollMs?: number;
  /** Stream limits other than the poll interval (event-streams.ts defaults). */
  streams?: Omit<StreamLimits, "pollMs">;
}

export interface RunningDashboard {
  /** `http://HOST:PORT/` */
  url: string;
  port: number;
  /** Streams open now and clients dropped for not reading. */
  streamCounts(): { open: number; dropped: number };
  /** Ends every stream and stops listening. */
  close(): Promise<void>;
}

const STREAM_PATH = /^\/api\/(overview|products\/[^/]+|goals\/[^/]+)$/;

/** The JSON a read route stands for, or throws HttpError (404 for an unknown route, product or goal run). */
async function readView(reader: RunStateReader, where: string, path: string): Promise<unknown> {
  const parts = path
    .split("/")
    .filter((p) => p.length > 0)
    .map(decodeSegment);
  try {
    if (parts.length === 2 && parts[1] === "overview") return await overview(reader, where);
    if (parts.length === 3 && parts[1] === "products") return await productView(reader, parts[2] as string, Date.now());
    if (parts.length === 3 && parts[1] === "goals") return await goalView(reader, parts[2] as string);
  } catch (err) {
    if (isDomainError(err, "not_found")) throw new HttpError(404, err.message);
    throw err;
  }
  throw new HttpError(404, `There is no dashboard route ${path}.`);
}

/** A stream's frame: the view, or a `problem` with the error's sentence and status. */
async function streamFrame(options: DashboardOptions, path: string): Promise<StreamFrame> {
  try {
    return { event: "view", data: JSON.stringify(await readView(options.reader, options.where, path)) };
  } catch (err) {
    if (!(err instanceof HttpError)) options.logger.warn({ err, path }, "dashboard read failed");
    const message = err instanceof Error ? err.message : String(err);
    return {
      event: "problem",
      data: JSON.stringify({ error: message, status: err instanceof HttpError ? err.status : 500 }),
    };
  }
}

/** A task's full output as text/plain. */
async function sendOutput(options: DashboardOptions, res: ServerResponse, m: RegExpExecArray, head: boolean) {
  const productId = decodeSegment(m[1] as string);
  const taskId = decodeSegment(m[2] as string);
  let text: string | undefined;
  try {
    text = await taskOutput(options.reader, productId, taskId);
  } catch (err) {
    if (isDomainError(err, "not_found")) throw new HttpError(404, err.message);
    throw err;
  }
  if (text === undefined) throw new HttpError(404, `The product ${productId} has no task ${taskId}.`);
  send(res, 200, "text/plain; charset=utf-8", text, head);
}

/** Static files of the page, by path. */
const STATIC: Record<string, [string, string]> = {
  "/": ["text/html; charset=utf-8", PAGE_HTML],
  "/index.html": ["text/html; charset=utf-8", PAGE_HTML],
  "/app.js": ["text/javascript; charset=utf-8", PAGE_SCRIPT],
  "/app.css": ["text/css; charset=utf-8", PAGE_CSS],
};

/** The request handler of the read routes. */
function readRoutes(options: DashboardOptions, streams: EventStreams) {
  return async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const head = req.method === "HEAD";
    const path = url.pathname;
    const file = STATIC[path];
    if (file) return send(res, 200, file[0], file[1], head);
    if (path === "/favicon.ico") {
      res.writeHead(204).end();
      return;
    }
    if (path === "/api/stream") {
      const target = url.searchParams.get("path") ?? "";
      if (!STREAM_PATH.test(target)) {
        throw new HttpError(400, "The stream's path must be /api/overview, /api/products/ID or /api/goals/ID.");
      }
      return streams.open(req, res, target);
    }
    const output = /^\/api\/products\/([^/]+)\/tasks\/([^/]+)\/output$/.exec(path);
    if (output) return sendOutput(options, res, output, head);
    if (path.startsWith("/api/")) return sendJson(res, 200, await readView(options.reader, options.where, path), head);
    throw new HttpError(404, `There is no page ${path}.`);
  };
}

/** The whole request handler: method and Host checks, then the routes. */
function handler(options: DashboardOptions, host: string, streams: EventStreams) {
  const read = readRoutes(options, streams);
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const head = req.method === "HEAD";
    if (req.method !== "GET" && !head) {
      res.setHeader("allow", "GET, HEAD");
      return sendJson(res, 405, { error: "The dashboard is read-only: only GET and HEAD." });
    }
    if (isLoopback(host) && !isLoopback(hostName(req))) {
      return sendJson(res, 403, { error: "The dashboard answers loopback host names only." }, head);
    }
    await read(req, res, new URL(req.url ?? "/", "http://dashboard.invalid"));
  };
}

/** Listens on `host:port`; resolves with the port. Rejects with the listen error (e.g. EADDRINUSE). */
function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Starts the dashboard; resolves once it listens. Throws the listen error (e.g. EADDRINUSE). */
export async function startDashboard(options: DashboardOptions): Promise<RunningDashboard> {
  const host = options.host ?? "127.0.0.1";
  const streams = new EventStreams(
    (path) => streamFrame(options, path),
    { ...options.streams, pollMs: options.pollMs ?? 500 },
    options.logger,
  );
  const handle = handler(options, host, streams);
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      const status = err instanceof HttpError ? err.status : 500;
      if (status === 500) options.logger.error({ err, url: req.url }, "dashboard request failed");
      const message = err instanceof Error ? err.message : String(err);
      if (!res.headersSent) sendJson(res, status, { error: message }, req.method === "HEAD");
      else res.end();
    });
  });
  const port = await listen(server, host, options.port ?? 0);
  const shown = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}/`,
    port,
    streamCounts: () => streams.counts,
    close: () =>
      new Promise<void>((resolve) => {
        streams.closeAll();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
