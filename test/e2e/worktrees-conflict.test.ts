/**
 * Conflicts and rollback under worktree isolation, over real stdio with a real git repository and scripted ACP
 * workers (issue 12, "Must show"; DESIGN.md guarantee 11): two parallel tasks change the same line, one integrates,
 * the other fails naming the file and its retry runs from the new head; with no retry left the leader's fix-up task
 * runs from the new head and the product completes with both intents; rollback moves the integration branch back and
 * keeps the head it left; delete leaves no worktree, branch or ref.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo, refsUnder, worktreePaths } from "../support/git-repo.js";
import { startServer, tempDir } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

interface TaskState {
  taskId: string;
  status: string;
  attempts: number;
  error?: string;
  output?: string;
  workspace?: { path: string; baseCommit: string; commit?: string };
}
interface Status {
  phase: string;
  tasks: TaskState[];
  integration?: { head: string; state: string; merged: string[]; conflict?: { files: string[] } };
}

const write = (content: string) => ({
  actions: [{ write: { path: "shared.txt", content } }],
  text: "wrote shared.txt",
});
const BOTH = "greeting from a\ngreeting from b\n";

describe("worktree conflicts and rollback", () => {
  it("fails the second same-line change naming the file, retries it from the new head, rolls back the code and deletes it all", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
    const headBefore = git(repo, "rev-parse", "HEAD");
    const base = tempDir("acp-orch-conflict-");
    const script = join(base, "workers.json");
    // Attempt 1 of each task writes its own first line; any later attempt writes both intents.
    writeFileSync(
      script,
      JSON.stringify({
        worker: {
          tasks: { a: [write("greeting from a\n"), write(BOTH)], b: [write("greeting from b\n"), write(BOTH)] },
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
      const { productId } = await server.request<{ productId: string }>("product.plan", { goal: "Greet", cwd: repo });
      await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
      const completed = server.waitFor(
        (n) => n.method === "product.completed" && n.params.productId === productId,
        60_000,
      );
      await server.request("product.confirm", {
        productId,
        instances: ["w1", "w2"].map((id) => ({ instanceId: id, agentId: "scripted", role: "worker" })),
        tasks: [
          { taskId: "a", title: "Greet from a", description: "Write the greeting.", instanceId: "w1", dependsOn: [] },
          { taskId: "b", title: "Greet from b", description: "Write the greeting.", instanceId: "w2", dependsOn: [] },
        ],
      });
      expect((await completed).params.phase).toBe("completed");
      const status = await server.request<Status>("product.status", { productId });
      const retried = status.tasks.find((t) => t.attempts === 2);
      const first = status.tasks.find((t) => t.attempts === 1);
      expect(retried && first).toBeTruthy();

      // The loser's first attempt failed naming the file; its retry started from the head holding the winner's commit.
      const failed = server.notifications.find(
        (n) =>
          n.method === "product.taskStatus" &&
          n.params.productId === productId &&
          n.params.taskId === retried?.taskId &&
          n.params.status === "pending",
      );
      expect(String(failed?.params.error)).toMatch(/conflict with the integration branch in shared\.txt/);
      expect(
        git(repo, "merge-base", "--is-ancestor", first?.workspace?.commit ?? "", retried?.workspace?.baseCommit ?? ""),
      ).toBe("");
      // The conflicting attempt's commit stays reachable under the product's refs.
      expect(refsUnder(repo, `refs/acp-orchestrator/${productId}/attempts/${retried?.taskId}/1`)).toHaveLength(1);

      // Both intents are in the final tree; the user's branch and tree are untouched; no worktree is left.
      const branch = `acp/${productId}`;
      expect(git(repo, "show", `${branch}:shared.txt`)).toBe(BOTH.trim());
      expect(status.integration?.merged).toHaveLength(2);
      expect(git(repo, "rev-parse", "main")).toBe(headBefore);
      expect(git(repo, "status", "--porcelain")).toBe("");
      expect(worktreePaths(repo)).toEqual([repo]);

      // Rollback to the first checkpoint: the branch goes back to the head recorded there, the old head is kept.
      const { checkpoints } = await server.request<{ checkpoints: { checkpointId: string }[] }>("product.checkpoints", {
        productId,
      });
      const oldHead = git(repo, "rev-parse", branch);
      const before = server.notifications.length;
      await server.request("product.rollback", { productId, checkpointId: checkpoints[0]?.checkpointId });
      const kept = refsUnder(repo, `refs/acp-orchestrator/${productId}/rollback/`);
      expect(kept).toHaveLength(1);
      expect(git(repo, "rev-parse", kept[0] ?? "")).toBe(oldHead);
      await server.waitFor(
        (n) =>
          n.method === "product.completed" &&
          n.params.productId === productId &&
          server.notifications.indexOf(n) >= before,
        60_000,
      );
      const after = await server.request<Status>("product.status", { productId });
      expect(after.phase).toBe("completed");
      // The re-run task added a new commit on top of the checkpoint's head; the old head is still reachable.
      const newHead = git(repo, "rev-parse", branch);
      expect(newHead).toBe(after.integration?.head);
      expect(newHead).not.toBe(oldHead);
      expect(git(repo, "merge-base", "--is-ancestor", first?.workspace?.commit ?? "", newHead)).toBe("");
      expect(git(repo, "cat-file", "-t", oldHead)).toBe("commit");
      expect(worktreePaths(repo)).toEqual([repo]);

      // Delete leaves no worktree, branch or ref of the product.
      expect(await server.request("product.delete", { productId })).toEqual({ deleted: true });
      expect(refsUnder(repo, "refs/heads/acp/")).toEqual([]);
      expect(refsUnder(repo, "refs/acp-orchestrator/")).toEqual([]);
      expect(worktreePaths(repo)).toEqual([repo]);
      expect(git(repo, "rev-parse", "main")).toBe(headBefore);
    } finally {
      await server.close();
    }
  }, 180_000);

  it("lets the leader's fix-up task resolve a same-line conflict from the new head, and completes with both intents", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
    const headBefore = git(repo, "rev-parse", "HEAD");
    const base = tempDir("acp-orch-fixup-");
    const script = join(base, "workers.json");
    // a and b write their own first line (one attempt each); the fix-up of whichever loses (the built-in leader names
    // it `<taskId>-fix`) reads the file it starts from, then writes both intents.
    const fixUp = {
      actions: [{ read: { path: "shared.txt" } }, { write: { path: "shared.txt", content: BOTH } }],
      text: "merged both greetings",
    };
    writeFileSync(
      script,
      JSON.stringify({
        worker: {
          tasks: { a: write("greeting from a\n"), b: write("greeting from b\n"), "a-fix": fixUp, "b-fix": fixUp },
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
      const { productId } = await server.request<{ productId: string }>("product.plan", { goal: "Greet", cwd: repo });
      await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
      const completed = server.waitFor(
        (n) => n.method === "product.completed" && n.params.productId === productId,
        90_000,
      );
      await server.request("product.confirm", {
        productId,
        instances: ["w1", "w2"].map((id) => ({ instanceId: id, agentId: "scripted", role: "worker" })),
        tasks: ["a", "b"].map((id, i) => ({
          taskId: id,
          title: `Greet from ${id}`,
          description: "Write the greeting.",
          instanceId: `w${i + 1}`,
          dependsOn: [],
          maxAttempts: 1,
        })),
      });
      expect((await completed).params.phase).toBe("completed");
      const mine = (method: string) =>
        server.notifications.filter((n) => n.method === method && n.params.productId === productId);

      // One of the two failed for good, naming the file; the other integrated.
      const failed = mine("product.taskStatus").filter((n) => n.params.status === "failed");
      expect(failed).toHaveLength(1);
      const loser = String(failed[0]?.params.taskId);
      const winner = loser === "a" ? "b" : "a";
      expect(String(failed[0]?.params.error)).toMatch(/conflict with the integration branch in shared\.txt/);
      const integrated = mine("product.taskIntegrated").map((n) => n.params.taskId);
      expect(integrated).toEqual([winner, `${loser}-fix`]);

      // The leader was consulted and added the fix-up that supersedes the failed task.
      const added = mine("product.dagMutated").find((n) => (n.params.mutation as { op: string }).op === "addTask");
      expect(added?.params.by).toBe("leader");
      expect((added?.params.mutation as { task: { taskId: string; description: string } }).task.taskId).toBe(
        `${loser}-fix`,
      );
      expect((added?.params.mutation as { task: { description: string } }).task.description).toMatch(/shared\.txt/);
      const said = mine("product.leaderMessage").map((n) => String(n.params.message));
      expect(said.some((m) => m.includes(`${loser}-fix`))).toBe(true);

      // The fix-up started from the new head (holding the winner's commit) and saw the winner's line in its worktree.
      const status = await server.request<Status>("product.status", { productId });
      expect(status.phase).toBe("completed");
      const won = status.tasks.find((t) => t.taskId === winner);
      const fix = status.tasks.find((t) => t.taskId === `${loser}-fix`);
      // The loser stays, superseded by its fix-up (issue 28).
      expect(status.tasks.map((t) => t.taskId).sort()).toEqual([winner, loser, `${loser}-fix`].sort());
      expect(status.tasks.find((t) => t.taskId === loser)).toMatchObject({
        status: "failed",
        supersededBy: `${loser}-fix`,
      });
      expect(fix?.status).toBe("completed");
      expect(
        git(repo, "merge-base", "--is-ancestor", won?.workspace?.commit ?? "", fix?.workspace?.baseCommit ?? ""),
      ).toBe("");
      expect(git(repo, "rev-parse", `${fix?.workspace?.commit}^`)).toBe(fix?.workspace?.baseCommit);
      expect(fix?.output).toContain(`read shared.txt: greeting from ${winner}`);

      // Both intents are in the final tree; the loser's commit is kept for inspection; the user's tree is untouched.
      const branch = `acp/${productId}`;
      expect(git(repo, "show", `${branch}:shared.txt`)).toBe(BOTH.trim());
      expect(status.integration?.merged).toEqual([winner, `${loser}-fix`]);
      expect(git(repo, "rev-parse", branch)).toBe(status.integration?.head);
      expect(git(repo, "show", `refs/acp-orchestrator/${productId}/attempts/${loser}/1:shared.txt`)).toBe(
        `greeting from ${loser}`,
      );
      expect(git(repo, "rev-parse", "main")).toBe(headBefore);
      expect(git(repo, "status", "--porcelain")).toBe("");
      expect(worktreePaths(repo)).toEqual([repo]);
    } finally {
      await server.close();
    }
  }, 180_000);

  it("allows read and edit permission requests of an isolated worker by default", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
    const base = tempDir("acp-orch-perm-");
    const script = join(base, "workers.json");
    const ask = (title: string, kind: string) => ({ permission: { title, kind } });
    writeFileSync(
      script,
      JSON.stringify({
        worker: {
          tasks: {
            a: {
              actions: [
                ask("Read the README", "read"),
                ask("Edit the README", "edit"),
                { write: { path: "a.txt", content: "a\n" } },
              ],
              text: "edited",
            },
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
      const { productId } = await server.request<{ productId: string }>("product.plan", { goal: "Edit", cwd: repo });
      await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
      const completed = server.waitFor(
        (n) => n.method === "product.completed" && n.params.productId === productId,
        60_000,
      );
      await server.request("product.confirm", {
        productId,
        instances: ["w1", "w2"].map((id) => ({ instanceId: id, agentId: "scripted", role: "worker" })),
        tasks: [{ taskId: "a", title: "Edit", description: "Edit.", instanceId: "w1", dependsOn: [], maxAttempts: 1 }],
      });
      await completed;
      const status = await server.request<{
        tasks: (TaskState & { output?: string; refusedPermissions?: { kind: string }[] })[];
      }>("product.status", { productId });
      const a = status.tasks.find((t) => t.taskId === "a");
      expect(a?.status).toBe("completed");
      expect(a?.output).toMatch(/permission Read the README: allow/);
      expect(a?.output).toMatch(/permission Edit the README: allow/);
      expect(a?.refusedPermissions ?? []).toEqual([]);
    } finally {
      await server.close();
    }
  }, 120_000);
});
