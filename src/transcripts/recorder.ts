/**
 * The recorder behind `acp-orchestrator record --out FILE [--normalize] -- COMMAND...` (protocol/TRANSCRIPTS.md,
 * "Recording"): a transparent stdio proxy between an ACP client (our stdin/stdout) and any ACP agent command (the
 * child), which writes what passed as a transcript.
 *
 * Owns: spawning the child, passing bytes both ways unchanged (chunks are forwarded as they arrive, never re-framed;
 * the child's stderr is passed through), splitting a copy of each direction into messages, writing one transcript
 * line per message as it is seen (normalised when asked), and ending when the child ends. It must never alter,
 * delay beyond a pass-through, drop or inject a byte of the proxied streams, and never write to the proxied stdout.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { closeSync, openSync, writeSync } from "node:fs";
import type { Readable, Writable } from "node:stream";
import type { Json, TranscriptLine } from "./format.js";
import { Normalizer } from "./normalizer.js";
import { MessageTap, type TappedMessage } from "./stream-tap.js";

/** An absolute POSIX or Windows path at the start of an argument or after `=`: the lead, then the path's last part. */
const ABSOLUTE_PATH = /(^|=)(?:\/|[A-Za-z]:[\\/])(?:[^\s=]*[\\/])?([^\s\\/=]*)/g;

export interface RecordOptions {
  /** The transcript file to write (created or truncated). */
  out: string;
  /** Replace run-specific values with captures and placeholders (see normalizer.ts). */
  normalize: boolean;
  /** The agent command and its arguments. */
  command: readonly string[];
  /** What the client writes (default: `process.stdin`). */
  input?: Readable;
  /** Where the agent's stdout goes (default: `process.stdout`). */
  output?: Writable;
  /** Where the agent's stderr and the recorder's own diagnostics go (default: `process.stderr`). */
  errorOutput?: Writable;
  /** Working directory of the child (default: ours). */
  cwd?: string;
  /** Forward SIGINT/SIGTERM received by this process to the child (the CLI sets it). Default false. */
  forwardSignals?: boolean;
}

/**
 * Header title of a recorded transcript: the command, shortened, with every absolute path cut to `…/` and its last
 * part (`--state /tmp/x/rec.db` → `--state …/rec.db`), so a transcript records no path of the machine that recorded
 * it (issue 35). A path inside an argument (`--state=/tmp/rec.db`) is cut the same way.
 */
export function titleFor(command: readonly string[]): string {
  const text = command
    .map((arg) => arg.replace(ABSOLUTE_PATH, (_m, lead: string, last: string) => `${lead}…/${last}`))
    .join(" ");
  return `Recorded from: ${text.length > 200 ? `${text.slice(0, 199)}…` : text}`;
}

/**
 * Starts `command`, proxies `input` → child stdin and child stdout → `output` byte for byte (child stderr →
 * `errorOutput`), and writes the transcript to `out`: a `{"transcript": …}` header, then one line per message in the
 * order the proxy saw them. Input that is not JSON is recorded as a `raw` send line; agent output that is not JSON as
 * a comment. When `input` ends, the child's stdin is closed; when the child exits, the transcript is closed and the
 * promise resolves with the child's exit code (128 + signal number when killed, 127 when it could not start).
 * Resolves only after everything the child wrote was handed to `output`. Does NOT exit the process.
 */
export async function record(options: RecordOptions): Promise<number> {
  const input = options.input ?? process.stdin;
  const output = options.output ?? process.stdout;
  const errorOutput = options.errorOutput ?? process.stderr;
  const [file, ...args] = options.command;
  if (file === undefined) throw new Error("record needs a command to run after --");
  const fd = openSync(options.out, "w");
  const normalizer = options.normalize ? new Normalizer() : undefined;
  const writeLine = (line: TranscriptLine) => writeSync(fd, `${JSON.stringify(line)}\n`);
  writeLine({ transcript: { version: 1, title: titleFor(options.command) } });

  const sendTap = new MessageTap((m) => writeLine(lineFor("send", m, normalizer)));
  const recvTap = new MessageTap((m) => writeLine(lineFor("recv", m, normalizer)));

  const child = spawn(file, args, {
    cwd: options.cwd ?? process.cwd(),
    stdio: ["pipe", "pipe", "pipe"],
    env: process.env,
  });

  const onSignal = (signal: NodeJS.Signals) => () => {
    child.kill(signal);
  };
  const sigint = onSignal("SIGINT");
  const sigterm = onSignal("SIGTERM");
  if (options.forwardSignals) {
    process.on("SIGINT", sigint);
    process.on("SIGTERM", sigterm);
  }

  const onInput = (chunk: Buffer | string) => {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    sendTap.push(bytes);
    if (!child.stdin.destroyed && !child.stdin.writableEnded) {
      if (!child.stdin.write(bytes)) {
        input.pause();
        child.stdin.once("drain", () => input.resume());
      }
    }
  };
  const onInputEnd = () => {
    sendTap.end();
    if (!child.stdin.destroyed && !child.stdin.writableEnded) child.stdin.end();
  };
  // A child that exits while we still write to it: the write fails with EPIPE; the exit is what counts.
  child.stdin.on("error", () => undefined);
  // Likewise a client that goes away while the agent still writes to it (EPIPE on our stdout): the transcript is
  // already recorded and the agent's exit code is what the recorder reports.
  output.on("error", () => undefined);
  input.on("data", onInput);
  input.on("end", onInputEnd);

  pipeChildOutput(child, recvTap, output, errorOutput);

  const code = await new Promise<number>((resolve) => {
    child.once("error", (err) => {
      errorOutput.write(`acp-orchestrator record: cannot start ${file}: ${err.message}\n`);
      resolve(127);
    });
    child.once("close", (exitCode, signal) => {
      resolve(exitCode ?? (signal ? 128 + signalNumber(signal) : 1));
    });
  });
  input.off("data", onInput);
  input.off("end", onInputEnd);
  input.pause();
  if (options.forwardSignals) {
    process.off("SIGINT", sigint);
    process.off("SIGTERM", sigterm);
  }
  recvTap.end();
  closeSync(fd);
  // Everything the child wrote must reach our stdout before the caller may exit.
  await new Promise<void>((resolve) => output.write("", () => resolve()));
  return code;
}

/** The transcript line of one message the proxy saw (`send`: client → agent, `recv`: agent → client). */
function lineFor(dir: "send" | "recv", m: TappedMessage, normalizer: Normalizer | undefined): TranscriptLine {
  if (m.parseError !== undefined) {
    return dir === "send" ? { dir: "send", raw: m.text } : { comment: `agent wrote a non-JSON line: ${m.text}` };
  }
  if (normalizer) return normalizer.line(dir, m.value);
  if (dir === "send") {
    const msg = m.value as Record<string, Json> | Json[];
    return typeof msg === "object" && msg !== null ? { dir: "send", msg } : { dir: "send", raw: m.text };
  }
  return typeof m.value === "object" && m.value !== null && !Array.isArray(m.value)
    ? { dir: "recv", msg: m.value as Record<string, Json> }
    : { comment: `agent wrote a JSON value that is not an object: ${m.text}` };
}

/** Child stdout → `recvTap` and `output` (with back-pressure), child stderr → `errorOutput`. */
function pipeChildOutput(
  child: ChildProcessWithoutNullStreams,
  recvTap: MessageTap,
  output: Writable,
  errorOutput: Writable,
): void {
  child.stdout.on("data", (chunk: Buffer) => {
    recvTap.push(chunk);
    if (!output.write(chunk)) {
      child.stdout.pause();
      output.once("drain", () => child.stdout.resume());
    }
  });
  child.stderr.on("data", (chunk: Buffer) => {
    errorOutput.write(chunk);
  });
}

function signalNumber(signal: NodeJS.Signals): number {
  const table: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15, SIGPIPE: 13 };
  return table[signal] ?? 1;
}
