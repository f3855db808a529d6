/**
 * A takeover keeps the time budget whole (issue 32; a new user's trial: a task had run 6 s when its server was killed,
 * and after the takeover the product's elapsed time said 196 ms). The resume that takes the lease over from a dead
 * owner counts the time that owner ran after its last event, up to the renewal it would have made next.
 */
import { expect, it } from "vitest";
import { productStream } from "../../../src/core/product/records.js";
import type { OwnerLiveness } from "../../../src/core/liveness-port.js";
import { Gate, createHarness, drain, draftPlan, waitUntil } from "../../support/fakes.js";

const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]);
const deadA: OwnerLiveness = { check: (ownerId) => (ownerId === "server-a" ? "dead" : "alive") };

async function elapsedEvents(h: ReturnType<typeof createHarness>, productId: string): Promise<number[]> {
  const events = await h.authority.readEvents("proj", productStream(productId), 0);
  return events
    .map((e) => e.event as { type: string; elapsedMs?: number })
    .filter((e) => e.type === "elapsed")
    .map((e) => e.elapsedMs ?? -1);
}

it("counts the time a killed owner ran after its last event when another server takes the product over", async () => {
  const a = createHarness({ plan: PLAN, options: { ownerId: "server-a" } });
  a.worker.script("b", { kind: "complete", gate: new Gate() });
  const productId = await a.started();
  await waitUntil(() => a.worker.hasStarted("b"), "b to start");
  await drain();
  const recorded = (await a.service.status(productId)).budget as { elapsedMs: number };
  // b runs 6 s on server-a (less than a renewal period: no event, no renewal), then server-a is killed.
  a.clock.advance(6_000);
  const b = createHarness({
    plan: PLAN,
    authority: a.authority,
    clock: a.clock,
    ids: a.ids,
    options: { ownerId: "server-b" },
    liveness: deadA,
  });
  const before = await elapsedEvents(b, productId);
  await b.service.resume(productId);
  const after = (await elapsedEvents(b, productId)).slice(before.length);
  expect(after[0]).toBeGreaterThanOrEqual(recorded.elapsedMs + 6_000);
  // Not past the renewal server-a would have made next (10 s after its last one, when b started).
  expect(after[0]).toBeLessThanOrEqual(recorded.elapsedMs + 10_000);
});

it("counts nothing when a paused product is resumed: its time was not running and no lease was taken over", async () => {
  const a = createHarness({ plan: PLAN, options: { ownerId: "server-a" } });
  a.worker.script("b", { kind: "complete", gate: new Gate() });
  const productId = await a.started();
  await waitUntil(() => a.worker.hasStarted("b"), "b to start");
  await a.service.pause(productId);
  const paused = await elapsedEvents(a, productId);
  a.clock.advance(60_000);
  await a.service.resume(productId);
  expect((await elapsedEvents(a, productId)).slice(paused.length).every((ms) => ms < 60_000)).toBe(true);
});
