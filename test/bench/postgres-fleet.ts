/**
 * Part 2 of the PostgreSQL figures (issue 32, "Scale"; issue 34, "a distribution, not one sample"): 1, 2, 4 and 8
 * server processes on one database, each driving its share of `products` products of `productTasks` instant tasks
 * (default 2,000 × 10), `inFlight` at a time. Each server first opens its pool and runs `warmup` products of its own
 * (not counted: a fleet's servers are long-lived, so the figure is their steady state, not Node's start-up and JIT
 * warm-up; a server's CPU per task still falls until about 200 products of 10 tasks), then reports ready; the clock starts when every server is ready and is told to go at once, and stops
 * when the last one is done. Printed per server count, over `rounds` rounds: tasks per second (median, lowest,
 * highest), the ratio to one server (no contention collapse: 8 servers ≥ 1 server), statements per task (client
 * round trips of every server), CPU per task of the servers and of PostgreSQL, and the time from spawn to ready.
 * Spawned servers run `postgres.js --server <json>` (this module's `fleetServer`).
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { PostgresAuthority } from "../../src/adapters/persistence/postgres-authority.js";
import { PostgresLiveness } from "../../src/adapters/persistence/postgres-liveness.js";
import { ProcessLiveness } from "../../src/adapters/system/process-liveness.js";
import { fleetWatches } from "../../src/core/product/fleet.js";
import { serverNodeArgs } from "./support/paths.js";
import { runProducts, withSchema, type RunResult } from "./support/pg-run.js";

const fmt = (n: number, digits = 0): string =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

export interface FleetServerOptions {
  url: string;
  tasks: number;
  products: number;
  /** Products this server drives at once. */
  inFlight: number;
  id: number;
  /** Products run before it reports ready, not counted (default 0). */
  warmup?: number;
  /** Run the fleet's change feed, recovery and liveness as `serve --recover` does (default false: the service only). */
  fleet?: boolean;
}

/** The line a fleet server prints when it is warm and waits for `go` on stdin. */
const READY = "ready";

/**
 * One fleet server: opens its pool on the shared schema, runs `warmup` products, prints `ready`, waits for one line
 * on stdin, runs its products and prints its result as one JSON line.
 */
export async function fleetServer(options: FleetServerOptions): Promise<void> {
  const authority = await PostgresAuthority.open(options.url, { maxConnections: 4, announce: fleetWatches });
  const processLiveness = new ProcessLiveness();
  const ownerId = options.fleet ? processLiveness.ownerId : `bench-server-${options.id}`;
  const liveness = options.fleet
    ? await PostgresLiveness.open(options.url, { ownerId, fallback: processLiveness })
    : undefined;
  const products = (n: number): Promise<RunResult> =>
    runProducts(
      authority,
      options.tasks,
      n,
      ownerId,
      Math.min(4, options.tasks),
      options.inFlight,
      liveness ? { liveness } : undefined,
      false,
    );
  if ((options.warmup ?? 0) > 0) await products(options.warmup ?? 0);
  const go = new Promise<void>((resolve) => createInterface({ input: process.stdin }).once("line", () => resolve()));
  process.stdout.write(`${READY}\n`);
  await go;
  const profile = await profileRun();
  const cpu0 = process.cpuUsage();
  const result = await products(options.products);
  const cpu = process.cpuUsage(cpu0);
  await profile?.(options.id);
  result.cpuRunMs = (cpu.user + cpu.system) / 1000;
  if (process.env.FLEET_CPU_DEBUG) {
    const switches = readFileSync(`/proc/${process.pid}/status`, "utf8")
      .split("\n")
      .filter((l) => l.includes("ctxt_switches"))
      .join(", ");
    process.stderr.write(
      `server ${options.id}: ${result.tasks} tasks, CPU ms user ${cpu.user / 1000} system ${cpu.system / 1000}; ${switches}\n`,
    );
  }
  await authority.close();
  await liveness?.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.stdin.destroy();
}

/**
 * With FLEET_PROFILE_DIR set, a V8 CPU profile of this server's timed run only (not its start-up and warm-up):
 * starts it now and returns the function that stops it and writes `<dir>/fleet-<servers>-<id>-<pid>.cpuprofile`.
 */
async function profileRun(): Promise<((id: number) => Promise<void>) | undefined> {
  const dir = process.env.FLEET_PROFILE_DIR;
  if (!dir) return undefined;
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 200 });
  await session.post("Profiler.start");
  return async (id) => {
    const { profile } = await session.post("Profiler.stop");
    writeFileSync(
      join(dir, `fleet-${process.env.FLEET_PROFILE_SERVERS ?? "x"}-${id}-${process.pid}.cpuprofile`),
      JSON.stringify(profile),
    );
    session.disconnect();
  };
}

/** A spawned fleet server: `ready` settles when it is warm, `go` starts its run, `result` is its last line. */
interface SpawnedServer {
  ready: Promise<void>;
  go: () => void;
  result: Promise<RunResult>;
}

function spawnServer(options: FleetServerOptions, servers: number): SpawnedServer {
  const script = join(dirname(fileURLToPath(import.meta.url)), "postgres.js");
  const args = [...serverNodeArgs(), script, "--server", JSON.stringify(options)];
  const child = spawn(process.execPath, args, {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, FLEET_PROFILE_SERVERS: String(servers) },
  });
  const lines: string[] = [];
  let readySeen: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (readySeen = resolve));
  createInterface({ input: child.stdout }).on("line", (line) => {
    if (line === READY) readySeen();
    else lines.push(line);
  });
  const result = new Promise<RunResult>((resolve, reject) =>
    child.once("exit", (code) =>
      code === 0 && lines.length > 0
        ? resolve(JSON.parse(lines[lines.length - 1] ?? "") as RunResult)
        : reject(new Error(`server ${options.id} exited ${code}`)),
    ),
  );
  return {
    ready: Promise.race([ready, result.then(() => undefined)]),
    go: () => child.stdin.end("go\n"),
    result,
  };
}

export interface FleetFigure {
  servers: number;
  /** Tasks of one round. */
  tasks: number;
  /** Median time from the first spawn to every server warm and ready (ms; not in the throughput). */
  readyMs: number;
  /** Median wall time of a round, from `go` to the last server done. */
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
  /** Spawn of the first server → the last one warm and ready (ms). */
  readyMs: number;
  wallMs: number;
  tasks: number;
  tasksPerSecond: number;
  storeShare: number;
  statementsPerTask: number;
  /** CPU ms per task: every server during its run, PostgreSQL (when readable). */
  cpu: FleetCpu;
}

/** CPU milliseconds per task (user + system) of one round. */
export interface FleetCpu {
  /** The server processes while they ran their products. */
  serversRun: number;
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
  o: { products: number; productTasks: number; inFlight: number; warmup: number; fleet?: boolean },
): Promise<FleetRound> {
  const schema = `bench_fleet${servers}_${process.pid}`;
  const schemaUrl = withSchema(url, schema);
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await (await PostgresAuthority.open(schemaUrl)).close(); // migrate once before the clock starts
  try {
    const products = Math.max(1, Math.round(o.products / servers));
    const started = performance.now();
    const spawned = Array.from({ length: servers }, (_, id) =>
      spawnServer(
        {
          url: schemaUrl,
          tasks: o.productTasks,
          products,
          inFlight: o.inFlight,
          id,
          warmup: o.warmup,
          fleet: o.fleet ?? false,
        },
        servers,
      ),
    );
    await Promise.all(spawned.map((s) => s.ready));
    const readyMs = performance.now() - started;
    // A checkpoint now, not in the timed window: PostgreSQL's timed one (every 5 min by default) would otherwise land
    // in some rounds and not others, and flush every buffer the warm-ups dirtied (needs a superuser; else skipped).
    await admin.query("CHECKPOINT").catch(() => undefined);
    const pgCpu0 = await postgresCpuMs(admin);
    const t0 = performance.now();
    const monotonic = (): string => (Number(process.hrtime.bigint()) / 1e9).toFixed(6);
    const goAt = monotonic();
    for (const s of spawned) s.go();
    const results = await Promise.all(spawned.map((s) => s.result));
    const wallMs = performance.now() - t0;
    // CLOCK_MONOTONIC seconds, for `perf record -k CLOCK_MONOTONIC` + `perf report --time go,done`.
    if (process.env.FLEET_CPU_DEBUG) process.stderr.write(`${servers} server(s): go ${goAt}, done ${monotonic()}\n`);
    const tasks = results.reduce((n, r) => n + r.tasks, 0);
    // Backends add their CPU to the postmaster's when they exit; the pools closed before their servers exited.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const pgCpu1 = await postgresCpuMs(admin);
    const cpu: FleetCpu = {
      serversRun: results.reduce((n, r) => n + (r.cpuRunMs ?? Number.NaN), 0) / tasks,
      postgres: pgCpu0 === undefined || pgCpu1 === undefined ? Number.NaN : (pgCpu1 - pgCpu0) / tasks,
    };
    return {
      cpu,
      readyMs,
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
export async function fleetFigures(
  url: string,
  admin: pg.Client,
  o: {
    products: number;
    productTasks: number;
    inFlight: number;
    rounds: number;
    servers: readonly number[];
    /** Products each server runs before the clock starts (not counted). */
    warmup: number;
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
          `${fmt(r.storeShare * 100)} % in store calls; CPU ms/task: servers ${fmt(r.cpu.serversRun, 3)}, ` +
          `PostgreSQL ${fmt(r.cpu.postgres, 3)}; spawn → ready ${fmt(r.readyMs / 1000, 1)} s`,
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
      readyMs: median(rs.map((r) => r.readyMs)),
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
        postgres: median(rs.map((r) => r.cpu.postgres)),
      },
    };
  });
}

/** Part 2's table in Markdown, with its heading and the verdict on 8 servers. */
export function fleetMarkdown(fleet: readonly FleetFigure[], warmup: number): string {
  const lines: string[] = [];
  const fleetTasks = fleet[0]?.tasks ?? 0;
  if (fleet.length > 0) {
    const rounds = fleet[0]?.rounds.length ?? 0;
    lines.push(
      `#### ${fmt(fleetTasks)} tasks on one PostgreSQL database, shared by 1, 2, 4 and 8 server processes ` +
        `(${rounds} round${rounds === 1 ? "" : "s"}; each server warmed by ${fmt(warmup)} products of its own first, ` +
        "the clock started when all were ready)",
      "",
      "| servers | wall (s, median) | tasks/s: median (lowest–highest) | each round | vs 1 server (medians) | statements/task | CPU ms/task, servers | CPU ms/task, PostgreSQL | time in store calls (mean per server; summed over its products in flight) | spawn → all ready (s, median) |",
      "|---|---|---|---|---|---|---|---|---|---|",
    );
  }
  for (const f of fleet) {
    lines.push(
      `| ${f.servers} | ${fmt(f.wallMs / 1000, 2)} | ${fmt(f.tasksPerSecond)} (${fmt(f.minTasksPerSecond)}–` +
        `${fmt(f.maxTasksPerSecond)}) | ${f.rounds.map((r) => fmt(r)).join(", ")} | ${fmt(f.vsOne, 2)}× | ` +
        `${fmt(f.statementsPerTask, 2)} | ${fmt(f.cpu.serversRun, 2)} | ${fmt(f.cpu.postgres, 2)} | ` +
        `${fmt(f.storeShare * 100)} % | ${fmt(f.readyMs / 1000, 1)} |`,
    );
  }
  const eight = fleet.find((f) => f.servers === 8);
  if (eight) lines.push("", `8 servers ≥ 1 server's throughput (medians): ${eight.vsOne >= 1 ? "yes" : "**no**"}.`);
  return lines.join("\n");
}
