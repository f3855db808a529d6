/**
 * A headless ACP client of our own server: spawns `acp-orchestrator serve` (this build) as a subprocess, connects the
 * official SDK client to its stdio, and gives the operator commands (`run`, `resume`) and the demo requests and
 * notifications. Ends the server's stdin when done (SDK 2.4.0's `connectWith` does not) and waits for it to exit.
 *
 * Owns the subprocess and the connection; what to ask the server is the caller's.
 */
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { packageLayout, packageModulePath } from "../package-files.js";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";
import { ReportedFailure } from "../cli-kit/errors.js";

export type Params = Record<string, unknown>;

/** What a caller may do while connected. */
export interface ServerSession {
  request<T = Params>(method: string, params: Params): Promise<T>;
  /** Resolves with the params of the next notification `match` accepts (registered before the triggering request). */
  waitFor(match: (method: string, params: Params) => boolean): Promise<Params>;
  /** Calls `listener` for every notification. */
  onNotification(listener: (method: string, params: Params) => void): void;
}

export interface ServerClientOptions {
  /** Arguments after `serve` (`--state`, `--config`, `--log-level` …). */
  serveArgs: string[];
  /** The server's working directory. */
  cwd: string;
  /** Where the server's stderr goes (default: inherited). */
  stderr?: "inherit" | "ignore";
  /**
   * What to add to the one line printed when the server is killed while connected (e.g. " — resume with: …"), read
   * at that moment. Default: nothing.
   */
  stoppedNote?: () => string;
}

/** Spawns the server, runs `body` connected to it, then closes stdin and waits for the server to exit. */
export async function withServer<T>(
  options: ServerClientOptions,
  body: (session: ServerSession) => Promise<T>,
): Promise<T> {
  // The package's CLI (src/package-files.ts), not a sibling of this module: the bundle moves this module.
  const layout = packageLayout();
  const cli = packageModulePath("cli", layout);
  const args = layout.fromSource ? ["--import", "tsx", cli] : [cli];
  const child = spawn(process.execPath, [...args, "serve", ...options.serveArgs], {
    cwd: options.cwd,
    stdio: ["pipe", "pipe", options.stderr ?? "inherit"],
    // Its own process group: a Ctrl-C in the terminal reaches the command (which pauses the product), not the server,
    // which ends when its stdin closes (issue 29).
    detached: true,
  });
  let spawnError: Error | undefined;
  const exited = new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
    // The server could not be started at all (e.g. its cwd vanished): reported below, never an unhandled 'error'.
    child.once("error", (error) => {
      spawnError = error;
      resolve(null);
    });
  });
  const waiters: { match: (method: string, p: Params) => boolean; resolve: (p: Params) => void }[] = [];
  const listeners: ((method: string, p: Params) => void)[] = [];
  const app = client({ name: "acp-orchestrator-cli" }).onNotification("*", ({ method, params }) => {
    const p = (params ?? {}) as Params;
    for (const l of listeners) l(method, p);
    for (const w of [...waiters]) {
      if (w.match(method, p)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(p);
      }
    }
  });
  const stream = ndJsonStream(
    Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
  );
  try {
    return await app.connectWith(stream, async (ctx) => {
      await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
      return body({
        request: <R>(method: string, params: Params) => ctx.request<R>(method, params),
        waitFor: (match) => new Promise((resolve) => waiters.push({ match, resolve })),
        onNotification: (listener) => listeners.push(listener),
      });
    });
  } catch (error) {
    // The connection closed because the server ended (a bad --config or --state: it printed its one sentence on
    // stderr and exited 2): end with the server's code instead of the SDK's "ACP connection closed" stack.
    child.stdin.end();
    const code = await exited;
    if (spawnError !== undefined) throw new Error(`could not start the server: ${spawnError.message}`);
    if (code !== null && code !== 0) throw new ReportedFailure(`the server exited with code ${code}`, code);
    if (child.signalCode !== null) {
      // Killed from outside (a kill, the OOM killer): one line for the person, never the SDK's stack (issue 28).
      const line = `the server stopped (killed by ${child.signalCode})${options.stoppedNote?.() ?? ""}`;
      process.stderr.write(`acp-orchestrator: ${line}\n`);
      throw new ReportedFailure(line, 1);
    }
    throw error;
  } finally {
    child.stdin.end();
    await exited;
  }
}
