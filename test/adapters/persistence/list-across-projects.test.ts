// listAcrossProjects (issue 32: product.list and the recovery pass on 100,000 stored products): one read of a kind in
// every project, equal to listValues of each project of listProjects; `containing` a literal pre-filter. On SQLite and
// PostgreSQL (the backends that have it), and the product store's recovery read on top of it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { SqliteAuthority } from "../../../src/adapters/persistence/sqlite-authority.js";
import type { RunStateAuthority } from "../../../src/core/ports.js";
import { ProductStore } from "../../../src/core/product/store.js";
import { listRecordValues } from "../../../src/core/indexed-records.js";
import { describePostgres, dropSchema, emptySchema, freshSchema, openTestAuthority } from "../../support/postgres.js";

type Across = RunStateAuthority & Required<Pick<RunStateAuthority, "listAcrossProjects" | "listProjects">>;

async function seed(authority: RunStateAuthority): Promise<void> {
  // Projects out of order, one with a `%`/`_` id, another kind, a record in the index project, a revision bumped.
  for (const [project, id, value] of [
    ["q", "b", { phase: "executing", n: 1 }],
    ["p", "a_%", { phase: "executing", n: 2 }],
    ["p", "c", { phase: "completed", n: 3, note: 'says "phase":"executing" in a string' }],
    ["zz", "a", { nested: { phase: "executing" } }],
    ["_", "x", { phase: "executing" }],
  ] as const) {
    await authority.put(project, "k", id, value, null);
  }
  await authority.put("p", "c", "c", { other: true }, null);
  await authority.put("p", "other", "a", { phase: "executing" }, null);
  await authority.put("q", "k", "b", { phase: "executing", n: 4 }, 1);
}

function registerAcross(name: string, open: () => Promise<Across>): void {
  describe(`listAcrossProjects: ${name}`, () => {
    let authority: Across | undefined;
    afterEach(async () => {
      await authority?.close();
      authority = undefined;
    });

    it("equals listValues of every project of listProjects, in project then id order", async () => {
      authority = await open();
      expect(await authority.listAcrossProjects("k")).toEqual([]);
      await seed(authority);
      const projects = await authority.listProjects();
      expect(projects).toEqual(["_", "p", "q", "zz"]);
      const expected = [];
      for (const projectId of projects) {
        for (const rec of await listRecordValues(authority, projectId, "k")) expected.push({ projectId, ...rec });
      }
      expect(await authority.listAcrossProjects("k")).toEqual(expected);
      expect((await authority.listAcrossProjects("k")).map((r) => [r.projectId, r.id, r.revision])).toEqual([
        ["_", "x", 1],
        ["p", "a_%", 1],
        ["p", "c", 1],
        ["q", "b", 2],
        ["zz", "a", 1],
      ]);
    });

    it("with containing, returns every record whose stored text holds it, matched literally", async () => {
      authority = await open();
      await seed(authority);
      const ids = async (containing: string): Promise<string[]> =>
        (await authority!.listAcrossProjects("k", { containing })).map((r) => `${r.projectId}/${r.id}`);
      // The string inside `note` is escaped in JSON text, so it does not match; a nested key does (a pre-filter).
      expect(await ids('"phase":"executing"')).toEqual(["_/x", "p/a_%", "q/b", "zz/a"]);
      expect(await ids('"n":4')).toEqual(["q/b"]);
      expect(await ids("%")).toEqual([]);
      expect(await ids("")).toHaveLength(5);
    });
  });
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const sqlite = (): SqliteAuthority => {
  const dir = mkdtempSync(join(tmpdir(), "acp-across-"));
  dirs.push(dir);
  return SqliteAuthority.open(join(dir, "state.db"));
};

registerAcross("sqlite", async () => sqlite());

const schema = freshSchema();
describePostgres("listAcrossProjects on PostgreSQL", () => {
  registerAcross("postgres", async () => (await emptySchema(schema), openTestAuthority({ schema })));
  afterEach(() => dropSchema(schema));
});

describe("ProductStore.headersInPhase (the recovery pass's read)", () => {
  const header = (productId: string, phase: string, createdAt: string) => ({
    v: 1,
    productId,
    projectId: productId.startsWith("a") ? "proj-a" : "proj-b",
    name: productId,
    phase,
    progress: { total: 1, completed: 0, running: 0, failed: 0, pending: 1 },
    createdAt,
    updatedAt: createdAt,
  });

  for (const [name, open] of [
    ["sqlite (filtered in the store)", sqlite],
    ["memory (no listAcrossProjects: every header read)", () => new MemoryAuthority()],
  ] as const) {
    it(`${name}: the executing headers of every project, oldest first, invalid ones skipped`, async () => {
      const authority: RunStateAuthority = open();
      const headers = [
        header("a1", "executing", "2026-01-03T00:00:00.000Z"),
        header("a2", "completed", "2026-01-01T00:00:00.000Z"),
        header("b1", "executing", "2026-01-02T00:00:00.000Z"),
        header("b2", "paused", "2026-01-04T00:00:00.000Z"),
      ];
      for (const h of headers) {
        await authority.put("_", "product-index", h.productId, { v: 1, projectId: h.projectId }, null);
        await authority.put(h.projectId, "product", h.productId, h, null);
      }
      await authority.put("proj-b", "product", "b3", { v: 1, phase: "executing", broken: true }, null);
      const store = new ProductStore(authority, 10);
      expect((await store.headersInPhase("executing")).map((h) => h.productId)).toEqual(["b1", "a1"]);
      const listed = await store.listHeaders();
      expect({ ids: listed.headers.map((h) => h.productId), dropped: listed.dropped }).toEqual({
        ids: ["a2", "b1", "a1", "b2"],
        dropped: 1,
      });
      await authority.close();
    });
  }
});
