import { describe, expect, it } from "vitest";
import {
  DomainError,
  busy,
  conflict,
  invalidInput,
  invalidMutation,
  invalidPhase,
  invalidPlan,
  isDomainError,
  notFound,
  ownership,
  persistenceFailed,
} from "../../../src/core/errors.js";

describe("domain errors", () => {
  it("notFound names the kind and id", () => {
    const e = notFound("product", "prd_x");
    expect(e).toBeInstanceOf(DomainError);
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe("not_found");
    expect(e.details).toEqual({ kind: "product", id: "prd_x" });
    expect(e.message).toBe("Product prd_x was not found.");
  });

  it("invalidPhase says what is allowed", () => {
    const e = invalidPhase("completed", ["executing", "paused"], { subject: "Product prd_x", operation: "pause" });
    expect(e.message).toBe("Product prd_x is completed; pause is allowed only while executing or paused.");
    expect(e.details).toEqual({ phase: "completed", allowed: ["executing", "paused"] });
    expect(invalidPhase("planning", ["awaiting_confirmation"]).message).toBe(
      "The product is planning; this operation is allowed only while awaiting confirmation.",
    );
  });

  it("busy, conflict, ownership carry their details", () => {
    expect(busy("prd_1").details).toEqual({ productId: "prd_1" });
    expect(conflict({ owner: "own_2" }, "Product prd_1").message).toBe(
      "Product prd_1 is held by another owner (own_2); stop that process or wait for its lease to expire.",
    );
    expect(conflict({ revision: 7 }).details).toEqual({ revision: 7 });
    expect(conflict({}).details).toEqual({});
    expect(ownership("prj_a", "prj_b").message).toBe("The record belongs to prj_a, not prj_b.");
  });

  it("persistenceFailed keeps the cause text and the original cause", () => {
    const cause = new Error("disk full");
    const e = persistenceFailed(cause);
    expect(e.details).toEqual({ cause: "disk full", operation: "write" });
    expect(e.cause).toBe(cause);
    expect(e.message).toContain("disk full");
  });

  it("invalidMutation, invalidPlan and invalidInput make one sentence", () => {
    expect(invalidMutation(2, "Task t9 does not exist in the plan.").message).toBe(
      "Mutation 2 was rejected: task t9 does not exist in the plan.",
    );
    expect(invalidPlan("Task b depends on itself.", 1).details).toEqual({
      reason: "Task b depends on itself.",
      index: 1,
    });
    expect(invalidInput("Goal is empty").message).toBe("Goal is empty.");
  });

  it("isDomainError narrows by code", () => {
    const e: unknown = notFound("task", "t1");
    expect(isDomainError(e)).toBe(true);
    expect(isDomainError(e, "not_found")).toBe(true);
    expect(isDomainError(e, "busy")).toBe(false);
    expect(isDomainError(new Error("x"))).toBe(false);
  });
});
