/**
 * Findings of a new user who used the command line from the README alone, each against the built CLI and a store
 * written by a real server run: the resume command `status` prints names the agent config the run used, as `run`'s
 * own hint does; `message` that adds a task answers with the count that includes it and names its instance; `verify
 * --task` of an unknown task says the task does not exist; a missing field, an unknown mutation op or a value outside
 * an enum is refused (-32602) in one plain sentence, on the wire and as the CLI prints it.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli, type CliResult } from "../support/cli-run.js";
import { startServer, tempDir } from "../support/server-process.js";

/**
 * `run --config agents.json --state s.db` in a new temp folder with an agent that cannot start: the product pauses at
 * once (3 tasks pending) with a recovery that names the resume command. Returns the folder, the id and run's output.
 */
async function pausedRun(): Promise<{ dir: string; id: string; run: CliResult }> {
  const dir = tempDir("acp-orch-readme-");
  writeFileSync(
    join(dir, "agents.json"),
    JSON.stringify({ agents: [{ agentId: "broken", role: "worker", command: join(dir, "no-such-agent") }] }),
  );
  const run = await runCli(
    ["run", "--config", "agents.json", "--state", "s.db", "--agents", "broken", "--yes", "--goal", "- Write a README"],
    dir,
  );
  expect(run.code, run.stderr).toBe(1);
  expect(run.stdout).toMatch(/^phase: paused$/m);
  return { dir, id: /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "", run };
}

describe("the command line for a user who read only the README", () => {
  it("status's resume command carries the --config and --state the run used, as run's own hint does", async () => {
    const { dir, id, run } = await pausedRun();
    const flags = ` --state ${join(dir, "s.db")} --config ${join(dir, "agents.json")}`;
    expect(run.stdout).toContain(`resume with: acp-orchestrator resume ${id}${flags}\n`);
    const status = await runCli(["status", id, "--state", "s.db"], dir);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^phase: +paused$/m);
    expect(status.stdout).toContain(`"acp-orchestrator resume ${id}${flags}"`);
  }, 120_000);

  it("message that adds a task prints the progress with that task and names the instance it runs on", async () => {
    const { dir, id } = await pausedRun();
    const message = await runCli(
      ["message", id, "add task: write the changelog", "--state", "s.db", "--config", "agents.json"],
      dir,
    );
    expect(message.code, message.stderr).toBe(0);
    // It said `Added t4 "Write the changelog".` and `Progress: 0 of 3 tasks completed.` (the count before the task).
    expect(message.stdout).toMatch(/^Added t4 "Write the changelog" on i\d+ \(broken, [^)]+\)\.$/m);
    expect(message.stdout).toMatch(/^Progress: 0 of 4 tasks completed\.$/m);
  }, 120_000);

  it("verify --task of a task the product does not have says so (exit 1, as for an unknown product)", async () => {
    const { dir, id } = await pausedRun();
    const verify = await runCli(["verify", id, "--task", "zz", "--state", "s.db"], dir);
    // It said the product had no verification commands, as if the task were there.
    expect(verify).toEqual({ code: 1, stdout: "", stderr: `acp-orchestrator: Product ${id} has no task zz.\n` });
    const known = await runCli(["verify", id, "--task", "t1", "--state", "s.db"], dir);
    expect(known.stderr).toContain(`Product ${id} has no verification commands`);
  }, 120_000);

  it("params errors say in plain words what was wrong: a missing field, a mutation's op, an enum's value", async () => {
    const dir = tempDir("acp-orch-readme-");
    const server = await startServer({ statePath: join(dir, "s.db"), cwd: dir, args: ["--log-level", "warn"] });
    try {
      const refused = (method: string, params: unknown) =>
        server.request(method, params).then(
          () => ({ code: 0, message: "answered" }),
          (err: { code: number; message: string }) => ({ code: err.code, message: err.message }),
        );
      // They said "goal invalid input: expected string, received undefined" and "mutations[0].op invalid input".
      expect(await refused("product.plan", { cwd: dir })).toEqual({
        code: -32602,
        message: "Invalid params: goal is required.",
      });
      const ready = server.waitFor((n) => n.method === "product.planReady", 60_000);
      const { productId } = await server.request<{ productId: string }>("product.plan", {
        goal: "- Write a README",
        cwd: dir,
      });
      await ready;
      const ops = "addTask, removeTask, updateTask, reassign, addDependency, removeDependency";
      expect(await refused("product.mutate", { productId, mutations: [{ op: "explode" }] })).toEqual({
        code: -32602,
        message: `Invalid params: mutations[0].op must be one of ${ops}, not "explode".`,
      });
      expect((await refused("product.mutate", { productId, mutations: [{ taskId: "t1" }] })).message).toBe(
        `Invalid params: mutations[0].op is required and must be one of ${ops}.`,
      );
      // And "maxParallelTasks too small: expected number to be >=1", "goal too small: expected string to have >=1
      // characters" (a trial of 2026-12-06).
      expect(await refused("product.plan", { goal: "- x", cwd: dir, maxParallelTasks: 0 })).toEqual({
        code: -32602,
        message: "Invalid params: maxParallelTasks must be at least 1.",
      });
      expect((await refused("product.plan", { goal: "", cwd: dir })).message).toBe(
        "Invalid params: goal must not be empty.",
      );
      expect((await refused("product.list", { limit: 5000 })).message).toBe(
        "Invalid params: limit must be at most 1000.",
      );
      expect((await refused("product.list", { phase: "done" })).message).toMatch(
        /^Invalid params: phase must be one of planning, awaiting_confirmation, executing, paused, completed, /,
      );
      // The CLI prints the owner's refusal of an edited plan in the same words.
      writeFileSync(join(dir, "plan.json"), JSON.stringify({ tasks: [{ taskId: "t1", instanceId: "i1" }] }));
      const confirm = await runCli(["confirm", productId, "--edit", "plan.json", "--state", "s.db"], dir);
      // Exit 2, as for an --edit file that cannot be read (a UsageError): it was 1.
      expect(confirm.code).toBe(2);
      writeFileSync(join(dir, "bad.json"), "{");
      const unreadable = await runCli(["confirm", productId, "--edit", "bad.json", "--state", "s.db"], dir);
      expect(unreadable.code).toBe(2);
      expect(confirm.stderr).toContain(" request has invalid params (tasks.0.title is required; ");
    } finally {
      await server.close();
    }
  }, 120_000);
});
