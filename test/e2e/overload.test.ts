/**
 * Overload is not failure (issue 28), over stdio with a real agent subprocess: a worker whose model provider answers
 * "529 overloaded" three times and then succeeds completes its task on attempt 1 — each overload is announced
 * (`product.taskOverloaded`, "waiting: provider overloaded, retry in 2 s"), shown on the task in `product.status`
 * (`waiting`), and the provider's `retry-after` is honoured.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { startServer, tempDir } from "../support/server-process.js";

interface Status {
  phase: string;
  tasks: { taskId: string; status: string; attempts: number; waiting?: string; output?: string }[];
}

describe("a provider that answers 529", () => {
  it("three times, then succeeds: the task completes on attempt 1, each wait announced and shown", async () => {
    const workspace = tempDir("overload-");
    const counter = join(workspace, "prompts.count");
    const config = join(workspace, "agents.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: [
          {
            agentId: "busy",
            command: process.execPath,
            args: ["--import", tsxLoader, join(fixturesDir, "overloaded-agent.ts")],
            env: {
              OVERLOADED_AGENT_COUNTER: counter,
              OVERLOADED_AGENT_FAILURES: "3",
              OVERLOADED_AGENT_RETRY_AFTER: "2",
            },
          },
        ],
      }),
    );
    const server = await startServer({ cwd: workspace, args: ["--config", config] });
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Write the release note",
      cwd: workspace,
    });
    const ready = await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    const tasks = (ready.params.plan as { tasks: { taskId: string }[] }).tasks;
    await server.request("product.confirm", { productId, tasks: tasks.slice(0, 1) });
    const first = await server.waitFor(
      (n) => n.method === "product.taskOverloaded" && n.params.productId === productId,
      60_000,
    );
    expect(first.params).toMatchObject({ taskId: "t1", attempt: 1, retry: 1, retryInMs: 2_000 });
    expect(first.params.message).toBe("waiting: provider overloaded, retry in 2 s");
    const during = await server.request<Status>("product.status", { productId });
    expect(during.tasks[0]).toMatchObject({ status: "running", attempts: 1 });
    expect(during.tasks[0]?.waiting).toMatch(/^waiting: provider overloaded, retry in [0-2] s$/u);
    await server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 60_000);
    const overloads = server.notifications.filter(
      (n) => n.method === "product.taskOverloaded" && n.params.productId === productId,
    );
    expect(overloads.map((n) => n.params.retry)).toEqual([1, 2, 3]);
    const done = await server.request<Status>("product.status", { productId });
    expect(done.phase).toBe("completed");
    expect(done.tasks[0]).toMatchObject({ status: "completed", attempts: 1 });
    expect(done.tasks[0]?.waiting).toBeUndefined();
    expect(done.tasks[0]?.output).toContain("done after 3 overloaded answers");
    // Four prompts, all of attempt 1; the waits between them honour retry-after (2 s each).
    const prompts = readFileSync(`${counter}.log`, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { n: number; attempt: number; at: string });
    expect(prompts.map((p) => [p.n, p.attempt])).toEqual([
      [1, 1],
      [2, 1],
      [3, 1],
      [4, 1],
    ]);
    for (let i = 1; i < prompts.length; i++) {
      expect(Date.parse(prompts[i]!.at) - Date.parse(prompts[i - 1]!.at)).toBeGreaterThanOrEqual(1_900);
    }
    expect(await server.close()).toBe(0);
    // Three waits of 2 s and two agent starts: well over vitest's 30 s default on a loaded 2-core machine.
  }, 120_000);
});
