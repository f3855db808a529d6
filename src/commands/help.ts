/**
 * `acp-orchestrator help [COMMAND]` (also `--help`, `-h`, and `COMMAND --help`): the general help with every
 * command, or one command's help.
 *
 * Owns the help texts' assembly; each command's own text lives in its module.
 */
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";

/** The general help: what the program is, each command's synopsis and summary, and where the details are. */
export function generalHelp(commands: readonly Command[]): string {
  const lines = commands.map((c) => `  acp-orchestrator ${c.synopsis}\n      ${c.summary}`);
  return `acp-orchestrator — an ACP agent that turns a team of coding agents into one agent.

Usage:
${lines.join("\n")}

"acp-orchestrator help COMMAND" (or "COMMAND --help") prints a command's options. Without a command it serves
JSON-RPC on stdin/stdout: acp-orchestrator [serve] [options].
`;
}

/** The `help` command over the given command list (the dispatcher's registry). */
export function helpCommand(commands: () => readonly Command[]): Command {
  return {
    name: "help",
    synopsis: "help [COMMAND]",
    summary: "print this help, or a command's help",
    help: "Usage: acp-orchestrator help [COMMAND]\n\nPrints the list of commands, or the options of COMMAND.\n",
    run(argv) {
      const { positionals } = parseCommandArgs("help", argv, {});
      expectPositionals("help", positionals, 0, 1, "at most one command name");
      const name = positionals[0];
      if (name === undefined) {
        process.stdout.write(generalHelp(commands()));
        return Promise.resolve(0);
      }
      const command = commands().find((c) => c.name === name);
      if (command === undefined) throw new UsageError(`There is no command "${name}".`);
      process.stdout.write(command.help);
      return Promise.resolve(0);
    },
  };
}
