/**
 * A run that ends in a wave that settled nothing (a resume that finds every task done: the process died after the
 * last result was written, before the outcome) writes nothing after its outcome: the terminal phase is the stream's
 * last event, written before the lease is given back and the client told (execution.ts finishIfDone). e74eba7 kept
 * such a wave's elapsed time for its starts and, when none started, wrote it after the wave: after the outcome, the
 * lease's release and `product.completed`.
 */
import { expect, it } from "vitest";
import { productStream } from "../../../src/core/product/records.js";
import { createHarness, drain, draftPlan, waitUntil } from "../../support/fakes.js";

const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]);

it("writes nothing after the outcome of a run whose last wave settled nothing (resume with every task done)", async () => {
  // First process: both tasks complete, and the write of the outcome fails (the process is as good as dead).
  const first = createHarness({ plan: PLAN });
  const append = first.authority.appendEvents.bind(first.authority);
  let dead = false;
  first.authority.appendEvents = (projectId, stream, events, expectedSeq) => {
    dead ||= events.some((e) => (e as { type?: string }).type === "phase");
    return dead ? Promise.reject(new Error("disk gone")) : append(projectId, stream, events, expectedSeq);
  };
  const productId = await first.started();
  await waitUntil(() => dead, "the outcome's write");
  const second = createHarness({ plan: PLAN, authority: first.authority, clock: first.clock, ids: first.ids });
  second.authority.appendEvents = append;
  expect((await second.tasks(productId)).map((t) => t.status)).toEqual(["completed", "completed"]);

  await second.service.resume(productId);
  const done = await second.finished(productId);
  expect(done.phase).toBe("completed");
  await drain(); // the wave that finished ends (a few turns: the memory authority answers at once)
  const events = (await second.authority.readEvents("proj", productStream(productId), 0)).map(
    (e) => e.event as { type: string; phase?: string },
  );
  const outcome = events.findLastIndex((e) => e.type === "phase" && e.phase === "completed");
  expect(events.slice(outcome + 1).map((e) => e.type)).toEqual(["dialogue"]);
});
