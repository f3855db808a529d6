// listTextsByCreation on PostgreSQL and the unpaged product.list read on top of it (issue 32: product.list of 100,000
// stored products under 1 s): the stored texts in one snapshot, those without a creation key first, then the others
// by creation key and id through a cursor, a batch at a time. The headers streamed equal listHeaderEntries' (sorted
// in memory), with the same dropped, when the rows arrive in several batches with invalid headers among them; a
// valid header out of place (no creation key, a record id that is not its productId) makes the read say so, and the
// answer then comes from the sorted read, byte for byte the objects' answer.
import pg from "pg";
import { afterEach, expect, it } from "vitest";
import type { PostgresAuthority } from "../../../src/adapters/persistence/postgres-authority.js";
import { readTextsByCreation } from "../../../src/adapters/persistence/postgres-creation.js";
import type { CreationTexts, RunStateAuthority } from "../../../src/core/ports.js";
import type { EntryOrHeader } from "../../../src/core/product/header-list.js";
import { streamHeaderEntries } from "../../../src/core/product/header-stream.js";
import {
  listProductEntries,
  listProducts,
  streamProductEntries,
  type ListSources,
} from "../../../src/core/product/product-list.js";
import { ProductStore } from "../../../src/core/product/store.js";
import { serializeJson } from "../../../src/server/json-text.js";
import { listText, streamedListText } from "../../../src/server/list-text.js";
import {
  adminQuery,
  describePostgres,
  dropSchema,
  freshSchema,
  openTestAuthority,
  TEST_PG_URL,
} from "../../support/postgres.js";

/** 20 headers in 2 projects, creation times out of id order with ties; a name that needs an escape (not cut). */
function headers() {
  return Array.from({ length: 20 }, (_, i) => ({
    v: 1,
    productId: `prd_${String((i * 7) % 20).padStart(2, "0")}`,
    projectId: `proj-${i % 2}`,
    name: i === 4 ? 'say "hi"' : `Product ${i}`,
    phase: i % 3 === 0 ? "executing" : "completed",
    progress: { total: 2, completed: i % 2, running: 0, failed: 0, pending: 2 - (i % 2) },
    createdAt: `2026-01-01T00:00:${String(40 - (i % 8)).padStart(2, "0")}.000Z`,
    updatedAt: "2026-01-02T00:00:00.000Z",
  }));
}

async function seed(authority: RunStateAuthority): Promise<void> {
  for (const h of headers()) await authority.put(h.projectId, "product", h.productId, h, null);
  // Invalid headers in the middle of creation order (a creation key between the others'), and without a key.
  const middle = { ...headers()[0], createdAt: "2026-01-01T00:00:36.000Z" };
  await authority.put("proj-0", "product", "prd_bad1", { ...middle, productId: "prd_bad1", progress: {} }, null);
  await authority.put("proj-1", "product", "prd_bad2", { ...middle, productId: "prd_bad2", phase: "gone" }, null);
  await authority.put("proj-1", "product", "prd_bad3", { v: 1, phase: "executing" }, null);
  await authority.put("_", "product", "prd_index", { ...middle, productId: "prd_index" }, null);
}

/** The authority with its ordered read in batches of `batch` rows (a pool of its own on the same schema). */
function inBatches(authority: PostgresAuthority, schema: string, batch: number) {
  const pool = new pg.Pool({ connectionString: TEST_PG_URL, max: 2, options: `-c search_path="${schema}"` });
  const batches: CreationTexts[] = [];
  const view = Object.create(authority) as RunStateAuthority;
  view.listTextsByCreation = (kind, options, onBatch) =>
    readTextsByCreation(pool, kind, options, (b) => (batches.push(b), onBatch(b)), batch);
  return { view, batches, end: () => pool.end() };
}

/** What product-list.ts reads: nothing in memory, no owners. */
function sources(authority: RunStateAuthority): ListSources {
  return { store: new ProductStore(authority, 10), loaded: () => undefined, ownerOf: () => Promise.resolve(undefined) };
}

const idsOf = (hs: readonly EntryOrHeader[]) => hs.map((h) => `${h.createdAt} ${h.productId}`);

const schema = freshSchema();
describePostgres("listTextsByCreation and product.list read in creation order on PostgreSQL", () => {
  let authority: PostgresAuthority | undefined;
  afterEach(async () => {
    await authority?.close();
    authority = undefined;
    await dropSchema(schema);
  });

  it("streams every header in list order a few at a time, counting the invalid ones among them", async () => {
    authority = await openTestAuthority({ schema });
    await seed(authority);
    await adminQuery(`UPDATE "${schema}".records SET value = 'not json' WHERE id = 'prd_bad3'`);
    const { view, batches, end } = inBatches(authority, schema, 3);
    try {
      for (const query of [{}, { projectId: "proj-1" }, { phase: "executing" as const }]) {
        batches.length = 0;
        const streamed: EntryOrHeader[] = [];
        const read = await streamHeaderEntries(view, query, (hs) => void streamed.push(...hs));
        const sorted = await new ProductStore(authority, 10).listHeaderEntries(query);
        expect(idsOf(streamed)).toEqual(idsOf(sorted?.headers ?? []));
        expect(read?.dropped).toBe(sorted?.dropped);
        if (Object.keys(query).length === 0) {
          expect(streamed).toHaveLength(20);
          expect(read?.dropped).toBe(3);
          // The text without a creation key came first, alone; then the others, 3 at a time, in key then id order.
          expect(batches[0]).toEqual({ keyed: false, texts: ["not json"], ids: ["prd_bad3"] });
          const keyed = batches.slice(1);
          expect(keyed.every((b) => b.keyed && b.texts.length <= 3)).toBe(true);
          expect(keyed.length).toBe(Math.ceil(22 / 3));
          const rows = keyed.flatMap((b) => b.texts.map((t) => `${/"createdAt":"([^"]*)"/.exec(t)?.[1]} ${t}`));
          expect(rows).toEqual([...rows].sort());
          // The invalid ones were read between valid ones, and neither of them was handed on.
          const bad = keyed.findIndex((b) => b.ids.includes("prd_bad1"));
          expect(bad).toBeGreaterThan(0);
          expect(bad).toBeLessThan(keyed.length - 1);
          expect(streamed.map((h) => h.productId)).not.toContain("prd_bad1");
          expect(streamed.map((h) => h.productId)).not.toContain("prd_index");
        }
      }
    } finally {
      await end();
    }
  });

  it("says a header is out of place, and the answer then comes from the sorted read", async () => {
    authority = await openTestAuthority({ schema });
    await seed(authority);
    const base = headers()[1];
    const cases: [string, string][] = [
      // Pretty-printed: valid, but no creation key the store can index.
      [
        "prd_pretty",
        JSON.stringify({ ...base, productId: "prd_pretty", createdAt: "2026-01-01T00:00:01.000Z" }, null, 1),
      ],
      // Stored under another record id than its productId (ordered by the id, listed by the productId).
      ["prd_zzz", JSON.stringify({ ...base, productId: "prd_aaa", createdAt: "2026-01-01T00:00:35.000Z" })],
    ];
    for (const [id, text] of cases) {
      await authority.put("proj-0", "product", id, { v: 1 }, null);
      await adminQuery(`UPDATE "${schema}".records SET value = $1 WHERE id = $2`, [text, id]);
      const s = sources(authority);
      expect(await streamHeaderEntries(authority, {}, () => undefined)).toBeUndefined();
      expect(await streamProductEntries(s, undefined, undefined, () => undefined)).toBeUndefined();
      expect(await streamedListText((sink) => streamProductEntries(s, undefined, undefined, sink))).toBeUndefined();
      const objects = await listProducts(s);
      expect(objects.products.map((p) => p.productId)).toContain(id === "prd_zzz" ? "prd_aaa" : id);
      const sorted = await listProductEntries(s);
      expect(sorted && listText(sorted.products, sorted.dropped).text).toBe(serializeJson(objects));
      await adminQuery(`DELETE FROM "${schema}".records WHERE id = $1`, [id]);
    }
    // Without them the ordered read answers again.
    expect(await streamHeaderEntries(authority, {}, () => undefined)).toEqual({ dropped: 3 });
  });

  it("looks up executing products' owners after the read, so one connection is enough", async () => {
    // The ordered read holds a pooled connection until its last batch: an owner looked up during it, on a pool of
    // one, would wait for that connection until the pool gave up.
    authority = await openTestAuthority({ schema, maxConnections: 1, connectionTimeoutMs: 3_000 });
    await seed(authority);
    const a = authority;
    const s: ListSources = {
      ...sources(a),
      ownerOf: async (projectId, productId) => {
        const lease = await a.get(projectId, "product", productId);
        return lease ? { ownerId: `srv-${productId}`, expiresAt: "2026-01-03T00:00:00.000Z", live: true } : undefined;
      },
    };
    const streamed = await streamedListText((sink) => streamProductEntries(s, undefined, undefined, sink));
    expect(streamed?.text).toBe(serializeJson(await listProducts(s)));
    expect(streamed?.text).toMatch(/"owner":\{"ownerId":"srv-prd_00"/);
  });

  it("rejects with the connection's failure when it is cut between two batches, handing on no batch after it", async () => {
    // The FETCHes gather their rows themselves (postgres-creation.ts FetchTexts): a failure must still reach the read.
    authority = await openTestAuthority({ schema });
    await seed(authority);
    const app = `acp-cut-${process.pid}`;
    const pool = new pg.Pool({
      connectionString: TEST_PG_URL,
      max: 1,
      application_name: app,
      options: `-c search_path="${schema}"`,
    });
    pool.on("connect", (client) => client.on("error", () => undefined)); // the cut, when no statement is in flight
    const seen: CreationTexts[] = [];
    try {
      const read = readTextsByCreation(
        pool,
        "product",
        { exceptProjectId: "_" },
        async (b) => {
          seen.push(b);
          if (seen.filter((x) => x.keyed).length === 1)
            await adminQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [
              app,
            ]);
        },
        3,
      );
      await expect(read).rejects.toBeInstanceOf(Error);
      // 22 keyed rows in batches of 3: the first, perhaps the one already fetched, and none after the failure.
      expect(seen.filter((b) => b.keyed).length).toBeLessThanOrEqual(2);
    } finally {
      await pool.end();
    }
  });

  it("refuses another kind than product, and reads nothing then", async () => {
    authority = await openTestAuthority({ schema });
    const seen: CreationTexts[] = [];
    await expect(
      authority.listTextsByCreation("lease", { exceptProjectId: "_" }, (b) => void seen.push(b)),
    ).rejects.toThrow(/product records only/);
    expect(seen).toEqual([]);
  });
});
