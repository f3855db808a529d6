/**
 * One title everywhere (issue 28, case 6): a product without a name of its own is named by its leader's first plan,
 * once. `product.status`, `product.list` (the stored header) and every later plan carry that name; a name given to
 * `product.plan` is the title from the start and names the plans too. A record written before titles (a `created`
 * event without `provisionalName`) keeps the name it was written with.
 */
import { describe, expect, it } from "vitest";
import { evolve } from "../../../src/core/product/evolve.js";
import { ProductEvent } from "../../../src/core/product/records.js";
import { emptyState, modelOf } from "../../../src/core/product/state.js";
import { Gate, createHarness, draftPlan } from "../../support/fakes.js";

const GOAL = "- Write the README\n- Write the changelog";

describe("a product's title", () => {
  it("is the goal's first line while planning, then the first plan's name in status, list and every later plan", async () => {
    const h = createHarness({ plan: { ...draftPlan([{ id: "a" }, { id: "b" }]), name: "README and changelog" } });
    const gate = new Gate();
    h.leader.planGate = gate;
    const { productId } = await h.service.plan({ goal: GOAL, cwd: "/work/proj", projectId: "proj" });
    expect((await h.service.status(productId)).name).toBe("Write the README");
    gate.release();
    await h.notifier.next("product.planReady", (p) => p.productId === productId);
    expect(h.leader.planCalls[0]?.title).toBeUndefined();
    expect((await h.service.status(productId)).name).toBe("README and changelog");
    expect((await h.service.list()).products.map((p) => p.name)).toEqual(["README and changelog"]);

    // A revision the leader calls something else keeps the title; the leader is told it.
    h.leader.planResult = { ...draftPlan([{ id: "a" }, { id: "b" }, { id: "c" }]), name: "Something else" };
    await h.service.message(productId, "add a third task");
    expect(h.leader.planCalls[1]?.title).toBe("README and changelog");
    const status = await h.service.status(productId);
    expect(status.name).toBe("README and changelog");
    expect((status.plan as { name: string; version: number }).name).toBe("README and changelog");
    expect((status.plan as { version: number }).version).toBe(2);

    // A fresh reader (no memory of the product) reads the same title from the header and the journal.
    const reader = createHarness({ authority: h.authority });
    expect((await reader.service.list()).products.map((p) => p.name)).toEqual(["README and changelog"]);
    expect((await reader.service.status(productId)).name).toBe("README and changelog");
  });

  it("given to product.plan, is the title from the start and the name of every plan", async () => {
    const h = createHarness({ plan: { ...draftPlan([{ id: "a" }]), name: "The leader's name" } });
    const { productId } = await h.service.plan({ goal: GOAL, cwd: "/work/proj", projectId: "proj", name: "Mine" });
    const ready = await h.notifier.next("product.planReady", (p) => p.productId === productId);
    expect(h.leader.planCalls[0]?.title).toBe("Mine");
    expect((ready.plan as { name: string }).name).toBe("Mine");
    expect((await h.service.status(productId)).name).toBe("Mine");
  });

  it("a first plan without a name leaves the provisional one as the title", async () => {
    const h = createHarness({ plan: { ...draftPlan([{ id: "a" }]), name: "" } });
    const productId = await h.planned({ goal: GOAL });
    const status = await h.service.status(productId);
    expect(status.name).toBe("Write the README");
    expect((status.plan as { name: string }).name).toBe("Write the README");
  });

  it("of a record written before titles (no provisionalName) stays the name it was written with", () => {
    const at = "2026-12-01T00:00:00.000Z";
    const created = ProductEvent.parse({
      v: 1,
      at,
      type: "created",
      productId: "prd_old",
      projectId: "proj",
      name: "Write the README",
      goal: GOAL,
      cwd: "/work/proj",
    });
    const plan = { ...draftPlan([{ id: "a" }]), name: "README and changelog", productId: "prd_old", version: 1 };
    const proposed = ProductEvent.parse({ v: 1, at, type: "planProposed", plan });
    const model = modelOf(emptyState());
    evolve(model, created, 1);
    evolve(model, proposed, 2);
    expect(model.state.name).toBe("Write the README");
    expect(model.state.provisionalName).toBeUndefined();
  });
});
