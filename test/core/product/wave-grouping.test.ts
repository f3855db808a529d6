/**
 * Regression test for issue 7 (benchmarks, "durability cost"): worker results that settle in the same turn of the
 * event loop are written in ONE wave — one append to the authority — instead of one wave (and its fsynced commits)
 * per result. Real workers answer through I/O callbacks, one per completion; before the fix each of them ran its own
 * wave on the next microtask, so a 10,000-task run made ~25,000 commits instead of ~300.
 */
import { describe, expect, it } from "vitest";
import { Gate, createHarness, draftPlan, waitUntil } from "../../support/fakes.js";

describe("execution waves", () => {
  it("write every result that settled in the same event-loop turn in one append, before anything depends on it", async () => {
    const h = createHarness({
      plan: draftPlan([
        { id: "a", instance: "i1" },
        { id: "b", instance: "i2" },
        { id: "c", instance: "i3" },
        { id: "d", instance: "i1", deps: ["a", "b", "c"] },
      ]),
      options: { maxParallelTasks: 4 },
    });
    const gates = { a: new Gate(), b: new Gate(), c: new Gate() };
    for (const [id, gate] of Object.entries(gates)) h.worker.script(id, { kind: "complete", gate });
    const batches: string[][] = [];
    const append = h.authority.appendEvents.bind(h.authority);
    h.authority.appendEvents = (projectId, stream, events, expectedSeq) => {
      batches.push(
        events.flatMap((e) => {
          const event = e as { type?: string; task?: { taskId: string; status: string }; tasks?: { taskId: string }[] };
          // A wave's starts are one `started` event (issue 34).
          if (event.type === "started") return (event.tasks ?? []).map((t) => `${t.taskId}:running`);
          return event.type === "task" && event.task ? [`${event.task.taskId}:${event.task.status}`] : [];
        }),
      );
      return append(projectId, stream, events, expectedSeq);
    };
    const productId = await h.started();
    await waitUntil(() => ["a", "b", "c"].every((id) => h.worker.hasStarted(id)), "a, b and c running");

    // Three answers in three separate callbacks of the same turn, as three agents' I/O would deliver them.
    for (const gate of Object.values(gates)) setImmediate(() => gate.release());
    await h.finished(productId);

    const completions = batches.filter((b) => b.some((t) => t.endsWith(":completed") && !t.startsWith("d")));
    expect(completions).toEqual([["a:completed", "b:completed", "c:completed"]]);
    // The dependent started only after that append (write before act, guarantee 1).
    const dRunning = batches.findIndex((b) => b.includes("d:running"));
    expect(dRunning).toBeGreaterThan(batches.indexOf(completions[0] as string[]));
  });

  it("writes a run's first wave, which settled nothing, as one append: its elapsed time with its starts", async () => {
    const h = createHarness({
      plan: draftPlan([
        { id: "a", instance: "i1" },
        { id: "b", instance: "i2", deps: ["a"] },
      ]),
    });
    const appends: string[][] = [];
    const append = h.authority.appendEvents.bind(h.authority);
    h.authority.appendEvents = (projectId, stream, events, expectedSeq) => {
      appends.push(events.map((e) => String((e as { type?: string }).type)));
      return append(projectId, stream, events, expectedSeq);
    };
    const productId = await h.started();
    await h.finished(productId);
    const confirmed = appends.findIndex((types) => types.includes("confirmed"));
    expect(appends[confirmed + 1]).toEqual(["elapsed", "started"]);
    // Every elapsed time is still written: one per wave, and the end's.
    expect(appends.filter((types) => types.includes("elapsed")).length).toBeGreaterThanOrEqual(3);
  });
});
