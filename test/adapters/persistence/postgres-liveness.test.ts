/**
 * PostgresLiveness (postgres-liveness.ts, docs/FLEET.md) on a real PostgreSQL: the verdicts a survivor gives, the
 * refusal of a second process with the same owner id, and self-fencing when the liveness session is terminated.
 *
 * Runs only with ACP_ORCHESTRATOR_TEST_PG (see test/support/postgres.ts).
 */
import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { PostgresLiveness, livenessKey } from "../../../src/adapters/persistence/postgres-liveness.js";
import type { OwnerLivenessEvent } from "../../../src/core/ports.js";
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
});
