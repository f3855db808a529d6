/**
 * Regression (issue 34): queries must never overlap on one `pg` client. node-postgres queues a query sent while the
 * client is still executing another one and warns (`DeprecationWarning: Calling client.query() when the client is
 * already executing a query`); pg 9 refuses it. The authority used to send a session setting from the pool's
 * `connect` event, which node-postgres does not wait for, so the first real query on every new connection overlapped
 * it. This test opens fresh connections under load (the first query on each races the setting) and fails when the
 * warning is emitted at all.
 *
 * Runs only with ACP_ORCHESTRATOR_TEST_PG (see test/support/postgres.ts).
 */
import { afterAll, expect, it } from "vitest";
import { describePostgres, dropSchema, freshSchema, openTestAuthority } from "../../support/postgres.js";

const OVERLAP = "already executing a query";
const schemas: string[] = [];
afterAll(async () => {
  if (process.env.ACP_ORCHESTRATOR_TEST_PG) for (const s of schemas) await dropSchema(s);
});

describePostgres("postgres authority: one query at a time per client", () => {
  it("opens connections, writes and reads concurrently, and never overlaps two queries on one client", async () => {
    // The warning is a DeprecationWarning: make sure this process would emit it (node --no-deprecation hides them).
    const hidden = process.noDeprecation;
    process.noDeprecation = false;
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => {
      warnings.push(warning.message);
    };
    process.on("warning", onWarning);
    const schema = freshSchema();
    schemas.push(schema);
    const authority = await openTestAuthority({ schema, maxConnections: 6 });
    try {
      for (let round = 0; round < 3; round += 1) {
        // Six at once: the pool opens new connections and hands each to a query at once.
        await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            authority
              .put("p", "k", `r${round}-${i}`, { round, i }, null)
              .then(() => authority.get("p", "k", `r${round}-${i}`)),
          ),
        );
      }
      const listed = await authority.list("p", "k");
      // process.emitWarning delivers on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect({ listed: listed.length, overlaps: warnings.filter((w) => w.includes(OVERLAP)) }).toEqual({
        listed: 18,
        overlaps: [],
      });
    } finally {
      process.off("warning", onWarning);
      process.noDeprecation = hidden;
      await authority.close();
    }
  });
});
