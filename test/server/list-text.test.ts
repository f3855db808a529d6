// product.list without a page written from the stored header texts (issue 32: 100,000 stored products): on SQLite and
// PostgreSQL the answer's bytes equal serializeJson of the same answer built as objects, on a mixed set (headers in
// the written form, names that need escapes or hold surrogate pairs or line separators, members out of order or extra,
// executing products with an owner, headers that do not parse and a text that is not JSON: dropped, never sent).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, expect, it } from "vitest";
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import type { RunStateAuthority } from "../../src/core/ports.js";
import {
  isCut,
  listProductEntries,
  listProducts,
  streamProductEntries,
  type ListSources,
} from "../../src/core/product/product-list.js";
import { ProductStore } from "../../src/core/product/store.js";
import { serializeJson } from "../../src/server/json-text.js";
import { listText, streamedListText } from "../../src/server/list-text.js";
import { adminQuery, describePostgres, dropSchema, freshSchema, openTestAuthority } from "../support/postgres.js";

const PHASES = ["executing", "completed", "paused", "failed"] as const;
const NAMES = ["Plain", "café", "製品", "😀 emoji", 'say "hi"', "back\\slash", "line\u2028sep", "tab\there", ""];

/** 36 headers in 2 projects (ties in creation time), 6 odd but valid ones, 3 invalid ones; each with its index record. */
async function seed(authority: RunStateAuthority): Promise<void> {
  const headers: Record<string, unknown>[] = Array.from({ length: 36 }, (_, i) => ({
    v: 1,
    productId: `prd_${String((i * 7) % 36).padStart(2, "0")}`,
    projectId: `proj-${i % 2}`,
    name: `${NAMES[i % NAMES.length] as string} ${i}`,
    phase: PHASES[i % PHASES.length],
    progress: { total: 4, completed: i % 4, running: 0, failed: 0, pending: 4 - (i % 4) },
    createdAt: `2026-01-01T00:00:${String(30 - (i % 12)).padStart(2, "0")}.000Z`,
    updatedAt: "2026-01-02T00:00:00.000Z",
    ...(i % 5 === 0 ? { sessionId: `s${i}` } : {}),
  }));
  const base = headers[0] as Record<string, unknown>;
  headers.push(
    { ...base, productId: "prd_extra", extra: { nested: true } },
    Object.fromEntries(Object.entries({ ...base, productId: "prd_reversed" }).reverse()),
    {
      ...base,
      productId: "prd_big",
      progress: { total: 1234567890123456, completed: 0, running: 0, failed: 0, pending: 0 },
    },
    { ...base, productId: "prd_sess", sessionId: "" },
    { ...base, productId: "prd_ls", name: "\u2029", phase: "executing" },
    { ...base, productId: "prd_lone", name: "\ud800" },
  );
  for (const h of headers) {
    await authority.put("_", "product-index", h.productId as string, { v: 1, projectId: h.projectId }, null);
    await authority.put(h.projectId as string, "product", h.productId as string, h, null);
  }
  await authority.put("proj-1", "product", "prd_bad1", { v: 1, phase: "executing", broken: true }, null);
  await authority.put(
    "proj-0",
    "product",
    "prd_bad2",
    { ...base, productId: "prd_bad2", progress: { total: -1 } },
    null,
  );
  await authority.put("proj-0", "product", "prd_bad3", { v: 1 }, null); // made not JSON below
}

/** What product-list.ts reads: this store, nothing in memory, and an owner for some executing products. */
function sources(authority: RunStateAuthority): ListSources {
  return {
    store: new ProductStore(authority, 10),
    loaded: () => undefined,
    ownerOf: (_projectId, productId) =>
      Promise.resolve(
        productId.endsWith("0") || productId === "prd_ls"
          ? { ownerId: `srv-${productId}`, expiresAt: "2026-01-03T00:00:00.000Z", live: productId !== "prd_ls" }
          : undefined,
      ),
  };
}

/** Every query shape: all, one project, one phase, both. */
const QUERIES: [string | undefined, (typeof PHASES)[number] | undefined][] = [
  [undefined, undefined],
  ["proj-1", undefined],
  [undefined, "executing"],
  ["proj-0", "completed"],
];

/**
 * Both answers written from the texts (all at once; and a batch at a time in the store's order where it has one:
 * `ordered`) equal the objects' answer, byte for byte.
 */
async function expectSameBytes(authority: RunStateAuthority, ordered: boolean): Promise<void> {
  const s = sources(authority);
  for (const [projectId, phase] of QUERIES) {
    const entries = await listProductEntries(s, projectId, phase);
    expect(entries).toBeDefined();
    if (entries === undefined) return;
    const objects = await listProducts(s, projectId, phase);
    const expected = Buffer.from(serializeJson(objects), "utf8");
    expect(listText(entries.products, entries.dropped).bytes.toString("utf8")).toBe(expected.toString("utf8"));
    expect(listText(entries.products, entries.dropped).bytes.equals(expected)).toBe(true);
    const streamed = await streamedListText((sink) => streamProductEntries(s, projectId, phase, sink));
    expect(streamed !== undefined).toBe(ordered);
    if (streamed !== undefined) expect(streamed.text).toBe(expected.toString("utf8"));
    expect(entries.dropped).toBe(objects.dropped);
    if (projectId === undefined && phase === undefined) {
      // Both paths were taken: entries cut from the text, and objects (odd texts, executing products).
      expect(entries.products.filter((p) => isCut(p)).length).toBeGreaterThanOrEqual(10);
      expect(entries.products.filter((p) => !isCut(p)).length).toBeGreaterThanOrEqual(10);
      expect(objects.products).toHaveLength(42);
      expect(objects.dropped).toBe(3);
      // The invalid headers are not sent.
      expect(expected.toString("utf8")).not.toMatch(/prd_bad/);
      expect(expected.toString("utf8")).toMatch(/"owner":\{"ownerId":"srv-prd_ls"/);
    }
  }
}

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

it("SQLite: the answer written from the stored texts is byte for byte the answer built as objects", async () => {
  dir = mkdtempSync(join(tmpdir(), "acp-list-text-"));
  const path = join(dir, "state.db");
  const authority = SqliteAuthority.open(path);
  try {
    await seed(authority);
    const db = new Database(path);
    db.prepare("UPDATE records SET value = '{\"v\":1,' WHERE id = 'prd_bad3'").run();
    db.close();
    await expectSameBytes(authority, false);
  } finally {
    await authority.close();
  }
});

it("memory: no stored texts to read, so the objects path answers", async () => {
  const memory = new MemoryAuthority();
  await seed(memory);
  expect(await listProductEntries(sources(memory))).toBeUndefined();
});

const schema = freshSchema();
describePostgres("product.list written from the stored texts on PostgreSQL", () => {
  afterEach(() => dropSchema(schema));

  it("is byte for byte the answer built as objects", async () => {
    const authority = await openTestAuthority({ schema });
    try {
      await seed(authority);
      await adminQuery(`UPDATE "${schema}".records SET value = '{"v":1,' WHERE id = 'prd_bad3'`);
      await expectSameBytes(authority, true);
    } finally {
      await authority.close();
    }
  });
});
