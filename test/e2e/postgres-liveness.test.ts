/**
 * Liveness through PostgreSQL (issue 32, "Must show"; docs/FLEET.md), with the built server as real subprocesses and
 * the logging agent as real worker subprocesses (it logs every execution, with the pid of the server that started
 * it, to a file outside the servers):
 *
 * - Takeover: two survivors run all along; each of 20 rounds starts a fresh server, lets it start two products and
 *   kills it -9 while their first tasks run. Leases live 60 s and the recovery scan runs every 60 s, so only the
 *   liveness lock can explain a fast takeover; every other round the victim has a distinct host id (an owner id
 *   process liveness cannot read), the others the default same-host id. Asserted: p95 of kill → a survivor's lease
 *   ≤ 2 s, every product completed, every task completed exactly once in its stream and never started again after
 *   its completion, and no survivor's worker finished a task twice.
 * - Partition: the owner's sessions are terminated (`pg_terminate_backend`) and its role may not log in again while
 *   its agent runs: the owner stops its agent within the bound, the survivor takes over and completes the product,
 *   the completion comes from the survivor's attempt; the owner's client hears `product.persistenceError` at once and,
 *   once the owner can reach the database again, `product.ownershipLost`.
 *
 * Runs only with ACP_ORCHESTRATOR_TEST_PG (see test/support/postgres.ts).
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { expect, it } from "vitest";
import { PostgresAuthority } from "../../src/adapters/persistence/postgres-authority.js";
import {
  SLOW_FALLBACKS,
  dropAfterAll,
  launch,
  leaseOwner,
  projectOf,
  readLog,
  streamProblems,
  workspace,
  CHAIN,
} from "../support/liveness-fleet.js";
import { describePostgres, eventually, freshSchema, urlWithSchema } from "../support/postgres.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";

const { schemas } = dropAfterAll();

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

// The partition case is in postgres-partition.test.ts, in a worker of its own: run after these kill -9 rounds in one
// worker it timed out waiting for the takeover, while it passes alone (cause not found yet; session of 2026-12-03).
describePostgres("liveness through PostgreSQL", () => {
  it("kill -9 of a server, 20 rounds: a survivor takes its products over within 2 s (p95), none run twice or lost", async () => {
    const schema = freshSchema();
    schemas.push(schema);
    const url = urlWithSchema(schema);
    const logPath = join(tempDir(), "executions.jsonl");
    // Tasks take 300-500 ms: long enough to kill a server mid-task, short enough for cheap rounds.
    const cwd = workspace(logPath, 300, 500);
    const args = ["--recover", "--log-level", "warn"];
    const start = (ownerId?: string, level = "warn"): Promise<ServerHandle> =>
      startServer({
        statePath: url,
        cwd,
        env: { ...SLOW_FALLBACKS, ...(ownerId ? { ACP_ORCHESTRATOR_OWNER_ID: ownerId } : {}) },
        args: [...args.slice(0, -1), level],
      });
    // The survivors log at debug level: their lines are printed when a takeover is late (see below).
    const survivors = await Promise.all([
      start(`host-b-${randomUUID()}`, "debug"),
      start(`host-c-${randomUUID()}`, "debug"),
    ]);
    const authority = await PostgresAuthority.open(url, { maxConnections: 2 });
    const takeoverMs: number[] = [];
    const productIds: string[] = [];
    const victimPids = new Set<number>();
    try {
      let next = start(`host-a-${randomUUID()}`);
      for (let round = 0; round < 20; round += 1) {
        const victim = await next;
        // The next victim starts while this round runs (odd rounds: same host, the default owner id).
        next = start(round % 2 === 0 ? undefined : `host-a-${randomUUID()}`);
        victimPids.add(victim.child.pid ?? -1);
        const ids = await Promise.all([0, 1].map((i) => launch(victim, cwd, `Round ${round}-${i}`)));
        productIds.push(...ids);
        const projects = await Promise.all(ids.map((id) => projectOf(authority, id)));
        await eventually(
          () => ids.every((id) => readLog(logPath).some((l) => l.productId === id && l.ppid === victim.child.pid)),
          30_000,
          `the victim's first tasks to start (round ${round})`,
        );
        // The victim's owner id is read before the kill: read after it, a survivor may already hold the lease (the
        // liveness probe is faster than this process on a loaded machine), and the wait below would never end.
        const victimOwners = await Promise.all(ids.map((id, i) => leaseOwner(authority, projects[i] as string, id)));
        expect(victimOwners.every((owner) => owner !== null)).toBe(true);
        const killedAt = performance.now();
        await victim.kill();
        await Promise.all(
          ids.map(async (id, i) => {
            const projectId = projects[i] as string;
            const victimOwner = victimOwners[i];
            await eventually(
              async () => {
                const owner = await leaseOwner(authority, projectId, id);
                return owner !== null && owner !== victimOwner;
              },
              30_000,
              `a survivor to take ${id} over`,
            ).catch((err: unknown) => {
              // What the survivors logged (warnings and errors) is what tells why neither took the product over.
              const logs = survivors.map((s, i) => `survivor ${i} stderr:\n${s.stderr().slice(-60000)}`).join("\n");
              throw new Error(`${err instanceof Error ? err.message : String(err)}\n${logs}`);
            });
            takeoverMs.push(Math.round(performance.now() - killedAt));
          }),
        );
      }
      await (await next).close();
      await eventually(
        async () => {
          const { products } = await (survivors[0] as ServerHandle).request<{
            products: { productId: string; phase: string }[];
          }>("product.list", {});
          return products.filter((p) => productIds.includes(p.productId) && p.phase === "completed").length === 40;
        },
        120_000,
        "40 completed products",
      );
      const problems: string[] = [];
      const log = readLog(logPath);
      for (const id of productIds) {
        problems.push(...(await streamProblems(authority, await projectOf(authority, id), id)));
        for (const task of CHAIN) {
          const done = log.filter(
            (l) => l.productId === id && l.taskId === task.taskId && l.event === "done" && !victimPids.has(l.ppid),
          );
          if (done.length > 1) problems.push(`${id}/${task.taskId}: finished ${done.length} times by survivors`);
        }
      }
      const p95 = percentile(takeoverMs, 95);
      process.stderr.write(
        `kill -9 takeover through the liveness lock, 40 products: p50 ${percentile(takeoverMs, 50)} ms, ` +
          `p95 ${p95} ms, max ${Math.max(...takeoverMs)} ms\n`,
      );
      expect({ problems, takeovers: takeoverMs.length, p95WithinTwoSeconds: p95 <= 2_000 }).toEqual({
        problems: [],
        takeovers: 40,
        p95WithinTwoSeconds: true,
      });
    } finally {
      await authority.close();
      await Promise.all(survivors.map((s) => s.close()));
    }
  }, 600_000);
});
