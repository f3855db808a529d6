/**
 * The command line's two error types, which the dispatcher (src/main.ts) turns into exit codes: `UsageError` (exit 2,
 * one plain sentence) and `ReportedFailure` (already reported; exit with its code).
 *
 * Lives below the commands, the operator views and the transcript tools (DESIGN.md Layers; docs/ARCHITECTURE.md) so
 * that each of them can throw one without importing the layer above. Owns these declarations only.
 */

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
