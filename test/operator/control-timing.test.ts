/**
 * The times a control verb prints (OPERATOR.md: "accepted after N ms, answered after M ms"): a request this process
 * saw accepted only after the owner had already answered it (its poll came late) is accepted when answered, never
 * after (a new user's trial read "accepted after 227 ms, answered after 220 ms").
 */
import { describe, expect, it } from "vitest";
import { answeredOutcome } from "../../src/operator/control-client.js";
import type { ControlRequestRecord } from "../../src/core/product/control-requests.js";

const STARTED = Date.parse("2030-01-01T00:00:00.000Z");

function done(answeredAfterMs: number): ControlRequestRecord {
  return {
    v: 1,
    requestId: "req_1",
    productId: "prd_1",
    method: "product.pause",
    params: {},
    by: "cli:test",
    at: new Date(STARTED).toISOString(),
    expiresAt: new Date(STARTED + 60_000).toISOString(),
    state: "done",
    acceptedBy: "owner-1",
    answeredAt: new Date(STARTED + answeredAfterMs).toISOString(),
    result: { phase: "paused" },
  };
}

describe("a control request's printed times", () => {
  it("never says accepted after it was answered", () => {
    const late = answeredOutcome(done(220), { requestId: "req_1", started: STARTED }, STARTED + 227, STARTED + 230);
    expect(late).toMatchObject({ kind: "done", acceptedAfterMs: 220, answeredAfterMs: 220 });
  });

  it("keeps an acceptance seen before the answer", () => {
    const seen = answeredOutcome(done(220), { requestId: "req_1", started: STARTED }, STARTED + 40, STARTED + 230);
    expect(seen).toMatchObject({ kind: "done", acceptedAfterMs: 40, answeredAfterMs: 220 });
  });

  it("counts a request first seen answered as accepted when answered", () => {
    const first = answeredOutcome(done(90), { requestId: "req_1", started: STARTED }, undefined, STARTED + 100);
    expect(first).toMatchObject({ kind: "done", acceptedAfterMs: 90, answeredAfterMs: 90 });
  });
});
