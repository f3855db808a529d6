/**
 * Authority conformance rules (PROTOCOL.md section 7) for get and put: reading one record, and writing it by
 * compare-and-swap (revisions start at 1 and grow by 1 per put; a conflict carries the current revision; values and
 * ids round-trip exactly). Part of the list `authorityRules()` (../authority-rules.ts) assembles in method order.
 * Never depends on a backend or a test framework.
 */
import { AuthorityConflict, AuthorityFailure } from "../../core/ports.js";
import { expect } from "../expect.js";
import { ISO_UTC, KIND, OTHER_KIND, rejectionOf, type DefineRule, type RuleProjects } from "./support.js";

/** Adds the get, put rules, in order, writing to the project ids `projects` gives. */
export function recordRules(test: DefineRule, projects: RuleProjects): void {
  getValueRules(test, projects);
  getScopeRules(test, projects);
  putRevisionRules(test, projects);
  putRaceRules(test, projects);
  putScopeRules(test, projects);
}

/** get: a missing record is null; a stored one comes back with its revision, updatedAt and exact value. */
function getValueRules(test: DefineRule, { P }: RuleProjects): void {
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
}

/** get: the value is a copy both ways, one project and one kind per read, reads create nothing, bad ids. */
function getScopeRules(test: DefineRule, { P, Q }: RuleProjects): void {
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
}

/** put: compare-and-swap on the revision (starts at 1, grows by 1) and what a conflict reports and leaves. */
function putRevisionRules(test: DefineRule, { P }: RuleProjects): void {
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
}

/** put: among racing writers (or creators) with the same expectedRevision, exactly one wins and its value is kept. */
function putRaceRules(test: DefineRule, { P }: RuleProjects): void {
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
}

/** put: a recreated record restarts at 1, ids are scoped by project and kind and literal, and invalid arguments. */
function putScopeRules(test: DefineRule, { P, Q }: RuleProjects): void {
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
}
