/**
 * `acp-orchestrator demo`: spawns the real server as a subprocess and drives it as an ACP client (the official SDK)
 * through plan → confirm → execution in a fresh temporary git workspace (the built-in worker, or the agents of
 * `--config`), printing a line per task status change (with the attempt's duration) and a final table: each task's
 * duration, its parallel lane (assignLanes: tasks that ran at the same time are in different lanes), a lane timeline
 * and each task's last output line (issue 15). The workspace and state are kept unless `clean`, and their paths are
 * printed. This is a client program: it prints to its own stdout, never the server's.
 */
import { spawn, spawnSync, type ChildProcessByStdio } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve as resolvePath } from "node:path";
import type { TaskState } from "../protocol/common.js";
import { Readable, Writable } from "node:stream";
import { packageLayout, packageModulePath } from "./package-files.js";
import { client, methods, ndJsonStream, type ClientContext } from "@agentclientprotocol/sdk";
import { loadAgentConfig } from "./adapters/agents/registry.js";
import { formatDuration, lastLine, table, taskDurationMs } from "./operator/format.js";
import { assignLanes, laneTimeline } from "./operator/lanes.js";

/** The goal the demo plans when none is given: four items, one of them beside the first ("In parallel"). */
export const DEFAULT_GOAL = [
  "Write the project documentation:",
  "1. Describe the architecture",
  "2. In parallel, document the public API",
  "3. Then write a getting-started guide based on the API",
  "4. Finally review everything for consistency",
].join("\n");

export interface DemoOptions {
  goal?: string;
  /** Remove the temporary folder (workspace, and the state file unless `state` is given) at the end. */
  clean: boolean;
  /** A config file for the server (its agents run the demo); default: the built-in leader and worker. */
  config?: string;
  /** The store the server writes (SQLite path or postgres:// URL); default: a state file in the temporary folder. */
  state?: string;
  /** The server's log level (default warn); its logs go to stderr. */
  logLevel?: string;
  /** Where to print (default: process.stdout). */
  out?: (line: string) => void;
}

type Params = Record<string, unknown>;
type Print = (line: string) => void;

/** The plan of `product.planReady`, as far as the demo reads it. */
interface DemoPlan {
  /** The plan's name: the product's title (issue 28). */
  name: string;
  tasks: { taskId: string; title: string; dependsOn: string[]; instanceId: string }[];
}

/** The result of `product.status`, as far as the demo reads it. */
interface DemoStatus {
  phase: string;
  plan?: { instances: { instanceId: string; agentId: string }[] };
  tasks: TaskState[];
  checkpoints: number;
}

/** The demo's server process and where it works. */
interface DemoServer {
  readonly root: string;
  readonly workspace: string;
  /** The store it writes: a SQLite path or a postgres:// URL. */
  readonly state: string;
  readonly child: ChildProcessByStdio<Writable, Readable, null>;
}

/** Runs the demo; resolves with the process exit code (0 when the product completed). */
export async function runDemo(options: DemoOptions): Promise<number> {
  const print = options.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  const goal = options.goal ?? DEFAULT_GOAL;
  let allowedAgents: string[] | undefined;
  try {
    allowedAgents = await configuredWorkers(options.config);
  } catch (err) {
    print(`demo: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
  const server = startDemoServer(options);
  print(`workspace: ${server.workspace}`);
  print(`state:     ${server.state.replace(/\/\/([^:/@]+):[^@]*@/, "//$1:***@")}`);
  if (options.config !== undefined) print(`config:    ${resolvePath(options.config)}`);
  print(`goal:\n  ${goal.split("\n").join("\n  ")}\n`);

  const notifications = new DemoNotifications(print);
  const app = client({ name: "acp-orchestrator-demo" }).onNotification("*", ({ method, params }) =>
    notifications.handle(method, (params ?? {}) as Params),
  );
  const stream = ndJsonStream(
    Writable.toWeb(server.child.stdin) as WritableStream<Uint8Array>,
    Readable.toWeb(server.child.stdout) as ReadableStream<Uint8Array>,
  );
  let outcome: DemoOutcome = { code: 1 };
  try {
    outcome = await app.connectWith(stream, (ctx) =>
      driveProduct(ctx, { goal, allowedAgents, options, server, notifications, print }),
    );
  } finally {
    await stopDemoServer(server.child);
    if (options.clean) rmSync(server.root, { recursive: true, force: true });
  }
  printClosing(print, options, server, outcome);
  return outcome.code;
}

/**
 * With a config, the demo's tasks go to its worker agents (not to the built-in worker the server also offers): their
 * agent ids, or undefined without a config or when it names no worker. Throws when the config cannot be loaded.
 */
async function configuredWorkers(config: string | undefined): Promise<string[] | undefined> {
  if (config === undefined) return undefined;
  const loaded = await loadAgentConfig({ configPath: resolvePath(config), cwd: process.cwd() });
  const workers = loaded.config.agents.filter((a) => a.role !== "leader").map((a) => a.agentId);
  return workers.length > 0 ? workers : undefined;
}

/**
 * Creates the temporary folder with a fresh git workspace and spawns the package's CLI `serve` in it (stdin and
 * stdout piped for ACP, stderr inherited for its logs). The state is `options.state` or a file in the folder.
 */
function startDemoServer(options: DemoOptions): DemoServer {
  const root = mkdtempSync(join(tmpdir(), "acp-orchestrator-demo-"));
  const workspace = join(root, "workspace");
  spawnSync("git", ["init", "-q", workspace], { stdio: "ignore" });
  spawnSync("mkdir", ["-p", workspace]);
  // The package's CLI (src/package-files.ts), not a sibling of this module: the bundle moves this module.
  const layout = packageLayout();
  const cliPath = packageModulePath("cli", layout);
  const args = layout.fromSource ? ["--import", "tsx", cliPath] : [cliPath];
  const state =
    options.state === undefined
      ? join(root, "state.db")
      : /^postgres(ql)?:\/\//.test(options.state)
        ? options.state
        : resolvePath(options.state);
  // Plain log lines beside the demo's own output, never JSON (issue 28: human commands print human lines only).
  const serverArgs = ["serve", "--state", state, "--log-level", options.logLevel ?? "warn", "--log-format", "pretty"];
  if (options.config !== undefined) serverArgs.push("--config", resolvePath(options.config));
  const child = spawn(process.execPath, [...args, ...serverArgs], {
    cwd: workspace,
    stdio: ["pipe", "pipe", "inherit"],
  });
  return { root, workspace, state, child };
}

/** Closes the server's stdin and waits until it exited. */
async function stopDemoServer(child: DemoServer["child"]): Promise<void> {
  child.stdin.end();
  await new Promise<void>((resolve) => {
    if (child.exitCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
}

/**
 * The demo's view of the server's notifications: prints task status changes (with the attempt's duration) and leader
 * messages, and resolves the waits registered with `waitFor` when a fitting notification arrives.
 */
class DemoNotifications {
  /** Task titles by task id, filled from the plan, printed beside each status change. */
  readonly titles = new Map<string, string>();
  readonly #startedAt = new Map<string, number>();
  readonly #waiters: { match: (method: string, p: Params) => boolean; resolve: (p: Params) => void }[] = [];

  readonly #print: Print;

  constructor(print: Print) {
    this.#print = print;
  }

  /** Resolves with the params of the first later notification `match` accepts. */
  waitFor(match: (method: string, p: Params) => boolean): Promise<Params> {
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }

  /** Handles one notification: prints what the demo shows of it, then resolves the waits it fits. */
  handle(method: string, p: Params): void {
    if (method === "product.taskStatus") this.#printTaskStatus(p);
    else if (method === "product.leaderMessage") this.#print(`leader: ${String(p.message)}`);
    // product.checkpoint: one per completed task; quiet
    for (const w of [...this.#waiters]) {
      if (w.match(method, p)) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve(p);
      }
    }
  }

  #printTaskStatus(p: Params): void {
    const id = String(p.taskId);
    const error = p.error ? ` — ${String(p.error)}` : "";
    if (p.status === "running") this.#startedAt.set(id, Date.now());
    const began = this.#startedAt.get(id);
    const took = p.status !== "running" && began !== undefined ? `, ${formatDuration(Date.now() - began)}` : "";
    this.#print(
      `  [${String(p.status).padEnd(9)}] ${id} ${this.titles.get(id) ?? ""} (attempt ${String(p.attempt)}${took})${error}`,
    );
  }
}

/** How the demo's product run ended: the exit code, and the command to look at it again (once it got that far). */
interface DemoOutcome {
  code: number;
  lookAgain?: string;
}

/** What `driveProduct` works with. */
interface DemoRun {
  goal: string;
  allowedAgents: string[] | undefined;
  options: DemoOptions;
  server: DemoServer;
  notifications: DemoNotifications;
  print: Print;
}

/**
 * The ACP session of the demo: initialize, `product.plan` (waits for planReady or planFailed), prints the plan,
 * `product.confirm`, waits for `product.completed`, then prints the report. Code 0 when the product completed and,
 * with the built-in worker, notes were written.
 */
async function driveProduct(ctx: ClientContext, run: DemoRun): Promise<DemoOutcome> {
  const { print, notifications, server } = run;
  const init = await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  print(`server: ${init.agentInfo?.name ?? "?"} ${init.agentInfo?.version ?? ""}, protocol ${init.protocolVersion}`);
  const planReady = notifications.waitFor((m) => m === "product.planReady" || m === "product.planFailed");
  const planned = await ctx.request<{ productId: string }>("product.plan", {
    goal: run.goal,
    cwd: server.workspace,
    ...(run.allowedAgents ? { allowedAgents: run.allowedAgents } : {}),
  });
  const productId = planned.productId;
  const ready = await planReady;
  if (!ready.plan) {
    print(`planning failed: ${String(ready.error)}`);
    return { code: 1 };
  }
  printPlan(print, ready.plan as DemoPlan, notifications.titles);
  print("\nconfirming; execution:");
  const completed = notifications.waitFor((m, p) => m === "product.completed" && p.productId === productId);
  await ctx.request("product.confirm", { productId });
  const done = await completed;
  const status = await ctx.request<DemoStatus>("product.status", { productId });
  print(`\n${String(done.summary)}\n`);
  printTaskTable(print, status);
  const notes = printNotes(print, server.workspace, run.options.config !== undefined);
  print(`checkpoints: ${status.checkpoints}`);
  print(`product: ${productId}`);
  const state = shellQuote(server.state);
  const lookAgain = `acp-orchestrator status ${productId} --state ${state}  (or: acp-orchestrator ui --state ${state})`;
  // The built-in worker writes a note per task; other agents do what they do.
  const ok = status.phase === "completed" && (notes.length > 0 || run.options.config !== undefined);
  return { code: ok ? 0 : 1, lookAgain };
}

/** Prints the plan's tasks (id, title, dependencies, instance) and records their titles for the status lines. */
function printPlan(print: Print, plan: DemoPlan, titles: Map<string, string>): void {
  print(`\nplan "${plan.name}" (${plan.tasks.length} tasks):`);
  for (const t of plan.tasks) {
    titles.set(t.taskId, t.title);
    const deps = t.dependsOn.length > 0 ? ` after ${t.dependsOn.join(", ")}` : "";
    print(`  ${t.taskId}  ${t.title}${deps}  [${t.instanceId}]`);
  }
}

/** Prints the final table (duration, lane, agent per task), the lane timeline and each task's last output line. */
function printTaskTable(print: Print, status: DemoStatus): void {
  const now = Date.now();
  const lanes = assignLanes(status.tasks, now);
  const agents = new Map((status.plan?.instances ?? []).map((i) => [i.instanceId, i.agentId]));
  const rows = status.tasks.map((t) => {
    const d = taskDurationMs(t, now);
    return [
      t.taskId,
      t.status,
      String(t.attempts),
      d === undefined ? "-" : formatDuration(d),
      String(lanes.lanes.get(t.taskId) ?? "-"),
      agents.get(t.instanceId) ?? t.instanceId,
      t.title,
    ];
  });
  print(table(["TASK", "STATUS", "ATTEMPTS", "DURATION", "LANE", "AGENT", "TITLE"], rows));
  if (lanes.count > 0) {
    print(`\nparallel lanes (${lanes.count === 1 ? "one task at a time" : `up to ${lanes.count} tasks at once`}):`);
    print(laneTimeline(status.tasks, now).trimEnd());
  }
  print("\nlast output line of each task:");
  for (const t of status.tasks) print(`  ${t.taskId}  ${lastLine(t.output, 110) || "(no output)"}`);
}

/**
 * Prints the notes the workers wrote in the workspace's notes/ folder (always with the built-in worker, which writes
 * one per task; with configured agents only when there are some) and returns their file names, sorted.
 */
function printNotes(print: Print, workspace: string, configured: boolean): string[] {
  let notes: string[];
  try {
    notes = readdirSync(join(workspace, "notes")).sort();
  } catch {
    notes = [];
  }
  if (notes.length > 0 || !configured) {
    print(`\nnotes written to ${join(workspace, "notes")}:`);
    for (const n of notes) print(`  ${n}`);
  }
  return notes;
}

/** Prints what was removed or kept (and how to look at the product again), then the verdict line. */
function printClosing(print: Print, options: DemoOptions, server: DemoServer, outcome: DemoOutcome): void {
  if (options.clean) {
    print(`\nremoved ${server.root}${options.state !== undefined ? ` (the state in ${server.state} stays)` : ""}`);
  } else {
    print(`\nkept: workspace ${server.workspace}, state ${server.state} (--clean removes them)`);
    if (outcome.lookAgain !== undefined) print(`look again: ${outcome.lookAgain}`);
  }
  print(outcome.code === 0 ? "\ndemo: OK" : "\ndemo: FAILED");
}

/** `text` quoted for a POSIX shell when it needs it. */
function shellQuote(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`;
}
