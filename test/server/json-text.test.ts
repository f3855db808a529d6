import { afterEach, describe, expect, it, vi } from "vitest";
import { JsonText, JsonTextMemo, serializeJson } from "../../src/server/json-text.js";

/** A status-like answer: fresh top level, nested objects and arrays, strings with characters JSON escapes. */
function answer(): Record<string, unknown> {
  return {
    productId: "prd_1",
    phase: "executing",
    plan: {
      name: 'Plan "quoted"\n',
      tasks: [
        { taskId: "t1", dependsOn: [] },
        { taskId: "t2", dependsOn: ["t1"] },
      ],
    },
    tasks: [{ taskId: "t1", status: "running", attempts: 1 }],
    progress: { total: 2, completed: 0, running: 1, failed: 0, pending: 1 },
    note: "line\u2028separator\u2029",
    skipped: undefined,
  };
}

/** Counts the calls of JSON.stringify made by `work`. */
function stringifyCalls(work: () => void): number {
  const spy = vi.spyOn(JSON, "stringify");
  try {
    work();
    return spy.mock.calls.length;
  } finally {
    spy.mockRestore();
  }
}

describe("JsonTextMemo", () => {
  afterEach(() => vi.restoreAllMocks());

  it("gives the text JSON.stringify would give, and the same text again for an equal answer", () => {
    const memo = new JsonTextMemo();
    const first = memo.text("p", answer());
    expect(first).toBeInstanceOf(JsonText);
    expect(first.text).toBe(serializeJson(answer()));
    expect(JSON.parse(first.text)).toEqual(JSON.parse(JSON.stringify(answer())));
    expect(first.text).toContain("\\u2028");
    let second: JsonText | undefined;
    // Remembered, not serialised again.
    expect(stringifyCalls(() => (second = memo.text("p", answer())))).toBe(0);
    expect(second?.text).toBe(first.text);
    expect(memo.size).toBe(1);
  });

  it("with an equal version hands out the remembered text without comparing; another version is compared", () => {
    const memo = new JsonTextMemo();
    const first = answer();
    const text = memo.text("p", first, "v1").text;
    // The caller promised that one version is one answer: the value is not looked at.
    const changed = { ...answer(), phase: "completed" };
    expect(memo.text("p", changed, "v1").text).toBe(text);
    // Another version (or none) is compared: the changed answer gets its own text, an equal one the old text.
    expect(memo.text("p", changed, "v2").text).toBe(serializeJson(changed));
    expect(memo.text("p", changed, undefined).text).toBe(serializeJson(changed));
    expect(memo.text("p", answer(), "v3").text).toBe(text);
  });

  it("never hands out stale text when the earlier answer or its parts are changed in place", () => {
    const memo = new JsonTextMemo();
    const shared = { taskId: "t1", status: "running", attempts: 1 };
    const tasks = [shared];
    const a = { productId: "prd_1", tasks };
    expect(memo.text("p", a).text).toBe(JSON.stringify(a));
    // The model changes the same objects in place, then the next answer is built around them.
    shared.status = "completed";
    expect(memo.text("p", { productId: "prd_1", tasks }).text).toContain('"status":"completed"');
    tasks.push({ taskId: "t2", status: "pending", attempts: 0 });
    expect(memo.text("p", { productId: "prd_1", tasks }).text).toBe(JSON.stringify({ productId: "prd_1", tasks }));
    // The same object handed in twice, changed in between.
    const same: Record<string, unknown> = { n: 1 };
    expect(memo.text("q", same).text).toBe('{"n":1}');
    same.n = 2;
    expect(memo.text("q", same).text).toBe('{"n":2}');
  });

  it("tells apart answers that differ only in member order, array length, types or a member set to undefined", () => {
    const memo = new JsonTextMemo();
    const cases: unknown[] = [
      { a: 1, b: 2 },
      { b: 2, a: 1 },
      { b: 2, a: 1, c: undefined },
      { b: 2, a: "1" },
      { b: 2, a: [1] },
      { b: 2, a: [1, 2] },
      { b: 2, a: [2, 1] },
      { b: 2, a: { 0: 1 } },
      { b: 2, a: null },
      { b: 2, a: true },
      { b: 2, a: false },
      { b: 2, a: 0 },
      { b: 2, a: -0 },
      { b: 2 },
      [],
      "text",
      7,
    ];
    for (const value of cases) expect(memo.text("k", value).text).toBe(serializeJson(value));
    // -0 and 0 are the same JSON.
    memo.text("z", { a: 0 });
    expect(memo.text("z", { a: -0 }).text).toBe('{"a":0}');
  });

  it("serialises values with anything JSON.stringify transforms every time, without remembering them", () => {
    const memo = new JsonTextMemo();
    const at = new Date(0);
    const withDate = { at };
    expect(memo.text("d", withDate).text).toBe(JSON.stringify(withDate));
    at.setTime(1000);
    expect(memo.text("d", withDate).text).toBe(JSON.stringify(withDate));
    const custom = { v: { toJSON: () => "custom" } };
    expect(memo.text("c", custom).text).toBe('{"v":"custom"}');
    expect(memo.text("n", { v: Number.NaN }).text).toBe('{"v":null}');
    expect(memo.text("u", { v: [undefined] }).text).toBe('{"v":[null]}');
    class Box {
      constructor(readonly v: number) {}
    }
    expect(memo.text("b", { box: new Box(1) }).text).toBe('{"box":{"v":1}}');
    expect(memo.size).toBe(0);
    expect(() => memo.text("x", { v: 1n })).toThrow(TypeError);
  });

  it("keeps at most maxKeys keys (least recently used forgotten first) and no text above maxChars", () => {
    const memo = new JsonTextMemo(2, 20);
    memo.text("a", { v: 1 });
    memo.text("b", { v: 2 });
    memo.text("a", { v: 1 });
    memo.text("c", { v: 3 });
    expect(memo.size).toBe(2);
    memo.text("big", { v: "x".repeat(40) });
    expect(memo.size).toBe(2);
    memo.forget("a");
    expect(memo.size).toBe(1);
  });

  it("agrees with JSON.stringify over a long random sequence of changing answers", () => {
    const memo = new JsonTextMemo();
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const leaf = (): unknown => {
      const r = random();
      if (r < 0.2) return Math.floor(random() * 3);
      if (r < 0.4) return ["a", "b", "\u2028", "é"][Math.floor(random() * 4)];
      if (r < 0.5) return random() < 0.5;
      if (r < 0.6) return null;
      if (r < 0.7) return undefined;
      return random() < 0.5 ? [leaf(), leaf()].filter((x) => x !== undefined) : { x: leaf(), y: leaf() };
    };
    const state: Record<string, unknown> = { a: leaf(), b: leaf(), c: leaf() };
    let remembered = 0;
    for (let i = 0; i < 3000; i += 1) {
      const key = ["a", "b", "c"][Math.floor(random() * 3)] as string;
      if (random() < 0.5) state[key] = leaf();
      const value = { ...state };
      const before = memo.text("k", value);
      expect(before.text).toBe(serializeJson(value));
      let again: JsonText | undefined;
      if (stringifyCalls(() => (again = memo.text("k", { ...state }))) === 0 && again?.text === before.text) {
        remembered += 1;
      }
    }
    expect(remembered).toBe(3000);
  });
});
