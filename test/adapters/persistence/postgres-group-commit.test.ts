/**
 * Group commit on PostgreSQL (issue 32, postgres-group-commit.ts with postgres-append-batch.ts and
 * postgres-record-batch.ts): appends, record creations and record updates asked for together go in one statement of
 * their kind, each keeping its own compare-and-swap; two writes of one stream or record never share a statement;
 * appends asked for while one is in flight wait and go together; a batch the database refuses for its data is sent
 * again append by append, so only the damaged stream's append fails; an announced append is sent alone. Statements
 * are counted by name on `pg.Client`. Runs only with ACP_ORCHESTRATOR_TEST_PG (test/support/postgres.ts).
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, beforeEach, expect, it } from "vitest";
import type { PostgresAuthority } from "../../../src/adapters/persistence/postgres-authority.js";
import { AuthorityConflict, AuthorityFailure } from "../../../src/core/ports.js";
import { adminQuery, describePostgres, dropSchema, freshSchema, openTestAuthority } from "../../support/postgres.js";

const sent: string[] = [];
const clientQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
let authority: PostgresAuthority;
let schema: string;

beforeEach(async () => {
  if (!process.env.ACP_ORCHESTRATOR_TEST_PG) return;
  schema = freshSchema();
  // As a server opens it (open-store.ts: streams are not announced); an announced append goes alone.
  authority = await openTestAuthority({ schema, announce: () => false });
  (pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (
    this: pg.Client,
    ...args: unknown[]
  ) {
    const name = (args[0] as { name?: unknown } | null)?.name;
    if (typeof name === "string" && /^acp-(append|put)/.test(name)) sent.push(name);
    return clientQuery.apply(this, args);
  };
});

afterEach(async () => {
  if (!process.env.ACP_ORCHESTRATOR_TEST_PG) return;
  (pg.Client.prototype as unknown as { query: unknown }).query = clientQuery;
  sent.length = 0;
  await authority.close();
  await dropSchema(schema);
});

/** Creates streams s0 … s(n-1) of project p, one event each (each stream's first append is sent alone). */
async function streams(n: number): Promise<void> {
  for (let i = 0; i < n; i += 1) await authority.appendEvents("p", `s${i}`, [{ n: 1 }], 0);
  sent.length = 0;
}

const numbers = async (stream: string): Promise<unknown[]> =>
  (await authority.readEvents("p", stream, 0)).map((e) => [e.seq, (e.event as { n: number }).n]);

describePostgres("PostgresAuthority: appends sent together (group commit)", () => {
  it("sends appends asked for together as one statement, and refuses only the one whose check fails", async () => {
    await streams(6);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => authority.appendEvents("p", `s${i}`, [{ n: 2 }, { n: 3 }], i === 4 ? 5 : 1)),
    );
    expect(sent).toEqual(["acp-append-batch-6"]);
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value.lastSeq : o.reason))).toEqual([
      3,
      3,
      3,
      3,
      expect.any(AuthorityConflict),
      3,
    ]);
    expect(await numbers("s0")).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    expect(await numbers("s4")).toEqual([[1, 1]]);
    expect(await numbers("s5")).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
  });

  it("never puts two appends to one stream in one statement: the later one goes next and sees the first", async () => {
    await streams(2);
    const [first, second, other] = await Promise.all([
      authority.appendEvents("p", "s0", [{ n: 2 }], 1),
      authority.appendEvents("p", "s0", [{ n: 3 }], 2),
      authority.appendEvents("p", "s1", [{ n: 2 }], 1),
    ]);
    expect([first.lastSeq, second.lastSeq, other.lastSeq]).toEqual([2, 3, 2]);
    expect(sent).toEqual(["acp-append-batch-2", "acp-append-next-quiet"]);
    expect(await numbers("s0")).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
  });

  it("makes appends asked for while one is in flight wait, and sends them together when it ends", async () => {
    await streams(5);
    const first = authority.appendEvents("p", "s0", [{ n: 2 }], 1);
    // These are asked for once the first append's statement is sent, and before its answer can have been read.
    while (sent.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const rest = [1, 2, 3, 4].map((i) => authority.appendEvents("p", `s${i}`, [{ n: 2 }], 1));
    await Promise.all([first, ...rest]);
    expect(sent).toEqual(["acp-append-next-quiet", "acp-append-batch-4"]);
    for (let i = 0; i < 5; i += 1)
      expect(await numbers(`s${i}`)).toEqual([
        [1, 1],
        [2, 2],
      ]);
  });

  it("sends a batch refused for its data again append by append: only the damaged stream's append fails", async () => {
    await streams(3);
    // Damage s1: an event row above its head, so moving the head and inserting seq 2 violates the primary key.
    await adminQuery(
      `INSERT INTO "${schema}".events (project_id, stream, seq, n, event) VALUES ('p', 's1', 2, 1, '{}')`,
    );
    const outcomes = await Promise.allSettled(
      [0, 1, 2].map((i) => authority.appendEvents("p", `s${i}`, [{ n: 2 }], 1)),
    );
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value.lastSeq : o.reason))).toEqual([
      2,
      expect.any(AuthorityConflict),
      2,
    ]);
    expect(sent).toEqual([
      "acp-append-batch-3",
      "acp-append-next-quiet",
      "acp-append-next-quiet",
      "acp-append-next-quiet",
    ]);
    expect(await numbers("s0")).toEqual([
      [1, 1],
      [2, 2],
    ]);
    expect(await numbers("s2")).toEqual([
      [1, 1],
      [2, 2],
    ]);
    const head = await adminQuery<{ last_seq: string }>(
      `SELECT last_seq FROM "${schema}".streams WHERE project_id = 'p' AND stream = 's1'`,
    );
    expect(head.rows[0]?.last_seq).toBe("1");
  });

  it("sends the writes asked for before a close, then closes", async () => {
    await streams(3);
    const writes = [0, 1, 2].map((i) => authority.appendEvents("p", `s${i}`, [{ n: 2 }], 1));
    const put = authority.put("p", "k", "r", { v: 1 }, null);
    await authority.close();
    expect((await Promise.all(writes)).map((w) => w.lastSeq)).toEqual([2, 2, 2]);
    expect((await put).revision).toBe(1);
    // Two queues: which of them sends first is not part of the contract (the appends pack their rows first).
    expect([...sent].sort()).toEqual(["acp-append-batch-3", "acp-put-new-quiet"]);
    const rows = await adminQuery<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".events`);
    expect(rows.rows[0]?.n).toBe("6");
  });

  it("sends appends asked for just before a close, still packing their rows when it begins, then closes", async () => {
    await streams(3);
    // One small (packed at once) and two past the size packed off the main thread: none is queued yet at the close.
    const big = "x".repeat(200_000);
    const writes = [0, 1, 2].map((i) => authority.appendEvents("p", `s${i}`, [{ n: 2, ...(i > 0 ? { big } : {}) }], 1));
    await authority.close();
    expect((await Promise.all(writes)).map((w) => w.lastSeq)).toEqual([2, 2, 2]);
    const rows = await adminQuery<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".events`);
    expect(rows.rows[0]?.n).toBe("6");
  });

  it("fails only the append whose stream another transaction holds locked, at lock_timeout, not the whole batch", async () => {
    const short = await openTestAuthority({ schema, announce: () => false, statementTimeoutMs: 1_000 });
    try {
      await streams(3);
      const locker = new pg.Client({ connectionString: process.env.ACP_ORCHESTRATOR_TEST_PG });
      await locker.connect();
      try {
        await locker.query("BEGIN");
        await locker.query(`SELECT 1 FROM "${schema}".streams WHERE stream = 's1' FOR UPDATE`);
        const outcomes = await Promise.allSettled(
          [0, 1, 2].map((i) => short.appendEvents("p", `s${i}`, [{ n: 2 }], 1)),
        );
        expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value.lastSeq : o.reason))).toEqual([
          2,
          expect.any(AuthorityFailure),
          2,
        ]);
      } finally {
        await locker.query("ROLLBACK");
        await locker.end();
      }
      expect(await numbers("s1")).toEqual([[1, 1]]);
    } finally {
      await short.close();
    }
  });

  it("sends an announced append alone, with its notification", async () => {
    const announcing = await openTestAuthority({ schema });
    try {
      await streams(2);
      await Promise.all([0, 1].map((i) => announcing.appendEvents("p", `s${i}`, [{ n: 2 }], 1)));
      expect(sent).toEqual(["acp-append-next", "acp-append-next"]);
    } finally {
      await announcing.close();
    }
  });
});

describePostgres("PostgresAuthority: record puts sent together (group commit)", () => {
  it("creates records asked for together in one statement; one that exists is refused alone", async () => {
    await authority.put("p", "k", "r2", { v: 0 }, null);
    sent.length = 0;
    const outcomes = await Promise.allSettled(
      [0, 1, 2, 3].map((i) => authority.put("p", "k", `r${i}`, { v: i }, null)),
    );
    expect(sent).toEqual(["acp-put-new-batch-4"]);
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value.revision : o.reason))).toEqual([
      1,
      1,
      expect.any(AuthorityConflict),
      1,
    ]);
    expect((await authority.get("p", "k", "r2"))?.value).toEqual({ v: 0 });
    expect((await authority.get("p", "k", "r3"))?.value).toEqual({ v: 3 });
  });

  it("refuses a creation whose id is too long for the index alone: the others of its statement are created", async () => {
    // 8,000 characters that do not compress: past btree's 2704-byte entry limit (SQLSTATE 54000, program limit).
    const long = randomBytes(6_000).toString("base64");
    const outcomes = await Promise.allSettled([
      authority.put("p", "k", "a", { v: 1 }, null),
      authority.put("p", "k", long, { v: 1 }, null),
      authority.put("p", "k", "b", { v: 1 }, null),
    ]);
    expect(sent).toEqual(["acp-put-new-batch-3", "acp-put-new-quiet", "acp-put-new-quiet", "acp-put-new-quiet"]);
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value.revision : o.reason))).toEqual([
      1,
      expect.any(AuthorityFailure),
      1,
    ]);
    expect(await authority.get("p", "k", "b")).toMatchObject({ value: { v: 1 }, revision: 1 });
  });

  it("updates records asked for together in one statement, each at its own revision", async () => {
    for (let i = 0; i < 3; i += 1) await authority.put("p", "k", `r${i}`, { v: 0 }, null);
    await authority.put("p", "k", "r1", { v: 1 }, 1);
    sent.length = 0;
    const outcomes = await Promise.allSettled([
      authority.put("p", "k", "r0", { v: 2 }, 1),
      authority.put("p", "k", "r1", { v: 2 }, 1), // at revision 2: refused
      authority.put("p", "k", "r2", { v: 2 }, 1),
      authority.put("p", "k", "r0", { v: 3 }, 2), // same record as the first: the next statement
    ]);
    expect(sent).toEqual(["acp-put-next-batch-3", "acp-put-next-quiet"]);
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value.revision : o.reason))).toEqual([
      2,
      expect.objectContaining({ details: { revision: 2 } }),
      2,
      3,
    ]);
    expect(await authority.get("p", "k", "r0")).toMatchObject({ value: { v: 3 }, revision: 3 });
    expect(await authority.get("p", "k", "r1")).toMatchObject({ value: { v: 1 }, revision: 2 });
  });
});
