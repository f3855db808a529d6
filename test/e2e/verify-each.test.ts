/**
 * Green-only integration (issue 30, "Must show"; DESIGN.md guarantee 17) over real stdio, a real git repository with
 * a small Node project whose `node --test` fails when `add` is wrong, and scripted ACP workers: the worker that
 * writes a broken `add` never moves the integration branch, its attempt fails with the failing check's name, exit
 * code and output, the leader's fix-up prompt contains that output, and the product ends `completed` with every
 * commit the branch ever pointed at green (each is checked out again and its tests re-run here).
 */
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { git, worktreePaths } from "../support/git-repo.js";
import { startServer, tempDir } from "../support/server-process.js";
import {
  BROKEN,
  FIXED,
  nodeProject,
  promptsOf,
  reflog,
  scriptedConfig,
  testsPass,
  write,
} from "../support/verify-project.js";

describe("verify: each (green-only integration)", () => {
  it("never moves the branch to a red candidate, gives the fix-up the failing output, and completes all green", async () => {
    const repo = nodeProject();
    const headBefore = git(repo, "rev-parse", "HEAD");
    const base = tempDir("acp-orch-verify-");
    const { config, log } = scriptedConfig(base, {
      worker: {
        tasks: {
          broken: [write("math.js", BROKEN), write("math.js", BROKEN)],
          "broken-fix": write("math.js", FIXED),
          docs: write("README.md", "# calc\n\nAdds numbers.\n"),
        },
      },
    });
    const server = await startServer({ cwd: base, args: ["--config", config] });
    try {
      const { productId } = await server.request<{ productId: string }>("product.plan", {
        goal: "Improve calc",
        cwd: repo,
        verify: { commands: [{ name: "unit tests", run: "node --test", timeoutMs: 60_000 }] },
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
            taskId: "broken",
            title: "Rewrite add",
            description: "Rewrite add.",
            instanceId: "w1",
            dependsOn: [],
            maxAttempts: 2,
          },
          {
            taskId: "docs",
            title: "Write docs",
            description: "Document calc.",
            instanceId: "w1",
            dependsOn: ["broken"],
          },
        ],
      });
      expect((await completed).params.phase).toBe("completed");
      const branch = `acp/${productId}`;

      // The red candidate: a failing check named in the attempt's error, with its exit code and the test's output.
      const failed = server.notifications.find(
        (n) => n.method === "product.taskStatus" && n.params.taskId === "broken" && n.params.status === "failed",
      );
      const error = String(failed?.params.error);
      expect(error).toMatch(/check "unit tests" failed with exit code 1/);
      expect(error).toMatch(/add sums two numbers/);
      const verified = server.notifications.filter(
        (n) => n.method === "product.taskVerified" && n.params.productId === productId,
      );
      const red = verified.filter((n) => n.params.ok === false);
      expect(red.map((n) => n.params.taskId)).toEqual(["broken"]); // one tree: the retry's same tree is not re-run
      const redTree = String(red[0]?.params.tree);

      // The retry's brief and the fix-up prompt carry the failing test's output.
      const prompts = promptsOf(log);
      const retry = prompts.find((p) => p.taskId === "broken" && p.attempt === 2);
      expect(retry?.text).toMatch(/Why the previous attempt failed[\s\S]*add sums two numbers/);
      const fixPrompt = prompts.find((p) => p.taskId === "broken-fix");
      expect(fixPrompt?.text).toMatch(/add sums two numbers/);
      expect(fixPrompt?.text).toMatch(/unit tests/);

      // Every commit the branch ever pointed at (after its creation at the base) is green, re-checked here; none has
      // the red tree; each was announced green before.
      const moves = reflog(repo, branch);
      expect(moves[0]).toBe(headBefore);
      expect(moves.length).toBeGreaterThanOrEqual(3);
      const greenTrees = new Set(verified.filter((n) => n.params.ok === true).map((n) => String(n.params.tree)));
      for (const commit of moves.slice(1)) {
        const tree = git(repo, "rev-parse", `${commit}^{tree}`);
        expect(tree).not.toBe(redTree);
        expect(greenTrees.has(tree)).toBe(true);
        expect(testsPass(repo, commit)).toBe(true);
      }
      expect(git(repo, "show", `${branch}:math.js`)).toBe(FIXED.trim());

      // Status shows each check; the user's branch and checkout are untouched; no worktree is left.
      const status = await server.request<{
        verification?: {
          when: string;
          results: { ok: boolean; checks: { name: string; exitCode: number | null }[] }[];
        };
      }>("product.status", { productId });
      expect(status.verification?.when).toBe("each");
      expect(status.verification?.results.map((r) => r.ok)).toEqual(verified.map((n) => n.params.ok));
      expect(status.verification?.results[0]?.checks[0]).toMatchObject({ name: "unit tests", exitCode: 1 });
      expect(git(repo, "rev-parse", "main")).toBe(headBefore);
      expect(git(repo, "status", "--porcelain")).toBe("");
      expect(worktreePaths(repo)).toEqual([repo]);

      // The operator's view: status and events show each check; `verify` re-runs them on demand.
      const state = server.statePath;
      const shown = await runCli(["status", productId, "--state", state], base);
      expect(shown.stdout).toMatch(/verify: +each: unit tests/);
      expect(shown.stdout).toMatch(/red +task broken tree [0-9a-f]{12}: unit tests exit 1/);
      const events = await runCli(["events", productId, "--state", state], base);
      expect(events.stdout).toMatch(/verified red tree [0-9a-f]{12} \(task broken\): unit tests exit 1/);
      const again = await runCli(["verify", productId, "--state", state], base);
      expect(again.code).toBe(0);
      expect(again.stdout).toMatch(/ok +unit tests +\(exit 0/);
      const redAgain = await runCli(["verify", productId, "--task", "broken", "--state", state], base);
      expect(redAgain.code).toBe(1);
      expect(redAgain.stdout).toMatch(/FAIL +unit tests +\(exit 1[\s\S]*add sums two numbers/);
      expect(worktreePaths(repo)).toEqual([repo]);
    } finally {
      await server.close();
    }
  }, 180_000);
});
