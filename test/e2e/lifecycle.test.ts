/**
 * The whole product lifecycle over real stdio, driven by the official ACP SDK client against the built server as a
 * subprocess, with tasks executed by built-in worker subprocesses (issue 2, "Must show").
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isJsonRpcLine, startServer, tempDir } from "../support/server-process.js";

interface TaskState {
  taskId: string;
  title: string;
  status: string;
  attempts: number;
  output?: string;
  dependsOn: string[];
}
interface Status {
  productId: string;
  phase: string;
  tasks: TaskState[];
  progress: { total: number; completed: number; running: number; failed: number; pending: number };
  checkpoints: number;
  lastCheckpointAt?: string;
  dropped: number;
  budget: { usedTokens: number; elapsedMs: number; tokenSource?: string };
}

const GOAL = [
  "Document the service:",
  "- Describe the architecture",
  "- Document the public API",
  "- Then write a tutorial based on the API",
].join("\n");

describe("product lifecycle over stdio", () => {
  it("plans, revises, confirms, runs every task on built-in workers, completes, and survives a restart", async () => {
    const workspace = tempDir("acp-orch-ws-");
    const statePath = join(tempDir(), "state.db");
    const server = await startServer({ statePath, cwd: workspace });

    const planned = await server.request<{ productId: string; phase: string }>("product.plan", {
      goal: GOAL,
      cwd: workspace,
    });
    expect(planned.phase).toBe("planning");
    const productId = planned.productId;
    // product.plan answers before any notification about the product (PROTOCOL.md section 5).
    const firstNotificationIndex = server.stdoutLines.findIndex(
      (l) => l.includes(`"productId":"${productId}"`) && l.includes('"method"'),
    );
    const responseIndex = server.stdoutLines.findIndex((l) => l.includes('"result"') && l.includes(productId));
    expect(responseIndex).toBeGreaterThanOrEqual(0);
    if (firstNotificationIndex >= 0) expect(responseIndex).toBeLessThan(firstNotificationIndex);

    const ready = await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    const plan = ready.params.plan as { version: number; tasks: TaskState[] };
    expect(plan.tasks.length).toBe(3);

    // A revision: the leader replans from goal plus dialogue and the plan gains a task.
    const revised = await server.request<{ response: string; plan?: { version: number; tasks: TaskState[] } }>(
      "product.message",
      { productId, content: "Also add a changelog entry" },
    );
    expect(revised.response.length).toBeGreaterThan(0);
    expect(revised.plan?.version).toBeGreaterThan(plan.version);
    expect(revised.plan?.tasks.length).toBe(4);

    const completed = server.waitFor(
      (n) => n.method === "product.completed" && n.params.productId === productId,
      30_000,
    );
    const confirmed = await server.request("_product.confirm", { productId });
    expect(confirmed).toEqual({ productId, ok: true, phase: "executing" });
    const done = await completed;
    expect(done.params.phase).toBe("completed");

    const status = await server.request<Status>("product.status", { productId });
    expect(status.phase).toBe("completed");
    expect(status.progress).toEqual({ total: 4, completed: 4, running: 0, failed: 0, pending: 0 });
    expect(status.tasks.every((t) => t.status === "completed" && t.attempts === 1 && (t.output ?? "").length > 0)).toBe(
      true,
    );
    expect(status.checkpoints).toBe(4);
    expect(status.dropped).toBe(0);
    expect(status.budget.usedTokens).toBeGreaterThan(0);

    // Each task's status went running → completed, and a dependent started only after its dependency completed.
    const statusEvents = server.notifications
      .filter((n) => n.method === "product.taskStatus")
      .map((n) => `${String(n.params.taskId)}:${String(n.params.status)}`);
    for (const t of status.tasks) {
      expect(statusEvents.indexOf(`${t.taskId}:running`)).toBeLessThan(statusEvents.indexOf(`${t.taskId}:completed`));
      for (const dep of t.dependsOn) {
        expect(statusEvents.indexOf(`${dep}:completed`)).toBeLessThan(statusEvents.indexOf(`${t.taskId}:running`));
      }
    }
    for (const method of [
      "product.teamRoster",
      "product.dagTopology",
      "product.checkpoint",
      "product.taskOutputDelta",
      "product.budgetUpdate",
    ]) {
      expect(
        server.notifications.some((n) => n.method === method),
        method,
      ).toBe(true);
    }

    // The built-in worker wrote one note per task into the workspace.
    const notes = readdirSync(join(workspace, "notes"));
    expect(notes).toHaveLength(4);
    for (const t of status.tasks) {
      const note = notes.find((n) => n.startsWith(`${t.taskId}-`));
      expect(note, t.taskId).toBeDefined();
      expect(readFileSync(join(workspace, "notes", note!), "utf8")).toContain(t.title);
    }

    const checkpoints = await server.request<{
      checkpoints: { checkpointId: string; completed: number; total: number }[];
    }>("product.checkpoints", { productId });
    expect(checkpoints.checkpoints.map((c) => c.completed)).toEqual([1, 2, 3, 4]);

    // Every stdout line was a JSON-RPC message; logs went to stderr.
    expect(await server.close()).toBe(0);
    expect(server.stdoutLines.filter((l) => l.trim() !== "").every(isJsonRpcLine)).toBe(true);
    expect(server.stderr()).toContain("serving on stdio");

    // A restarted server on the same store shows the persisted product.
    const again = await startServer({ statePath, cwd: workspace });
    const list = await again.request<{
      products: { productId: string; phase: string; progress: { completed: number } }[];
    }>("product.list", {});
    expect(list.products).toEqual([
      expect.objectContaining({ productId, phase: "completed", progress: expect.objectContaining({ completed: 4 }) }),
    ]);
    const reloaded = await again.request<Status>("product.status", { productId });
    expect(reloaded.phase).toBe("completed");
    expect(reloaded.tasks.map((t) => t.status)).toEqual(["completed", "completed", "completed", "completed"]);
    expect(reloaded.checkpoints).toBe(4);
    expect(await again.close()).toBe(0);
    expect(again.stdoutLines.filter((l) => l.trim() !== "").every(isJsonRpcLine)).toBe(true);
    expect(existsSync(statePath)).toBe(true);
  });
});
