/**
 * PostgreSQL schema version 4 (issue 34, WAL bytes per task): event rows packed by the server with a preset
 * dictionary (postgres-packed.ts, postgres-events.ts). The format round-trips every text JSON.stringify writes, a
 * row stored in format 1 stays readable forever (frozen bytes), a damaged row fails closed, and a version 3 store
 * opened by this code reads the same events, appends packed rows beside its old ones and prunes across both; a
 * version 3 server left running on the migrated store fails its event reads instead of reading packed rows as none.
 * The PostgreSQL cases run only with ACP_ORCHESTRATOR_TEST_PG (test/support/postgres.ts).
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  POSTGRES_SCHEMA_VERSION,
  type PostgresAuthority,
} from "../../../src/adapters/persistence/postgres-authority.js";
import { packTexts, unpackTexts } from "../../../src/adapters/persistence/postgres-packed.js";
import { AuthorityFailure } from "../../../src/core/ports.js";
import { adminQuery, describePostgres, dropSchema, freshSchema, openTestAuthority } from "../../support/postgres.js";

/** Two texts packed in format 1 when it was released: must unpack to `FROZEN_TEXTS` for as long as format 1 exists. */
const FROZEN_HEX =
  "01c3f495a191ae81598881b19591a99589b99ea12951be3244f796a1122137d6d672552be5e59780b41cde9377787df2e11d2987572a3c9a" +
  "3359e1c3fc590d20034085714c5e92522d00";
const FROZEN_TEXTS = [
  '{"v":1,"at":"2026-12-06T03:25:47.150Z","type":"task","task":{"taskId":"t1","title":"Task 1","status":"running","attempts":1}}',
  '{"note":"ünïcødé ✓ 🚀","s":"a\\nb"}',
];

describe("packed event rows (format 1)", () => {
  it("round-trips what JSON.stringify writes and shrinks a task event to a fraction", async () => {
    const values = [
      { v: 1, at: "2026-12-06T03:25:47.150Z", type: "task", task: { taskId: "t734", status: "running" } },
      { text: "line\nbreak\r\ttab \u0000 nul \u2028 sep", lone: "\ud800", pair: "😀", empty: "" },
      [],
      { big: "x".repeat(100_000) },
    ];
    const texts = values.map((v) => JSON.stringify(v));
    const packed = await packTexts(texts);
    expect(packed).not.toBeNull();
    expect(unpackTexts(packed as Buffer, texts.length)).toEqual(texts);
    const one = [JSON.stringify(values[0])];
    const small = (await packTexts(one)) as Buffer;
    expect(unpackTexts(small, 1)).toEqual(one);
    expect(small.length).toBeLessThan((one[0] as string).length / 2);
  });

  it("refuses texts it cannot carry (a raw newline, a lone surrogate): the caller stores the plain form", async () => {
    expect(await packTexts(['{"a":1}', "{\n}"])).toBeNull();
    expect(await packTexts(["\ud800"])).toBeNull();
  });

  it("reads the bytes of a row stored when format 1 was released", () => {
    expect(unpackTexts(Buffer.from(FROZEN_HEX, "hex"), 2)).toEqual(FROZEN_TEXTS);
  });

  it("fails closed on an unknown format, damaged bytes or a count that does not match", async () => {
    const packed = (await packTexts(['{"a":1}', '{"b":2}'])) as Buffer;
    const fails = (f: () => unknown): unknown => {
      try {
        f();
      } catch (error) {
        return error;
      }
      return undefined;
    };
    expect(fails(() => unpackTexts(Buffer.concat([Buffer.of(2), packed.subarray(1)]), 2))).toBeInstanceOf(
      AuthorityFailure,
    );
    expect(fails(() => unpackTexts(Buffer.concat([Buffer.of(1), Buffer.from("not deflate")]), 2))).toBeInstanceOf(
      AuthorityFailure,
    );
    expect(fails(() => unpackTexts(packed, 3))).toBeInstanceOf(AuthorityFailure);
  });
});

const opened: PostgresAuthority[] = [];
const schemas = new Set<string>();

afterEach(async () => {
  await Promise.all(opened.splice(0).map((a) => a.close()));
  await Promise.all([...schemas].map((s) => dropSchema(s)));
  schemas.clear();
});

async function open(schema: string): Promise<PostgresAuthority> {
  schemas.add(schema);
  const authority = await openTestAuthority({ schema });
  opened.push(authority);
  return authority;
}

const ev = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => ({ seq: from + i, event: { n: from + i } }));

/** The released version 3 schema (migrations 1-3), frozen here. */
const VERSION_3_DDL = `
  CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now());
  CREATE TABLE records (project_id TEXT COLLATE "C" NOT NULL, kind TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL, value TEXT NOT NULL, revision BIGINT NOT NULL CHECK (revision >= 1),
    updated_at TEXT NOT NULL, PRIMARY KEY (project_id, kind, id));
  CREATE TABLE streams (project_id TEXT COLLATE "C" NOT NULL, stream TEXT COLLATE "C" NOT NULL,
    last_seq BIGINT NOT NULL CHECK (last_seq >= 1), PRIMARY KEY (project_id, stream));
  CREATE TABLE events (project_id TEXT COLLATE "C" NOT NULL, stream TEXT COLLATE "C" NOT NULL,
    seq BIGINT NOT NULL CHECK (seq >= 1), event TEXT NOT NULL, PRIMARY KEY (project_id, stream, seq));
  ALTER TABLE events ALTER COLUMN event DROP NOT NULL;
  ALTER TABLE events ADD COLUMN n INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE events ADD COLUMN events TEXT[];
  ALTER TABLE events ADD CONSTRAINT events_one_form CHECK (
    CASE WHEN events IS NULL THEN event IS NOT NULL AND n = 1
         ELSE event IS NULL AND n >= 2 AND cardinality(events) = n AND array_position(events, NULL) IS NULL END
  ) NOT VALID;
  ALTER TABLE records ADD COLUMN created_key TEXT COLLATE "C" GENERATED ALWAYS AS (
    CASE WHEN kind = 'product' THEN substring(value from '"createdAt":"([^"\\\\]*)"') END) STORED;
  CREATE INDEX records_by_creation ON records (kind, created_key, id) WHERE created_key IS NOT NULL;
  CREATE INDEX records_project_by_creation ON records (project_id, kind, created_key, id)
    WHERE created_key IS NOT NULL;
  INSERT INTO schema_version (version) VALUES (1), (2), (3);`;

/** The event read of a version 3 server, frozen here. */
const VERSION_3_READ = `SELECT x.seq, x.event FROM events e
  CROSS JOIN LATERAL (
    SELECT e.seq AS seq, e.event AS event WHERE e.events IS NULL
    UNION ALL
    SELECT e.seq - e.n + u.o, u.t FROM unnest(e.events) WITH ORDINALITY AS u(t, o)
  ) x
  WHERE e.project_id = $1 AND e.stream = $2 AND e.seq > $3 AND x.seq > $3
  ORDER BY e.seq, x.seq`;

describePostgres("PostgresAuthority: packed event rows (schema version 4)", () => {
  it("stores each append as one packed row, smaller than its texts, and reads, pages and prunes inside it", async () => {
    const a = await open(freshSchema());
    const big = Array.from({ length: 20 }, (_, i) => ({ n: i + 1, title: `Task ${i + 1}`, status: "completed" }));
    await a.appendEvents("p", "s", big, 0);
    await a.appendEvents("p", "s", [{ n: 21 }], 20);
    const rows = await adminQuery<{ seq: string; n: number; plain: boolean; packed: number; texts: number }>(
      `SELECT seq, n, event IS NULL AND batch IS NULL AS plain, octet_length(packed) AS packed FROM "${a.schema}".events
       ORDER BY seq`,
    );
    expect(rows.rows.map((r) => [r.seq, r.n, r.plain])).toEqual([
      ["20", 20, true],
      ["21", 1, true],
    ]);
    expect(rows.rows[0]?.packed).toBeLessThan(JSON.stringify(big).length / 4);
    const all = [...big.map((event, i) => ({ seq: i + 1, event })), { seq: 21, event: { n: 21 } }];
    expect(await a.readEvents("p", "s", 0)).toEqual(all);
    expect(await a.readEvents("p", "s", 5, 3)).toEqual(all.slice(5, 8));
    expect(await a.pruneEvents("p", "s", 10, 3)).toBe(6);
    expect(await a.readEvents("p", "s", 0)).toEqual([...all.slice(0, 3), ...all.slice(9)]);
    const after = await adminQuery(`SELECT count(*)::int AS c FROM "${a.schema}".events WHERE packed IS NULL`);
    expect(after.rows[0]).toEqual({ c: 0 });
  });

  it("fails closed on a packed row whose bytes are damaged", async () => {
    const a = await open(freshSchema());
    await a.appendEvents("p", "s", [{ n: 1 }, { n: 2 }], 0);
    await adminQuery(`UPDATE "${a.schema}".events SET packed = '\\x01deadbeef'::bytea`);
    await expect(a.readEvents("p", "s", 0)).rejects.toBeInstanceOf(AuthorityFailure);
  });

  it("migrates a version 3 store in place: old rows read the same, new ones pack, pruning splits either", async () => {
    const schema = freshSchema();
    schemas.add(schema);
    await adminQuery(`CREATE SCHEMA "${schema}"`);
    await adminQuery(`SET search_path = "${schema}"; ${VERSION_3_DDL}
      INSERT INTO streams VALUES ('p', 's', 6);
      INSERT INTO events (project_id, stream, seq, n, event, events) VALUES
        ('p', 's', 1, 1, '{"n":1}', NULL),
        ('p', 's', 4, 3, NULL, ARRAY['{"n":2}', '{"n":3}', '{"n":4}']),
        ('p', 's', 6, 2, NULL, ARRAY['{"n":5}', '{not json']);
      RESET search_path`);
    const before = await adminQuery<{ seq: string }>(VERSION_3_READ.replaceAll("events e", `"${schema}".events e`), [
      "p",
      "s",
      0,
    ]);
    const a = await open(schema);
    expect(await a.schemaVersion()).toBe(POSTGRES_SCHEMA_VERSION);
    const stored = [...ev(1, 5), { seq: 6, event: "{not json" }];
    expect(await a.readEvents("p", "s", 0)).toEqual(stored);
    expect(before.rows.map((r) => Number(r.seq))).toEqual([1, 2, 3, 4, 5, 6]);
    expect(await a.readEvents("p", "s", 2, 2)).toEqual(ev(3, 4));
    await a.appendEvents("p", "s", [{ n: 7 }, { n: 8 }], 6);
    const forms = await adminQuery<{ seq: string; e: boolean; b: boolean; p: boolean }>(
      `SELECT seq, event IS NOT NULL AS e, batch IS NOT NULL AS b, packed IS NOT NULL AS p FROM "${schema}".events
       ORDER BY seq`,
    );
    expect(forms.rows.map((r) => [r.seq, r.e, r.b, r.p])).toEqual([
      ["1", true, false, false],
      ["4", false, true, false],
      ["6", false, true, false],
      ["8", false, false, true],
    ]);
    expect(await a.readEvents("p", "s", 3)).toEqual([...stored.slice(3), ...ev(7, 8)]);
    // A hole across an old text[] row and the new packed one: the kept parts become rows of their own.
    expect(await a.pruneEvents("p", "s", 8, 2)).toBe(5);
    expect(await a.readEvents("p", "s", 0)).toEqual([...ev(1, 2), ...ev(8, 8)]);
    // A server of version 3 still running on the migrated store gets a database error, not an empty stream.
    await expect(
      adminQuery(VERSION_3_READ.replaceAll("events e", `"${schema}".events e`), ["p", "s", 0]),
    ).rejects.toThrow(/column e\.events does not exist/);
    // And a second server opening the store finds it migrated and writes nothing.
    const b = await open(schema);
    expect(await b.readEvents("p", "s", 0)).toEqual([...ev(1, 2), ...ev(8, 8)]);
  });
});
