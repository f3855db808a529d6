/**
 * `verify.when: "end"` (issue 30; DESIGN.md guarantee 17) over real stdio, a real git repository with a small Node
 * project and scripted ACP workers: tasks integrate unchecked; the final head's `node --test` fails, so the leader is
 * consulted once with the failing output and its fix-up task makes the head green (product `completed`); a second
 * product whose fix-up does not fix it ends `failed` with a recovery naming the failing check.
 */
import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { git } from "../support/git-repo.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";
import { BROKEN, FIXED, nodeProject, promptsOf, scriptedConfig, testsPass, write } from "../support/verify-project.js";

const VERIFY = { commands: [{ name: "unit tests", run: "node --test", timeoutMs: 60_000 }], when: "end" };

async function runProduct(server: ServerHandle, repo: string): Promise<{ productId: string; phase: string }> {
  const { productId } = await server.request<{ productId: string }>("product.plan", {
    goal: "Improve calc",
    cwd: repo,
    verify: VERIFY,
  });
  await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
  const completed = server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 90_000);
  await server.request("product.confirm", {
    productId,
    instances: [{ instanceId: "w1", agentId: "scripted", role: "worker" }],
    tasks: [{ taskId: "rewrite", title: "Rewrite add", description: "Rewrite add.", instanceId: "w1", dependsOn: [] }],
  });
  return { productId, phase: String((await completed).params.phase) };
}

describe("verify: end (the final head is checked before completed)", () => {
  it("asks the leader for a fix-up with the failing output, completes green; fails naming the check when still red", async () => {
    const base = tempDir("acp-orch-verify-end-");
    const { config, log, script } = scriptedConfig(base, {
      worker: { tasks: { rewrite: write("math.js", BROKEN), "final-verification-fix": write("math.js", FIXED) } },
    });
    const server = await startServer({ cwd: base, args: ["--config", config] });
    try {
      const repo = nodeProject();
      const fixed = await runProduct(server, repo);
      expect(fixed.phase).toBe("completed");
      const branch = `acp/${fixed.productId}`;
      expect(testsPass(repo, git(repo, "rev-parse", branch))).toBe(true);
      const fixPrompt = promptsOf(log).find((p) => p.taskId === "final-verification-fix");
      expect(fixPrompt?.text).toMatch(/check "unit tests" failed with exit code 1 on the final head/);
      expect(fixPrompt?.text).toMatch(/add sums two numbers/);
      const status = await server.request<{
        verification?: { when: string; results: { scope: string; ok: boolean }[] };
      }>("product.status", { productId: fixed.productId });
      expect(status.verification?.when).toBe("end");
      expect(status.verification?.results.map((r) => [r.scope, r.ok])).toEqual([
        ["end", false],
        ["end", true],
      ]);

      // The fix-up does not fix it: the product fails, its recovery naming the check.
      writeFileSync(
        script,
        JSON.stringify({
          log,
          worker: { tasks: { rewrite: write("math.js", BROKEN), "final-verification-fix": write("NOTES.md", "x\n") } },
        }),
      );
      const repo2 = nodeProject();
      const red = await runProduct(server, repo2);
      expect(red.phase).toBe("failed");
      const redStatus = await server.request<{ recovery?: { cause: string } }>("product.status", {
        productId: red.productId,
      });
      expect(redStatus.recovery?.cause).toMatch(/check "unit tests" failed \(exit code 1\) on the final head/);
    } finally {
      await server.close();
    }
  }, 180_000);
});
