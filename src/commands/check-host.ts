/**
 * `acp-orchestrator check-host [--timeout-ms N] -- COMMAND...` (PROTOCOL.md section 7): runs the authority
 * conformance rules against a host's `runState/*` process and prints each failing rule and `N passed, N failed`.
 * Exit code 0 when every rule passed, 1 otherwise. The work is in src/host-kit/check-host.ts.
 */
import { checkHost, DEFAULT_CHECK_DEADLINE_MS, formatReport } from "../host-kit/check-host.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";

/** The runState methods whose rules `--only` can select (PROTOCOL.md section 7). */
const CHECKED_METHODS = [
  "get",
  "put",
  "delete",
  "list",
  "appendEvents",
  "readEvents",
  "deleteStream",
  "pruneEvents",
  "listProjects",
  "close",
];

const HELP = `Usage: acp-orchestrator check-host [--timeout-ms N] [--deadline D] [--only METHODS] [--verbose] -- COMMAND [ARG...]

Starts COMMAND, which must answer the run-state requests of PROTOCOL.md section 7 (runState/get, put, delete, list,
appendEvents, readEvents, deleteStream) as NDJSON JSON-RPC on its stdin/stdout, runs the authority conformance rules
against it (each rule in project ids of its own), and prints every failing rule in plain words, then
"N passed, N failed". Exit code 0 when every rule passed, 1 otherwise.

Options:
  --timeout-ms N   how long the host has to answer each request (default 10000)
  --deadline D     the whole check ends after D (N ms, Ns or Nm; default 5m): the remaining rules fail and the
                   host's whole process group is killed
  --only M[,M...]  run only the rules of these methods (get, put, delete, list, appendEvents, readEvents,
                   deleteStream, pruneEvents, listProjects, close)
  --verbose        also print every passing rule
`;

/** `--deadline`: `N` ms, `Ns` seconds or `Nm` minutes, positive. */
function parseDeadline(text: string | undefined): number {
  const m = /^(\d+)(ms|s|m)?$/.exec(text ?? "");
  const ms = m ? Number(m[1]) * (m[2] === "m" ? 60_000 : m[2] === "s" ? 1_000 : 1) : NaN;
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw new UsageError("--deadline must be a positive duration: N ms, Ns or Nm (e.g. 30s).", "check-host");
  }
  return ms;
}

async function run(argv: readonly string[]): Promise<number> {
  const split = argv.indexOf("--");
  const own = split < 0 ? [...argv] : argv.slice(0, split);
  const command = split < 0 ? [] : argv.slice(split + 1);
  let timeoutMs = 10_000;
  let deadlineMs = DEFAULT_CHECK_DEADLINE_MS;
  let verbose = false;
  let only: string[] | undefined;
  for (let i = 0; i < own.length; i += 1) {
    const arg = own[i];
    if (arg === "--verbose") verbose = true;
    else if (arg === "--only") {
      only = (own[(i += 1)] ?? "").split(",").filter((m) => m !== "");
      if (only.length === 0) throw new UsageError("--only needs a comma-separated list of methods.", "check-host");
      const unknown = only.filter((m) => !CHECKED_METHODS.includes(m));
      if (unknown.length > 0) {
        throw new UsageError(
          `--only names no method the kit checks: ${unknown.join(", ")} (use ${CHECKED_METHODS.join(", ")}).`,
          "check-host",
        );
      }
    } else if (arg === "--deadline") {
      deadlineMs = parseDeadline(own[(i += 1)]);
    } else if (arg === "--timeout-ms") {
      timeoutMs = Number(own[(i += 1)]);
      if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) {
        throw new UsageError("--timeout-ms must be a positive integer of milliseconds.", "check-host");
      }
    } else throw new UsageError(`check-host does not know the option "${arg}".`, "check-host");
  }
  if (command.length === 0) throw new UsageError("check-host needs the host command after --.", "check-host");
  let outcomes;
  try {
    outcomes = await checkHost({
      command,
      timeoutMs,
      deadlineMs,
      ...(only ? { only } : {}),
      stderr: process.stderr,
      onRule: (o) => {
        if (verbose && o.passed) process.stdout.write(`ok   ${o.method}: ${o.title}\n`);
      },
    });
  } catch (error) {
    process.stderr.write(`acp-orchestrator: cannot start the host command: ${(error as Error).message}\n`);
    return 1;
  }
  process.stdout.write(formatReport(outcomes));
  return outcomes.every((o) => o.passed) ? 0 : 1;
}

export const checkHostCommand: Command = {
  name: "check-host",
  synopsis: "check-host [--timeout-ms N] [--deadline D] [--only METHODS] [--verbose] -- COMMAND...",
  summary: "check a host's runState/* process against the authority conformance rules",
  help: HELP,
  run,
};
