/**
 * The command dispatcher: `acp-orchestrator COMMAND [ARGS...]` runs one command of src/commands/ (the list is
 * src/commands/index.ts); with no command, or options first, it serves JSON-RPC on stdin/stdout (`serve`).
 * `--help`/`-h` and `--version`/`-v` work as the first argument and `--help` after any command. The executable
 * (src/cli.ts) runs this module from the bundle `npm run build` makes of it (issue 16, cold start), or unbundled.
 *
 * Owns dispatch and exit codes only: 0 success, 1 a failure the command reports (or a bug, with its stack on
 * stderr), 2 a mistake of the user (one plain sentence on stderr). stdout belongs to the command; for `serve` it
 * carries protocol frames only.
 */
import { ReportedFailure, UsageError } from "./cli-kit/errors.js";
import type { Command } from "./commands/command.js";
import { AuthorityFailure } from "./core/ports.js";

/**
 * The command named `name`. `serve` (what an IDE spawns, on every start) is imported alone: the other commands'
 * modules (the operator views, check-host, the transcript recorder, the ACP SDK client of `run`) load only when one of
 * them is asked for (issue 16: cold start).
 */
async function find(name: string): Promise<Command | undefined> {
  if (name === "serve") return (await import("./commands/serve.js")).serveCommand;
  const { COMMANDS } = await import("./commands/index.js");
  return COMMANDS.find((c) => c.name === name);
}

/** True when `--help` or `-h` appears before any `--` (after `--` the arguments belong to another program). */
function asksForHelp(argv: readonly string[]): boolean {
  for (const arg of argv) {
    if (arg === "--") return false;
    if (arg === "--help" || arg === "-h") return true;
  }
  return false;
}

async function main(argv: readonly string[]): Promise<number> {
  const first = argv[0];
  if (first === "--help" || first === "-h") return (await find("help"))!.run(argv.slice(1));
  if (first === "--version" || first === "-v") return (await find("version"))!.run(argv.slice(1));
  const named = first !== undefined && !first.startsWith("-");
  const command = await find(named ? first : "serve");
  if (command === undefined) {
    throw new UsageError(`There is no command "${first ?? ""}".`);
  }
  const args = named ? argv.slice(1) : argv;
  if (asksForHelp(args)) {
    process.stdout.write(command.help);
    return 0;
  }
  return command.run(args);
}

/** Prints a user's mistake (exit 2) or a bug (exit 1) as the one line or stack it deserves. */
function report(err: unknown): number {
  if (err instanceof UsageError) {
    const pointer = err.command !== undefined ? `acp-orchestrator help ${err.command}` : "acp-orchestrator help";
    process.stderr.write(`acp-orchestrator: ${err.message} See "${pointer}".\n`);
    return 2;
  }
  if (err instanceof ReportedFailure) return err.exitCode; // its message is already on stderr
  if (err instanceof AuthorityFailure) {
    // A state file that cannot be opened is the user's to fix: one plain sentence.
    process.stderr.write(`acp-orchestrator: ${err.message}\n`);
    return 2;
  }
  process.stderr.write(`acp-orchestrator: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  return 1;
}

/**
 * Ends the process with `code` once stdout and stderr are flushed: a write to a pipe is asynchronous, and exiting
 * before it completes loses output (`events ID --json | wc -l`). The explicit exit afterwards ends the process even if
 * a command left a handle open.
 */
async function end(code: number): Promise<void> {
  process.exitCode = code;
  const { flushed } = await import("./commands/output.js");
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  process.exit(code);
}

/**
 * Runs the command `argv` names (the process's arguments after the script) and ends the process with its exit code.
 * Called once, by the executable (src/cli.ts); never returns normally, as it ends the process.
 */
export function runCli(argv: readonly string[]): Promise<void> {
  return main(argv).then(
    (code) => end(code),
    (err: unknown) => end(report(err)),
  );
}
