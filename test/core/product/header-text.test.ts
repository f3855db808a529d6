// header-text.ts (issue 32: product.list of 100,000 stored products): the quick check of a stored header accepts
// only what ProductHeaderRecord accepts, and returns what it returns (same members, same order); parseHeaderText
// answers what safeParse(JSON.parse(text)) answers for every text, valid, invalid or not JSON.
import { describe, expect, it } from "vitest";
import { parseHeaderText, quickHeader } from "../../../src/core/product/header-text.js";
import { ProductHeaderRecord } from "../../../src/core/product/records.js";
import { validHeader } from "../../support/product-header.js";

const valid = validHeader;

/** Values of every kind a member could hold in a corrupted store. */
const odd: unknown[] = [
  undefined,
  null,
  0,
  -1,
  1.5,
  2 ** 53,
  Number.MAX_SAFE_INTEGER,
  "",
  "x",
  "a\u0001b",
  "y".repeat(200),
  "y".repeat(201),
  "executing",
  "running",
  true,
  [],
  [1],
  {},
  { total: 1 },
];

/** The valid header, every member of it (and of its progress) replaced by each odd value, or removed. */
function variants(): unknown[] {
  const out: unknown[] = [valid, { ...valid, sessionId: "s1" }, { ...valid, extra: 1 }, [valid], null, "text", 7];
  for (const key of [...Object.keys(valid), "sessionId"]) {
    for (const value of odd) out.push({ ...valid, [key]: value });
    const { [key]: _gone, ...rest } = valid as Record<string, unknown>;
    out.push(rest);
  }
  for (const key of Object.keys(valid.progress)) {
    for (const value of odd) out.push({ ...valid, progress: { ...valid.progress, [key]: value } });
  }
  out.push({ ...valid, progress: { pending: 1, failed: 0, running: 1, completed: 1, total: 3, more: 2 } });
  out.push(Object.fromEntries(Object.entries(valid).reverse())); // members in another order
  out.push(JSON.parse(`{"__proto__":{"v":1},${JSON.stringify(valid).slice(1)}`));
  out.push(JSON.parse(`{"__proto__":7,"constructor":1,${JSON.stringify(valid).slice(1)}`));
  return out;
}

describe("quickHeader", () => {
  it("accepts only what ProductHeaderRecord accepts, and returns the same header with its members in the same order", () => {
    let accepted = 0;
    for (const value of variants()) {
      const quick = quickHeader(value);
      const parsed = ProductHeaderRecord.safeParse(value);
      if (quick === undefined) continue;
      accepted++;
      expect(parsed.success, JSON.stringify(value)).toBe(true);
      expect(JSON.stringify(quick)).toBe(JSON.stringify(parsed.data));
      expect(quick).toEqual(parsed.data);
    }
    // The quick check is not vacuous: the valid header, with a session, extra members, members out of order, …
    expect(accepted).toBeGreaterThanOrEqual(10);
  });

  it("leaves to the schema every header the schema refuses", () => {
    let refused = 0;
    for (const value of variants()) {
      if (ProductHeaderRecord.safeParse(value).success) continue;
      refused++;
      expect(quickHeader(value), JSON.stringify(value)).toBeUndefined();
    }
    expect(refused).toBeGreaterThan(100);
  });
});

describe("parseHeaderText", () => {
  it("answers what ProductHeaderRecord.safeParse of the parsed text answers, and undefined for text that is not JSON", () => {
    const texts = [...variants().map((v) => JSON.stringify(v) ?? "undefined"), "not json", "", "{", '{"v":1,'];
    for (const text of texts) {
      let expected: unknown;
      try {
        const parsed = ProductHeaderRecord.safeParse(JSON.parse(text));
        expected = parsed.success ? parsed.data : undefined;
      } catch {
        expected = undefined;
      }
      const got = parseHeaderText(text);
      expect(got, text).toEqual(expected);
      expect(JSON.stringify(got)).toBe(JSON.stringify(expected));
    }
  });
});
