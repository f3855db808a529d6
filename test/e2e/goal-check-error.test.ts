/**
 * A command acceptance criterion whose check cannot be run at all (issue 30 follow-up; docs/VERIFY.md, Goals): the
 * verify worktree of the goal run cannot be made (its parent `<git-common-dir>/acp-orchestrator/verify` is a plain
 * file), which is an error of the check's runner, not a verdict on the criterion. Over real stdio, a real git
 * repository and a scripted ACP worker subprocess that does write what the criterion checks:
 * - the failed try is recorded as `criterion_check_errored`, never as a failed `criterion_checked`, and the phase is
 *   not assessed on it (no "criterion not met");
 * - it is tried again with backoff, and the count of tries is durable: the server is SIGKILLed after the first
 *   errored try, a new server resumes the goal, and the tries go on from the recorded count (1, 2, 3, 4);
 * - after `CRITERION_CHECK_ATTEMPTS` tries the goal is `blocked` and says why (`failedReason`, the criterion's
 *   `checkError`, `progressSummary`), distinct from a criterion that is not met;
 * - once the cause is gone, `x/goal.resume` runs the check again, it passes, and the goal ends `achieved`.
 *
 * Without the fix the first try is recorded as a failed check (exit code null) and the phase assessed on it.
 */
import { rmSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CRITERION_CHECK_ATTEMPTS } from "../../protocol/goal.js";
import { makeRepo, worktreePaths } from "../support/git-repo.js";
import { startServer, tempDir, type Notification } from "../support/server-process.js";
import { goalEvents, resumeGoalWhenLeaseFree } from "../support/goal-run.js";
import { scriptedConfig } from "../support/verify-project.js";

interface GoalStatus {
  status: string;
  endReason?: string;
  failedReason?: string;
  progressSummary: string;
  acceptance: {
    passed: number;
    criteria: {
      id: string;
      passed: boolean;
      lastCheck?: { ok: boolean; exitCode: number | null };
      checkError?: { error: string; attempts: number; phaseIndex: number; productId: string; commit?: string };
    }[];
  };
}

/** Polls `probe` (20 ms apart) until it returns a value. */
async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 120_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const checkEvents = (statePath: string, goalRunId: string) =>
  goalEvents(statePath, goalRunId).filter(
    (e) => e.type === "criterion_checked" || e.type === "criterion_check_errored",
  );

describe("goal runs: a command criterion whose check cannot be run", () => {
  it("is retried with backoff across a kill -9, then blocks the goal saying why; resume after the fix achieves it", async () => {
    const repo = makeRepo({ "README.md": "# app\n" });
    const base = tempDir("acp-orch-goal-check-error-");
    // The obstacle: the verify worktrees' parent folder is a file, so no verify worktree can be made.
    const obstacle = join(repo, ".git", "acp-orchestrator", "verify");
    mkdirSync(join(obstacle, ".."), { recursive: true });
    writeFileSync(obstacle, "not a folder\n");
    const { config } = scriptedConfig(base, {
      worker: {
        default: {
          actions: [{ exec: { command: "/bin/sh", args: ["-c", "printf 'ready\\n' > marker.txt"] } }],
          text: "worked",
        },
      },
    });
    const statePath = join(base, "state.db");
    const start = () => startServer({ cwd: base, statePath, args: ["--config", config] });
    const criterion = { text: "marker.txt says ready", check: { run: "grep -qx ready marker.txt", timeoutMs: 60_000 } };

    let server = await start();
    let goalRunId = "";
    try {
      ({ goalRunId } = await server.request<{ goalRunId: string }>("x/goal.start", {
        goal: "Write the marker file",
        cwd: repo,
        criteria: [criterion],
      }));
      // The first try of the check ends: it is recorded as an error of the runner, not as a failed check.
      const [first] = await until("the first try of the check", () => {
        const e = checkEvents(statePath, goalRunId);
        return e.length > 0 ? e : undefined;
      });
      expect(first?.type).toBe("criterion_check_errored");
      expect(first?.error).toMatchObject({ attempts: 1, phaseIndex: 0 });
      expect(String((first?.error as { error: string }).error)).not.toBe("");
    } finally {
      await server.kill();
    }

    // A new server resumes the goal: the tries go on from the recorded count, with backoff, up to the bound.
    server = await start();
    try {
      const isGoal = (method: string) => (n: Notification) => n.method === method && n.params.goalRunId === goalRunId;
      await resumeGoalWhenLeaseFree(server, goalRunId);
      const blocked = await until("the goal to be blocked", async () => {
        const s = await server.request<GoalStatus>("x/goal.status", { goalRunId });
        return s.status === "blocked" ? s : undefined;
      });
      const tries = checkEvents(statePath, goalRunId);
      expect(tries.map((e) => e.type)).toEqual(Array(CRITERION_CHECK_ATTEMPTS).fill("criterion_check_errored"));
      expect(tries.map((e) => (e.error as { attempts: number }).attempts)).toEqual([1, 2, 3, 4]);
      // Backoff: each try after the first waited (1 s, 2 s, 4 s) after the one before.
      const at = tries.map((e) => Date.parse(e.at as string));
      for (let i = 1; i < at.length; i++)
        expect((at[i] as number) - (at[i - 1] as number)).toBeGreaterThanOrEqual(1_000);
      // Said as an error of the check's runner, not as a criterion that is not met; the phase was not assessed.
      expect(blocked.failedReason).toMatch(/Criterion c1's check could not be run .*4 tries.*not a verdict/s);
      const [c1] = blocked.acceptance.criteria;
      expect(c1?.lastCheck).toBeUndefined();
      expect(c1?.checkError).toMatchObject({ attempts: 4, phaseIndex: 0 });
      expect(blocked.progressSummary).toContain("could not be run");
      expect(goalEvents(statePath, goalRunId).some((e) => e.type === "phase_assessed")).toBe(false);
      expect(server.notifications.some(isGoal("x/goal.phaseAssessed"))).toBe(false);

      // The cause is fixed; resume runs the check again (a fresh set of tries), it passes, the goal is achieved.
      rmSync(obstacle);
      await resumeGoalWhenLeaseFree(server, goalRunId);
      const ended = await server.waitFor(isGoal("x/goal.ended"), 120_000);
      expect(ended.params).toMatchObject({ endReason: "achieved" });
      const last = checkEvents(statePath, goalRunId).at(-1);
      expect(last).toMatchObject({ type: "criterion_checked", result: { ok: true, exitCode: 0, phaseIndex: 0 } });
      const done = await server.request<GoalStatus>("x/goal.status", { goalRunId });
      expect(done.acceptance.criteria[0]?.checkError).toBeUndefined();
      expect(done.acceptance.criteria[0]?.lastCheck).toMatchObject({ ok: true, exitCode: 0 });
      expect(worktreePaths(repo).filter((p) => p.includes("/verify/"))).toEqual([]);
    } finally {
      await server.close();
    }
  }, 240_000);
});
