/**
 * Authority conformance rules (PROTOCOL.md section 7) for pruneEvents, listProjects and close: compaction that keeps
 * the numbering and the last event, the sorted project listing, and the closed state. Part of the list
 * `authorityRules()` (../authority-rules.ts) assembles in method order. Never depends on a backend or a test
 * framework.
 */
import { AuthorityConflict, AuthorityFailure, type RunStateAuthority } from "../../core/ports.js";
import { ExpectationFailure, expect } from "../expect.js";
import { KIND, OTHER_KIND, rejectionOf, type DefineRule, type RuleProjects } from "./support.js";

/** Adds the pruneEvents, listProjects, close rules, in order, writing to the project ids `projects` gives. */
export function maintenanceRules(test: DefineRule, projects: RuleProjects): void {
  pruneBeforeRules(test, projects);
  pruneRangeRules(test, projects);
  listProjectsRules(test, projects);
  closeRules(test, projects);
}

/** Calls `pruneEvents` (optional on the port); fails the rule when the backend does not implement it. */
async function prune(
  a: RunStateAuthority,
  projectId: string,
  stream: string,
  beforeSeq: number,
  afterSeq?: number,
): Promise<number> {
  if (!a.pruneEvents) throw new ExpectationFailure(`${a.name} does not implement pruneEvents`);
  return afterSeq === undefined
    ? a.pruneEvents(projectId, stream, beforeSeq)
    : a.pruneEvents(projectId, stream, beforeSeq, afterSeq);
}

/** Calls `listProjects` (optional on the port); fails the rule when the backend does not implement it. */
async function listProjects(a: RunStateAuthority): Promise<string[]> {
  if (!a.listProjects) throw new ExpectationFailure(`${a.name} does not implement listProjects`);
  return a.listProjects();
}

/** pruneEvents without afterSeq: compaction of a stream's head that keeps the numbering and the other streams. */
function pruneBeforeRules(test: DefineRule, { P, Q }: RuleProjects): void {
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
}

/** pruneEvents with afterSeq (a hole in the stream), and the refusals: the last event, a negative beforeSeq. */
function pruneRangeRules(test: DefineRule, { P }: RuleProjects): void {
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
}

/** listProjects: the sorted, duplicate-free list of projects holding at least one record. */
function listProjectsRules(test: DefineRule, { P, Q }: RuleProjects): void {
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
}

/** close: every later call fails with AuthorityFailure; closing twice is fine. */
function closeRules(test: DefineRule, { P }: RuleProjects): void {
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
}
