/**
 * Guarantee 14, memory (issue 10 finding 6): ProductService keeps the products it drives or read recently, not every
 * product it ever loaded. Over the in-process harness (test/support/fakes.ts): a second service on the same authority
 * (a restarted process) with room for 2 idle products reads 6 completed ones. The stdio proof with RSS is
 * test/e2e/memory-bound.test.ts.
 */
import { describe, expect, it } from "vitest";
import { ProductService } from "../../../src/core/product/service.js";
import { Gate, createHarness, draftPlan, waitUntil } from "../../support/fakes.js";

async function completedProducts(n: number) {
  const h = createHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]) });
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1) {
    const productId = await h.started();
    await h.finished(productId);
    ids.push(productId);
  }
  return { h, ids };
}

describe("idle products leave memory (guarantee 14)", () => {
  it("keeps at most the bound of idle products, least recently used dropped, and a dropped one reads the same", async () => {
    const { h, ids } = await completedProducts(6);
    const service = new ProductService(h.ctx, 2);
    const first = await service.status(ids[0]!);
    for (const id of ids.slice(1)) await service.status(id);

    expect({ loaded: service.loaded().map((o) => o.productId), evicted: service.evicted }).toEqual({
      loaded: ids.slice(-2),
      evicted: 4,
    });
    expect(await service.status(ids[0]!)).toEqual(first);
  });

  it("never drops a product a retainer follows (a session or goal run)", async () => {
    const { h, ids } = await completedProducts(4);
    const service = new ProductService(h.ctx, 1);
    service.addRetainer((productId) => productId === ids[0]);
    const held = await service.get(ids[0]!);
    for (const id of ids.slice(1)) await service.status(id);

    expect(service.peek(ids[0]!)).toBe(held);
  });

  it("never drops a product it drives, nor one with an operation in flight", async () => {
    const { h, ids } = await completedProducts(4);
    const service = new ProductService(h.ctx, 1);
    // A product driven by this service: its task holds until the gate opens.
    const gate = new Gate();
    h.worker.script("a", { kind: "complete", gate });
    const { productId: driven } = await service.plan({ goal: "Driven", cwd: "/work/proj", projectId: "proj" });
    await h.notifier.next("product.planReady", (p) => p.productId === driven);
    await service.confirm(driven, {});
    await waitUntil(() => service.peek(driven)?.isDriving === true, "the product to be driven");
    const instance = service.peek(driven);
    // An operation in flight on another product while the others are read.
    const slowStatus = service.status(ids[0]!);
    for (const id of ids.slice(1)) await service.status(id);
    await slowStatus;

    expect({ same: service.peek(driven) === instance, driving: instance?.isDriving }).toEqual({
      same: true,
      driving: true,
    });
    gate.release();
    await h.finished(driven);
  });
});
