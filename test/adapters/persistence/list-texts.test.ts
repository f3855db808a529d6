// listTexts on PostgreSQL and product.list without a page on top of it (issue 32: product.list of 100,000 stored
// products under 1 s): one unordered read of the stored header texts, no index pass, the phase as a pre-filter in
// SQL. The headers listed equal the memory authority's (oldest first, creation time then id); a header that is not
// JSON or that the schema refuses is counted in `dropped` among many and the rest listed in order.
import { afterEach, expect, it } from "vitest";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import type { PostgresAuthority } from "../../../src/adapters/persistence/postgres-authority.js";
import type { RunStateAuthority } from "../../../src/core/ports.js";
import { ProductStore } from "../../../src/core/product/store.js";
import { adminQuery, describePostgres, dropSchema, freshSchema, openTestAuthority } from "../../support/postgres.js";

const PHASES = ["executing", "completed", "paused"] as const;

/** 60 headers in 3 projects, creation times out of id order with ties, phases mixed. */
function headers() {
  return Array.from({ length: 60 }, (_, i) => ({
    v: 1,
    productId: `prd_${String((i * 37) % 60).padStart(2, "0")}`,
    projectId: `proj-${i % 3}`,
    name: `Product ${i}`,
    phase: PHASES[i % 3] as string,
    progress: { total: 2, completed: i % 2, running: 0, failed: 0, pending: 2 - (i % 2) },
    createdAt: `2026-01-01T00:00:${String(59 - (i % 20)).padStart(2, "0")}.000Z`,
    updatedAt: "2026-01-02T00:00:00.000Z",
    ...(i % 5 === 0 ? { sessionId: `s${i}` } : {}),
  }));
}

async function seed(authority: RunStateAuthority): Promise<void> {
  for (const h of headers()) {
    await authority.put("_", "product-index", h.productId, { v: 1, projectId: h.projectId }, null);
    await authority.put(h.projectId, "product", h.productId, h, null);
  }
  // Invalid headers among them: one the schema refuses that names a phase, one that names none.
  await authority.put("proj-1", "product", "prd_bad1", { v: 1, phase: "executing", broken: true }, null);
  await authority.put("proj-2", "product", "prd_bad2", { v: 2, productId: "prd_bad2" }, null);
}

const schema = freshSchema();
describePostgres("listTexts and product.list without a page on PostgreSQL", () => {
  let authority: PostgresAuthority | undefined;
  afterEach(async () => {
    await authority?.close();
    authority = undefined;
    await dropSchema(schema);
  });

  it("reads the stored texts of one project or of every project but one, filtered by containing", async () => {
    authority = await openTestAuthority({ schema });
    await authority.put("p", "product", "a", { v: 1, phase: "executing" }, null);
    await authority.put("q", "product", "b", { v: 1, phase: "completed" }, null);
    await authority.put("_", "product", "c", { v: 1, phase: "executing" }, null);
    await authority.put("p", "other", "d", { v: 1, phase: "executing" }, null);
    await adminQuery(`UPDATE "${schema}".records SET value = 'not json' WHERE project_id = 'q' AND id = 'b'`);
    const sorted = (texts: string[]) => [...texts].sort();
    expect(sorted(await authority.listTexts("product", { exceptProjectId: "_" }))).toEqual([
      "not json",
      '{"v":1,"phase":"executing"}',
    ]);
    expect(await authority.listTexts("product", { projectId: "q" })).toEqual(["not json"]);
    expect(await authority.listTexts("product", { projectId: "_" })).toEqual(['{"v":1,"phase":"executing"}']);
    const executing = await authority.listTexts("product", { exceptProjectId: "_", containing: '"phase":"executing"' });
    expect(executing).toEqual(['{"v":1,"phase":"executing"}']);
    await expect(authority.listTexts("product", { exceptProjectId: "_", containing: "a\u0000" })).rejects.toThrow(
      /U\+0000/,
    );
  });

  it("lists every valid header oldest first, counting the invalid ones (not JSON, refused by the schema)", async () => {
    authority = await openTestAuthority({ schema });
    const memory = new MemoryAuthority();
    await seed(authority);
    await seed(memory);
    // A third invalid header, a text that is not JSON (only PostgreSQL holds it), and an index record that does not
    // parse: it hides nothing (every project's headers are read) and is not read.
    await authority.put("proj-0", "product", "prd_bad3", { v: 1 }, null);
    await adminQuery(`UPDATE "${schema}".records SET value = '{"v":1,' WHERE id = 'prd_bad3'`);
    await authority.put("_", "product-index", "prd_00", { v: 99 }, 1);
    const expected = await new ProductStore(memory, 10).listHeaders();
    expect(expected.headers).toHaveLength(60);
    const listed = await new ProductStore(authority, 10).listHeaders();
    expect(listed.headers).toEqual(expected.headers);
    expect(listed.headers.map((h) => JSON.stringify(h))).toEqual(expected.headers.map((h) => JSON.stringify(h)));
    expect(listed.dropped).toBe(3);

    // One project: its headers only, same order.
    const own = await new ProductStore(authority, 10).listHeaders({ projectId: "proj-1" });
    expect(own.headers).toEqual(expected.headers.filter((h) => h.projectId === "proj-1"));
    expect(own.dropped).toBe(1);
  });

  it("with a phase, reads only the headers whose text names it: the others' invalid ones are not counted", async () => {
    authority = await openTestAuthority({ schema });
    const memory = new MemoryAuthority();
    await seed(authority);
    await seed(memory);
    const expected = await new ProductStore(memory, 10).listHeaders({ phase: "executing" });
    expect(expected.headers).toHaveLength(20);
    expect(expected.dropped).toBe(2); // the memory authority reads every header
    const listed = await new ProductStore(authority, 10).listHeaders({ phase: "executing" });
    expect(listed.headers).toEqual(expected.headers);
    expect(listed.dropped).toBe(1); // prd_bad1 names the phase; prd_bad2 is not read
    expect((await new ProductStore(authority, 10).listHeaders({ phase: "failed" })).headers).toEqual([]);
  });
});
