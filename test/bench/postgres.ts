/**
 * The PostgreSQL figures (issue 14): the PostgreSQL store beside SQLite and memory, and many servers on one database.
 * `npm run bench` runs them as figure 8 (`postgresFigures`, on the database `ACP_ORCHESTRATOR_TEST_PG` names, else on
 * a private cluster it starts with scripts/pg-test-cluster.sh: `withPostgres`); `npm run bench:postgres` runs them
 * alone:
 *
 *   node dist/bench/test/bench/postgres.js [--tasks 10000] [--fleet-products 2000] [--product-tasks 10]
 *       [--stored-products 100000] [--skip-stores]
 *       [--stores memory,sqlite,postgres]   (--fleet-products 0 skips part 2, --stored-products 0 part 3)   (needs ACP_ORCHESTRATOR_TEST_PG)
 *   node dist/bench/test/bench/postgres.js --server <json>   (one "server" of the fleet figure; internal)
 *   part 2 knobs: [--in-flight N] [--fleet-rounds N] [--fleet-servers 1,8] [--fleet-warmup N] [--fleet-recover] (each server runs the
 *       real Fleet as `serve --recover` composes it); FLEET_STMT_DEBUG=1 makes each server print its statements by
 *       name (and the kind of each `acp-get`) to stderr when it exits; FLEET_CPU_DEBUG=1 makes each print its user and
 *       system CPU and context switches over its timed run, and the parent print each round's go and done times
 *       (CLOCK_MONOTONIC s: `perf record -k CLOCK_MONOTONIC`, `perf report --time go,done`); FLEET_PROFILE_DIR=dir
 *       makes each write a V8 CPU profile of its timed run only (fleet-<servers>-<id>-<pid>.cpuprofile; wall-clock
 *       samples: on a saturated machine they count time the process waited for a core); BENCH_SERVER_NODE_ARGS
 *       reaches the servers.
 *
 * Part 1: one product of `tasks` tasks (random DAG, width 100, instant workers) run in-process on memory, SQLite (a
 * temp file) and PostgreSQL, twice: with a whole level in parallel (`maxParallelTasks` 100, figure 4's workload, the
 * headline) and with 4 in parallel (about one commit per task and a half: the case bound by the disk's flush time).
 * Each run: time from confirm to completed, authority writes per task, logical
 * bytes written per task (JSON of every event and record), the share of the run spent inside authority calls, and for
 * PostgreSQL what the database did per task: statements sent (client round trips, counted on node-postgres's
 * `Client.query`), transactions committed (`pg_stat_database.xact_commit`), WAL flushes to disk (`pg_stat_wal.wal_sync`)
 * and WAL bytes (`pg_stat_wal.wal_bytes`). The database counters are cluster-wide: nothing else may use the cluster
 * while it runs.
 * Part 2 (issue 32, "Scale"): 1, 2, 4 and 8 server processes on one database, each driving its share of
 * `fleetProducts` products of `productTasks` instant tasks (default 2,000 × 10): tasks per second overall, the ratio
 * to one server (no contention collapse: 8 servers ≥ 1 server), statements per task (client round trips of every
 * server, counted on `Client.query`) and each server's share of time inside authority calls.
 * Part 3 (issue 32): `storedProducts` completed products stored in a schema of their own (one real product, cloned in
 * SQL), then `serve --recover` on it: spawn → `initialize` answered and the first recovery pass done (its debug log
 * line), and one `product.list` of them all, timed to the last byte of its answer received (the server's latency; and
 * also to the answer parsed by the bench client, printed beside it); both must stay under 1 s.
 * Never touches the user's state directory; drops its schemas at the end.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import { PostgresAuthority } from "../../src/adapters/persistence/postgres-authority.js";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import type { RunStateAuthority } from "../../src/core/ports.js";
import { fleetWatches } from "../../src/core/product/fleet.js";
import { REPO_ROOT } from "./support/paths.js";
import { runProducts, withSchema } from "./support/pg-run.js";
import {
  fleetFigures,
  fleetMarkdown,
  fleetServer,
  type FleetFigure,
  type FleetServerOptions,
} from "./postgres-fleet.js";
import { storedFigure, storedMarkdown, type StoredFigure } from "./postgres-stored.js";

/** Cluster-wide counters of what the database did (committed transactions, WAL records, flushes, bytes). */
interface DbCounters {
  /** pg_current_wal_lsn() as bytes from 0/0: the WAL position, so a delta is exactly the WAL written. */
  walLsn: number;
  commits: number;
  walRecords: number;
  walSyncs: number;
  walBytes: number;
}

async function dbCounters(admin: pg.Client): Promise<DbCounters> {
  // Backends report their counters when they exit (the authority closed its pool before this): give them a moment.
  await new Promise((resolve) => setTimeout(resolve, 500));
  await admin.query("SELECT pg_stat_clear_snapshot()");
  const db = await admin.query<{ commits: string }>(
    "SELECT sum(xact_commit) AS commits FROM pg_stat_database WHERE datname = current_database()",
  );
  const wal = await admin.query<{ wal_records: string; wal_sync: string; wal_bytes: string }>(
    "SELECT wal_records, wal_sync, wal_bytes FROM pg_stat_wal",
  );
  const w = wal.rows[0];
  const lsn = await admin.query<{ lsn: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS lsn");
  return {
    walLsn: Number(lsn.rows[0]?.lsn ?? 0),
    commits: Number(db.rows[0]?.commits ?? 0),
    walRecords: Number(w?.wal_records ?? 0),
    walSyncs: Number(w?.wal_sync ?? 0),
    walBytes: Number(w?.wal_bytes ?? 0),
  };
}

/** One store's run of part 1. The `db` fields are set for PostgreSQL only (per task). */
export interface StoreFigure {
  store: "memory" | "sqlite" | "postgres";
  /** The product's `maxParallelTasks`. */
  parallel: number;
  tasks: number;
  runMs: number;
  tasksPerSecond: number;
  writesPerTask: number;
  bytesPerTask: number;
  /** Share of the run spent inside authority calls (0-1). */
  storeShare: number;
  /**
   * Per task. `walBytes` is `pg_stat_wal.wal_bytes`; `walLsnBytes` the `pg_current_wal_lsn()` delta (the WAL
   * position moved, page headers and segment padding included: the figure compared with the peers, issue 34).
   */
  db?: {
    statements: number;
    commits: number;
    walSyncs: number;
    walRecords: number;
    walBytes: number;
    walLsnBytes: number;
  };
}

/** One line of part 2: one server count over every round. */

export interface PostgresFigures {
  stores: StoreFigure[];
  fleet: FleetFigure[];
  stored?: StoredFigure;
  /** Both tables in Markdown, with their headings. */
  markdown: string;
}

const fmt = (n: number, digits = 0): string =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/**
 * Measures parts 1 and 2 on the database at `url` (a `postgres://` URL; schemas `bench_*` are made and dropped).
 * `log` receives one line per measured row. Throws when the database cannot be reached.
 */
export async function postgresFigures(
  url: string,
  options: {
    tasks: number;
    fleetProducts: number;
    productTasks: number;
    storedProducts: number;
    /** Keep the stored products in this schema and reuse it when it already holds as many (part 3). */
    storedSchema?: string;
    /** Rounds of part 2 (default 1). */
    fleetRounds?: number;
    /** Products each server of part 2 drives at once (default 1). */
    inFlight?: number;
    /** Part 2's servers run the fleet (change feed, recovery, liveness) as `serve --recover` does (default false). */
    fleetRecover?: boolean;
    /** Server counts of part 2 (default 1, 2, 4, 8; the first is the one the others are compared with). */
    fleetServers?: readonly number[];
    /** Products each server of part 2 runs before the clock starts (default 100; not counted). */
    fleetWarmup?: number;
    /** `serve --recover` runs of part 3 (default 3). */
    storedRuns?: number;
    skipStores?: boolean;
    /** Which stores part 1 runs (default all three). */
    storeKinds?: readonly ("memory" | "sqlite" | "postgres")[];
    log: (line: string) => void;
  },
): Promise<PostgresFigures> {
  const { tasks, fleetProducts, productTasks, log } = options;
  let stored: StoredFigure | undefined;
  const schemas: string[] = [];
  const stores: StoreFigure[] = [];
  const fleet: FleetFigure[] = [];
  const dir = mkdtempSync(join(tmpdir(), "acp-bench-pg-"));
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    for (const [kind, parallel] of (options.skipStores ? [] : [100, 4]).flatMap((n) =>
      (options.storeKinds ?? (["memory", "sqlite", "postgres"] as const)).map((k) => [k, n] as const),
    )) {
      const schema = `bench_${kind}${parallel}_${process.pid}`;
      let authority: RunStateAuthority;
      if (kind === "memory") authority = new MemoryAuthority();
      else if (kind === "sqlite") authority = SqliteAuthority.open(join(dir, `state-${parallel}.db`));
      else {
        schemas.push(schema);
        authority = await PostgresAuthority.open(withSchema(url, schema), { announce: fleetWatches });
      }
      const before = kind === "postgres" ? await dbCounters(admin) : undefined;
      const r = await runProducts(authority, tasks, 1, "bench-owner", parallel);
      await authority.close();
      const figure: StoreFigure = {
        store: kind,
        parallel,
        tasks: r.tasks,
        runMs: r.runMs,
        tasksPerSecond: r.tasks / (r.runMs / 1000),
        writesPerTask: r.meter.writes / r.tasks,
        bytesPerTask: r.meter.bytes / r.tasks,
        storeShare: (r.meter.writeMs + r.meter.readMs) / r.runMs,
      };
      if (before) {
        const after = await dbCounters(admin);
        figure.db = {
          statements: r.statements / r.tasks,
          commits: (after.commits - before.commits) / r.tasks,
          walSyncs: (after.walSyncs - before.walSyncs) / r.tasks,
          walRecords: (after.walRecords - before.walRecords) / r.tasks,
          walBytes: (after.walBytes - before.walBytes) / r.tasks,
          walLsnBytes: (after.walLsn - before.walLsn) / r.tasks,
        };
      }
      stores.push(figure);
      log(
        `  ${kind}, ${parallel} in parallel: ${fmt(figure.runMs / 1000, 2)} s, ${fmt(figure.tasksPerSecond)} tasks/s, ` +
          `${fmt(figure.writesPerTask, 2)} writes/task, ${fmt(figure.storeShare * 100)} % in store calls` +
          (figure.db
            ? `; per task: ${fmt(figure.db.statements, 2)} statements, ${fmt(figure.db.commits, 2)} commits, ` +
              `${fmt(figure.db.walSyncs, 2)} WAL flushes, ${fmt(figure.db.walLsnBytes)} WAL bytes (LSN delta)`
            : ""),
      );
    }
    if (fleetProducts > 0) {
      const o = {
        products: fleetProducts,
        productTasks,
        inFlight: options.inFlight ?? 1,
        rounds: options.fleetRounds ?? 1,
        servers: options.fleetServers ?? [1, 2, 4, 8],
        warmup: options.fleetWarmup ?? 300,
        fleet: options.fleetRecover ?? false,
      };
      fleet.push(...(await fleetFigures(url, admin, o, log)));
    }
    const eight = fleet.find((f) => f.servers === 8);
    if (eight)
      log(
        `  8 servers ≥ 1 server's throughput (medians): ${eight.vsOne >= 1 ? "yes" : "NO"} (${fmt(eight.vsOne, 2)}×)`,
      );
    if (options.storedProducts > 0) {
      const schema = options.storedSchema ?? `bench_stored_${process.pid}`;
      if (options.storedSchema === undefined) schemas.push(schema);
      const empty = `bench_empty_${process.pid}`;
      schemas.push(empty);
      stored = await storedFigure(
        withSchema(url, schema),
        withSchema(url, empty),
        admin,
        schema,
        options.storedProducts,
        {
          log,
          reuse: options.storedSchema !== undefined,
          runs: options.storedRuns ?? 3,
        },
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
  return {
    stores,
    fleet,
    ...(stored ? { stored } : {}),
    markdown: markdown(stores, fleet, options.fleetWarmup ?? 300, stored),
  };
}

function markdown(stores: StoreFigure[], fleet: FleetFigure[], warmup: number, stored?: StoredFigure): string {
  const lines: string[] = [];
  const tasks = stores[0]?.tasks ?? 0;
  if (stores.length > 0)
    lines.push(`#### ${fmt(tasks)} tasks, one product, one server (in-process, instant workers)`, "");
  if (stores.length > 0) {
    lines.push(
      "| store | in parallel | run (s) | tasks/s | writes/task | bytes/task | time in store calls |",
      "|---|---|---|---|---|---|---|",
    );
  }
  for (const f of stores) {
    lines.push(
      `| ${f.store} | ${f.parallel} | ${fmt(f.runMs / 1000, 2)} | ${fmt(f.tasksPerSecond)} | ` +
        `${fmt(f.writesPerTask, 2)} | ${fmt(f.bytesPerTask)} | ${fmt(f.storeShare * 100)} % |`,
    );
  }
  for (const f of stores) {
    if (!f.db) continue;
    lines.push(
      "",
      `What PostgreSQL did per task, ${f.parallel} in parallel: ${fmt(f.db.statements, 2)} statements (client round ` +
        `trips), ${fmt(f.db.commits, 2)} committed transactions, ${fmt(f.db.walSyncs, 2)} WAL flushes to disk, ` +
        `${fmt(f.db.walRecords, 1)} WAL records, ${fmt(f.db.walLsnBytes)} WAL bytes (\`pg_current_wal_lsn()\` delta; ` +
        `\`pg_stat_wal\`: ${fmt(f.db.walBytes)}).`,
    );
  }
  if (fleet.length > 0) lines.push("", fleetMarkdown(fleet, warmup));
  if (stored) lines.push("", storedMarkdown(stored));
  return lines.join("\n");
}

const run = promisify(execFile);

/**
 * Runs `work` with a PostgreSQL URL: `ACP_ORCHESTRATOR_TEST_PG` when set, else a private cluster started (and stopped
 * after) by scripts/pg-test-cluster.sh. Resolves `{skipped}` with the reason, in plain words, when no cluster could
 * be started (PostgreSQL missing and not installable, no permission); `work`'s own errors are thrown.
 */
export async function withPostgres<T>(
  log: (line: string) => void,
  work: (url: string) => Promise<T>,
): Promise<{ result: T } | { skipped: string }> {
  const given = process.env.ACP_ORCHESTRATOR_TEST_PG;
  if (given) return { result: await work(given) };
  const script = join(REPO_ROOT, "scripts", "pg-test-cluster.sh");
  let exports: string;
  try {
    log("  starting a private PostgreSQL cluster (scripts/pg-test-cluster.sh; ACP_ORCHESTRATOR_TEST_PG is not set)");
    exports = (await run("bash", [script, "start"], { maxBuffer: 1024 * 1024 })).stdout;
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim().split("\n").at(-1);
    return { skipped: `PostgreSQL could not be started: ${stderr || (err as Error).message}` };
  }
  const value = (name: string): string | undefined => {
    const line = exports.split("\n").find((l) => l.startsWith(`export ${name}=`));
    // `printf %q` quoting: backslash escapes only (the URL and the directory hold no quotes or spaces).
    return line?.slice(`export ${name}=`.length).replace(/\\(.)/g, "$1");
  };
  const url = value("ACP_ORCHESTRATOR_TEST_PG");
  const dir = value("ACP_ORCHESTRATOR_TEST_PG_DIR");
  if (!url || !dir) return { skipped: "PostgreSQL could not be started: pg-test-cluster.sh printed no URL." };
  try {
    return { result: await work(url) };
  } finally {
    await run("bash", [script, "stop", dir]).catch((err: unknown) =>
      log(`  could not stop the cluster in ${dir}: ${String(err)}`),
    );
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tasks: { type: "string", default: "10000" },
      "fleet-products": { type: "string", default: "2000" },
      "product-tasks": { type: "string", default: "10" },
      "stored-products": { type: "string", default: "100000" },
      "skip-stores": { type: "boolean", default: false },
      "stored-schema": { type: "string" },
      "stored-runs": { type: "string", default: "3" },
      "fleet-rounds": { type: "string", default: "1" },
      "in-flight": { type: "string", default: "1" },
      "fleet-servers": { type: "string", default: "1,2,4,8" },
      "fleet-warmup": { type: "string", default: "300" },
      "fleet-recover": { type: "boolean", default: false },
      stores: { type: "string", default: "memory,sqlite,postgres" },
      server: { type: "string" },
    },
  });
  if (values.server) {
    await fleetServer(JSON.parse(values.server) as FleetServerOptions);
    return;
  }
  const url = process.env.ACP_ORCHESTRATOR_TEST_PG;
  if (!url) throw new Error("set ACP_ORCHESTRATOR_TEST_PG (npm run bench:postgres starts a private cluster)");
  const figures = await postgresFigures(url, {
    tasks: Number(values.tasks),
    fleetProducts: Number(values["fleet-products"]),
    productTasks: Number(values["product-tasks"]),
    storedProducts: Number(values["stored-products"]),
    ...(values["stored-schema"] ? { storedSchema: values["stored-schema"] } : {}),
    storedRuns: Number(values["stored-runs"]),
    fleetRounds: Number(values["fleet-rounds"]),
    inFlight: Number(values["in-flight"]),
    fleetServers: values["fleet-servers"].split(",").map(Number),
    fleetRecover: values["fleet-recover"],
    fleetWarmup: Number(values["fleet-warmup"]),
    skipStores: values["skip-stores"],
    storeKinds: values.stores
      .split(",")
      .filter((k): k is "memory" | "sqlite" | "postgres" => ["memory", "sqlite", "postgres"].includes(k)),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  process.stdout.write(`${figures.markdown}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
