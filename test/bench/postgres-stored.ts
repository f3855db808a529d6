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
import { fleetWatches } from "../../src/core/product/fleet.js";
import { INITIALIZE_PARAMS } from "./overhead.js";
import { randomDag } from "./support/dag.js";
import { benchService } from "./support/in-process.js";
import { NdjsonProcess } from "./support/ndjson-process.js";
import { SERVER_CLI } from "./support/paths.js";

/** Limit of both measurements (issue 32). */
export const STORED_TARGET_MS = 1_000;

export interface StoredFigure {
  products: number;
  seedMs: number;
  /** Spawn → `initialize` answered. */
  initializeMs: number;
  /** Spawn → the first recovery pass done. */
  recoveredMs: number;
  /** One `product.list` round trip (all products). */
  listMs: number;
  listed: number;
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

/** Clones the template's rows `copies` times in `schema`, in batches of 10,000 copies per statement. */
async function cloneProducts(admin: pg.Client, schema: string, template: string, copies: number): Promise<void> {
  const s = `"${schema}"`;
  for (let from = 1; from <= copies; from += 10_000) {
    const to = Math.min(copies, from + 9_999);
    const args = [template, from, to];
    const g = "generate_series($2::int, $3::int) AS g";
    const sub = (col: string): string => `replace(${col}, $1, $1 || '-' || g)`;
    await admin.query(
      `INSERT INTO ${s}.records (project_id, kind, id, value, revision, updated_at)
       SELECT project_id, kind, ${sub("id")}, ${sub("value")}, revision, updated_at
       FROM ${s}.records, ${g} WHERE strpos(id, $1) > 0`,
      args,
    );
    await admin.query(
      `INSERT INTO ${s}.streams (project_id, stream, last_seq)
       SELECT project_id, ${sub("stream")}, last_seq FROM ${s}.streams, ${g} WHERE strpos(stream, $1) > 0`,
      args,
    );
    await admin.query(
      `INSERT INTO ${s}.events (project_id, stream, seq, n, event, events)
       SELECT project_id, ${sub("stream")}, seq, n, ${sub("event")},
              (SELECT array_agg(${sub("t")} ORDER BY o) FROM unnest(events) WITH ORDINALITY AS u(t, o))
       FROM ${s}.events, ${g} WHERE strpos(stream, $1) > 0`,
      args,
    );
  }
  await admin.query(`ANALYZE ${s}.records; ANALYZE ${s}.streams; ANALYZE ${s}.events`);
}

/** Spawns `serve --recover` on `url` and measures start-up and one `product.list`. */
async function measureServe(url: string): Promise<Omit<StoredFigure, "products" | "seedMs">> {
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
    const t0 = performance.now();
    const list = await proc.request<{ products: unknown[] }>("product.list", {});
    const listMs = performance.now() - t0;
    return { initializeMs, recoveredMs, listMs, listed: list.products.length };
  } finally {
    await proc.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Stores `products` completed products in `schema` (of the database `admin` is connected to; `url` names the same
 * schema) and measures `serve --recover` on them. The caller drops the schema.
 */
export async function storedFigure(
  url: string,
  admin: pg.Client,
  schema: string,
  products: number,
  log: (line: string) => void,
): Promise<StoredFigure> {
  const t0 = performance.now();
  const template = await templateProduct(url);
  await cloneProducts(admin, schema, template, products - 1);
  const seedMs = performance.now() - t0;
  const m = await measureServe(url);
  if (m.listed !== products) throw new Error(`product.list returned ${m.listed} products of ${products}`);
  const figure = { products, seedMs, ...m };
  log(
    `  ${fmt(products)} stored products (seeded in ${fmt(seedMs / 1000, 1)} s): serve --recover start-up ` +
      `${fmt(Math.max(m.initializeMs, m.recoveredMs))} ms (initialize ${fmt(m.initializeMs)} ms, recovery pass done ` +
      `${fmt(m.recoveredMs)} ms), product.list ${fmt(m.listMs)} ms`,
  );
  return figure;
}

export function storedMarkdown(f: StoredFigure): string {
  const startup = Math.max(f.initializeMs, f.recoveredMs);
  const met = (ms: number): string => (ms < STORED_TARGET_MS ? "yes" : "**no**");
  return [
    `#### ${fmt(f.products)} stored products on one PostgreSQL schema, \`serve --recover\``,
    "",
    "| measure | ms | under 1 s |",
    "|---|---|---|",
    `| start-up: spawn → initialize answered and recovery pass done | ${fmt(startup)} | ${met(startup)} |`,
    `| (initialize answered) | ${fmt(f.initializeMs)} | — |`,
    `| product.list (all ${fmt(f.listed)}) | ${fmt(f.listMs)} | ${met(f.listMs)} |`,
  ].join("\n");
}
