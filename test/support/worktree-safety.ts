/**
 * Helpers for the worktree-safety e2e tests (issue 26): a byte-for-byte snapshot of everything of the user's in a
 * repository (HEAD, branches, index, working tree, in-progress operation), and a server with the scripted ACP agent as
 * leader and worker, whose script a test writes (test/fixtures/agents/scripted-agent.ts).
 */
import { createHash } from "node:crypto";
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { git } from "./git-repo.js";
import { type ServerHandle, startServer, tempDir } from "./server-process.js";
import { SCRIPTED_AGENT_ARGS } from "./scripted-agent-program.js";

/** Files in a git directory that make up an operation in progress (merge, rebase, cherry-pick, revert, bisect). */
const OPERATION_FILES = [
  "MERGE_HEAD",
  "MERGE_MSG",
  "MERGE_MODE",
  "AUTO_MERGE",
  "CHERRY_PICK_HEAD",
  "REVERT_HEAD",
  "BISECT_LOG",
  "BISECT_START",
  "ORIG_HEAD",
  "rebase-merge",
  "rebase-apply",
  "sequencer",
];

function digestTree(dir: string, skip: (name: string) => boolean, out: string[], prefix = ""): void {
  for (const name of readdirSync(dir).sort()) {
    if (skip(prefix + name)) continue;
    const path = join(dir, name);
    const info = lstatSync(path);
    if (info.isSymbolicLink()) out.push(`${prefix}${name} -> ${readlinkSync(path)}`);
    else if (info.isDirectory()) digestTree(path, () => false, out, `${prefix}${name}/`);
    else
      out.push(
        `${prefix}${name} ${info.mode.toString(8)} ${createHash("sha256").update(readFileSync(path)).digest("hex")}`,
      );
  }
}

/** Everything of the user's, byte for byte: compare two snapshots with `toEqual`. Reads only (no index refresh). */
export interface UserState {
  head: string;
  symbolicHead: string;
  branches: string;
  index: string;
  indexBytes: string;
  workingTree: string[];
  operation: string[];
}

/**
 * Takes the snapshot of the user's checkout at `repo`: its branches other than the products' `acp/*`, and its working
 * tree but the fixture agents' `*.pid` files.
 */
export function userState(repo: string): UserState {
  const gitDir = join(repo, ".git");
  const operation: string[] = [];
  for (const name of OPERATION_FILES) {
    const path = join(gitDir, name);
    if (!existsSync(path)) continue;
    if (lstatSync(path).isDirectory()) digestTree(path, () => false, operation, `${name}/`);
    else operation.push(`${name} ${readFileSync(path, "utf8")}`);
  }
  const workingTree: string[] = [];
  // `*.pid`: the scripted leader's own pid file, written in the product's cwd by the fixture (ignored by git).
  digestTree(repo, (name) => name === ".git" || name.endsWith(".pid"), workingTree);
  return {
    head: readFileSync(join(gitDir, "HEAD"), "utf8"),
    symbolicHead: git(repo, "rev-parse", "HEAD"),
    branches: git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
      .split("\n")
      .filter((line) => !line.startsWith("refs/heads/acp/"))
      .join("\n"),
    index: git(repo, "--no-optional-locks", "ls-files", "-s", "--debug"),
    indexBytes: existsSync(join(gitDir, "index"))
      ? createHash("sha256")
          .update(readFileSync(join(gitDir, "index")))
          .digest("hex")
      : "",
    workingTree,
    operation,
  };
}

export interface ScriptedServer {
  server: ServerHandle;
  /** Rewrites the scripted agents' script (re-read at every prompt). */
  setScript(script: unknown): void;
  logFile: string;
  base: string;
}

/** The leader part of a script that plans nothing of its own (the test confirms explicit tasks) and gives up. */
export const GIVE_UP_LEADER = {
  plan: [
    {
      text: "Plan.",
      json: {
        name: "Plan",
        summary: "Placeholder.",
        instances: [{ instanceId: "w1", agentId: "scripted", role: "worker" }],
        tasks: [{ taskId: "a", title: "A", description: "A.", instanceId: "w1", dependsOn: [] }],
      },
    },
  ],
  consult: [{ text: "Giving up.", json: { decision: "giveUp" } }],
};

/** Starts a server whose agents `lead` and `scripted` are the scripted agent, with `script` as their script. */
export async function scriptedServer(
  script: unknown,
  options: { statePath?: string; base?: string; config?: Record<string, unknown> } = {},
): Promise<ScriptedServer> {
  const base = options.base ?? tempDir("acp-orch-wtsafe-");
  const scriptFile = join(base, "script.json");
  const logFile = join(base, "agent.jsonl");
  const setScript = (s: unknown) => writeFileSync(scriptFile, JSON.stringify({ log: logFile, ...(s as object) }));
  setScript(script);
  const config = join(base, "acp-orchestrator.json");
  writeFileSync(
    config,
    JSON.stringify({
      agents: ["lead", "scripted"].map((agentId) => ({
        agentId,
        role: agentId === "lead" ? "leader" : "worker",
        command: process.execPath,
        args: [...SCRIPTED_AGENT_ARGS],
        env: { SCRIPTED_AGENT_SCRIPT: scriptFile },
      })),
      leader: "lead",
      ...(options.config ?? {}),
    }),
  );
  const server = await startServer({
    cwd: base,
    args: ["--config", config],
    ...(options.statePath !== undefined ? { statePath: options.statePath } : {}),
  });
  return { server, setScript, logFile, base };
}

/** Plans (the leader's placeholder), then confirms `tasks` on one `scripted` instance; resolves with the product id. */
export async function planProduct(
  server: ServerHandle,
  repo: string,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const { productId } = await server.request<{ productId: string }>("product.plan", {
    goal: "Worktree safety",
    cwd: repo,
    ...extra,
  });
  await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId, 60_000);
  return productId;
}

/**
 * Resolves with the product's phase once it is no longer `executing` (polls `product.status`; up to `limitMs`, 2
 * minutes unless given: a bound for a hang, not a measure).
 */
export async function settledPhase(server: ServerHandle, productId: string, limitMs = 120_000): Promise<string> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const status = await server.request<{ phase: string }>("product.status", { productId });
    if (status.phase !== "executing" && status.phase !== "awaiting_confirmation") return status.phase;
    if (Date.now() > deadline) throw new Error(`product ${productId} still ${status.phase} after ${limitMs / 1000} s`);
    await new Promise((done) => setTimeout(done, 200));
  }
}

/** Confirms `tasks` (one `scripted` worker seat) and resolves with the phase that stops the run. */
export async function confirmAndSettle(server: ServerHandle, productId: string, tasks: unknown[]): Promise<string> {
  await server.request("product.confirm", {
    productId,
    instances: [{ instanceId: "w1", agentId: "scripted", role: "worker" }],
    tasks,
  });
  return settledPhase(server, productId);
}

/** One task on the scripted worker seat, failing for good at its first failure. */
export const task = (taskId: string, dependsOn: string[] = []) => ({
  taskId,
  title: `Task ${taskId}`,
  description: `Do ${taskId}.`,
  instanceId: "w1",
  dependsOn,
  maxAttempts: 1,
});

/** The scripted agent's log lines. */
export function agentLog(logFile: string): Record<string, unknown>[] {
  if (!existsSync(logFile)) return [];
  return readFileSync(logFile, "utf8")
    .split("\n")
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The server still answers (it did not crash) and its process runs. */
export async function expectAlive(server: ServerHandle): Promise<boolean> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return false;
  await server.request("product.list", {});
  return true;
}
