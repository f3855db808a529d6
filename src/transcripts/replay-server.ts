/**
 * The server process of one replay (protocol/TRANSCRIPTS.md, "Replaying"): spawns it, frames its stdout into
 * messages (a line that is not JSON is kept apart for the hygiene check), keeps the tail of its stderr, records how it
 * exited, and wakes whoever waits for the next message or the exit.
 *
 * Owns the child process and its three pipes. Never interprets a message (replayer.ts and matcher.ts do), never
 * outlives its replay: `stop()` kills a server that has not exited.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { MessageTap } from "./stream-tap.js";

/** How much of the server's stderr is kept for the failure report, in characters. */
const STDERR_TAIL_CHARS = 16_384;

/** One message the server sent, in arrival order; `matched` once a `recv` line has taken it. */
export interface Received {
  readonly index: number;
  readonly message: unknown;
  matched: boolean;
}

/** How the server process ended (both null when it could not start). */
export interface ServerExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Where and how to start the server: `command[0]` is the executable. */
export interface ServerLaunch {
  readonly command: readonly string[];
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
}

/**
 * A spawned server under replay. Construct it to start the process; it never throws for a failed start (that is an
 * exit with `startError`). Call `stop()` before dropping it.
 */
export class ReplayServer {
  /** Every message received so far, in arrival order. */
  readonly received: Received[] = [];
  /** Every stdout line that was not JSON, in arrival order. */
  readonly notJson: string[] = [];
  /** Resolves once the process closed or could not start. */
  readonly exited: Promise<void>;
  #stderr = "";
  #exit: ServerExit | undefined;
  #startError: Error | undefined;
  #wake: (() => void) | null = null;
  readonly #child: ChildProcessWithoutNullStreams;

  constructor(launch: ServerLaunch) {
    const [file, ...args] = launch.command;
    this.#child = spawn(file ?? "", args, { cwd: launch.cwd, env: launch.env, stdio: ["pipe", "pipe", "pipe"] });
    this.exited = new Promise<void>((resolve) => {
      this.#child.once("error", (err) => {
        this.#startError = err;
        this.#exit ??= { code: null, signal: null };
        resolve();
        this.#poke();
      });
      this.#child.once("close", (code, signal) => {
        this.#exit = { code, signal };
        resolve();
        this.#poke();
      });
    });
    this.#child.stdin.on("error", () => undefined);
    this.#tapStdout();
    this.#child.stderr.setEncoding("utf8");
    this.#child.stderr.on("data", (d: string) => {
      this.#stderr = (this.#stderr + d).slice(-STDERR_TAIL_CHARS);
    });
  }

  /** The last characters the server wrote to stderr. */
  get stderrTail(): string {
    return this.#stderr;
  }

  /** True once the process closed or could not start. */
  get hasExited(): boolean {
    return this.#exit !== undefined;
  }

  /** True when the process exited with code 0 (false while it runs, or when it could not start). */
  get exitedCleanly(): boolean {
    return this.#startError === undefined && this.#exit?.code === 0;
  }

  /** How the server ended, in words: "the server exited (code 1)", "the server could not start (…)". */
  exitText(): string {
    if (this.#startError) return `the server could not start (${this.#startError.message})`;
    const exit = this.#exit;
    return `the server exited (${exit?.signal ? `signal ${exit.signal}` : `code ${String(exit?.code)}`})`;
  }

  /** Writes `text` to the server's stdin in one write; does nothing when it is empty or stdin is closed. */
  write(text: string): void {
    const stdin = this.#child.stdin;
    if (text !== "" && !stdin.destroyed && !stdin.writableEnded) stdin.write(text);
  }

  /** Resolves at the next message, non-JSON line or exit, or after `ms` milliseconds, whichever comes first. */
  async waitForChange(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** Closes stdin and waits for the exit; resolves true when the server had not exited within `timeoutMs`. */
  async closeInput(timeoutMs: number): Promise<boolean> {
    this.#child.stdin.end();
    return Promise.race([
      this.exited.then(() => false),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(true), timeoutMs).unref()),
    ]);
  }

  /** Kills a server that has not exited (SIGKILL) and waits until it has. Safe to call after it exited. */
  async stop(): Promise<void> {
    if (this.#exit !== undefined) return;
    this.#child.kill("SIGKILL");
    await this.exited;
  }

  #tapStdout(): void {
    const tap = new MessageTap((m) => {
      if (m.parseError !== undefined) this.notJson.push(m.text);
      else this.received.push({ index: this.received.length, message: m.value, matched: false });
      this.#poke();
    });
    this.#child.stdout.on("data", (chunk: Buffer) => tap.push(chunk));
    this.#child.stdout.on("end", () => tap.end());
  }

  #poke(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }
}
