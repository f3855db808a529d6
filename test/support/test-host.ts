/**
 * Test support: a host that owns the run state (PROTOCOL.md section 7), built on the official ACP SDK client and
 * backed by a `MemoryAuthority`, with fault injection (fail, conflict, delay, never answer, answer garbage).
 *
 * Two ways to use it:
 * - `connectInProcess`: linked in-memory streams between a `RpcConnection` (the server side, over the real framed
 *   transport) and the SDK client, initialized with `runStateAuthority: true`; gives a `HostAuthority` talking real
 *   JSON-RPC. The conformance suite (test/authority/host.test.ts) runs on it.
 * - `startHostedServer`: the built server (`dist/src/cli.js`) as a subprocess on real stdio, the host's SDK client
 *   connected to it (test/e2e/host-authority.test.ts).
 *
 * Every started process is killed when the test file ends. This file must never reach into the server's internals
 * beyond the public `RpcConnection` / `HostAuthority` API.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { PassThrough, Readable, Writable } from "node:stream";
import { RequestError, client, ndJsonStream, type ClientApp, type ClientConnection } from "@agentclientprotocol/sdk";
import { afterAll } from "vitest";
import type { z } from "zod";
import {
  RunStateAppendEventsParams,
  RunStateDeleteParams,
  RunStateDeleteStreamParams,
  RunStateGetParams,
  RunStateListParams,
  RunStatePutParams,
  RunStateReadEventsParams,
} from "../../protocol/host.js";
import { ErrorCodes } from "../../protocol/errors.js";
import { acpMethods } from "../../protocol/methods.js";
import { HostAuthority } from "../../src/adapters/persistence/host-authority.js";
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import { AuthorityConflict, AuthorityFailure, type Logger } from "../../src/core/ports.js";
import { createFramedTransport } from "../../src/server/framing.js";
import { RpcConnection } from "../../src/server/rpc-connection.js";
import { watchWire, type AcpWireChecker } from "./acp-schema.js";
import { RecordingLogger } from "./fakes.js";
import { CLI, tempDir, type Notification } from "./server-process.js";

/** The seven host operations of PROTOCOL.md section 7. */
export type HostOperation = "get" | "put" | "delete" | "list" | "appendEvents" | "readEvents" | "deleteStream";

const WRITES: ReadonlySet<HostOperation> = new Set(["put", "delete", "appendEvents", "deleteStream"]);

/** One request the host received. */
export interface HostCall {
  op: HostOperation;
  /** The wire name as received (`runState/put` or `_runState/put`). */
  method: string;
  /** The params as parsed by the host's schema. */
  params: Record<string, unknown>;
}

/** What the host does instead of (or before) serving one call. */
export type HostFault =
  /** Answers a JSON-RPC error (default `-32013 persistence failed`); nothing is stored. */
  | { kind: "fail"; code?: number; message?: string; data?: unknown }
  /** Answers `-32012` with `data`; nothing is stored. */
  | { kind: "conflict"; data?: { owner?: string; revision?: number } }
  /** Serves the call normally after `ms` milliseconds. */
  | { kind: "delay"; ms: number }
  /** Never answers (until the server cancels the request); nothing is stored. */
  | { kind: "hang" }
  /** Answers `result` instead of serving the call; nothing is stored. */
  | { kind: "answer"; result: unknown };

/** Which calls a fault applies to: an operation, any write, any call, or a predicate. */
export type HostMatch = HostOperation | "write" | "any" | ((call: HostCall) => boolean);

/**
 * A run-state host: serves `runState/*` (bare and `_` spellings) from `store`, records every call in `calls`, and
 * applies queued faults. Each injected fault is consumed by exactly one matching call, in injection order.
 */
export class TestHost {
  readonly store: MemoryAuthority;
  readonly calls: HostCall[] = [];
  /** Most events one `readEvents` answer holds, whatever `limit` asks (a host that pages on its own); default none. */
  readonly pageSize: number | undefined;
  private readonly faults: { match: HostMatch; fault: HostFault }[] = [];

  constructor(options: { store?: MemoryAuthority; pageSize?: number } = {}) {
    this.store = options.store ?? new MemoryAuthority();
    this.pageSize = options.pageSize;
  }

  /** Queues `fault` for the next call matching `match`. */
  inject(match: HostMatch, fault: HostFault): void {
    this.faults.push({ match, fault });
  }

  /** The next matching call is answered with an error (default `-32013`). */
  failNext(match: HostMatch, error: { code?: number; message?: string; data?: unknown } = {}): void {
    this.inject(match, { kind: "fail", ...error });
  }

  /** The next matching call is answered `-32012` with `data`. */
  conflictNext(match: HostMatch, data?: { owner?: string; revision?: number }): void {
    this.inject(match, { kind: "conflict", ...(data !== undefined ? { data } : {}) });
  }

  /** The next matching call is served after `ms` milliseconds. */
  delayNext(match: HostMatch, ms: number): void {
    this.inject(match, { kind: "delay", ms });
  }

  /** The next matching call is never answered. */
  hangNext(match: HostMatch): void {
    this.inject(match, { kind: "hang" });
  }

  /** The next matching call is answered with `result`, whatever it is. */
  answerNext(match: HostMatch, result: unknown): void {
    this.inject(match, { kind: "answer", result });
  }

  /** Faults injected and not consumed yet. */
  get pendingFaults(): number {
    return this.faults.length;
  }

  /** Registers every `runState/*` handler (both spellings) on `app`, with the protocol's params schemas as parsers. */
  register(app: ClientApp): ClientApp {
    const on = <S extends z.ZodType>(op: HostOperation, schema: S): void => {
      for (const method of [`runState/${op}`, `_runState/${op}`]) {
        app.onRequest(method, schema, (ctx) =>
          this.serve({ op, method, params: ctx.params as Record<string, unknown> }, ctx.signal),
        );
      }
    };
    on("get", RunStateGetParams);
    on("put", RunStatePutParams);
    on("delete", RunStateDeleteParams);
    on("list", RunStateListParams);
    on("appendEvents", RunStateAppendEventsParams);
    on("readEvents", RunStateReadEventsParams);
    on("deleteStream", RunStateDeleteStreamParams);
    return app;
  }

  /** A fresh SDK client app serving this host. */
  app(name = "test-host"): ClientApp {
    return this.register(client({ name }));
  }

  private async serve(call: HostCall, signal: AbortSignal): Promise<unknown> {
    this.calls.push(call);
    const index = this.faults.findIndex(({ match }) => matches(match, call));
    const fault = index >= 0 ? this.faults.splice(index, 1)[0]?.fault : undefined;
    switch (fault?.kind) {
      case "fail":
        throw new RequestError(
          fault.code ?? ErrorCodes.PersistenceFailed,
          fault.message ?? "Injected host failure.",
          fault.data ?? { cause: "injected" },
        );
      case "conflict":
        throw new RequestError(ErrorCodes.Conflict, "Injected conflict.", fault.data ?? {});
      case "hang":
        return new Promise((_, reject) => {
          signal.addEventListener("abort", () => reject(RequestError.requestCancelled()), { once: true });
        });
      case "answer":
        return fault.result;
      case "delay":
        await sleep(fault.ms, signal);
        break;
      case undefined:
        break;
    }
    try {
      return await this.execute(call);
    } catch (error) {
      if (error instanceof AuthorityConflict) throw new RequestError(ErrorCodes.Conflict, error.message, error.details);
      if (error instanceof AuthorityFailure) {
        throw new RequestError(ErrorCodes.PersistenceFailed, error.message, { cause: error.message });
      }
      throw error;
    }
  }

  private async execute({ op, params: p }: HostCall): Promise<unknown> {
    const s = this.store;
    const str = (key: string) => p[key] as string;
    switch (op) {
      case "get":
        return { record: await s.get(str("projectId"), str("kind"), str("id")) };
      case "put":
        return s.put(str("projectId"), str("kind"), str("id"), p.value as object, p.expectedRevision as number | null);
      case "delete":
        return {
          deleted: await s.delete(str("projectId"), str("kind"), str("id"), p.expectedRevision as number | undefined),
        };
      case "list":
        return { records: await s.list(str("projectId"), str("kind"), p.prefix as string | undefined) };
      case "appendEvents":
        return s.appendEvents(str("projectId"), str("stream"), p.events as object[], p.expectedSeq as number);
      case "readEvents": {
        const asked = p.limit as number | undefined;
        const page = Math.min(asked ?? Number.MAX_SAFE_INTEGER, this.pageSize ?? Number.MAX_SAFE_INTEGER);
        // One event beyond the page says whether there is more.
        const read = page === Number.MAX_SAFE_INTEGER ? undefined : page + 1;
        const events = await s.readEvents(str("projectId"), str("stream"), p.afterSeq as number, read);
        return { events: events.slice(0, page), more: events.length > page };
      }
      case "deleteStream":
        return { deleted: await s.deleteStream(str("projectId"), str("stream")) };
    }
  }
}

function matches(match: HostMatch, call: HostCall): boolean {
  if (typeof match === "function") return match(call);
  if (match === "any") return true;
  if (match === "write") return WRITES.has(call.op);
  return match === call.op;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(RequestError.requestCancelled());
      },
      { once: true },
    );
  });
}

/** `clientCapabilities` that hand the run state to the host, optionally with the ACP `_` spelling. */
export function hostCapabilities(prefix: "" | "_" = ""): Record<string, unknown> {
  return {
    _meta: { "acp-orchestrator": { runStateAuthority: true, ...(prefix === "_" ? { extensionPrefix: "_" } : {}) } },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// In process: RpcConnection ⇄ SDK client over linked streams

export interface InProcessLink {
  /** A HostAuthority over the server side of the link. */
  authority: HostAuthority;
  /** The server side: a real RpcConnection over the framed transport. */
  server: RpcConnection;
  /** The host side: the SDK client connection. */
  client: ClientConnection;
  /** Ends the byte stream from the host to the server, as a host that exits does (the server's input closes). */
  endHostOutput(): void;
  /** Closes the authority, both connections and the streams. Idempotent. */
  close(): Promise<void>;
}

export interface InProcessOptions {
  /** The extension spelling the host asks for in `initialize` (default: bare names). */
  prefix?: "" | "_";
  /** HostAuthority's timeout in milliseconds (default: its own default). */
  timeoutMs?: number;
  logger?: Logger;
}

/**
 * Links `host` to a fresh server-side `RpcConnection` through in-memory streams, sends `initialize` from the host
 * (declaring `runStateAuthority`, the server side applying the extension prefix it asks for), and returns a
 * `HostAuthority` over the server side.
 */
export async function connectInProcess(host: TestHost, options: InProcessOptions = {}): Promise<InProcessLink> {
  const logger = options.logger ?? new RecordingLogger();
  const toServer = new PassThrough();
  const toClient = new PassThrough();
  const { reader, writer } = createFramedTransport(toServer, toClient, { logger });
  const initialize = acpMethods.find((m) => m.method === "initialize");
  if (!initialize) throw new Error("initialize is missing from the method table");
  const server = new RpcConnection({ reader, writer, methods: [initialize], logger });
  server.handle("initialize", (params) => {
    const meta = (params as { clientCapabilities?: { _meta?: Record<string, { extensionPrefix?: string }> } })
      .clientCapabilities?._meta?.["acp-orchestrator"];
    if (meta) server.declareExtension(meta.extensionPrefix === "_" ? "_" : "");
    return {
      protocolVersion: 1,
      agentCapabilities: {},
      agentInfo: { name: "in-process-server", version: "0" },
      authMethods: [],
    };
  });
  server.listen();
  const connection = host
    .app()
    .connect(
      ndJsonStream(
        Writable.toWeb(toServer) as WritableStream<Uint8Array>,
        Readable.toWeb(toClient) as ReadableStream<Uint8Array>,
      ),
    );
  await connection.agent.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: hostCapabilities(options.prefix ?? ""),
    clientInfo: { name: "test-host", version: "1" },
  });
  if (!server.initialized) throw new Error("the server side did not record initialize");
  const authority = new HostAuthority({
    connection: server,
    logger,
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  });
  let closed = false;
  return {
    authority,
    server,
    client: connection,
    endHostOutput: () => toServer.end(),
    async close() {
      if (closed) return;
      closed = true;
      await authority.close();
      server.dispose();
      connection.close();
      toServer.end();
      toClient.end();
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Against the built server subprocess

const started = new Set<ChildProcessWithoutNullStreams>();
afterAll(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

export interface HostedServerOptions {
  /** The server's SQLite state file (default: a fresh temp file); it must stay empty when the host owns state. */
  statePath?: string;
  /** Working directory of the server process (default: a fresh temp dir). */
  cwd?: string;
  /** Extra CLI arguments, e.g. `["--host-timeout-ms", "300"]`. */
  args?: string[];
  env?: Record<string, string>;
  /** The extension spelling the host asks for (default: bare names). */
  prefix?: "" | "_";
  /** Answer to `session/request_permission` (default: select "confirm"). */
  onPermission?: (params: Record<string, unknown>) => unknown;
}

export interface HostedServer {
  child: ChildProcessWithoutNullStreams;
  /** The ACP v1 schema check of everything this server sent (checked automatically after each test). */
  wire: AcpWireChecker;
  statePath: string;
  cwd: string;
  connection: ClientConnection;
  /** Every stdout line so far. */
  stdoutLines: string[];
  /** Every notification so far, names as received. */
  notifications: Notification[];
  stderr(): string;
  request<T = Record<string, unknown>>(method: string, params?: unknown): Promise<T>;
  /** Resolves with the first notification (already received or future) matching `pred`. */
  waitFor(pred: (n: Notification) => boolean, timeoutMs?: number): Promise<Notification>;
  /** Closes stdin and waits for the exit code (graceful shutdown). */
  close(): Promise<number | null>;
}

/**
 * Spawns the built server and connects `host` to it as its client, then sends `initialize` declaring
 * `runStateAuthority: true`, so every record the server persists from then on goes to `host.store`.
 */
export async function startHostedServer(host: TestHost, options: HostedServerOptions = {}): Promise<HostedServer> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does).`);
  const statePath = options.statePath ?? join(tempDir(), "state.db");
  const cwd = options.cwd ?? tempDir();
  const child = spawn(process.execPath, [CLI, "serve", "--state", statePath, ...(options.args ?? [])], {
    cwd,
    env: { ...process.env, ...(options.env ?? {}) },
    stdio: ["pipe", "pipe", "pipe"],
  });
  started.add(child);
  const wire = watchWire(child);
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  const stdoutLines: string[] = [];
  let partial = "";
  const tap = new PassThrough();
  child.stdout.on("data", (chunk: Buffer) => {
    partial += chunk.toString("utf8");
    let at: number;
    while ((at = partial.indexOf("\n")) >= 0) {
      stdoutLines.push(partial.slice(0, at));
      partial = partial.slice(at + 1);
    }
    tap.write(chunk);
  });
  child.stdout.on("end", () => tap.end());

  const notifications: Notification[] = [];
  const waiters: { pred: (n: Notification) => boolean; resolve: (n: Notification) => void }[] = [];
  const app = host
    .app("test-host")
    .onRequest("session/request_permission", (ctx) => {
      const answer = options.onPermission?.(ctx.params as unknown as Record<string, unknown>);
      return (answer ?? { outcome: { outcome: "selected", optionId: "confirm" } }) as never;
    })
    .onNotification("*", ({ method, params }) => {
      const n = { method, params: (params ?? {}) as Record<string, unknown> };
      notifications.push(n);
      for (const w of [...waiters]) {
        if (w.pred(n)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(n);
        }
      }
    });
  const connection = app.connect(
    ndJsonStream(
      Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
      Readable.toWeb(tap) as ReadableStream<Uint8Array>,
    ),
  );
  const handle: HostedServer = {
    child,
    wire,
    statePath,
    cwd,
    connection,
    stdoutLines,
    notifications,
    stderr: () => stderr,
    request: <T>(method: string, params?: unknown) => connection.agent.request<T>(method, params ?? {}),
    waitFor(pred, timeoutMs = 60_000) {
      const found = notifications.find(pred);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          const seen = notifications.map((n) => n.method).join(", ");
          reject(new Error(`timed out waiting for a notification; got: ${seen}\nstderr: ${stderr.slice(-2000)}`));
        }, timeoutMs);
        waiters.push({
          pred,
          resolve: (n) => {
            clearTimeout(timer);
            resolve(n);
          },
        });
      });
    },
    async close() {
      child.stdin.end();
      return exited;
    },
  };
  await handle.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: hostCapabilities(options.prefix ?? ""),
    clientInfo: { name: "test-host", version: "1" },
  });
  return handle;
}
