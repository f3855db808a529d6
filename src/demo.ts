/**
 * `acp-orchestrator demo`: spawns the real server as a subprocess and drives it as an ACP client (the official SDK)
 * through plan → confirm → execution in a fresh temporary git workspace with the built-in worker, printing a line per
 * task status change and a final table. This is a client program: it prints to its own stdout, never the server's.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const DEFAULT_GOAL = [
  "Write the project documentation:",
  "1. Describe the architecture",
  "2. Document the public API",
  "3. Then write a getting-started guide based on the API",
  "4. Finally review everything for consistency",
].join("\n");

interface DemoOptions {
  goal?: string;
  keep: boolean;
  /** Where to print (default: process.stdout). */
  out?: (line: string) => void;
}

type Params = Record<string, unknown>;

/** Runs the demo; resolves with the process exit code (0 when the product completed). */
export async function runDemo(options: DemoOptions): Promise<number> {
  const print = options.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  const goal = options.goal ?? DEFAULT_GOAL;
  const root = mkdtempSync(join(tmpdir(), "acp-orchestrator-demo-"));
  const workspace = join(root, "workspace");
  spawnSync("git", ["init", "-q", workspace], { stdio: "ignore" });
  spawnSync("mkdir", ["-p", workspace]);
  const cliPath = fileURLToPath(new URL("./cli.js", import.meta.url));
  const fromSource = import.meta.url.endsWith(".ts");
  const args = fromSource
    ? ["--import", "tsx", fileURLToPath(new URL("./cli.ts", import.meta.url))]
    : [cliPath];
  const child = spawn(process.execPath, [...args, "serve", "--state", join(root, "state.db"), "--log-level", "warn"], {
    cwd: workspace,
    stdio: ["pipe", "pipe", "inherit"],
  });
  print(`workspace: ${workspace}`);
  print(`goal:\n  ${goal.split("\n").join("\n  ")}\n`);

  const waiters: { match: (method: string, p: Params) => boolean; resolve: (p: Params) => void }[] = [];
  const waitFor = (match: (method: string, p: Params) => boolean): Promise<Params> =>
    new Promise((resolve) => waiters.push({ match, resolve }));
  const titles = new Map<string, string>();

  const app = client({ name: "acp-orchestrator-demo" }).onNotification("*", ({ method, params }) => {
    const p = (params ?? {}) as Params;
    if (method === "product.taskStatus") {
      const id = String(p.taskId);
      const error = p.error ? ` — ${String(p.error)}` : "";
      print(`  [${String(p.status).padEnd(9)}] ${id} ${titles.get(id) ?? ""} (attempt ${String(p.attempt)})${error}`);
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
  try {
    code = await app.connectWith(stream, async (ctx) => {
      const init = await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
      print(`server: ${init.agentInfo?.name ?? "?"} ${init.agentInfo?.version ?? ""}, protocol ${init.protocolVersion}`);
      const planReady = waitFor((m) => m === "product.planReady" || m === "product.planFailed");
      const planned = await ctx.request<{ productId: string }>("product.plan", { goal, cwd: workspace });
      const productId = planned.productId;
      const ready = await planReady;
      if (!ready.plan) {
        print(`planning failed: ${String(ready.error)}`);
        return 1;
      }
      const plan = ready.plan as { tasks: { taskId: string; title: string; dependsOn: string[]; instanceId: string }[] };
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
        tasks: { taskId: string; title: string; status: string; attempts: number }[];
        checkpoints: number;
      }>("product.status", { productId });
      print(`\n${String(done.summary)}\n`);
      print(`${"task".padEnd(6)} ${"status".padEnd(10)} ${"attempts".padEnd(8)} title`);
      for (const t of status.tasks) {
        print(`${t.taskId.padEnd(6)} ${t.status.padEnd(10)} ${String(t.attempts).padEnd(8)} ${t.title}`);
      }
      let notes: string[] = [];
      try {
        notes = readdirSync(join(workspace, "notes")).sort();
      } catch {
        notes = [];
      }
      print(`\nnotes written to ${join(workspace, "notes")}:`);
      for (const n of notes) print(`  ${n}`);
      print(`checkpoints: ${status.checkpoints}`);
      return status.phase === "completed" && notes.length > 0 ? 0 : 1;
    });
  } finally {
    child.stdin.end();
    await new Promise<void>((resolve) => {
      if (child.exitCode !== null) resolve();
      else child.once("exit", () => resolve());
    });
    if (!options.keep) rmSync(root, { recursive: true, force: true });
  }
  print(options.keep ? `\nkept: workspace and state under ${root}` : `\nremoved ${root} (run with --keep to keep the workspace and state)`);
  print(code === 0 ? "\ndemo: OK" : "\ndemo: FAILED");
  return code;
}
