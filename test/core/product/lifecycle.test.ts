/**
 * Behaviour of a product's normal life through ProductService with in-process fakes: planning, confirmation, DAG
 * execution order, status, checkpoints, the notification order rules (PROTOCOL.md section 5), write-before-act
 * (DESIGN.md guarantee 1), terminal phases being sticky (guarantee 5) and the busy rule for leader turns.
 */
import { describe, expect, it } from "vitest";
import { isDomainError } from "../../../src/core/errors.js";
import { ProductStore } from "../../../src/core/product/store.js";
import type { WorkerRequest } from "../../../src/core/ports.js";
import { Gate, createHarness, draftPlan, rejectionOf, waitUntil, type TaskSpec } from "../../support/fakes.js";

/** a → (b, c) → d; b and c on different instances so they may run in parallel. */
const DIAMOND: TaskSpec[] = [
  { id: "a" },
  { id: "b", deps: ["a"] },
  { id: "c", deps: ["a"], instance: "i2" },
  { id: "d", deps: ["b", "c"] },
];

describe("product lifecycle", () => {
  it("answers product.plan before any notification about the product, then announces planReady", async () => {
    const h = createHarness({ plan: draftPlan(DIAMOND) });
    const { productId, phase } = await h.service.plan({ goal: "Build it", cwd: "/work/proj", projectId: "proj" });
    expect(phase).toBe("planning");
    expect(h.notifier.sent).toEqual([]);
    h.notifier.mark("plan answered");
    const ready = await h.notifier.next("product.planReady");
    expect(h.notifier.indexOf("@mark")).toBe(0);
    expect(ready).toMatchObject({ productId, plan: { productId, version: 1, tasks: draftPlan(DIAMOND).tasks } });
    expect((await h.service.status(productId)).phase).toBe("awaiting_confirmation");
  });

  it("runs every task exactly once, each after all of its dependencies completed, then completes", async () => {
    const h = createHarness({ plan: draftPlan(DIAMOND) });
    const productId = await h.planned();
    expect(await h.service.confirm(productId, {})).toEqual({ productId, ok: true, phase: "executing" });
    const done = await h.finished(productId);

    expect(done).toEqual({ productId, projectId: "proj", phase: "completed", summary: "All 4 tasks completed." });
    expect(h.worker.executions.map((e) => `${e.taskId}@${e.attempt}`).sort()).toEqual(["a@1", "b@1", "c@1", "d@1"]);
    for (const e of h.worker.executions) {
      for (const dep of e.request.task.dependsOn) {
        const depRun = h.worker.runsOf(dep)[0];
        expect(depRun?.endSeq, `${dep} must end before ${e.taskId} starts`).toBeLessThan(e.startSeq);
      }
      expect(e.request.dependencyOutputs).toEqual(
        e.request.task.dependsOn.map((dep) => ({ taskId: dep, title: dep, output: `out:${dep}` })),
      );
    }
  });

  it("reports completed progress, outputs and one checkpoint per completed task in status", async () => {
    const h = createHarness({ plan: draftPlan(DIAMOND) });
    const productId = await h.started();
    await h.finished(productId);
    const status = await h.service.status(productId);

    expect(status.phase).toBe("completed");
    expect(status.progress).toEqual({ total: 4, completed: 4, running: 0, failed: 0, pending: 0 });
    expect((status.tasks as { taskId: string; output?: string }[]).map((t) => [t.taskId, t.output])).toEqual([
      ["a", "out:a"],
      ["b", "out:b"],
      ["c", "out:c"],
      ["d", "out:d"],
    ]);
    expect(status.checkpoints).toBe(4);
    expect(h.notifier.of("product.checkpoint", productId)).toHaveLength(4);
    expect(status.recovery).toBeUndefined();
  });

  it("reports running and pending tasks in status progress mid-run", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }, { id: "c", deps: ["b"] }]) });
    const gate = new Gate();
    h.worker.script("b", { kind: "complete", gate });
    const productId = await h.started();
    await waitUntil(() => h.worker.hasStarted("b"), "b to start");
    const status = await h.service.status(productId);

    expect(status.phase).toBe("executing");
    expect(status.progress).toEqual({ total: 3, completed: 1, running: 1, failed: 0, pending: 1 });
    gate.release();
    await h.finished(productId);
  });

  it("keeps only the newest 20 checkpoints when more than 20 tasks complete", async () => {
    const specs: TaskSpec[] = Array.from({ length: 25 }, (_, i) => ({ id: `t${i + 1}`, instance: `i${(i % 5) + 1}` }));
    const h = createHarness({ plan: draftPlan(specs) });
    const productId = await h.started();
    await h.finished(productId);

    expect(h.notifier.of("product.checkpoint", productId)).toHaveLength(25);
    expect((await h.service.status(productId)).checkpoints).toBe(20);
    const { checkpoints } = await h.service.checkpoints(productId);
    expect(checkpoints.map((c) => c.completed)).toEqual(Array.from({ length: 20 }, (_, i) => i + 6));
    expect(checkpoints.every((c) => c.total === 25)).toBe(true);
  });

  it("announces the team and topology at start, and each task running before completed", async () => {
    const h = createHarness({ plan: draftPlan(DIAMOND) });
    const productId = await h.started();
    await h.finished(productId);
    const methods = h.notifier.sent.map((s) => s.method);
    const firstTask = methods.indexOf("product.taskStatus");

    expect(methods.indexOf("product.teamRoster")).toBeGreaterThan(methods.indexOf("product.planReady"));
    expect(methods.indexOf("product.teamRoster")).toBeLessThan(firstTask);
    expect(methods.indexOf("product.dagTopology")).toBeLessThan(firstTask);
    expect(h.notifier.of("product.teamRoster", productId)).toEqual([
      { productId, agents: [{ agentId: "coder", role: "coder", name: "Coder" }] },
    ]);
    const topology = h.notifier.of("product.dagTopology", productId);
    expect(topology).toHaveLength(1);
    expect(topology[0]?.nodes).toEqual(
      DIAMOND.map((t) => ({
        id: t.id,
        title: t.id,
        instanceId: t.instance ?? "i1",
        dependsOn: t.deps ?? [],
        status: "pending",
      })),
    );
    for (const t of DIAMOND) expect(h.notifier.taskTrail(t.id)).toEqual(["running@1", "completed@1"]);
    expect(methods.lastIndexOf("product.taskStatus")).toBeLessThan(methods.indexOf("product.completed"));
  });
});

describe("planning dialogue and deletion", () => {
  it("a message while awaiting confirmation revises the plan: the leader sees it and plan version 2 is announced", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a" }]) });
    const productId = await h.planned();
    h.leader.planResult = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]);

    const answer = await h.service.message(productId, "Add a second step.");
    expect(answer.plan?.version).toBe(2);
    expect(answer.plan?.tasks.map((t) => t.taskId)).toEqual(["a", "b"]);
    expect(h.leader.planCalls[1]?.previousPlan?.version).toBe(1);
    expect(h.leader.planCalls[1]?.dialogue.map((d) => `${d.role}:${d.text}`)).toEqual([
      "user:Build the thing",
      "leader:Here is the plan.",
      "user:Add a second step.",
    ]);
    expect(h.notifier.of("product.planReady", productId).map((p) => (p.plan as { version: number }).version)).toEqual([
      1, 2,
    ]);
  });

  it("delete stops a running product and removes it; a second delete finds nothing", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a" }]) });
    h.worker.script("a", { kind: "hang" });
    const productId = await h.started();
    await waitUntil(() => h.worker.hasStarted("a"), "a to start");

    expect(await h.service.delete(productId)).toEqual({ deleted: true });
    expect(h.worker.runsOf("a")[0]?.request.signal.aborted).toBe(true);
    const fresh = createHarness({ authority: h.authority });
    expect(isDomainError(await rejectionOf(fresh.service.status(productId)), "not_found")).toBe(true);
    expect(await h.service.delete(productId)).toEqual({ deleted: false });
    expect((await fresh.service.list()).products).toEqual([]);
  });
});

describe("write before act (guarantee 1)", () => {
  it("persists the confirmed plan and the task as running before the worker is called", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a" }]) });
    const seen: { phase: string; planVersion?: number; status?: string; attempts?: number }[] = [];
    h.worker.onStart = async (request: WorkerRequest) => {
      const { model } = await new ProductStore(h.authority, 20).load(request.productId);
      const t = model.state.tasks.find((x) => x.taskId === request.task.taskId);
      seen.push({
        phase: model.state.phase,
        ...(model.state.plan ? { planVersion: model.state.plan.version } : {}),
        ...(t ? { status: t.status, attempts: t.attempts } : {}),
      });
    };
    const productId = await h.started();
    await h.finished(productId);

    expect(seen).toEqual([{ phase: "executing", planVersion: 1, status: "running", attempts: 1 }]);
  });

  it("persists a dependency's completion and output before its dependent starts", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]) });
    const depSeen: { status?: string; output?: string }[] = [];
    h.worker.onStart = async (request: WorkerRequest) => {
      if (request.task.taskId !== "b") return;
      const { model } = await new ProductStore(h.authority, 20).load(request.productId);
      const a = model.state.tasks.find((x) => x.taskId === "a");
      depSeen.push({ ...(a ? { status: a.status } : {}), ...(a?.output !== undefined ? { output: a.output } : {}) });
    };
    const productId = await h.started();
    await h.finished(productId);

    expect(depSeen).toEqual([{ status: "completed", output: "out:a" }]);
  });
});

describe("terminal is sticky (guarantee 5)", () => {
  async function completedProduct() {
    const h = createHarness({ plan: draftPlan([{ id: "a" }]) });
    const productId = await h.started();
    await h.finished(productId);
    return { h, productId };
  }

  it("refuses resume, confirm and mutate on a completed product with invalid_phase", async () => {
    const { h, productId } = await completedProduct();
    const add = {
      op: "addTask" as const,
      task: { taskId: "x", title: "x", description: "", instanceId: "i1", dependsOn: [] },
    };
    for (const call of [
      h.service.resume(productId),
      h.service.confirm(productId, {}),
      h.service.mutate(productId, [add]),
    ]) {
      const err = await rejectionOf(call);
      expect(isDomainError(err, "invalid_phase") && err.details.phase).toBe("completed");
    }
    expect((await h.service.status(productId)).phase).toBe("completed");
  });

  it("refuses pause on a completed product, naming the phases that allow it", async () => {
    const { h, productId } = await completedProduct();
    const err = await rejectionOf(h.service.pause(productId));
    expect(isDomainError(err, "invalid_phase") && err.details).toEqual({
      phase: "completed",
      allowed: ["executing", "paused"],
    });
  });
});

describe("leader turns", () => {
  it("refuses a message with busy while the planning turn is still running", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a" }]) });
    h.leader.planGate = new Gate();
    const { productId } = await h.service.plan({ goal: "Build it", cwd: "/work/proj", projectId: "proj" });
    await waitUntil(() => h.leader.planCalls.length === 1, "the planning turn to start");

    const err = await rejectionOf(h.service.message(productId, "also add tests"));
    expect(isDomainError(err, "busy") && err.details).toEqual({ productId });
    h.leader.planGate.release();
    await h.notifier.next("product.planReady");
    expect(h.leader.planCalls).toHaveLength(1);
  });
});

describe("safety checkpoints", () => {
  it("takes a checkpoint every 5 minutes of clock time while executing", async () => {
    const h = createHarness({ plan: draftPlan([{ id: "a" }]) });
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const productId = await h.started();
    await waitUntil(() => h.worker.hasStarted("a"), "a to start");

    h.clock.advance(5 * 60_000);
    await h.notifier.next("product.checkpoint");
    h.clock.advance(5 * 60_000);
    await h.notifier.next("product.checkpoint", () => true, 2);
    const { checkpoints } = await h.service.checkpoints(productId);
    expect(checkpoints.map((c) => [c.completed, c.total])).toEqual([
      [0, 1],
      [0, 1],
    ]);
    gate.release();
    await h.finished(productId);
    expect(h.clock.pendingTimers).toBe(0);
  });
});
