/**
 * One owner at a time (DESIGN.md guarantee 6, issue 4 item 3): the product lease taken on confirm/resume, renewed by
 * heartbeat, released when execution stops; a second "process" (another ProductService with another owner id over the
 * same MemoryAuthority) is refused with the owner while the lease is live, may take over once it expired, and the old
 * owner then stops for good. Clocks are FakeClocks: a process whose clock runs ahead sees the other's lease expired.
 */
import { describe, expect, it } from "vitest";
import {
  FakeClock,
  createHarness,
  draftPlan,
  drain,
  rejectionOf,
  waitUntil,
  type Harness,
} from "../../support/fakes.js";
import { isDomainError } from "../../../src/core/errors.js";
import { productStream } from "../../../src/core/product/records.js";
import type { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import type { OwnerLiveness, OwnerLivenessVerdict } from "../../../src/core/ports.js";

const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]);
const LEASE = { leaseTtlMs: 3_000, leaseRenewMs: 1_000 };
const T0 = Date.parse("2030-01-01T00:00:00.000Z");

/** A "process" with its own owner id; `clock` defaults to a fresh FakeClock at T0 + `aheadMs`. */
function processOf(
  owner: string,
  shared?: Harness,
  opts: { aheadMs?: number; clock?: FakeClock; liveness?: OwnerLiveness } = {},
): Harness {
  return createHarness({
    plan: PLAN,
    ...(shared ? { authority: shared.authority, ids: shared.ids } : {}),
    clock: opts.clock ?? new FakeClock(T0 + (opts.aheadMs ?? 0)),
    options: { ownerId: owner, ...LEASE },
    ...(opts.liveness ? { liveness: opts.liveness } : {}),
  });
}

/** A liveness port that knows the verdict for each owner id (what the process adapter proves on one host). */
function livenessOf(verdicts: Record<string, OwnerLivenessVerdict>): OwnerLiveness {
  return { check: (ownerId) => verdicts[ownerId] ?? "unknown" };
}

async function leaseOf(authority: MemoryAuthority, productId: string) {
  return authority.get("proj", "lease", productId);
}

/** Process A confirms and its first task `a` hangs (it never settles on its own). */
async function drivenByA() {
  const a = processOf("A");
  a.worker.script("a", { kind: "hang" }, { kind: "complete" });
  const productId = await a.started();
  await waitUntil(() => a.worker.hasStarted("a"), "a to start");
  await drain();
  return { a, productId };
}

describe("the lease record", () => {
  it("is taken on confirm before the first task starts: {v: 1, owner, expiresAt = now + TTL}", async () => {
    const a = processOf("A");
    let leaseAtStart: unknown;
    a.worker.onStart = async (request) => {
      leaseAtStart = (await leaseOf(a.authority, request.productId))?.value;
    };
    await a.started();
    await waitUntil(() => a.worker.hasStarted("a"), "a to start");

    expect(leaseAtStart).toEqual({ v: 1, owner: "A", expiresAt: new Date(T0 + 3_000).toISOString(), ttlMs: 3_000 });
  });

  it("is renewed by heartbeat (CAS on its revision) while the product executes", async () => {
    const { a, productId } = await drivenByA();
    const before = await leaseOf(a.authority, productId);
    a.clock.advance(1_000);
    await waitUntil(() => a.authority.writeCount > 0 && a.clock.pendingTimers > 0, "renewal");
    await drain();
    const after = await leaseOf(a.authority, productId);

    expect(after?.revision).toBe((before?.revision ?? 0) + 1);
    expect(after?.value).toEqual({ v: 1, owner: "A", expiresAt: new Date(T0 + 4_000).toISOString(), ttlMs: 3_000 });
  });

  it("is released when the product completes, leaving no timer armed", async () => {
    const a = processOf("A");
    const productId = await a.started();
    await a.finished(productId);

    expect(await leaseOf(a.authority, productId)).toBeNull();
    expect(a.clock.pendingTimers).toBe(0);
  });

  it("is released on pause and taken again on resume", async () => {
    const { a, productId } = await drivenByA();
    await a.service.pause(productId);
    expect(await leaseOf(a.authority, productId)).toBeNull();

    await a.service.resume(productId);
    expect((await leaseOf(a.authority, productId))?.value).toMatchObject({ owner: "A" });
    await a.finished(productId);
    expect(await leaseOf(a.authority, productId)).toBeNull();
  });

  it("is released on shutdown, so another process may resume at once", async () => {
    const { a, productId } = await drivenByA();
    await a.service.shutdown();
    expect(await leaseOf(a.authority, productId)).toBeNull();

    const b = processOf("B", a);
    await b.service.resume(productId);
    const done = await b.finished(productId);
    expect(done.phase).toBe("completed");
    expect(b.worker.started).toEqual(["a", "b"]);
  });
});

describe("a second process while the lease is live", () => {
  it("is refused product.resume with conflict naming the owner, and writes nothing", async () => {
    const { a, productId } = await drivenByA();
    const b = processOf("B", a);
    const writes = a.authority.writeCount;

    const err = await rejectionOf(b.service.resume(productId));
    expect(isDomainError(err, "conflict") && err.details).toEqual({
      owner: "A",
      expiresAt: new Date(T0 + 3_000).toISOString(),
      live: true,
    });
    expect(isDomainError(err) && err.message).toContain("(owner A)");
    expect(a.authority.writeCount).toBe(writes);
    expect(b.worker.executions).toEqual([]);
  });

  it.each([
    ["pause", (h: Harness, id: string) => h.service.pause(id)],
    ["cancel", (h: Harness, id: string) => h.service.cancel(id)],
    ["checkpoint", (h: Harness, id: string) => h.service.checkpoint(id)],
    ["rollback", (h: Harness, id: string) => h.service.rollback(id)],
    [
      "mutate",
      (h: Harness, id: string) => h.service.mutate(id, [{ op: "updateTask", taskId: "b", patch: { title: "B" } }]),
    ],
    ["delete", (h: Harness, id: string) => h.service.delete(id)],
  ])("is refused %s with conflict naming the owner, and writes nothing", async (_op, call) => {
    const { a, productId } = await drivenByA();
    await a.service.checkpoint(productId);
    const b = processOf("B", a);
    const writes = a.authority.writeCount;

    const err = await rejectionOf(call(b, productId));
    expect(isDomainError(err, "conflict") && err.details).toEqual({
      owner: "A",
      expiresAt: new Date(T0 + 3_000).toISOString(),
      live: true,
    });
    expect(a.authority.writeCount).toBe(writes);
    expect((await a.service.status(productId)).phase).toBe("executing");
  });

  it("sees in product.status who executes the product, until when and when it renewed, with no recovery", async () => {
    const { a, productId } = await drivenByA();
    const b = processOf("B", a);
    const status = await b.service.status(productId);

    // Issue 28: a product driven by a live, renewing server has nothing to recover.
    expect(status.recovery).toBeUndefined();
    expect(status.owner).toEqual({
      ownerId: "A",
      expiresAt: new Date(T0 + 3_000).toISOString(),
      live: true,
      renewedAt: new Date(T0).toISOString(),
    });
  });
});

describe("after the lease expired", () => {
  it("another process takes over; the old owner's next renewal finds it taken and it stops for good", async () => {
    const { a, productId } = await drivenByA();
    const b = processOf("B", a, { aheadMs: 10_000 });
    b.worker.script("b", { kind: "hang" });

    await b.service.resume(productId);
    await waitUntil(() => b.worker.hasStarted("b"), "b to start in B");
    expect((await leaseOf(a.authority, productId))?.value).toMatchObject({ owner: "B" });
    const stream = await a.authority.readEvents("proj", productStream(productId), 0);

    a.clock.advance(1_000);
    await waitUntil(() => a.worker.runsOf("a")[0]?.result !== undefined, "A's worker to stop");
    await drain();

    expect(a.worker.runsOf("a")[0]?.request.signal.aborted).toBe(true);
    expect(await a.notifier.next("product.ownershipLost")).toEqual({
      productId,
      ownerId: "A",
      error: expect.stringContaining("(owner B) took product"),
    });
    expect(await a.authority.readEvents("proj", productStream(productId), 0)).toEqual(stream);
    expect((await leaseOf(a.authority, productId))?.value).toMatchObject({ owner: "B" });
    // Fenced: every write of A's instance is refused without reaching the authority.
    const writes = a.authority.writeCount;
    const err = await rejectionOf(a.service.checkpoint(productId));
    expect(isDomainError(err, "conflict") && err.details).toMatchObject({ owner: "B", live: true });
    expect(a.authority.writeCount).toBe(writes);
  });

  it("of two processes racing to resume, exactly one drives; the other gets conflict with the winner", async () => {
    const { a, productId } = await drivenByA();
    const b = processOf("B", a, { aheadMs: 10_000 });
    const c = processOf("C", a, { aheadMs: 10_000 });

    const results = await Promise.allSettled([b.service.resume(productId), c.service.resume(productId)]);
    const won = results.findIndex((r) => r.status === "fulfilled");
    const winner = won === 0 ? b : c;
    const loser = won === 0 ? c : b;
    const lost = results[1 - won];

    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(lost?.status === "rejected" && isDomainError(lost.reason, "conflict") && lost.reason.details).toEqual({
      owner: won === 0 ? "B" : "C",
      expiresAt: new Date(T0 + 13_000).toISOString(),
      live: true,
    });
    const done = await winner.finished(productId);
    expect(done.phase).toBe("completed");
    expect(winner.worker.started).toEqual(["a", "b"]);
    expect(loser.worker.executions).toEqual([]);
  });

  it("a lease record that does not parse proves no live owner and may be taken over", async () => {
    const { a, productId } = await drivenByA();
    await a.service.shutdown();
    await a.authority.put(
      "proj",
      "lease",
      productId,
      { v: 2, owner: "Z", expiresAt: "2999-01-01T00:00:00.000Z" },
      null,
    );
    const b = processOf("B", a);

    await b.service.resume(productId);
    expect((await b.finished(productId)).phase).toBe("completed");
  });

  it("a fenced process serves the next write request from a fresh load once the other owner let go", async () => {
    const { a, productId } = await drivenByA();
    const b = processOf("B", a, { aheadMs: 10_000 });
    b.worker.script("a", { kind: "hang" });
    await b.service.resume(productId);
    await waitUntil(() => b.worker.hasStarted("a"), "a to start in B");
    a.clock.advance(1_000);
    await waitUntil(() => a.worker.runsOf("a")[0]?.result !== undefined, "A's worker to stop");
    await b.service.pause(productId);

    await a.service.resume(productId);
    const done = await a.finished(productId);
    expect(done.phase).toBe("completed");
    expect(a.worker.runsOf("a").map((e) => e.attempt)).toEqual([1, 3]);
  });
});

describe("dead owners do not block (guarantee 13, issue 10 finding 9)", () => {
  it("a lease whose owner process is provably gone is taken over at once, long before it expires", async () => {
    const { a, productId } = await drivenByA();
    const b = processOf("B", a, { liveness: livenessOf({ A: "dead" }) });

    await b.service.resume(productId);
    expect((await leaseOf(a.authority, productId))?.value).toMatchObject({ owner: "B" });
    expect((await b.finished(productId)).phase).toBe("completed");
    expect(b.clock.now()).toBe(T0);
  });

  it("shows the dead owner in product.status and product.list with live: false, and says resume continues at once", async () => {
    const { a, productId } = await drivenByA();
    const b = processOf("B", a, { liveness: livenessOf({ A: "dead" }) });
    const owner = {
      ownerId: "A",
      expiresAt: new Date(T0 + 3_000).toISOString(),
      live: false,
      renewedAt: new Date(T0).toISOString(),
    };

    const status = await b.service.status(productId);
    const list = await b.service.list("proj");

    expect(status.owner).toEqual(owner);
    expect(status.recovery).toMatchObject({ resumable: true, cause: expect.stringContaining("(owner A) is gone") });
    expect(list.products[0]).toMatchObject({ productId, owner });
  });

  it("an owner that may be alive (alive or unknown) is respected until its lease expires, with live: true", async () => {
    for (const verdict of ["alive", "unknown"] as const) {
      const { a, productId } = await drivenByA();
      const b = processOf("B", a, { liveness: livenessOf({ A: verdict }) });

      const err = await rejectionOf(b.service.resume(productId));

      expect(isDomainError(err, "conflict") && err.details).toEqual({
        owner: "A",
        expiresAt: new Date(T0 + 3_000).toISOString(),
        live: true,
      });
      expect((await b.service.list("proj")).products[0]?.owner).toMatchObject({ ownerId: "A", live: true });
    }
  });

  it("the driving process shows itself as the live owner in product.status", async () => {
    const { a, productId } = await drivenByA();

    expect((await a.service.status(productId)).owner).toEqual({
      ownerId: "A",
      expiresAt: new Date(T0 + 3_000).toISOString(),
      live: true,
      renewedAt: new Date(T0).toISOString(),
    });
  });
});

describe("a lease dated far in the future (guarantee 14, issue 10 finding 7)", () => {
  it("is believed for at most its lifetime after it was first seen, then taken over", async () => {
    const { a, productId } = await drivenByA();
    await a.service.shutdown();
    await a.authority.put(
      "proj",
      "lease",
      productId,
      { v: 1, owner: "Z", expiresAt: "2999-01-01T00:00:00.000Z" },
      null,
    );
    const b = processOf("B", a);

    const err = await rejectionOf(b.service.resume(productId));
    expect(isDomainError(err, "conflict") && err.details).toEqual({
      owner: "Z",
      expiresAt: new Date(T0 + 3_000).toISOString(),
      live: true,
    });
    b.clock.advance(3_001);
    await b.service.resume(productId);

    expect((await b.finished(productId)).phase).toBe("completed");
  });

  it("keeps being respected while its owner renews it (each renewal is a new revision)", async () => {
    const { a, productId } = await drivenByA();
    const b = processOf("B", a, { clock: a.clock });
    await rejectionOf(b.service.resume(productId));
    for (let i = 0; i < 5; i++) {
      a.clock.advance(1_000);
      await waitUntil(() => a.clock.pendingTimers > 0, "renewal");
      await drain();
    }

    expect(isDomainError(await rejectionOf(b.service.resume(productId)), "conflict")).toBe(true);
  });
});

describe("a failed renewal (guarantee 2)", () => {
  it("pauses the product, tells the client, stops the workers and starts nothing more", async () => {
    const { a, productId } = await drivenByA();
    a.authority.failNext("put");
    a.clock.advance(1_000);
    await a.notifier.next("product.persistenceError");
    await waitUntil(() => a.worker.runsOf("a")[0]?.result !== undefined, "the worker to stop");
    await drain();
    const status = await a.service.status(productId);

    expect(status.phase).toBe("paused");
    expect((status.recovery as { cause: string }).cause).toContain("Injected failure on put");
    expect(a.worker.started).toEqual(["a"]);
  });
});
