/**
 * `product.status` answer versions across servers (status.ts `inspectVersioned`, issue 16): a reader
 * server (A) polls `product.status` while another server (B) on the same SQLite file — and A itself — change the
 * product. After every step A's answer (first call, and the second one, which is the kept answer when versioned)
 * must equal what a freshly started server (C, loading the product from the file) answers. Core level: three
 * SqliteAuthority connections to one file.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { SqliteAuthority } from "../../../src/adapters/persistence/sqlite-authority.js";
import type { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { AuthorityConflict, AuthorityFailure } from "../../../src/core/ports.js";
import {
  FakeClock,
  Gate,
  createHarness,
  draftPlan,
  sequentialIds,
  waitUntil,
  type Harness,
} from "../../support/fakes.js";
import { ForwardingAuthority, sqliteConnections } from "../../support/sqlite-connections.js";

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/**
 * Forwards to a SQLite connection; `failWrites` makes appends and puts fail before they reach the file, and
 * `refuseWrites` refuses appends as a compare-and-swap conflict (another owner wrote first).
 */
class FlakyAuthority extends ForwardingAuthority {
  failWrites = false;
  refuseWrites = false;
  override put(projectId: string, kind: string, id: string, value: object, expected: number | null) {
    if (this.failWrites) return Promise.reject(new AuthorityFailure("disk full (test)"));
    return super.put(projectId, kind, id, value, expected);
  }
  override appendEvents(projectId: string, stream: string, events: object[], expectedSeq: number) {
    if (this.failWrites) return Promise.reject(new AuthorityFailure("disk full (test)"));
    if (this.refuseWrites) return Promise.reject(new AuthorityConflict("another owner wrote first (test)", {}));
    return super.appendEvents(projectId, stream, events, expectedSeq);
  }
}

const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]);

interface World {
  a: FlakyAuthority;
  reader: Harness;
  driver: Harness;
  /** What a server started now answers (fresh service and store on a third connection), or the error code. */
  fresh(productId: string): Promise<unknown>;
}

function world(opts: { idleProducts?: number; driverClock?: FakeClock } = {}): World {
  const [first, b, c] = sqliteConnections(3, cleanup, "status-cross-") as [
    SqliteAuthority,
    SqliteAuthority,
    SqliteAuthority,
  ];
  const a = new FlakyAuthority(first);
  const clock = new FakeClock();
  const ids = sequentialIds();
  const reader = createHarness({
    plan: PLAN,
    authority: a as unknown as MemoryAuthority,
    clock,
    ids,
    options: { ownerId: "A" },
  });
  if (opts.idleProducts !== undefined) {
    (reader.service as unknown as { idleProducts: number }).idleProducts = opts.idleProducts;
  }
  const driver = createHarness({
    plan: PLAN,
    authority: b as unknown as MemoryAuthority,
    clock: opts.driverClock ?? clock,
    ids,
    options: { ownerId: "B" },
  });
  cleanup.push(
    () => driver.service.shutdown(),
    () => reader.service.shutdown(),
  );
  return {
    a,
    reader,
    driver,
    async fresh(productId) {
      const h = createHarness({
        plan: PLAN,
        authority: c as unknown as MemoryAuthority,
        clock,
        ids,
        options: { ownerId: "C" },
      });
      try {
        return JSON.parse(JSON.stringify(await h.service.status(productId)));
      } catch (err) {
        return { error: (err as { code?: string }).code ?? String(err) };
      }
    },
  };
}

/** A's answer twice in a row (the second is the kept one when versioned), as plain JSON, or the error code. */
async function twice(h: Harness, productId: string): Promise<{ answers: unknown[]; versions: (string | undefined)[] }> {
  const answers: unknown[] = [];
  const versions: (string | undefined)[] = [];
  for (let i = 0; i < 2; i++) {
    try {
      const { status, version } = await h.service.statusVersioned(productId);
      answers.push(JSON.parse(JSON.stringify(status)));
      versions.push(version);
    } catch (err) {
      answers.push({ error: (err as { code?: string }).code ?? String(err) });
      versions.push(undefined);
    }
  }
  return { answers, versions };
}

/** B plans a product and runs it to completion; its id. */
async function completedByDriver(w: World): Promise<string> {
  const productId = await w.driver.planned();
  await w.driver.service.confirm(productId, {});
  await w.driver.finished(productId);
  return productId;
}

/** Versions seen per step, so a test can check that the kept path was taken where it should be. */
const seen = new Map<string, (string | undefined)[]>();

async function expectFresh(w: World, productId: string, step: string): Promise<void> {
  const expected = await w.fresh(productId);
  const { answers, versions } = await twice(w.reader, productId);
  seen.set(step, versions);
  expect({ step, answer: answers[0] }).toEqual({ step, answer: expected });
  expect({ step, answer: answers[1] }).toEqual({ step, answer: expected });
  // Equal versions must mean the kept answer; a defined version twice in a row is the kept path.
  if (versions[0] !== undefined) expect({ step, v: versions[1] }).toEqual({ step, v: versions[0] });
}

function versioned(step: string): boolean {
  const v = seen.get(step);
  return v !== undefined && v[0] !== undefined && v[0] === v[1];
}

describe("product.status versions stay fresh across servers", () => {
  it("a reader follows another server through message, mutate, confirm, pause, resume, cancel", async () => {
    const w = world();
    const productId = await w.driver.planned();
    await expectFresh(w, productId, "planned");

    w.driver.leader.messageAnswers.push({ response: "Noted." });
    await w.driver.service.message(productId, "Keep it short.");
    await expectFresh(w, productId, "message while awaiting confirmation");

    await w.driver.service.mutate(productId, [{ op: "updateTask", taskId: "b", patch: { description: "Do b well." } }]);
    await expectFresh(w, productId, "mutate while awaiting confirmation");

    w.driver.worker.script("a", { kind: "hang" });
    await w.driver.service.confirm(productId, {});
    await waitUntil(() => w.driver.worker.hasStarted("a"), "a to start in B");
    await expectFresh(w, productId, "executing in B");

    await w.driver.service.pause(productId);
    await expectFresh(w, productId, "paused by B");

    await w.driver.service.resume(productId);
    await waitUntil(() => w.driver.worker.hasStarted("a", 2), "a to start again in B");
    await expectFresh(w, productId, "resumed in B");

    await w.driver.service.cancel(productId);
    await expectFresh(w, productId, "cancelled by B");
    expect(versioned("planned") && versioned("mutate while awaiting confirmation") && versioned("cancelled by B")).toBe(
      true,
    );
    expect(versioned("executing in B") || versioned("paused by B")).toBe(false);
  });

  it("a reader follows completion, checkpoint, replay and rollback by another server", async () => {
    const w = world();
    const productId = await w.driver.planned();
    await expectFresh(w, productId, "planned");
    await w.driver.service.confirm(productId, {});
    await w.driver.finished(productId);
    await expectFresh(w, productId, "completed");

    await w.driver.service.checkpoint(productId);
    await expectFresh(w, productId, "manual checkpoint");

    await w.driver.service.replayTask(productId, "b");
    await w.driver.finished(productId, 2);
    await expectFresh(w, productId, "replayed b");

    const { checkpoints } = await w.driver.service.checkpoints(productId);
    const first = checkpoints[0];
    if (!first) throw new Error("no checkpoint");
    await w.driver.service.rollback(productId, first.checkpointId);
    await w.driver.finished(productId, 3);
    await expectFresh(w, productId, "rolled back and completed again");
    expect(versioned("completed") && versioned("replayed b") && versioned("rolled back and completed again")).toBe(
      true,
    );
  });

  it("a reader's own writes, and its failed writes, give fresh answers", async () => {
    const w = world();
    const productId = await w.driver.planned();
    await expectFresh(w, productId, "planned");
    w.reader.leader.messageAnswers.push({ response: "ok" });
    await w.reader.service.message(productId, "From A.");
    await expectFresh(w, productId, "A's own message");

    w.a.failWrites = true;
    await w.reader.service.message(productId, "From A, lost.").catch(() => undefined);
    await w.reader.service.cancel(productId).catch(() => undefined);
    w.a.failWrites = false;
    // The failed writes paused nothing visible in awaiting_confirmation; the answer stays what the file says.
    await expectFresh(w, productId, "after A's failed writes");

    await w.reader.service.cancel(productId);
    await expectFresh(w, productId, "cancelled by A");
  });

  it("concurrent status requests and writes in one process settle on the fresh answer", async () => {
    const w = world();
    const productId = await w.driver.planned();
    await expectFresh(w, productId, "planned");
    // Status calls interleaved with A's own writes and B's writes across awaits.
    w.reader.leader.messageAnswers.push({ response: "ok" }, { response: "ok" });
    const ops: unknown[] = [];
    for (let i = 0; i < 5; i++) {
      ops.push(w.reader.service.statusVersioned(productId));
      if (i === 1) ops.push(w.reader.service.message(productId, `A ${i}`).catch(() => undefined));
      if (i === 2) ops.push(w.driver.service.message(productId, `B ${i}`).catch(() => undefined));
      if (i === 3) ops.push(w.reader.service.cancel(productId).catch(() => undefined));
      ops.push(w.reader.service.statusVersioned(productId));
    }
    await Promise.all(ops);
    await expectFresh(w, productId, "after the interleaving");
  });

  it("eviction and reload, and another server's writes to an evicted product, give fresh answers", async () => {
    const w = world({ idleProducts: 1 });
    const p1 = await w.driver.planned();
    await w.driver.service.cancel(p1);
    const p2 = await w.driver.planned();
    await w.driver.service.cancel(p2);
    await expectFresh(w, p1, "p1 cancelled");
    await expectFresh(w, p2, "p2 cancelled (p1 evicted)");
    await expectFresh(w, p1, "p1 reloaded");
    // B writes p2 while A has dropped it... and while A keeps p1.
    await w.driver.service.replayTask(p1, "a").catch(() => undefined);
    await expectFresh(w, p1, "p1 after B's failed replay (cancelled products cannot replay)");
  });

  it("a reader that drives a replay itself, then stops, answers like a fresh server", async () => {
    const w = world();
    const productId = await completedByDriver(w);
    await expectFresh(w, productId, "completed in B");
    await w.reader.service.replayTask(productId, "a");
    await w.reader.finished(productId);
    await waitUntil(() => !w.reader.service.peek(productId)?.isDriving, "A to stop driving");
    await expectFresh(w, productId, "replayed and completed in A");
    expect(versioned("replayed and completed in A")).toBe(true);
  });

  it("an evicted product is reloaded fresh after another server changed it", async () => {
    const w = world({ idleProducts: 1 });
    const p1 = await completedByDriver(w);
    const p2 = await w.driver.planned();
    await w.driver.service.cancel(p2);
    await expectFresh(w, p1, "p1 completed");
    await expectFresh(w, p2, "p2 cancelled");
    expect(w.reader.service.peek(p1)).toBeUndefined();
    await w.driver.service.replayTask(p1, "b");
    await w.driver.finished(p1, 2);
    await expectFresh(w, p1, "p1 replayed in B, reloaded in A");
    await expectFresh(w, p2, "p2 again");
  });

  it("time alone changes a lease's liveness: the answer is not kept while a lease record exists", async () => {
    // B stops renewing (its clock is frozen): its lease runs out by A's clock.
    const w = world({ driverClock: new FakeClock() });
    const productId = await w.driver.planned();
    w.driver.worker.script("a", { kind: "hang" });
    await w.driver.service.confirm(productId, {});
    await waitUntil(() => w.driver.worker.hasStarted("a"), "a to start in B");
    const live = await w.reader.service.statusVersioned(productId);
    expect(live.status.owner).toMatchObject({ ownerId: "B", live: true });
    expect(live.version).toBeUndefined();
    w.reader.clock.advance(10 * 60_000);
    const expired = await w.reader.service.statusVersioned(productId);
    expect(expired.status.owner).toMatchObject({ ownerId: "B", live: false });
    await expectFresh(w, productId, "B's lease expired by A's clock");
  });

  it("a versioned answer does not depend on time", async () => {
    const w = world();
    const productId = await completedByDriver(w);
    await expectFresh(w, productId, "completed");
    w.reader.clock.advance(48 * 3_600_000);
    await expectFresh(w, productId, "two days later");
    expect(seen.get("two days later")).toEqual(seen.get("completed"));
  });

  it("a shared data_version (one input chunk) never hides a write made before the chunk or by this process", async () => {
    const w = world();
    let epoch = 1;
    w.a.inner.shareChangeMarks(() => epoch);
    const productId = await w.driver.planned();
    epoch += 1;
    await expectFresh(w, productId, "planned");
    // Another server writes; the next request arrives in a new chunk.
    await w.driver.service.mutate(productId, [{ op: "updateTask", taskId: "a", patch: { description: "By B." } }]);
    epoch += 1;
    await expectFresh(w, productId, "mutated by B, new chunk");
    // This process writes within the same chunk: its own write count moves the mark at once.
    const first = await w.reader.service.statusVersioned(productId);
    await w.reader.service.mutate(productId, [{ op: "updateTask", taskId: "a", patch: { description: "By A." } }]);
    const second = await w.reader.service.statusVersioned(productId);
    expect(second.version).not.toBe(first.version);
    expect(JSON.stringify(second.status)).toContain("By A.");
  });

  it("the leader's planning turn: asked, answered by the reader, planned", async () => {
    const asking = {
      kind: "ask" as const,
      message: "Which language?",
      questions: [{ question: "Which language?" }],
    };
    const w = world();
    w.driver.leader.planResult = asking;
    const { productId } = await w.driver.service.plan({ goal: "Build", cwd: "/work/proj", projectId: "proj" });
    await w.driver.notifier.next("product.leaderAsk", (p) => p.productId === productId);
    await expectFresh(w, productId, "asked by B's leader");
    const status = await w.reader.service.status(productId);
    const askId = (w.driver.notifier.of("product.leaderAsk", productId)[0] as { askId: string }).askId;
    expect(status.phase).toBe("planning");
    // A answers; A's leader plans.
    await w.reader.service.message(productId, "TypeScript.", askId);
    await expectFresh(w, productId, "planned by A's leader");
    expect(versioned("planned by A's leader")).toBe(true);
  });

  // Regression: a product deleted by another server was still reported by a server that had it in memory (its
  // catch-up read only events after its own position, so a deleted stream looked like "nothing new").
  it("answers not_found, like a fresh server, once another server deleted the product", async () => {
    const w = world();
    const productId = await w.driver.planned();
    await expectFresh(w, productId, "planned by B, read by A");
    await w.driver.service.delete(productId);
    expect(await w.fresh(productId)).toEqual({ error: "not_found" });
    await expectFresh(w, productId, "deleted by B");
    const listed = await w.reader.service.list();
    expect(listed.products.map((p) => p.productId)).not.toContain(productId);
  });

  // Regression: an instance fenced by a refused write (or paused by a failed one) kept adding wall-clock time to
  // `budget.elapsedMs`, because its run clock (`executingSinceMs`) was never stopped.
  it("stops the run's clock of an instance whose write was refused or failed", async () => {
    for (const refusal of ["refuseWrites", "failWrites"] as const) {
      const w = world();
      const productId = await w.reader.planned();
      const gate = new Gate();
      w.reader.worker.script("a", { kind: "complete", gate });
      await w.reader.service.confirm(productId, {});
      await waitUntil(() => w.reader.worker.hasStarted("a"), "a to start in A");
      w.a[refusal] = true;
      gate.release();
      const told = refusal === "refuseWrites" ? "product.ownershipLost" : "product.persistenceError";
      await waitUntil(() => w.reader.notifier.sent.some((n) => n.method === told), `${told} from A`);
      const first = (await w.reader.service.status(productId)).budget as { elapsedMs: number };
      w.reader.clock.advance(3_600_000);
      const later = (await w.reader.service.status(productId)).budget as { elapsedMs: number };
      expect({ refusal, elapsedMs: later.elapsedMs }).toEqual({ refusal, elapsedMs: first.elapsedMs });
      w.a[refusal] = false;
    }
  });
});
