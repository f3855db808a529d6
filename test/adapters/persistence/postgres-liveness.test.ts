/**
 * PostgresLiveness (postgres-liveness.ts, docs/FLEET.md) on a real PostgreSQL: the verdicts a survivor gives, the
 * refusal of a second process with the same owner id, self-fencing when the liveness session is terminated, and a
 * takeover whose dead verdict went stale before the lease was written (issue 32: the partition test's takeover was
 * missed under load).
 *
 * Runs only with ACP_ORCHESTRATOR_TEST_PG (see test/support/postgres.ts).
 */
import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { PostgresAuthority } from "../../../src/adapters/persistence/postgres-authority.js";
import { PostgresLiveness, livenessKey } from "../../../src/adapters/persistence/postgres-liveness.js";
import type { OwnerLiveness, OwnerLivenessEvent } from "../../../src/core/ports.js";
import { ProductLease } from "../../../src/core/product/lease.js";
import { ProductStore } from "../../../src/core/product/store.js";
import { FakeClock, RecordingLogger } from "../../support/fakes.js";
import { adminQuery, describePostgres, eventually, freshSchema, urlWithSchema } from "../../support/postgres.js";

function open(url: string, ownerId: string): Promise<PostgresLiveness> {
  return PostgresLiveness.open(url, { ownerId, probeMs: 200, fenceMs: 1_000 });
}

describePostgres("postgres liveness", () => {
  it("an owner seen holding its lock is alive, dead once its session ends; one never seen is unknown", async () => {
    const url = urlWithSchema(freshSchema());
    const survivor = await open(url, `s-${randomUUID()}`);
    const other = await open(url, `o-${randomUUID()}`);
    const events: OwnerLivenessEvent[] = [];
    survivor.watch((e) => events.push(e));
    try {
      await eventually(() => survivor.check(other.ownerId) === "alive", 10_000, "the other owner to be seen alive");
      await other.close();
      await eventually(() => survivor.check(other.ownerId) === "dead", 10_000, "the other owner to be seen dead");
      expect({
        never: survivor.check(`never-${randomUUID()}`),
        self: survivor.selfLive(),
        gone: events.some((e) => e.kind === "ownersGone"),
      }).toEqual({ never: "unknown", self: true, gone: true });
    } finally {
      await Promise.all([survivor.close(), other.close()]);
    }
  });

  it("refuses a second process with the same owner id", async () => {
    const url = urlWithSchema(freshSchema());
    const ownerId = `dup-${randomUUID()}`;
    const first = await open(url, ownerId);
    try {
      await expect(open(url, ownerId)).rejects.toThrow(/holds the liveness lock of owner id/);
    } finally {
      await first.close();
    }
  });

  it("fences itself when its session is terminated, and is live again after taking the lock anew", async () => {
    const schema = freshSchema();
    const url = urlWithSchema(schema);
    const liveness = await open(url, `t-${randomUUID()}`);
    const events: string[] = [];
    liveness.watch((e) => events.push(e.kind));
    try {
      const key = livenessKey(schema, liveness.ownerId);
      await adminQuery(
        `SELECT pg_terminate_backend(pid) FROM pg_locks
         WHERE locktype = 'advisory' AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint)::text = $1`,
        [key],
      );
      await eventually(() => events.includes("selfLost"), 10_000, "selfLost");
      const fenced = liveness.selfLive();
      await eventually(() => events.includes("selfBack"), 20_000, "selfBack");
      expect({ fenced, back: liveness.selfLive(), order: events.filter((e) => e !== "ownersGone") }).toEqual({
        fenced: false,
        back: true,
        order: ["selfLost", "selfBack"],
      });
    } finally {
      await liveness.close();
    }
  });

  it("a takeover whose dead verdict went stale while the resume ran still happens: the lease asks for a fresh probe", async () => {
    // Regression (issue 32): the verdict lasts 1.5 probe periods after its probe was sent; a recovery pass that read
    // headers, loaded the product and checked drift for longer than that (a loaded machine) found the owner
    // "unknown" at the lease's compare-and-swap, gave up, and the takeover waited for the 60 s scan. Time is a
    // FakeClock here (probes only when asked: the period is a minute), so the verdict's age is exact.
    const url = urlWithSchema(freshSchema());
    const clock = new FakeClock(Date.now());
    const slow = { probeMs: 60_000, fenceMs: 600_000, now: () => clock.now() };
    const survivor = await PostgresLiveness.open(url, { ownerId: `s-${randomUUID()}`, ...slow });
    const owner = await PostgresLiveness.open(url, { ownerId: `o-${randomUUID()}`, ...slow });
    const authority = await PostgresAuthority.open(url, { maxConnections: 2 });
    const store = new ProductStore(authority, 3);
    const leaseOf = (ownerId: string, liveness: OwnerLiveness) =>
      new ProductLease(
        store,
        clock,
        new RecordingLogger(),
        "proj",
        "prd_stale",
        { owner: ownerId, ttlMs: 3_000_000, renewMs: 3_000_000 },
        () => undefined,
        liveness,
      );
    try {
      await leaseOf(owner.ownerId, owner).acquire();
      clock.advance(60_000);
      await survivor.fresh();
      const seen = survivor.check(owner.ownerId);
      await owner.close();
      await eventually(
        async () => {
          clock.advance(60_000);
          await survivor.fresh();
          return survivor.check(owner.ownerId) === "dead";
        },
        10_000,
        "the owner to be seen dead",
      );
      clock.advance(100_000); // the resume took long: the verdict is older than 1.5 probe periods
      const stale = survivor.check(owner.ownerId);
      const taken = await leaseOf(survivor.ownerId, survivor)
        .acquire()
        .then(
          () => "taken",
          (error: unknown) => String(error),
        );
      const record = await authority.get("proj", "lease", "prd_stale");
      expect({ seen, stale, taken, owner: (record?.value as { owner: string }).owner }).toEqual({
        seen: "alive",
        stale: "unknown",
        taken: "taken",
        owner: survivor.ownerId,
      });
    } finally {
      await Promise.all([survivor.close(), owner.close(), authority.close()]);
    }
  });
});
