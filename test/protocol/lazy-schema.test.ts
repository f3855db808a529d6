/**
 * Schemas built on first use (protocol/lazy-schema.ts; issue 16, cold start): a stand-in builds nothing until it is
 * used, then is indistinguishable from its schema, and loading the method table builds none of the schemas it names
 * (the server loads it before it answers `initialize`).
 */
import * as z from "zod";
import { describe, expect, it } from "vitest";
import { builtSchemaNames, isBuilt, lazySchema } from "../../protocol/lazy-schema.js";

describe("lazySchema", () => {
  it("does not build its schema until it is used, and builds it once", () => {
    let builds = 0;
    const S = lazySchema(() => {
      builds += 1;
      return z.object({ a: z.number() });
    }, "S");
    expect(builds).toBe(0);
    expect(isBuilt(S)).toBe(false);
    expect(S.safeParse({ a: 1 }).success).toBe(true);
    expect(S.safeParse({ a: "x" }).success).toBe(false);
    expect(builds).toBe(1);
    expect(isBuilt(S)).toBe(true);
    expect(builtSchemaNames()).toContain("S");
  });

  it("is a zod schema to zod: instanceof, shape, composition, refinements", () => {
    const Inner = lazySchema(() => z.string().min(2), "Inner");
    const Outer = lazySchema(() => z.object({ name: Inner, tags: Inner.array().optional() }), "Outer");
    expect(Outer).toBeInstanceOf(z.ZodObject);
    expect(Object.keys(Outer.shape)).toEqual(["name", "tags"]);
    expect(Outer.safeParse({ name: "ab", tags: ["cd"] }).success).toBe(true);
    expect(Outer.safeParse({ name: "a" }).success).toBe(false);
    const Extended = Outer.extend({ n: z.number() }).strict();
    expect(Extended.safeParse({ name: "ab", n: 1 }).success).toBe(true);
    expect(Extended.safeParse({ name: "ab", n: 1, extra: true }).success).toBe(false);
    expect(z.discriminatedUnion("k", [lazySchema(() => z.object({ k: z.literal("x") }))]).parse({ k: "x" })).toEqual({
      k: "x",
    });
  });

  it("wraps the stand-in itself in .optional(), .nullable(), .nullish() and .array(), without building it", () => {
    const S = lazySchema(() => z.string(), "Wrapped");
    const optional = S.optional();
    const nullish = S.nullish();
    const array = S.array();
    expect(isBuilt(S)).toBe(false);
    // The generated reference finds a named shape by identity wherever it is referenced.
    expect(optional.unwrap()).toBe(S);
    expect(nullish.unwrap().unwrap()).toBe(S);
    expect(array.element).toBe(S);
    expect(nullish.parse(null)).toBe(null);
  });

  it("reports plain schemas as built", () => {
    expect(isBuilt(z.string())).toBe(true);
  });
});

describe("the method table", () => {
  it("builds no schema when it loads, and validating initialize params builds no result or notification schema", async () => {
    const methods = await import("../../protocol/methods.js");
    const acp = await import("../../protocol/acp.js");
    const unbuiltAtLoad = [...methods.serverMethods, ...methods.hostRequests].flatMap((m) => [m.params, m.result]);
    expect(unbuiltAtLoad.filter((s) => isBuilt(s))).toEqual([]);
    expect(methods.findServerMethod("initialize")!.params.safeParse({ protocolVersion: 1 }).success).toBe(true);
    expect(isBuilt(acp.InitializeParams)).toBe(true);
    for (const schema of [acp.InitializeResult, acp.SessionUpdate, acp.ContentBlock, acp.SessionUpdateParams]) {
      expect(isBuilt(schema)).toBe(false);
    }
    for (const n of [
      ...methods.acpServerNotifications,
      ...methods.productNotifications,
      ...methods.goalNotifications,
    ]) {
      expect(isBuilt(n.params), n.method).toBe(false);
    }
  });
});
