/**
 * What only the PostgreSQL backend has (issue 14), beyond the shared conformance suite (test/authority/postgres.test.ts):
 * versioned migrations and the refusal of a newer database, compare-and-swap between separate pools (two servers),
 * the change feed (`LISTEN/NOTIFY`), statement timeouts and database errors as `AuthorityFailure`, fail-closed reads
 * of rows that are not JSON, and URL handling. Runs only with ACP_ORCHESTRATOR_TEST_PG (see test/support/postgres.ts).
 */
import { afterEach, expect, it } from "vitest";
import { POSTGRES_SCHEMA_VERSION, PostgresAuthority } from "../../../src/adapters/persistence/postgres-authority.js";
import { redact } from "../../../src/adapters/persistence/postgres-url.js";
import { stateLocation } from "../../../src/adapters/persistence/open-store.js";
import { AuthorityConflict, AuthorityFailure, type AuthorityChange } from "../../../src/core/ports.js";
import { fleetWatches } from "../../../src/core/product/fleet.js";
import { rejectionOf } from "../../support/fakes.js";
import {
  adminQuery,
  describePostgres,
  dropSchema,
  eventually,
  freshSchema,
  openTestAuthority,
  urlWithSchema,
} from "../../support/postgres.js";

const opened: PostgresAuthority[] = [];
const schemas = new Set<string>();

/** Opens an authority on `schema` (fresh when omitted) and closes it after the test. */
async function open(schema = freshSchema(), options: Parameters<typeof openTestAuthority>[0] = {}) {
  schemas.add(schema);
  const authority = await openTestAuthority({ ...options, schema });
  opened.push(authority);
  return authority;
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((a) => a.close()));
  await Promise.all([...schemas].map((s) => dropSchema(s)));
  schemas.clear();
});

describePostgres("PostgresAuthority: migrations", () => {
  it("records the schema version it created", async () => {
    const a = await open();
    expect(await a.schemaVersion()).toBe(POSTGRES_SCHEMA_VERSION);
  });

  it("migrates once when many servers open a new database at the same time", async () => {
    const schema = freshSchema();
    await Promise.all(Array.from({ length: 5 }, () => open(schema)));
    const rows = await adminQuery(`SELECT version FROM "${schema}".schema_version ORDER BY version`);
    // Every migration applied exactly once.
    expect(rows.rows).toEqual(Array.from({ length: POSTGRES_SCHEMA_VERSION }, (_, i) => ({ version: i + 1 })));
  });

  it("stores large values compressed with lz4 (a session setting, not a schema change), events packed once", async () => {
    const a = await open();
    const big = { tasks: Array.from({ length: 5_000 }, (_, i) => ({ taskId: `t${i}`, title: `Task ${i}` })) };
    await a.put("p", "k", "big", big, null);
    await a.appendEvents("p", "s", [big], 0);
    const rows = await adminQuery(
      `SELECT (SELECT pg_column_compression(value) FROM "${a.schema}".records WHERE id = 'big') AS value,
              (SELECT pg_column_compression(packed) FROM "${a.schema}".events WHERE stream = 's') AS event`,
    );
    // The event row is packed by the server (postgres-packed.ts) and stored as it came (EXTERNAL: not again).
    expect(rows.rows).toEqual([{ value: "lz4", event: null }]);
    expect((await a.get("p", "k", "big"))?.value).toEqual(big);
    expect((await a.readEvents("p", "s", 0))[0]?.event).toEqual(big);
    expect(await a.schemaVersion()).toBe(POSTGRES_SCHEMA_VERSION);
  });

  it("refuses a database written by a newer version, naming both versions", async () => {
    const schema = freshSchema();
    await (await open(schema)).close();
    await adminQuery(`INSERT INTO "${schema}".schema_version (version) VALUES ($1)`, [POSTGRES_SCHEMA_VERSION + 1]);
    const error = await rejectionOf(PostgresAuthority.open(urlWithSchema(schema)));
    expect(error).toBeInstanceOf(AuthorityFailure);
    expect((error as Error).message).toMatch(
      new RegExp(
        `schema version ${POSTGRES_SCHEMA_VERSION + 1}, newer than .*\\(${POSTGRES_SCHEMA_VERSION}\\); upgrade`,
      ),
    );
  });

  it("keeps the data of an earlier open", async () => {
    const schema = freshSchema();
    const first = await open(schema);
    await first.put("p", "k", "r1", { n: 1 }, null);
    const second = await open(schema);
    expect(await second.get("p", "k", "r1")).toMatchObject({ value: { n: 1 }, revision: 1 });
  });
});

describePostgres("PostgresAuthority: two servers on one database", () => {
  it("lets exactly one of two pools win a put with the same expectedRevision", async () => {
    const schema = freshSchema();
    const [a, b] = [await open(schema), await open(schema)];
    await a.put("p", "k", "r1", { w: 0 }, null);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).put("p", "k", "r1", { w: i }, 1)),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
  });

  it("lets exactly one of two pools win an append at the same sequence number, without gaps", async () => {
    const schema = freshSchema();
    const [a, b] = [await open(schema), await open(schema)];
    await a.appendEvents("p", "s", [{ e: 0 }], 0);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).appendEvents("p", "s", [{ e: i }, { e: i }], 1)),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect((await b.readEvents("p", "s", 0)).map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it("refuses the losers with AuthorityConflict", async () => {
    const schema = freshSchema();
    const [a, b] = [await open(schema), await open(schema)];
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).appendEvents("p", "s", [{ e: i }], 0)),
    );
    const reasons = results.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
    expect(reasons.length === 9 && reasons.every((r) => r instanceof AuthorityConflict)).toBe(true);
  });
});

describePostgres("PostgresAuthority: change feed", () => {
  it("tells a watcher about another server's put, delete (marked deleted) and append, not a quiet delete", async () => {
    const schema = freshSchema();
    const [owner, other] = [await open(schema), await open(schema)];
    const changes: AuthorityChange[] = [];
    owner.watch((c) => changes.push(c));
    await owner.feedReady();
    await other.put("p", "lease", "prd_1", { v: 1 }, null);
    await other.delete("p", "lease", "prd_1");
    // Left unannounced (a finished product's lease, issue 32): still deleted, CAS-checked as any delete.
    const { revision } = await other.put("p", "lease", "prd_2", { v: 1 }, null);
    await expect(other.delete("p", "lease", "prd_2", revision + 1, { announce: false })).rejects.toThrow();
    expect(await other.delete("p", "lease", "prd_2", revision, { announce: false })).toBe(true);
    expect(await owner.get("p", "lease", "prd_2")).toBeNull();
    await other.appendEvents("p", "product/prd_1", [{ e: 1 }], 0);
    await eventually(() => changes.some((c) => c.stream !== undefined), 10_000);
    expect(changes).toEqual([
      { projectId: "p", kind: "lease", id: "prd_1" },
      { projectId: "p", kind: "lease", id: "prd_1", deleted: true },
      { projectId: "p", kind: "lease", id: "prd_2" },
      { projectId: "p", stream: "product/prd_1" },
    ]);
  });

  it("does not tell a watcher about its own writes or refused ones", async () => {
    const schema = freshSchema();
    const [owner, other] = [await open(schema), await open(schema)];
    const changes: AuthorityChange[] = [];
    owner.watch((c) => changes.push(c));
    await owner.feedReady();
    await owner.put("p", "k", "mine", { n: 1 }, null);
    await rejectionOf(other.put("p", "k", "mine", { n: 2 }, null));
    await other.put("p", "k", "theirs", { n: 1 }, null);
    await eventually(() => changes.length >= 1, 10_000);
    expect(changes).toEqual([{ projectId: "p", kind: "k", id: "theirs" }]);
  });

  it("announces only the writes its announce option accepts; the others still commit and conflict-check", async () => {
    const schema = freshSchema();
    const owner = await open(schema);
    const other = await open(schema, { announce: fleetWatches });
    const changes: AuthorityChange[] = [];
    owner.watch((c) => changes.push(c));
    await owner.feedReady();
    await other.put("p", "product", "prd_1", { n: 1 }, null);
    await other.put("p", "product", "prd_1", { n: 2 }, 1);
    await other.appendEvents("p", "product/prd_1", [{ e: 1 }], 0);
    await other.appendEvents("p", "product/prd_1", [{ e: 2 }], 1);
    await other.delete("p", "product", "prd_1");
    await other.put("p", "control", "prd_1/r1", { n: 1 }, null);
    // A lease created where none was fences nobody (issue 32): only the write over its revision (a take-over) is told.
    await other.put("p", "lease", "prd_1", { n: 1 }, null);
    await other.put("p", "lease", "prd_1", { n: 2 }, 1);
    await other.put("p", "control", "prd_1/r2", { n: 1 }, null);
    await eventually(() => changes.length >= 3, 10_000);
    expect(changes).toEqual([
      { projectId: "p", kind: "control", id: "prd_1/r1" },
      { projectId: "p", kind: "lease", id: "prd_1" },
      { projectId: "p", kind: "control", id: "prd_1/r2" },
    ]);
    expect((await owner.readEvents("p", "product/prd_1", 0)).map((e) => e.event)).toEqual([{ e: 1 }, { e: 2 }]);
    expect(await rejectionOf(other.appendEvents("p", "product/prd_1", [{ e: 3 }], 1))).toBeInstanceOf(
      AuthorityConflict,
    );
    expect(await rejectionOf(other.put("p", "lease", "prd_1", { n: 3 }, 7))).toBeInstanceOf(AuthorityConflict);
    expect(await owner.get("p", "lease", "prd_1")).toMatchObject({ value: { n: 2 }, revision: 2 });
  });

  it("does not mix two schemas on one database", async () => {
    const [a, b] = [await open(), await open()];
    const changes: AuthorityChange[] = [];
    a.watch((c) => changes.push(c));
    await a.feedReady();
    const c = await open(a.schema);
    await b.put("p", "k", "elsewhere", { n: 1 }, null);
    await c.put("p", "k", "here", { n: 1 }, null);
    await eventually(() => changes.length >= 1, 10_000);
    expect(changes.map((x) => x.id)).toEqual(["here"]);
  });
});

describePostgres("PostgresAuthority: failures", () => {
  it("returns a stored value that is not JSON as its raw text", async () => {
    const a = await open();
    await a.put("p", "k", "r1", { n: 1 }, null);
    await adminQuery(`UPDATE "${a.schema}".records SET value = '{not json' WHERE id = 'r1'`);
    expect((await a.get("p", "k", "r1"))?.value).toBe("{not json");
  });

  it("turns a statement timeout into AuthorityFailure", async () => {
    const a = await open(freshSchema(), { statementTimeoutMs: 200 });
    await a.put("p", "k", "r1", { n: 1 }, null);
    const lock = adminQuery(
      `BEGIN; LOCK TABLE "${a.schema}".records IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(1.5); COMMIT`,
    );
    await eventually(async () => {
      const r = await adminQuery(
        "SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'records' AND l.mode = 'AccessExclusiveLock'",
      );
      return (r.rowCount ?? 0) > 0;
    }, 10_000);
    const error = await rejectionOf(a.get("p", "k", "r1"));
    await lock;
    expect(error).toBeInstanceOf(AuthorityFailure);
  });

  it("refuses an id containing U+0000 with AuthorityFailure", async () => {
    const a = await open();
    expect(await rejectionOf(a.put("p", "k", "a\u0000b", { n: 1 }, null))).toBeInstanceOf(AuthorityFailure);
  });

  it("fails to open an unreachable server with AuthorityFailure and no password in the message", async () => {
    const error = await rejectionOf(
      PostgresAuthority.open("postgres://acp:secret-pw@127.0.0.1:1/acp_test", { connectionTimeoutMs: 2_000 }),
    );
    expect(error instanceof AuthorityFailure && !(error as Error).message.includes("secret-pw")).toBe(true);
  });

  it("refuses a schema name it cannot quote safely", async () => {
    expect(await rejectionOf(PostgresAuthority.open(urlWithSchema('x"; DROP TABLE y; --')))).toBeInstanceOf(
      AuthorityFailure,
    );
  });
});

describePostgres("state selection", () => {
  it("selects PostgreSQL for a postgres:// URL in --state or ACP_ORCHESTRATOR_STATE", () => {
    expect([
      stateLocation("postgres://u@h/db", {}).kind,
      stateLocation(undefined, { ACP_ORCHESTRATOR_STATE: "postgresql://u@h/db" }).kind,
      stateLocation("state.db", {}).kind,
    ]).toEqual(["postgres", "postgres", "sqlite"]);
  });

  it("redacts the password of a URL", () => {
    expect(redact("postgres://u:pw@h:5432/db")).toBe("postgres://u:***@h:5432/db");
  });
});

// Schema version 2 (issue 34, WAL bytes per task): one event row per append, read, paged and pruned event by event.
describePostgres("PostgresAuthority: one event row per append", () => {
  const events = (from: number, to: number) =>
    Array.from({ length: to - from + 1 }, (_, i) => ({ seq: from + i, event: { n: from + i } }));

  it("stores an append of many events as one row and reads, pages and prunes inside it", async () => {
    const a = await open();
    expect(
      (
        await a.appendEvents(
          "p",
          "s",
          events(1, 5).map((e) => e.event),
          0,
        )
      ).lastSeq,
    ).toBe(5);
    await a.appendEvents("p", "s", [{ n: 6 }], 5);
    const rows = await adminQuery(`SELECT seq, n FROM "${a.schema}".events ORDER BY seq`);
    expect(rows.rows).toEqual([
      { seq: "5", n: 5 },
      { seq: "6", n: 1 },
    ]);
    expect(await a.readEvents("p", "s", 0)).toEqual(events(1, 6));
    expect(await a.readEvents("p", "s", 2, 2)).toEqual(events(3, 4));
    // A hole in the middle of the row: the kept parts become rows of their own, numbering unchanged.
    expect(await a.pruneEvents("p", "s", 4, 1)).toBe(2);
    expect(await a.readEvents("p", "s", 0)).toEqual([...events(1, 1), ...events(4, 6)]);
    expect(await a.readEvents("p", "s", 1, 1)).toEqual(events(4, 4));
    expect(await a.pruneEvents("p", "s", 4, 1)).toBe(0);
    // Across the rows: up to the last event, which is kept.
    expect(await a.pruneEvents("p", "s", 6)).toBe(3);
    expect(await a.readEvents("p", "s", 0)).toEqual(events(6, 6));
    expect((await a.appendEvents("p", "s", [{ n: 7 }, { n: 8 }], 6)).lastSeq).toBe(8);
    expect(await a.readEvents("p", "s", 5)).toEqual(events(6, 8));
  });

  it("returns an element of a row that is not JSON as its raw text", async () => {
    const a = await open();
    await a.appendEvents("p", "s", [{ n: 1 }, { n: 2 }], 0);
    await adminQuery(`UPDATE "${a.schema}".events SET packed = NULL, batch = ARRAY['{"n":1}', '{not json']`);
    expect(await a.readEvents("p", "s", 0)).toEqual([
      { seq: 1, event: { n: 1 } },
      { seq: 2, event: "{not json" },
    ]);
  });

  it("migrates a version 1 store in place and keeps reading, appending to and pruning its events", async () => {
    const schema = freshSchema();
    schemas.add(schema);
    // The released version 1 schema, frozen here: one row per event.
    await adminQuery(`CREATE SCHEMA "${schema}"`);
    await adminQuery(`SET search_path = "${schema}";
      CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now());
      CREATE TABLE records (project_id TEXT COLLATE "C" NOT NULL, kind TEXT COLLATE "C" NOT NULL,
        id TEXT COLLATE "C" NOT NULL, value TEXT NOT NULL, revision BIGINT NOT NULL CHECK (revision >= 1),
        updated_at TEXT NOT NULL, PRIMARY KEY (project_id, kind, id));
      CREATE TABLE streams (project_id TEXT COLLATE "C" NOT NULL, stream TEXT COLLATE "C" NOT NULL,
        last_seq BIGINT NOT NULL CHECK (last_seq >= 1), PRIMARY KEY (project_id, stream));
      CREATE TABLE events (project_id TEXT COLLATE "C" NOT NULL, stream TEXT COLLATE "C" NOT NULL,
        seq BIGINT NOT NULL CHECK (seq >= 1), event TEXT NOT NULL, PRIMARY KEY (project_id, stream, seq));
      INSERT INTO schema_version (version) VALUES (1);
      INSERT INTO streams VALUES ('p', 's', 3);
      INSERT INTO events VALUES ('p', 's', 1, '{"n":1}'), ('p', 's', 2, '{"n":2}'), ('p', 's', 3, '{"n":3}');
      RESET search_path`);
    const a = await open(schema);
    expect(await a.schemaVersion()).toBe(POSTGRES_SCHEMA_VERSION);
    expect(await a.readEvents("p", "s", 0)).toEqual(events(1, 3));
    await a.appendEvents("p", "s", [{ n: 4 }, { n: 5 }], 3);
    expect(await a.readEvents("p", "s", 1)).toEqual(events(2, 5));
    expect(await a.pruneEvents("p", "s", 5, 1)).toBe(3);
    expect(await a.readEvents("p", "s", 0)).toEqual([...events(1, 1), ...events(5, 5)]);
    await expect(a.appendEvents("p", "s", [{ n: 1 }], 3)).rejects.toBeInstanceOf(AuthorityConflict);
  });
});
