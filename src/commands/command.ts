/**
 * What one CLI command is (the dispatcher in src/cli.ts runs them): a name, the line shown in `acp-orchestrator help`,
 * its own help text, and `run`, which gets the arguments after the command name and resolves with the exit code.
 *
 * Owns the command contract only. A command module must never write protocol frames to stdout unless it is `serve`; a
 * mistake of the user is thrown as a `UsageError` (exit 2, one plain sentence; src/cli-kit/errors.ts).
 */

/** One command of the CLI. */
export interface Command {
  /** The word after `acp-orchestrator` (`serve`, `list`, ...). */
  readonly name: string;
  /** One line: the command with its arguments, e.g. `status ID [--state PATH] [--json]`. */
  readonly synopsis: string;
  /**
   * The option table its parser uses (`parseCommandArgs`), when it has one: every option in it is named in `synopsis`
   * and in the usage line of `help` (test/commands/cli.test.ts checks it, so a usage line cannot omit an option).
   */
  readonly options?: Readonly<Record<string, { readonly type: "string" | "boolean" }>>;
  /** One short sentence for the command list of `acp-orchestrator help`. */
  readonly summary: string;
  /** The full text of `acp-orchestrator help NAME` and `NAME --help` (ends with a newline). */
  readonly help: string;
  /**
   * Runs the command with the arguments after its name; resolves with the process exit code.
   * Throws `UsageError` for a mistake of the user (the dispatcher prints it and exits 2).
   */
  run(argv: readonly string[]): Promise<number>;
}
