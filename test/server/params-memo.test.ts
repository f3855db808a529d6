/**
 * ParamsMemo (issue 34, request path): params equal to the last ones a method accepted are answered from memory, and
 * nothing else changes — what is accepted, the output, the issues of a refusal.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { MethodSpec } from "../../protocol/method-spec.js";
import { serverMethods } from "../../protocol/methods.js";
import { ParamsMemo } from "../../src/server/params-memo.js";

/** A spec whose params schema counts its parses (a refinement that runs once per parse). */
function countingSpec(shape: z.ZodRawShape): { spec: MethodSpec; parses: () => number } {
  let parses = 0;
  const params = z.strictObject(shape).refine(() => {
    parses += 1;
    return true;
  });
  const spec = { method: "x.status", extension: true, params, result: z.unknown() } as unknown as MethodSpec;
  return { spec, parses: () => parses };
}

describe("ParamsMemo", () => {
  it("answers params equal to the last accepted ones without parsing, with a fresh copy of the output", () => {
    const { spec, parses } = countingSpec({ productId: z.string(), limit: z.number().default(10) });
    const memo = new ParamsMemo();
    const first = memo.parse(spec, { productId: "p1" });
    const second = memo.parse(spec, { productId: "p1" });
    expect(first).toEqual({ success: true, data: { productId: "p1", limit: 10 } });
    expect(second).toEqual(first);
    expect(parses()).toBe(1);
    // A handler that changes its params changes nothing kept.
    (second as { data: Record<string, unknown> }).data["productId"] = "changed";
    expect(memo.parse(spec, { productId: "p1" })).toEqual(first);
    expect(parses()).toBe(1);
  });

  it("parses params that differ in a value, a member, the order of members, or -0 against 0", () => {
    const { spec, parses } = countingSpec({ a: z.string(), b: z.number().optional() });
    const memo = new ParamsMemo();
    memo.parse(spec, { a: "x", b: 0 });
    memo.parse(spec, { a: "y", b: 0 });
    memo.parse(spec, { a: "y" });
    memo.parse(spec, { a: "y", b: 0 });
    memo.parse(spec, { b: 0, a: "y" });
    memo.parse(spec, { b: -0, a: "y" });
    expect(parses()).toBe(6);
  });

  it("never remembers a refusal, nor params or outputs that are not flat", () => {
    const { spec, parses } = countingSpec({ a: z.string(), meta: z.object({ k: z.string() }).optional() });
    const memo = new ParamsMemo();
    const refused = memo.parse(spec, { a: 1 });
    expect(refused.success).toBe(false);
    expect(memo.parse(spec, { a: 1 }).success).toBe(false);
    memo.parse(spec, { a: "x", meta: { k: "v" } });
    memo.parse(spec, { a: "x", meta: { k: "v" } });
    expect(parses()).toBe(2);
    // An accepted flat input is remembered again after them.
    memo.parse(spec, { a: "x" });
    memo.parse(spec, { a: "x" });
    expect(parses()).toBe(3);
  });

  it("refuses array params a method refuses, even when an object with the same members was accepted before", () => {
    // by-position params [] (or ["x"]) are not the object {} (or {"0": "x"}): the schema refuses the array.
    const memo = new ParamsMemo();
    const spec = (method: string) => serverMethods.find((m) => m.method === method) as unknown as MethodSpec;
    expect(memo.parse(spec("product.list"), {}).success).toBe(true);
    expect(memo.parse(spec("product.list"), []).success).toBe(false);
    expect(memo.parse(spec("session/list"), { "0": "x" }).success).toBe(true);
    expect(memo.parse(spec("session/list"), ["x"]).success).toBe(false);
  });
});
