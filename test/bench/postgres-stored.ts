/**
 * Part 3 of the PostgreSQL figures (issue 32, "Scale"): a database holding many stored products, and how long a
 * `serve --recover` start-up and a `product.list` take on it.
 *
 * The products are made fast but real: one product of 10 instant tasks runs to completion through the product service
 * on the schema (every record and event the real code writes), then its rows (records, streams, events: those whose
 * id or stream names the product) are cloned in SQL with the product id suffixed `-<n>`, so every stored product is a
 * loadable copy of a real one. The server is the built CLI as a real subprocess (`serve --state <url> --recover
 * --log-level debug`); start-up is spawn → `initialize` answered and the first recovery pass done (the fleet's
 * "recovery pass done" debug line on stderr), whichever comes last.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type pg from "pg";
import { PostgresAuthority } from "../../src/adapters/persistence/postgres-authority.js";
import { unpackTexts } from "../../src/adapters/persistence/postgres-packed.js";
import { fleetWatches } from "../../src/core/product/fleet.js";
import { INITIALIZE_PARAMS } from "./overhead.js";
import { randomDag } from "./support/dag.js";
import { benchService } from "./support/in-process.js";
import { NdjsonProcess } from "./support/ndjson-process.js";
import { SERVER_CLI } from "./support/paths.js";

/** Limit of both measurements (issue 32). */
export const STORED_TARGET_MS = 1_000;

/** One `serve --recover` process on the stored products. */
export interface StoredRun {
  /** Spawn → `initialize` answered. */
  initializeMs: number;
  /** Spawn → the first recovery pass done. */
  recoveredMs: number;
  /**
   * One `product.list` of all products: request sent → the last byte of its answer received (the server's latency, as
   * every JSON-RPC round-trip figure here measures it; the target applies to this one).
   */
  listMs: number;
  /** The same request: sent → its answer parsed by the bench client (adds the client's `JSON.parse` of ~22 MB). */
  listParsedMs: number;
  /** One `product.list` with `phase: "executing"` (none of the stored products is), sent → last byte received. */
  listExecutingMs: number;
  /**
   * One `product.list` page of `LIST_PAGE` products (`limit`), the first one, then the next by its `nextCursor`, each
   * sent → last byte received.
   */
  listPageMs: number;
  listNextPageMs: number;
}

/** The page size measured (issue 32: `product.list` pages). */
export const LIST_PAGE = 100;

export interface StoredFigure extends StoredRun {
  products: number;
  /** 0 when an already seeded schema was reused (`--stored-schema`). */
  seedMs: number;
  listed: number;
  /** Every run, in order; the figure's own fields are their medians. */
  runs: StoredRun[];
  /** The same start-up on an empty schema (the floor): median of as many runs. */
  emptyStartupMs: number;
}

const fmt = (n: number, digits = 0): string =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** Runs one product of 10 instant tasks to completion on `url`; returns its id. */
async function templateProduct(url: string): Promise<string> {
  const authority = await PostgresAuthority.open(url, { announce: fleetWatches });
  try {
    const b = benchService(authority, randomDag({ tasks: 10, width: 10 }), { maxParallelTasks: 4 });
    const { productId } = await b.service.plan({ goal: "Stored", cwd: "/tmp/bench", projectId: "bench" });
    await b.notifier.next("product.planReady", (p) => p.productId === productId);
    const completed = b.notifier.next("product.completed", (p) => p.productId === productId);
    await b.service.confirm(productId, {});
    await completed;
    return productId;
  } finally {
    await authority.close();
  }
}

/**
 * Clones the template's rows `copies` times in `schema`, in batches of 10,000 copies per statement. The template's
 * packed event rows (schema version 4) are first rewritten in the plain text form (postgres-events.ts), which SQL can
 * edit and the server still reads, so the copies hold the text form.
 */
async function cloneProducts(admin: pg.Client, schema: string, template: string, copies: number): Promise<void> {
  const s = `"${schema}"`;
  const packed = await admin.query<{ stream: string; seq: string; n: number; packed: Buffer }>(
    `SELECT stream, seq, n, packed FROM ${s}.events WHERE packed IS NOT NULL AND strpos(stream, $1) > 0`,
    [template],
  );
  for (const row of packed.rows) {
    const texts = unpackTexts(row.packed, row.n);
    await admin.query(`UPDATE ${s}.events SET packed = NULL, event = $3, batch = $4 WHERE stream = $1 AND seq = $2`, [
      row.stream,
      row.seq,
      texts.length === 1 ? texts[0] : null,
      texts.length === 1 ? null : texts,
    ]);
  }
  for (let from = 1; from <= copies; from += 10_000) {
    const to = Math.min(copies, from + 9_999);
    const args = [template, from, to];
    const g = "generate_series($2::int, $3::int) AS g";
    const sub = (col: string): string => `replace(${col}, $1, $1 || '-' || g)`;
    // The template's rows only: a copy's keys hold the template id too (followed by `-<n>`).
    const mine = (col: string): string => `strpos(${col}, $1) > 0 AND strpos(${col}, $1 || '-') = 0`;
    await admin.query(
      `INSERT INTO ${s}.records (project_id, kind, id, value, revision, updated_at)
       SELECT project_id, kind, ${sub("id")}, ${sub("value")}, revision, updated_at
       FROM ${s}.records, ${g} WHERE ${mine("id")}`,
      args,
    );
    await admin.query(
      `INSERT INTO ${s}.streams (project_id, stream, last_seq)
       SELECT project_id, ${sub("stream")}, last_seq FROM ${s}.streams, ${g} WHERE ${mine("stream")}`,
      args,
    );
    await admin.query(
      `INSERT INTO ${s}.events (project_id, stream, seq, n, event, batch)
       SELECT project_id, ${sub("stream")}, seq, n, ${sub("event")},
              (SELECT array_agg(${sub("t")} ORDER BY o) FROM unnest(batch) WITH ORDINALITY AS u(t, o))
       FROM ${s}.events, ${g} WHERE ${mine("stream")}`,
      args,
    );
  }
  await admin.query(`ANALYZE ${s}.records; ANALYZE ${s}.streams; ANALYZE ${s}.events`);
}

/** Spawns `serve --recover` on `url` and measures start-up and one `product.list`. */
async function measureServe(url: string): Promise<StoredRun & { listed: number }> {
  const dir = mkdtempSync(join(tmpdir(), "acp-bench-stored-"));
  const proc = new NdjsonProcess({
    command: process.execPath,
    args: [SERVER_CLI, "serve", "--state", url, "--recover", "--log-level", "debug"],
    cwd: dir,
  });
  try {
    let err = "";
    const recovered = new Promise<number>((resolve) => {
      const onData = (chunk: string): void => {
        err = (err + chunk).slice(-4_000);
        if (!err.includes("recovery pass done")) return;
        proc.child.stderr.off("data", onData);
        resolve(performance.now() - proc.spawnedAt);
      };
      proc.child.stderr.on("data", onData);
    });
    await proc.request("initialize", INITIALIZE_PARAMS);
    const initializeMs = performance.now() - proc.spawnedAt;
    const recoveredMs = await Promise.race([
      recovered,
      proc.exited.then((code) => Promise.reject(new Error(`server exited ${String(code)}: ${proc.stderr}`))),
    ]);
    const all = await proc.timedRequest<{ products: unknown[] }>("product.list", {});
    const list = all.result;
    const listMs = all.receivedAt - all.sentAt;
    const listParsedMs = all.parsedAt - all.sentAt;
    const executing = await proc.timedRequest("product.list", { phase: "executing" });
    const listExecutingMs = executing.receivedAt - executing.sentAt;
    const first = await proc.timedRequest<{ products: unknown[]; nextCursor?: string }>("product.list", {
      limit: LIST_PAGE,
    });
    const page = first.result;
    const listPageMs = first.receivedAt - first.sentAt;
    const next = await proc.timedRequest("product.list", { limit: LIST_PAGE, cursor: page.nextCursor });
    const listNextPageMs = next.receivedAt - next.sentAt;
    // A schema of more than a page must page (the empty schema of the floor has nothing to page).
    const expectPage = list.products.length > LIST_PAGE;
    if (expectPage && (page.products.length !== LIST_PAGE || page.nextCursor === undefined))
      throw new Error(
        `product.list paged wrong: ${page.products.length} products (limit ${LIST_PAGE}), nextCursor ${String(page.nextCursor)}, ` +
          `${JSON.stringify(page).slice(0, 600)}`,
      );
    return {
      ...{ initializeMs, recoveredMs, listMs, listParsedMs, listExecutingMs, listPageMs, listNextPageMs },
      listed: list.products.length,
    };
  } finally {
    await proc.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

/** How many product headers `schema` holds (0 when it does not exist). */
async function storedCount(admin: pg.Client, schema: string): Promise<number> {
  const exists = await admin.query("SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'records'", [schema]);
  if (exists.rowCount === 0) return 0;
  const r = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".records WHERE kind = 'product'`);
  return Number(r.rows[0]?.n ?? 0);
}

/**
 * Stores `products` completed products in `schema` (of the database `admin` is connected to; `url` names the same
 * schema; with `reuse`, a schema that already holds exactly that many is used as it is) and measures `serve
 * --recover` on them `runs` times, and as many times on the empty schema `emptyUrl` names (the floor). The caller
 * drops the schemas it does not keep.
 */
export async function storedFigure(
  url: string,
  emptyUrl: string,
  admin: pg.Client,
  schema: string,
  products: number,
  options: { log: (line: string) => void; reuse?: boolean; runs?: number },
): Promise<StoredFigure> {
  const t0 = performance.now();
  const have = options.reuse ? await storedCount(admin, schema) : 0;
  if (have !== products) {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    const template = await templateProduct(url);
    await cloneProducts(admin, schema, template, products - 1);
  }
  const seedMs = have === products ? 0 : performance.now() - t0;
  const runs: StoredRun[] = [];
  const empty: number[] = [];
  let listed = 0;
  for (let i = 0; i < (options.runs ?? 3); i += 1) {
    const e = await measureServe(emptyUrl);
    empty.push(Math.max(e.initializeMs, e.recoveredMs));
    const m = await measureServe(url);
    if (m.listed !== products) throw new Error(`product.list returned ${m.listed} products of ${products}`);
    listed = m.listed;
    const { listed: _, ...run } = m;
    runs.push(run);
    options.log(
      `  ${fmt(products)} stored products (${seedMs === 0 ? "schema reused" : `seeded in ${fmt(seedMs / 1000, 1)} s`}): ` +
        `serve --recover start-up ${fmt(Math.max(m.initializeMs, m.recoveredMs))} ms (initialize ${fmt(m.initializeMs)}` +
        ` ms, recovery pass done ${fmt(m.recoveredMs)} ms; empty schema ${fmt(empty.at(-1) ?? 0)} ms), product.list ` +
        `${fmt(m.listMs)} ms to its last byte (${fmt(m.listParsedMs)} ms parsed by this client), product.list ` +
        `executing ${fmt(m.listExecutingMs)} ms, a page of ${LIST_PAGE} ` +
        `${fmt(m.listPageMs)} ms, the next page ${fmt(m.listNextPageMs)} ms (target: each under ${fmt(STORED_TARGET_MS)} ms)`,
    );
  }
  return {
    products,
    seedMs,
    listed,
    runs,
    initializeMs: median(runs.map((r) => r.initializeMs)),
    recoveredMs: median(runs.map((r) => r.recoveredMs)),
    listMs: median(runs.map((r) => r.listMs)),
    listParsedMs: median(runs.map((r) => r.listParsedMs)),
    listExecutingMs: median(runs.map((r) => r.listExecutingMs)),
    listPageMs: median(runs.map((r) => r.listPageMs)),
    listNextPageMs: median(runs.map((r) => r.listNextPageMs)),
    emptyStartupMs: median(empty),
  };
}

export function storedMarkdown(f: StoredFigure): string {
  const startup = Math.max(f.initializeMs, f.recoveredMs);
  const met = (ms: number): string => (ms < STORED_TARGET_MS ? "yes" : "**no**");
  const each = (pick: (r: StoredRun) => number): string => f.runs.map((r) => fmt(pick(r))).join(", ");
  return [
    `#### ${fmt(f.products)} stored products on one PostgreSQL schema, \`serve --recover\` (median of ${f.runs.length})`,
    "",
    "Each product.list is timed from its request written to the last byte of its answer received (the server's " +
      "latency, as every JSON-RPC round trip here), the full list also to its answer parsed by this client.",
    "",
    "| measure | ms | runs (ms) | under 1 s |",
    "|---|---|---|---|",
    `| start-up: spawn → initialize answered and recovery pass done | ${fmt(startup)} | ` +
      `${each((r) => Math.max(r.initializeMs, r.recoveredMs))} | ${met(startup)} |`,
    `| (the same on an empty schema) | ${fmt(f.emptyStartupMs)} | — | — |`,
    `| (initialize answered) | ${fmt(f.initializeMs)} | ${each((r) => r.initializeMs)} | — |`,
    `| product.list (all ${fmt(f.listed)}): request sent → last byte of the answer received | ${fmt(f.listMs)} | ` +
      `${each((r) => r.listMs)} | ${met(f.listMs)} |`,
    `| product.list (all ${fmt(f.listed)}): request sent → answer parsed by the bench client (its JSON.parse) | ` +
      `${fmt(f.listParsedMs)} | ${each((r) => r.listParsedMs)} | — |`,
    `| product.list, phase executing (none) | ${fmt(f.listExecutingMs)} | ${each((r) => r.listExecutingMs)} | — |`,
    `| product.list, first page (limit ${LIST_PAGE}) | ${fmt(f.listPageMs)} | ${each((r) => r.listPageMs)} | ` +
      `${met(f.listPageMs)} |`,
    `| product.list, next page (its nextCursor) | ${fmt(f.listNextPageMs)} | ${each((r) => r.listNextPageMs)} | ` +
      `${met(f.listNextPageMs)} |`,
  ].join("\n");
}
