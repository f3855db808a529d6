/**
 * The server → host `runState/*` schemas of PROTOCOL.md section 7: the params the server sends are exact, and the
 * results a host returns are read without trusting stored values (the caller validates each record).
 */
import { describe, expect, it } from "vitest";
import { hostRequests, type HostRequestName } from "../../protocol/methods.js";

function specOf(method: HostRequestName) {
  const spec = hostRequests.find((r) => r.method === method);
  if (!spec) throw new Error(`${method} is not declared`);
  return spec;
}

const address = { projectId: "proj", kind: "product", id: "prd_1" };

const cases: Record<
  Exclude<HostRequestName, "session/request_permission">,
  { params: object; result: object; required: string }
> = {
  "runState/get": { params: address, result: { record: null }, required: "kind" },
  "runState/put": {
    params: { ...address, value: { v: 1 }, expectedRevision: null },
    result: { revision: 1 },
    required: "expectedRevision",
  },
  "runState/delete": { params: { ...address, expectedRevision: 3 }, result: { deleted: true }, required: "id" },
  "runState/list": {
    params: { projectId: "proj", kind: "checkpoint", prefix: "prd_1/" },
    result: { records: [{ id: "prd_1/ckp_1", revision: 1, updatedAt: "2025-01-01T00:00:00.000Z" }] },
    required: "projectId",
  },
  "runState/appendEvents": {
    params: { projectId: "proj", stream: "goal/g1", events: [{ type: "started" }], expectedSeq: 0 },
    result: { lastSeq: 1 },
    required: "expectedSeq",
  },
  "runState/readEvents": {
    params: { projectId: "proj", stream: "goal/g1", afterSeq: 0, limit: 100 },
    result: { events: [{ seq: 1, event: { type: "started" } }], more: false },
    required: "afterSeq",
  },
  "runState/deleteStream": {
    params: { projectId: "proj", stream: "product/prd_1" },
    result: { deleted: true },
    required: "stream",
  },
};

describe.each(Object.keys(cases) as (keyof typeof cases)[])("%s", (method) => {
  const c = cases[method];

  it("accepts the params PROTOCOL.md section 7 describes", () => {
    expect(specOf(method).params.safeParse(c.params).success).toBe(true);
  });

  it(`rejects params without ${c.required}`, () => {
    const { [c.required]: _removed, ...rest } = c.params as Record<string, unknown>;
    expect(specOf(method).params.safeParse(rest).success).toBe(false);
  });

  it("rejects a field section 7 does not name", () => {
    expect(specOf(method).params.safeParse({ ...c.params, owner: "me" }).success).toBe(false);
  });

  it("accepts the result a host returns", () => {
    expect(specOf(method).result.safeParse(c.result).success).toBe(true);
  });
});

describe("host results", () => {
  it("runState/get keeps a stored value of any shape for the caller to validate per record", () => {
    const parsed = specOf("runState/get").result.parse({
      record: { value: "not an object", revision: 2, updatedAt: "t" },
    });
    expect(parsed).toEqual({ record: { value: "not an object", revision: 2, updatedAt: "t" } });
  });

  it("rejects a revision that is not a positive integer", () => {
    expect(specOf("runState/put").result.safeParse({ revision: 0 }).success).toBe(false);
    expect(specOf("runState/put").result.safeParse({ revision: 1.5 }).success).toBe(false);
  });

  it("runState/readEvents requires more in the result (PROTOCOL.md section 7, paging)", () => {
    expect(specOf("runState/readEvents").result.safeParse({ events: [] }).success).toBe(false);
  });

  it("runState/readEvents refuses a limit of 0", () => {
    expect(
      specOf("runState/readEvents").params.safeParse({ projectId: "p", stream: "s", afterSeq: 0, limit: 0 }).success,
    ).toBe(false);
  });

  it("runState/put requires an object value", () => {
    expect(specOf("runState/put").params.safeParse({ ...address, value: [1], expectedRevision: 1 }).success).toBe(
      false,
    );
  });
});
