import { describe, expect, it } from "vitest";
import {
  DEFAULT_OVERLOAD_POLICY,
  overloadDelayMs,
  overloadNote,
  overloadOf,
} from "../../../src/adapters/agents/overload.js";

describe("overloadOf (issue 28: overload is not failure)", () => {
  it.each([
    ['API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}', "provider overloaded"],
    ["error -32603: 429 Too Many Requests", "provider rate limited"],
    ["rate_limit_error: Number of request tokens has exceeded your per-minute rate limit", "provider rate limited"],
    ["stream error: RESOURCE_EXHAUSTED", "provider rate limited"],
    ["The server is busy, please retry", "provider overloaded"],
  ])("%s → %s", (text, reason) => {
    expect(overloadOf(text)?.reason).toBe(reason);
  });

  it.each([
    "agent refused the task (stop reason: refusal)",
    "agent crashed (exit code 1)",
    "timed out after 1529 ms",
    "error 4290: unrelated",
    "wrote 529.5 bytes",
  ])("is not an overload: %s", (text) => {
    expect(overloadOf(text)).toBeUndefined();
  });

  it("reads retry-after in seconds, or in ms when it says so", () => {
    expect(overloadOf('529 overloaded {"retry-after":"20"}')?.retryAfterMs).toBe(20_000);
    expect(overloadOf("429 Too Many Requests; Retry-After: 1.5")?.retryAfterMs).toBe(1_500);
    expect(overloadOf("rate limited, retry_after 750 ms")?.retryAfterMs).toBe(750);
    expect(overloadOf("529 overloaded")?.retryAfterMs).toBeUndefined();
  });
});

describe("overloadDelayMs", () => {
  const policy = { ...DEFAULT_OVERLOAD_POLICY, baseDelayMs: 1_000, maxDelayMs: 10_000 };
  it("doubles from the base with jitter in the upper half, capped at maxDelayMs", () => {
    expect([0, 1, 2, 3, 4, 5].map((r) => overloadDelayMs(r, policy, undefined, () => 0))).toEqual([
      500, 1_000, 2_000, 4_000, 5_000, 5_000,
    ]);
    expect([0, 1, 2, 3, 4].map((r) => overloadDelayMs(r, policy, undefined, () => 0.999_999))).toEqual([
      1_000, 2_000, 4_000, 8_000, 10_000,
    ]);
  });

  it("honours retry-after, cut to maxDelayMs", () => {
    expect(overloadDelayMs(3, policy, 2_000, () => 0.5)).toBe(2_000);
    expect(overloadDelayMs(0, policy, 60_000, () => 0.5)).toBe(10_000);
  });

  it("says it in words", () => {
    expect(overloadNote({ reason: "provider overloaded" }, 20_000)).toBe("waiting: provider overloaded, retry in 20 s");
    expect(overloadNote({ reason: "provider rate limited" }, 200)).toBe("waiting: provider rate limited, retry in 1 s");
  });
});
