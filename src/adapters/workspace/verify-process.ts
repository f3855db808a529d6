/**
 * One verification command as a process (DESIGN.md guarantee 17 and "Processes", guarantee 12): `/bin/sh -c RUN` in
 * the verify worktree, started through the agent watchdog (agents/agent-process.ts) in its own process group, so the
 * command and everything it starts die with it — at its timeout, on abort, and when the server dies however (kill -9
 * included). Its stdin is closed at once; stdout and stderr are read into one bounded buffer that keeps the first
 * `OUTPUT_HEAD_CHARS` and the last `OUTPUT_TAIL_CHARS` characters.
 *
 * Owns the process of one run only; decides nothing about what a result means. Never writes to stdout.
 */
import { AgentProcess } from "../agents/agent-process.js";
import { OUTPUT_HEAD_CHARS, OUTPUT_TAIL_CHARS } from "../../../protocol/verify.js";

/** What one command run gave. `aborted` runs must not be recorded (their outcome says nothing). */
export interface CommandOutcome {
  ok: boolean;
  exitCode: number | null;
  timedOut: boolean;
  aborted: boolean;
  /** The shell could not be started at all (ENOENT, EAGAIN, a missing cwd...): the outcome says nothing of the code. */
  startFailed: boolean;
  durationMs: number;
  outputTail: string;
}

/** Keeps the head and the tail of a stream of text, counting what was cut from the middle. */
export class BoundedOutput {
  private head = "";
  private tail = "";
  private cut = 0;

  constructor(
    private readonly headChars = OUTPUT_HEAD_CHARS,
    private readonly tailChars = OUTPUT_TAIL_CHARS,
  ) {}

  push(text: string): void {
    if (this.head.length < this.headChars) {
      const room = this.headChars - this.head.length;
      this.head += text.slice(0, room);
      text = text.slice(room);
      if (text === "") return;
    }
    this.tail += text;
    if (this.tail.length > this.tailChars * 2) this.trim();
  }

  private trim(): void {
    const over = this.tail.length - this.tailChars;
    if (over <= 0) return;
    this.cut += over;
    this.tail = this.tail.slice(over);
  }

  /** The kept text: the head, a marker naming how many characters were cut (when any), the tail. */
  text(): string {
    this.trim();
    return this.cut > 0 ? `${this.head}\n[… ${this.cut} characters cut …]\n${this.tail}` : this.head + this.tail;
  }
}

/** The outcome of a command that did not run to an exit: aborted before it started, or not startable. */
function notRun(
  o: Pick<CommandOutcome, "exitCode" | "durationMs" | "outputTail"> & { aborted?: boolean; startFailed?: boolean },
): CommandOutcome {
  return { ok: false, timedOut: false, aborted: false, startFailed: false, ...o };
}

/**
 * Runs `run` with `/bin/sh -c` in `cwd`. Resolves when the command (and its whole group) is gone: `ok` for exit 0,
 * `timedOut` when `timeoutMs` passed first (the group was killed), `aborted` when `signal` aborted first. A shell that
 * cannot be started is a failed run with `startFailed` and the reason as output. Never rejects.
 */
export async function runCheckCommand(options: {
  run: string;
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  signal: AbortSignal;
  now?: () => number;
}): Promise<CommandOutcome> {
  const now = options.now ?? Date.now;
  const started = now();
  const output = new BoundedOutput();
  if (options.signal.aborted) return notRun({ aborted: true, exitCode: null, durationMs: 0, outputTail: "" });
  let proc: AgentProcess;
  try {
    proc = AgentProcess.spawn({ command: "/bin/sh", args: ["-c", options.run], cwd: options.cwd, env: options.env });
  } catch (err) {
    const text = `The check could not be started: ${err instanceof Error ? err.message : String(err)}`;
    return notRun({ startFailed: true, exitCode: null, durationMs: now() - started, outputTail: text });
  }
  proc.stdin.on("error", () => undefined);
  proc.stdin.end();
  for (const stream of [proc.stdout, proc.stderr]) {
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => output.push(chunk));
    stream.on("error", () => undefined);
  }
  let timedOut = false;
  let aborted = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void proc.kill();
  }, options.timeoutMs);
  const onAbort = (): void => {
    aborted = true;
    void proc.kill();
  };
  options.signal.addEventListener("abort", onAbort, { once: true });
  const failure = proc.spawnFailed.then((f) => ({ failure: f }));
  const result = await Promise.race([proc.exited.then((exit) => ({ exit })), failure]);
  clearTimeout(timer);
  options.signal.removeEventListener("abort", onAbort);
  await Promise.race([proc.closed, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
  const durationMs = now() - started;
  if ("failure" in result) {
    output.push(`The check could not be started: ${result.failure.message}`);
    return notRun({ aborted, startFailed: true, exitCode: 127, durationMs, outputTail: output.text() });
  }
  const exitCode = result.exit.signal !== null ? null : result.exit.code;
  if (timedOut) output.push(`\n[the check was killed after its timeout of ${options.timeoutMs} ms]\n`);
  return {
    ok: !timedOut && !aborted && exitCode === 0,
    exitCode: exitCode === null ? null : Math.max(-1, Math.min(255, exitCode)),
    timedOut,
    aborted,
    startFailed: false,
    durationMs,
    outputTail: output.text(),
  };
}
