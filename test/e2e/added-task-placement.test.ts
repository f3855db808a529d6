/**
 * A task added mid-run goes to an idle instance (issue 28: the team the user configured is the team that runs),
 * through the built server on real stdio with scripted agent subprocesses: two instances of one agent, t1 held
 * running (its worker waits for a gate file), t2 done; a user's message to the built-in leader adds t3. It went to
 * instance `tasks.length % instances.length` — t1's, busy — and waited behind t1; now it goes to t2's idle instance,
 * runs and completes while t1 is still running, and the choice is the one the stored `mutated` event holds.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { planProduct } from "../support/plan-product.js";
import { scriptedWorkspace } from "../support/scripted-agent-config.js";
import { startServer, type ServerHandle } from "../support/server-process.js";

const servers: ServerHandle[] = [];
afterAll(async () => {
  for (const s of servers) if (s.child.exitCode === null) await s.kill();
});

type Status = { phase: string; tasks: { taskId: string; status: string; instanceId: string }[] };

describe("a task added by a message while one instance is busy", () => {
  it("starts at once on the idle instance and completes while the busy one still runs", async () => {
    const { dir, workspace, configFile } = scriptedWorkspace("added-task-", "alpha", (folder) => ({
      worker: {
        default: { text: "written" },
        tasks: {
          t1: { actions: [{ say: "started t1\n" }, { waitForFile: join(folder, "t1.gate") }], text: "t1 done" },
        },
      },
    }));
    const gate = join(dir, "t1.gate");
    const server = await startServer({ cwd: workspace, args: ["--config", configFile, "--log-level", "warn"] });
    servers.push(server);
    const { productId, plan } = await planProduct(server, {
      goal: "- Write note one\n- Write note two",
      cwd: workspace,
      allowedAgents: ["alpha"],
      maxParallelTasks: 2,
    });
    const instanceOf = new Map(plan.tasks.map((t) => [t.taskId, t.instanceId]));
    expect(plan.instances).toHaveLength(2);
    expect(instanceOf.get("t1")).not.toBe(instanceOf.get("t2"));
    const status = (taskId: string, value: string) => (n: { method: string; params: Record<string, unknown> }) =>
      n.method === "product.taskStatus" && n.params.taskId === taskId && n.params.status === value;
    const t1Running = server.waitFor((n) => n.method === "product.taskOutputDelta" && n.params.taskId === "t1", 60_000);
    const t2Done = server.waitFor(status("t2", "completed"), 60_000);
    await server.request("product.confirm", { productId });
    await Promise.all([t1Running, t2Done]);

    const mutated = server.waitFor((n) => n.method === "product.dagMutated", 60_000);
    const t3Done = server.waitFor(status("t3", "completed"), 60_000);
    const answer = await server.request<{ response: string }>("product.message", {
      productId,
      content: "add task: write the changelog",
    });
    const idle = instanceOf.get("t2") as string;
    // Before the fix: t1's instance (2 tasks % 2 instances = the first), busy until the gate opens.
    expect((await mutated).params.mutation).toMatchObject({ op: "addTask", task: { taskId: "t3", instanceId: idle } });
    expect(answer.response).toContain(`Added t3 "Write the changelog" on ${idle} (alpha, idle).`);
    await t3Done;
    const during = await server.request<Status>("product.status", { productId });
    expect(during.tasks.find((t) => t.taskId === "t1")?.status).toBe("running");

    const completed = server.waitFor((n) => n.method === "product.completed", 60_000);
    writeFileSync(gate, "");
    expect((await completed).params.phase).toBe("completed");
    await server.close();
    // The placement is the stored one: a server opening the store reads t3 on the same instance.
    const reader = await startServer({ statePath: server.statePath, cwd: workspace, args: ["--config", configFile] });
    servers.push(reader);
    const stored = await reader.request<Status>("product.status", { productId });
    expect(stored.tasks.map((t) => [t.taskId, t.status, t.instanceId])).toEqual([
      ["t1", "completed", instanceOf.get("t1")],
      ["t2", "completed", idle],
      ["t3", "completed", idle],
    ]);
  }, 120_000);
});
