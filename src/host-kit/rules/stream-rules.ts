/**
 * Authority conformance rules (PROTOCOL.md section 7) for appendEvents, readEvents and deleteStream: sequence numbers
 * from 1 checked on append, ordered and paged reads, and a deletion that restarts the numbering. Part of the list
 * `authorityRules()` (../authority-rules.ts) assembles in method order. Never depends on a backend or a test
 * framework.
 */
import { AuthorityConflict, AuthorityFailure } from "../../core/ports.js";
import { expect } from "../expect.js";
import { KIND, rejectionOf, type DefineRule, type RuleProjects } from "./support.js";

/** Adds the appendEvents, readEvents, deleteStream rules, in order, writing to the project ids `projects` gives. */
export function streamRules(test: DefineRule, projects: RuleProjects): void {
  appendSeqRules(test, projects);
  appendScopeRules(test, projects);
  readOrderRules(test, projects);
  readPageRules(test, projects);
  deleteStreamRules(test, projects);
}

/** appendEvents: numbering from 1, checked against expectedSeq (also with no events); a wrong one appends nothing. */
function appendSeqRules(test: DefineRule, { P }: RuleProjects): void {
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
}

/** appendEvents: one winner among racing appenders, streams scoped by project and name, stored copies, bad input. */
function appendScopeRules(test: DefineRule, { P, Q }: RuleProjects): void {
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
}

/** readEvents without limit: oldest first after afterSeq, one stream of one project, copies, reads create nothing. */
function readOrderRules(test: DefineRule, { P, Q }: RuleProjects): void {
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
}

/** readEvents with limit: the first `limit` events after afterSeq, pages that join up, long streams, bad limits. */
function readPageRules(test: DefineRule, { P }: RuleProjects): void {
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
}

/** deleteStream: removes one stream's events and restarts its numbering, touching nothing else. */
function deleteStreamRules(test: DefineRule, { P, Q }: RuleProjects): void {
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
}
