/**
 * A server shutting down starts no run it will not stop. `Server.shutdown` used to stop the products before the
 * background work (a fleet recovery pass, a control request) had settled, and such work could still resume a product
 * afterwards: a run with no server behind it, holding its lease, while the authority closed under it. Now
 * `ProductService.shutdown` refuses every later request that would drive or change a product (`busy`); the first two
 * tests fail on the code before. The server calls it again once its background work has settled, which stops any run
 * that work started meanwhile.
 */
import { describe, expect, it } from "vitest";
import { isDomainError } from "../../../src/core/errors.js";
import { ProductService } from "../../../src/core/product/service.js";
import { Gate, createHarness, draftPlan, rejectionOf, waitUntil } from "../../support/fakes.js";

/** A product left `executing` with its task interrupted by a shutdown, and a fresh service on the same store. */
async function interruptedProduct() {
  const h = createHarness({ plan: draftPlan([{ id: "a" }]) });
  const hold = new Gate();
  h.worker.script("a", { kind: "complete", gate: hold });
  const productId = await h.started();
  await waitUntil(() => h.worker.hasStarted("a"), "task a to start");
  await h.service.shutdown();
  hold.release();
  return { h, productId, next: new ProductService(h.ctx) };
}

describe("a shutting-down product service starts no run", () => {
  it("refuses a resume whose product was still loading when shutdown began", async () => {
    const { h, productId, next } = await interruptedProduct();
    const gate = new Gate();
    const load = h.ctx.store.load.bind(h.ctx.store);
    h.ctx.store.load = async (id) => {
      await gate.promise;
      return load(id);
    };
    const resuming = next.resume(productId);
    await next.shutdown();
    gate.release();
    const err = await rejectionOf(resuming);
    expect(isDomainError(err, "busy") && err.message).toMatch(/shutting down, so product prd_\w+ was not changed/);
    expect(next.peek(productId)?.isDriving ?? false).toBe(false);
    expect((await h.ctx.store.readLease("proj", productId)).lease).toBeNull();
  });

  it("refuses plan and confirm once shutdown began, with a plain sentence", async () => {
    const { productId, next } = await interruptedProduct();
    await next.shutdown();
    const plan = await rejectionOf(next.plan({ goal: "Late", cwd: "/work/proj", projectId: "proj" }));
    expect(isDomainError(plan, "busy") && plan.message).toMatch(/shutting down, so product prd_\w+ was not created/);
    expect(isDomainError(await rejectionOf(next.resume(productId)), "busy")).toBe(true);
  });

  it("a resume already past the check when shutdown begins leaves no run and no lease", async () => {
    const { h, productId, next } = await interruptedProduct();
    const instance = await next.get(productId);
    // The resume is past the service's check when shutdown begins: its lease write waits at the gate.
    const gate = new Gate();
    const putLease = h.ctx.store.putLease.bind(h.ctx.store);
    let held = 0;
    h.ctx.store.putLease = async (...args: Parameters<typeof putLease>) => {
      held += 1;
      await gate.promise;
      return putLease(...args);
    };
    const resuming = next.resume(productId);
    await waitUntil(() => held > 0, "the resume to write the lease");
    const first = next.shutdown();
    gate.release();
    await first;
    await resuming.catch(() => undefined);
    await next.shutdown();
    expect(instance.isDriving).toBe(false);
    expect(instance.isIdle).toBe(true);
    expect((await h.ctx.store.readLease("proj", productId)).lease).toBeNull();
  });
});
