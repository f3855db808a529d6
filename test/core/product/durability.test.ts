/**
 * Behaviour across a "restart" (a second ProductService over the same MemoryAuthority): at-most-once for finished
 * work (DESIGN.md guarantee 7), fail closed per record (guarantee 4), reading never writes (guarantee 3), and a stale
 * owner's late write being refused (guarantee 6).
 */
import { describe, expect, it } from "vitest";
import type { AuthorityCall } from "../../../src/adapters/persistence/memory-authority.js";
import { productStream } from "../../../src/core/product/records.js";
import { Gate, createHarness, drain, draftPlan, rejectionOf, waitUntil, type Harness } from "../../support/fakes.js";

const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }, { id: "c", deps: ["b"] }]);

/** First process: a completes, b is persisted as running and its worker never returns (the process "dies"). */
async function crashedWhileRunning() {
  const first = createHarness({ plan: PLAN });
  const gate = new Gate();
  first.worker.script("b", { kind: "complete", gate });
  const productId = await first.started();
  await waitUntil(() => first.worker.hasStarted("b"), "b to start");
  await drain();
  const second = createHarness({ plan: PLAN, authority: first.authority, clock: first.clock, ids: first.ids });
  return { first, second, productId, gate };
}

describe("restart (guarantee 7)", () => {
  it("loads a product left executing with a running task and explains that no process drives it", async () => {
    const { second, productId } = await crashedWhileRunning();
    const status = await second.service.status(productId);

    expect(status.phase).toBe("executing");
    expect((await second.tasks(productId)).map((t) => [t.taskId, t.status])).toEqual([
      ["a", "completed"],
      ["b", "running"],
      ["c", "pending"],
    ]);
    expect(status.recovery).toMatchObject({ resumable: true, cause: expect.stringContaining("No process is driving") });
  });

  it("on resume puts the running task back to pending with an interruption note and its attempt counted", async () => {
    const { second, productId } = await crashedWhileRunning();
    const seqBefore = (await second.authority.readEvents("proj", productStream(productId), 0)).length;
    await second.service.resume(productId);
    await second.finished(productId);

    const events = (await second.authority.readEvents("proj", productStream(productId), seqBefore)).map(
      (e) =>
        e.event as { type: string; task?: { taskId: string; status: string; attempts: number; interruption?: string } },
    );
    const reset = events.find((e) => e.type === "task" && e.task?.taskId === "b");
    expect(reset?.task).toMatchObject({
      status: "pending",
      attempts: 1,
      interruption: expect.stringContaining("shut down"),
    });
    expect(second.worker.runsOf("b").map((e) => e.attempt)).toEqual([2]);
  });

  it("never re-runs the task completed before the crash", async () => {
    const { second, productId } = await crashedWhileRunning();
    await second.service.resume(productId);
    const done = await second.finished(productId);

    expect(done.phase).toBe("completed");
    expect(second.worker.started).toEqual(["b", "c"]);
    expect(second.worker.runsOf("c")[0]?.request.dependencyOutputs).toEqual([
      { taskId: "b", title: "b", output: "out:b" },
    ]);
  });

  it("refuses the old owner's late result once the new owner wrote (guarantee 6)", async () => {
    const { first, second, productId, gate } = await crashedWhileRunning();
    await second.service.resume(productId);
    await second.finished(productId);
    const stream = await second.authority.readEvents("proj", productStream(productId), 0);

    gate.release();
    await drain();
    expect(await first.authority.readEvents("proj", productStream(productId), 0)).toEqual(stream);
    // The refused instance is fenced; reading its status shows the stored truth, not its stale memory.
    expect((await first.service.status(productId)).phase).toBe("completed");
    expect((await second.service.status(productId)).phase).toBe("completed");
    expect(first.worker.started).toEqual(["a", "b"]);
  });

  it("keeps driving when an earlier owner's header write lands after the take-over (issue 32)", async () => {
    const { second, productId } = await crashedWhileRunning();
    const gate = new Gate();
    second.worker.script("b", { kind: "complete", gate });
    await second.service.resume(productId);
    await waitUntil(() => second.worker.hasStarted("b"), "b to start again");
    await drain();
    // The earlier owner's header write (its held-back progress), sent before the take-over, lands only now: after the
    // new owner wrote the header and kept its revision.
    const header = await second.authority.get("proj", "product", productId);
    if (!header) throw new Error("no header");
    await second.authority.put(
      "proj",
      "product",
      productId,
      { ...(header.value as object), name: "late" },
      header.revision,
    );

    gate.release();
    const ended = () =>
      second.notifier.of("product.completed", productId).length + second.notifier.of("product.ownershipLost").length;
    await waitUntil(() => ended() > 0, "the product to complete or its owner to be fenced");
    expect(second.notifier.of("product.ownershipLost")).toEqual([]);
    expect(second.notifier.of("product.completed", productId)).toHaveLength(1);
    expect((await second.authority.get("proj", "product", productId))?.value).toMatchObject({
      phase: "completed",
      name: (header.value as { name: string }).name,
    });
    expect(second.worker.started).toEqual(["b", "c"]);
  });
});

describe("fail closed (guarantee 4) and reading never writes (guarantee 3)", () => {
  /** A product paused with b pending, then three invalid events appended straight to its stream. */
  async function tampered() {
    const first = createHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]) });
    first.worker.script("b", { kind: "hang" }, { kind: "complete" });
    const productId = await first.started();
    await waitUntil(() => first.worker.hasStarted("b"), "b to start");
    await drain();
    await first.service.pause(productId);
    const stream = productStream(productId);
    const seq = (await first.authority.readEvents("proj", stream, 0)).length;
    const evil = {
      taskId: "evil",
      title: "evil",
      description: "rm -rf",
      instanceId: "i1",
      dependsOn: [],
      status: "pending",
      attempts: 0,
    };
    await first.authority.appendEvents(
      "proj",
      stream,
      [
        { junk: true },
        { v: 2, at: "2030-01-01T00:00:00.000Z", type: "task", task: evil },
        { v: 1, at: "2030-01-01T00:00:00.000Z", type: "task", task: { ...evil, taskId: "a", attempts: -1 } },
      ],
      seq,
    );
    const second = createHarness({ plan: PLAN, authority: first.authority, clock: first.clock, ids: first.ids });
    return { second, productId };
  }

  /** Records every write operation the authority is asked to perform (successful or not). */
  function recordWrites(h: Harness): AuthorityCall[] {
    const writes: AuthorityCall[] = [];
    h.authority.setFailure((call) => {
      if (call.op === "put" || call.op === "delete" || call.op === "appendEvents") writes.push(call);
      return false;
    });
    return writes;
  }

  it("skips and counts records that do not parse, applying nothing from them", async () => {
    const { second, productId } = await tampered();
    const status = await second.service.status(productId);

    expect(status.dropped).toBe(3);
    expect((await second.tasks(productId)).map((t) => [t.taskId, t.status, t.attempts])).toEqual([
      ["a", "completed", 1],
      ["b", "pending", 1],
    ]);
  });

  it("never executes anything from a dropped record: a product that lost an event is not run again", async () => {
    const { second, productId } = await tampered();
    const refusal = await rejectionOf(second.service.resume(productId));
    await drain();

    expect(refusal).toMatchObject({ code: "invalid_phase", details: { allowed: [] } });
    expect((refusal as Error).message).toMatch(/failed validation or (is|are) missing/);
    expect((await second.service.status(productId)).recovery).toMatchObject({ resumable: false });
    expect(second.worker.started).toEqual([]);
  });

  it("performs no write while loading, reading status, checkpoints and listing", async () => {
    const { second, productId } = await tampered();
    const writes = recordWrites(second);
    const countBefore = second.authority.writeCount;

    await second.service.status(productId);
    await second.service.checkpoints(productId);
    const listed = await second.service.list("proj");
    await second.service.list();
    await drain();

    expect(listed.products.map((p) => [p.productId, p.phase])).toEqual([[productId, "paused"]]);
    expect(writes).toEqual([]);
    expect(second.authority.writeCount).toBe(countBefore);
  });
});
