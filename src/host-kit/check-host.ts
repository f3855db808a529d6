/**
 * The host authors' kit (PROTOCOL.md section 7, `check-host`): runs the authority conformance rules
 * (authority-rules.ts) against a process that answers `runState/*` requests on its stdin/stdout (NDJSON JSON-RPC), as
 * a server would send them, through the same `HostAuthority` the server uses.
 *
 * Owns: starting the host command, the connection to it, which rules apply to a host, and the report. The rules run
 * one after another on one host process, each in project ids of its own (`check-<run>-<n>-a`/`-b`), so a host's
 * store needs no wiping; rules about the port's local parts (`close`, `listProjects`, `pruneEvents`) and the one that
 * section 7 rules out (array values) are not run. It never interprets a host's data beyond what a rule checks.
 *
 * The host gets a scratch directory for the data the rules write (`$ACP_ORCHESTRATOR_CHECK_HOST_DIR`, fresh and empty,
 * removed when the check ends), so that a host which honours it leaves nothing behind in the user's folder (issue 35:
 * the example host left a 6 MB runstate.json in the checkout).
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMessageConnection, ResponseError, type MessageConnection } from "vscode-jsonrpc/node";
import { HostAuthority } from "../adapters/persistence/host-authority.js";
import { RequestTimeoutError, type HostRequester } from "../adapters/persistence/host-requester.js";
import { createFramedTransport } from "../server/framing.js";
import { authorityRules, type AuthorityRule } from "./authority-rules.js";

/** The environment variable naming the host's scratch directory during a check (see the header). */
export const CHECK_HOST_DIR_ENV = "ACP_ORCHESTRATOR_CHECK_HOST_DIR";

/** Methods of the port that PROTOCOL.md section 7 carries to a host. */
const HOST_METHODS = new Set(["get", "put", "delete", "list", "appendEvents", "readEvents", "deleteStream"]);

/** Rules of those methods that a host is not asked to pass, with the reason (also the host backend's deviations). */
export const HOST_EXCLUDED_RULES: Readonly<Record<string, string>> = {
  "put: accepts an array as the value":
    "section 7 values are JSON objects (protocol/host.ts JsonObject rejects arrays), so an array is refused locally",
};

/** The rules `check-host` runs, for the given project ids. */
export function hostRules(projects: { P: string; Q: string }): AuthorityRule[] {
  return authorityRules(projects).filter(
    (r) => HOST_METHODS.has(r.method) && HOST_EXCLUDED_RULES[`${r.method}: ${r.title}`] === undefined,
  );
}

/** One rule's outcome. */
export interface RuleOutcome {
  method: string;
  title: string;
  passed: boolean;
  /** Why it failed, in plain words. */
  reason?: string;
}

export interface CheckHostOptions {
  /** The host command and its arguments. */
  command: string[];
  /** How long the host has to answer each request, ms. Default 10000. */
  timeoutMs?: number;
  /** Only the rules of these methods (default: every method section 7 carries). */
  only?: readonly string[];
  /** Called after each rule (for progress output). */
  onRule?(outcome: RuleOutcome): void;
  /** Where the host's stderr goes. Default: discarded. */
  stderr?: NodeJS.WritableStream;
  /**
   * The whole check ends after this many ms (default 5 minutes): the rules that remain fail with that reason and the
   * host's whole process group is killed.
   */
  deadlineMs?: number;
}

/** Default overall deadline of a check, ms (5 minutes). */
export const DEFAULT_CHECK_DEADLINE_MS = 300_000;

/** Kills the host's process group (the host and everything it started: a grandchild holding its stdout too). */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // The group is already gone.
  }
}

/**
 * Starts the host command, runs every host rule against it, stops it, and returns the outcomes in rule order. A host
 * that exits or stops answering fails the rules that remain (each with the reason). Throws only when the command
 * cannot be started at all. The host's scratch directory (`CHECK_HOST_DIR_ENV`) is removed before it returns or throws.
 */
export async function checkHost(options: CheckHostOptions): Promise<RuleOutcome[]> {
  const [file, ...args] = options.command;
  if (file === undefined) throw new Error("no host command given");
  const scratch = mkdtempSync(join(tmpdir(), "acp-orchestrator-check-host-"));
  try {
    return await checkHostIn(file, args, scratch, options);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** `checkHost` with the host's scratch directory made. */
async function checkHostIn(
  file: string,
  args: string[],
  scratch: string,
  options: CheckHostOptions,
): Promise<RuleOutcome[]> {
  // A process group of its own, so that the whole group can be killed when the check ends.
  const child = spawn(file, args, {
    env: { ...process.env, [CHECK_HOST_DIR_ENV]: scratch },
    stdio: ["pipe", "pipe", options.stderr ? "pipe" : "ignore"],
    detached: true,
  });
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", () => resolve());
    child.once("error", reject);
  });
  if (options.stderr) child.stderr?.pipe(options.stderr, { end: false });
  let exited: string | undefined;
  child.once("exit", (code, signal) => {
    exited = `the host process exited (${signal ?? `code ${code}`})`;
  });
  const { stdin, stdout } = child;
  if (!stdin || !stdout) throw new Error("the host command has no stdio pipes");
  const { reader, writer } = createFramedTransport(stdout, stdin, { framing: "ndjson" });
  const connection = createMessageConnection(reader, writer);
  connection.listen();
  const timeoutMs = options.timeoutMs ?? 10_000;
  const deadlineMs = options.deadlineMs ?? DEFAULT_CHECK_DEADLINE_MS;
  const pending = new Set<(error: Error) => void>();
  // check-host ending early (an error, process.exit) takes the host's group with it too.
  const onExit = (): void => killGroup(child.pid);
  process.once("exit", onExit);
  const deadline = setTimeout(() => {
    exited = `the check's deadline of ${deadlineMs} ms passed; the host's process group was killed`;
    killGroup(child.pid);
    for (const fail of pending) fail(new Error(exited));
  }, deadlineMs);
  const authority = new HostAuthority({
    timeoutMs,
    connection: requesterOf(connection, timeoutMs, () => exited, pending),
  });
  const run = randomUUID().slice(0, 8);
  const outcomes: RuleOutcome[] = [];
  try {
    const selected = (rules: AuthorityRule[]): AuthorityRule[] =>
      options.only ? rules.filter((r) => options.only?.includes(r.method)) : rules;
    const count = selected(hostRules({ P: "", Q: "" })).length;
    for (let n = 0; n < count; n += 1) {
      const projects = { P: `check-${run}-${n}-a`, Q: `check-${run}-${n}-b` };
      const rule = selected(hostRules(projects))[n] as AuthorityRule;
      let outcome: RuleOutcome;
      try {
        await rule.run(authority);
        outcome = { method: rule.method, title: rule.title, passed: true };
      } catch (error) {
        outcome = { method: rule.method, title: rule.title, passed: false, reason: reasonOf(error, exited) };
      }
      outcomes.push(outcome);
      options.onRule?.(outcome);
    }
  } finally {
    clearTimeout(deadline);
    connection.dispose();
    stdin.end();
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((resolve) => child.once("exit", resolve));
      const timer = setTimeout(() => killGroup(child.pid), 2_000);
      await gone;
      clearTimeout(timer);
    }
    killGroup(child.pid);
    process.removeListener("exit", onExit);
  }
  return outcomes;
}

/** Requests to the host: each with its timeout, refused at once once `failure()` names one, failed by `pending`. */
function requesterOf(
  connection: MessageConnection,
  timeoutMs: number,
  failure: () => string | undefined,
  pending: Set<(error: Error) => void>,
): HostRequester {
  return {
    request: (method, params, requestOptions) =>
      new Promise((resolve, reject) => {
        const exited = failure();
        if (exited) {
          reject(new Error(exited));
          return;
        }
        const ms = requestOptions?.timeoutMs ?? timeoutMs;
        const timer = setTimeout(() => reject(new RequestTimeoutError(method, ms)), ms);
        const fail = (error: Error): void => {
          clearTimeout(timer);
          reject(error);
        };
        pending.add(fail);
        connection.sendRequest(method, params).then(
          (value) => {
            pending.delete(fail);
            clearTimeout(timer);
            resolve(value);
          },
          (error: unknown) => {
            pending.delete(fail);
            clearTimeout(timer);
            reject(error);
          },
        );
      }),
  };
}

function reasonOf(error: unknown, exited: string | undefined): string {
  if (exited) return exited;
  if (error instanceof ResponseError) return `the host answered error ${error.code}: ${error.message}`;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** The report: each failing rule in plain words, then `N passed, N failed` alone on the last line. */
export function formatReport(outcomes: readonly RuleOutcome[]): string {
  const failed = outcomes.filter((o) => !o.passed);
  const lines = failed.map((o) => `FAIL ${o.method}: ${o.title}\n     ${o.reason ?? ""}`);
  lines.push(`${outcomes.length - failed.length} passed, ${failed.length} failed`);
  return `${lines.join("\n")}\n`;
}
