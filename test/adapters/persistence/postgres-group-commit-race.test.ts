/**
 * Group commit between servers (issue 32, postgres-group-commit.ts): three authorities on one schema, as three
 * servers open it (`announce: () => false`: every append and put here goes through group commit), each sending
 * batches of appends and record updates on the SAME 16 streams and records in its own random order, at sequence
 * numbers and revisions it may no longer hold (a fenced owner). The stores hold 20,000 other rows, so the batch
 * statements lock rows in the order of their `VALUES` list (index nested loop) and two batches may deadlock: the
 * victim's writes are sent again alone. Whatever the interleaving, each write succeeds exactly when it was the one
 * that moved its row: every stream holds exactly the appends that succeeded, at the sequence numbers they were
 * given, and every record's revision counts exactly the updates that succeeded; every refused put carries the
 * current revision. Runs only with ACP_ORCHESTRATOR_TEST_PG (test/support/postgres.ts).
 */
import { expect, it } from "vitest";
import type { PostgresAuthority } from "../../../src/adapters/persistence/postgres-authority.js";
import { AuthorityConflict } from "../../../src/core/ports.js";
import { adminQuery, describePostgres, dropSchema, freshSchema, openTestAuthority } from "../../support/postgres.js";

const STREAMS = 16;
const ROUNDS = 30;

function shuffled(n: number): number[] {
  const xs = Array.from({ length: n }, (_, i) => i);
  for (let i = xs.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [xs[i], xs[j]] = [xs[j] as number, xs[i] as number];
  }
  return xs;
}

describePostgres("PostgresAuthority: group commit between servers", () => {
  it("racing batches of three servers on the same rows: each write wins exactly when it moved its row", async () => {
    const schema = freshSchema();
    const servers: PostgresAuthority[] = [];
    for (let i = 0; i < 3; i += 1) servers.push(await openTestAuthority({ schema, announce: () => false }));
    const first = servers[0] as PostgresAuthority;
    try {
      for (let s = 0; s < STREAMS; s += 1) {
        await first.appendEvents("p", `s${s}`, [{ w: "init" }], 0);
        await first.put("p", "k", `r${s}`, { w: "init" }, null);
      }
      await adminQuery(`INSERT INTO "${schema}".streams SELECT 'q', 'x' || g, 1 FROM generate_series(1, 20000) g`);
      await adminQuery(
        `INSERT INTO "${schema}".records (project_id, kind, id, value, revision, updated_at)
         SELECT 'q', 'k', 'x' || g, '{}', 1, '' FROM generate_series(1, 20000) g`,
      );
      await adminQuery(`ANALYZE "${schema}".streams, "${schema}".records`);
      const appended = new Map<string, string[]>();
      const updated = new Map<string, number[]>();
      const unexpected: unknown[] = [];
      const server = async (a: PostgresAuthority, name: string): Promise<void> => {
        const lastSeq = new Map<string, number>();
        const revision = new Map<string, number>();
        for (let round = 0; round < ROUNDS; round += 1) {
          await Promise.all(
            shuffled(STREAMS).map(async (s) => {
              const tag = `${name}-${round}`;
              const stream = `s${s}`;
              const expectedSeq = lastSeq.get(stream) ?? 1;
              try {
                await a.appendEvents("p", stream, [{ w: tag }], expectedSeq);
                lastSeq.set(stream, expectedSeq + 1);
                appended.set(stream, [...(appended.get(stream) ?? []), `${expectedSeq + 1}:${tag}`]);
              } catch (error) {
                if (!(error instanceof AuthorityConflict)) unexpected.push(error);
                lastSeq.set(stream, (await a.readEvents("p", stream, 0)).length);
              }
              const id = `r${s}`;
              const expected = revision.get(id) ?? 1;
              try {
                const put = await a.put("p", "k", id, { w: tag }, expected);
                if (put.revision !== expected + 1)
                  unexpected.push(new Error(`revision ${put.revision} at ${expected}`));
                revision.set(id, put.revision);
                updated.set(id, [...(updated.get(id) ?? []), put.revision]);
              } catch (error) {
                const current = (error as { details?: { revision?: number } }).details?.revision;
                if (!(error instanceof AuthorityConflict) || current === undefined) unexpected.push(error);
                else revision.set(id, current);
              }
            }),
          );
        }
      };
      await Promise.all(servers.map((a, i) => server(a, `a${i}`)));
      expect(unexpected).toEqual([]);
      for (let s = 0; s < STREAMS; s += 1) {
        const events = await first.readEvents("p", `s${s}`, 0);
        const stored = events.slice(1).map((e) => `${e.seq}:${(e.event as { w: string }).w}`);
        const bySeq = (x: string): number => Number(x.split(":")[0]);
        expect(stored).toEqual([...(appended.get(`s${s}`) ?? [])].sort((x, y) => bySeq(x) - bySeq(y)));
        const revisions = [...(updated.get(`r${s}`) ?? [])].sort((x, y) => x - y);
        expect(revisions).toEqual(revisions.map((_, i) => i + 2));
        expect((await first.get("p", "k", `r${s}`))?.revision).toBe(revisions.length + 1);
      }
    } finally {
      for (const a of servers) await a.close();
      await dropSchema(schema);
    }
  }, 120_000);
});
