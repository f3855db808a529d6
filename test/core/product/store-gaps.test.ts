/**
 * Guarantee 4 for a missing record: an event row that vanished from the stream (a sequence gap) counts as lost, like
 * an event that does not parse, and a product that lost an event is never run again (found by an adversarial test:
 * a deleted row made completed tasks run again silently).
 */
import { describe, expect, it } from "vitest";
import { ProductStore } from "../../../src/core/product/store.js";
import { productStream } from "../../../src/core/product/records.js";
import { createHarness, draftPlan, rejectionOf } from "../../support/fakes.js";

describe("a gap in a product's event stream", () => {
  it("is counted as dropped and lost on load, and resume is refused", async () => {
    const first = createHarness({ plan: draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]) });
    const productId = await first.started();
    await first.finished(productId);
    const stream = productStream(productId);
    const all = await first.authority.readEvents("proj", stream, 0);
    const removed = all[Math.floor(all.length / 2)]!.seq;
    // The authority as a damaged store would present it: one row is gone.
    const authority = Object.create(first.authority) as typeof first.authority;
    authority.readEvents = async (p, s, after) =>
      (await first.authority.readEvents(p, s, after)).filter((e) => e.seq !== removed);
    authority.get = async (p, k, id) => (k === "snapshot" ? null : first.authority.get(p, k, id));
    authority.list = async (p, k, prefix) => (k === "snapshot" ? [] : first.authority.list(p, k, prefix));

    const loaded = await new ProductStore(authority, 20).load(productId);
    expect(loaded.dropped).toBe(1);
    expect(loaded.lost).toBe(1);

    const second = createHarness({ plan: draftPlan([{ id: "a" }]), authority, clock: first.clock, ids: first.ids });
    const status = await second.service.status(productId);
    expect(status.dropped).toBe(1);
    expect(await rejectionOf(second.service.replayTask(productId, "a"))).toMatchObject({ code: "invalid_phase" });
    expect(second.worker.started).toEqual([]);
  });
});
