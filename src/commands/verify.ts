/**
 * `acp-orchestrator verify ID [--task T]` (issue 30; DESIGN.md guarantee 17; docs/VERIFY.md): runs a product's
 * configured verification commands again, on demand, on its integration head (or on the candidate commit recorded
 * for task T), in a verify worktree of its own (never the user's checkout, never a worker's worktree), each under the
 * agent watchdog with its timeout. Prints one line per check and the failing check's output tail; exit 0 when every
 * check passed, 1 when one failed or the checks cannot run. Records nothing in the store (the CLI reads only).
 */
import { DEFAULT_CHECK_TIMEOUT_MS, type VerifyConfig } from "../../protocol/verify.js";
import { GitVerifier } from "../adapters/workspace/verify-worktrees.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { orNotFound } from "../operator/not-found.js";
import { openReader } from "../operator/open-reader.js";
import type { RunStateReader } from "../operator/run-state-reader.js";
import type { Command } from "./command.js";
import { writeOut } from "./output.js";

interface Target {
  cwd: string;
  commit: string;
  config: VerifyConfig;
  what: string;
}

/** The product's folder, verify configuration and the commit to check, or a plain reason why there is none. */
async function targetOf(reader: RunStateReader, productId: string, taskId?: string): Promise<Target | string> {
  const status = await reader.productStatus(productId);
  if (taskId !== undefined && !hasTask(status, taskId)) {
    // A new user's trial: `verify ID --task zz` said only that the task had no recorded verification.
    return `Product ${productId} has no task ${taskId}.`;
  }
  const [first] = await reader.productEvents(productId, 0, 1);
  const created = first?.event;
  if (!created || created.type !== "created") return `The first stored event of ${productId} is not its creation.`;
  if (!created.verify) return `Product ${productId} has no verification commands (verify was not configured).`;
  const results = ((status.verification as { results?: { taskId?: string; commit: string }[] } | undefined)?.results ??
    []) as { taskId?: string; commit: string }[];
  if (taskId !== undefined) {
    const entry = results.filter((r) => r.taskId === taskId).at(-1);
    if (!entry) return `Task ${taskId} of ${productId} has no recorded verification (no candidate was checked).`;
    return { cwd: created.cwd, commit: entry.commit, config: created.verify, what: `task ${taskId}'s candidate` };
  }
  const head = (status.integration as { head?: string } | undefined)?.head;
  if (!head) return `Product ${productId} has no integration branch (it did not run with worktree isolation).`;
  return { cwd: created.cwd, commit: head, config: created.verify, what: "the integration head" };
}

/** Whether `taskId` is a task of the product: of its tasks, or of its plan before confirmation. */
function hasTask(status: Record<string, unknown>, taskId: string): boolean {
  const tasks = [
    ...((status.tasks ?? []) as { taskId: string }[]),
    ...(((status.plan as { tasks?: { taskId: string }[] } | undefined)?.tasks ?? []) as { taskId: string }[]),
  ];
  return tasks.some((t) => t.taskId === taskId);
}

const OPTIONS = { state: { type: "string" }, task: { type: "string" } } as const;

export const verifyCommand: Command = {
  name: "verify",
  options: OPTIONS,
  synopsis: "verify ID [--task T] [--state PATH|URL]",
  summary: "run a product's verification commands again on its integration head (or a task's candidate)",
  help: `Usage: acp-orchestrator verify ID [--task T] [--state PATH|URL]

Runs the verification commands product ID was configured with (verify) on its integration head, or with --task on
the candidate commit recorded for task T, in a verify worktree of its own. Prints each check's outcome, exit code and
duration, and the failing check's output. Exit 0 when every check passed, else 1 (also for a product or task that
does not exist, or checks that cannot run). Records nothing.

Options:
  --task T          check the candidate recorded for task T
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("verify", argv, OPTIONS);
    expectPositionals("verify", positionals, 1, 1, "a product id");
    const productId = positionals[0] as string;
    const { reader, where } = await openReader(values.state);
    try {
      return await orNotFound(where, async () => {
        const target = await targetOf(reader, productId, values.task);
        if (typeof target === "string") {
          process.stderr.write(`acp-orchestrator: ${target}\n`);
          return 1;
        }
        return runChecks(productId, target);
      });
    } finally {
      await reader.close();
    }
  },
};

async function runChecks(productId: string, target: Target): Promise<number> {
  const verifier = new GitVerifier();
  const slot = `${productId}.manual-${process.pid}`;
  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once("SIGINT", onSignal);
  try {
    const run = await verifier.run({
      cwd: target.cwd,
      productId: slot,
      commit: target.commit,
      commands: target.config.commands.map((c) => ({
        name: c.name,
        run: c.run,
        timeoutMs: c.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS,
      })),
      env: { ...(target.config.env ?? {}) },
      parallel: 1,
      signal: controller.signal,
    });
    if (run === null) {
      process.stderr.write("acp-orchestrator: the checks were interrupted.\n");
      return 1;
    }
    const lines = [`${target.what} ${target.commit.slice(0, 12)} (tree ${run.tree.slice(0, 12)}):`];
    for (const c of run.checks) {
      const how = c.timedOut ? "timed out" : c.exitCode === null ? "signal" : `exit ${c.exitCode}`;
      lines.push(`  ${c.ok ? "ok  " : "FAIL"}  ${c.name}  (${how}, ${c.durationMs} ms)`);
    }
    const failed = run.checks.find((c) => !c.ok);
    if (failed) lines.push("", `output of "${failed.name}":`, failed.outputTail.trimEnd());
    lines.push(run.ok ? "all checks passed" : "verification failed");
    await writeOut(`${lines.join("\n")}\n`);
    return run.ok ? 0 : 1;
  } finally {
    process.removeListener("SIGINT", onSignal);
    await verifier.release(target.cwd, slot).catch(() => undefined);
  }
}
