/**
 * Worktree reuse over real stdio with a real git repository and scripted ACP workers (issue 12, cost per task; see
 * src/adapters/workspace/git-workspace.ts): a dependent attempt may run in the worktree an earlier attempt released,
 * yet it starts from the integration head with nothing of the earlier attempt (an ignored file it left is gone); a
 * worktree parked for reuse does not outlive the run (pause removes it, so does the end), and nothing reaches the
 * user's tree.
 */
import { existsSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo, worktreePaths } from "../support/git-repo.js";
import { startServer, tempDir } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

interface Status {
  phase: string;
  tasks: { taskId: string; status: string; workspace?: { path: string; baseCommit: string; commit?: string } }[];
  integration?: { head: string; merged: string[] };
}

const write = (path: string, content: string) => ({ write: { path, content } });

describe("worktree reuse", () => {
  it("runs a dependent in a reused worktree without the earlier attempt's files, and leaves no parked worktree after pause or the end", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n*.log\n" });
    const headBefore = git(repo, "rev-parse", "HEAD");
    const base = tempDir("acp-orch-reuse-");
    const script = join(base, "workers.json");
    writeFileSync(
      script,
      JSON.stringify({
        worker: {
          tasks: {
            // a leaves an ignored file behind (not committed); d finishes at once too.
            a: { actions: [write("a.txt", "a\n"), write("a.log", "leftover of a\n")], text: "wrote a" },
            d: { actions: [write("d.txt", "d\n")], text: "wrote d" },
            // b and c hang on their first attempt (until the pause), and finish on the next.
            b: [{ end: "hang" }, { actions: [write("b.txt", "b\n")], text: "wrote b" }],
            c: [
              { actions: [{ read: { path: "a.txt" } }, { read: { path: "a.log" } }], end: "hang" },
              { actions: [write("c.txt", "c\n")], text: "wrote c" },
            ],
          },
        },
      }),
    );
    const config = join(base, "acp-orchestrator.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: [
          {
            agentId: "scripted",
            role: "worker",
            command: process.execPath,
            args: [...SCRIPTED_AGENT_ARGS],
            env: { SCRIPTED_AGENT_SCRIPT: script },
          },
        ],
      }),
    );
    const server = await startServer({ cwd: base, args: ["--config", config] });
    try {
      const { productId } = await server.request<{ productId: string }>("product.plan", {
        goal: "Reuse",
        cwd: repo,
        maxParallelTasks: 4,
      });
      await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
      const output = (taskId: string, text: string) =>
        server.waitFor(
          (n) =>
            n.method === "product.taskOutputDelta" &&
            n.params.productId === productId &&
            n.params.taskId === taskId &&
            String(n.params.text).includes(text),
          60_000,
        );
      const cRead = output("c", "read a.log:");
      await server.request("product.confirm", {
        productId,
        instances: ["wa", "wb", "wc", "wd"].map((id) => ({ instanceId: id, agentId: "scripted", role: "worker" })),
        tasks: ["a", "b", "d", "c"].map((id) => ({
          taskId: id,
          title: id.toUpperCase(),
          description: `Write ${id}.`,
          instanceId: `w${id}`,
          dependsOn: id === "c" ? ["a"] : [],
        })),
      });
      await cRead;

      // c runs in a worktree an earlier attempt (of a or d; on a loaded machine a may have needed a second attempt)
      // released: git still knows it by that attempt's name.
      const running = await server.request<Status>("product.status", { productId });
      const c = running.tasks.find((t) => t.taskId === "c");
      const cPath = c?.workspace?.path ?? "";
      expect(basename(git(cPath, "rev-parse", "--git-dir"))).toMatch(/^(a|d)-[0-9]+$/);
      // It started from the head holding a's commit, with a's committed file and without a's ignored one.
      const a = running.tasks.find((t) => t.taskId === "a");
      expect(git(repo, "merge-base", "--is-ancestor", a?.workspace?.commit ?? "", c?.workspace?.baseCommit ?? "")).toBe(
        "",
      );
      const cText = server.notifications
        .filter(
          (n) => n.method === "product.taskOutputDelta" && n.params.productId === productId && n.params.taskId === "c",
        )
        .map((n) => String(n.params.text))
        .join("");
      expect(cText).toContain("read a.txt: a\n");
      expect(cText).toMatch(/read a\.log: refused: error -32002/);
      expect(existsSync(join(cPath, "a.log"))).toBe(false);
      // b and c run; the other released worktree is parked.
      expect(worktreePaths(repo)).toHaveLength(4);

      // Pause stops b and c: their worktrees and the parked one are gone when the answer comes.
      await server.request("product.pause", { productId });
      expect(worktreePaths(repo)).toEqual([repo]);

      const completed = server.waitFor(
        (n) => n.method === "product.completed" && n.params.productId === productId,
        60_000,
      );
      await server.request("product.resume", { productId });
      expect((await completed).params.phase).toBe("completed");
      const status = await server.request<Status>("product.status", { productId });
      const branch = `acp/${productId}`;
      expect(git(repo, "ls-tree", "--name-only", branch).split("\n").sort()).toEqual([
        ".gitignore",
        "README.md",
        "a.txt",
        "b.txt",
        "c.txt",
        "d.txt",
      ]);
      expect(git(repo, "rev-parse", branch)).toBe(status.integration?.head);
      expect(worktreePaths(repo)).toEqual([repo]);
      expect(git(repo, "rev-parse", "main")).toBe(headBefore);
      expect(git(repo, "status", "--porcelain")).toBe("");
    } finally {
      await server.close();
    }
  }, 180_000);
});
