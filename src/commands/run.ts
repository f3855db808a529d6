/**
 * `acp-orchestrator run --goal TEXT [--config FILE] [--yes]` and `acp-orchestrator resume ID`: drive a product
 * headless from the terminal with live progress (issue 15). Both start this build's server on the chosen store and
 * talk ACP to it like any client; `--yes` confirms the plan without asking.
 */
import { readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { createInterface } from "node:readline/promises";
import type { Plan } from "../../protocol/common.js";
import { withServer, type ServerSession } from "../operator/server-client.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { ReportedFailure, UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";
import { DRIVE_OPTIONS as COMMON, commandFlags, followToEnd, serveArgs, stoppedNote, write } from "./drive.js";
import { inCliWords, shellWord } from "../operator/cli-verbs.js";
import { refuseGoalRun, tryControlFirst } from "./control.js";

/** `--agents a,b` as agent ids; an empty list is a `UsageError` (the team cannot be empty). */
function agentList(text: string): string[] {
  const ids = [...new Set(text.split(",").map((id) => id.trim()))].filter((id) => id !== "");
  if (ids.length === 0)
    throw new UsageError(`--agents needs at least one agent id, e.g. --agents claude,codex.`, "run");
  return ids;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Longest goal text read from a file or stdin, in characters (the wire's own limit for a goal). */
const MAX_GOAL_CHARS = 100_000;

/** The goal of a `run`: `--goal TEXT`, `--goal -` (read from stdin), or `--goal-file FILE`. Throws UsageError. */
async function goalOf(values: { goal?: string; "goal-file"?: string }): Promise<string> {
  if (values.goal !== undefined && values["goal-file"] !== undefined) {
    throw new UsageError(`"run" takes --goal or --goal-file, not both.`, "run");
  }
  let text: string;
  if (values["goal-file"] !== undefined) {
    try {
      const size = statSync(values["goal-file"]).size;
      if (size > MAX_GOAL_CHARS * 4)
        throw new UsageError(`--goal-file ${values["goal-file"]} is larger than 400 kB.`, "run");
      text = readFileSync(values["goal-file"], "utf8");
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError(`--goal-file ${values["goal-file"]} cannot be read (${(err as Error).message}).`, "run");
    }
  } else if (values.goal === "-") {
    text = await readStdin();
  } else if (values.goal !== undefined) text = values.goal;
  else throw new UsageError(`"run" needs --goal TEXT, --goal - (stdin) or --goal-file FILE.`, "run");
  if (text.length > MAX_GOAL_CHARS)
    throw new UsageError(`The goal is longer than ${MAX_GOAL_CHARS} characters.`, "run");
  if (text.trim() === "") throw new UsageError("The goal is empty.", "run");
  return text;
}

async function readStdin(): Promise<string> {
  let text = "";
  for await (const chunk of process.stdin) {
    text += typeof chunk === "string" ? chunk : (chunk as Buffer).toString("utf8");
    if (text.length > MAX_GOAL_CHARS) break;
  }
  return text;
}

/**
 * What to throw when the server refused `product.plan`: an unknown `--agents` id (its `-32602` issue at
 * `allowedAgents`) is the user's mistake, one sentence naming the option, the id and the agents there are (exit 2);
 * any other refusal (a JSON-RPC error) is its one sentence (exit 1), never a stack. Anything else is returned as is.
 */
function planRefusal(err: unknown): unknown {
  const e = err as { code?: unknown; message?: unknown; data?: { issues?: { path?: unknown[]; message?: string }[] } };
  if (typeof e?.code !== "number" || typeof e.message !== "string") return err;
  const issue = e.data?.issues?.[0];
  if (e.code === -32602 && issue?.path?.[0] === "allowedAgents" && issue.message !== undefined) {
    return new UsageError(`--agents ${issue.message.replace(/\.$/u, "")}.`, "run");
  }
  process.stderr.write(`acp-orchestrator: ${e.message}\n`);
  return new ReportedFailure(e.message, 1);
}

/** `--add-tokens` and `--add-duration-ms` as product.resume's `additionalBudget`, or undefined when neither is given. */
function budgetOf(values: { "add-tokens"?: string; "add-duration-ms"?: string }): Record<string, number> | undefined {
  const budget: Record<string, number> = {};
  for (const [option, field] of [
    ["add-tokens", "maxTotalTokens"],
    ["add-duration-ms", "maxDurationMs"],
  ] as const) {
    const text = values[option];
    if (text === undefined) continue;
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < 1)
      throw new UsageError(`--${option} must be a positive integer, not "${text}".`, "resume");
    budget[field] = n;
  }
  return Object.keys(budget).length > 0 ? budget : undefined;
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

const RUN_OPTIONS = {
  ...COMMON,
  goal: { type: "string" },
  "goal-file": { type: "string" },
  integration: { type: "string" },
  yes: { type: "boolean", short: "y" },
  cwd: { type: "string" },
  agents: { type: "string" },
} as const;

const RESUME_OPTIONS = { ...COMMON, "add-tokens": { type: "string" }, "add-duration-ms": { type: "string" } } as const;

export const runCommand: Command = {
  name: "run",
  options: RUN_OPTIONS,
  synopsis:
    "run --goal TEXT|- | --goal-file FILE [--agents A,B] [--config FILE] [--state PATH|URL] [--cwd DIR] [--integration branch|merge] [--yes] [--log-level LEVEL]",
  summary: "plan a goal and run it headless with live progress",
  help: `Usage: acp-orchestrator run --goal TEXT|- | --goal-file FILE [--agents A,B] [--config FILE] [--state PATH|URL] [--cwd DIR]
                            [--integration branch|merge] [--yes] [--log-level LEVEL]

Starts the server on the store, plans TEXT with the leader (the config's, else the built-in one), prints the plan,
and after confirmation (--yes, or "y" at the prompt in a terminal) runs it in DIR (default: the current
directory) with live progress: a redrawn table in a terminal, one line per task status change otherwise.
With worktree isolation (a git workspace) the result is on the branch acp/<productId>, which the summary names.
Exits 0 when the product completed, 1 when it failed, paused or was not confirmed (a paused run continues with
"resume ID"; a plan that was not confirmed is confirmed with "confirm ID", or planned again with --yes).
Ctrl-C pauses the product and prints the resume command; a second Ctrl-C leaves it as it is (resumable).

Options:
  --goal TEXT       the goal (a value starting with "-" is fine: --goal "- Write a README"); "-" reads it from stdin
  --goal-file FILE  read the goal from FILE
  --integration M   branch (default: the result stays on acp/<productId>) or merge (brought into the branch checked
                    out at confirm by fast-forward or merge commit, never a rewrite)
  --yes, -y         confirm the plan without asking
  --agents A,B      the team: these agents of the config only (builtin-worker names the built-in worker)
  --config FILE     agent registry file
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --cwd DIR         the product's workspace (default: the current directory)
  --log-level LEVEL the server's log level; its logs are plain lines on stderr (default warn)
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("run", argv, RUN_OPTIONS);
    expectPositionals("run", positionals, 0, 0, "no arguments (give the goal with --goal)");
    const integration = values.integration;
    if (integration !== undefined && integration !== "branch" && integration !== "merge") {
      throw new UsageError(`--integration takes "branch" or "merge", not "${integration}".`, "run");
    }
    const goal = await goalOf(values);
    const allowedAgents = values.agents === undefined ? undefined : agentList(values.agents);
    const cwd = values.cwd === undefined ? process.cwd() : resolve(values.cwd);
    if (values.cwd !== undefined && !isDirectory(cwd)) {
      throw new UsageError(`--cwd ${values.cwd} is not a directory.`, "run");
    }
    let started: string | undefined;
    const noteWhenStopped = () => (started ? stoppedNote(started, values) : "");
    return withServer(
      { serveArgs: serveArgs(values), cwd, stoppedNote: noteWhenStopped },
      async (session: ServerSession) => {
        const planned = session.waitFor(
          (m, p) => (m === "product.planReady" || m === "product.planFailed") && p.productId !== undefined,
        );
        const { productId } = await session
          .request<{ productId: string }>("product.plan", {
            goal,
            cwd,
            ...(integration !== undefined ? { integration: { mode: integration } } : {}),
            ...(allowedAgents !== undefined ? { allowedAgents } : {}),
          })
          .catch((err: unknown) => {
            throw planRefusal(err);
          });
        write(`product ${productId}\n`);
        const ready = await planned;
        if (!ready.plan) {
          write(`planning failed: ${String(ready.error)}\n`);
          return 1;
        }
        const plan = ready.plan as Plan;
        // The plan's name is the product's title in every view (issue 28).
        write(`plan "${plan.name}" (${plan.tasks.length} tasks):\n`);
        const agentOf = new Map(plan.instances.map((i) => [i.instanceId, i.agentId]));
        for (const t of plan.tasks) {
          write(
            `  ${t.taskId.padEnd(5)} ${t.title}${t.dependsOn.length ? `  (after ${t.dependsOn.join(", ")})` : ""}  [${agentOf.get(t.instanceId) ?? t.instanceId}]\n`,
          );
        }
        if (!values.yes && !(await confirmInteractively())) {
          write(
            `not confirmed; the plan waits in the store: "acp-orchestrator confirm ${shellWord(productId)}${commandFlags(values)}", or plan again with --yes.\n`,
          );
          return 1;
        }
        await session.request("product.confirm", { productId });
        started = productId;
        write("running:\n");
        return followToEnd(session, productId, values, cwd);
      },
    );
  },
};

export const resumeCommand: Command = {
  name: "resume",
  options: RESUME_OPTIONS,
  synopsis: "resume ID [--add-tokens N] [--add-duration-ms N] [--config FILE] [--state PATH|URL] [--log-level LEVEL]",
  summary: "resume a paused or interrupted product and follow it to the end",
  help: `Usage: acp-orchestrator resume ID [--add-tokens N] [--add-duration-ms N] [--config FILE] [--state PATH|URL]
                              [--log-level LEVEL]

A server that owns product ID, or that made it and holds it paused, resumes it itself (a control request,
answered within a second). Otherwise this starts a server on the store, resumes product ID (completed tasks are not run again; tasks that were running
run again) and follows it with live progress until it completes, fails or pauses. Refused while another server
holds the product's lease. Exits 0 when the product completed. A product paused because its budget is spent goes on
with more budget: --add-tokens and --add-duration-ms add to its limits (product.resume's additionalBudget).

Options:
  --add-tokens N        add N tokens to the product's token budget
  --add-duration-ms N   add N ms to the product's time budget
  --config FILE     agent registry file (the agents the product was planned with)
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --log-level LEVEL the server's log level; its logs are plain lines on stderr (default warn)
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("resume", argv, RESUME_OPTIONS);
    expectPositionals("resume", positionals, 1, 1, "a product id");
    const productId = positionals[0] as string;
    if (productId.startsWith("goal_")) return refuseGoalRun(values.state, productId, "resume");
    const additionalBudget = budgetOf(values);
    const params = additionalBudget !== undefined ? { additionalBudget } : {};
    // A server that owns it, or made it and holds it paused, resumes it itself (issue 29); else a server of our own.
    const asked = await tryControlFirst(values, { productId, method: "product.resume", params }, "resume");
    if (asked !== undefined) return asked;
    const note = () => stoppedNote(productId, values);
    return withServer({ serveArgs: serveArgs(values), cwd: process.cwd(), stoppedNote: note }, async (session) => {
      try {
        await session.request("product.resume", { productId, ...params });
      } catch (err) {
        const e = err as { message?: string; code?: number };
        process.stderr.write(
          `acp-orchestrator: ${inCliWords(e.message ?? String(err), productId, commandFlags(values))}\n`,
        );
        return 1;
      }
      write(`resumed ${productId}:\n`);
      return followToEnd(session, productId, values);
    });
  },
};
