/**
 * Command acceptance criteria (issue 30, "Must show": a goal with a command criterion that flips from failing to
 * passing across two phases; docs/VERIFY.md, Goals) over real stdio, a real git repository and a scripted ACP worker
 * subprocess: the criterion `grep -qx ready marker.txt` is checked on each phase's integrated head in a verify
 * worktree. The worker writes `marker.txt` only in the second phase (in the first it notes that phase's product id in
 * a file outside the repository), so phase 1's check fails — the criterion is not met although the leader saw its task complete — and
 * phase 2's passes, and the goal ends `achieved`. `x/goal.status` shows the criterion's last check; the results are
 * goal events (phase 1's red check is read back from the store), and a new server on the same store shows the same.
 * The user's checkout is never touched and no verify worktree is left behind. The config file's `verify` commands
 * apply to the phases' products as to any product.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo, worktreePaths } from "../support/git-repo.js";
import { startServer, tempDir, type Notification } from "../support/server-process.js";
import { goalEvents } from "../support/goal-run.js";
import { scriptedConfig } from "../support/verify-project.js";

interface LastCheck {
  ok: boolean;
  exitCode: number | null;
  durationMs: number;
  outputTail: string;
  phaseIndex: number;
  productId: string;
  commit?: string;
  tree?: string;
  at: string;
}
interface GoalStatus {
  status: string;
  endReason?: string;
  phaseIndex: number;
  acceptance: {
    passed: number;
    total: number;
    criteria: { id: string; text: string; passed: boolean; check?: { run: string }; lastCheck?: LastCheck }[];
  };
}

const isGoal = (goalRunId: string, method: string) => (n: Notification) =>
  n.method === method && n.params.goalRunId === goalRunId;

describe("goal runs: a command acceptance criterion", () => {
  it("fails on phase 1's integrated head, passes on phase 2's, and the goal ends achieved", async () => {
    const repo = makeRepo({ "README.md": "# app\n" });
    const headBefore = git(repo, "rev-parse", "HEAD");
    const base = tempDir("acp-orch-goal-check-");
    const flag = join(base, "first-product");
    // The worker's own shell (no ACP), in its worktree `…/worktrees/<productId>/<task>-<n>`: the first phase's
    // product only notes its id; a task of any later product writes the marker.
    const work =
      `p=$(basename "$(dirname "$PWD")"); ` +
      `if [ -e '${flag}' ] && [ "$(cat '${flag}')" != "$p" ]; then printf 'ready\\n' > marker.txt; ` +
      `else printf %s "$p" > '${flag}'; fi`;
    // The config file's `verify` applies to the phases' products too (green-only integration, guarantee 17).
    const { config } = scriptedConfig(
      base,
      { worker: { default: { actions: [{ exec: { command: "/bin/sh", args: ["-c", work] } }], text: "worked" } } },
      { verify: { commands: [{ name: "readme", run: "test -f README.md" }] } },
    );
    const criterion = { text: "marker.txt says ready", check: { run: "grep -qx ready marker.txt", timeoutMs: 60_000 } };
    const server = await startServer({ cwd: base, args: ["--config", config] });
    const statePath = server.statePath;
    let goalRunId = "";
    try {
      ({ goalRunId } = await server.request<{ goalRunId: string }>("x/goal.start", {
        goal: "Write the marker file",
        cwd: repo,
        criteria: [criterion],
        noProgressLimit: 3,
      }));
      const ended = await server.waitFor(isGoal(goalRunId, "x/goal.ended"), 150_000);
      expect(ended.params).toMatchObject({ endReason: "achieved" });
      const started = server.notifications.find(isGoal(goalRunId, "x/goal.started"));
      expect(started?.params.criteria).toEqual([{ id: "c1", ...criterion }]);

      // Phase 1 passed nothing (its check failed although its task completed), phase 2 passed c1.
      const phases = server.notifications.filter(isGoal(goalRunId, "x/goal.phaseStarted"));
      expect(phases.map((n) => n.params.phaseIndex)).toEqual([0, 1]);
      const products = phases.map((n) => n.params.productId as string);
      const assessed = server.notifications.filter(isGoal(goalRunId, "x/goal.phaseAssessed"));
      expect(assessed.map((n) => [n.params.phaseIndex, n.params.passed, n.params.newlyPassed])).toEqual([
        [0, 0, []],
        [1, 1, ["c1"]],
      ]);
      for (const productId of products) {
        const product = await server.request<{
          tasks: { status: string }[];
          verification?: { results: { ok: boolean }[] };
        }>("product.status", { productId });
        expect(product.tasks.length).toBeGreaterThan(0);
        expect(product.tasks.every((t) => t.status === "completed")).toBe(true);
        expect(product.verification?.results.length).toBeGreaterThan(0);
        expect(product.verification?.results.every((r) => r.ok)).toBe(true);
      }

      // The checks ran on each phase's integrated head: phase 1's without the marker, phase 2's with it.
      const heads = products.map((p) => git(repo, "rev-parse", `refs/heads/acp/${p}`));
      expect(git(repo, "ls-tree", "--name-only", heads[0] as string).split("\n")).not.toContain("marker.txt");
      expect(git(repo, "show", `${heads[1]}:marker.txt`)).toBe("ready");
      const checked = goalEvents(statePath, goalRunId).filter((e) => e.type === "criterion_checked");
      expect(checked.map((e) => e.result)).toMatchObject([
        // grep exits 2 when the file is missing, and says so.
        { ok: false, exitCode: 2, phaseIndex: 0, productId: products[0], commit: heads[0] },
        { ok: true, exitCode: 0, phaseIndex: 1, productId: products[1], commit: heads[1] },
      ]);

      expect((checked[0]?.result as LastCheck).outputTail).toContain("marker.txt");
      const status = await server.request<GoalStatus>("x/goal.status", { goalRunId });
      expect(status).toMatchObject({ status: "completed", endReason: "achieved", acceptance: { passed: 1, total: 1 } });
      const [c1] = status.acceptance.criteria;
      expect(c1).toMatchObject({ id: "c1", passed: true, check: criterion.check });
      expect(c1?.lastCheck).toMatchObject({
        ok: true,
        exitCode: 0,
        phaseIndex: 1,
        productId: products[1],
        commit: heads[1],
        tree: git(repo, "rev-parse", `${heads[1]}^{tree}`),
      });
      expect(c1?.lastCheck?.durationMs).toBeGreaterThanOrEqual(0);

      // Never the user's checkout: its HEAD, files and status are as before; no verify worktree is left.
      expect(git(repo, "rev-parse", "HEAD")).toBe(headBefore);
      expect(git(repo, "status", "--porcelain")).toBe("");
      expect(worktreePaths(repo).filter((p) => p.includes("/verify/"))).toEqual([]);
    } finally {
      await server.close();
    }

    // Durable: a new server on the same store reads the same last check from the goal's events.
    const again = await startServer({ cwd: base, statePath, args: ["--config", config] });
    try {
      const status = await again.request<GoalStatus>("x/goal.status", { goalRunId });
      expect(status.acceptance.criteria[0]?.lastCheck).toMatchObject({ ok: true, phaseIndex: 1, exitCode: 0 });
    } finally {
      await again.close();
    }
  }, 240_000);
});
