/**
 * `acp-orchestrator run --goal TEXT [--config FILE] [--yes]` and `acp-orchestrator resume ID`: drive a product
 * headless from the terminal with live progress (issue 15). Both start this build's server on the chosen store and
 * talk ACP to it like any client; `--yes` confirms the plan without asking.
 */
import { statSync } from "node:fs";
import { resolve } from "node:path";
import { createInterface } from "node:readline/promises";
import type { Plan } from "../../protocol/common.js";
import { isPostgresUrl } from "../adapters/persistence/postgres-url.js";
import { followProduct, type FollowedStatus } from "../operator/follow.js";
import { formatDuration, taskDurationMs } from "../operator/format.js";
import { ProgressView } from "../operator/progress-view.js";
import { withServer, type ServerSession } from "../operator/server-client.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";

const COMMON = {
  state: { type: "string" },
  config: { type: "string" },
  "log-level": { type: "string" },
} as const;

/**
 * The `serve` arguments of a `run` or `resume`. The server runs in the product's folder (`--cwd`), so relative
 * `--state` and `--config` paths are made absolute here, against the directory the command was given in (a new user
 * found `run --cwd repo --config cfg.json` looking for repo/cfg.json).
 */
function serveArgs(values: { state?: string; config?: string; "log-level"?: string }): string[] {
  const state = values.state;
  return [
    ...(state !== undefined ? ["--state", isPostgresUrl(state) ? state : resolve(state)] : []),
    ...(values.config !== undefined ? ["--config", resolve(values.config)] : []),
    "--log-level",
    values["log-level"] ?? "warn",
  ];
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

const write = (text: string) => process.stdout.write(text);

function view(): ProgressView {
  return new ProgressView({ write, live: process.stdout.isTTY === true, columns: process.stdout.columns ?? 100 });
}

/** The end-of-run summary; exit code 0 only when the product completed. */
function summarise(status: FollowedStatus): number {
  const now = Date.now();
  write(`\nphase: ${status.phase}\n`);
  for (const t of status.tasks) {
    const d = taskDurationMs(t, now);
    write(
      `  ${t.taskId.padEnd(5)} ${t.status.padEnd(9)} ${(d === undefined ? "-" : formatDuration(d)).padStart(8)}  ${t.title}\n`,
    );
  }
  const integration = status.integration as
    | { mode?: string; branch?: string; state?: string; targetBranch?: string }
    | undefined;
  if (integration?.branch) {
    // Worktree isolation (PROTOCOL.md section 5): the result is on the integration branch, not in the working tree.
    const where =
      integration.mode === "merge" && integration.targetBranch ? ` (merge into ${integration.targetBranch})` : "";
    write(`result: branch ${integration.branch}${where}, integration ${integration.state ?? "pending"}\n`);
  }
  if (status.recovery) write(`recovery: ${status.recovery.cause}\n  ${status.recovery.remediation}\n`);
  return status.phase === "completed" ? 0 : 1;
}

async function confirmInteractively(): Promise<boolean> {
  if (!process.stdin.isTTY) return false;
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return /^y(es)?$/i.test((await rl.question("Confirm and run this plan? [y/N] ")).trim());
  } finally {
    rl.close();
  }
}

export const runCommand: Command = {
  name: "run",
  synopsis: "run --goal TEXT [--config FILE] [--state PATH|URL] [--cwd DIR] [--yes]",
  summary: "plan a goal and run it headless with live progress",
  help: `Usage: acp-orchestrator run --goal TEXT [--config FILE] [--state PATH|URL] [--cwd DIR] [--yes]

Starts the server on the store, plans TEXT with the leader (the config's, else the built-in one), prints the plan,
and after confirmation (--yes, or "y" at the prompt in a terminal) runs it in DIR (default: the current
directory) with live progress: a redrawn table in a terminal, one line per task status change otherwise.
With worktree isolation (a git workspace) the result is on the branch acp/<productId>, which the summary names.
Exits 0 when the product completed, 1 when it failed, paused or was not confirmed (a paused run continues with
"resume ID"; a plan that was not confirmed is confirmed from a client, or planned again with --yes).

Options:
  --goal TEXT       the goal (a value starting with "-" is fine: --goal "- Write a README")
  --yes, -y         confirm the plan without asking
  --config FILE     agent registry file
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --cwd DIR         the product's workspace (default: the current directory)
  --log-level LEVEL the server's log level on stderr (default warn)
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("run", argv, {
      ...COMMON,
      goal: { type: "string" },
      yes: { type: "boolean", short: "y" },
      cwd: { type: "string" },
    });
    expectPositionals("run", positionals, 0, 0, "no arguments (give the goal with --goal)");
    if (!values.goal) throw new UsageError(`"run" needs --goal TEXT.`, "run");
    const goal = values.goal;
    const cwd = values.cwd === undefined ? process.cwd() : resolve(values.cwd);
    if (values.cwd !== undefined && !isDirectory(cwd)) {
      throw new UsageError(`--cwd ${values.cwd} is not a directory.`, "run");
    }
    return withServer({ serveArgs: serveArgs(values), cwd }, async (session: ServerSession) => {
      const planned = session.waitFor(
        (m, p) => (m === "product.planReady" || m === "product.planFailed") && p.productId !== undefined,
      );
      const { productId } = await session.request<{ productId: string }>("product.plan", { goal, cwd });
      write(`product ${productId}\n`);
      const ready = await planned;
      if (!ready.plan) {
        write(`planning failed: ${String(ready.error)}\n`);
        return 1;
      }
      const plan = ready.plan as Plan;
      write(`plan (${plan.tasks.length} tasks):\n`);
      const agentOf = new Map(plan.instances.map((i) => [i.instanceId, i.agentId]));
      for (const t of plan.tasks) {
        write(
          `  ${t.taskId.padEnd(5)} ${t.title}${t.dependsOn.length ? `  (after ${t.dependsOn.join(", ")})` : ""}  [${agentOf.get(t.instanceId) ?? t.instanceId}]\n`,
        );
      }
      if (!values.yes && !(await confirmInteractively())) {
        write(`not confirmed; the plan waits in the store: confirm it from a client, or plan again with --yes.\n`);
        return 1;
      }
      await session.request("product.confirm", { productId });
      write("running:\n");
      return summarise(await followProduct(session, productId, view()));
    });
  },
};

export const resumeCommand: Command = {
  name: "resume",
  synopsis: "resume ID [--config FILE] [--state PATH|URL]",
  summary: "resume a paused or interrupted product and follow it to the end",
  help: `Usage: acp-orchestrator resume ID [--config FILE] [--state PATH|URL]

Starts the server on the store, resumes product ID (completed tasks are not run again; tasks that were running
run again) and follows it with live progress until it completes, fails or pauses. Refused while another server
holds the product's lease. Exits 0 when the product completed.

Options:
  --config FILE     agent registry file (the agents the product was planned with)
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --log-level LEVEL the server's log level on stderr (default warn)
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("resume", argv, COMMON);
    expectPositionals("resume", positionals, 1, 1, "a product id");
    const productId = positionals[0] as string;
    return withServer({ serveArgs: serveArgs(values), cwd: process.cwd() }, async (session) => {
      try {
        await session.request("product.resume", { productId });
      } catch (err) {
        const e = err as { message?: string; code?: number };
        process.stderr.write(`acp-orchestrator: ${e.message ?? String(err)}\n`);
        return 1;
      }
      write(`resumed ${productId}:\n`);
      return summarise(await followProduct(session, productId, view()));
    });
  },
};
