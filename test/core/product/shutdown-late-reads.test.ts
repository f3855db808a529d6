/**
 * Nothing of a server's background work reads the run-state authority after shutdown closed it (a user's finding:
 * every `run` ended with a warning "… authority is closed (get)"). The live-output writer's timer and the control
 * request pickup's look were still in flight when the owner closed the authority; each now has a close/stop that
 * resolves only once its work in flight finished.
 */
import { describe, expect, it } from "vitest";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { LIVE_OUTPUT_FLUSH_MS, LIVE_OUTPUT_KIND, LiveOutputRecorder } from "../../../src/core/product/live-output.js";
import { ControlRequestPickup } from "../../../src/core/product/control-requests.js";
import type { ProductService } from "../../../src/core/product/service.js";
import { WorkInFlight } from "../../../src/core/work-in-flight.js";
import { drain, FakeClock, Gate, RecordingLogger, waitUntil } from "../../support/fakes.js";

/** A memory authority whose `op` calls wait at `gate` (counted in `held`) until it is released. */
function heldAuthority(op: "get" | "list", gate: Gate): { authority: MemoryAuthority; held: () => number } {
  const authority = new MemoryAuthority();
  let held = 0;
  const original = authority[op].bind(authority) as (...args: unknown[]) => Promise<unknown>;
  (authority as unknown as Record<string, unknown>)[op] = async (...args: unknown[]) => {
    held += 1;
    await gate.promise;
    return original(...args);
  };
  return { authority, held: () => held };
}

const warnings = (logger: RecordingLogger) => logger.entries.filter((e) => e.level === "warn" || e.level === "error");

describe("shutdown waits for background reads of the authority", () => {
  it("the live-output writer's close waits for a write in flight and drops what was not written", async () => {
    const gate = new Gate();
    const { authority, held } = heldAuthority("get", gate);
    const clock = new FakeClock();
    const logger = new RecordingLogger();
    const recorder = new LiveOutputRecorder(authority, clock, logger);
    recorder.note("p", "prd_1", "t1", 1, "first words");
    clock.advance(LIVE_OUTPUT_FLUSH_MS);
    await waitUntil(() => held() === 1, "the write to read the record's revision");
    // Another task's text is waiting for its timer: close drops it, never writes it after the authority closed.
    recorder.note("p", "prd_1", "t2", 1, "not yet written");
    let closed = false;
    const closing = recorder.close().then(() => (closed = true));
    await drain();
    expect(closed).toBe(false);
    gate.release();
    await closing;
    expect((await authority.get("p", LIVE_OUTPUT_KIND, "prd_1/t1"))?.value).toMatchObject({ text: "first words" });
    await authority.close();
    clock.advance(10 * LIVE_OUTPUT_FLUSH_MS);
    recorder.note("p", "prd_1", "t1", 1, "after close");
    recorder.end("prd_1", "t2");
    clock.advance(10 * LIVE_OUTPUT_FLUSH_MS);
    await drain();
    expect(warnings(logger)).toEqual([]);
  });

  it("the control request pickup's stop waits for a look in flight", async () => {
    const gate = new Gate();
    const { authority, held } = heldAuthority("list", gate);
    const clock = new FakeClock();
    const logger = new RecordingLogger();
    const driving = { productId: "prd_1", isDriving: true, isFenced: false, model: { state: { projectId: "p" } } };
    const service = { loaded: () => [driving], peek: () => driving } as unknown as ProductService;
    const pickup = new ControlRequestPickup({ service, authority, clock, logger, ownerId: "me", pollMs: 200 });
    pickup.start();
    clock.advance(200);
    await waitUntil(() => held() === 1, "the look to list the product's control requests");
    let stopped = false;
    const stopping = pickup.stop().then(() => (stopped = true));
    await drain();
    expect(stopped).toBe(false);
    gate.release();
    await stopping;
    await authority.close();
    clock.advance(10_000);
    await drain();
    expect(held()).toBe(1);
    expect(warnings(logger)).toEqual([]);
  });

  it("WorkInFlight.settled waits for work started by work in flight, and never rejects", async () => {
    const work = new WorkInFlight();
    const first = new Gate();
    const second = new Gate();
    let done = false;
    void work.track(
      first.promise.then(() => {
        void work.track(second.promise.then(() => Promise.reject(new Error("failed late"))).catch(() => undefined));
        return Promise.reject(new Error("failed"));
      }),
    ).catch(() => undefined);
    const settled = work.settled().then(() => (done = true));
    first.release();
    await drain();
    expect(done).toBe(false);
    expect(work.size).toBe(1);
    second.release();
    await settled;
    expect(work.size).toBe(0);
  });
});
