/**
 * Runs an operator command's body and turns "no such product / goal run" into one plain line and exit code 1.
 */
import { isDomainError } from "../core/errors.js";

/** `fn`'s exit code, or 1 with `acp-orchestrator: <message>` on stderr when it threw not_found. */
export async function orNotFound(where: string, fn: () => Promise<number>): Promise<number> {
  try {
    return await fn();
  } catch (err) {
    if (isDomainError(err, "not_found")) {
      process.stderr.write(`acp-orchestrator: ${err.message.replace(/\.$/, "")} in ${where}.\n`);
      return 1;
    }
    throw err;
  }
}
