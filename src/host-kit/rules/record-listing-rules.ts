/**
 * Authority conformance rules (PROTOCOL.md section 7) for delete and list: removing one record (`false` when missing,
 * whatever the expected revision) and listing one kind by a literal prefix in code-point order. Part of the list
 * `authorityRules()` (../authority-rules.ts) assembles in method order. Never depends on a backend or a test
 * framework.
 */
import { AuthorityConflict, AuthorityFailure } from "../../core/ports.js";
import { expect } from "../expect.js";
import { KIND, OTHER_KIND, rejectionOf, type DefineRule, type RuleProjects } from "./support.js";

/** Adds the delete, list rules, in order, writing to the project ids `projects` gives. */
export function recordListingRules(test: DefineRule, projects: RuleProjects): void {
  deleteRules(test, projects);
  listOrderRules(test, projects);
  listScopeRules(test, projects);
}

/** delete: `false` for a missing record whatever the expected revision, conflicts, and exactly one racing winner. */
function deleteRules(test: DefineRule, { P, Q }: RuleProjects): void {
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
}

/** list: code-point order, the fields each entry carries, and the literal id prefix. */
function listOrderRules(test: DefineRule, { P }: RuleProjects): void {
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
}

/** list: what one listing covers (one kind of one project, no deleted record), that it writes nothing, bad kinds. */
function listScopeRules(test: DefineRule, { P, Q }: RuleProjects): void {
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
}
