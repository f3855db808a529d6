/**
 * `acp-orchestrator demo`: runs a product end to end against a spawned server (src/demo.ts is the client).
 *
 * Owns the command's options and help only.
 */
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";

const OPTIONS = {
  goal: { type: "string" },
  keep: { type: "boolean" },
  clean: { type: "boolean" },
  config: { type: "string" },
  state: { type: "string" },
  "log-level": { type: "string" },
} as const;

const LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

const HELP = `Usage: acp-orchestrator demo [--goal TEXT] [--config FILE] [--state PATH|URL] [--log-level L] [--keep | --clean]

Spawns the server on a fresh temporary git workspace and drives one product through plan, confirm and execution
(with the built-in leader and worker, or the agents of --config), printing each task's progress with durations,
then a table with each task's duration and parallel lane, a lane timeline and each task's last output line. Exits 0
when it completed. The workspace and the state are kept, and their paths printed, unless --clean.

Options:
  --goal TEXT        the goal to plan and run (a value starting with "-" is fine: --goal "- Write a README")
  --config FILE      the server's config file: your agents run the demo (default: built-in leader and worker)
  --state PATH|URL   the store the server writes (default: a state file in the demo's temporary folder)
  --log-level L      the server's log level on stderr: trace, debug, info, warn (default), error, fatal, silent
  --clean            remove the temporary folder at the end (a --state store elsewhere is left alone)
  --keep             keep the temporary folder (the default; accepted for older scripts)
`;

export const demoCommand: Command = {
  name: "demo",
  options: OPTIONS,
  synopsis: "demo [--goal TEXT] [--config FILE] [--state PATH|URL] [--log-level L] [--keep | --clean]",
  summary: "run a product end to end against a spawned server",
  help: HELP,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("demo", argv, OPTIONS);
    expectPositionals("demo", positionals, 0, 0, "no arguments");
    if (values.keep && values.clean) throw new UsageError(`"demo" takes --keep or --clean, not both.`, "demo");
    const level = values["log-level"];
    if (level !== undefined && !LEVELS.includes(level)) {
      throw new UsageError(`The option --log-level of "demo" must be one of ${LEVELS.join(", ")}.`, "demo");
    }
    const { runDemo } = await import("../demo.js");
    return runDemo({
      clean: values.clean ?? false,
      ...(values.goal ? { goal: values.goal } : {}),
      ...(values.config !== undefined ? { config: values.config } : {}),
      ...(values.state !== undefined ? { state: values.state } : {}),
      ...(level !== undefined ? { logLevel: level } : {}),
    });
  },
};
