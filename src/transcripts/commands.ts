/**
 * The `record` and `replay` subcommands of the CLI (protocol/TRANSCRIPTS.md): argument parsing, usage text and exit
 * codes. src/commands/record.ts and replay.ts dispatch `acp-orchestrator record …` and `acp-orchestrator replay …` here.
 *
 * Owns the command-line contract of the two subcommands only. It must never write to stdout while recording (stdout
 * then carries the agent's protocol stream) and never print anything but the report while replaying.
 */
import { resolve } from "node:path";
import { parseCommandArgs } from "../cli-kit/args.js";
import { record } from "./recorder.js";
import {
  DEFAULT_EXIT_TIMEOUT_MS,
  DEFAULT_LINE_TIMEOUT_MS,
  formatResult,
  replayFiles,
  summaryLine,
} from "./replayer.js";

export const RECORD_USAGE = `Usage: acp-orchestrator record --out FILE [--normalize] -- COMMAND [ARGS...]

Starts COMMAND (any ACP agent), passes stdin/stdout through unchanged (stderr too), and writes every message as a
transcript line to FILE. --normalize replaces ids, timestamps, durations, token counts and generated ids (prd_…,
ckp_…, ses_…, UUIDs) with captures and placeholders, and the workspace (the first absolute cwd sent) with
\${workspace}, so the file replays against a fresh server. Exits with COMMAND's exit code.
`;

export const REPLAY_USAGE = `Usage: acp-orchestrator replay FILE... [--timeout MS] [--jobs N] [--keep] [-- COMMAND [ARGS...]]

Replays each transcript against a fresh server (default: this server, \`node <cli> serve --state <fresh dir>\`; in a
custom COMMAND, {workspace} and {stateDir} are replaced by the run's fresh directories). Reports the first mismatch
of each transcript with the expected message and the closest received one, then prints "N passed, N failed".
Exits 1 when any transcript failed.

  --timeout MS  default wait per recv line (default ${DEFAULT_LINE_TIMEOUT_MS}; a line's own timeoutMs wins)
  --exit-timeout MS  how long the server may take to exit once stdin closes (default ${DEFAULT_EXIT_TIMEOUT_MS})
  --jobs N      transcripts replayed in parallel, each against its own server (default 1)
  --keep        keep each run's temporary workspace and state directory
`;

/** Splits argv at the first `--`: options before it, the command after it. */
function splitAtDashes(argv: readonly string[]): { before: string[]; after: string[] | undefined } {
  const i = argv.indexOf("--");
  return i < 0 ? { before: [...argv], after: undefined } : { before: argv.slice(0, i), after: argv.slice(i + 1) };
}

function fail(message: string, usage: string): number {
  process.stderr.write(`acp-orchestrator: ${message}\n\n${usage}`);
  return 2;
}

/**
 * `acp-orchestrator record --out FILE [--normalize] -- COMMAND...`: records one session through the proxy.
 * Returns the agent's exit code, or 2 for a usage error. Writes nothing to stdout but the agent's own bytes.
 */
export async function runRecordCommand(argv: readonly string[]): Promise<number> {
  const { before, after } = splitAtDashes(argv);
  let values: { out?: string; normalize?: boolean; help?: boolean };
  try {
    const parsed = parseCommandArgs("record", before, {
      out: { type: "string" },
      normalize: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    });
    if (parsed.positionals.length > 0)
      return fail(`unexpected argument "${parsed.positionals[0]}" (the agent command goes after --)`, RECORD_USAGE);
    ({ values } = parsed);
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err), RECORD_USAGE);
  }
  if (values.help) {
    process.stderr.write(RECORD_USAGE);
    return 0;
  }
  if (!values.out) return fail("record needs --out FILE", RECORD_USAGE);
  if (!after || after.length === 0) return fail("record needs the agent command after --", RECORD_USAGE);
  return record({
    out: resolve(values.out),
    normalize: values.normalize ?? false,
    command: after,
    forwardSignals: true,
  });
}

function positiveInt(text: string | undefined, name: string): number | undefined | string {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) return `${name} must be a positive integer, got "${text}"`;
  return n;
}

/**
 * `acp-orchestrator replay FILE... [-- COMMAND...]`: replays transcripts and prints one report per file, then the
 * summary line `N passed, N failed`. Returns 0 when all passed, 1 when any failed, 2 for a usage error.
 */
export async function runReplayCommand(argv: readonly string[]): Promise<number> {
  const { before, after } = splitAtDashes(argv);
  let parsed: {
    values: { timeout?: string; "exit-timeout"?: string; jobs?: string; keep?: boolean; help?: boolean };
    positionals: string[];
  };
  try {
    parsed = parseCommandArgs("replay", before, {
      timeout: { type: "string" },
      "exit-timeout": { type: "string" },
      jobs: { type: "string" },
      keep: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    });
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err), REPLAY_USAGE);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(REPLAY_USAGE);
    return 0;
  }
  if (positionals.length === 0) return fail("replay needs at least one transcript file", REPLAY_USAGE);
  if (after !== undefined && after.length === 0) return fail("nothing after --: give the server command", REPLAY_USAGE);
  const timeout = positiveInt(values.timeout, "--timeout");
  const exitTimeout = positiveInt(values["exit-timeout"], "--exit-timeout");
  const jobs = positiveInt(values.jobs, "--jobs");
  for (const v of [timeout, exitTimeout, jobs]) if (typeof v === "string") return fail(v, REPLAY_USAGE);
  const write = (text: string) => new Promise<void>((done) => process.stdout.write(text, () => done()));
  const { passed, failed } = await replayFiles(positionals, {
    ...(after ? { command: after } : {}),
    ...(typeof timeout === "number" ? { timeoutMs: timeout } : {}),
    ...(typeof exitTimeout === "number" ? { exitTimeoutMs: exitTimeout } : {}),
    ...(typeof jobs === "number" ? { jobs } : {}),
    keepTemp: values.keep ?? false,
    onResult: (r) => {
      void write(`${formatResult(r)}${values.keep && r.tempDir ? `\n  kept: ${r.tempDir}` : ""}\n`);
    },
  });
  await write(`${summaryLine(passed, failed)}\n`);
  return failed === 0 ? 0 : 1;
}
