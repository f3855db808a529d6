/**
 * Group commit on PostgreSQL (issue 32, postgres-group-commit.ts with postgres-write-batch.ts): appends (a stream's
 * first one too), record creations and record updates asked for together go in one statement, whatever their sort,
 * each keeping its own compare-and-swap; two writes of one stream or record never share a statement;
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
/** While set, a query whose text starts with `prefix` is sent only once `until` settled (a read held back). */
let holdBack: { prefix: string; until: Promise<unknown> } | undefined;
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
    const query = args[0] as { name?: unknown; text?: unknown } | null;
    if (typeof query?.name === "string" && /^acp-(append|put|write)/.test(query.name)) sent.push(query.name);
    // A batch statement sent unnamed (a rare mix of sizes, postgres-write-batch.ts NAMED_MIXES).
    else if (query?.name === undefined && typeof query?.text === "string" && query.text.includes("UNION ALL"))
      sent.push("unnamed batch");
    const text = typeof args[0] === "string" ? args[0] : query?.text;
    if (holdBack && typeof text === "string" && text.startsWith(holdBack.prefix)) {
      // pg-pool calls with a callback: the query is sent later, its answer reaches the callback as before.
      void holdBack.until.finally(() => clientQuery.apply(this, args));
      return undefined;
    }
    return clientQuery.apply(this, args);
  };
});

afterEach(async () => {
  if (!process.env.ACP_ORCHESTRATOR_TEST_PG) return;
  (pg.Client.prototype as unknown as { query: unknown }).query = clientQuery;
  sent.length = 0;
  holdBack = undefined;
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
    expect(sent).toEqual(["acp-write-6-0-0-0-0"]);
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
    expect(sent).toEqual(["acp-write-2-0-0-0-0", "acp-append-next-quiet"]);
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
    expect(sent).toEqual(["acp-append-next-quiet", "acp-write-4-0-0-0-0"]);
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
      "acp-write-3-0-0-0-0",
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
    // The appends pack their rows first: the put goes with them or just before them, which is timing, not contract.
    expect([["acp-write-3-0-1-0-0"], ["acp-put-new-quiet", "acp-write-3-0-0-0-0"]]).toContainEqual(sent);
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
    expect(sent).toEqual(["acp-write-0-0-4-0-0"]);
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
    expect(sent).toEqual(["acp-write-0-0-3-0-0", "acp-put-new-quiet", "acp-put-new-quiet", "acp-put-new-quiet"]);
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
    expect(sent).toEqual(["acp-write-0-0-0-3-0", "acp-put-next-quiet"]);
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

describePostgres("PostgresAuthority: writes of every sort sent together (group commit)", () => {
  it("sends next and first appends, creations, updates and deletes asked for together as ONE statement, each its own check", async () => {
    await streams(3); // s0, s1, s2 at 1
    await authority.put("p", "k", "taken", { v: 0 }, null);
    await authority.put("p", "k", "u0", { v: 0 }, null);
    await authority.put("p", "k", "u1", { v: 0 }, null);
    await authority.put("p", "k", "d0", { v: 0 }, null);
    await authority.put("p", "k", "d1", { v: 0 }, null);
    sent.length = 0;
    const outcomes = await Promise.allSettled([
      authority.appendEvents("p", "s0", [{ n: 2 }], 1),
      authority.appendEvents("p", "s1", [{ n: 2 }], 4), // s1 is at 1: refused
      authority.appendEvents("p", "new0", [{ n: 1 }], 0),
      authority.appendEvents("p", "s2", [{ n: 1 }], 0), // s2 exists: refused
      authority.put("p", "k", "c0", { v: 1 }, null),
      authority.put("p", "k", "taken", { v: 1 }, null), // exists: refused
      authority.put("p", "k", "u0", { v: 1 }, 1),
      authority.put("p", "k", "u1", { v: 1 }, 3), // at revision 1: refused
      authority.delete("p", "k", "d0", 1, { announce: false }),
      authority.delete("p", "k", "d1", 2, { announce: false }), // at revision 1: refused
    ]);
    expect(sent).toEqual(["acp-write-2-2-2-2-2"]);
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value : o.reason))).toEqual([
      { lastSeq: 2 },
      expect.any(AuthorityConflict),
      { lastSeq: 1 },
      expect.any(AuthorityConflict),
      { revision: 1 },
      expect.any(AuthorityConflict),
      { revision: 2 },
      expect.objectContaining({ details: { revision: 1 } }),
      true,
      expect.objectContaining({ details: { revision: 1 } }),
    ]);
    expect(await numbers("s0")).toEqual([
      [1, 1],
      [2, 2],
    ]);
    expect(await numbers("s1")).toEqual([[1, 1]]);
    expect(await numbers("new0")).toEqual([[1, 1]]);
    expect(await numbers("s2")).toEqual([[1, 1]]);
    expect(await authority.get("p", "k", "c0")).toMatchObject({ value: { v: 1 }, revision: 1 });
    expect(await authority.get("p", "k", "taken")).toMatchObject({ value: { v: 0 }, revision: 1 });
    expect(await authority.get("p", "k", "u0")).toMatchObject({ value: { v: 1 }, revision: 2 });
    expect(await authority.get("p", "k", "u1")).toMatchObject({ value: { v: 0 }, revision: 1 });
    expect(await authority.get("p", "k", "d0")).toBeNull();
    expect(await authority.get("p", "k", "d1")).toMatchObject({ revision: 1 });
  });

  it("judges a refused delete or put by the revision its own statement saw, not by a read after it", async () => {
    // A delete at a revision of a record that is not there, then at once its creation (queued behind the delete): the
    // delete is false. A revision read after the refusal (held back here until the creation committed, as a slow
    // connection would) found the new record and threw a conflict: the race a breaker found (issue 32).
    for (const announce of [false, true]) {
      const id = `gone-${String(announce)}`;
      let created: Promise<unknown> = Promise.resolve();
      holdBack = {
        prefix: "SELECT revision FROM records",
        until: new Promise((r) => setImmediate(r)).then(() => created),
      };
      const deleted = authority.delete("p", "k", id, 3, { announce });
      created = authority.put("p", "k", id, { v: 1 }, null);
      expect(await deleted).toBe(false);
      expect(await created).toEqual({ revision: 1 });
      holdBack = undefined;
    }
    // Refusals still name the revision found: alone (announced) and in a batch.
    await authority.put("p", "k", "at1", { v: 0 }, null);
    await authority.put("p", "k", "at1b", { v: 0 }, null);
    const refusals = await Promise.allSettled([
      authority.delete("p", "k", "at1", 2), // announced: alone
      authority.delete("p", "k", "at1b", 2, { announce: false }),
      authority.put("p", "k", "missing", { v: 1 }, 4),
      authority.put("p", "k", "at1b-other", { v: 1 }, 2),
    ]);
    expect(refusals.map((o) => (o.status === "rejected" ? (o.reason as AuthorityConflict).details : o.value))).toEqual([
      { revision: 1 },
      { revision: 1 },
      {},
      {},
    ]);
  });

  it("sends a mixed batch refused for one creation's data again write by write: only that creation fails", async () => {
    await streams(1);
    const long = randomBytes(6_000).toString("base64"); // past btree's entry limit: SQLSTATE 54000
    const outcomes = await Promise.allSettled([
      authority.appendEvents("p", "s0", [{ n: 2 }], 1),
      authority.put("p", "k", long, { v: 1 }, null),
      authority.appendEvents("p", "fresh", [{ n: 1 }], 0),
    ]);
    // Then each alone, in the order they reached the queue (the appends pack their rows first: timing, not contract).
    expect(sent[0]).toBe("acp-write-1-1-1-0-0");
    expect(sent.slice(1).sort()).toEqual(["acp-append-new-quiet", "acp-append-next-quiet", "acp-put-new-quiet"]);
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value : o.reason))).toEqual([
      { lastSeq: 2 },
      expect.any(AuthorityFailure),
      { lastSeq: 1 },
    ]);
    expect(await numbers("fresh")).toEqual([[1, 1]]);
  });

  it("prepares at most 160 mixes of sizes per authority; a rarer mix is sent unnamed and still decided per row", async () => {
    // 161 distinct mixes (n next appends, c creations, u updates; n + c + u ≥ 2), each asked for together once.
    const mixes: [number, number, number][] = [];
    for (let n = 0; n <= 6 && mixes.length < 161; n += 1)
      for (let c = 0; c <= 6 && mixes.length < 161; c += 1)
        for (let u = 0; u <= 6 && mixes.length < 161; u += 1) if (n + c + u >= 2) mixes.push([n, c, u]);
    expect(mixes).toHaveLength(161);
    await streams(6);
    for (let i = 0; i < 6; i += 1) await authority.put("p", "k", `u${i}`, { v: 0 }, null);
    sent.length = 0;
    const seq = [1, 1, 1, 1, 1, 1];
    const rev = [1, 1, 1, 1, 1, 1];
    let created = 0;
    /** The number at `i`, which moves on by one. */
    const bump = (numbers: number[], i: number): number => {
      const at = numbers[i] ?? 0;
      numbers[i] = at + 1;
      return at;
    };
    for (const [n, c, u] of mixes) {
      const writes: Promise<unknown>[] = [];
      for (let i = 0; i < n; i += 1) writes.push(authority.appendEvents("p", `s${i}`, [{ n: 0 }], bump(seq, i)));
      for (let i = 0; i < c; i += 1) writes.push(authority.put("p", "k", `c${created++}`, { v: 1 }, null));
      for (let i = 0; i < u; i += 1) writes.push(authority.put("p", "k", `u${i}`, { v: 1 }, bump(rev, i)));
      await Promise.all(writes);
    }
    expect(sent).toHaveLength(161);
    expect(sent.slice(0, 160).every((name) => name.startsWith("acp-write-"))).toBe(true);
    expect(new Set(sent.slice(0, 160)).size).toBe(160);
    expect(sent[160]).toBe("unnamed batch");
    const [n, c, u] = mixes[160] as [number, number, number];
    expect(await authority.get("p", "k", `c${created - 1}`)).toMatchObject({ revision: 1 });
    if (u > 0) expect(await authority.get("p", "k", "u0")).toMatchObject({ revision: rev[0] });
    if (n > 0) expect((await authority.readEvents("p", "s0", 0)).at(-1)?.seq).toBe(seq[0]);
    expect(c + n + u).toBeGreaterThanOrEqual(2);
  });
});
