/**
 * Permissions under isolation, over real stdio with a real git repository and the scripted ACP worker (issue 12, Build
 * 7 and "Must show"; README "Permissions under isolation"): an isolated worker runs in its own worktree, which is its
 * fs confinement root, so a write into the user's repository or next to the worktree is refused; terminals are neither
 * advertised nor served; with no `permissions` in the config file `read` and `edit` are allowed and `execute` is
 * refused (the task fails naming the refused action and the policy that refused it), unless the config allows it.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo, worktreePaths } from "../support/git-repo.js";
import { startServer, tempDir } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

interface TaskState {
  taskId: string;
  status: string;
  error?: string;
  output?: string;
  refusedPermissions?: { kind: string; title: string; by: string }[];
  workspace?: { path: string; baseCommit: string; commit?: string; changedFiles?: string[] };
}
interface LogLine {
  pid: number;
  event: string;
  role?: string;
  action?: string;
  path?: string;
  command?: string;
  title?: string;
  chosen?: string;
  outcome?: string;
  error?: string;
  cwd?: string;
}

const WORKER = { instanceId: "w1", agentId: "scripted", role: "worker" };
const PROBE_TASK = {
  taskId: "a",
  title: "Probe",
  description: "Probe the workspace.",
  instanceId: "w1",
  dependsOn: [],
  maxAttempts: 1,
};

/** One worker task that asks for read, edit and execute, tries a terminal, and writes inside and outside its tree. */
async function runProbe(
  permissions: unknown,
): Promise<{ repo: string; task: TaskState; log: LogLine[]; phase: string }> {
  const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
  const headBefore = git(repo, "rev-parse", "HEAD");
  const base = tempDir("acp-orch-confine-");
  const logFile = join(base, "agent.jsonl");
  const ask = (title: string, kind: string) => ({ permission: { title, kind } });
  const script = join(base, "workers.json");
  writeFileSync(
    script,
    JSON.stringify({
      log: logFile,
      // The leader plans the one task and gives up on a failure, so a failed task stays in the status as it failed.
      leader: {
        plan: [
          {
            text: "One probe.",
            json: { name: "Probe", summary: "Probe the worktree.", instances: [WORKER], tasks: [PROBE_TASK] },
          },
        ],
        consult: [{ text: "Giving up.", json: { decision: "giveUp" } }],
      },
      worker: {
        tasks: {
          a: {
            actions: [
              ask("Read the README", "read"),
              ask("Edit the README", "edit"),
              ask("Run the tests", "execute"),
              { terminal: { command: "sh", args: ["-c", `echo escaped > ${join(repo, "terminal.txt")}`] } },
              { write: { path: join(repo, "escape.txt"), content: "outside\n" } },
              { write: { path: "../escape.txt", content: "outside\n" } },
              { write: { path: "inside.txt", content: "inside\n" } },
            ],
            text: "probed",
          },
        },
      },
    }),
  );
  const config = join(base, "acp-orchestrator.json");
  writeFileSync(
    config,
    JSON.stringify({
      agents: ["lead", "scripted"].map((agentId) => ({
        agentId,
        role: agentId === "lead" ? "leader" : "worker",
        command: process.execPath,
        args: [...SCRIPTED_AGENT_ARGS],
        env: { SCRIPTED_AGENT_SCRIPT: script },
      })),
      leader: "lead",
      ...(permissions !== undefined ? { permissions } : {}),
    }),
  );
  const server = await startServer({ cwd: base, args: ["--config", config] });
  try {
    const { productId } = await server.request<{ productId: string }>("product.plan", { goal: "Probe", cwd: repo });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    // The first settled state of task a (completed, or failed for good) is what this test is about.
    const settled = server.waitFor(
      (n) =>
        n.method === "product.taskStatus" &&
        n.params.productId === productId &&
        n.params.taskId === "a" &&
        (n.params.status === "completed" || n.params.status === "failed"),
      60_000,
    );
    const completed = server.waitFor(
      (n) => n.method === "product.completed" && n.params.productId === productId,
      60_000,
    );
    await server.request("product.confirm", { productId });
    await settled;
    const phase = String((await completed).params.phase);
    const status = await server.request<{ tasks: TaskState[] }>("product.status", { productId });
    const task = status.tasks.find((t) => t.taskId === "a");
    if (!task) throw new Error("task a is missing from product.status");
    const log = readFileSync(logFile, "utf8")
      .split("\n")
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as LogLine);
    // Whatever the policy, nothing reached the user's repository: same branch head, clean tree, no stray file.
    expect(git(repo, "rev-parse", "main")).toBe(headBefore);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(existsSync(join(repo, "escape.txt"))).toBe(false);
    expect(existsSync(join(repo, "terminal.txt"))).toBe(false);
    expect(worktreePaths(repo)).toEqual([repo]);
    return { repo, task, log, phase };
  } finally {
    await server.close();
  }
}

/** The scripted agent's log lines for one kind of action. */
const actions = (log: LogLine[], action: string) => log.filter((l) => l.event === "action" && l.action === action);

describe("an isolated worker is confined to its worktree", () => {
  it("refuses execute, terminals and writes outside the worktree by default, and the task fails naming the refusal", async () => {
    const { repo, task, log, phase } = await runProbe(undefined);
    const worktree = task.workspace?.path ?? "";
    // The worker's session ran in its own worktree, outside the user's working tree (under the git directory).
    expect(worktree.startsWith(`${join(repo, ".git")}/`)).toBe(true);
    const workerPid = log.find((l) => l.event === "prompt" && l.role === "worker")?.pid;
    expect(log.filter((l) => l.event === "session/new" && l.pid === workerPid).map((l) => l.cwd)).toEqual([worktree]);
    const init = log.find((l) => l.event === "initialize" && l.pid === workerPid) as LogLine & {
      clientCapabilities?: { terminal?: boolean };
    };
    expect(init).toMatchObject({ clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } } });
    expect(init.clientCapabilities?.terminal).not.toBe(true);

    // The isolated default policy: read and edit allowed, execute refused.
    expect(actions(log, "permission").map((l) => [l.title, l.chosen])).toEqual([
      ["Read the README", "allow"],
      ["Edit the README", "allow"],
      ["Run the tests", "reject"],
    ]);
    // No terminal is served, whatever the agent asks for.
    const terminal = actions(log, "terminal");
    expect(terminal.map((l) => l.outcome)).toEqual(["refused"]);
    expect(terminal[0]?.error).toMatch(/^error -32601/);
    // fs writes outside the worktree (into the user's repository, next to the worktree) are refused; inside is served.
    const writes = actions(log, "write");
    expect(writes.map((l) => [l.path, l.outcome])).toEqual([
      [join(repo, "escape.txt"), "refused"],
      [`${worktree}/../escape.txt`, "refused"],
      [`${worktree}/inside.txt`, "ok"],
    ]);
    expect(writes[0]?.error).toMatch(/outside the workspace/);
    expect(writes[1]?.error).toMatch(/outside the workspace/);
    expect(existsSync(join(dirname(worktree), "escape.txt"))).toBe(false);

    // The refused action fails the task (no silent success), naming the action and the policy that refused it.
    expect(phase).toBe("failed");
    expect(task.status).toBe("failed");
    expect(task.refusedPermissions).toEqual([{ kind: "execute", title: "Run the tests", by: "policy" }]);
    expect(task.error).toContain('refused execute "Run the tests"');
    expect(task.error).toContain('{"default":"deny","rules":{"read":"allow","edit":"allow"}}');
    // The failed attempt's commit (its allowed edit) is not integrated.
    expect(task.workspace?.commit).toBeUndefined();
  }, 120_000);

  it("allows execute when the config file's policy does, and still serves no terminal and no write outside", async () => {
    const { repo, task, log, phase } = await runProbe({
      default: "deny",
      rules: { read: "allow", edit: "allow", execute: "allow" },
    });
    const worktree = task.workspace?.path ?? "";
    expect(actions(log, "permission").map((l) => l.chosen)).toEqual(["allow", "allow", "allow"]);
    expect(actions(log, "terminal").map((l) => l.outcome)).toEqual(["refused"]);
    expect(actions(log, "write").map((l) => l.outcome)).toEqual(["refused", "refused", "ok"]);
    expect(phase).toBe("completed");
    expect(task.status).toBe("completed");
    expect(task.refusedPermissions ?? []).toEqual([]);
    // The allowed write inside the worktree is the task's integrated change.
    expect(task.workspace?.changedFiles).toEqual(["inside.txt"]);
    expect(task.workspace?.path).toBe(worktree);
    expect(git(repo, "show", `${task.workspace?.commit}:inside.txt`)).toBe("inside");
  }, 120_000);
});
