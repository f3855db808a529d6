/**
 * Guarantee 4 for a missing record: an event row that vanished from the stream (a sequence gap) counts as lost, like
 * an event that does not parse, and a product that lost an event is never run again (found by an adversarial test:
 * a deleted row made completed tasks run again silently).
 */
import { describe, expect, it } from "vitest";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { ProductStore } from "../../../src/core/product/store.js";
import { productStream, type ProductEvent } from "../../../src/core/product/records.js";
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

  it("left by a compaction that kept a checkpoint's events is not a loss for a reader that loaded before it", async () => {
    // Found by the replay-equals-live property test (evolve.test.ts): a reader at seq 6 read the kept events 7-10
    // (checkpoint at 10, no snapshot before it), then met the pruned 11-19 and counted them as lost.
    const at = (i: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, i)).toISOString();
    const say = (i: number): ProductEvent => ({ v: 1, at: at(i), type: "dialogue", role: "user", text: `line ${i}` });
    const authority = new MemoryAuthority();
    const writer = new ProductStore(authority, 20);
    const created: ProductEvent = {
      v: 1,
      at: at(1),
      type: "created",
      productId: "prd_g",
      projectId: "proj",
      name: "g",
      goal: "g",
      cwd: "/w",
    };
    const live = await writer.create("proj", "prd_g", [created]);
    await writer.append(live, [2, 3, 4, 5, 6].map(say));
    const reader = (await new ProductStore(authority, 20).load("prd_g")).model;
    await writer.append(live, [7, 8, 9].map(say));
    await writer.append(live, [
      { v: 1, at: at(10), type: "checkpoint", checkpointId: "ckp_1", completed: 0, total: 0 },
    ]);
    await writer.append(live, [11, 12, 13, 14, 15, 16, 17, 18, 19, 20].map(say));
    await writer.writeSnapshot(live);
    expect((await authority.readEvents("proj", productStream("prd_g"), 0)).map((e) => e.seq)).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20,
    ]);

    const caught = await new ProductStore(authority, 20).catchUp(reader);
    expect(caught.dropped).toBe(0);
    expect(reader.state).toEqual(live.state);
  });
});
