/**
 * `status` of a product another server drives (a new user's trial, items 4 and 5), through the built CLI with a real
 * server and scripted agent subprocesses: the task table has a WAITING FOR column with each pending task's
 * `waitingFor` (here a seat: the one instance runs t1), and the budget line gives the run's elapsed time as the owner
 * counts it (it said "1 ms" of a run going for seconds: the stored figure of the owner's last `elapsed` event) and the
 * time budget in minutes, not milliseconds.
 */
import { afterAll, describe, expect, it } from "vitest";
import { formatDuration } from "../../src/operator/format.js";
import { runCli } from "../support/cli-run.js";
import { planProduct } from "../support/plan-product.js";
import { scriptedWorkspace } from "../support/scripted-agent-config.js";
import { startServer, type ServerHandle } from "../support/server-process.js";

const servers: ServerHandle[] = [];
afterAll(async () => {
  for (const s of servers) if (s.child.exitCode === null) await s.kill();
});

type Status = { budget: { elapsedMs: number } };

/** Seconds of a `1.5 s` / `2 min 03 s` duration as formatDuration writes it. */
function seconds(text: string): number {
  const min = /^(\d+) min (\d+) s$/u.exec(text);
  if (min) return Number(min[1]) * 60 + Number(min[2]);
  const s = /^([\d.]+) s$/u.exec(text);
  if (s) return Number(s[1]);
  const ms = /^(\d+) ms$/u.exec(text);
  if (ms) return Number(ms[1]) / 1000;
  throw new Error(`not a duration: ${text}`);
}

describe("status of a product a live server drives", () => {
  it("shows what each pending task waits for and the owner's elapsed time against a budget in minutes", async () => {
    expect([40, 40_000, 61_000, 7_500_000].map(formatDuration)).toEqual([
      "40 ms",
      "40.0 s",
      "1 min 01 s",
      "2 h 05 min",
    ]);
    const { workspace, configFile, statePath } = scriptedWorkspace(
      "status-waits-",
      "slow",
      { worker: { default: { actions: [{ say: "working\n" }], end: "hang" } } },
      { config: "agents.json" },
    );
    const server = await startServer({ statePath, cwd: workspace, args: ["--config", configFile] });
    servers.push(server);
    const { productId } = await planProduct(server, {
      goal: "- Write the parser\n- Write the tests",
      cwd: workspace,
      allowedAgents: ["slow"],
      maxParallelTasks: 1,
      budget: { maxDurationMs: 600_000 },
    });
    const running = server.waitFor((n) => n.method === "product.taskOutputDelta" && n.params.taskId === "t1", 60_000);
    await server.request("product.confirm", { productId });
    await running;
    // The owner's clock has run for 2 s (its own answer counts the open span).
    let before = 0;
    while (before < 2_000) {
      before = (await server.request<Status>("product.status", { productId })).budget.elapsedMs;
      if (before < 2_000) await new Promise((resolve) => setTimeout(resolve, 2_000 - before));
    }

    const shown = await runCli(["status", productId, "--state", statePath], workspace);
    const after = (await server.request<Status>("product.status", { productId })).budget.elapsedMs;
    expect(shown.code, shown.stderr).toBe(0);
    const budget = /^budget: +0 tokens \(none\), (.+) of 10 min 00 s elapsed$/mu.exec(shown.stdout);
    expect(budget, shown.stdout).not.toBeNull();
    const elapsed = seconds(budget?.[1] ?? "");
    // Rounded to a tenth of a second; the owner's clock and this one are the same machine's.
    expect(elapsed).toBeGreaterThanOrEqual(Math.floor(before / 100) / 10);
    expect(elapsed).toBeLessThanOrEqual(Math.ceil(after / 100) / 10);

    expect(shown.stdout).toMatch(/^TASK +STATUS +WAITING FOR +ATTEMPTS +DURATION +AGENT +AFTER +TITLE$/mu);
    expect(shown.stdout).toMatch(/^t1 +running +- +1 /mu);
    expect(shown.stdout).toMatch(/^t2 +pending +seat \(\w+ runs t1\) +0 /mu);
  }, 120_000);
});
