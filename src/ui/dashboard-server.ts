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
 * - `/api/products/ID/diff[?task=TASK]`, `/api/products/ID/tasks/TASK/attempts`, `/api/products/ID/timeline`: a
 *   product's or task's change from git, a task's attempt history, the Gantt rows (task-history.ts).
 * The mutating route `POST /api/control` (control-routes.ts: secret, Origin, JSON body, else 403) exists only when
 * `control` is given; any other method or path that is not a read is 405.
 * An unknown product or goal run is 404 with `{error}`; a request whose Host header is not a loopback name while the
 * server is bound to loopback is 403 (a web page elsewhere must not read the store through DNS rebinding).
 *
 * Never writes the store through its reader (guarantee 3): the reader is opened read-only.
 */
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { isDomainError } from "../core/errors.js";
import { packagePath } from "../package-files.js";
import type { Logger } from "../core/ports.js";
import type { RunStateReader } from "../operator/run-state-reader.js";
import { goalView, overview, productView, taskOutput } from "./dashboard-data.js";
import { EventStreams, type StreamFrame, type StreamLimits } from "./event-streams.js";
import { ChangeUnavailable, changeRange, diffText } from "../operator/product-git.js";
import { attemptHistory, timeline } from "./task-history.js";
import { handleControl, type DashboardControl } from "./control-routes.js";
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
  /** The buttons (control-routes.ts); without it the dashboard is read-only. */
  control?: DashboardControl;
  /** Stream limits other than the poll interval (event-streams.ts defaults). */
  streams?: Omit<StreamLimits, "pollMs">;
}

export interface RunningDashboard {
  /** `http://HOST:PORT/` */
  url: string;
  /** The address to open: `url` with the per-launch key of the buttons (`?key=…`) when `control` is given. */
  openUrl: string;
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

/** Maps a reader's not_found to 404 and a git refusal to 409. */
async function answering<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (isDomainError(err, "not_found")) throw new HttpError(404, err.message);
    if (err instanceof ChangeUnavailable) throw new HttpError(409, err.message);
    throw err;
  }
}

/** The history routes: a diff, a task's attempts, the timeline; undefined when `path` is none of them. */
function historyRoute(options: DashboardOptions, path: string, url: URL): Promise<unknown> | undefined {
  const { reader } = options;
  const diff = /^\/api\/products\/([^/]+)\/diff$/.exec(path);
  if (diff) {
    const productId = decodeSegment(diff[1] as string);
    const task = url.searchParams.get("task") ?? undefined;
    return answering(async () => {
      const range = await changeRange(reader, productId, task);
      return {
        what: range.what,
        base: range.base,
        head: range.head,
        diff: await diffText(range, { color: false, stat: false }),
      };
    });
  }
  const attempts = /^\/api\/products\/([^/]+)\/tasks\/([^/]+)\/attempts$/.exec(path);
  if (attempts) {
    const [productId, taskId] = [decodeSegment(attempts[1] as string), decodeSegment(attempts[2] as string)];
    return answering(async () => ({ taskId, attempts: await attemptHistory(reader, productId, taskId) }));
  }
  const rows = /^\/api\/products\/([^/]+)\/timeline$/.exec(path);
  if (rows) return answering(() => timeline(reader, decodeSegment(rows[1] as string), Date.now()));
  return undefined;
}

/** Static files of the page, by path. */
const STATIC: Record<string, [string, string]> = {
  "/": ["text/html; charset=utf-8", PAGE_HTML],
  "/index.html": ["text/html; charset=utf-8", PAGE_HTML],
  "/app.js": ["text/javascript; charset=utf-8", PAGE_SCRIPT],
  "/app.css": ["text/css; charset=utf-8", PAGE_CSS],
};

/** The bundled third-party browser code (scripts/bundle.ts), read once; an empty script when it was not built. */
const vendorFiles = new Map<string, string>();
function vendorFile(name: string, logger: Logger): string {
  let text = vendorFiles.get(name);
  if (text === undefined) {
    try {
      text = readFileSync(packagePath(`dist/bundle/${name}`), "utf8");
    } catch (err) {
      logger.warn({ err }, `the dashboard's ${name} is missing (run npm run build): no zoom, diffs as text`);
      text = "";
    }
    vendorFiles.set(name, text);
  }
  return text;
}

/** The request handler of the read routes. */
function readRoutes(options: DashboardOptions, streams: EventStreams) {
  return async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const head = req.method === "HEAD";
    const path = url.pathname;
    const file = STATIC[path];
    if (file) return send(res, 200, file[0], file[1], head);
    if (path === "/vendor.js")
      return send(res, 200, "text/javascript; charset=utf-8", vendorFile("dashboard-vendor.js", options.logger), head);
    if (path === "/vendor.css")
      return send(res, 200, "text/css; charset=utf-8", vendorFile("dashboard-vendor.css", options.logger), head);
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
    const history = historyRoute(options, path, url);
    if (history) return sendJson(res, 200, await history, head);
    if (path.startsWith("/api/")) return sendJson(res, 200, await readView(options.reader, options.where, path), head);
    throw new HttpError(404, `There is no page ${path}.`);
  };
}

/** The whole request handler: method and Host checks, then the routes. */
function handler(options: DashboardOptions, host: string, streams: EventStreams) {
  const read = readRoutes(options, streams);
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const head = req.method === "HEAD";
    if (isLoopback(host) && !isLoopback(hostName(req))) {
      return sendJson(res, 403, { error: "The dashboard answers loopback host names only." }, head);
    }
    const url = new URL(req.url ?? "/", "http://dashboard.invalid");
    if (req.method === "POST" && url.pathname === "/api/control" && options.control) {
      return handleControl(req, res, options.control, options.reader);
    }
    if (req.method !== "GET" && !head) {
      res.setHeader("allow", options.control ? "GET, HEAD (POST /api/control)" : "GET, HEAD");
      return sendJson(res, 405, {
        error: options.control
          ? "The dashboard changes products only through POST /api/control."
          : "The dashboard is read-only: only GET and HEAD.",
      });
    }
    await read(req, res, url);
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
  const base = `http://${shown}:${port}/`;
  return {
    url: base,
    openUrl: options.control ? `${base}?key=${encodeURIComponent(options.control.secret)}` : base,
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
