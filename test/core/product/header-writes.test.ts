/**
 * The product header (product.list's index) is written at every quiescent point, but never twice with the same text at
 * the same revision (issue 34: the wave that ended a run wrote the end's header a second time, one more fsynced commit
 * on SQLite per run).
 */
import { describe, expect, it } from "vitest";
import { createHarness, draftPlan } from "../../support/fakes.js";

describe("product header writes", () => {
  it("writes no header twice in a row with the same content, and the last one is the outcome", async () => {
    const h = createHarness({
      plan: draftPlan([
        { id: "a", instance: "i1" },
        { id: "b", instance: "i2", deps: ["a"] },
      ]),
    });
    const headers: string[] = [];
    const put = h.authority.put.bind(h.authority);
    h.authority.put = (projectId, kind, id, value, expectedRevision) => {
      if (kind === "product") headers.push(JSON.stringify(value));
      return put(projectId, kind, id, value, expectedRevision);
    };
    const productId = await h.started();
    await h.finished(productId);
    expect(headers.length).toBeGreaterThan(2);
    for (let i = 1; i < headers.length; i++) expect(headers[i], `header write ${i}`).not.toBe(headers[i - 1]);
    const stored = await h.authority.get("proj", "product", productId);
    expect(stored?.value).toMatchObject({ phase: "completed", progress: { completed: 2, total: 2 } });
    expect(JSON.parse(headers[headers.length - 1] as string)).toEqual(stored?.value);
  });
});
