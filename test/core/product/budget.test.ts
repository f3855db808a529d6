/**
 * Behaviour of budgets (DESIGN.md guarantee 9: a warning at 80 %, and on exceed the product pauses, not fails, and
 * says which limit tripped; resume may add budget) and of the 4-characters-per-token estimate.
 */
import { describe, expect, it } from "vitest";
import { Gate, createHarness, drain, draftPlan, waitUntil, type TaskSpec } from "../../support/fakes.js";

/** t1 → … → t6, each reporting 300 tokens (200 in, 100 out): 900 after t3 (≥ 80 %), 1200 after t4 (> 1000). */
const CHAIN: TaskSpec[] = Array.from({ length: 6 }, (_, i) => ({
  id: `t${i + 1}`,
  ...(i > 0 ? { deps: [`t${i}`] } : {}),
}));

async function overBudget() {
  const h = createHarness({ plan: draftPlan(CHAIN) });
  for (const t of CHAIN) h.worker.script(t.id, { kind: "complete", usage: { inputTokens: 200, outputTokens: 100 } });
  const productId = await h.started({ budget: { maxTotalTokens: 1000 } });
  await h.notifier.next("product.budgetExceeded");
  await h.notifier.next("product.taskStatus", (p) => p.taskId === "t4" && p.status === "completed");
  await drain();
  return { h, productId };
}

describe("token budget", () => {
  it("warns once at 80 % and then reports the exceeded limit", async () => {
    const { h, productId } = await overBudget();
    const methods = h.notifier.sent.map((s) => s.method);

    expect(h.notifier.of("product.budgetWarning", productId)).toEqual([
      { productId, usedTokens: 900, maxTotalTokens: 1000, reason: expect.stringContaining("90 %") },
    ]);
    expect(h.notifier.of("product.budgetExceeded", productId)).toEqual([
      { productId, usedTokens: 1200, maxTotalTokens: 1000, reason: expect.stringContaining("token budget") },
    ]);
    expect(methods.indexOf("product.budgetWarning")).toBeLessThan(methods.indexOf("product.budgetExceeded"));
  });

  it("pauses (not fails) on exceed, with a resumable recovery, and starts nothing more", async () => {
    const { h, productId } = await overBudget();
    const status = await h.service.status(productId);

    expect(status.phase).toBe("paused");
    expect(status.recovery).toMatchObject({ resumable: true, cause: expect.stringContaining("1200 of 1000") });
    expect(h.worker.started).toEqual(["t1", "t2", "t3", "t4"]);
    expect(h.notifier.of("product.completed", productId)).toEqual([]);
  });

  it("continues from there on resume with additionalBudget, keeping the used counters, and completes", async () => {
    const { h, productId } = await overBudget();
    expect(await h.service.resume(productId, { maxTotalTokens: 2000 })).toEqual({ productId, phase: "executing" });
    const done = await h.finished(productId);
    const status = await h.service.status(productId);

    expect(done.phase).toBe("completed");
    expect(h.worker.started).toEqual(["t1", "t2", "t3", "t4", "t5", "t6"]);
    expect(status.budget).toMatchObject({
      usedTokens: 1800,
      inputTokens: 1200,
      outputTokens: 600,
      maxTotalTokens: 3200,
      tokenSource: "reported",
    });
    expect(h.notifier.of("product.budgetExceeded", productId)).toHaveLength(1);
  });
});

describe("token estimate", () => {
  it("counts 4 characters per token of brief and output when the worker reports no usage", async () => {
    // Brief: title "Write" (5) + description "Write the thing" (15) = 20 chars = 5 tokens; output 40 chars = 10 tokens.
    const h = createHarness({ plan: draftPlan([{ id: "w", title: "Write", description: "Write the thing" }]) });
    h.worker.script("w", { kind: "complete", output: "x".repeat(40) });
    const productId = await h.started();
    await h.finished(productId);
    const status = await h.service.status(productId);

    expect(status.budget).toMatchObject({ usedTokens: 15, inputTokens: 5, outputTokens: 10, tokenSource: "estimated" });
  });
});

describe("time budget", () => {
  /** One task held running while the fake clock moves; maxDurationMs 10 s. */
  async function heldUnderTimeBudget() {
    const h = createHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]) });
    h.worker.script("a", { kind: "complete", gate: new Gate() }, { kind: "complete" });
    const productId = await h.started({ budget: { maxDurationMs: 10_000 } });
    await waitUntil(() => h.worker.hasStarted("a"), "a to start");
    await drain();
    return { h, productId };
  }

  it("warns once when 80 % of the wall time has elapsed", async () => {
    const { h, productId } = await heldUnderTimeBudget();
    h.clock.advance(7_000);
    await drain();
    expect(h.notifier.of("product.budgetWarning", productId)).toEqual([]);

    h.clock.advance(1_500);
    const warning = await h.notifier.next("product.budgetWarning");
    expect(warning.reason).toContain("time budget");
    expect((await h.service.status(productId)).phase).toBe("executing");
  });

  it("pauses when the wall time is spent, interrupting the running task, and resumes with more time", async () => {
    const { h, productId } = await heldUnderTimeBudget();
    h.clock.advance(8_500);
    await h.notifier.next("product.budgetWarning");
    h.clock.advance(2_000);
    const exceeded = await h.notifier.next("product.budgetExceeded");
    await waitUntil(() => h.worker.runsOf("a")[0]?.result !== undefined, "a's worker to stop");
    await drain();

    expect(exceeded.reason).toContain("time budget");
    const status = await h.service.status(productId);
    expect(status.phase).toBe("paused");
    expect(status.recovery).toMatchObject({ resumable: true, cause: expect.stringContaining("time budget") });
    expect((await h.tasks(productId))[0]).toMatchObject({ taskId: "a", status: "pending", attempts: 1 });

    await h.service.resume(productId, { maxDurationMs: 60_000 });
    const done = await h.finished(productId);
    expect(done.phase).toBe("completed");
    expect(h.worker.executions.map((e) => `${e.taskId}@${e.attempt}`)).toEqual(["a@1", "a@2", "b@1"]);
    expect((await h.service.status(productId)).budget).toMatchObject({ maxDurationMs: 70_500 });
  });
});
