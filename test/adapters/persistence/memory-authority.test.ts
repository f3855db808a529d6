// MemoryAuthority beyond the shared conformance suite (test/authority/): fault injection (used to test guarantee 2),
// the write counter (used to test guarantee 3), the injected clock, and code-point ordering.
import { describe, expect, it } from "vitest";
import { MemoryAuthority, compareCodePoints } from "../../../src/adapters/persistence/memory-authority.js";
import { AuthorityConflict, AuthorityFailure } from "../../../src/core/ports.js";

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to be rejected, but it resolved");
}

describe("MemoryAuthority.failNext", () => {
  it("makes the next matching write throw AuthorityFailure", async () => {
    const authority = new MemoryAuthority();
    authority.failNext("put");
    expect(await rejectionOf(authority.put("p", "k", "r1", { n: 1 }, null))).toBeInstanceOf(AuthorityFailure);
  });

  it("changes nothing when the injected failure fires", async () => {
    const authority = new MemoryAuthority();
    authority.failNext("put");
    await rejectionOf(authority.put("p", "k", "r1", { n: 1 }, null));
    expect(await authority.get("p", "k", "r1")).toBeNull();
  });

  it("fails only once per call to failNext", async () => {
    const authority = new MemoryAuthority();
    authority.failNext("put");
    await rejectionOf(authority.put("p", "k", "r1", { n: 1 }, null));
    expect(await authority.put("p", "k", "r1", { n: 1 }, null)).toEqual({ revision: 1 });
  });

  it("queues one failure per call", async () => {
    const authority = new MemoryAuthority();
    authority.failNext("appendEvents");
    authority.failNext("appendEvents");
    const outcomes = await Promise.allSettled([0, 1, 2].map(() => authority.appendEvents("p", "s", [{ e: 1 }], 0)));
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected", "fulfilled"]);
  });

  it("does not fire on other operations", async () => {
    const authority = new MemoryAuthority();
    authority.failNext("delete");
    await authority.put("p", "k", "r1", { n: 1 }, null);
    await authority.get("p", "k", "r1");
    expect(await rejectionOf(authority.delete("p", "k", "r1"))).toBeInstanceOf(AuthorityFailure);
  });

  it('"write" matches the next put, delete or appendEvents but no read', async () => {
    const authority = new MemoryAuthority();
    authority.failNext("write");
    await authority.list("p", "k");
    await authority.readEvents("p", "s", 0);
    expect(await rejectionOf(authority.appendEvents("p", "s", [{ e: 1 }], 0))).toBeInstanceOf(AuthorityFailure);
  });

  it('"any" matches a read too', async () => {
    const authority = new MemoryAuthority();
    authority.failNext("any");
    expect(await rejectionOf(authority.get("p", "k", "r1"))).toBeInstanceOf(AuthorityFailure);
  });

  it("wraps a plain error in AuthorityFailure with the error as cause", async () => {
    const authority = new MemoryAuthority();
    const disk = new Error("disk full");
    authority.failNext("put", disk);
    const error = await rejectionOf(authority.put("p", "k", "r1", { n: 1 }, null));
    expect(error).toMatchObject({ name: "AuthorityFailure", cause: disk });
  });

  it("throws an AuthorityConflict as given (to simulate a lost lease)", async () => {
    const authority = new MemoryAuthority();
    const conflict = new AuthorityConflict("lease held by another owner", { owner: "other" });
    authority.failNext("put", conflict);
    expect(await rejectionOf(authority.put("p", "k", "r1", { n: 1 }, null))).toBe(conflict);
  });
});

describe("MemoryAuthority.setFailure", () => {
  it("fails every call the predicate selects", async () => {
    const authority = new MemoryAuthority();
    authority.setFailure((call) => call.op === "put" && call.kind === "checkpoint");
    const outcomes = await Promise.allSettled([
      authority.put("p", "checkpoint", "c1", { n: 1 }, null),
      authority.put("p", "product", "r1", { n: 1 }, null),
      authority.put("p", "checkpoint", "c2", { n: 1 }, null),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "fulfilled", "rejected"]);
  });

  it("passes the call's address to the predicate", async () => {
    const authority = new MemoryAuthority();
    const seen: unknown[] = [];
    authority.setFailure((call) => {
      seen.push(call);
      return false;
    });
    await authority.appendEvents("p", "goal-1", [{ e: 1 }], 0);
    expect(seen).toEqual([{ op: "appendEvents", projectId: "p", stream: "goal-1" }]);
  });

  it("throws the Error the predicate returns, wrapped in AuthorityFailure", async () => {
    const authority = new MemoryAuthority();
    const cause = new Error("host timed out");
    authority.setFailure(() => cause);
    expect(await rejectionOf(authority.delete("p", "k", "r1"))).toMatchObject({ name: "AuthorityFailure", cause });
  });

  it("stops failing once cleared with null", async () => {
    const authority = new MemoryAuthority();
    authority.setFailure(() => true);
    await rejectionOf(authority.put("p", "k", "r1", { n: 1 }, null));
    authority.setFailure(null);
    expect(await authority.put("p", "k", "r1", { n: 1 }, null)).toEqual({ revision: 1 });
  });
});

describe("MemoryAuthority.writeCount", () => {
  it("counts writes that changed the store", async () => {
    const authority = new MemoryAuthority();
    await authority.put("p", "k", "r1", { n: 1 }, null);
    await authority.put("p", "k", "r1", { n: 2 }, 1);
    await authority.appendEvents("p", "s", [{ e: 1 }], 0);
    await authority.delete("p", "k", "r1");
    expect(authority.writeCount).toBe(4);
  });

  it("does not count reads, conflicts, no-op deletes or empty appends", async () => {
    const authority = new MemoryAuthority();
    await authority.put("p", "k", "r1", { n: 1 }, null);
    await authority.get("p", "k", "r1");
    await authority.list("p", "k");
    await authority.readEvents("p", "s", 0);
    await authority.listProjects();
    await rejectionOf(authority.put("p", "k", "r1", { n: 2 }, null));
    await authority.delete("p", "k", "missing");
    await authority.appendEvents("p", "s", [], 0);
    expect(authority.writeCount).toBe(1);
  });
});

describe("MemoryAuthority options", () => {
  it("stamps updatedAt from the injected clock", async () => {
    const authority = new MemoryAuthority({ clock: { now: () => Date.UTC(2030, 0, 2, 3, 4, 5, 6) } });
    await authority.put("p", "k", "r1", { n: 1 }, null);
    expect((await authority.get("p", "k", "r1"))?.updatedAt).toBe("2030-01-02T03:04:05.006Z");
  });

  it("refuses a value JSON cannot hold (a BigInt, a cycle) with AuthorityFailure, and stores nothing", async () => {
    const authority = new MemoryAuthority();
    expect(await rejectionOf(authority.put("p", "k", "r1", { n: 1n }, null))).toBeInstanceOf(AuthorityFailure);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(await rejectionOf(authority.appendEvents("p", "s", [cycle], 0))).toBeInstanceOf(AuthorityFailure);
    expect(await authority.get("p", "k", "r1")).toBeNull();
    expect(await authority.readEvents("p", "s", 0)).toEqual([]);
  });

  it("keeps values as JSON, like the SQLite backend: a function field is dropped, a Date reads as its ISO string", async () => {
    const authority = new MemoryAuthority();
    await authority.put("p", "k", "r1", { run: () => 1, at: new Date(Date.UTC(2030, 0, 1)), keep: 1 }, null);
    expect((await authority.get("p", "k", "r1"))?.value).toEqual({ at: "2030-01-01T00:00:00.000Z", keep: 1 });
  });
});

describe("compareCodePoints", () => {
  it("orders characters beyond U+FFFF after U+E000…U+FFFF, unlike UTF-16 comparison", () => {
    expect(["😀", "\uff21", "\ue000", "z"].sort(compareCodePoints)).toEqual(["z", "\ue000", "\uff21", "😀"]);
  });

  it("orders a prefix before its extensions", () => {
    expect(["ab", "a", "abc"].sort(compareCodePoints)).toEqual(["a", "ab", "abc"]);
  });

  it("returns 0 for equal strings", () => {
    expect(compareCodePoints("é😀", "é😀")).toBe(0);
  });

  it("orders two supplementary characters by code point", () => {
    expect(["😁", "😀", "𝄞"].sort(compareCodePoints)).toEqual(["𝄞", "😀", "😁"]);
  });
});
