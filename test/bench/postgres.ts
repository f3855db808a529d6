/**
 * `npm run bench:postgres` (issue 14): the PostgreSQL store beside SQLite and memory, and many servers on one
 * database. Needs ACP_ORCHESTRATOR_TEST_PG (scripts/pg-test-cluster.sh starts a private cluster; the npm script does).
 *
 *   node dist/bench/test/bench/postgres.js [--tasks 10000] [--fleet-tasks 4000]
 *   node dist/bench/test/bench/postgres.js --server <json>   (one "server" of the fleet figure; internal)
 *
 * Figure 1: one product of `--tasks` tasks (random DAG, width 100, instant workers, 4 in parallel) run in-process on
 * memory, SQLite (a temp file) and PostgreSQL: time from confirm to completed, authority writes per task, logical
 * bytes written per task (JSON of every event and record), and the share of the run spent inside authority calls.
 * Figure 2: 1, 2 and 4 server processes on one database, each driving its share of `--fleet-tasks` tasks (products
 * of 500 tasks): tasks per second overall, and each server's share of time inside authority calls. Prints a
 * Markdown report on stdout; never touches the user's state directory; drops its schemas at the end.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import { PostgresAuthority } from "../../src/adapters/persistence/postgres-authority.js";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import type { RunStateAuthority } from "../../src/core/ports.js";
import { randomDag } from "./support/dag.js";
import { benchService, type MeterReading } from "./support/in-process.js";

const { values } = parseArgs({
  options: {
    tasks: { type: "string", default: "10000" },
    "fleet-tasks": { type: "string", default: "4000" },
    server: { type: "string" },
  },
});

const URL_ENV = process.env.ACP_ORCHESTRATOR_TEST_PG;

function withSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set("schema", schema);
  return u.toString();
}

interface RunResult {
  tasks: number;
  runMs: number;
  meter: MeterReading;
}

/** Plans and runs `products` products of `tasks` tasks each, one after another, on one in-process service. */
async function runProducts(
  authority: RunStateAuthority,
  tasks: number,
  products: number,
  ownerId: string,
): Promise<RunResult> {
  const plan = randomDag({ tasks, width: Math.min(100, tasks) });
  const b = benchService(authority, plan, { maxParallelTasks: 4, ownerId }, true);
  const t0 = performance.now();
  for (let i = 0; i < products; i += 1) {
    const { productId } = await b.service.plan({ goal: "Benchmark", cwd: "/tmp/bench", projectId: "bench" });
    await b.notifier.next("product.planReady", (p) => p.productId === productId);
    const completed = b.notifier.next("product.completed", (p) => p.productId === productId);
    await b.service.confirm(productId, {});
    await completed;
  }
  return { tasks: tasks * products, runMs: performance.now() - t0, meter: b.meter.reading };
}

/** One fleet server: runs its products on the shared schema and prints its result as one JSON line. */
async function fleetServer(options: { url: string; tasks: number; products: number; id: number }): Promise<void> {
  const authority = await PostgresAuthority.open(options.url, { maxConnections: 4 });
  const result = await runProducts(authority, options.tasks, options.products, `bench-server-${options.id}`);
  await authority.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

function spawnServer(options: { url: string; tasks: number; products: number; id: number }): Promise<RunResult> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--server", JSON.stringify(options)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (d: string) => (out += d));
  return new Promise((resolve, reject) =>
    child.once("exit", (code) =>
      code === 0 ? resolve(JSON.parse(out) as RunResult) : reject(new Error(`server ${options.id} exited ${code}`)),
    ),
  );
}

const fmt = (n: number, digits = 0): string =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main(): Promise<void> {
  if (values.server) {
    await fleetServer(JSON.parse(values.server) as { url: string; tasks: number; products: number; id: number });
    return;
  }
  if (!URL_ENV) throw new Error("set ACP_ORCHESTRATOR_TEST_PG (npm run bench:postgres starts a private cluster)");
  const tasks = Number(values.tasks);
  const fleetTasks = Number(values["fleet-tasks"]);
  const schemas: string[] = [];
  const lines: string[] = [];
  const dir = mkdtempSync(join(tmpdir(), "acp-bench-pg-"));
  try {
    lines.push(`### ${fmt(tasks)} tasks, one product, one server (in-process, instant workers, 4 in parallel)`, "");
    lines.push(
      "| store | run (s) | tasks/s | writes/task | bytes/task | time in store calls |",
      "|---|---|---|---|---|---|",
    );
    for (const kind of ["memory", "sqlite", "postgres"] as const) {
      const schema = `bench_${kind}_${process.pid}`;
      let authority: RunStateAuthority;
      if (kind === "memory") authority = new MemoryAuthority();
      else if (kind === "sqlite") authority = SqliteAuthority.open(join(dir, "state.db"));
      else {
        schemas.push(schema);
        authority = await PostgresAuthority.open(withSchema(URL_ENV, schema));
      }
      const r = await runProducts(authority, tasks, 1, "bench-owner");
      await authority.close();
      const inStore = (r.meter.writeMs + r.meter.readMs) / r.runMs;
      lines.push(
        `| ${kind} | ${fmt(r.runMs / 1000, 2)} | ${fmt(r.tasks / (r.runMs / 1000))} | ${fmt(r.meter.writes / r.tasks, 2)} | ` +
          `${fmt(r.meter.bytes / r.tasks)} | ${fmt(inStore * 100)} % |`,
      );
      process.stderr.write(`${lines.at(-1)}\n`);
    }
    lines.push(
      "",
      `### ${fmt(fleetTasks)} tasks on one PostgreSQL database, shared by 1, 2 and 4 server processes`,
      "",
    );
    lines.push(
      "| servers | wall (s) | tasks/s | vs 1 server | time in store calls (mean per server) |",
      "|---|---|---|---|---|",
    );
    let one = 0;
    for (const servers of [1, 2, 4]) {
      const schema = `bench_fleet${servers}_${process.pid}`;
      schemas.push(schema);
      const url = withSchema(URL_ENV, schema);
      await (await PostgresAuthority.open(url)).close(); // migrate once before the clock starts
      const productTasks = 500;
      const products = Math.max(1, Math.round(fleetTasks / productTasks / servers));
      const t0 = performance.now();
      const results = await Promise.all(
        Array.from({ length: servers }, (_, id) => spawnServer({ url, tasks: productTasks, products, id })),
      );
      const wallMs = performance.now() - t0;
      const total = results.reduce((n, r) => n + r.tasks, 0);
      const rate = total / (wallMs / 1000);
      if (servers === 1) one = rate;
      const share = results.reduce((n, r) => n + (r.meter.writeMs + r.meter.readMs) / r.runMs, 0) / results.length;
      lines.push(
        `| ${servers} | ${fmt(wallMs / 1000, 2)} | ${fmt(rate)} | ${fmt(rate / one, 2)}× | ${fmt(share * 100)} % |`,
      );
      process.stderr.write(`${lines.at(-1)}\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    const admin = new pg.Client({ connectionString: URL_ENV });
    await admin.connect();
    for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await admin.end();
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
