/**
 * The wire error codes and `data` shapes of PROTOCOL.md section 3.
 */
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import {
  BusyData,
  ConflictData,
  ErrorCodes,
  InvalidMutationData,
  InvalidParamsData,
  InvalidPhaseData,
  MethodNotFoundData,
  NotFoundData,
  OwnershipData,
  PersistenceFailedData,
  errorCatalog,
  invalidParamsData,
} from "../../protocol/errors.js";
import { PlanParams } from "../../protocol/product.js";

describe("ErrorCodes", () => {
  it("has the numeric codes of PROTOCOL.md section 3 and ACP's request-cancelled code", () => {
    expect(ErrorCodes).toEqual({
      ParseError: -32700,
      InvalidRequest: -32600,
      MethodNotFound: -32601,
      InvalidParams: -32602,
      InternalError: -32603,
      RequestCancelled: -32800,
      NotFound: -32002,
      InvalidPhase: -32010,
      Busy: -32011,
      Conflict: -32012,
      PersistenceFailed: -32013,
      InvalidMutation: -32014,
      Ownership: -32016,
    });
  });

  it("is catalogued once per code, with its name", () => {
    expect(errorCatalog.map((e) => [e.name, e.code])).toEqual(Object.entries(ErrorCodes));
  });

  it("catalogues a data schema exactly for the codes whose data PROTOCOL.md defines", () => {
    const withData = errorCatalog.filter((e) => e.data !== undefined).map((e) => e.code);
    expect(withData).toEqual([-32601, -32602, -32002, -32010, -32011, -32012, -32013, -32014, -32016]);
  });
});

describe("error data schemas", () => {
  const examples: [string, z.ZodType, unknown][] = [
    ["MethodNotFound", MethodNotFoundData, { method: "_product.nope" }],
    ["InvalidParams", InvalidParamsData, { issues: [{ path: ["tasks", 0, "title"], message: "Required" }] }],
    ["NotFound", NotFoundData, { kind: "checkpoint", id: "ckp_9" }],
    ["InvalidPhase", InvalidPhaseData, { phase: "completed", allowed: ["executing", "paused"] }],
    ["Busy", BusyData, { productId: "prd_1" }],
    ["Conflict", ConflictData, { owner: "pid-42", revision: 7 }],
    [
      "PersistenceFailed",
      PersistenceFailedData,
      { cause: "SQLITE_FULL: database or disk is full", operation: "write" },
    ],
    ["InvalidMutation", InvalidMutationData, { index: 2, reason: "adding t3 -> t1 creates a cycle" }],
    ["Ownership", OwnershipData, { expected: "proj-a", got: "proj-b" }],
  ];

  it.each(examples.map(([name], index) => [name, index] as const))(
    "%s accepts its documented shape",
    (_name, index) => {
      const [, schema, example] = examples[index] ?? [];
      expect(schema?.safeParse(example).success).toBe(true);
    },
  );

  it("rejects a not-found kind PROTOCOL.md does not name", () => {
    expect(NotFoundData.safeParse({ kind: "agent", id: "x" }).success).toBe(false);
  });

  it("conflict data fields are optional", () => {
    expect(ConflictData.safeParse({}).success).toBe(true);
  });
});

describe("invalidParamsData", () => {
  it("turns a failed params parse into -32602 data naming each path", () => {
    const parsed = PlanParams.safeParse({ goal: "", cwd: "relative", budget: { maxTotalTokens: -1 } });
    if (parsed.success) throw new Error("expected a failure");
    const data = invalidParamsData(parsed.error);
    expect(InvalidParamsData.parse(data)).toEqual(data);
    expect(data.issues.map((i) => i.path)).toEqual([["goal"], ["cwd"], ["budget", "maxTotalTokens"]]);
    expect(data.issues.every((i) => i.message.length > 0)).toBe(true);
  });

  it("keeps array indices as numbers and stringifies symbols", () => {
    const sym = Symbol("s");
    expect(invalidParamsData({ issues: [{ path: ["tasks", 3, sym], message: "bad" }] })).toEqual({
      issues: [{ path: ["tasks", 3, "Symbol(s)"], message: "bad" }],
    });
  });
});
