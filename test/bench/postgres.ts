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
 *   part 2 knobs: [--in-flight N] [--fleet-rounds N] [--fleet-servers 1,8] [--fleet-recover] (each server runs the
 *       real Fleet as `serve --recover` composes it); FLEET_STMT_DEBUG=1 makes each server print its statements by
 *       name (and the kind of each `acp-get`) to stderr when it exits; BENCH_SERVER_NODE_ARGS reaches the servers.
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
 * line), and one `product.list` round trip; both must stay under 1 s.
 * Never touches the user's state directory; drops its schemas at the end.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import { PostgresAuthority } from "../../src/adapters/persistence/postgres-authority.js";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import { PostgresLiveness } from "../../src/adapters/persistence/postgres-liveness.js";
import { ProcessLiveness } from "../../src/adapters/system/process-liveness.js";
import type { OwnerLiveness, RunStateAuthority } from "../../src/core/ports.js";
import { DEFAULT_PRODUCT_OPTIONS } from "../../src/core/product/context.js";
import { Fleet, fleetWatches } from "../../src/core/product/fleet.js";
import { randomDag } from "./support/dag.js";
import { benchService, realClock, type MeterReading } from "./support/in-process.js";
import { REPO_ROOT, serverNodeArgs } from "./support/paths.js";
import { storedFigure, storedMarkdown, type StoredFigure } from "./postgres-stored.js";

/** Statements by name, counted with FLEET_STMT_DEBUG=1 (see the knobs above). */
const stmtDebug = new Map<string, number>();
process.on("exit", () => {
  if (process.env.FLEET_STMT_DEBUG && stmtDebug.size > 0)
    process.stderr.write(`${process.pid} ${JSON.stringify([...stmtDebug].sort((a, b) => b[1] - a[1]).slice(0, 15))}\n`);
});
/** Statements this process sent to PostgreSQL (every `Client.query`, pooled or not): one round trip each. */
let statementsSent = 0;
const clientQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (
  this: pg.Client,
  ...args: unknown[]
) {
  statementsSent += 1;
  if (process.env.FLEET_STMT_DEBUG) {
    const a = args[0] as { text?: string; name?: string } | string;
    let key = (typeof a === "string" ? a : (a?.name ?? a?.text ?? "?")).replace(/\s+/g, " ").slice(0, 90);
    const v = (a as { values?: unknown[] })?.values ?? (args[1] as unknown[] | undefined);
    if (key === "acp-get") key += ` ${String(v?.[1])}`;
    stmtDebug.set(key, (stmtDebug.get(key) ?? 0) + 1);
  }
  return clientQuery.apply(this, args);
};

function withSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set("schema", schema);
  return u.toString();
}

interface RunResult {
  tasks: number;
  runMs: number;
  meter: MeterReading;
  statements: number;
  /** CPU (user + system, ms) of this process during the run, and over its whole life (start-up included). */
  cpuRunMs?: number;
  cpuTotalMs?: number;
}

/** Plans and runs `products` products of `tasks` tasks each, `inFlight` at a time, on one in-process service. */
async function runProducts(
  authority: RunStateAuthority,
  tasks: number,
  products: number,
  ownerId: string,
  maxParallelTasks: number,
  inFlight = 1,
  fleet?: { liveness: OwnerLiveness },
): Promise<RunResult> {
  const plan = randomDag({ tasks, width: Math.min(100, tasks) });
  const b = benchService(authority, plan, { maxParallelTasks, ownerId }, true, "instant", fleet?.liveness);
  // A fleet server as `serve --recover` composes it (server.ts buildFleet): change feed, recovery, liveness.
  const running = fleet
    ? new Fleet({
        service: b.service,
        store: b.store,
        authority,
        clock: realClock,
        ids: (prefix) => `${prefix}_${process.pid}_${Math.random().toString(36).slice(2)}`,
        logger: b.logger,
        ownerId,
        liveness: fleet.liveness,
        recover: true,
        scanMs: DEFAULT_PRODUCT_OPTIONS.leaseRenewMs,
      })
    : undefined;
  running?.start();
  const statementsBefore = statementsSent;
  const t0 = performance.now();
  let next = 0;
  // `inFlight` lanes, each planning, confirming and awaiting the completion of the next product until none is left.
  const lane = async (): Promise<void> => {
    while (next < products) {
      next += 1;
      const { productId } = await b.service.plan({ goal: "Benchmark", cwd: "/tmp/bench", projectId: "bench" });
      await b.notifier.next("product.planReady", (p) => p.productId === productId);
      const completed = b.notifier.next("product.completed", (p) => p.productId === productId);
      await b.service.confirm(productId, {});
      await completed;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, inFlight) }, lane));
  await running?.stop();
  return {
    tasks: tasks * products,
    runMs: performance.now() - t0,
    meter: b.meter.reading,
    statements: statementsSent - statementsBefore,
  };
}

interface FleetServerOptions {
  url: string;
  tasks: number;
  products: number;
  /** Products this server drives at once. */
  inFlight: number;
  id: number;
  /** Run the fleet's change feed, recovery and liveness as `serve --recover` does (default false: the service only). */
  fleet?: boolean;
}

/** One fleet server: runs its products on the shared schema and prints its result as one JSON line. */
async function fleetServer(options: FleetServerOptions): Promise<void> {
  const authority = await PostgresAuthority.open(options.url, { maxConnections: 4, announce: fleetWatches });
  const processLiveness = new ProcessLiveness();
  const ownerId = options.fleet ? processLiveness.ownerId : `bench-server-${options.id}`;
  const liveness = options.fleet
    ? await PostgresLiveness.open(options.url, { ownerId, fallback: processLiveness })
    : undefined;
  const cpu0 = process.cpuUsage();
  const result: RunResult = await runProducts(
    authority,
    options.tasks,
    options.products,
    ownerId,
    Math.min(4, options.tasks),
    options.inFlight,
    liveness ? { liveness } : undefined,
  );
  const cpu = process.cpuUsage(cpu0);
  result.cpuRunMs = (cpu.user + cpu.system) / 1000;
  await authority.close();
  await liveness?.close();
  const total = process.cpuUsage();
  result.cpuTotalMs = (total.user + total.system) / 1000;
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

function spawnServer(options: FleetServerOptions): Promise<RunResult> {
  const args = [...serverNodeArgs(), fileURLToPath(import.meta.url), "--server", JSON.stringify(options)];
  const child = spawn(process.execPath, args, {
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
export interface FleetFigure {
  servers: number;
  /** Tasks of one round. */
  tasks: number;
  /** Median wall time of a round. */
  wallMs: number;
  /** Median over the rounds. */
  tasksPerSecond: number;
  /** Lowest and highest over the rounds. */
  minTasksPerSecond: number;
  maxTasksPerSecond: number;
  /** Each round's tasks per second, in order. */
  rounds: number[];
  /** Median throughput relative to one server's median. */
  vsOne: number;
  /** Mean share of each server's run spent inside authority calls (0-1). */
  storeShare: number;
  /** Statements (client round trips) of every server per task (mean over the rounds). */
  statementsPerTask: number;
  /** CPU ms per task, medians over the rounds (NaN where not measured). */
  cpu: FleetCpu;
}

/** One round of one server count. */
interface FleetRound {
  wallMs: number;
  tasks: number;
  tasksPerSecond: number;
  storeShare: number;
  statementsPerTask: number;
  /** CPU ms per task: every server during its run, every server over its life, PostgreSQL (when readable). */
  cpu: FleetCpu;
}

/** CPU milliseconds per task (user + system) of one round. */
export interface FleetCpu {
  /** The server processes while they ran their products. */
  serversRun: number;
  /** The server processes over their whole lives (start-up, pool connect and close included). */
  serversTotal: number;
  /** PostgreSQL's processes (the postmaster's children, exited ones included); NaN when /proc cannot show them. */
  postgres: number;
}

/** /proc/PID/stat fields after the command name (field 3 is index 0). */
function procStat(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ");
  } catch {
    return undefined;
  }
}

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/**
 * CPU ms used so far by the PostgreSQL server behind `admin` (same host only): the postmaster's own and its exited
 * children's time (cutime/cstime: a backend's CPU is added when it exits) plus every live child's. Undefined when
 * /proc does not show it (another host, another OS).
 */
async function postgresCpuMs(admin: pg.Client): Promise<number | undefined> {
  const { rows } = await admin.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  const backend = procStat(rows[0]?.pid ?? 0);
  const postmaster = Number(backend?.[1]);
  const own = procStat(postmaster);
  if (!own) return undefined;
  let ticks = [11, 12, 13, 14].reduce((n, i) => n + Number(own[i]), 0);
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const f = procStat(Number(entry));
    if (f && Number(f[1]) === postmaster) ticks += Number(f[11]) + Number(f[12]);
  }
  return (ticks / TICKS_PER_SECOND) * 1000;
}

const median = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

/** Part 2: runs `servers` server processes on a fresh schema, sharing `products` products; one round. */
async function fleetRound(
  url: string,
  admin: pg.Client,
  servers: number,
  o: { products: number; productTasks: number; inFlight: number; fleet?: boolean },
): Promise<FleetRound> {
  const schema = `bench_fleet${servers}_${process.pid}`;
  const schemaUrl = withSchema(url, schema);
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await (await PostgresAuthority.open(schemaUrl)).close(); // migrate once before the clock starts
  try {
    const products = Math.max(1, Math.round(o.products / servers));
    const pgCpu0 = await postgresCpuMs(admin);
    const t0 = performance.now();
    const results = await Promise.all(
      Array.from({ length: servers }, (_, id) =>
        spawnServer({
          url: schemaUrl,
          tasks: o.productTasks,
          products,
          inFlight: o.inFlight,
          id,
          fleet: o.fleet ?? false,
        }),
      ),
    );
    const wallMs = performance.now() - t0;
    const tasks = results.reduce((n, r) => n + r.tasks, 0);
    // Backends add their CPU to the postmaster's when they exit; the pools closed before their servers exited.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const pgCpu1 = await postgresCpuMs(admin);
    const cpu: FleetCpu = {
      serversRun: results.reduce((n, r) => n + (r.cpuRunMs ?? Number.NaN), 0) / tasks,
      serversTotal: results.reduce((n, r) => n + (r.cpuTotalMs ?? Number.NaN), 0) / tasks,
      postgres: pgCpu0 === undefined || pgCpu1 === undefined ? Number.NaN : (pgCpu1 - pgCpu0) / tasks,
    };
    return {
      cpu,
      wallMs,
      tasks,
      tasksPerSecond: tasks / (wallMs / 1000),
      storeShare: results.reduce((n, r) => n + (r.meter.writeMs + r.meter.readMs) / r.runMs, 0) / results.length,
      statementsPerTask: results.reduce((n, r) => n + r.statements, 0) / tasks,
    };
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

/**
 * Part 2 over `rounds` rounds; each round runs every server count once, in order, so a change in the shared
 * machine's load falls on every count alike. Medians, lowest and highest per server count.
 */
async function fleetFigures(
  url: string,
  admin: pg.Client,
  o: {
    products: number;
    productTasks: number;
    inFlight: number;
    rounds: number;
    servers: readonly number[];
    fleet?: boolean;
  },
  log: (line: string) => void,
): Promise<FleetFigure[]> {
  const byCount = new Map<number, FleetRound[]>(o.servers.map((n) => [n, []]));
  for (let round = 1; round <= o.rounds; round += 1) {
    for (const servers of o.servers) {
      const r = await fleetRound(url, admin, servers, o);
      byCount.get(servers)?.push(r);
      log(
        `  round ${round}/${o.rounds}, ${servers} server(s): ${fmt(r.tasks)} tasks in ${fmt(r.wallMs / 1000, 1)} s, ` +
          `${fmt(r.tasksPerSecond)} tasks/s, ${fmt(r.statementsPerTask, 2)} statements/task, ` +
          `${fmt(r.storeShare * 100)} % in store calls; CPU ms/task: servers ${fmt(r.cpu.serversRun, 3)} while ` +
          `running (${fmt(r.cpu.serversTotal, 3)} with start-up), PostgreSQL ${fmt(r.cpu.postgres, 3)}`,
      );
    }
  }
  const one = median((byCount.get(o.servers[0] ?? 1) ?? []).map((r) => r.tasksPerSecond));
  return o.servers.map((servers) => {
    const rs = byCount.get(servers) ?? [];
    const rates = rs.map((r) => r.tasksPerSecond);
    const mean = (pick: (r: FleetRound) => number): number => rs.reduce((n, r) => n + pick(r), 0) / rs.length;
    return {
      servers,
      tasks: rs[0]?.tasks ?? 0,
      wallMs: median(rs.map((r) => r.wallMs)),
      tasksPerSecond: median(rates),
      minTasksPerSecond: Math.min(...rates),
      maxTasksPerSecond: Math.max(...rates),
      rounds: rates,
      vsOne: median(rates) / one,
      storeShare: mean((r) => r.storeShare),
      statementsPerTask: mean((r) => r.statementsPerTask),
      cpu: {
        serversRun: median(rs.map((r) => r.cpu.serversRun)),
        serversTotal: median(rs.map((r) => r.cpu.serversTotal)),
        postgres: median(rs.map((r) => r.cpu.postgres)),
      },
    };
  });
}

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
  return { stores, fleet, ...(stored ? { stored } : {}), markdown: markdown(stores, fleet, stored) };
}

function markdown(stores: StoreFigure[], fleet: FleetFigure[], stored?: StoredFigure): string {
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
  const fleetTasks = fleet[0]?.tasks ?? 0;
  if (fleet.length > 0) {
    const rounds = fleet[0]?.rounds.length ?? 0;
    lines.push(
      "",
      `#### ${fmt(fleetTasks)} tasks on one PostgreSQL database, shared by 1, 2, 4 and 8 server processes ` +
        `(${rounds} round${rounds === 1 ? "" : "s"})`,
      "",
      "| servers | wall (s, median) | tasks/s: median (lowest–highest) | each round | vs 1 server (medians) | statements/task | CPU ms/task, servers: running (with start-up) | CPU ms/task, PostgreSQL | time in store calls (mean per server; summed over its products in flight) |",
      "|---|---|---|---|---|---|---|---|---|",
    );
  }
  for (const f of fleet) {
    lines.push(
      `| ${f.servers} | ${fmt(f.wallMs / 1000, 2)} | ${fmt(f.tasksPerSecond)} (${fmt(f.minTasksPerSecond)}–` +
        `${fmt(f.maxTasksPerSecond)}) | ${f.rounds.map((r) => fmt(r)).join(", ")} | ${fmt(f.vsOne, 2)}× | ` +
        `${fmt(f.statementsPerTask, 2)} | ${fmt(f.cpu.serversRun, 2)} (${fmt(f.cpu.serversTotal, 2)}) | ` +
        `${fmt(f.cpu.postgres, 2)} | ${fmt(f.storeShare * 100)} % |`,
    );
  }
  const eight = fleet.find((f) => f.servers === 8);
  if (eight) lines.push("", `8 servers ≥ 1 server's throughput (medians): ${eight.vsOne >= 1 ? "yes" : "**no**"}.`);
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
