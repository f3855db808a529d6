/**
 * Test support for the dashboard (issue 29): a real server (`acp-orchestrator serve`) that plans and drives a product
 * in a real git repository (worktree isolation) whose tasks are scripted worker agents (test/fixtures/agents), and the
 * `ui` command serving the same store from another process. A task's script may wait at a gate file, so a test
 * decides when a running task moves on.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeRepo } from "../support/git-repo.js";
import { CLI, startServer, tempDir, type ServerHandle } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

export interface PlanTask {
  taskId: string;
  title: string;
  dependsOn: string[];
}

export interface LiveProduct {
  dir: string;
  state: string;
  repo: string;
  server: ServerHandle;
  productId: string;
  plan: { tasks: PlanTask[] };
  /** Lets the tasks of `ids` past their gate. */
  open(ids: string[]): void;
  gate(id: string): string;
}

export interface LiveProductOptions {
  /** The goal (bullets become tasks t1, t2, …). */
  goal: string;
  /** The worker script's `tasks` (scripted-agent.ts), given the gate path of a task id. */
  tasks: (gate: (id: string) => string) => Record<string, unknown>;
  /** The plan a scripted leader answers with (instances on agent `gated`); default: the built-in leader's. */
  plan?: { name: string; summary: string; instances: unknown[]; tasks: unknown[] };
  /** Confirm the plan (default true). */
  confirm?: boolean;
  state?: string;
}

/** Starts a server in a fresh repository and plans (and by default confirms) `goal` on it. */
export async function startLiveProduct(options: LiveProductOptions): Promise<LiveProduct> {
  const dir = tempDir("acp-orch-ui-live-");
  const repo = makeRepo({ "README.md": "# Project\n", "src/app.txt": "one\ntwo\nthree\n" });
  const gates = join(dir, "gates");
  mkdirSync(gates);
  const gate = (id: string) => join(gates, id);
  const scriptFile = join(dir, "script.json");
  writeFileSync(
    scriptFile,
    JSON.stringify({
      worker: { tasks: options.tasks(gate) },
      ...(options.plan ? { leader: { plan: [{ text: "The plan.", json: options.plan }] } } : {}),
    }),
  );
  const agent = (agentId: string, role: string) => ({
    agentId,
    role,
    command: process.execPath,
    args: [...SCRIPTED_AGENT_ARGS],
    env: { SCRIPTED_AGENT_SCRIPT: scriptFile },
  });
  const configFile = join(dir, "acp-orchestrator.json");
  writeFileSync(
    configFile,
    JSON.stringify(
      options.plan
        ? { agents: [agent("lead", "leader"), agent("gated", "worker")], leader: "lead" }
        : { agents: [agent("gated", "worker")] },
    ),
  );
  const state = options.state ?? join(dir, "state.db");
  const server = await startServer({
    statePath: state,
    cwd: repo,
    args: ["--config", configFile, "--log-level", "warn"],
  });
  const ready = server.waitFor((n) => n.method === "product.planReady", 60_000);
  const { productId } = await server.request<{ productId: string }>("product.plan", {
    goal: options.goal,
    cwd: repo,
    allowedAgents: ["gated"],
  });
  const plan = (await ready).params.plan as { tasks: PlanTask[] };
  if (options.confirm !== false) await server.request("product.confirm", { productId });
  return {
    dir,
    state,
    repo,
    server,
    productId,
    plan,
    gate,
    open: (ids) => ids.forEach((id) => writeFileSync(gate(id), "")),
  };
}

/** Polls `product.status` until task `taskId` has status `status` (the server's own answer, not a notification). */
export async function waitForTask(
  server: ServerHandle,
  productId: string,
  taskId: string,
  status: string,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await server.request<{ tasks: { taskId: string; status: string }[] }>("product.status", { productId });
    if (s.tasks.find((t) => t.taskId === taskId)?.status === status) return;
    if (Date.now() > deadline)
      throw new Error(`task ${taskId} of ${productId} is not ${status}: ${JSON.stringify(s.tasks)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface UiProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  /** SIGTERMs it and resolves with its exit code. */
  stop(): Promise<number | null>;
}

/** The `ui` command as a subprocess; resolves once it printed its address (the URL it prints, secret included). */
export async function startUi(state: string, args: string[] = []): Promise<UiProcess> {
  const child = spawn(process.execPath, [CLI, "ui", "--state", state, "--port", "0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => {
      stdout += d.toString();
      const m = /dashboard: (http:\/\/\S+)/.exec(stdout);
      if (m) resolve(m[1] as string);
    });
    child.once("exit", (code) => reject(new Error(`ui exited with ${String(code)} before listening: ${stderr}`)));
  });
  return {
    url,
    child,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode !== null) return child.exitCode;
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      return exited;
    },
  };
}
