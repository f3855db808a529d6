/**
 * Case 5 of issue 28, through the built CLI end to end: a task that fails on its agent gets a fix-up on another
 * agent's instance (not the failing one), and the failed task stays visible — `superseded`, linked to its fix-up — in
 * `status` (JSON and human), `events`, `graph` and the dashboard's data, while the product completes. A dashboard link
 * to a task the product does not have is not another task: its data has no such task and the task's output route
 * answers 404 (the page's "not found" is checked in a browser by test/ui/dashboard-scenario.ts).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { runCli } from "../support/cli-run.js";
import { CLI, tempDir } from "../support/server-process.js";

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
});

/**
 * Starts `acp-orchestrator ui` and resolves the dashboard's base address (origin + "/") once it prints its URL; the
 * printed URL carries the per-launch key as `?key=…` (issue 29), which read-only pages do not need.
 */
function startUi(args: string[]): Promise<string> {
  const child = spawn(process.execPath, [CLI, "ui", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /dashboard: (http:\/\/\S+)/u.exec(out);
      if (m) resolve(`${new URL(m[1] as string).origin}/`);
    });
    child.once("exit", (code) => reject(new Error(`ui exited ${String(code)}`)));
  });
}

interface StatusTask {
  taskId: string;
  status: string;
  instanceId: string;
  supersedes?: string;
  supersededBy?: string;
}

describe("a fix-up (issue 28, case 5)", () => {
  it("runs on another agent, and the failed task stays visible as superseded, linked to its fix-up", async () => {
    const dir = tempDir("fix-up-");
    const log = join(dir, "executions.jsonl");
    writeFileSync(log, "");
    const config = join(dir, "agents.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: [
          {
            agentId: "flaky",
            strengths: ["parser"],
            command: process.execPath,
            args: ["--import", tsxLoader, join(fixturesDir, "failing-agent.ts")],
          },
          {
            agentId: "steady",
            strengths: ["docs"],
            command: process.execPath,
            args: [compileLoggingAgent(dir)],
            env: { LOGGING_AGENT_LOG: log },
          },
        ],
      }),
    );
    const state = join(dir, "state.db");
    const goal = "- Write the parser\n- Write the docs";
    const run = await runCli(["run", "--goal", goal, "--yes", "--config", config, "--state", state, "--cwd", dir], dir);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^ {2}t1 .*\[flaky\]$/mu);
    const id = /^product (prd_\w+)$/mu.exec(run.stdout)?.[1] ?? "";

    // status --json: t1 failed (its stored status), superseded by t1-fix, which ran on steady's instance.
    const json = await runCli(["status", id, "--json", "--state", state], dir);
    expect(json.code, json.stderr).toBe(0);
    const status = JSON.parse(json.stdout) as {
      phase: string;
      plan: { instances: { instanceId: string; agentId: string }[] };
      tasks: StatusTask[];
    };
    expect(status.phase).toBe("completed");
    const agentOf = (instanceId: string) => status.plan.instances.find((i) => i.instanceId === instanceId)?.agentId;
    const t1 = status.tasks.find((t) => t.taskId === "t1");
    const fix = status.tasks.find((t) => t.taskId === "t1-fix");
    expect(t1).toMatchObject({ status: "failed", supersededBy: "t1-fix" });
    expect(fix).toMatchObject({ status: "completed", supersedes: "t1" });
    expect(agentOf(t1!.instanceId)).toBe("flaky");
    expect(fix!.instanceId).not.toBe(t1!.instanceId);
    expect(agentOf(fix!.instanceId)).toBe("steady");
    // The fix-up really ran on steady (its execution log names it).
    expect(
      readExecutionLog(log)
        .filter((l) => l.event === "done")
        .map((l) => l.taskId),
    ).toContain("t1-fix");

    // The run's summary, status's progress and list say superseded where they said failed (a new user's trial).
    expect(run.stdout).toMatch(/^ {2}t1 +superseded /mu);
    const list = await runCli(["list", "--state", state], dir);
    expect(list.stdout).toMatch(new RegExp(`^${id} +completed +2/3 \\(1 superseded\\) `, "mu"));

    // status (human): t1 reads superseded with its link.
    const human = await runCli(["status", id, "--state", state], dir);
    expect(human.stdout).toContain("progress:    2/3 completed, 0 running, 0 failed, 1 superseded, 0 pending");
    expect(human.stdout).toMatch(/^t1 +superseded /mu);
    expect(human.stdout).toContain("t1  superseded by its fix-up t1-fix");
    expect(human.stdout).toContain("t1-fix  fix-up of t1");

    // events: the mutation names the fix-up and what it supersedes.
    const events = await runCli(["events", id, "--state", state], dir);
    expect(events.stdout).toMatch(/changed by the leader: add t1-fix on \S+ \(fix-up superseding t1\)/u);

    // graph: t1 is drawn superseded, with a fix-up edge to t1-fix.
    const mermaid = await runCli(["graph", id, "--state", state], dir);
    expect(mermaid.stdout).toContain("n_t1 -. fix-up .-> n_t1_fix");
    expect(mermaid.stdout).toMatch(/^ {2}class n_t1 superseded$/mu);
    const dot = await runCli(["graph", id, "--format", "dot", "--state", state], dir);
    expect(dot.stdout).toContain('n_t1 -> n_t1_fix [style=dashed, label="fix-up"];');

    // Dashboard data: t1 superseded with its link; an unknown task is no task (its output route is a 404).
    const url = await startUi(["--state", state, "--port", "0"]);
    const view = (await (await fetch(`${url}api/products/${id}`)).json()) as { tasks: StatusTask[] };
    expect(view.tasks.find((t) => t.taskId === "t1")).toMatchObject({ status: "superseded", supersededBy: "t1-fix" });
    expect(view.tasks.find((t) => t.taskId === "t1-fix")).toMatchObject({ status: "completed", supersedes: "t1" });
    expect(view.tasks.some((t) => t.taskId === "t22")).toBe(false);
    const missing = await fetch(`${url}api/products/${id}/tasks/t22/output`);
    expect(missing.status).toBe(404);
  }, 120_000);
});
