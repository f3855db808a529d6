/**
 * `acp-orchestrator demo`: spawns the real server as a subprocess and drives it as an ACP client (the official SDK)
 * through plan → confirm → execution in a fresh temporary git workspace (the built-in worker, or the agents of
 * `--config`), printing a line per task status change (with the attempt's duration) and a final table: each task's
 * duration, its parallel lane (assignLanes: tasks that ran at the same time are in different lanes), a lane timeline
 * and each task's last output line (issue 15). The workspace and state are kept unless `clean`, and their paths are
 * printed. This is a client program: it prints to its own stdout, never the server's.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve as resolvePath } from "node:path";
import type { TaskState } from "../protocol/common.js";
import { Readable, Writable } from "node:stream";
import { packageLayout, packageModulePath } from "./package-files.js";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";
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

/** Runs the demo; resolves with the process exit code (0 when the product completed). */
export async function runDemo(options: DemoOptions): Promise<number> {
  const print = options.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  const goal = options.goal ?? DEFAULT_GOAL;
  // With a config, the demo's tasks go to its worker agents (not to the built-in worker the server also offers).
  let allowedAgents: string[] | undefined;
  if (options.config !== undefined) {
    try {
      const { config } = await loadAgentConfig({ configPath: resolvePath(options.config), cwd: process.cwd() });
      const workers = config.agents.filter((a) => a.role !== "leader").map((a) => a.agentId);
      if (workers.length > 0) allowedAgents = workers;
    } catch (err) {
      print(`demo: ${err instanceof Error ? err.message : String(err)}`);
      return 1;
    }
  }
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
  const serverArgs = ["serve", "--state", state, "--log-level", options.logLevel ?? "warn"];
  if (options.config !== undefined) serverArgs.push("--config", resolvePath(options.config));
  const child = spawn(process.execPath, [...args, ...serverArgs], {
    cwd: workspace,
    stdio: ["pipe", "pipe", "inherit"],
  });
  print(`workspace: ${workspace}`);
  print(`state:     ${state.replace(/\/\/([^:/@]+):[^@]*@/, "//$1:***@")}`);
  if (options.config !== undefined) print(`config:    ${resolvePath(options.config)}`);
  print(`goal:\n  ${goal.split("\n").join("\n  ")}\n`);

  const waiters: { match: (method: string, p: Params) => boolean; resolve: (p: Params) => void }[] = [];
  const waitFor = (match: (method: string, p: Params) => boolean): Promise<Params> =>
    new Promise((resolve) => waiters.push({ match, resolve }));
  const titles = new Map<string, string>();
  const startedAt = new Map<string, number>();

  const app = client({ name: "acp-orchestrator-demo" }).onNotification("*", ({ method, params }) => {
    const p = (params ?? {}) as Params;
    if (method === "product.taskStatus") {
      const id = String(p.taskId);
      const error = p.error ? ` — ${String(p.error)}` : "";
      if (p.status === "running") startedAt.set(id, Date.now());
      const began = startedAt.get(id);
      const took = p.status !== "running" && began !== undefined ? `, ${formatDuration(Date.now() - began)}` : "";
      print(
        `  [${String(p.status).padEnd(9)}] ${id} ${titles.get(id) ?? ""} (attempt ${String(p.attempt)}${took})${error}`,
      );
    } else if (method === "product.leaderMessage") {
      print(`leader: ${String(p.message)}`);
    } else if (method === "product.checkpoint") {
      // one per completed task; quiet
    }
    for (const w of [...waiters]) {
      if (w.match(method, p)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(p);
      }
    }
  });

  const stream = ndJsonStream(
    Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
  );
  let code = 1;
  let lookAgain: string | undefined;
  try {
    code = await app.connectWith(stream, async (ctx) => {
      const init = await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
      print(
        `server: ${init.agentInfo?.name ?? "?"} ${init.agentInfo?.version ?? ""}, protocol ${init.protocolVersion}`,
      );
      const planReady = waitFor((m) => m === "product.planReady" || m === "product.planFailed");
      const planned = await ctx.request<{ productId: string }>("product.plan", {
        goal,
        cwd: workspace,
        ...(allowedAgents ? { allowedAgents } : {}),
      });
      const productId = planned.productId;
      const ready = await planReady;
      if (!ready.plan) {
        print(`planning failed: ${String(ready.error)}`);
        return 1;
      }
      const plan = ready.plan as {
        tasks: { taskId: string; title: string; dependsOn: string[]; instanceId: string }[];
      };
      print(`\nplan (${plan.tasks.length} tasks):`);
      for (const t of plan.tasks) {
        titles.set(t.taskId, t.title);
        const deps = t.dependsOn.length > 0 ? ` after ${t.dependsOn.join(", ")}` : "";
        print(`  ${t.taskId}  ${t.title}${deps}  [${t.instanceId}]`);
      }
      print("\nconfirming; execution:");
      const completed = waitFor((m, p) => m === "product.completed" && p.productId === productId);
      await ctx.request("product.confirm", { productId });
      const done = await completed;
      const status = await ctx.request<{
        phase: string;
        plan?: { instances: { instanceId: string; agentId: string }[] };
        tasks: TaskState[];
        checkpoints: number;
      }>("product.status", { productId });
      print(`\n${String(done.summary)}\n`);
      const now = Date.now();
      const lanes = assignLanes(status.tasks, now);
      const agents = new Map((status.plan?.instances ?? []).map((i) => [i.instanceId, i.agentId]));
      print(
        table(
          ["TASK", "STATUS", "ATTEMPTS", "DURATION", "LANE", "AGENT", "TITLE"],
          status.tasks.map((t) => {
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
          }),
        ),
      );
      if (lanes.count > 0) {
        print(`\nparallel lanes (${lanes.count === 1 ? "one task at a time" : `up to ${lanes.count} tasks at once`}):`);
        print(laneTimeline(status.tasks, now).trimEnd());
      }
      print("\nlast output line of each task:");
      for (const t of status.tasks) print(`  ${t.taskId}  ${lastLine(t.output, 110) || "(no output)"}`);
      let notes: string[] = [];
      try {
        notes = readdirSync(join(workspace, "notes")).sort();
      } catch {
        notes = [];
      }
      if (notes.length > 0 || options.config === undefined) {
        print(`\nnotes written to ${join(workspace, "notes")}:`);
        for (const n of notes) print(`  ${n}`);
      }
      print(`checkpoints: ${status.checkpoints}`);
      print(`product: ${productId}`);
      lookAgain = `acp-orchestrator status ${productId} --state ${shellQuote(state)}  (or: acp-orchestrator ui --state ${shellQuote(state)})`;
      // The built-in worker writes a note per task; other agents do what they do.
      return status.phase === "completed" && (notes.length > 0 || options.config !== undefined) ? 0 : 1;
    });
  } finally {
    child.stdin.end();
    await new Promise<void>((resolve) => {
      if (child.exitCode !== null) resolve();
      else child.once("exit", () => resolve());
    });
    if (options.clean) rmSync(root, { recursive: true, force: true });
  }
  if (options.clean) {
    print(`\nremoved ${root}${options.state !== undefined ? ` (the state in ${state} stays)` : ""}`);
  } else {
    print(`\nkept: workspace ${workspace}, state ${state} (--clean removes them)`);
    if (lookAgain !== undefined) print(`look again: ${lookAgain}`);
  }
  print(code === 0 ? "\ndemo: OK" : "\ndemo: FAILED");
  return code;
}

/** `text` quoted for a POSIX shell when it needs it. */
function shellQuote(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`;
}
