/**
 * `acp-orchestrator demo`: runs a product end to end against a spawned server (src/demo.ts is the client).
 *
 * Owns the command's options and help only.
 */
import { expectPositionals, parseCommandArgs } from "./args.js";
import type { Command } from "./command.js";

const OPTIONS = {
  goal: { type: "string" },
  keep: { type: "boolean" },
} as const;

const HELP = `Usage: acp-orchestrator demo [--goal TEXT] [--keep]

Spawns the server on a fresh temporary git workspace and drives one product through plan, confirm and execution
with the built-in leader and worker, printing each task's progress and a final table. Exits 0 when it completed.

Options:
  --goal TEXT  the goal to plan and run (a value starting with "-" is fine: --goal "- Write a README")
  --keep       keep the temporary workspace and state
`;

export const demoCommand: Command = {
  name: "demo",
  synopsis: "demo [--goal TEXT] [--keep]",
  summary: "run a product end to end against a spawned server",
  help: HELP,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("demo", argv, OPTIONS);
    expectPositionals("demo", positionals, 0, 0, "no arguments");
    const { runDemo } = await import("../demo.js");
    return runDemo({ ...(values.goal ? { goal: values.goal } : {}), keep: values.keep ?? false });
  },
};
