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
import { ProductEvent, productStream } from "../../src/core/product/records.js";
import {
  SLOW_FALLBACKS,
  dropAfterAll,
  launch,
  leaseOwner,
  projectOf,
  readLog,
  streamProblems,
  workspace,
  ONE_TASK,
} from "../support/liveness-fleet.js";
import {
  adminQuery,
  describePostgres,
  eventually,
  freshSchema,
  TEST_PG_URL,
  urlWithSchema,
} from "../support/postgres.js";
import { startServer, tempDir } from "../support/server-process.js";
import { recordedTasks } from "../support/task-events.js";

const { schemas, roles } = dropAfterAll();

describePostgres("liveness through PostgreSQL: partition", () => {
  it("a partitioned owner stops its agent within the bound; a survivor takes over; the old attempt is never integrated", async () => {
    const schema = freshSchema();
    schemas.push(schema);
    const logPath = join(tempDir(), "executions.jsonl");
    // A first attempt runs 60 s: it is still running when the owner is cut off, unless the owner stops it; the
    // survivor's attempts take 200 ms.
    const cwd = workspace(logPath, 60_000, 60_000, 200);
    // The owner logs in with a role of its own, so that only its sessions are cut.
    const role = `acp_owner_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
    roles.push(role);
    const password = randomUUID();
    const admin = new URL(TEST_PG_URL as string);
    await adminQuery(
      `SET password_encryption = 'md5'; CREATE ROLE ${role} LOGIN PASSWORD '${password}' IN ROLE ${admin.username}`,
    );
    const ownerUrl = new URL(urlWithSchema(schema));
    ownerUrl.username = role;
    ownerUrl.password = password;
    const url = urlWithSchema(schema);
    // The survivor creates the schema first (as the database owner); the owner's role inherits its privileges.
    const survivor = await startServer({
      statePath: url,
      cwd,
      env: { ...SLOW_FALLBACKS, ACP_ORCHESTRATOR_OWNER_ID: `host-s-${randomUUID()}` },
      args: ["--recover", "--log-level", "warn"],
    });
    const ownerId = `host-o-${randomUUID()}`;
    const owner = await startServer({
      statePath: ownerUrl.toString(),
      cwd,
      env: { ...SLOW_FALLBACKS, ACP_ORCHESTRATOR_OWNER_ID: ownerId },
      args: ["--log-level", "warn"],
    });
    const authority = await PostgresAuthority.open(url, { maxConnections: 2 });
    try {
      const productId = await launch(owner, cwd, "Partition", ONE_TASK);
      const projectId = await projectOf(authority, productId);
      await eventually(
        () => readLog(logPath).some((l) => l.event === "start" && l.ppid === owner.child.pid),
        30_000,
        "the owner's agent to start",
      );
      const agentPid = readLog(logPath).find((l) => l.ppid === owner.child.pid)?.pid as number;
      // Cut the owner off: no new session for its role, every current one terminated.
      const cutAt = performance.now();
      await adminQuery(`ALTER ROLE ${role} NOLOGIN`);
      await adminQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", [role]);
      await eventually(() => !processRuns(agentPid), 15_000, "the owner's agent to stop");
      const agentStoppedMs = Math.round(performance.now() - cutAt);
      await eventually(async () => (await leaseOwner(authority, projectId, productId)) !== ownerId, 15_000, "takeover");
      const takenOverMs = Math.round(performance.now() - cutAt);
      await eventually(
        async () => (await survivor.request<{ phase: string }>("product.status", { productId })).phase === "completed",
        60_000,
        "the survivor to complete the product",
      );
      // The partition heals: the owner sees the new owner and says so to its client.
      await adminQuery(`ALTER ROLE ${role} LOGIN`);
      const lost = await owner.waitFor((n) => n.method === "product.ownershipLost", 30_000);
      const events = (await authority.readEvents(projectId, productStream(productId), 0)).map(({ event }) =>
        ProductEvent.parse(event),
      );
      const attempts = events.flatMap((e) => recordedTasks(e).filter((t) => t.taskId === "a"));
      const completedA = attempts.find((t) => t.status === "completed");
      const log = readLog(logPath);
      process.stderr.write(
        `partition: the owner's agent stopped ${agentStoppedMs} ms after its sessions were cut; ` +
          `the survivor owned the product ${takenOverMs} ms after\n`,
      );
      expect({
        agentStoppedWithinBound: agentStoppedMs <= 5_000 + 2_000 + 1_000,
        ownerDone: log.filter((l) => l.ppid === owner.child.pid && l.event === "done").length,
        // The completion is the survivor's attempt (the owner's, attempt 1, was interrupted and never integrated).
        completedAttempt: (completedA?.attempts ?? 0) >= 2,
        survivorRanA: log.some((l) => l.ppid === survivor.child.pid && l.taskId === "a" && l.event === "done"),
        problems: await streamProblems(authority, projectId, productId, ONE_TASK),
        lost: { productId: lost.params.productId, ownerId: lost.params.ownerId },
        toldAtOnce: owner.notifications.some((n) => n.method === "product.persistenceError"),
      }).toEqual({
        agentStoppedWithinBound: true,
        ownerDone: 0,
        completedAttempt: true,
        survivorRanA: true,
        problems: [],
        lost: { productId, ownerId },
        toldAtOnce: true,
      });
    } finally {
      await authority.close();
      await adminQuery(`ALTER ROLE ${role} LOGIN`).catch(() => undefined);
      await Promise.all([owner.close(), survivor.close()]);
    }
  }, 300_000);
});

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
