/**
 * The dashboard's HTTP server (issue 15, `acp-orchestrator ui`): a read-only web page over one store, bound to
 * 127.0.0.1 by default. Routes (GET and HEAD only; anything else is 405):
 * - `/`, `/app.js`, `/app.css`: the page (page.ts; no build step, no third-party code in the browser);
 * - `/api/overview`: products and goal runs (dashboard-data.ts `overview`);
 * - `/api/products/ID`: one product with its laid-out DAG; `/api/products/ID/tasks/TASK/output`: a task's full
 *   output as text/plain;
 * - `/api/goals/ID`: one goal run;
 * - `/api/stream?path=P` (server-sent events): the JSON of route P (one of the three above) as a `view` event at
 *   once and again whenever it changes; the store is polled every `pollMs`, so it works on SQLite and PostgreSQL while
 *   other servers write the store; a read that fails is sent as a `problem` event and polling goes on.
 * An unknown product or goal run is 404 with `{error}`; a request whose Host header is not a loopback name while the
 * server is bound to loopback is 403 (a web page elsewhere must not read the store through DNS rebinding).
 *
 * Never writes the store (guarantee 3): its reader is opened read-only.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, isIPv4 } from "node:net";
import { isDomainError } from "../core/errors.js";
import type { Logger } from "../core/ports.js";
import type { RunStateReader } from "../operator/run-state-reader.js";
import { goalView, overview, productView, taskOutput } from "./dashboard-data.js";
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
}

export interface RunningDashboard {
  /** `http://HOST:PORT/` */
  url: string;
  port: number;
  /** Ends every stream and stops listening. */
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const LOOPBACK_NAMES = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

/** An IPv4 literal in 127.0.0.0/8 (a name that merely starts with "127." is not one: DNS rebinding). */
function isLoopbackAddress(host: string): boolean {
  return isIPv4(host) && host.startsWith("127.");
}

function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.has(host) || isLoopbackAddress(host);
}

/** A path segment decoded, or a 404 when its percent-encoding is malformed. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(404, `There is no dashboard route for the malformed path segment ${segment}.`);
  }
}

/** Starts the dashboard; resolves once it listens. Throws the listen error (e.g. EADDRINUSE). */
export async function startDashboard(options: DashboardOptions): Promise<RunningDashboard> {
  const host = options.host ?? "127.0.0.1";
  const pollMs = options.pollMs ?? 500;
  const { reader, where, logger } = options;
  const streams = new Set<() => void>();

  /** The JSON a route stands for, or throws HttpError. */
  async function view(path: string): Promise<unknown> {
    const parts = path
      .split("/")
      .filter((p) => p.length > 0)
      .map(decodeSegment);
    try {
      if (parts.length === 2 && parts[1] === "overview") return await overview(reader, where);
      if (parts.length === 3 && parts[1] === "products")
        return await productView(reader, parts[2] as string, Date.now());
      if (parts.length === 3 && parts[1] === "goals") return await goalView(reader, parts[2] as string);
    } catch (err) {
      if (isDomainError(err, "not_found")) throw new HttpError(404, err.message);
      throw err;
    }
    throw new HttpError(404, `There is no dashboard route ${path}.`);
  }

  function send(res: ServerResponse, status: number, type: string, body: string, head: boolean): void {
    res.writeHead(status, {
      "content-type": type,
      "content-length": Buffer.byteLength(body),
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
    });
    res.end(head ? undefined : body);
  }

  function stream(req: IncomingMessage, res: ServerResponse, path: string): void {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store", connection: "keep-alive" });
    let last = "";
    let timer: NodeJS.Timeout | undefined;
    let closed = false;
    const stop = () => {
      closed = true;
      if (timer) clearTimeout(timer);
      streams.delete(stop);
      res.end();
    };
    streams.add(stop);
    req.once("close", stop);
    let ticks = 0;
    const tick = async () => {
      if (closed) return;
      try {
        const body = JSON.stringify(await view(path));
        if (body !== last) {
          last = body;
          res.write(`event: view\ndata: ${body}\n\n`);
        } else if (++ticks % Math.max(1, Math.round(15_000 / pollMs)) === 0) {
          res.write(": still here\n\n");
        }
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        if (!(err instanceof HttpError)) logger.warn({ err, path }, "dashboard read failed");
        const body = JSON.stringify({ error: message, status: err instanceof HttpError ? err.status : 500 });
        if (body !== last) {
          last = body;
          res.write(`event: problem\ndata: ${body}\n\n`);
        }
      }
      if (!closed) timer = setTimeout(() => void tick(), pollMs);
    };
    void tick();
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const head = req.method === "HEAD";
    if (req.method !== "GET" && !head) {
      res.setHeader("allow", "GET, HEAD");
      send(
        res,
        405,
        "application/json",
        JSON.stringify({ error: "The dashboard is read-only: only GET and HEAD." }),
        false,
      );
      return;
    }
    const hostHeader = (req.headers.host ?? "").replace(/:\d+$/, "");
    if (isLoopback(host) && !isLoopback(hostHeader)) {
      send(
        res,
        403,
        "application/json",
        JSON.stringify({ error: "The dashboard answers loopback host names only." }),
        head,
      );
      return;
    }
    const url = new URL(req.url ?? "/", "http://dashboard.invalid");
    const path = url.pathname;
    if (path === "/" || path === "/index.html") return send(res, 200, "text/html; charset=utf-8", PAGE_HTML, head);
    if (path === "/app.js") return send(res, 200, "text/javascript; charset=utf-8", PAGE_SCRIPT, head);
    if (path === "/app.css") return send(res, 200, "text/css; charset=utf-8", PAGE_CSS, head);
    if (path === "/favicon.ico") {
      res.writeHead(204).end();
      return;
    }
    if (path === "/api/stream") {
      const target = url.searchParams.get("path") ?? "";
      if (!/^\/api\/(overview|products\/[^/]+|goals\/[^/]+)$/.test(target)) {
        throw new HttpError(400, "The stream's path must be /api/overview, /api/products/ID or /api/goals/ID.");
      }
      return stream(req, res, target);
    }
    const output = /^\/api\/products\/([^/]+)\/tasks\/([^/]+)\/output$/.exec(path);
    if (output) {
      const productId = decodeSegment(output[1] as string);
      const taskId = decodeSegment(output[2] as string);
      let text: string | undefined;
      try {
        text = await taskOutput(reader, productId, taskId);
      } catch (err) {
        if (isDomainError(err, "not_found")) throw new HttpError(404, err.message);
        throw err;
      }
      if (text === undefined) throw new HttpError(404, `The product ${productId} has no task ${taskId}.`);
      return send(res, 200, "text/plain; charset=utf-8", text, head);
    }
    if (path.startsWith("/api/")) return send(res, 200, "application/json", JSON.stringify(await view(path)), head);
    throw new HttpError(404, `There is no page ${path}.`);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      const status = err instanceof HttpError ? err.status : 500;
      if (status === 500) logger.error({ err, url: req.url }, "dashboard request failed");
      const message = err instanceof Error ? err.message : String(err);
      if (!res.headersSent)
        send(res, status, "application/json", JSON.stringify({ error: message }), req.method === "HEAD");
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const shown = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}/`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const stop of [...streams]) stop();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
