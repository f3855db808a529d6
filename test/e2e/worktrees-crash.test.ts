/**
 * kill -9 of the server at each integration step, then resume (issue 12, "Must show"; DESIGN.md guarantee 11): while
 * committing a finished attempt, after the merge intent is recorded and before the branch moves, and after the branch
 * moved but before the merge is recorded. After the restart and `product.resume` every task's commit is on the
 * integration branch exactly once, none is lost, and no worktree is left over. The crash is injected by the git
 * adapter's fault hook (`ACP_ORCHESTRATOR_WORKSPACE_FAULT`), which SIGKILLs the server process at that step.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo, worktreePaths } from "../support/git-repo.js";
import { startServer, tempDir } from "../support/server-process.js";

interface Status {
  phase: string;
  tasks: { taskId: string; status: string; attempts: number }[];
  integration?: { head: string; merged: string[] };
}

const instances = ["w1", "w2"].map((id) => ({ instanceId: id, agentId: "builtin-worker", role: "worker" }));
const tasks = [
  { taskId: "t1", title: "Write the intro", description: "Write an intro.", instanceId: "w1", dependsOn: [] },
  { taskId: "t2", title: "Write the FAQ", description: "Write a FAQ.", instanceId: "w2", dependsOn: [] },
  { taskId: "t3", title: "Write the summary", description: "Summarise.", instanceId: "w1", dependsOn: ["t1", "t2"] },
];

describe.concurrent("kill -9 at each integration step, then resume", () => {
  for (const step of ["capture", "beforeMerge", "afterMerge"]) {
    it(`${step}: every task's commit lands exactly once and no worktree is left`, async () => {
      const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
      const headBefore = git(repo, "rev-parse", "HEAD");
      const statePath = join(tempDir(), "state.db");
      const marker = join(tempDir(), "crashed");
      const env = { ACP_ORCHESTRATOR_OWNER_ID: `crash-${step}`, ACP_ORCHESTRATOR_WORKSPACE_FAULT: `${step}:${marker}` };
      const first = await startServer({ statePath, env });
      const exited = new Promise((resolve) => first.child.once("exit", resolve));
      const { productId } = await first.request<{ productId: string }>("product.plan", {
        goal: "Write the docs",
        cwd: repo,
      });
      await first.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
      await first.request("product.confirm", { productId, instances, tasks });
      await exited;
      expect(existsSync(marker)).toBe(true);
      // The dead server left its attempts' worktrees behind; the resumed product prunes them.
      expect(worktreePaths(repo).length).toBeGreaterThan(1);

      const second = await startServer({ statePath, env });
      try {
        const completed = second.waitFor(
          (n) => n.method === "product.completed" && n.params.productId === productId,
          60_000,
        );
        await second.request("product.resume", { productId });
        expect((await completed).params.phase).toBe("completed");
        const status = await second.request<Status>("product.status", { productId });
        expect(status.tasks.every((t) => t.status === "completed")).toBe(true);
        const trailers = git(
          repo,
          "log",
          "--no-merges",
          "--format=%(trailers:key=Task,valueonly,separator=)",
          `${headBefore}..acp/${productId}`,
        )
          .split("\n")
          .map((l) => l.trim())
          .filter((l) => l.length > 0);
        expect(trailers.sort()).toEqual(["t1", "t2", "t3"]);
        expect([...(status.integration?.merged ?? [])].sort()).toEqual(["t1", "t2", "t3"]);
        expect(git(repo, "rev-parse", `acp/${productId}`)).toBe(status.integration?.head);
        expect(worktreePaths(repo)).toEqual([repo]);
        const dir = join(repo, ".git", "acp-orchestrator", "worktrees", productId);
        expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
        expect(git(repo, "status", "--porcelain")).toBe("");
      } finally {
        await second.close();
      }
    }, 120_000);
  }
});
