/**
 * The matcher (src/transcripts/matcher.ts, protocol/TRANSCRIPTS.md "Matching" and "Operators"): partial objects,
 * every operator, capture semantics, send resolution, and the differences/closest-message report.
 */
import { describe, expect, it } from "vitest";
import type { Json } from "../../src/transcripts/format.js";
import {
  closestMessage,
  matchMessage,
  resolveSend,
  UnboundNameError,
  type Bindings,
} from "../../src/transcripts/matcher.js";

const none: Bindings = new Map();
const fits = (pattern: Json, value: unknown, bindings: Bindings = none) => matchMessage(pattern, value, bindings).ok;

describe("matchMessage", () => {
  it("matches objects partially, arrays exactly by length, and primitives by equality", () => {
    expect(
      fits({ result: { phase: "planning" } }, { jsonrpc: "2.0", id: 1, result: { phase: "planning", x: 1 } }),
    ).toBe(true);
    expect(fits({ result: { phase: "planning" } }, { result: { phase: "executing" } })).toBe(false);
    expect(fits({ a: [1, 2] }, { a: [1, 2] })).toBe(true);
    expect(fits({ a: [1, 2] }, { a: [1, 2, 3] })).toBe(false);
    expect(fits({ a: [{ b: 1 }] }, { a: [{ b: 1, c: 2 }] })).toBe(true);
    expect(fits({ a: null }, { a: null })).toBe(true);
    expect(fits({ a: 1 }, { a: "1" })).toBe(false);
    expect(fits({ a: 1 }, {})).toBe(false);
  });

  it("supports $any, $absent, $type (iso-date, uuid, integer, …), $regex with flags, $literal and $exact", () => {
    expect(fits({ a: { $any: true } }, { a: null })).toBe(true);
    expect(fits({ a: { $any: true } }, {})).toBe(false);
    expect(fits({ a: { $absent: true } }, {})).toBe(true);
    expect(fits({ a: { $absent: true } }, { a: 1 })).toBe(false);
    expect(fits({ at: { $type: "iso-date" } }, { at: "2026-11-29T08:52:11.237Z" })).toBe(true);
    expect(fits({ at: { $type: "iso-date" } }, { at: "yesterday" })).toBe(false);
    expect(fits({ u: { $type: "uuid" } }, { u: "0b5e3f5a-1c2d-4e5f-8a9b-0c1d2e3f4a5b" })).toBe(true);
    expect(fits({ n: { $type: "integer" } }, { n: 1.5 })).toBe(false);
    expect(fits({ n: { $type: "array" } }, { n: [] })).toBe(true);
    expect(fits({ s: { $regex: "^ab+c$", $flags: "i" } }, { s: "ABBC" })).toBe(true);
    expect(fits({ s: { $regex: "^ab+c$" } }, { s: 3 })).toBe(false);
    expect(fits({ o: { $literal: { $ref: "x" } } }, { o: { $ref: "x" } })).toBe(true);
    expect(fits({ o: { $exact: { a: 1 } } }, { o: { a: 1 } })).toBe(true);
    expect(fits({ o: { $exact: { a: 1 } } }, { o: { a: 1, b: 2 } })).toBe(false);
  });

  it("binds captures only when the whole message fits, and a repeated capture must be equal", () => {
    const ok = matchMessage(
      { id: { $capture: "req" }, params: { p: { $capture: "p" } } },
      { id: 7, params: { p: "x" } },
      none,
    );
    expect(ok.ok).toBe(true);
    expect([...ok.bindings]).toEqual([
      ["req", 7],
      ["p", "x"],
    ]);
    const failed = matchMessage({ a: { $capture: "a" }, b: 2 }, { a: 1, b: 3 }, none);
    expect(failed.ok).toBe(false);
    expect(none.size).toBe(0);
    expect(fits({ a: { $capture: "x" }, b: { $capture: "x" } }, { a: 1, b: 1 })).toBe(true);
    expect(fits({ a: { $capture: "x" }, b: { $capture: "x" } }, { a: 1, b: 2 })).toBe(false);
    expect(fits({ a: { $capture: "x", $type: "string" } }, { a: 1 })).toBe(false);
  });

  it("resolves $ref, $template and ${name} inside $regex against the bindings; regex named groups capture", () => {
    const b: Bindings = new Map<string, Json>([
      ["prd1", "prd_0123"],
      ["workspace", "/tmp/w.x"],
    ]);
    expect(fits({ productId: { $ref: "prd1" } }, { productId: "prd_0123" }, b)).toBe(true);
    expect(fits({ productId: { $ref: "prd1" } }, { productId: "prd_9999" }, b)).toBe(false);
    expect(fits({ id: { $template: "plan-${prd1}" } }, { id: "plan-prd_0123" }, b)).toBe(true);
    expect(fits({ p: { $regex: "^${workspace}/notes/.+$" } }, { p: "/tmp/w.x/notes/a.md" }, b)).toBe(true);
    expect(fits({ p: { $regex: "^${workspace}/notes/.+$" } }, { p: "/tmp/wax/notes/a.md" }, b)).toBe(false);
    const grouped = matchMessage({ t: { $regex: "^plan-(?<p>prd_\\d+)$" } }, { t: "plan-prd_42" }, none);
    expect(grouped.bindings.get("p")).toBe("prd_42");
    expect(fits({ productId: { $ref: "unbound" } }, { productId: "x" })).toBe(false);
  });

  it("collects every difference with a path and short renderings when asked", () => {
    const outcome = matchMessage(
      { id: 2, result: { phase: "executing", ok: true, nodes: [{ id: "t1" }] } },
      { id: 2, result: { phase: "planning", nodes: [{ id: "t2" }] } },
      none,
      true,
    );
    expect(outcome.differences).toEqual([
      { path: "result.phase", expected: '"executing"', actual: '"planning"' },
      { path: "result.ok", expected: "true", actual: "(missing)" },
      { path: "result.nodes[0].id", expected: '"t1"', actual: '"t2"' },
    ]);
  });
});

describe("closestMessage", () => {
  it("prefers the message with the same method or id, then the fewest differences", () => {
    const pattern: Json = { id: 3, result: { phase: "paused", productId: "p" } };
    const closest = closestMessage(
      pattern,
      [
        { index: 0, message: { method: "product.taskStatus", params: { phase: "paused", productId: "p" } } },
        { index: 1, message: { id: 3, result: { phase: "executing", productId: "p" } } },
        { index: 2, message: { id: 4, result: { phase: "paused", productId: "p" } } },
      ],
      none,
    );
    expect(closest?.index).toBe(1);
    expect(closest?.differences).toEqual([{ path: "result.phase", expected: '"paused"', actual: '"executing"' }]);
    expect(closestMessage(pattern, [], none)).toBeUndefined();
  });
});

describe("resolveSend", () => {
  it("replaces $ref, $template and $literal and keeps everything else", () => {
    const b: Bindings = new Map<string, Json>([
      ["req1", 0],
      ["prd1", "prd_1"],
    ]);
    expect(
      resolveSend(
        {
          jsonrpc: "2.0",
          id: { $ref: "req1" },
          result: { a: { $template: "x-${prd1}" }, l: { $literal: { $ref: "q" } }, n: [1, null] },
        },
        b,
      ),
    ).toEqual({ jsonrpc: "2.0", id: 0, result: { a: "x-prd_1", l: { $ref: "q" }, n: [1, null] } });
  });

  it("throws UnboundNameError naming the path and the name when a capture never happened", () => {
    expect(() => resolveSend({ params: { productId: { $ref: "prd1" } } }, none)).toThrow(UnboundNameError);
    expect(() => resolveSend({ params: { productId: { $ref: "prd1" } } }, none)).toThrow(
      'msg.params.productId: "prd1" was never captured',
    );
  });
});
