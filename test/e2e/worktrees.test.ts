/**
 * Isolation and integration over real stdio with real git repositories (issue 12, "Must show"; DESIGN.md guarantee
 * 11; PROTOCOL.md section 5): every task attempt runs in its own worktree based on the integration head, its result is
 * committed with trailers and merged once into `acp/<productId>`, the user's branch and working tree stay as they were
 * (branch mode) or fast-forward (merge mode), and nothing is left behind.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo, refsUnder, worktreePaths } from "../support/git-repo.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";

interface Workspace {
  path: string;
  branch: string;
  baseCommit: string;
  commit?: string;
  changedFiles?: string[];
}
interface TaskState {
  taskId: string;
  status: string;
  attempts: number;
  error?: string;
  workspace?: Workspace;
}
interface Status {
  phase: string;
  tasks: TaskState[];
  isolation?: string;
  isolationNote?: string;
  integration?: { mode: string; branch: string; head: string; state: string; merged: string[]; targetBranch?: string };
}

const instances = ["w1", "w2", "w3"].map((id) => ({ instanceId: id, agentId: "builtin-worker", role: "worker" }));
/** Three independent tasks and a fourth that depends on all three. */
const fanIn = [
  { taskId: "t1", title: "Write the intro", description: "Write an intro.", instanceId: "w1", dependsOn: [] },
  { taskId: "t2", title: "Write the API notes", description: "Write API notes.", instanceId: "w2", dependsOn: [] },
  { taskId: "t3", title: "Write the FAQ", description: "Write a FAQ.", instanceId: "w3", dependsOn: [] },
  {
    taskId: "t4",
    title: "Write the summary",
    description: "Summarise.",
    instanceId: "w1",
    dependsOn: ["t1", "t2", "t3"],
  },
];

/** Plans with the heuristic leader, then confirms the given plan; resolves with the product id once it ended. */
async function runPlan(
  server: ServerHandle,
  cwd: string,
  tasks: typeof fanIn,
  extra: Record<string, unknown> = {},
): Promise<{ productId: string; phase: string }> {
  const { productId } = await server.request<{ productId: string }>("product.plan", {
    goal: "Write the docs",
    cwd,
    ...extra,
  });
  await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
  const completed = server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 60_000);
  await server.request("product.confirm", { productId, instances, tasks });
  const done = await completed;
  return { productId, phase: String(done.params.phase) };
}

function taskTrailers(repo: string, range: string): string[] {
  const out = git(repo, "log", "--reverse", "--no-merges", "--format=%(trailers:key=Task,valueonly,separator=)", range);
  return out
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
}

describe("worktree isolation and integration", () => {
  it("runs parallel tasks in their own worktrees, gives the dependent all their files, and leaves the user's tree as it was", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
    const headBefore = git(repo, "rev-parse", "HEAD");
    const server = await startServer({ cwd: repo });
    try {
      const { productId, phase } = await runPlan(server, repo, fanIn);
      expect(phase).toBe("completed");
      const status = await server.request<Status>("product.status", { productId });
      expect(status.isolation).toBe("worktree");
      expect(status.integration).toMatchObject({ mode: "branch", branch: `acp/${productId}`, state: "integrated" });
      const byId = new Map(status.tasks.map((t) => [t.taskId, t]));

      // Each attempt ran in its own worktree outside the user's tree, on the integration head of its start.
      const paths = status.tasks.map((t) => t.workspace?.path);
      expect(new Set(paths).size).toBe(4);
      for (const p of paths) expect(p?.startsWith(join(repo, ".git"))).toBe(true);
      for (const id of ["t1", "t2", "t3"]) expect(byId.get(id)?.workspace?.baseCommit).toBe(headBefore);

      // The dependent's worktree held all three files when it started: its base contains every dependency's note.
      const t4Base = byId.get("t4")?.workspace?.baseCommit ?? "";
      const baseFiles = git(repo, "ls-tree", "-r", "--name-only", t4Base).split("\n");
      for (const id of ["t1", "t2", "t3"]) {
        for (const f of byId.get(id)?.workspace?.changedFiles ?? []) expect(baseFiles).toContain(f);
        expect(byId.get(id)?.workspace?.changedFiles?.length).toBeGreaterThan(0);
      }

      // The integration branch has the four task commits once each, in an order the DAG allows, with trailers.
      const branch = `acp/${productId}`;
      const order = taskTrailers(repo, `${headBefore}..${branch}`);
      expect([...order].sort()).toEqual(["t1", "t2", "t3", "t4"]);
      expect(order[3]).toBe("t4");
      expect(git(repo, "rev-parse", branch)).toBe(status.integration?.head);
      const t4Commit = byId.get("t4")?.workspace?.commit ?? "";
      const message = git(repo, "log", "-1", "--format=%B", t4Commit);
      expect(message).toContain(`Product: ${productId}`);
      expect(message).toContain("Task: t4");
      expect(message).toContain("Attempt: 1");
      expect(status.integration?.merged).toHaveLength(4);
      const integrated = server.notifications.filter(
        (n) => n.method === "product.taskIntegrated" && n.params.productId === productId,
      );
      expect(integrated.map((n) => n.params.taskId).sort()).toEqual(["t1", "t2", "t3", "t4"]);
      expect(
        server.notifications.some((n) => n.method === "product.integrated" && n.params.productId === productId),
      ).toBe(true);

      // Branch mode: the user's HEAD, branch and working tree are exactly as before; no worktree is left.
      expect(git(repo, "rev-parse", "HEAD")).toBe(headBefore);
      expect(git(repo, "symbolic-ref", "--short", "HEAD")).toBe("main");
      expect(git(repo, "status", "--porcelain")).toBe("");
      expect(worktreePaths(repo)).toEqual([repo]);

      // product.delete removes the branch and the product's refs.
      expect(refsUnder(repo, `refs/acp-orchestrator/${productId}/`).length).toBeGreaterThan(0);
      expect(await server.request("product.delete", { productId })).toEqual({ deleted: true });
      expect(refsUnder(repo, `refs/heads/acp/`)).toEqual([]);
      expect(refsUnder(repo, "refs/acp-orchestrator/")).toEqual([]);
      expect(worktreePaths(repo)).toEqual([repo]);
    } finally {
      await server.close();
    }
  }, 120_000);

  it("fast-forwards the user's branch in merge mode", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
    const headBefore = git(repo, "rev-parse", "HEAD");
    const server = await startServer({ cwd: repo });
    try {
      const { productId, phase } = await runPlan(server, repo, fanIn.slice(0, 2), { integration: { mode: "merge" } });
      expect(phase).toBe("completed");
      const status = await server.request<Status>("product.status", { productId });
      expect(status.integration).toMatchObject({ mode: "merge", targetBranch: "main", state: "integrated" });
      expect(git(repo, "rev-parse", "main")).toBe(git(repo, "rev-parse", `acp/${productId}`));
      expect(git(repo, "merge-base", "--is-ancestor", headBefore, "main")).toBe("");
      expect(git(repo, "status", "--porcelain")).toBe("");
      for (const t of status.tasks) {
        for (const f of t.workspace?.changedFiles ?? []) expect(existsSync(join(repo, f))).toBe(true);
      }
    } finally {
      await server.close();
    }
  }, 120_000);

  it("runs shared in a folder that is not a git repository, and says why when the repository has no commit", async () => {
    const server = await startServer();
    try {
      const plain = tempDir("acp-orch-plain-");
      const one = await runPlan(server, plain, fanIn.slice(0, 2));
      const plainStatus = await server.request<Status>("product.status", { productId: one.productId });
      expect(plainStatus.isolation).toBe("shared");
      expect(plainStatus.isolationNote).toMatch(/not inside a git working tree/);
      expect(plainStatus.isolationNote).toMatch(/at once in the same folder/);
      expect(plainStatus.integration).toBeUndefined();
      expect(plainStatus.tasks.every((t) => t.workspace === undefined)).toBe(true);

      const empty = makeRepo({});
      const two = await runPlan(server, empty, fanIn.slice(0, 1));
      const emptyStatus = await server.request<Status>("product.status", { productId: two.productId });
      expect(emptyStatus.isolation).toBe("shared");
      expect(emptyStatus.isolationNote).toMatch(/has no commit yet/);
      expect(readFileSync(join(empty, ".git", "HEAD"), "utf8")).toContain("refs/heads/main");
      expect(refsUnder(empty, "refs/")).toEqual([]);
    } finally {
      await server.close();
    }
  }, 120_000);
});
