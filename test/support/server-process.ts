/**
 * Test support: the built server (`dist/src/cli.js`) as a real subprocess on real stdio.
 *
 * `startServer` connects the official ACP SDK client to it and records every stdout line, every notification and
 * stderr, so a test can assert that stdout carried JSON-RPC messages only. `startRawServer` gives byte-level access
 * for malformed-frame tests. Every message any started server sends is checked against the ACP v1 JSON Schema
 * (acp-schema.ts): a test during which one fails the schema fails. Every started process is killed when the test
 * file ends.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { PassThrough, Readable, Writable } from "node:stream";
import { client, ndJsonStream, type ClientConnection } from "@agentclientprotocol/sdk";
import { afterAll } from "vitest";
import { watchWire, type AcpWireChecker } from "./acp-schema.js";

export const REPO_ROOT = resolve(import.meta.dirname, "..", "..");
export const CLI = join(REPO_ROOT, "dist", "src", "cli.js");

const started = new Set<ChildProcessWithoutNullStreams>();
afterAll(() => {
  for (const c of started) if (c.exitCode === null) c.kill("SIGKILL");
});

export function tempDir(prefix = "acp-orch-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface SpawnOptions {
  /** SQLite state file (default: a fresh temp file). */
  statePath?: string;
  /** Working directory of the server process (default: a fresh temp dir). */
  cwd?: string;
  args?: string[];
  env?: Record<string, string>;
}

export interface Notification {
  method: string;
  params: Record<string, unknown>;
  /** Epoch milliseconds when the client received it (non-enumerable: equality checks ignore it). */
  readonly receivedAt?: number;
}

function spawnServer(options: SpawnOptions) {
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
  const exited = new Promise<number | null>((resolveExit) => child.once("exit", (code) => resolveExit(code)));
  return { child, statePath, cwd, stderr: () => stderr, exited, wire };
}

/** Splits a byte stream into lines as the server writes them (NDJSON). */
function lineTap(onLine: (line: string) => void) {
  let buffer = "";
  return (chunk: Buffer) => {
    buffer += chunk.toString("utf8");
    let i: number;
    while ((i = buffer.indexOf("\n")) >= 0) {
      onLine(buffer.slice(0, i));
      buffer = buffer.slice(i + 1);
    }
  };
}

/** True when `line` is one JSON-RPC 2.0 message (request, notification or response). */
export function isJsonRpcLine(line: string): boolean {
  try {
    const m = JSON.parse(line) as Record<string, unknown>;
    if (m === null || typeof m !== "object" || Array.isArray(m) || m.jsonrpc !== "2.0") return false;
    return typeof m.method === "string" || "result" in m || "error" in m;
  } catch {
    return false;
  }
}

export interface ServerHandle {
  child: ChildProcessWithoutNullStreams;
  /** The ACP v1 schema check of everything this server sent (checked automatically after each test). */
  wire: AcpWireChecker;
  statePath: string;
  cwd: string;
  connection: ClientConnection;
  /** Every stdout line so far. */
  stdoutLines: string[];
  notifications: Notification[];
  stderr(): string;
  request<T = Record<string, unknown>>(method: string, params?: unknown): Promise<T>;
  /** Resolves with the first notification (already received or future) matching `pred`. */
  waitFor(pred: (n: Notification) => boolean, timeoutMs?: number): Promise<Notification>;
  /** Closes stdin and waits for the exit code (graceful shutdown). */
  close(): Promise<number | null>;
  /** SIGKILLs the process. */
  kill(): Promise<void>;
}

export interface StartOptions extends SpawnOptions {
  /** Answer to `session/request_permission` (default: select "confirm"). */
  onPermission?: (params: Record<string, unknown>) => unknown;
  /** Extra `clientCapabilities` for initialize. */
  clientCapabilities?: Record<string, unknown>;
  /** Skip initialize (default false). */
  noInitialize?: boolean;
}

/** Starts the built server and connects the official ACP SDK client to it, then sends `initialize`. */
export async function startServer(options: StartOptions = {}): Promise<ServerHandle> {
  const s = spawnServer(options);
  const stdoutLines: string[] = [];
  const notifications: Notification[] = [];
  const waiters: { pred: (n: Notification) => boolean; resolve: (n: Notification) => void }[] = [];
  const pass = new PassThrough();
  s.child.stdout.on(
    "data",
    lineTap((l) => stdoutLines.push(l)),
  );
  s.child.stdout.on("data", (chunk: Buffer) => pass.write(chunk));
  s.child.stdout.on("end", () => pass.end());
  const app = client({ name: "acp-orchestrator-tests" })
    .onRequest("session/request_permission", (ctx) => {
      const answer = options.onPermission?.(ctx.params as unknown as Record<string, unknown>);
      return (answer ?? { outcome: { outcome: "selected", optionId: "confirm" } }) as never;
    })
    .onNotification("*", ({ method, params }) => {
      const n: Notification = { method, params: (params ?? {}) as Record<string, unknown> };
      Object.defineProperty(n, "receivedAt", { value: Date.now(), enumerable: false });
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
      Writable.toWeb(s.child.stdin) as WritableStream<Uint8Array>,
      Readable.toWeb(pass) as ReadableStream<Uint8Array>,
    ),
  );
  const handle: ServerHandle = {
    child: s.child,
    wire: s.wire,
    statePath: s.statePath,
    cwd: s.cwd,
    connection,
    stdoutLines,
    notifications,
    stderr: s.stderr,
    request: <T>(method: string, params?: unknown) => connection.agent.request<T>(method, params ?? {}),
    waitFor(pred, timeoutMs = 60_000) {
      const found = notifications.find(pred);
      if (found) return Promise.resolve(found);
      return new Promise((resolveWait, reject) => {
        const timer = setTimeout(() => {
          reject(
            new Error(
              `timed out waiting for a notification; got: ${notifications.map((n) => n.method).join(", ")}\nstderr: ${s.stderr().slice(-2000)}`,
            ),
          );
        }, timeoutMs);
        waiters.push({
          pred,
          resolve: (n) => {
            clearTimeout(timer);
            resolveWait(n);
          },
        });
      });
    },
    async close() {
      s.child.stdin.end();
      return s.exited;
    },
    async kill() {
      s.child.kill("SIGKILL");
      await s.exited;
    },
  };
  if (!options.noInitialize) {
    await handle.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: options.clientCapabilities ?? {},
      clientInfo: { name: "tests", version: "1" },
    });
  }
  return handle;
}

export interface RawServer {
  child: ChildProcessWithoutNullStreams;
  /** The ACP v1 schema check of everything this server sent (checked automatically after each test). */
  wire: AcpWireChecker;
  /** Writes raw bytes to stdin. */
  write(data: string): void;
  /** Sends one JSON value as an NDJSON line. */
  send(message: unknown): void;
  /** Resolves with the next stdout line that parses as an object satisfying `pred` (default: any). */
  next(pred?: (m: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  stdoutLines: string[];
  stderr(): string;
  close(): Promise<number | null>;
}

/** Starts the built server with byte-level stdio access (no SDK): for framing and malformed-input tests. */
export function startRawServer(options: SpawnOptions = {}): RawServer {
  const s = spawnServer(options);
  const stdoutLines: string[] = [];
  const queue: Record<string, unknown>[] = [];
  const waiters: { pred: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] =
    [];
  s.child.stdout.on(
    "data",
    lineTap((line) => {
      stdoutLines.push(line);
      let m: Record<string, unknown>;
      try {
        m = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      const w = waiters.find((x) => x.pred(m));
      if (w) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      } else queue.push(m);
    }),
  );
  return {
    child: s.child,
    wire: s.wire,
    stdoutLines,
    stderr: s.stderr,
    write: (data) => s.child.stdin.write(data),
    send: (message) => s.child.stdin.write(`${JSON.stringify(message)}\n`),
    next(pred = () => true, timeoutMs = 30_000) {
      const i = queue.findIndex(pred);
      if (i >= 0) return Promise.resolve(queue.splice(i, 1)[0]!);
      return new Promise((resolveNext, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `timed out waiting for a stdout message; stdout so far:\n${stdoutLines.join("\n")}\nstderr: ${s.stderr().slice(-2000)}`,
              ),
            ),
          timeoutMs,
        );
        waiters.push({
          pred,
          resolve: (m) => {
            clearTimeout(timer);
            resolveNext(m);
          },
        });
      });
    },
    async close() {
      s.child.stdin.end();
      return s.exited;
    },
  };
}
