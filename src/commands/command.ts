/**
 * What one CLI command is (the dispatcher in src/cli.ts runs them): a name, the line shown in `acp-orchestrator help`,
 * its own help text, and `run`, which gets the arguments after the command name and resolves with the exit code.
 *
 * Owns the command contract and the usage error type only. A command module must never write protocol frames to
 * stdout unless it is `serve`; a mistake of the user is thrown as a `UsageError` (exit 2, one plain sentence).
 */

/** One command of the CLI. */
export interface Command {
  /** The word after `acp-orchestrator` (`serve`, `list`, ...). */
  readonly name: string;
  /** One line: the command with its arguments, e.g. `status ID [--state PATH] [--json]`. */
  readonly synopsis: string;
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

/**
 * A mistake of the user (an unknown option, a missing argument, a bad environment variable): the dispatcher prints
 * `acp-orchestrator: MESSAGE` and a pointer to the command's help, and exits 2. The message is one plain sentence
 * that names the option or environment variable at fault.
 */
export class UsageError extends Error {
  override readonly name = "UsageError";
  constructor(
    message: string,
    /** The command whose help the user is pointed to (undefined: the general help). */
    readonly command?: string,
  ) {
    super(message);
  }
}

/**
 * A failure already reported on stderr by someone else (e.g. the server `run`/`resume` started, which printed its
 * one-sentence message and exited): the dispatcher prints nothing more and exits with `exitCode`.
 */
export class ReportedFailure extends Error {
  override readonly name = "ReportedFailure";
  constructor(
    message: string,
    /** The exit code to end with (the server's own: 2 for a mistake of the user). */
    readonly exitCode: number,
  ) {
    super(message);
  }
}
