/**
 * The run-state authority conformance rules (DESIGN.md, Persistence backends; PROTOCOL.md section 7): one list of
 * rules that every `RunStateAuthority` backend must pass, framework-free so that the same rules run under vitest
 * (test/authority/conformance.ts, one spec file per backend) and in `acp-orchestrator check-host` against a host
 * author's own `runState/*` process (check-host.ts).
 *
 * Each rule is one method, one title in plain words, and one body that gets a fresh authority (under vitest) or one
 * shared with other rules (check-host: every rule then works in its own project ids, `P` and `Q`).
 *
 * Contract details these rules pin down beyond the docstrings of `src/core/ports.ts`:
 * - revisions start at 1 and grow by 1 per put; a record recreated after a delete starts again at 1;
 * - a conflict on an existing record carries `details.revision` = the current revision;
 * - `delete` of a missing record is `false`, whatever `expectedRevision` says;
 * - `list` is ordered by Unicode code point (UTF-8 byte order) and `prefix` is literal (`%`, `_` are not wildcards);
 * - `appendEvents` with no events checks `expectedSeq` and returns it;
 * - `listProjects` lists projects holding at least one record, sorted, without duplicates;
 * - `readEvents` with `limit` returns the first `limit` events (fewer only at the end of the stream);
 * - `deleteStream` restarts a stream's numbering; `pruneEvents` keeps it and never deletes the last event;
 * - invalid arguments (empty ids, revision 0, negative sequence numbers, non-object values) are `AuthorityFailure`;
 * - after `close`, every call fails with `AuthorityFailure`.
 *
 * This file must never depend on a particular backend or on a test framework.
 */
import { AuthorityConflict, AuthorityFailure, type RunStateAuthority } from "../core/ports.js";
import { ExpectationFailure, expect } from "./expect.js";

/** One conformance rule. */
export interface AuthorityRule {
  /** The port method it is about (`get`, `put`, … `close`). */
  method: string;
  /** What must hold, in plain words. */
  title: string;
  /** Checks it on `authority`; throws (`ExpectationFailure` or the call's error) when it does not hold. */
  run(authority: RunStateAuthority): Promise<void>;
}

/** The project ids rules write to. Under vitest each test has a fresh authority; check-host gives each rule its own. */
export interface RuleProjects {
  P: string;
  Q: string;
}

const KIND = "product";
const OTHER_KIND = "checkpoint";
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** Awaits a promise that must reject and returns the rejection reason; fails the rule when it resolves. */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new ExpectationFailure("expected the call to be refused, but it succeeded");
}

/** Every rule, in method order, writing to the project ids `projects` gives. */
export function authorityRules(projects: RuleProjects = { P: "project-a", Q: "project-b" }): AuthorityRule[] {
  const { P, Q } = projects;
  const rules: AuthorityRule[] = [];
  const test = (method: string, title: string, run: (a: RunStateAuthority) => Promise<void>): void => {
    rules.push({ method, title, run });
  };

  // ----------------------------------------------------------------------------------------------------
  // get

  test("get", "returns null for a record that does not exist", async (a) => {
    expect(await a.get(P, KIND, "missing")).toBeNull();
  });

  test("get", "returns the stored value deep-equal", async (a) => {
    const value = { name: "build", tasks: [{ id: "t1", dependsOn: [] }], budget: { maxTotalTokens: 1000 } };
    await a.put(P, KIND, "r1", value, null);
    expect((await a.get(P, KIND, "r1"))?.value).toEqual(value);
  });

  test("get", "returns revision 1 for a new record", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    expect((await a.get(P, KIND, "r1"))?.revision).toBe(1);
  });

  test("get", "returns updatedAt as an ISO-8601 UTC timestamp", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    expect((await a.get(P, KIND, "r1"))?.updatedAt).toMatch(ISO_UTC);
  });

  test("get", "returns the latest value after an update", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    expect(await a.get(P, KIND, "r1")).toMatchObject({ value: { n: 2 }, revision: 2 });
  });

  test("get", "round-trips JSON edge values (falsy, nested, empty, numbers)", async (a) => {
    const value = {
      zero: 0,
      no: false,
      empty: "",
      nothing: null,
      list: [],
      obj: {},
      deep: { a: { b: { c: [1, [2, [3]]] } } },
      negative: -1.5,
      big: Number.MAX_SAFE_INTEGER,
      tiny: 5e-324,
    };
    await a.put(P, KIND, "r1", value, null);
    expect((await a.get(P, KIND, "r1"))?.value).toEqual(value);
  });

  test("get", "round-trips a 5 MB value", async (a) => {
    const value = {
      blob: "x".repeat(5 * 1024 * 1024),
      items: Array.from({ length: 1000 }, (_, i) => ({ i, s: `é${i}😀` })),
    };
    await a.put(P, KIND, "big", value, null);
    expect((await a.get(P, KIND, "big"))?.value).toEqual(value);
  });

  test("get", "round-trips unicode in ids and values", async (a) => {
    const id = "задача/任务/مهمة/😀/e\u0301";
    const value = { text: "Grüße 你好 שלום 🚀 e\u0301 \u200d", emoji: "👩‍💻" };
    await a.put(P, KIND, id, value, null);
    expect((await a.get(P, KIND, id))?.value).toEqual(value);
  });

  test("get", "round-trips control characters and lone surrogates inside values", async (a) => {
    const value = { control: "a\u0000b\u0001c\n\t\r", lone: "x\ud800y\udfffz", quote: "\"'\\" };
    await a.put(P, KIND, "r1", value, null);
    expect((await a.get(P, KIND, "r1"))?.value).toEqual(value);
  });

  test("get", "returns a copy: mutating it does not change the stored value", async (a) => {
    await a.put(P, KIND, "r1", { list: [1, 2] }, null);
    const first = await a.get(P, KIND, "r1");
    (first?.value as { list: number[] }).list.push(3);
    expect((await a.get(P, KIND, "r1"))?.value).toEqual({ list: [1, 2] });
  });

  test("get", "is not affected by mutating the object passed to put", async (a) => {
    const value = { list: [1, 2] };
    await a.put(P, KIND, "r1", value, null);
    value.list.push(3);
    expect((await a.get(P, KIND, "r1"))?.value).toEqual({ list: [1, 2] });
  });

  test("get", "is isolated between projects", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    expect(await a.get(Q, KIND, "r1")).toBeNull();
  });

  test("get", "is isolated between kinds", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    expect(await a.get(P, OTHER_KIND, "r1")).toBeNull();
  });

  test("get", "does not create the record it looked for", async (a) => {
    await a.get(P, KIND, "missing");
    expect(await a.list(P, KIND)).toEqual([]);
  });

  test("get", "rejects an empty id with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.get(P, KIND, ""))).toBeInstanceOf(AuthorityFailure);
  });

  // ----------------------------------------------------------------------------------------------------
  // put

  test("put", "creates a record at revision 1 with expectedRevision null", async (a) => {
    expect(await a.put(P, KIND, "r1", { n: 1 }, null)).toEqual({ revision: 1 });
  });

  test("put", "increments the revision by one on each update", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    const second = await a.put(P, KIND, "r1", { n: 2 }, 1);
    const third = await a.put(P, KIND, "r1", { n: 3 }, 2);
    expect([second.revision, third.revision]).toEqual([2, 3]);
  });

  test("put", "rejects expectedRevision null on an existing record with AuthorityConflict", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    expect(await rejectionOf(a.put(P, KIND, "r1", { n: 2 }, null))).toBeInstanceOf(AuthorityConflict);
  });

  test("put", "reports the current revision when expectedRevision null meets an existing record", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    const error = await rejectionOf(a.put(P, KIND, "r1", { n: 3 }, null));
    expect((error as AuthorityConflict).details.revision).toBe(2);
  });

  test("put", "rejects a stale expectedRevision with AuthorityConflict", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    expect(await rejectionOf(a.put(P, KIND, "r1", { n: 3 }, 1))).toBeInstanceOf(AuthorityConflict);
  });

  test("put", "reports the current revision when expectedRevision is stale", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    await a.put(P, KIND, "r1", { n: 3 }, 2);
    const error = await rejectionOf(a.put(P, KIND, "r1", { n: 4 }, 1));
    expect((error as AuthorityConflict).details.revision).toBe(3);
  });

  test("put", "rejects an expectedRevision ahead of the current one with AuthorityConflict", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    expect(await rejectionOf(a.put(P, KIND, "r1", { n: 2 }, 5))).toBeInstanceOf(AuthorityConflict);
  });

  test("put", "rejects a numeric expectedRevision for a missing record with AuthorityConflict", async (a) => {
    expect(await rejectionOf(a.put(P, KIND, "missing", { n: 1 }, 1))).toBeInstanceOf(AuthorityConflict);
  });

  test("put", "does not create the record when a numeric expectedRevision meets a missing one", async (a) => {
    await rejectionOf(a.put(P, KIND, "missing", { n: 1 }, 1));
    expect(await a.get(P, KIND, "missing")).toBeNull();
  });

  test("put", "leaves the stored record unchanged after a conflict", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await rejectionOf(a.put(P, KIND, "r1", { n: 99 }, null));
    expect(await a.get(P, KIND, "r1")).toMatchObject({ value: { n: 1 }, revision: 1 });
  });

  test("put", "lets exactly one of many racing writers with the same expectedRevision win", async (a) => {
    await a.put(P, KIND, "r1", { writer: -1 }, null);
    const results = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) => a.put(P, KIND, "r1", { writer: i }, 1)),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
  });

  test("put", "rejects every losing racer with AuthorityConflict", async (a) => {
    await a.put(P, KIND, "r1", { writer: -1 }, null);
    const results = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) => a.put(P, KIND, "r1", { writer: i }, 1)),
    );
    const reasons = results.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
    expect(reasons.every((reason) => reason instanceof AuthorityConflict)).toBe(true);
  });

  test("put", "stores the winner's value when racers collide", async (a) => {
    await a.put(P, KIND, "r1", { writer: -1 }, null);
    const results = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) => a.put(P, KIND, "r1", { writer: i }, 1)),
    );
    const winner = results.findIndex((r) => r.status === "fulfilled");
    expect(await a.get(P, KIND, "r1")).toMatchObject({ value: { writer: winner }, revision: 2 });
  });

  test("put", "lets exactly one of many racing creators win", async (a) => {
    const results = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) => a.put(P, KIND, "new", { writer: i }, null)),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
  });

  test("put", "recreates a deleted record at revision 1", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    await a.delete(P, KIND, "r1");
    expect(await a.put(P, KIND, "r1", { n: 3 }, null)).toEqual({ revision: 1 });
  });

  test("put", "keeps the same id in two projects independent", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    expect(await a.put(Q, KIND, "r1", { n: 3 }, null)).toEqual({ revision: 1 });
  });

  test("put", "keeps the same id in two kinds independent", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, OTHER_KIND, "r1", { other: true }, null);
    expect((await a.get(P, KIND, "r1"))?.value).toEqual({ n: 1 });
  });

  test("put", "treats ids that differ only by % or _ as distinct records", async (a) => {
    await a.put(P, KIND, "a%c", { v: "percent" }, null);
    await a.put(P, KIND, "a_c", { v: "underscore" }, null);
    await a.put(P, KIND, "abc", { v: "plain" }, null);
    const values = await Promise.all(["a%c", "a_c", "abc"].map(async (id) => (await a.get(P, KIND, id))?.value));
    expect(values).toEqual([{ v: "percent" }, { v: "underscore" }, { v: "plain" }]);
  });

  test("put", "accepts an array as the value", async (a) => {
    await a.put(P, KIND, "r1", [1, "two", { three: 3 }], null);
    expect((await a.get(P, KIND, "r1"))?.value).toEqual([1, "two", { three: 3 }]);
  });

  test("put", "rejects expectedRevision 0 with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.put(P, KIND, "r1", { n: 1 }, 0))).toBeInstanceOf(AuthorityFailure);
  });

  test("put", "rejects a non-integer expectedRevision with AuthorityFailure", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    expect(await rejectionOf(a.put(P, KIND, "r1", { n: 2 }, 1.5))).toBeInstanceOf(AuthorityFailure);
  });

  test("put", "rejects a value that is not an object with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.put(P, KIND, "r1", "text" as unknown as object, null))).toBeInstanceOf(AuthorityFailure);
  });

  test("put", "rejects an empty project id with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.put("", KIND, "r1", { n: 1 }, null))).toBeInstanceOf(AuthorityFailure);
  });

  test("put", "rejects an id with a lone surrogate with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.put(P, KIND, "bad\ud800", { n: 1 }, null))).toBeInstanceOf(AuthorityFailure);
  });

  // ----------------------------------------------------------------------------------------------------
  // delete

  test("delete", "returns false for a record that does not exist", async (a) => {
    expect(await a.delete(P, KIND, "missing")).toBe(false);
  });

  test("delete", "returns false for a missing record even with expectedRevision", async (a) => {
    expect(await a.delete(P, KIND, "missing", 3)).toBe(false);
  });

  test("delete", "returns true when it removes a record", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    expect(await a.delete(P, KIND, "r1")).toBe(true);
  });

  test("delete", "removes the record so get returns null", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.delete(P, KIND, "r1");
    expect(await a.get(P, KIND, "r1")).toBeNull();
  });

  test("delete", "removes the record when expectedRevision matches", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    expect(await a.delete(P, KIND, "r1", 2)).toBe(true);
  });

  test("delete", "rejects a stale expectedRevision with AuthorityConflict", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    expect(await rejectionOf(a.delete(P, KIND, "r1", 1))).toBeInstanceOf(AuthorityConflict);
  });

  test("delete", "reports the current revision when expectedRevision is stale", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    const error = await rejectionOf(a.delete(P, KIND, "r1", 1));
    expect((error as AuthorityConflict).details.revision).toBe(2);
  });

  test("delete", "keeps the record after a conflict", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    await rejectionOf(a.delete(P, KIND, "r1", 1));
    expect(await a.get(P, KIND, "r1")).toMatchObject({ value: { n: 2 }, revision: 2 });
  });

  test("delete", "removes only the addressed record (same id in other kinds and projects stays)", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, OTHER_KIND, "r1", { n: 2 }, null);
    await a.put(Q, KIND, "r1", { n: 3 }, null);
    await a.delete(P, KIND, "r1");
    const left = [await a.get(P, OTHER_KIND, "r1"), await a.get(Q, KIND, "r1")].map((r) => r?.value);
    expect(left).toEqual([{ n: 2 }, { n: 3 }]);
  });

  test("delete", "does not touch an event stream with the same name", async (a) => {
    await a.put(P, KIND, "s1", { n: 1 }, null);
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    await a.delete(P, KIND, "s1");
    expect(await a.readEvents(P, "s1", 0)).toEqual([{ seq: 1, event: { e: 1 } }]);
  });

  test("delete", "lets exactly one of many racing deleters win", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    const results = await Promise.all(Array.from({ length: 10 }, () => a.delete(P, KIND, "r1", 1)));
    expect(results.filter((deleted) => deleted)).toHaveLength(1);
  });

  test("delete", "rejects expectedRevision 0 with AuthorityFailure", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    expect(await rejectionOf(a.delete(P, KIND, "r1", 0))).toBeInstanceOf(AuthorityFailure);
  });

  // ----------------------------------------------------------------------------------------------------
  // list

  test("list", "returns an empty array when the kind has no records", async (a) => {
    expect(await a.list(P, KIND)).toEqual([]);
  });

  test("list", "orders records by id whatever the insertion order", async (a) => {
    for (const id of ["delta", "alpha", "charlie", "bravo"]) await a.put(P, KIND, id, { id }, null);
    expect((await a.list(P, KIND)).map((r) => r.id)).toEqual(["alpha", "bravo", "charlie", "delta"]);
  });

  test("list", "orders ids by Unicode code point (UTF-8 byte order)", async (a) => {
    for (const id of ["😀", "b", "\uff21", "a-1", "é", "a", "A"]) await a.put(P, KIND, id, { id }, null);
    expect((await a.list(P, KIND)).map((r) => r.id)).toEqual(["A", "a", "a-1", "b", "é", "\uff21", "😀"]);
  });

  test("list", "returns each record's revision and updatedAt as get does", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r1", { n: 2 }, 1);
    const stored = await a.get(P, KIND, "r1");
    expect(await a.list(P, KIND)).toEqual([{ id: "r1", revision: 2, updatedAt: stored?.updatedAt }]);
  });

  test("list", "filters by id prefix", async (a) => {
    for (const id of ["prd_1", "prd_2", "ckp_1", "pr"]) await a.put(P, KIND, id, { id }, null);
    expect((await a.list(P, KIND, "prd_")).map((r) => r.id)).toEqual(["prd_1", "prd_2"]);
  });

  test("list", "returns every record for an empty prefix", async (a) => {
    for (const id of ["b", "a"]) await a.put(P, KIND, id, { id }, null);
    expect((await a.list(P, KIND, "")).map((r) => r.id)).toEqual(["a", "b"]);
  });

  test("list", "includes an id equal to the prefix", async (a) => {
    for (const id of ["ab", "abc", "b"]) await a.put(P, KIND, id, { id }, null);
    expect((await a.list(P, KIND, "ab")).map((r) => r.id)).toEqual(["ab", "abc"]);
  });

  test("list", "treats % in the prefix literally", async (a) => {
    for (const id of ["a%b", "a_b", "axb", "a%", "ab"]) await a.put(P, KIND, id, { id }, null);
    expect((await a.list(P, KIND, "a%")).map((r) => r.id)).toEqual(["a%", "a%b"]);
  });

  test("list", "treats _ in the prefix literally", async (a) => {
    for (const id of ["a%b", "a_b", "axb", "a%", "ab"]) await a.put(P, KIND, id, { id }, null);
    expect((await a.list(P, KIND, "a_")).map((r) => r.id)).toEqual(["a_b"]);
  });

  test("list", "matches ids that continue the prefix with characters beyond U+FFFF", async (a) => {
    for (const id of ["a😀", "a\uffff", "a", "b"]) await a.put(P, KIND, id, { id }, null);
    expect((await a.list(P, KIND, "a")).map((r) => r.id)).toEqual(["a", "a\uffff", "a😀"]);
  });

  test("list", "filters by a prefix that is itself beyond U+FFFF", async (a) => {
    for (const id of ["😀1", "😀2", "😁1", "\uffff"]) await a.put(P, KIND, id, { id }, null);
    expect((await a.list(P, KIND, "😀")).map((r) => r.id)).toEqual(["😀1", "😀2"]);
  });

  test("list", "is isolated between kinds", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, OTHER_KIND, "r2", { n: 2 }, null);
    expect((await a.list(P, KIND)).map((r) => r.id)).toEqual(["r1"]);
  });

  test("list", "is isolated between projects", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(Q, KIND, "r2", { n: 2 }, null);
    expect((await a.list(Q, KIND)).map((r) => r.id)).toEqual(["r2"]);
  });

  test("list", "omits deleted records", async (a) => {
    for (const id of ["r1", "r2", "r3"]) await a.put(P, KIND, id, { id }, null);
    await a.delete(P, KIND, "r2");
    expect((await a.list(P, KIND)).map((r) => r.id)).toEqual(["r1", "r3"]);
  });

  test("list", "does not change any revision", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.list(P, KIND);
    expect(await a.put(P, KIND, "r1", { n: 2 }, 1)).toEqual({ revision: 2 });
  });

  test("list", "rejects an empty kind with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.list(P, ""))).toBeInstanceOf(AuthorityFailure);
  });

  // ----------------------------------------------------------------------------------------------------
  // appendEvents

  test("appendEvents", "starts a new stream at expectedSeq 0 and returns the last sequence number", async (a) => {
    expect(await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }], 0)).toEqual({ lastSeq: 3 });
  });

  test("appendEvents", "continues the numbering when expectedSeq is the last sequence number", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    expect(await a.appendEvents(P, "s1", [{ e: 3 }], 2)).toEqual({ lastSeq: 3 });
  });

  test("appendEvents", "rejects a stale expectedSeq with AuthorityConflict", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    expect(await rejectionOf(a.appendEvents(P, "s1", [{ e: 3 }], 1))).toBeInstanceOf(AuthorityConflict);
  });

  test("appendEvents", "rejects an expectedSeq ahead of the stream with AuthorityConflict", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    expect(await rejectionOf(a.appendEvents(P, "s1", [{ e: 2 }], 5))).toBeInstanceOf(AuthorityConflict);
  });

  test("appendEvents", "rejects expectedSeq 0 on an existing stream with AuthorityConflict", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    expect(await rejectionOf(a.appendEvents(P, "s1", [{ e: 2 }], 0))).toBeInstanceOf(AuthorityConflict);
  });

  test("appendEvents", "rejects a nonzero expectedSeq on a new stream with AuthorityConflict", async (a) => {
    expect(await rejectionOf(a.appendEvents(P, "s1", [{ e: 1 }], 1))).toBeInstanceOf(AuthorityConflict);
  });

  test("appendEvents", "appends nothing when expectedSeq is wrong", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    await rejectionOf(a.appendEvents(P, "s1", [{ e: 2 }, { e: 3 }], 0));
    expect(await a.readEvents(P, "s1", 0)).toEqual([{ seq: 1, event: { e: 1 } }]);
  });

  test("appendEvents", "with no events checks expectedSeq and returns it", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    expect(await a.appendEvents(P, "s1", [], 2)).toEqual({ lastSeq: 2 });
  });

  test("appendEvents", "with no events still rejects a wrong expectedSeq with AuthorityConflict", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    expect(await rejectionOf(a.appendEvents(P, "s1", [], 0))).toBeInstanceOf(AuthorityConflict);
  });

  test("appendEvents", "lets exactly one of many racing appenders with the same expectedSeq win", async (a) => {
    const results = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) => a.appendEvents(P, "s1", [{ writer: i }], 0)),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
  });

  test("appendEvents", "keeps streams of one project independent", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    expect(await a.appendEvents(P, "s2", [{ e: 1 }], 0)).toEqual({ lastSeq: 1 });
  });

  test("appendEvents", "keeps the same stream name in two projects independent", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    expect(await a.appendEvents(Q, "s1", [{ e: 1 }], 0)).toEqual({ lastSeq: 1 });
  });

  test("appendEvents", "stores copies: mutating an appended event changes nothing", async (a) => {
    const event = { list: [1] };
    await a.appendEvents(P, "s1", [event], 0);
    event.list.push(2);
    expect(await a.readEvents(P, "s1", 0)).toEqual([{ seq: 1, event: { list: [1] } }]);
  });

  test("appendEvents", "rejects a negative expectedSeq with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.appendEvents(P, "s1", [{ e: 1 }], -1))).toBeInstanceOf(AuthorityFailure);
  });

  test("appendEvents", "rejects an event that is not an object with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.appendEvents(P, "s1", [42 as unknown as object], 0))).toBeInstanceOf(AuthorityFailure);
  });

  // ----------------------------------------------------------------------------------------------------
  // readEvents

  test("readEvents", "returns an empty array for an unknown stream", async (a) => {
    expect(await a.readEvents(P, "missing", 0)).toEqual([]);
  });

  test("readEvents", "returns every event oldest first with seq 1, 2, … after 0", async (a) => {
    await a.appendEvents(P, "s1", [{ e: "a" }, { e: "b" }], 0);
    await a.appendEvents(P, "s1", [{ e: "c" }], 2);
    expect(await a.readEvents(P, "s1", 0)).toEqual([
      { seq: 1, event: { e: "a" } },
      { seq: 2, event: { e: "b" } },
      { seq: 3, event: { e: "c" } },
    ]);
  });

  test("readEvents", "returns only events with seq greater than afterSeq", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }, { e: 4 }], 0);
    expect((await a.readEvents(P, "s1", 2)).map((e) => e.seq)).toEqual([3, 4]);
  });

  test("readEvents", "returns an empty array when afterSeq is the last sequence number or beyond", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    expect([await a.readEvents(P, "s1", 2), await a.readEvents(P, "s1", 10)]).toEqual([[], []]);
  });

  test("readEvents", "is isolated between streams", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    await a.appendEvents(P, "s2", [{ e: 2 }], 0);
    expect(await a.readEvents(P, "s2", 0)).toEqual([{ seq: 1, event: { e: 2 } }]);
  });

  test("readEvents", "is isolated between projects", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    expect(await a.readEvents(Q, "s1", 0)).toEqual([]);
  });

  test("readEvents", "round-trips unicode and large events", async (a) => {
    const event = { text: "Grüße 你好 🚀 \ud800", blob: "y".repeat(1024 * 1024) };
    await a.appendEvents(P, "s1", [event], 0);
    expect(await a.readEvents(P, "s1", 0)).toEqual([{ seq: 1, event }]);
  });

  test("readEvents", "returns copies: mutating one does not change the stored event", async (a) => {
    await a.appendEvents(P, "s1", [{ list: [1] }], 0);
    const [first] = await a.readEvents(P, "s1", 0);
    (first?.event as { list: number[] }).list.push(2);
    expect(await a.readEvents(P, "s1", 0)).toEqual([{ seq: 1, event: { list: [1] } }]);
  });

  test("readEvents", "does not create the stream it looked for", async (a) => {
    await a.readEvents(P, "s1", 0);
    expect(await a.appendEvents(P, "s1", [{ e: 1 }], 0)).toEqual({ lastSeq: 1 });
  });

  test("readEvents", "rejects a negative afterSeq with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.readEvents(P, "s1", -1))).toBeInstanceOf(AuthorityFailure);
  });

  test("readEvents", "returns at most limit events, the oldest after afterSeq", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }, { e: 4 }, { e: 5 }], 0);
    expect((await a.readEvents(P, "s1", 1, 2)).map((e) => e.seq)).toEqual([2, 3]);
  });

  test("readEvents", "returns every remaining event when fewer than limit remain", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }], 0);
    expect((await a.readEvents(P, "s1", 1, 10)).map((e) => e.seq)).toEqual([2, 3]);
  });

  test("readEvents", "reads a stream in pages of limit that join up to the whole stream", async (a) => {
    await a.appendEvents(
      P,
      "s1",
      Array.from({ length: 7 }, (_, e) => ({ e })),
      0,
    );
    const seqs: number[] = [];
    for (let page = await a.readEvents(P, "s1", 0, 3); page.length > 0; ) {
      seqs.push(...page.map((e) => e.seq));
      page = await a.readEvents(P, "s1", seqs[seqs.length - 1] ?? 0, 3);
    }
    expect(seqs).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  test("readEvents", "returns a long stream whole without a limit", async (a) => {
    const events = Array.from({ length: 1_234 }, (_, i) => ({ i }));
    await a.appendEvents(P, "s1", events, 0);
    const read = await a.readEvents(P, "s1", 0);
    expect(read.map((e) => e.event)).toEqual(events);
  });

  test("readEvents", "returns the first limit events of a long stream in order", async (a) => {
    await a.appendEvents(
      P,
      "s1",
      Array.from({ length: 1_234 }, (_, i) => ({ i })),
      0,
    );
    const read = await a.readEvents(P, "s1", 100, 1_000);
    expect([read.length, read[0]?.seq, read[read.length - 1]?.seq]).toEqual([1_000, 101, 1_100]);
  });

  test("readEvents", "rejects a limit of 0 with AuthorityFailure", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    expect(await rejectionOf(a.readEvents(P, "s1", 0, 0))).toBeInstanceOf(AuthorityFailure);
  });

  test("readEvents", "rejects a non-integer limit with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.readEvents(P, "s1", 0, 1.5))).toBeInstanceOf(AuthorityFailure);
  });

  // ----------------------------------------------------------------------------------------------------
  // deleteStream

  test("deleteStream", "returns false for a stream that does not exist", async (a) => {
    expect(await a.deleteStream(P, "missing")).toBe(false);
  });

  test("deleteStream", "returns true when it deletes a stream with events", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    expect(await a.deleteStream(P, "s1")).toBe(true);
  });

  test("deleteStream", "removes every event of the stream", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    await a.deleteStream(P, "s1");
    expect(await a.readEvents(P, "s1", 0)).toEqual([]);
  });

  test("deleteStream", "returns false the second time", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    await a.deleteStream(P, "s1");
    expect(await a.deleteStream(P, "s1")).toBe(false);
  });

  test("deleteStream", "restarts the numbering: the next append expects 0 and gets seq 1", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    await a.deleteStream(P, "s1");
    expect(await a.appendEvents(P, "s1", [{ e: 3 }], 0)).toEqual({ lastSeq: 1 });
  });

  test("deleteStream", "refuses an append at the old sequence number afterwards with AuthorityConflict", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    await a.deleteStream(P, "s1");
    expect(await rejectionOf(a.appendEvents(P, "s1", [{ e: 3 }], 2))).toBeInstanceOf(AuthorityConflict);
  });

  test("deleteStream", "leaves other streams and other projects' stream of that name", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    await a.appendEvents(P, "s2", [{ e: 2 }], 0);
    await a.appendEvents(Q, "s1", [{ e: 3 }], 0);
    await a.deleteStream(P, "s1");
    expect([await a.readEvents(P, "s2", 0), await a.readEvents(Q, "s1", 0)]).toEqual([
      [{ seq: 1, event: { e: 2 } }],
      [{ seq: 1, event: { e: 3 } }],
    ]);
  });

  test("deleteStream", "does not touch a record with the same name", async (a) => {
    await a.put(P, KIND, "s1", { n: 1 }, null);
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    await a.deleteStream(P, "s1");
    expect((await a.get(P, KIND, "s1"))?.value).toEqual({ n: 1 });
  });

  test("deleteStream", "rejects an empty stream name with AuthorityFailure", async (a) => {
    expect(await rejectionOf(a.deleteStream(P, ""))).toBeInstanceOf(AuthorityFailure);
  });

  // ----------------------------------------------------------------------------------------------------
  // pruneEvents

  const prune = async (
    a: RunStateAuthority,
    projectId: string,
    stream: string,
    beforeSeq: number,
    afterSeq?: number,
  ) => {
    if (!a.pruneEvents) throw new ExpectationFailure(`${a.name} does not implement pruneEvents`);
    return afterSeq === undefined
      ? a.pruneEvents(projectId, stream, beforeSeq)
      : a.pruneEvents(projectId, stream, beforeSeq, afterSeq);
  };

  test("pruneEvents", "deletes the events before beforeSeq and returns how many", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }, { e: 4 }], 0);
    expect(await prune(a, P, "s1", 3)).toBe(2);
  });

  test("pruneEvents", "keeps the events from beforeSeq on, with their sequence numbers", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }, { e: 4 }], 0);
    await prune(a, P, "s1", 3);
    expect(await a.readEvents(P, "s1", 0)).toEqual([
      { seq: 3, event: { e: 3 } },
      { seq: 4, event: { e: 4 } },
    ]);
  });

  test("pruneEvents", "keeps the numbering: the next append expects the last sequence number", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }], 0);
    await prune(a, P, "s1", 3);
    expect(await a.appendEvents(P, "s1", [{ e: 4 }], 3)).toEqual({ lastSeq: 4 });
  });

  test("pruneEvents", "refuses an append at 0 after a prune with AuthorityConflict", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }], 0);
    await prune(a, P, "s1", 3);
    expect(await rejectionOf(a.appendEvents(P, "s1", [{ e: 4 }], 0))).toBeInstanceOf(AuthorityConflict);
  });

  test("pruneEvents", "may prune up to the last event, which is kept", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }], 0);
    await prune(a, P, "s1", 3);
    expect(await a.readEvents(P, "s1", 0, 10)).toEqual([{ seq: 3, event: { e: 3 } }]);
  });

  test("pruneEvents", "pages after a prune start at the first kept event", async (a) => {
    await a.appendEvents(
      P,
      "s1",
      Array.from({ length: 6 }, (_, e) => ({ e })),
      0,
    );
    await prune(a, P, "s1", 4);
    expect((await a.readEvents(P, "s1", 0, 2)).map((e) => e.seq)).toEqual([4, 5]);
  });

  test("pruneEvents", "is idempotent: a second prune at the same point deletes nothing", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }, { e: 3 }], 0);
    await prune(a, P, "s1", 3);
    expect(await prune(a, P, "s1", 3)).toBe(0);
  });

  test("pruneEvents", "deletes nothing for beforeSeq 0 or 1, or an unknown stream", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    expect([await prune(a, P, "s1", 0), await prune(a, P, "s1", 1), await prune(a, P, "missing", 1)]).toEqual([
      0, 0, 0,
    ]);
  });

  test("pruneEvents", "touches no other stream and no other project", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    await a.appendEvents(P, "s2", [{ e: 1 }, { e: 2 }], 0);
    await a.appendEvents(Q, "s1", [{ e: 1 }, { e: 2 }], 0);
    await prune(a, P, "s1", 2);
    expect([(await a.readEvents(P, "s2", 0)).length, (await a.readEvents(Q, "s1", 0)).length]).toEqual([2, 2]);
  });

  test("pruneEvents", "with afterSeq deletes only the events strictly between afterSeq and beforeSeq", async (a) => {
    await a.appendEvents(
      P,
      "s1",
      Array.from({ length: 8 }, (_, e) => ({ e })),
      0,
    );
    expect(await prune(a, P, "s1", 6, 2)).toBe(3);
  });

  test("pruneEvents", "leaves a hole that readEvents skips, in order, with the kept sequence numbers", async (a) => {
    await a.appendEvents(
      P,
      "s1",
      Array.from({ length: 8 }, (_, e) => ({ e })),
      0,
    );
    await prune(a, P, "s1", 6, 2);
    expect((await a.readEvents(P, "s1", 0)).map((e) => e.seq)).toEqual([1, 2, 6, 7, 8]);
  });

  test("pruneEvents", "counts only kept events against limit across a hole", async (a) => {
    await a.appendEvents(
      P,
      "s1",
      Array.from({ length: 8 }, (_, e) => ({ e })),
      0,
    );
    await prune(a, P, "s1", 6, 2);
    expect((await a.readEvents(P, "s1", 1, 3)).map((e) => e.seq)).toEqual([2, 6, 7]);
  });

  test("pruneEvents", "refuses to prune the last event with AuthorityFailure", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    expect(await rejectionOf(prune(a, P, "s1", 3))).toBeInstanceOf(AuthorityFailure);
  });

  test("pruneEvents", "deletes nothing when it refuses", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }, { e: 2 }], 0);
    await rejectionOf(prune(a, P, "s1", 3));
    expect((await a.readEvents(P, "s1", 0)).map((e) => e.seq)).toEqual([1, 2]);
  });

  test("pruneEvents", "rejects a negative beforeSeq with AuthorityFailure", async (a) => {
    expect(await rejectionOf(prune(a, P, "s1", -1))).toBeInstanceOf(AuthorityFailure);
  });

  // ----------------------------------------------------------------------------------------------------
  // listProjects

  const listProjects = async (a: RunStateAuthority): Promise<string[]> => {
    if (!a.listProjects) throw new ExpectationFailure(`${a.name} does not implement listProjects`);
    return a.listProjects();
  };

  test("listProjects", "returns an empty array for an empty authority", async (a) => {
    expect(await listProjects(a)).toEqual([]);
  });

  test("listProjects", "returns every project with a record, sorted", async (a) => {
    for (const project of ["zeta", "alpha", "mu"]) await a.put(project, KIND, "r1", { project }, null);
    expect(await listProjects(a)).toEqual(["alpha", "mu", "zeta"]);
  });

  test("listProjects", "lists a project once however many records and kinds it holds", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(P, KIND, "r2", { n: 2 }, null);
    await a.put(P, OTHER_KIND, "r1", { n: 3 }, null);
    expect(await listProjects(a)).toEqual([P]);
  });

  test("listProjects", "omits a project whose records were all deleted", async (a) => {
    await a.put(P, KIND, "r1", { n: 1 }, null);
    await a.put(Q, KIND, "r1", { n: 1 }, null);
    await a.delete(P, KIND, "r1");
    expect(await listProjects(a)).toEqual([Q]);
  });

  test("listProjects", "does not count a project that only has events", async (a) => {
    await a.appendEvents(P, "s1", [{ e: 1 }], 0);
    expect(await listProjects(a)).toEqual([]);
  });

  // ----------------------------------------------------------------------------------------------------
  // close

  test("close", "makes later calls fail with AuthorityFailure", async (a) => {
    await a.close();
    expect(await rejectionOf(a.get(P, KIND, "r1"))).toBeInstanceOf(AuthorityFailure);
  });

  test("close", "makes later writes fail with AuthorityFailure", async (a) => {
    await a.close();
    expect(await rejectionOf(a.put(P, KIND, "r1", { n: 1 }, null))).toBeInstanceOf(AuthorityFailure);
  });

  test("close", "can be called twice", async (a) => {
    await a.close();
    await expect(a.close()).resolves.toBeUndefined();
  });

  return rules;
}
