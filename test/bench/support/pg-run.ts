/**
 * What the PostgreSQL figures share (test/bench/postgres.ts, postgres-fleet.ts): a count of the statements this
 * process sends (every `Client.query`, pooled or not: one round trip each), and `runProducts`, which plans and runs
 * products on one in-process service, optionally as a fleet server (`serve --recover`'s Fleet).
 */
import pg from "pg";
import type { OwnerLiveness, RunStateAuthority } from "../../../src/core/ports.js";
import { DEFAULT_PRODUCT_OPTIONS } from "../../../src/core/product/context.js";
import { Fleet } from "../../../src/core/product/fleet.js";
import { randomDag } from "./dag.js";
import { benchService, realClock, type MeterReading } from "./in-process.js";

/** Statements by name, counted with FLEET_STMT_DEBUG=1 (see test/bench/postgres.ts's knobs). */
const stmtDebug = new Map<string, number>();
process.on("exit", () => {
  if (process.env.FLEET_STMT_DEBUG && stmtDebug.size > 0)
    process.stderr.write(`${process.pid} ${JSON.stringify([...stmtDebug].sort((a, b) => b[1] - a[1]).slice(0, 15))}\n`);
});
/** Statements this process sent to PostgreSQL (every `Client.query`, pooled or not): one round trip each. */
let statementsSent = 0;

/** Statements this process has sent to PostgreSQL so far (see `statementsSent`). */
export const statementCount = (): number => statementsSent;
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
    if (key === "acp-get" || key.startsWith("acp-put")) key += ` ${String(v?.[1])}`;
    stmtDebug.set(key, (stmtDebug.get(key) ?? 0) + 1);
  }
  return clientQuery.apply(this, args);
};

export function withSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set("schema", schema);
  return u.toString();
}

export interface RunResult {
  tasks: number;
  runMs: number;
  meter: MeterReading;
  statements: number;
  /** CPU (user + system, ms) of this process during the run (fleet servers only). */
  cpuRunMs?: number;
}

/**
 * Plans and runs `products` products of `tasks` tasks each, `inFlight` at a time, on one in-process service.
 * `countBytes` (default true) has the meter serialise every write to count its bytes: bench work, not the server's,
 * so the fleet figure, which prints no bytes, turns it off.
 */
export async function runProducts(
  authority: RunStateAuthority,
  tasks: number,
  products: number,
  ownerId: string,
  maxParallelTasks: number,
  inFlight = 1,
  fleet?: { liveness: OwnerLiveness },
  countBytes = true,
): Promise<RunResult> {
  const plan = randomDag({ tasks, width: Math.min(100, tasks) });
  const b = benchService(authority, plan, { maxParallelTasks, ownerId }, countBytes, "instant", fleet?.liveness);
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
