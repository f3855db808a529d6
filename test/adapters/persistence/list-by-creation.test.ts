// listByCreation (issue 32: product.list pages at 100,000 stored products): a page of product records in creation
// order (the value's text createdAt, then id) after a position, on SQLite and PostgreSQL (their creation index), and
// the product store's page on top of it equal to the same page computed in memory (the memory authority, like a
// host, has no listByCreation). A stored text that is not JSON or lacks createdAt never fails a write.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { SqliteAuthority } from "../../../src/adapters/persistence/sqlite-authority.js";
import { AuthorityFailure, type RunStateAuthority } from "../../../src/core/ports.js";
import { listProductHeaders } from "../../../src/core/product/header-list.js";
import {
  adminQuery,
  describePostgres,
  dropSchema,
  emptySchema,
  freshSchema,
  openTestAuthority,
} from "../../support/postgres.js";

type ByCreation = RunStateAuthority & Required<Pick<RunStateAuthority, "listByCreation">>;

const header = (productId: string, projectId: string, createdAt: string, phase = "completed") => ({
  v: 1,
  productId,
  projectId,
  name: `says "createdAt":"0000" in a string`,
  phase,
  progress: { total: 1, completed: 1, running: 0, failed: 0, pending: 0 },
  createdAt,
  updatedAt: "2026-02-01T00:00:00.000Z",
});

/** 30 headers in 3 projects, created out of id order, some at one instant; other kinds and one without createdAt. */
async function seed(authority: RunStateAuthority): Promise<void> {
  for (let i = 0; i < 30; i += 1) {
    const id = `p${String(i).padStart(2, "0")}`;
    const project = ["x", "y", "z"][i % 3] ?? "x";
    const at = `2026-01-01T00:00:${String((i * 11) % 20).padStart(2, "0")}.000Z`;
    await authority.put("_", "product-index", id, { v: 1, projectId: project }, null);
    await authority.put(project, "product", id, header(id, project, at, i % 5 === 0 ? "executing" : "completed"), null);
  }
  await authority.put("x", "lease", "p00", { createdAt: "2000-01-01T00:00:00.000Z" }, null);
  await authority.put("x", "product", "nokey", { v: 1, productId: "nokey" }, null);
  // A header rewritten keeps its place (its key does not change).
  await authority.put("y", "product", "p01", header("p01", "y", "2026-01-01T00:00:11.000Z", "failed"), 1);
}

/** Every record of `kind` `product` with a createdAt, sorted as the port promises. */
async function expected(authority: ByCreation, projectId?: string) {
  const rows = [];
  for (const p of projectId ? [projectId] : ["x", "y", "z"]) {
    for (const info of await authority.list(p, "product")) {
      const rec = await authority.get(p, "product", info.id);
      const createdAt = (rec?.value as { createdAt?: unknown }).createdAt;
      if (rec && typeof createdAt === "string") rows.push({ projectId: p, id: info.id, ...rec, createdAt });
    }
  }
  return rows.sort((a, b) =>
    a.createdAt !== b.createdAt ? (a.createdAt < b.createdAt ? -1 : 1) : a.id < b.id ? -1 : 1,
  );
}

function registerByCreation(name: string, open: () => Promise<ByCreation>): void {
  describe(`listByCreation: ${name}`, () => {
    let authority: ByCreation | undefined;
    afterEach(async () => {
      await authority?.close();
      authority = undefined;
    });

    it("pages in creation order after a position, per project, with a containing pre-filter", async () => {
      const a = (authority = await open());
      expect(await a.listByCreation("product", { limit: 5 })).toEqual([]);
      await seed(a);
      for (const projectId of [undefined, "y"]) {
        const all = await expected(a, projectId);
        expect(all.length).toBeGreaterThan(5);
        const scope = projectId ? { projectId } : {};
        expect(await a.listByCreation("product", { limit: 1_000, ...scope })).toEqual(all);
        const walked = [];
        let after: { createdAt: string; id: string } | undefined;
        for (;;) {
          const page = await a.listByCreation("product", { limit: 4, ...scope, ...(after ? { after } : {}) });
          walked.push(...page);
          const last = page.at(-1);
          if (page.length < 4 || !last) break;
          after = { createdAt: last.createdAt, id: last.id };
        }
        expect(walked).toEqual(all);
      }
      const executing = await a.listByCreation("product", { limit: 100, containing: '"phase":"executing"' });
      expect(executing.map((r) => r.id)).toEqual(
        (await expected(a)).filter((r) => (r.value as { phase: string }).phase === "executing").map((r) => r.id),
      );
      // A position between two records at one instant: only the later id follows.
      const tie = await a.listByCreation("product", {
        limit: 2,
        after: { createdAt: "2026-01-01T00:00:02.000Z", id: "p02" },
      });
      expect(tie.map((r) => [r.createdAt, r.id])).toEqual([
        ["2026-01-01T00:00:02.000Z", "p22"],
        ["2026-01-01T00:00:03.000Z", "p13"],
      ]);
    });

    it("refuses another kind and a limit that is not a positive integer", async () => {
      const a = (authority = await open());
      await expect(a.listByCreation("lease", { limit: 1 })).rejects.toBeInstanceOf(AuthorityFailure);
      for (const limit of [0, -1, 1.5, Number.NaN]) {
        await expect(a.listByCreation("product", { limit })).rejects.toBeInstanceOf(AuthorityFailure);
      }
    });
  });
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const sqlitePath = (): string => {
  const dir = mkdtempSync(join(tmpdir(), "acp-by-creation-"));
  dirs.push(dir);
  return join(dir, "state.db");
};

registerByCreation("sqlite", async () => SqliteAuthority.open(sqlitePath()));

describe("listByCreation on SQLite: stored text that is not JSON", () => {
  it("writes and pages past a header whose text is not JSON (the creation key is NULL, not an error)", async () => {
    const path = sqlitePath();
    const a = SqliteAuthority.open(path);
    await seed(a);
    const db = new Database(path);
    db.prepare(
      "UPDATE records SET value = 'not json' WHERE project_id = 'x' AND kind = 'product' AND id = 'p03'",
    ).run();
    db.prepare(
      "INSERT INTO records (project_id, kind, id, value, revision, updated_at) VALUES ('x', 'product', 'raw', '{', 1, 'now')",
    ).run();
    db.close();
    const ids = (await a.listByCreation("product", { limit: 100 })).map((r) => r.id);
    expect(ids).toHaveLength(29);
    expect(ids).not.toContain("p03");
    await a.close();
  });
});

describe("listByCreation on SQLite: a version-1 file read read-only (the operator's commands never migrate)", () => {
  it("pages as a version-2 file does, and leaves the file at version 1", async () => {
    const path = sqlitePath();
    const a = SqliteAuthority.open(path);
    await seed(a);
    const pageOf = async (b: ByCreation, limit: number, projectId?: string) =>
      (await b.listByCreation("product", { limit, ...(projectId ? { projectId } : {}) })).map((r) => [
        r.id,
        r.createdAt,
      ]);
    const want = [await pageOf(a, 100), await pageOf(a, 4, "y")];
    const after = await a.listByCreation("product", {
      limit: 3,
      after: { createdAt: "2026-01-01T00:00:02.000Z", id: "p02" },
    });
    await a.close();
    // Back to what version 1 wrote: no creation column, no creation indexes.
    const db = new Database(path);
    db.exec(`DROP INDEX records_by_creation; DROP INDEX records_project_by_creation;
      ALTER TABLE records DROP COLUMN created_key; UPDATE meta SET value = '1' WHERE key = 'schema_version';`);
    db.close();
    const old = SqliteAuthority.open(path, { readOnly: true });
    expect([await pageOf(old, 100), await pageOf(old, 4, "y")]).toEqual(want);
    expect(
      await old.listByCreation("product", { limit: 3, after: { createdAt: "2026-01-01T00:00:02.000Z", id: "p02" } }),
    ).toEqual(after);
    await old.close();
    const check = new Database(path, { readonly: true });
    expect(check.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe("1");
    check.close();
  });

  it("refuses a read-only open of a file of a newer version, or of version 0", async () => {
    for (const version of ["0", "999"]) {
      const path = sqlitePath();
      await SqliteAuthority.open(path).close();
      const db = new Database(path);
      db.prepare("UPDATE meta SET value = ? WHERE key = 'schema_version'").run(version);
      db.close();
      expect(() => SqliteAuthority.open(path, { readOnly: true })).toThrow(
        new RegExp(`has schema version ${version}, not 1–\\d+; open it once with this acp-orchestrator's server`),
      );
    }
  });
});

const schema = freshSchema();
describePostgres("listByCreation on PostgreSQL", () => {
  registerByCreation("postgres", async () => (await emptySchema(schema), openTestAuthority({ schema })));
  afterEach(() => dropSchema(schema));

  it("writes a header whose text is not JSON, and plans each shape on the creation index", async () => {
    await emptySchema(schema);
    const a = await openTestAuthority({ schema });
    try {
      await seed(a);
      await adminQuery(`UPDATE "${schema}".records SET value = 'not json' WHERE kind = 'product' AND id = 'p03'`);
      expect((await a.listByCreation("product", { limit: 100 })).map((r) => r.id)).toHaveLength(29);
      for (const where of ["", "AND project_id = 'x'"]) {
        const plan = await adminQuery<{ "QUERY PLAN": string }>(
          `SET enable_seqscan = off; EXPLAIN SELECT id FROM "${schema}".records WHERE kind = 'product'
           AND created_key IS NOT NULL ${where} AND (created_key, id) > ('a', 'b') ORDER BY created_key, id LIMIT 5`,
        );
        expect(JSON.stringify(plan)).toMatch(/records_(project_)?by_creation/);
      }
    } finally {
      await a.close();
    }
  });
});

describe("the product store's page (header-list.ts): the creation index and the in-memory slice agree", () => {
  it("gives the same pages on SQLite (listByCreation) and on memory (every header sorted)", async () => {
    const sqlite = SqliteAuthority.open(sqlitePath());
    const memory = new MemoryAuthority();
    for (const a of [sqlite, memory]) await seed(a);
    for (const query of [{}, { projectId: "z" }, { phase: "executing" as const }]) {
      const pages: string[][][] = [];
      for (const a of [sqlite, memory]) {
        const walked: string[][] = [];
        let after: { createdAt: string; productId: string } | undefined;
        do {
          const page = await listProductHeaders(a, { ...query, page: { limit: 3, ...(after ? { after } : {}) } });
          walked.push(page.headers.map((h) => h.productId));
          after = page.next;
        } while (after);
        pages.push(walked);
      }
      expect(pages[0]?.flat()).toEqual(pages[1]?.flat());
      expect(pages[0]?.flat()).toEqual((await listProductHeaders(memory, query)).headers.map((h) => h.productId));
    }
    await sqlite.close();
  });
});
