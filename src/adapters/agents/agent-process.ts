/**
 * Agent processes (workers and leaders) tied to the server's life (DESIGN.md "Processes", guarantee 12).
 *
 * Owns: spawning an agent through the watchdog (watchdog.ts) in its own session and process group, the control
 * socket to that watchdog, and ending the agent: `stop()` closes its stdin and signals its group at once (SIGTERM,
 * then SIGKILL after a grace), `kill()` SIGKILLs it. Whatever the agent started dies with it: the watchdog kills the
 * agent's group and every process carrying its tag when the agent exits, and when the server goes away however it
 * dies (kill -9 included: the kernel closes the control socket). Nothing here relies on an agent exiting when its
 * stdin closes (real agents do not). Never writes to stdout; never signals a process it did not start.
 */
import type { ChildProcess } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { WATCHDOG_SCRIPT } from "./watchdog.js";
import { nodeChildProcess } from "../system/node-builtins.js";

/** How an agent process ended: its own exit code, or the signal that ended it. */
export interface AgentExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Why an agent could not be started at all: the `spawn` error code (`ENOENT`, `EACCES`, …) and message. */
export interface SpawnFailure {
  code: string;
  message: string;
}

/** How to start one agent: the registry's launch spec plus the working directory. */
export interface AgentLaunch {
  command: string;
  args: string[];
  cwd: string;
  /** Added to (and overriding) the server's environment. */
  env?: Record<string, string>;
}

const live = new Set<AgentProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // On a normal exit the control sockets close and the watchdogs clean up; SIGKILLing the agents' groups right away
  // as well makes that immediate. (A kill -9 of the server cannot run this: then the watchdogs alone do it.)
  process.on("exit", () => {
    for (const agent of live) agent.signal("SIGKILL");
  });
}

/** Resolves after `ms` milliseconds without keeping the process alive. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });
}

/**
 * One agent process behind its watchdog. `stdin`/`stdout`/`stderr` are the agent's own (the watchdog only inherits
 * them). Construct with `AgentProcess.spawn`; it never throws for a command that does not exist (that is
 * `spawnFailed`), only when the watchdog itself cannot be started.
 */
export class AgentProcess {
  /** Resolves with the agent's exit once the watchdog has exited (the agent and all it started are gone then). */
  readonly exited: Promise<AgentExit>;
  /** Resolves when the agent could not be started (missing command, not executable, bad cwd); else never. */
  readonly spawnFailed: Promise<SpawnFailure>;
  /** Resolves when the watchdog's stdio has closed (the stderr tail is complete). */
  readonly closed: Promise<void>;
  private agentPid: number | undefined;
  private exit: AgentExit | undefined;
  private reportedExit: AgentExit | undefined;
  private failure: SpawnFailure | undefined;
  private resolveSpawnFailed: (failure: SpawnFailure) => void = () => undefined;

  private constructor(private readonly child: ChildProcess) {
    this.spawnFailed = new Promise((resolve) => {
      this.resolveSpawnFailed = resolve;
    });
    const control = child.stdio[3] as Readable | null | undefined;
    let buffered = "";
    control?.setEncoding("utf8");
    control?.on("data", (chunk: string) => {
      buffered += chunk;
      let newline = buffered.indexOf("\n");
      while (newline >= 0) {
        this.onControl(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
        newline = buffered.indexOf("\n");
      }
    });
    control?.on("error", () => undefined);
    // An agent that exits early closes its stdin: a pending write then fails with EPIPE on this stream. That is the
    // end of this agent (its exit is reported as usual), never an uncaught error of the server (issue 26).
    child.stdin?.on("error", () => undefined);
    const controlClosed = new Promise<void>((resolve) => {
      if (control === null || control === undefined) resolve();
      else control.once("close", () => resolve());
    });
    this.closed = new Promise((resolve) => child.once("close", () => resolve()));
    this.exited = new Promise<AgentExit>((resolve) => {
      child.once("exit", (code, signal) => {
        live.delete(this);
        // The watchdog reports the agent's status on the control socket just before it exits: read it to the end.
        void Promise.race([controlClosed, delay(1_000)]).then(() => {
          this.exit = this.reportedExit ?? { code, signal };
          resolve(this.exit);
        });
      });
    });
    child.once("error", (error: NodeJS.ErrnoException) => {
      if (child.pid !== undefined) return;
      live.delete(this);
      this.fail({ code: error.code ?? "EINVAL", message: error.message });
    });
  }

  /**
   * Starts `launch.command` with `launch.args` through the watchdog, in its own session and process group, with
   * piped stdio. Throws only when the watchdog (this node binary) cannot be started.
   */
  static spawn(launch: AgentLaunch): AgentProcess {
    const child = nodeChildProcess().spawn(
      process.execPath,
      ["-e", WATCHDOG_SCRIPT, "--", launch.command, ...launch.args],
      {
        cwd: launch.cwd,
        env: { ...process.env, ...launch.env },
        stdio: ["pipe", "pipe", "pipe", "pipe"],
        detached: true, // the watchdog's own session: signals aimed at the server's group do not cut it short
        windowsHide: true,
      },
    );
    const agent = new AgentProcess(child);
    live.add(agent);
    installExitHook();
    return agent;
  }

  get stdin(): Writable {
    return this.child.stdin as Writable;
  }

  get stdout(): Readable {
    return this.child.stdout as Readable;
  }

  get stderr(): Readable {
    return this.child.stderr as Readable;
  }

  /** The agent's pid (= its process group id) once it runs, else the watchdog's, for logs. */
  get pid(): number | undefined {
    return this.agentPid ?? this.child.pid;
  }

  /** True once the watchdog has exited (the agent and everything it started are gone). */
  get gone(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null || this.failure !== undefined;
  }

  /** The spawn failure, once known. */
  get spawnFailure(): SpawnFailure | undefined {
    return this.failure;
  }

  /**
   * Sends `signal` to the agent's whole process group; before the agent runs, to the watchdog (which then kills
   * everything). Does not wait; never throws.
   */
  signal(signal: NodeJS.Signals): void {
    if (this.gone) return;
    if (this.agentPid !== undefined && process.platform !== "win32") {
      try {
        process.kill(-this.agentPid, signal);
        return;
      } catch {
        // the group is gone already: the watchdog is about to exit
      }
    }
    try {
      this.child.kill(signal === "SIGKILL" ? "SIGTERM" : signal); // the watchdog must live to clean up
    } catch {
      // already gone
    }
  }

  /**
   * Ends the agent at once: closes its stdin, SIGTERMs its group, and SIGKILLs it if it is still there after
   * `graceMs`. Resolves once the watchdog has exited. Use it when the agent's turn has ended (no grace is owed then)
   * and after a cancelled turn has settled. Idempotent.
   */
  async stop(graceMs: number): Promise<AgentExit> {
    this.closeStdin();
    if (!this.gone) {
      this.signal("SIGTERM");
      if (!(await Promise.race([this.exited.then(() => true), delay(graceMs).then(() => false)]))) {
        this.signal("SIGKILL");
      }
    }
    return this.settled();
  }

  /** SIGKILLs the agent's group (the watchdog then kills the rest and exits). Resolves once the watchdog exited. */
  async kill(): Promise<AgentExit> {
    this.closeStdin();
    this.signal("SIGKILL");
    return this.settled();
  }

  private closeStdin(): void {
    try {
      this.child.stdin?.end();
    } catch {
      // already closed
    }
  }

  private async settled(): Promise<AgentExit> {
    if (this.failure !== undefined) return { code: null, signal: null };
    return this.exited;
  }

  private fail(failure: SpawnFailure): void {
    if (this.failure !== undefined) return;
    this.failure = failure;
    this.resolveSpawnFailed(failure);
  }

  private onControl(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (typeof message !== "object" || message === null) return;
    const m = message as Record<string, unknown>;
    if (typeof m["pid"] === "number") this.agentPid = m["pid"];
    const failure = m["spawnError"];
    if (typeof failure === "object" && failure !== null) {
      const f = failure as Record<string, unknown>;
      this.fail({ code: String(f["code"] ?? "EINVAL"), message: String(f["message"] ?? "could not start") });
    }
    const exit = m["exit"];
    if (typeof exit === "object" && exit !== null) {
      const e = exit as Record<string, unknown>;
      this.reportedExit = {
        code: typeof e["code"] === "number" ? e["code"] : null,
        signal: typeof e["signal"] === "string" ? (e["signal"] as NodeJS.Signals) : null,
      };
    }
  }
}
