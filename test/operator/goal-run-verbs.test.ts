/**
 * A new user's trial (item 4): the CLI and a goal run id. `events GOAL` prints the goal run's own history (phase
 * started with its product, assessed, ended; --json one record per line), where it said there was no product; `pause
 * GOAL` (and `resume GOAL`) say in one sentence that a goal run is steered by its ACP client (x/goal.*) and name its
 * product with the command for it, exit 2, instead of "no product". A real server ran the goal run over stdio.
 */
import { join } from "node:path";
import { expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { startServer, tempDir } from "../support/server-process.js";

it("events of a goal run, and a product verb given a goal run id", async () => {
  const dir = tempDir("acp-orch-goal-cli-");
  const state = join(dir, "state.db");
  const server = await startServer({ statePath: state, cwd: dir, args: ["--log-level", "warn"] });
  let goalRunId: string;
  let productId: string;
  try {
    ({ goalRunId } = await server.request<{ goalRunId: string }>("x/goal.start", {
      goal: "Prepare the release:\n- Write the changelog",
      cwd: dir,
    }));
    const ended = server.waitFor((n) => n.method === "x/goal.ended" && n.params.goalRunId === goalRunId, 90_000);
    const phase = await server.waitFor(
      (n) => n.method === "x/goal.phaseStarted" && n.params.goalRunId === goalRunId,
      90_000,
    );
    productId = String(phase.params.productId);
    await ended;
  } finally {
    await server.close();
  }

  const events = await runCli(["events", goalRunId, "--state", state], dir);
  expect(events.code, events.stderr).toBe(0);
  expect(events.stdout).toMatch(/^ +1 +\S+ +goal run started: Prepare the release: - Write the changelog$/m);
  expect(events.stdout).toMatch(new RegExp(`^ +\\d+ +\\S+ +phase 1 started: product ${productId}$`, "m"));
  expect(events.stdout).toMatch(/^ +\d+ +\S+ +ended achieved: /m);
  const json = await runCli(["events", goalRunId, "--state", state, "--json"], dir);
  const lines = json.stdout.trim().split("\n");
  expect(lines.length).toBe(events.stdout.trim().split("\n").length);
  expect((JSON.parse(lines[0] ?? "") as { event: { type: string } }).event.type).toBe("goal_started");
  const follow = await runCli(["events", goalRunId, "--state", state, "--follow"], dir);
  expect(follow.code).toBe(0); // an ended goal run: --follow ends at once
  expect(follow.stdout).toBe(events.stdout);

  const pause = await runCli(["pause", goalRunId, "--state", state], dir);
  expect(pause.code).toBe(2);
  expect(pause.stderr).toBe(
    `acp-orchestrator: ${goalRunId} is a goal run (completed), not a product: "pause" acts on a product, and a goal ` +
      "run is steered by the ACP client that started it (x/goal.pause, x/goal.resume, x/goal.stop; docs/HOSTS.md). " +
      `Its current product is ${productId}: "acp-orchestrator pause ${productId}" acts on that product alone; the ` +
      "goal run then waits, blocked, until its client resumes it (x/goal.resume).\n",
  );
  const resume = await runCli(["resume", goalRunId, "--state", state], dir);
  expect(resume.code).toBe(2);
  expect(resume.stderr).toContain(`"resume" acts on a product`);
  const missing = await runCli(["events", "goal_nope", "--state", state], dir);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/goal_nope/);
}, 180_000);
