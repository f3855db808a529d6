// The structural bounds every request's params pass before their schema runs (DESIGN.md guarantee 14), and the
// schemas' own string limits aborting before their refinements (issue 10 finding 5).
import { describe, expect, it } from "vitest";
import { Id } from "../../protocol/common.js";
import { SessionPromptParams } from "../../protocol/acp.js";
import {
  MAX_INPUT_DEPTH,
  MAX_INPUT_ITEMS,
  MAX_INPUT_NODES,
  MAX_INPUT_STRING_CHARS,
  checkInputBounds,
} from "../../src/server/input-bounds.js";

describe("checkInputBounds", () => {
  it("accepts a request of ordinary size", () => {
    expect(
      checkInputBounds({ productId: "p", tasks: [{ taskId: "a", dependsOn: ["b"] }], _meta: { x: 1 } }),
    ).toBeNull();
  });

  it("names the path of a string past the limit", () => {
    expect(checkInputBounds({ a: [{ b: "x".repeat(MAX_INPUT_STRING_CHARS + 1) }] })?.path).toEqual(["a", 0, "b"]);
  });

  it("answers flat params (no nested object or array) as the full walk does", () => {
    // Flat params take a path that allocates nothing (issue 16, request path); its verdicts must be the walk's.
    const long = "x".repeat(MAX_INPUT_STRING_CHARS + 1);
    expect(checkInputBounds({ productId: "prd_1", n: 3, ok: true, none: null })).toBeNull();
    expect(checkInputBounds(JSON.parse('{"__proto__": "x", "a": "b"}'))).toBeNull();
    expect(checkInputBounds({ productId: "prd_1", text: long })).toEqual({
      path: ["text"],
      message: `is too long: ${long.length} characters, at most ${MAX_INPUT_STRING_CHARS} are accepted`,
    });
    expect(checkInputBounds({ [long]: 1 })).toEqual({ path: [], message: "has a key that is too long" });
    const wide = Object.fromEntries(Array.from({ length: MAX_INPUT_ITEMS + 1 }, (_, i) => [`k${i}`, i]));
    expect(checkInputBounds(wide)?.message).toMatch(/keys, at most/);
  });

  it("refuses an array past the limit by its length alone", () => {
    expect(checkInputBounds({ list: new Array(MAX_INPUT_ITEMS + 1).fill(0) })).toMatchObject({ path: ["list"] });
  });

  it("refuses an object with too many keys (e.g. a free-form _meta)", () => {
    const meta = Object.fromEntries(Array.from({ length: MAX_INPUT_ITEMS + 1 }, (_, i) => [`k${i}`, i]));
    expect(checkInputBounds({ _meta: meta })).toMatchObject({ path: ["_meta"] });
  });

  it("refuses nesting past the limit", () => {
    let deep: unknown = 1;
    for (let i = 0; i <= MAX_INPUT_DEPTH; i++) deep = [deep];
    expect(checkInputBounds(deep)?.message).toContain("nested");
  });

  it("refuses more values than the limit, however they are spread", () => {
    const rows = Array.from({ length: Math.ceil(MAX_INPUT_NODES / MAX_INPUT_ITEMS) + 1 }, () =>
      new Array(MAX_INPUT_ITEMS).fill(0),
    );
    expect(checkInputBounds({ rows })?.message).toContain(`more than ${MAX_INPUT_NODES} values`);
  });
});

describe("schema string limits abort before refinements", () => {
  it("reports only the length of an over-long id, not its characters", () => {
    const result = Id.safeParse(`${"x".repeat(1_000)}\u0001`);
    expect(result.error?.issues.map((i) => i.code)).toEqual(["too_big"]);
  });

  it("still refuses control characters in an id of valid length", () => {
    expect(Id.safeParse("a\u0001b").success).toBe(false);
  });

  it("caps a prompt's text at 100,000 characters across its blocks", () => {
    const prompt = (n: number) => ({ sessionId: "s", prompt: [{ type: "text", text: "a".repeat(n) }] });
    expect(SessionPromptParams.safeParse(prompt(100_000)).success).toBe(true);
    expect(SessionPromptParams.safeParse(prompt(100_001)).success).toBe(false);
  });
});
