/**
 * A product whose `cwd` is a folder of its repository (issue 31 area; docs/WORKTREES.md, "A cwd below the top level"),
 * over real stdio with a real git repository and the scripted ACP worker: the worker's `session/new` cwd is the same
 * folder of its own worktree (`<worktree>/pkg/sub`, reported as the task's `workspace.cwd` beside the worktree root
 * `workspace.path`), a file it writes relative to its cwd lands at `pkg/sub/<file>` on the product branch, a write
 * outside the folder but inside the worktree is still served and integrated, and the `verify` checks run in the same
 * folder of the verify worktree. A folder only in the user's checkout (never committed) is created empty in the
 * worktree.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo, worktreePaths } from "../support/git-repo.js";
import { writeScriptedAgentConfig } from "../support/scripted-agent-config.js";
import { startServer, tempDir } from "../support/server-process.js";

interface TaskState {
  taskId: string;
  status: string;
  error?: string;
  workspace?: { path: string; cwd?: string; commit?: string; changedFiles?: string[] };
}
interface LogLine {
  event: string;
  role?: string;
  action?: string;
  path?: string;
  outcome?: string;
  cwd?: string;
  text?: string;
}

/**
 * Runs one product at `cwd` (a folder of a repository) whose one task writes `here.txt` relative to its cwd and `../up.txt`
 * (outside the folder, inside the worktree); resolves with the product branch, the task's state, the worker's log and
 * the `product.taskVerified` notifications.
 */
async function runInFolder(cwd: string, verify?: unknown) {
  const base = tempDir("acp-orch-subfolder-");
  const logFile = join(base, "agent.jsonl");
  const script = join(base, "workers.json");
  const actions = [
    { write: { path: "here.txt", content: "here\n" } },
    { write: { path: "../up.txt", content: "up\n" } },
  ];
  writeFileSync(script, JSON.stringify({ log: logFile, worker: { tasks: { a: { actions, text: "written" } } } }));
  const config = join(base, "acp-orchestrator.json");
  writeScriptedAgentConfig(config, "scripted", script);
  const server = await startServer({ cwd: base, args: ["--config", config] });
  try {
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Write a file",
      cwd,
      ...(verify !== undefined ? { verify } : {}),
    });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    const completed = server.waitFor(
      (n) => n.method === "product.completed" && n.params.productId === productId,
      90_000,
    );
    await server.request("product.confirm", {
      productId,
      instances: [{ instanceId: "w1", agentId: "scripted", role: "worker" }],
      tasks: [
        {
          taskId: "a",
          title: "Write",
          description: "Write here.txt.",
          instanceId: "w1",
          dependsOn: [],
          maxAttempts: 1,
        },
      ],
    });
    const phase = String((await completed).params.phase);
    const status = await server.request<{ tasks: TaskState[] }>("product.status", { productId });
    const task = status.tasks.find((t) => t.taskId === "a");
    if (!task) throw new Error("task a is missing from product.status");
    const log = readFileSync(logFile, "utf8")
      .split("\n")
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as LogLine);
    const verified = server.notifications.filter(
      (n) => n.method === "product.taskVerified" && n.params.productId === productId,
    );
    return { branch: `acp/${productId}`, phase, task, log, verified };
  } finally {
    await server.close();
  }
}

describe("a product cwd below the repository's top level", () => {
  it("runs the worker and the checks in the same folder of their worktrees, and integrates repository-wide", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n", "pkg/sub/keep.txt": "keep\n" });
    const headBefore = git(repo, "rev-parse", "HEAD");
    // Green only where the folder is the check's cwd: keep.txt is in pkg/sub only, here.txt is what the worker wrote.
    const verify = {
      commands: [{ name: "in folder", run: "test -f here.txt && test -f keep.txt", timeoutMs: 60_000 }],
    };
    const { branch, phase, task, log, verified } = await runInFolder(join(repo, "pkg", "sub"), verify);
    expect(task.error).toBeUndefined();
    expect(phase).toBe("completed");

    // The agent's cwd is pkg/sub of its worktree; the worktree root stays `workspace.path`.
    const worktree = task.workspace?.path ?? "";
    expect(worktree.startsWith(`${join(repo, ".git")}/`)).toBe(true);
    expect(task.workspace?.cwd).toBe(join(worktree, "pkg", "sub"));
    expect(log.filter((l) => l.event === "session/new").map((l) => l.cwd)).toEqual([join(worktree, "pkg", "sub")]);
    // The brief names the worktree as the workspace and the folder as the cwd.
    const brief = log.find((l) => l.event === "prompt")?.text ?? "";
    expect(brief).toContain(
      `Work only inside the workspace ${worktree} (your cwd is its folder ${join(worktree, "pkg", "sub")})`,
    );

    // Relative to the cwd: pkg/sub/here.txt; outside the folder (inside the worktree) is served too: pkg/up.txt.
    const writes = log.filter((l) => l.event === "action" && l.action === "write").map((l) => l.outcome);
    expect(writes).toEqual(["ok", "ok"]);
    expect(git(repo, "show", `${branch}:pkg/sub/here.txt`)).toBe("here");
    expect(git(repo, "show", `${branch}:pkg/up.txt`)).toBe("up");
    expect(git(repo, "ls-tree", "--name-only", branch, "--", "here.txt")).toBe("");
    expect([...(task.workspace?.changedFiles ?? [])].sort()).toEqual(["pkg/sub/here.txt", "pkg/up.txt"]);

    // The check ran in pkg/sub of the verify worktree and was green.
    expect(verified.map((n) => n.params.ok)).toEqual([true]);
    // The user's branch and checkout are untouched; no worktree is left.
    expect(git(repo, "rev-parse", "main")).toBe(headBefore);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(worktreePaths(repo)).toEqual([repo]);
  }, 150_000);

  it("creates a folder the base commit lacks (only in the user's checkout) empty in the worktree", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
    const cwd = join(repo, "pkg", "new");
    mkdirSync(cwd, { recursive: true }); // empty: git never committed it
    const { branch, phase, task, log } = await runInFolder(cwd);
    expect(task.error).toBeUndefined();
    expect(phase).toBe("completed");
    const worktree = task.workspace?.path ?? "";
    expect(log.filter((l) => l.event === "session/new").map((l) => l.cwd)).toEqual([join(worktree, "pkg", "new")]);
    expect(git(repo, "show", `${branch}:pkg/new/here.txt`)).toBe("here");
    expect(git(repo, "show", `${branch}:pkg/up.txt`)).toBe("up");
  }, 150_000);
});
