/**
 * The host run-state authority (PROTOCOL.md section 7) over a real JSON-RPC connection: `HostAuthority` on a
 * server-side `RpcConnection`, linked by in-memory streams to a test host built on the official ACP SDK client and
 * backed by a `MemoryAuthority` (test/support/test-host.ts).
 *
 * First the shared conformance suite, then what only the host backend has: error and timeout mapping, validation of
 * the host's answers, the `_` spelling, and the `DelegatingAuthority` that switches the server to the host.
 */
import { describe, expect, it } from "vitest";
import { DelegatingAuthority } from "../../src/adapters/persistence/delegating-authority.js";
import { HOST_READ_PAGE_EVENTS, HostAuthority } from "../../src/adapters/persistence/host-authority.js";
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import { AuthorityConflict, AuthorityFailure } from "../../src/core/ports.js";
import { rejectionOf, waitUntil } from "../support/fakes.js";
import { TestHost, connectInProcess, type InProcessLink, type InProcessOptions } from "../support/test-host.js";
import { runAuthorityConformance } from "./conformance.js";

const NO_LIST_PROJECTS =
  "PROTOCOL.md section 7 has no request that lists projects, so HostAuthority leaves listProjects undefined";
const links = new Map<HostAuthority, InProcessLink>();
const PRUNE_TESTS = [
  "deletes the events before beforeSeq and returns how many",
  "keeps the events from beforeSeq on, with their sequence numbers",
  "keeps the numbering: the next append expects the last sequence number",
  "refuses an append at 0 after a prune with AuthorityConflict",
  "may prune up to the last event, which is kept",
  "pages after a prune start at the first kept event",
  "is idempotent: a second prune at the same point deletes nothing",
  "deletes nothing for beforeSeq 0 or 1, or an unknown stream",
  "touches no other stream and no other project",
  "with afterSeq deletes only the events strictly between afterSeq and beforeSeq",
  "leaves a hole that readEvents skips, in order, with the kept sequence numbers",
  "counts only kept events against limit across a hole",
  "refuses to prune the last event with AuthorityFailure",
  "rejects a negative beforeSeq with AuthorityFailure",
];

runAuthorityConformance({
  name: "host (runState/* over JSON-RPC to an ACP SDK client)",
  create: async () => {
    const link = await connectInProcess(new TestHost());
    links.set(link.authority, link);
    return link.authority;
  },
  destroy: async (authority) => {
    await links.get(authority)?.close();
    links.delete(authority);
  },
  deviations: {
    "put: accepts an array as the value":
      "section 7 values are JSON objects (protocol/host.ts JsonObject rejects arrays), so an array is refused locally",
    "listProjects: returns an empty array for an empty authority": NO_LIST_PROJECTS,
    "listProjects: returns every project with a record, sorted": NO_LIST_PROJECTS,
    "listProjects: lists a project once however many records and kinds it holds": NO_LIST_PROJECTS,
    "listProjects: omits a project whose records were all deleted": NO_LIST_PROJECTS,
    "listProjects: does not count a project that only has events": NO_LIST_PROJECTS,
    ...Object.fromEntries(
      PRUNE_TESTS.map((title) => [
        `pruneEvents: ${title}`,
        "PROTOCOL.md section 7 has no request that prunes events, so HostAuthority leaves pruneEvents undefined",
      ]),
    ),
  },
});

/** Runs `body` with a fresh host and link, closing the link afterwards. */
async function withHost(
  body: (a: HostAuthority, host: TestHost, link: InProcessLink) => Promise<void>,
  options: InProcessOptions = {},
): Promise<void> {
  const host = new TestHost();
  const link = await connectInProcess(host, options);
  try {
    await body(link.authority, host, link);
  } finally {
    await link.close();
  }
}

describe("HostAuthority: host errors", () => {
  it("maps -32012 to AuthorityConflict carrying owner and revision from data", () =>
    withHost(async (a, host) => {
      host.conflictNext("put", { owner: "server-b", revision: 7 });
      const error = await rejectionOf(a.put("p", "product", "r1", { n: 1 }, null));
      expect(error instanceof AuthorityConflict && error.details).toEqual({ owner: "server-b", revision: 7 });
    }));

  it("maps -32012 with malformed data to AuthorityConflict without details", () =>
    withHost(async (a, host) => {
      host.failNext("appendEvents", { code: -32012, message: "taken", data: { owner: 42, revision: "x" } });
      const error = await rejectionOf(a.appendEvents("p", "s", [{ e: 1 }], 0));
      expect(error instanceof AuthorityConflict && error.details).toEqual({});
    }));

  it("maps any other host error to AuthorityFailure naming the method and the code", () =>
    withHost(async (a, host) => {
      host.failNext("put", { code: -32603, message: "disk full" });
      const error = await rejectionOf(a.put("p", "product", "r1", { n: 1 }, null));
      expect(error instanceof AuthorityFailure && error.message).toBe(
        "The host failed runState/put (error -32603): disk full.",
      );
    }));

  it("maps an unknown method (-32601, a host without section 7) to AuthorityFailure", () =>
    withHost(async (a, host) => {
      host.failNext("get", { code: -32601, message: "Method not found" });
      expect(await rejectionOf(a.get("p", "product", "r1"))).toBeInstanceOf(AuthorityFailure);
    }));

  it("fails a request the host never answers with AuthorityFailure after the timeout", () =>
    withHost(
      async (a, host) => {
        host.hangNext("put");
        const started = Date.now();
        const error = await rejectionOf(a.put("p", "product", "r1", { n: 1 }, null));
        expect([error instanceof AuthorityFailure && error.message, Date.now() - started >= 50]).toEqual([
          "The host did not answer runState/put within 50 ms.",
          true,
        ]);
      },
      { timeoutMs: 50 },
    ));

  it("keeps serving after a timeout", () =>
    withHost(
      async (a, host) => {
        host.hangNext("put");
        await rejectionOf(a.put("p", "product", "r1", { n: 1 }, null));
        expect(await a.put("p", "product", "r1", { n: 2 }, null)).toEqual({ revision: 1 });
      },
      { timeoutMs: 50 },
    ));

  it("accepts an answer that is slow but inside the timeout", () =>
    withHost(
      async (a, host) => {
        host.delayNext("put", 30);
        expect(await a.put("p", "product", "r1", { n: 1 }, null)).toEqual({ revision: 1 });
      },
      { timeoutMs: 2_000 },
    ));

  it("fails a pending request with AuthorityFailure when the host's output ends", () =>
    withHost(async (a, host, link) => {
      host.hangNext("get");
      const pending = rejectionOf(a.get("p", "product", "r1"));
      await waitUntil(() => host.calls.length === 1, "the host received the request");
      link.endHostOutput();
      const error = await pending;
      expect(error instanceof AuthorityFailure && error.message).toBe(
        "The connection to the host closed before it answered runState/get.",
      );
    }));

  it("fails a request on a disposed connection with AuthorityFailure", () =>
    withHost(async (a, _host, link) => {
      link.server.dispose();
      expect(await rejectionOf(a.readEvents("p", "s", 0))).toBeInstanceOf(AuthorityFailure);
    }));
});

describe("HostAuthority: validation of what the host answers", () => {
  const cases: [string, (host: TestHost) => void, (a: HostAuthority) => Promise<unknown>][] = [
    [
      "get without a revision",
      (h) => h.answerNext("get", { record: { value: {}, updatedAt: "2025-01-01T00:00:00Z" } }),
      (a) => a.get("p", "k", "r"),
    ],
    [
      "get with revision 0",
      (h) => h.answerNext("get", { record: { value: {}, revision: 0, updatedAt: "t" } }),
      (a) => a.get("p", "k", "r"),
    ],
    ["get with no record field", (h) => h.answerNext("get", {}), (a) => a.get("p", "k", "r")],
    [
      "put with a string revision",
      (h) => h.answerNext("put", { revision: "2" }),
      (a) => a.put("p", "k", "r", {}, null),
    ],
    [
      "put with a revision not above the expected one",
      (h) => h.answerNext("put", { revision: 3 }),
      (a) => a.put("p", "k", "r", {}, 3),
    ],
    ["delete with a non-boolean", (h) => h.answerNext("delete", { deleted: 1 }), (a) => a.delete("p", "k", "r")],
    [
      "list with an empty id",
      (h) => h.answerNext("list", { records: [{ id: "", revision: 1, updatedAt: "t" }] }),
      (a) => a.list("p", "k"),
    ],
    [
      "appendEvents with a lastSeq that skips",
      (h) => h.answerNext("appendEvents", { lastSeq: 5 }),
      (a) => a.appendEvents("p", "s", [{ e: 1 }], 0),
    ],
    [
      "appendEvents with a negative lastSeq",
      (h) => h.answerNext("appendEvents", { lastSeq: -1 }),
      (a) => a.appendEvents("p", "s", [], 0),
    ],
    [
      "readEvents out of sequence",
      (h) =>
        h.answerNext("readEvents", {
          events: [
            { seq: 2, event: {} },
            { seq: 1, event: {} },
          ],
          more: false,
        }),
      (a) => a.readEvents("p", "s", 0),
    ],
    [
      "readEvents with a gap",
      (h) =>
        h.answerNext("readEvents", {
          events: [
            { seq: 3, event: {} },
            { seq: 5, event: {} },
          ],
          more: false,
        }),
      (a) => a.readEvents("p", "s", 2),
    ],
    [
      "readEvents at or before afterSeq",
      (h) => h.answerNext("readEvents", { events: [{ seq: 2, event: {} }], more: false }),
      (a) => a.readEvents("p", "s", 2),
    ],
    [
      "readEvents without more",
      (h) => h.answerNext("readEvents", { events: [{ seq: 1, event: {} }] }),
      (a) => a.readEvents("p", "s", 0),
    ],
    [
      "readEvents with more events than the limit asked",
      (h) =>
        h.answerNext("readEvents", {
          events: [
            { seq: 1, event: {} },
            { seq: 2, event: {} },
          ],
          more: false,
        }),
      (a) => a.readEvents("p", "s", 0, 1),
    ],
    [
      "readEvents with more: true and no event (it would never end)",
      (h) => h.answerNext("readEvents", { events: [], more: true }),
      (a) => a.readEvents("p", "s", 0),
    ],
    [
      "deleteStream with a non-boolean",
      (h) => h.answerNext("deleteStream", { deleted: "yes" }),
      (a) => a.deleteStream("p", "s"),
    ],
    ["a null result", (h) => h.answerNext("list", null), (a) => a.list("p", "k")],
  ];
  for (const [title, inject, call] of cases) {
    it(`treats ${title} as AuthorityFailure`, () =>
      withHost(async (a, host) => {
        inject(host);
        const error = await rejectionOf(call(a));
        expect(error instanceof AuthorityFailure && error.message).toMatch(
          /^The host answered runState\/\w+ with a malformed result: /,
        );
      }));
  }

  it("passes stored values through unvalidated (the caller validates each record)", () =>
    withHost(async (a, host) => {
      host.answerNext("readEvents", { events: [{ seq: 1, event: "not an object" }], more: false });
      expect(await a.readEvents("p", "s", 0)).toEqual([{ seq: 1, event: "not an object" }]);
    }));

  it("orders list results by id in code-point order whatever order the host used", () =>
    withHost(async (a, host) => {
      const at = "2025-01-01T00:00:00.000Z";
      host.answerNext("list", {
        records: ["😀", "b", "\uff21", "a"].map((id) => ({ id, revision: 1, updatedAt: at })),
      });
      expect((await a.list("p", "k")).map((r) => r.id)).toEqual(["a", "b", "\uff21", "😀"]);
    }));
});

describe("HostAuthority: paged readEvents (PROTOCOL.md section 7)", () => {
  const fill = async (host: TestHost, count: number): Promise<void> => {
    await host.store.appendEvents(
      "p",
      "s",
      Array.from({ length: count }, (_, i) => ({ i })),
      0,
    );
  };

  it("asks for at most HOST_READ_PAGE_EVENTS per request and pages a long stream until more is false", () =>
    withHost(async (a, host) => {
      await fill(host, HOST_READ_PAGE_EVENTS * 2 + 7);
      const events = await a.readEvents("p", "s", 0);
      expect([events.length, host.calls.map((c) => [c.params.afterSeq, c.params.limit])]).toEqual([
        HOST_READ_PAGE_EVENTS * 2 + 7,
        [
          [0, HOST_READ_PAGE_EVENTS],
          [HOST_READ_PAGE_EVENTS, HOST_READ_PAGE_EVENTS],
          [HOST_READ_PAGE_EVENTS * 2, HOST_READ_PAGE_EVENTS],
        ],
      ]);
    }));

  it("follows a host that pages smaller than asked, until more is false", async () => {
    const host = new TestHost({ pageSize: 3 });
    const link = await connectInProcess(host);
    try {
      await fill(host, 10);
      const events = await link.authority.readEvents("p", "s", 0);
      expect([events.map((e) => e.seq), host.calls.length]).toEqual([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4]);
    } finally {
      await link.close();
    }
  });

  it("stops at limit even when the host says more", async () => {
    const host = new TestHost({ pageSize: 3 });
    const link = await connectInProcess(host);
    try {
      await fill(host, 10);
      const events = await link.authority.readEvents("p", "s", 2, 5);
      expect([events.map((e) => e.seq), host.calls.map((c) => c.params.limit)]).toEqual([
        [3, 4, 5, 6, 7],
        [5, 2],
      ]);
    } finally {
      await link.close();
    }
  });

  it("refuses a limit that is not a positive integer without sending anything", () =>
    withHost(async (a, host) => {
      expect([await rejectionOf(a.readEvents("p", "s", 0, 0)), host.calls.length]).toEqual([
        expect.any(AuthorityFailure),
        0,
      ]);
    }));
});

describe("HostAuthority: requests on the wire", () => {
  it("uses the bare method names when the client did not ask for the ACP spelling", () =>
    withHost(async (a, host) => {
      await a.put("p", "k", "r", { n: 1 }, null);
      await a.get("p", "k", "r");
      expect(host.calls.map((c) => c.method)).toEqual(["runState/put", "runState/get"]);
    }));

  it("uses the _ spelling for every request when the client asked for it in initialize", () =>
    withHost(
      async (a, host) => {
        await a.put("p", "k", "r", { n: 1 }, null);
        await a.list("p", "k", "r");
        await a.delete("p", "k", "r", 1);
        await a.appendEvents("p", "s", [{ e: 1 }], 0);
        await a.readEvents("p", "s", 0);
        await a.deleteStream("p", "s");
        await a.get("p", "k", "r");
        expect(host.calls.map((c) => c.method)).toEqual([
          "_runState/put",
          "_runState/list",
          "_runState/delete",
          "_runState/appendEvents",
          "_runState/readEvents",
          "_runState/deleteStream",
          "_runState/get",
        ]);
      },
      { prefix: "_" },
    ));

  it("sends exactly the params of section 7 (optional ones omitted, not null)", () =>
    withHost(async (a, host) => {
      await a.put("p", "k", "r", { n: 1 }, null);
      await a.delete("p", "k", "r");
      await a.list("p", "k");
      expect(host.calls.map((c) => c.params)).toEqual([
        { projectId: "p", kind: "k", id: "r", value: { n: 1 }, expectedRevision: null },
        { projectId: "p", kind: "k", id: "r" },
        { projectId: "p", kind: "k" },
      ]);
    }));

  it("refuses invalid arguments locally without sending anything", () =>
    withHost(async (a, host) => {
      const errors = await Promise.all([
        rejectionOf(a.put("p", "k", "r", { n: 1 }, 0)),
        rejectionOf(a.get("p", "k", "bad\udc00")),
        rejectionOf(a.appendEvents("p", "s", [{ e: 1 }], -1)),
        rejectionOf(a.list("", "k")),
      ]);
      expect([errors.every((e) => e instanceof AuthorityFailure), host.calls.length]).toEqual([true, 0]);
    }));

  it("rejects a timeout that is not a positive integer", () => {
    expect(() => new HostAuthority({ connection: { request: async () => ({}) }, timeoutMs: 0 })).toThrow(RangeError);
  });
});

describe("DelegatingAuthority (the server's switch to the host at initialize)", () => {
  it("forwards to the embedded backend until use(), then to the host", () =>
    withHost(async (hostAuthority, host) => {
      const embedded = new MemoryAuthority();
      const delegating = new DelegatingAuthority(embedded);
      await delegating.put("p", "k", "before", { n: 1 }, null);
      delegating.use(hostAuthority);
      await delegating.put("p", "k", "after", { n: 2 }, null);
      const where = [
        (await embedded.list("p", "k")).map((r) => r.id),
        (await host.store.list("p", "k")).map((r) => r.id),
      ];
      expect(where).toEqual([["before"], ["after"]]);
    }));

  it("takes its name and listProjects from the current backend", () =>
    withHost(async (hostAuthority) => {
      const delegating = new DelegatingAuthority(new MemoryAuthority());
      const before = [delegating.name, typeof delegating.listProjects];
      delegating.use(hostAuthority);
      expect([...before, delegating.name, typeof delegating.listProjects]).toEqual([
        "memory",
        "function",
        "host",
        "undefined",
      ]);
    }));

  it("takes pruneEvents from the current backend (none on the host)", () =>
    withHost(async (hostAuthority) => {
      const delegating = new DelegatingAuthority(new MemoryAuthority());
      const before = typeof delegating.pruneEvents;
      delegating.use(hostAuthority);
      expect([before, typeof delegating.pruneEvents]).toEqual(["function", "undefined"]);
    }));

  it("forwards readEvents with its limit and deleteStream to the host", () =>
    withHost(async (hostAuthority, host) => {
      const delegating = new DelegatingAuthority(new MemoryAuthority());
      delegating.use(hostAuthority);
      await delegating.appendEvents("p", "s", [{ e: 1 }, { e: 2 }, { e: 3 }], 0);
      const read = await delegating.readEvents("p", "s", 0, 2);
      const deleted = await delegating.deleteStream("p", "s");
      expect([read.map((e) => e.seq), deleted, host.calls.map((c) => c.op)]).toEqual([
        [1, 2],
        true,
        ["appendEvents", "readEvents", "deleteStream"],
      ]);
    }));

  it("closes every backend it was given", () =>
    withHost(async (hostAuthority) => {
      const embedded = new MemoryAuthority();
      const delegating = new DelegatingAuthority(embedded);
      delegating.use(hostAuthority);
      await delegating.close();
      const errors = [
        await rejectionOf(embedded.get("p", "k", "r")),
        await rejectionOf(hostAuthority.get("p", "k", "r")),
      ];
      expect(errors.every((e) => e instanceof AuthorityFailure)).toBe(true);
    }));

  it("fails every call with AuthorityFailure after close", async () => {
    const delegating = new DelegatingAuthority(new MemoryAuthority());
    await delegating.close();
    expect(await rejectionOf(delegating.put("p", "k", "r", { n: 1 }, null))).toBeInstanceOf(AuthorityFailure);
  });

  it("refuses a new backend after close", async () => {
    const delegating = new DelegatingAuthority(new MemoryAuthority());
    await delegating.close();
    expect(() => delegating.use(new MemoryAuthority())).toThrow(AuthorityFailure);
  });
});
