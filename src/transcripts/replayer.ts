/**
 * The replayer behind `acp-orchestrator replay FILE... [-- COMMAND...]` (protocol/TRANSCRIPTS.md, "Replaying"): runs
 * each transcript against a fresh server process and reports the first mismatch.
 *
 * Owns: one fresh temporary workspace and state directory per transcript, the server process (through
 * replay-server.ts, which owns its stdio), writing `send` lines (consecutive ones in a single write), waiting for each
 * `recv` line's first fitting not-yet-matched message within its timeout, the stdout hygiene check (every line must
 * be JSON), the clean-exit check after stdin closes, and the human report. It must never modify a transcript file,
 * never share a server or a state directory between transcripts, and never leave a server running after a
 * transcript finished.
 */
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packagePath } from "../package-files.js";
import { parseTranscript, TranscriptFormatError, type Json, type NumberedLine, type Transcript } from "./format.js";
import { closestMessage, matchMessage, resolveSend, show, UnboundNameError, type ClosestMessage } from "./matcher.js";
import { ReplayServer, type ServerLaunch } from "./replay-server.js";

/** Default wait for one `recv` line, in milliseconds. */
export const DEFAULT_LINE_TIMEOUT_MS = 10_000;
/** Default wait for the server to exit after its stdin closed, in milliseconds. */
export const DEFAULT_EXIT_TIMEOUT_MS = 5_000;

export interface ReplayOptions {
  /**
   * The server command. `{workspace}` and `{stateDir}` in any argument are replaced by the transcript's fresh
   * directories (also given as `$ACP_TRANSCRIPT_WORKSPACE` and `$ACP_TRANSCRIPT_STATE_DIR`). Default:
   * `defaultServerCommand()`, run with the state directory as its working directory.
   */
  command?: readonly string[];
  /** Working directory of a custom `command` (default: ours). */
  cwd?: string;
  /** Default wait per `recv` line in milliseconds (a line's own `timeoutMs` wins). */
  timeoutMs?: number;
  /** How long the server may take to exit after stdin closed, in milliseconds. */
  exitTimeoutMs?: number;
  /** Keep the temporary directories (their path is in the result). */
  keepTemp?: boolean;
}

/** Why a transcript failed: the line (when one is to blame), what was wrong, and the nearest thing received. */
export interface ReplayFailure {
  /** 1-based line number in the transcript, when a line is to blame. */
  readonly line?: number;
  readonly reason: string;
  /** The `recv` pattern that found no fitting message. */
  readonly expected?: Json;
  /** The not-yet-matched received message closest to `expected` (any received one when all were matched). */
  readonly closest?: ClosestMessage;
}

export interface ReplayResult {
  readonly source: string;
  readonly title: string | undefined;
  readonly ok: boolean;
  readonly failure?: ReplayFailure;
  readonly durationMs: number;
  /** Messages the server sent. */
  readonly received: number;
  /** Lines of the transcript that were sent or matched. */
  readonly linesDone: number;
  /** The last lines the server wrote to stderr (for failure reports). */
  readonly stderrTail: string;
  /** The temporary directory of this run (already deleted unless `keepTemp`). */
  readonly tempDir: string;
}

/**
 * The package's built CLI, `dist/src/cli.js` (src/package-files.ts), also when running from sources (the repository's
 * dist build): a replay runs the server as hosts run it.
 */
function cliPath(): string {
  return packagePath("dist/src/cli.js");
}

/**
 * The default server of a replay: this package's CLI, `node <cli> serve --state {stateDir}/state.db`. The replayer
 * runs it with the state directory as working directory, so no `acp-orchestrator.json` of the caller is picked up.
 */
export function defaultServerCommand(): string[] {
  return [process.execPath, cliPath(), "serve", "--state", "{stateDir}/state.db"];
}

/**
 * Creates the fresh directories of one run: `<tmp>/acp-transcript-XXXXXX/{workspace,state}` (real paths). The
 * recorder's corpus driver uses the same layout so that path-dependent text has the same length on replay.
 */
export function makeRunDirectories(): { root: string; workspace: string; stateDir: string } {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "acp-transcript-")));
  const workspace = join(root, "workspace");
  const stateDir = join(root, "state");
  mkdirSync(workspace);
  mkdirSync(stateDir);
  return { root, workspace, stateDir };
}

/** The matching state a replay carries from line to line: the names bound so far and the last `ordered` match. */
interface ReplayCursor {
  bindings: Map<string, Json>;
  /** Index of the message the last `ordered` recv line matched (-1 before any). */
  lastOrdered: number;
  /** Lines sent or matched. */
  linesDone: number;
}

/**
 * Replays one parsed transcript against a fresh server and resolves with the outcome; never rejects for a mismatch
 * (only for a bug). Sends each `send` line (a run of consecutive ones in one write), waits for each `recv` line's
 * first not-yet-matched fitting message, fails on the first line that cannot be satisfied, on a stdout line that is
 * not JSON, or if the server does not exit with code 0 within `exitTimeoutMs` once stdin is closed after the last
 * line. The server is killed on failure; the temporary directory is removed unless `keepTemp`.
 */
export async function replayTranscript(transcript: Transcript, options: ReplayOptions = {}): Promise<ReplayResult> {
  const started = Date.now();
  const dirs = makeRunDirectories();
  const server = new ReplayServer(serverLaunch(options, dirs));
  const cursor: ReplayCursor = { bindings: new Map([["workspace", dirs.workspace]]), lastOrdered: -1, linesDone: 0 };
  let failure = await playLines(transcript, server, cursor, options.timeoutMs ?? DEFAULT_LINE_TIMEOUT_MS);
  failure ??= await checkExit(server, options.exitTimeoutMs ?? DEFAULT_EXIT_TIMEOUT_MS);
  await server.stop();
  if (!options.keepTemp) rmSync(dirs.root, { recursive: true, force: true });
  return {
    source: transcript.source,
    title: transcript.title,
    ok: failure === undefined,
    ...(failure ? { failure } : {}),
    durationMs: Date.now() - started,
    received: server.received.length,
    linesDone: cursor.linesDone,
    stderrTail: server.stderrTail,
    tempDir: dirs.root,
  };
}

/**
 * The server command of one run with `{workspace}` and `{stateDir}` replaced, its working directory (the state
 * directory for the default server, so no `acp-orchestrator.json` of the caller is picked up) and its environment.
 */
function serverLaunch(options: ReplayOptions, dirs: { workspace: string; stateDir: string }): ServerLaunch {
  const custom = options.command !== undefined;
  const command = (options.command ?? defaultServerCommand()).map((a) =>
    a.replaceAll("{workspace}", dirs.workspace).replaceAll("{stateDir}", dirs.stateDir),
  );
  return {
    command,
    cwd: custom ? (options.cwd ?? process.cwd()) : dirs.stateDir,
    env: { ...process.env, ACP_TRANSCRIPT_WORKSPACE: dirs.workspace, ACP_TRANSCRIPT_STATE_DIR: dirs.stateDir },
  };
}

/**
 * Plays the transcript's lines in order until one fails: `send` and `raw` lines are collected and written in one
 * write just before the next `recv` line (or at the end), each `recv` line waits for its message. Resolves with the
 * first failure, or undefined when every line was satisfied. Rethrows anything but an unbound name in a `send` line.
 */
async function playLines(
  transcript: Transcript,
  server: ReplayServer,
  cursor: ReplayCursor,
  lineTimeout: number,
): Promise<ReplayFailure | undefined> {
  let pending = "";
  for (const line of transcript.lines) {
    if (line.kind === "header" || line.kind === "comment") continue;
    if (line.kind === "raw") {
      pending += `${line.value.raw}\n`;
    } else if (line.kind === "send") {
      try {
        pending += `${JSON.stringify(resolveSend(line.value.msg as Json, cursor.bindings))}\n`;
      } catch (err) {
        if (!(err instanceof UnboundNameError)) throw err;
        server.write(pending);
        return { line: line.line, reason: err.message };
      }
    } else {
      server.write(pending);
      pending = "";
      const failure = await awaitRecvLine(server, line, cursor, lineTimeout);
      if (failure !== undefined) return failure;
    }
    cursor.linesDone++;
  }
  server.write(pending);
  return undefined;
}

/**
 * Waits for the first not-yet-matched received message that fits a `recv` line (for an `ordered` line: one after
 * the last ordered match) and marks it matched, updating the cursor. Resolves with a failure when the server wrote a
 * non-JSON stdout line, exited, or the line's timeout (its own `timeoutMs`, else `lineTimeout`) passed first.
 */
async function awaitRecvLine(
  server: ReplayServer,
  line: NumberedLine & { kind: "recv" },
  cursor: ReplayCursor,
  lineTimeout: number,
): Promise<ReplayFailure | undefined> {
  const pattern = line.value.msg as Json;
  const timeout = line.value.timeoutMs ?? lineTimeout;
  const deadline = Date.now() + timeout;
  const floor = line.value.ordered ? cursor.lastOrdered : -1;
  const received = server.received;
  let scanned = 0;
  for (;;) {
    // Only messages that arrived since the last scan can newly fit (bindings do not change while waiting).
    for (; scanned < received.length; scanned++) {
      const r = received[scanned]!;
      if (r.matched || r.index <= floor) continue;
      const outcome = matchMessage(pattern, r.message, cursor.bindings);
      if (outcome.ok) {
        r.matched = true;
        cursor.bindings = outcome.bindings;
        if (line.value.ordered) cursor.lastOrdered = r.index;
        return undefined;
      }
    }
    if (server.notJson.length > 0) return { line: line.line, reason: notJsonReason(server) };
    const remaining = deadline - Date.now();
    if (server.hasExited || remaining <= 0) {
      const unmatched = received.filter((r) => !r.matched);
      const closest = closestMessage(pattern, unmatched.length > 0 ? unmatched : received, cursor.bindings);
      const why = server.hasExited
        ? `${server.exitText()} before a message fitting this recv line arrived`
        : `no received message fits this recv line (waited ${timeout} ms${line.value.ordered ? `, only after message #${floor}` : ""})`;
      return { line: line.line, reason: why, expected: pattern, ...(closest ? { closest } : {}) };
    }
    await server.waitForChange(remaining);
  }
}

/**
 * After the last line: closes the server's stdin and checks that it exits with code 0 within `exitTimeout`
 * milliseconds and wrote nothing but JSON on stdout. Resolves with the failure, or undefined when all held.
 */
async function checkExit(server: ReplayServer, exitTimeout: number): Promise<ReplayFailure | undefined> {
  const timedOut = await server.closeInput(exitTimeout);
  if (server.notJson.length > 0) return { reason: notJsonReason(server) };
  if (timedOut) return { reason: `the server did not exit within ${exitTimeout} ms after its stdin closed` };
  if (!server.exitedCleanly) return { reason: `${server.exitText()} after the transcript; expected exit code 0` };
  return undefined;
}

/** The reason given for the first stdout line that was not JSON. */
function notJsonReason(server: ReplayServer): string {
  return `the server wrote a stdout line that is not JSON: ${show(server.notJson[0], 200)}`;
}

/** Reads and validates a transcript file; format problems become a failed result instead of a throw. */
export function loadTranscript(file: string): Transcript | ReplayResult {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    return formatFailure(file, `cannot read the file: ${err instanceof Error ? err.message : String(err)}`);
  }
  try {
    return parseTranscript(text, file);
  } catch (err) {
    if (err instanceof TranscriptFormatError)
      return formatFailure(file, `invalid transcript:\n${err.problems.join("\n")}`);
    throw err;
  }
}

function formatFailure(source: string, reason: string): ReplayResult {
  return {
    source,
    title: undefined,
    ok: false,
    failure: { reason },
    durationMs: 0,
    received: 0,
    linesDone: 0,
    stderrTail: "",
    tempDir: "",
  };
}

export interface ReplayFilesOptions extends ReplayOptions {
  /** Transcripts replayed at once (each against its own server). Default 1. */
  jobs?: number;
  /** Called as each transcript finishes (in completion order). */
  onResult?: (result: ReplayResult) => void;
}

/** Replays files (each against a fresh server); results come back in the order of `files`. */
export async function replayFiles(
  files: readonly string[],
  options: ReplayFilesOptions = {},
): Promise<{ results: ReplayResult[]; passed: number; failed: number }> {
  const results: ReplayResult[] = new Array<ReplayResult>(files.length);
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const i = next++;
      const loaded = loadTranscript(files[i]!);
      const result = "lines" in loaded ? await replayTranscript(loaded, options) : loaded;
      results[i] = result;
      options.onResult?.(result);
    }
  };
  const jobs = Math.max(1, Math.min(options.jobs ?? 1, files.length));
  await Promise.all(Array.from({ length: jobs }, worker));
  const passed = results.filter((r) => r.ok).length;
  return { results, passed, failed: results.length - passed };
}

/** The summary line, exactly `N passed, N failed`. */
export function summaryLine(passed: number, failed: number): string {
  return `${passed} passed, ${failed} failed`;
}

function indent(text: string, prefix: string): string {
  return text
    .split("\n")
    .map((l) => `${prefix}${l}`)
    .join("\n");
}

/**
 * A human report of one result: `PASS file (…)` on one line, or `FAIL file` followed by the line, the reason, the
 * expected pattern, the closest received message with the keys that differed, and the tail of the server's stderr.
 */
export function formatResult(result: ReplayResult): string {
  const seconds = (result.durationMs / 1000).toFixed(1);
  const head = `${result.ok ? "PASS" : "FAIL"} ${result.source}${result.title ? ` — ${result.title}` : ""} (${result.linesDone} lines, ${result.received} messages received, ${seconds} s)`;
  if (result.ok || !result.failure) return head;
  const f = result.failure;
  const out = [head, `  ${f.line !== undefined ? `line ${f.line}: ` : ""}${f.reason}`];
  if (f.expected !== undefined) out.push(`  expected: ${show(f.expected, 1_000)}`);
  if (f.closest) {
    out.push(`  closest received (message #${f.closest.index}): ${show(f.closest.message, 1_000)}`);
    out.push("  differs at:");
    for (const d of f.closest.differences.slice(0, 12)) {
      out.push(`    ${d.path}: expected ${d.expected}, got ${d.actual}`);
    }
    if (f.closest.differences.length > 12) out.push(`    … and ${f.closest.differences.length - 12} more`);
  } else if (f.expected !== undefined) {
    out.push("  closest received: nothing was received");
  }
  const tail = result.stderrTail.trimEnd().split("\n").slice(-8).join("\n");
  if (tail !== "") out.push("  server stderr (last lines):", indent(tail, "    "));
  return out.join("\n");
}
