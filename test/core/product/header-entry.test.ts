// header-entry.ts (issue 32: product.list of 100,000 stored products): an entry is cut from a stored header's text
// only when parsing that text gives a header (the schema accepts it) whose list entry JSON.stringify writes as exactly
// the cut text, with the same product id, creation time and phase; the written form of ordinary headers is cut.
import { describe, expect, it } from "vitest";
import { cutHeaderEntry, entryJson } from "../../../src/core/product/header-entry.js";
import { parseHeaderText } from "../../../src/core/product/header-text.js";
import { validHeader } from "../../support/product-header.js";

const valid = validHeader;
const text = JSON.stringify(valid);

/** Member values that keep a text off the cut, or that it must still cut exactly. */
const odd: unknown[] = [
  ...[undefined, null, true, 0, -1, 1.5, 2 ** 53, Number.MAX_SAFE_INTEGER, 999_999_999_999_999, 1e15, [], {}],
  ...["", "x", "y".repeat(200), "y".repeat(201), "executing", "paused", "running", "café", "製品", "😀", "\ud800"],
  ...['a"b', "a\\b", "a\nb", "a\u0001b", "a\u2028b", "a\u2029b", "a/b", "\u007f", 'a,"name":"b'],
];

/** Texts: the valid header with each member (and each count) replaced or removed, then edits of the text itself. */
function texts(): string[] {
  const out: string[] = [
    text,
    JSON.stringify({ ...valid, sessionId: "s1" }),
    JSON.stringify({ ...valid, sessionId: "" }),
  ];
  for (const key of [...Object.keys(valid), "sessionId"]) {
    for (const value of odd) out.push(JSON.stringify({ ...valid, [key]: value }));
    const { [key]: _gone, ...rest } = valid as Record<string, unknown>;
    out.push(JSON.stringify(rest));
  }
  for (const key of Object.keys(valid.progress)) {
    for (const value of odd) out.push(JSON.stringify({ ...valid, progress: { ...valid.progress, [key]: value } }));
  }
  for (const phase of ["planning", "awaiting_confirmation", "paused", "completed", "failed", "cancelled", "done"])
    out.push(JSON.stringify({ ...valid, phase }));
  out.push(
    JSON.stringify({ ...valid, extra: 1 }),
    JSON.stringify(Object.fromEntries(Object.entries(valid).reverse())),
    JSON.stringify(valid, null, 1),
    text.replace('"total":3', '"total":3.0'),
    text.replace('"total":3', '"total":03'),
    text.replace('"total":3', '"total":3e0'),
    text.replace('"failed":0', '"failed":-0'),
    text.replace('"total":3', '"total":1234567890123456'),
    text.replace('"name":"A product"', '"name":"A \\u0070roduct"'),
    text.replace('"productId":"prd_1"', '"productId":"prd_\\/1"'),
    `${text.slice(0, -1)},"productId":"prd_2"}`,
    `${text.slice(0, -1)},"sessionId":"s","sessionId":"t"}`,
    `${text} `,
    ` ${text}`,
    `${text}}`,
    text.slice(0, -1),
    `[${text}]`,
    "not json",
    "",
  );
  return out;
}

describe("cutHeaderEntry", () => {
  it("cuts only texts that parse to a header whose list entry JSON.stringify writes as the cut text", () => {
    let cut = 0;
    for (const t of texts()) {
      const entry = cutHeaderEntry(t);
      if (entry === undefined) continue;
      cut++;
      const header = parseHeaderText(t);
      expect(header, t).toBeDefined();
      if (header === undefined) continue;
      const { productId, projectId, name, phase, progress, updatedAt } = header;
      expect(entryJson(entry), t).toBe(JSON.stringify({ productId, projectId, name, phase, progress, updatedAt }));
      expect([entry.productId, entry.createdAt, entry.phase]).toEqual([productId, header.createdAt, phase]);
      expect(entry.text).toBe(t);
    }
    // Not vacuous: the written form with each phase, a session, plain and non-ASCII names, long ids, big counts, …
    expect(cut).toBeGreaterThanOrEqual(40);
  });

  it("cuts the written form of ordinary headers, and leaves escapes, surrogates and line separators to the parser", () => {
    for (const name of ["A product", "café au lait", "製品の名前", "", "a/b", "\u007f"]) {
      const header = { ...valid, name, sessionId: "sess_1" };
      const entry = cutHeaderEntry(JSON.stringify(header));
      expect(entry && entryJson(entry), name).toBe(
        JSON.stringify({ ...pick(header), progress: header.progress, updatedAt: header.updatedAt }),
      );
    }
    for (const name of ['a"b', "a\\b", "a\nb", "😀", "a\u2028b", "a\u2029b"]) {
      expect(cutHeaderEntry(JSON.stringify({ ...valid, name })), name).toBeUndefined();
      expect(parseHeaderText(JSON.stringify({ ...valid, name }))?.name).toBe(name);
    }
  });
});

function pick(h: typeof valid): { productId: string; projectId: string; name: string; phase: string } {
  return { productId: h.productId, projectId: h.projectId, name: h.name, phase: h.phase };
}
