/**
 * `product.list` pages (issue 32; PROTOCOL.md section 5, `limit` / `cursor` / `nextCursor`) through the built server
 * over real stdio, on its three kinds of store: SQLite (the creation index of schema version 2), the host authority
 * (the test host's store: every header read and sliced in memory) and PostgreSQL (the index of schema version 3).
 *
 * The store is seeded with product headers as the product store writes them (header `product/<id>` in its project,
 * index record `product-index/<id>` in `_`), created at known times (two at the same instant: the id breaks the tie)
 * plus one header that does not parse. Walking the pages must give exactly the unpaged list, in the same order, even
 * when a product is planned between two pages (it is the newest, so it comes last); a cursor the server did not give
 * and a `limit` out of bounds are `-32602` with one sentence naming the parameter.
 */
import { describe, expect, it } from "vitest";
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import type { RunStateAuthority } from "../../src/core/ports.js";
import { describePostgres, dropSchema, freshSchema, openTestAuthority, urlWithSchema } from "../support/postgres.js";
import { runCli } from "../support/cli-run.js";
import { startServer, tempDir } from "../support/server-process.js";
import { TestHost, startHostedServer } from "../support/test-host.js";
import { join } from "node:path";

interface Listed {
  products: { productId: string; projectId: string; phase: string; updatedAt: string }[];
  dropped: number;
  nextCursor?: string;
}
type Request = <T>(method: string, params?: unknown) => Promise<T>;

const SEEDED = 23;

/** Seeds `SEEDED` headers in two projects (creation times shuffled, two equal) and one header that does not parse. */
async function seed(authority: RunStateAuthority): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < SEEDED; i += 1) {
    const n = (i * 7) % SEEDED; // shuffled creation order
    const minute = Math.min(n, SEEDED - 2); // the last two share one instant
    const productId = `prd_seed${String(i).padStart(2, "0")}`;
    const projectId = i % 3 === 0 ? "proj-b" : "proj-a";
    const at = `2026-01-01T00:${String(minute).padStart(2, "0")}:00.000Z`;
    const phase = i % 4 === 0 ? "failed" : "completed";
    await authority.put("_", "product-index", productId, { v: 1, projectId }, null);
    await authority.put(
      projectId,
      "product",
      productId,
      {
        v: 1,
        productId,
        projectId,
        name: `Seeded ${i}`,
        phase,
        progress: {
          total: 1,
          completed: phase === "completed" ? 1 : 0,
          running: 0,
          failed: phase === "failed" ? 1 : 0,
          pending: 0,
        },
        createdAt: at,
        updatedAt: at,
      },
      null,
    );
    ids.push(productId);
  }
  await authority.put("_", "product-index", "prd_broken", { v: 1, projectId: "proj-a" }, null);
  await authority.put(
    "proj-a",
    "product",
    "prd_broken",
    { v: 1, productId: "prd_broken", createdAt: "2026-01-01" },
    null,
  );
  return ids;
}

/** Every page of `limit`, following `nextCursor`; `between` runs once after the first page. */
async function walk(
  request: Request,
  params: Record<string, unknown>,
  limit: number,
  between?: () => Promise<void>,
): Promise<{ ids: string[]; pages: Listed[] }> {
  const pages: Listed[] = [];
  let cursor: string | undefined;
  do {
    const page = await request<Listed>("product.list", { ...params, limit, ...(cursor ? { cursor } : {}) });
    expect(page.products.length).toBeLessThanOrEqual(limit);
    pages.push(page);
    cursor = page.nextCursor;
    if (pages.length === 1) await between?.();
  } while (cursor !== undefined && pages.length < 100);
  return { ids: pages.flatMap((p) => p.products.map((x) => x.productId)), pages };
}

/** The checks every store must pass, on a server whose store `seed` filled. */
async function checkPaging(request: Request, cwd: string): Promise<void> {
  const all = await request<Listed>("product.list", {});
  expect(all.nextCursor).toBeUndefined();
  expect(all.products).toHaveLength(SEEDED);
  expect(all.dropped).toBeGreaterThanOrEqual(1);
  const order = all.products.map((p) => [p.updatedAt, p.productId].join(" "));
  expect(order).toEqual([...order].sort()); // oldest first, the id breaking the tie

  // A product planned between two pages is the newest: it comes last, nothing is skipped or repeated.
  let planned = "";
  const { ids, pages } = await walk(request, {}, 5, async () => {
    planned = (await request<{ productId: string }>("product.plan", { goal: "- Added while paging", cwd })).productId;
  });
  expect(ids).toEqual([...all.products.map((p) => p.productId), planned]);
  expect(pages.at(-1)?.nextCursor).toBeUndefined();
  expect(pages.slice(0, -1).every((p) => p.nextCursor !== undefined)).toBe(true);
  expect(pages.reduce((n, p) => n + p.dropped, 0)).toBeGreaterThanOrEqual(1);

  // One page holding everything (the broken header takes a place where the store pages) has no nextCursor; a
  // filtered walk equals the filtered list.
  const every = await request<Listed>("product.list", { limit: SEEDED + 2 });
  expect(every.products.map((p) => p.productId)).toEqual(ids);
  expect(every.nextCursor).toBeUndefined();
  for (const filter of [{ projectId: "proj-b" }, { phase: "failed" }, { projectId: "proj-a", phase: "completed" }]) {
    const listed = (await request<Listed>("product.list", filter)).products.map((p) => p.productId);
    expect(listed.length).toBeGreaterThan(0);
    expect((await walk(request, filter, 2)).ids).toEqual(listed);
  }

  // A cursor alone pages by the largest limit.
  const first = await request<Listed>("product.list", { limit: 1 });
  const rest = await request<Listed>("product.list", { cursor: first.nextCursor });
  expect([...first.products, ...rest.products].map((p) => p.productId)).toEqual(ids);

  for (const [params, text] of [
    [{ cursor: "not a cursor!" }, "Invalid params: cursor is not a cursor that product.list returned."],
    [{ cursor: btoa("[1,2]") }, "Invalid params: cursor is not a cursor that product.list returned."],
    [{ cursor: "" }, "Invalid params: cursor is not a cursor that product.list returned."],
    [{ limit: 0 }, "Invalid params: limit"],
    [{ limit: 1001 }, "Invalid params: limit"],
    [{ limit: 2.5 }, "Invalid params: limit"],
  ] as const) {
    await expect(request("product.list", params)).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining(text) as unknown,
    });
  }
}

describe("product.list pages over stdio", () => {
  it("on SQLite: pages equal the unpaged list, a product added meanwhile comes last, bad cursors and limits refused", async () => {
    const statePath = join(tempDir(), "state.db");
    const seeding = SqliteAuthority.open(statePath);
    await seed(seeding);
    await seeding.close();
    const cwd = tempDir("acp-orch-ws-");
    const server = await startServer({ statePath, cwd });
    await checkPaging((m, p) => server.request(m, p), cwd);
    const unpaged = await server.request<Listed>("product.list", {});
    expect(await server.close()).toBe(0);

    // The CLI's list pages the same way and says how to get the next page (docs/OPERATOR.md).
    const listed: string[] = [];
    let args = ["list", "--state", statePath, "--limit", "10"];
    for (let n = 0; n < 10; n += 1) {
      const r = await runCli(args, cwd);
      expect(r.code, r.stderr).toBe(0);
      listed.push(...[...r.stdout.matchAll(/^(prd_\w+) /gm)].map((m) => m[1] ?? ""));
      const next = /^More products: acp-orchestrator list --limit 10 --cursor (\S+) \(and the same --state\)$/m.exec(
        r.stdout,
      );
      if (!next) break;
      args = ["list", "--state", statePath, "--limit", "10", "--cursor", next[1] ?? ""];
    }
    expect(listed).toEqual(unpaged.products.map((p) => p.productId));
    const json = JSON.parse(
      (await runCli(["list", "--state", statePath, "--limit", "3", "--json"], cwd)).stdout,
    ) as Listed;
    // The broken header takes one of the 3 places of the first page (it is read, then dropped).
    expect(json.products.map((p) => p.productId)).toEqual(listed.slice(0, 2));
    expect(typeof json.nextCursor).toBe("string");
    for (const [bad, text] of [
      [["--limit", "0"], "--limit"],
      [["--limit", "10", "--cursor", "nope!"], "--cursor"],
      [["--cursor", json.nextCursor ?? ""], "--cursor"],
    ] as const) {
      const r = await runCli(["list", "--state", statePath, ...bad], cwd);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`The option ${text} of "list"`);
    }
  }, 90_000);

  it("on the host authority: the same pages, read from the host's store and sliced by the server", async () => {
    const store = new MemoryAuthority();
    await seed(store);
    const cwd = tempDir("acp-orch-ws-");
    const server = await startHostedServer(new TestHost({ store }), { cwd });
    await checkPaging((m, p) => server.request(m, p), cwd);
    expect(await server.close()).toBe(0);
  }, 60_000);
});

const schema = freshSchema();
describePostgres("product.list pages over stdio on PostgreSQL", () => {
  it("pages equal the unpaged list, a product added meanwhile comes last, bad cursors and limits refused", async () => {
    const seeding = await openTestAuthority({ schema });
    try {
      await seed(seeding);
    } finally {
      await seeding.close();
    }
    const cwd = tempDir("acp-orch-ws-");
    const server = await startServer({ statePath: urlWithSchema(schema), cwd, env: { ACP_ORCHESTRATOR_STATE: "" } });
    try {
      await checkPaging((m, p) => server.request(m, p), cwd);
      expect(await server.close()).toBe(0);
    } finally {
      await dropSchema(schema);
    }
  }, 60_000);
});
