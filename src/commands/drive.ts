/**
 * What the commands that drive a product through a server of their own share (`run`, `resume`, and the control verbs
 * when no server owns the product): the `serve` arguments, the live progress view, following the product to its end
 * with Ctrl-C handling, the end-of-run summary, and the resume command to print.
 *
 * Ctrl-C (issue 29): the first one pauses the product (the server keeps running until its workers stopped and the
 * pause is written) and the command ends with `paused ID — resume with: …`; a second one stops waiting and leaves the
 * product as it is (the server stops: running tasks are written back as interrupted, resumable). A server that dies
 * while followed is reported as one line with the resume command, never a stack trace; a product deleted while
 * followed (`delete ID` from another shell) as one line saying so, without one (a new user's trial, item 1).
 */
import { resolve } from "node:path";
import { isPostgresUrl } from "../adapters/persistence/postgres-url.js";
import { inCliWords, printableState, shellWord } from "../operator/cli-verbs.js";
import { followProduct, type FollowedStatus } from "../operator/follow.js";
import { formatDuration, shownStatus, taskDurationMs } from "../operator/format.js";
import { finishMergeCommand, integrationClause, type IntegrationLike } from "../operator/integration-text.js";
import { ProgressView } from "../operator/progress-view.js";
import type { ServerSession } from "../operator/server-client.js";

/** The options every driving command takes. */
export const DRIVE_OPTIONS = {
  state: { type: "string" },
  config: { type: "string" },
  "log-level": { type: "string" },
} as const;

export interface DriveValues {
  state?: string;
  config?: string;
  "log-level"?: string;
}

/**
 * The `serve` arguments of a driving command. The server may run in the product's folder (`--cwd`), so relative
 * `--state` and `--config` paths are made absolute here, against the directory the command was given in.
 */
export function serveArgs(values: DriveValues): string[] {
  const state = values.state;
  return [
    ...(state !== undefined ? ["--state", isPostgresUrl(state) ? state : resolve(state)] : []),
    ...(values.config !== undefined ? ["--config", resolve(values.config)] : []),
    "--log-level",
    values["log-level"] ?? "warn",
    // A person reads this server's logs beside the command's output: plain lines on stderr, never JSON (issue 28).
    "--log-format",
    "pretty",
  ];
}

/** ` --state ABS --config ABS` (each when given): what a printed command needs to reach the same store and agents. */
export function commandFlags(values: DriveValues): string {
  const state = values.state;
  const parts: string[] = [];
  if (state !== undefined) parts.push("--state", isPostgresUrl(state) ? printableState(state) : resolve(state));
  if (values.config !== undefined) parts.push("--config", resolve(values.config));
  return parts.map((p) => ` ${shellWord(p)}`).join("");
}

/** The command that resumes `productId` with the same store and config. */
export function resumeCommandLine(productId: string, values: DriveValues): string {
  return `acp-orchestrator resume ${shellWord(productId)}${commandFlags(values)}`;
}

/**
 * What a command says when the server it started was killed while it drove `productId` (withServer's `stoppedNote`):
 * ` while running ID — resume with: COMMAND`. On PostgreSQL a fleet's `--recover` server may already have taken the
 * product over (docs/FLEET.md), so the note says how to see that first (a new user's trial: the resume it advised was
 * refused, the product being driven elsewhere).
 */
export function stoppedNote(productId: string, values: DriveValues): string {
  const note = ` while running ${productId} — resume with: ${resumeCommandLine(productId, values)}`;
  if (values.state === undefined || !isPostgresUrl(values.state)) return note;
  const status = `acp-orchestrator status ${shellWord(productId)}${commandFlags({ state: values.state })}`;
  return `${note} (unless a server started with --recover took it over already: ${status} shows who drives it)`;
}

export const write = (text: string): boolean => process.stdout.write(text);

/** Terminal width, 100 when unknown or reported as 0 (some ttys, e.g. a freshly opened pty, say 0 columns). */
export function terminalColumns(): number {
  const columns = process.stdout.columns;
  return typeof columns === "number" && columns > 0 ? columns : 100;
}

export function progressView(): ProgressView {
  return new ProgressView({ write, live: process.stdout.isTTY === true, columns: terminalColumns() });
}

/**
 * The end-of-run summary; exit code 0 only when the product completed. `flags` (`commandFlags`) follow the arguments
 * of the commands its recovery names (cli-verbs.ts: the protocol's texts name methods); `stateFlags` (the store's
 * alone) and `productCwd` (when known) those of the `merge` command it names when a `merge`-mode product's merge was
 * deferred or conflicted.
 */
export function summarise(
  status: FollowedStatus,
  productId: string,
  opts: { flags?: string; stateFlags?: string; productCwd?: string } = {},
): number {
  const { flags = "", stateFlags = "" } = opts;
  const now = Date.now();
  write(`\nphase: ${status.phase}\n`);
  for (const t of status.tasks) {
    const d = taskDurationMs(t, now);
    write(
      `  ${t.taskId.padEnd(5)} ${shownStatus(t).padEnd(9)} ${(d === undefined ? "-" : formatDuration(d)).padStart(8)}  ${t.title}\n`,
    );
  }
  const integration = status.integration as IntegrationLike | undefined;
  if (integration?.branch && integration.merged?.length === 0 && status.phase !== "completed") {
    // Nothing of the product reached its branch (a new user's trial read "integration integrated" on a failed run).
    write(`result: nothing integrated; branch ${integration.branch} is at the commit the product started from\n`);
  } else if (integration?.branch) {
    // Worktree isolation (PROTOCOL.md section 5): the result is on the integration branch, not in the working tree.
    // A product that did not complete leaves what it integrated so far, never a finished result (with `verify.when:
    // "end"` the head may even be red: a new user's trial read "integration integrated" on such a run).
    const partial =
      status.phase === "completed"
        ? integrationClause(integration)
        : `${integration.merged?.length ?? 0} task(s) integrated so far; the product ${status.phase}, so this is not a finished result`;
    write(`result: branch ${integration.branch}, ${partial}\n`);
    const finish = finishMergeCommand(integration, productId, status.phase, opts.productCwd, stateFlags);
    if (finish) write(`  merge it when the checkout is ready: ${finish}\n`);
  }
  if (status.recovery) {
    const { cause, remediation } = status.recovery;
    write(`recovery: ${inCliWords(cause, productId, flags)}\n  ${inCliWords(remediation, productId, flags)}\n`);
  }
  return status.phase === "completed" ? 0 : 1;
}

/**
 * Whether `err` is the server's answer that the followed product does not exist (any more): the JSON-RPC error
 * `-32002` (not found, PROTOCOL.md section 3) whose `data.kind` is `product`. A product the server answered before
 * can only have gone by `product.delete` (the CLI's `delete`).
 */
function deletedMeanwhile(err: unknown): boolean {
  const e = err as { code?: unknown; data?: { kind?: unknown } } | null;
  return e?.code === -32002 && (e.data?.kind === undefined || e.data.kind === "product");
}

/** Whether `err` is an error answer of the server (a JSON-RPC error: it has a numeric `code`), not a lost connection. */
export function answeredByServer(err: unknown): boolean {
  return typeof (err as { code?: unknown } | null)?.code === "number";
}

/**
 * Follows `productId` on `session` to its end and prints the summary; handles Ctrl-C as this file's header says.
 * Rejects with the connection's error when the connection is lost (withServer reports how the server ended).
 * Resolves with the exit code (0 completed, 1 otherwise, 130 when a second Ctrl-C left the product as it is).
 */
export async function followToEnd(
  session: ServerSession,
  productId: string,
  values: DriveValues,
  /** The product's folder when the command knows it (`run`): the `merge` command it may print names it. */
  productCwd?: string,
): Promise<number> {
  let interrupts = 0;
  let leave: (() => void) | undefined;
  const left = new Promise<"left">((resolveLeft) => (leave = () => resolveLeft("left")));
  // The pause asked for by the first Ctrl-C: its answer is awaited before the command ends (the follow can see the
  // product paused first; ending then closed the connection under the answer: "could not pause", and the server's
  // write of it failed with EPIPE). Resolves with the error when the pause failed.
  let pausing: Promise<unknown> | undefined;
  const onInterrupt = () => {
    interrupts += 1;
    if (interrupts === 1) {
      write(`\npausing ${productId} (Ctrl-C again to leave it as it is)…\n`);
      pausing = session.request("product.pause", { productId }).then(
        () => undefined,
        (err: unknown) => err,
      );
    } else leave?.();
  };
  process.on("SIGINT", onInterrupt);
  try {
    const outcome = await Promise.race([followProduct(session, productId, progressView()), left]);
    // A second Ctrl-C still ends the wait.
    const pauseError = outcome === "left" ? undefined : await Promise.race([pausing, left.then(() => undefined)]);
    if (pauseError !== undefined && !(outcome !== "left" && outcome.phase === "paused"))
      process.stderr.write(`acp-orchestrator: could not pause ${productId}: ${(pauseError as Error).message}\n`);
    if (outcome === "left") {
      write(`left ${productId} as it is — resume with: ${resumeCommandLine(productId, values)}\n`);
      return 130;
    }
    const code = summarise(outcome, productId, {
      flags: commandFlags(values),
      stateFlags: commandFlags({ state: values.state }),
      ...(productCwd !== undefined ? { productCwd } : {}),
    });
    if (outcome.phase === "paused")
      write(`paused ${productId} — resume with: ${resumeCommandLine(productId, values)}\n`);
    return code;
  } catch (err) {
    if (deletedMeanwhile(err)) {
      // Deleted from another shell (`delete ID`, product.delete) while followed: nothing is left to resume.
      process.stderr.write(
        `acp-orchestrator: product ${productId} was deleted while this command ran it; there is nothing left to resume.\n`,
      );
      return 1;
    }
    // The connection is gone (the server died, or its pipe broke): withServer reports how the server ended, with the
    // resume command (`stoppedNote`), once it has seen the process exit: one line, whichever it noticed first.
    if (!answeredByServer(err)) throw err;
    // The server is there but answered the follow with an error: the product is in the store as it last wrote it.
    const why = err instanceof Error ? err.message.split("\n")[0] : String(err);
    process.stderr.write(
      `acp-orchestrator: following ${productId} failed (${why}) — resume with: ${resumeCommandLine(productId, values)}\n`,
    );
    return 1;
  } finally {
    process.off("SIGINT", onInterrupt);
  }
}
