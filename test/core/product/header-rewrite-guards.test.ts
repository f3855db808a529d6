/**
 * Regression (found by an adversarial test of b119c3c): a lease holder whose header write is refused writes the header
 * again once its lease renews. The renewal alone does not prove the refusing header was an earlier owner's late write:
 * a lease that expired but nobody took renews fine, and meanwhile another server may legitimately have
 * 1. cancelled the product (its events and its header say `cancelled`): the holder's held-back header put `executing`
 *    back over it, for good (product.list showed a cancelled product as executing);
 * 2. deleted the product (the header is deleted first): the holder's header write between the delete's steps created
 *    the header again, and the deleted product stayed in product.list as executing (guarantee 14).
 * Both now fence the holder as before b119c3c: the header is written again only when it exists and the stream holds
 * no event past the holder's. A transient failure of the renewal still pauses the product (guarantee 2).
 */
import { expect, it } from "vitest";
import type { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { FakeClock, Gate, createHarness, drain, draftPlan, waitUntil } from "../../support/fakes.js";

const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]);
const TTL = 30_000;

/**
 * Server A drives the product: `a` completed (its header change held back by the pacing), `b` runs until `gate`.
 * `authority` wraps A's for server B, whose clock is a lease lifetime ahead: A's lease has expired for B.
 */
async function ownerWithHeldHeader(wrap: (authority: MemoryAuthority) => MemoryAuthority = (x) => x) {
  const a = createHarness({ plan: PLAN, options: { ownerId: "server-a" } });
  const gate = new Gate();
  a.worker.script("b", { kind: "complete", gate });
  const productId = await a.started();
  await waitUntil(() => a.worker.hasStarted("b"), "b to start");
  await drain();
  const b = createHarness({
    plan: PLAN,
    authority: wrap(a.authority),
    clock: new FakeClock(a.clock.now() + TTL + 1),
    ids: a.ids,
    options: { ownerId: "server-b" },
  });
  return { a, b, productId, gate };
}

async function storedHeader(h: { authority: MemoryAuthority }, productId: string) {
  return (await h.authority.get("proj", "product", productId))?.value as { phase: string; name: string } | undefined;
}

it("a cancel by another server while the owner's lease had expired untaken is not overwritten by the owner's header", async () => {
  const { a, b, productId, gate } = await ownerWithHeldHeader();
  await b.service.cancel(productId);
  a.clock.advance(1_000); // A's held-back header is written now
  await drain();
  gate.release();
  await drain();
  expect((await storedHeader(a, productId))?.phase).toBe("cancelled");
  expect(a.notifier.of("product.ownershipLost")).toHaveLength(1);
});

it("a delete by another server leaves no header when the owner's header write lands between its steps", async () => {
  const paused = new Gate();
  let reached = false;
  // B's delete stops after deleting the header, before the stream (store.ts `delete`), until `paused` opens.
  const wrap = (authority: MemoryAuthority) =>
    new Proxy(authority, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== "function") return value;
        const fn = value as (...args: unknown[]) => Promise<unknown>;
        if (prop !== "deleteStream") return fn.bind(target);
        return async (...args: unknown[]) => {
          reached = true;
          await paused.promise;
          return fn.apply(target, args);
        };
      },
    });
  const { a, b, productId, gate } = await ownerWithHeldHeader(wrap);
  const deleting = b.service.delete(productId);
  await waitUntil(() => reached, "the delete to reach the stream");
  a.clock.advance(1_000); // A's held-back header is written now
  await drain();
  paused.release();
  expect(await deleting).toEqual({ deleted: true });
  gate.release();
  await drain();
  expect(await storedHeader(a, productId)).toBeUndefined();
  expect((await b.service.list("proj")).products).toEqual([]);
});

it("a transient failure of the owner's renewal after a refused header write pauses the product, resumable", async () => {
  const { a, productId, gate } = await ownerWithHeldHeader();
  // An earlier owner's late header write.
  const header = await a.authority.get("proj", "product", productId);
  if (!header) throw new Error("no header");
  await a.authority.put("proj", "product", productId, { ...(header.value as object), name: "late" }, header.revision);
  let failures = 1;
  a.authority.setFailure((call) => call.op === "get" && call.kind === "lease" && failures-- > 0);
  a.clock.advance(1_000);
  await drain();
  expect({
    persistenceErrors: a.notifier.of("product.persistenceError").length,
    ownershipLost: a.notifier.of("product.ownershipLost").length,
    phase: (await a.service.status(productId)).phase,
  }).toEqual({ persistenceErrors: 1, ownershipLost: 0, phase: "paused" });
  gate.release();
  await a.service.resume(productId);
  await a.finished(productId);
  expect((await storedHeader(a, productId))?.phase).toBe("completed");
});
