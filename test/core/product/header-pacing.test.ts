/**
 * A running product's header (product.list's index) is written at most once per `headerProgressMs` for progress
 * alone, and the last change held back is written when the period ends (header-pacing.ts, issue 32: a header write
 * per wave was a quarter of a fleet's statements). Phase changes are written at once, a shutdown writes a held-back
 * change before it gives the lease back, and a new product and a first lease take read nothing before they write.
 */
import { describe, expect, it } from "vitest";
import { FakeClock, Gate, createHarness, draftPlan, drain, waitUntil, type Harness } from "../../support/fakes.js";

const PLAN = draftPlan([{ id: "a" }, { id: "b" }]);

/** A harness whose test sees every header and lease write, in order, and every record read by kind. */
function watched(options: { headerProgressMs?: number } = {}, clock?: FakeClock) {
  const h = createHarness({
    plan: PLAN,
    options: { headerProgressMs: 1_000, ...options },
    ...(clock ? { clock } : {}),
  });
  const headers: { phase: string; progress: { completed: number } }[] = [];
  const writes: string[] = [];
  const reads: string[] = [];
  const put = h.authority.put.bind(h.authority);
  h.authority.put = (projectId, kind, id, value, expectedRevision) => {
    if (kind === "product") headers.push(value as (typeof headers)[number]);
    writes.push(kind);
    return put(projectId, kind, id, value, expectedRevision);
  };
  const del = h.authority.delete.bind(h.authority);
  h.authority.delete = (projectId, kind, ...rest) => {
    writes.push(`delete ${kind}`);
    return del(projectId, kind, ...rest);
  };
  const get = h.authority.get.bind(h.authority);
  h.authority.get = (projectId, kind, id) => {
    reads.push(kind);
    return get(projectId, kind, id);
  };
  const last = () => headers[headers.length - 1];
  return { h, headers, writes, reads, last };
}

/** Starts the product; `a` completes at once, `b` waits for the returned gate. Resolves once `a` completed. */
async function aDone(h: Harness): Promise<{ productId: string; gate: Gate }> {
  const gate = new Gate();
  h.worker.script("b", { kind: "complete", gate });
  const productId = await h.started();
  let completed = 0;
  while (completed < 1) {
    await drain();
    completed = ((await h.service.status(productId)) as { progress: { completed: number } }).progress.completed;
  }
  await drain();
  return { productId, gate };
}

describe("the header of a running product", () => {
  it("holds progress back for the period, writes it when the period ends, and the outcome at once", async () => {
    const { h, headers, last } = watched();
    const { productId, gate } = await aDone(h);

    // The wave that settled `a` came within the period of the header written at confirmation: held back.
    expect(last()).toMatchObject({ phase: "executing", progress: { completed: 0 } });
    const held = headers.length;
    // This server answers from memory meanwhile.
    const listed = await h.service.list();
    expect(listed.products.find((p) => p.productId === productId)?.progress.completed).toBe(1);

    h.clock.advance(999);
    await drain();
    expect(headers.length).toBe(held);
    h.clock.advance(1);
    await waitUntil(() => last()?.progress.completed === 1, "the trailing header write");
    expect(last()?.phase).toBe("executing");

    gate.release();
    await h.finished(productId);
    expect(last()).toMatchObject({ phase: "completed", progress: { completed: 2 } });
    expect(await h.authority.get("proj", "product", productId)).toMatchObject({ value: last() });
    await drain();
    expect(h.clock.pendingTimers).toBe(0);
  });

  it("is never held back longer than the period when the wall clock steps back", async () => {
    // The clock port reads the wall clock (Date.now): an NTP step or a resumed VM moves it back; timers still run.
    class SteppingClock extends FakeClock {
      offsetMs = 0;
      override now(): number {
        return super.now() + this.offsetMs;
      }
    }
    const clock = new SteppingClock();
    const { h, last } = watched({}, clock);
    const gateA = new Gate();
    h.worker.script("a", { kind: "complete", gate: gateA });
    h.worker.script("b", { kind: "complete", gate: new Gate() });
    const productId = await h.started();
    await drain();
    expect(last()).toMatchObject({ phase: "executing", progress: { completed: 0 } });
    h.clock.advance(1_000); // the period of the first wave's header ends: no trailing write is armed any more
    await drain();
    clock.offsetMs = -3_600_000;
    gateA.release();
    await waitUntil(() => h.service.peek(productId)?.progress().completed === 1, "a completed");
    await drain();
    h.clock.advance(1_000);
    await waitUntil(() => last()?.progress.completed === 1, "the header at most one period behind");
  });

  it("is not written after a pause in memory gave the lease back: the header says executing, as the events do", async () => {
    const { h, last } = watched();
    const { productId, gate } = await aDone(h);
    expect(last()?.progress.completed).toBe(0);
    // `b`'s result cannot be written: the product pauses in memory (guarantee 2) and gives its lease back.
    h.authority.failNext("appendEvents");
    gate.release();
    await waitUntil(() => h.service.peek(productId)?.phase === "paused", "the pause in memory");
    await drain();
    expect(await h.authority.get("proj", "lease", productId)).toBeNull();
    h.clock.advance(1_000);
    await drain();
    // A `paused` header would hide the product from the recovery of another server (fleet.ts reads the header's
    // phase), though its events say executing and nobody drives it.
    expect(last()?.phase).toBe("executing");
    const other = createHarness({ authority: h.authority, plan: PLAN });
    expect((await other.service.status(productId)).phase).toBe("executing");
    expect(h.service.peek(productId)?.isIdle).toBe(true);
  });

  it("writes every wave's header with headerProgressMs 0", async () => {
    const { h, last } = watched({ headerProgressMs: 0 });
    const { productId, gate } = await aDone(h);
    expect(last()).toMatchObject({ phase: "executing", progress: { completed: 1 } });
    gate.release();
    await h.finished(productId);
  });

  it("writes a held-back change at once with a pause", async () => {
    const { h, last } = watched();
    const { productId } = await aDone(h);
    expect(last()?.progress.completed).toBe(0);
    await h.service.pause(productId);
    expect(last()).toMatchObject({ phase: "paused", progress: { completed: 1 } });
  });

  it("writes a held-back change before a shutdown gives the lease back", async () => {
    const { h, writes, last } = watched();
    await aDone(h);
    expect(last()?.progress.completed).toBe(0);
    writes.length = 0;
    await h.service.shutdown();
    expect(last()).toMatchObject({ progress: { completed: 1 } });
    expect(writes.indexOf("product")).toBeGreaterThanOrEqual(0);
    expect(writes.indexOf("product")).toBeLessThan(writes.indexOf("delete lease"));
    await drain();
    expect(h.clock.pendingTimers).toBe(0);
  });
});

describe("a new product and its first lease", () => {
  it("are written without reading their header or lease first", async () => {
    const { h, reads, writes } = watched();
    h.worker.script("b", { kind: "complete" });
    const productId = await h.started();
    await h.finished(productId);
    expect(reads.filter((kind) => kind === "product" || kind === "lease")).toEqual([]);
    expect(writes).toContain("lease");
  });
});
