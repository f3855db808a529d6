/**
 * fleetWatches (core/product/fleet.ts): the writes a change feed announces for the fleet. A lease created where none
 * was fences nobody and starts no recovery (issue 32: each announcement wakes every server's feed); a take-over, a
 * renewal and a release of a lease are announced, as are control requests of both kinds, created or answered.
 */
import { describe, expect, it } from "vitest";
import { CONTROL_REQUEST_KIND } from "../../../src/core/product/control-requests.js";
import { CONTROL_KIND, fleetWatches } from "../../../src/core/product/fleet.js";

describe("fleetWatches", () => {
  it("leaves out a lease created where none was", () => {
    expect(fleetWatches({ kind: "lease", created: true })).toBe(false);
  });

  it("announces a lease written over a revision (a take-over or a renewal) or deleted", () => {
    expect(fleetWatches({ kind: "lease" })).toBe(true);
  });

  it("announces control requests whether created or answered", () => {
    for (const kind of [CONTROL_KIND, CONTROL_REQUEST_KIND]) {
      expect([fleetWatches({ kind, created: true }), fleetWatches({ kind })]).toEqual([true, true]);
    }
  });

  it("leaves out product records and event streams", () => {
    expect([fleetWatches({ kind: "product" }), fleetWatches({ stream: "product/prd_1" })]).toEqual([false, false]);
  });
});
