/**
 * Provider overload is not failure (issue 28): which worker failures mean "the model provider is rate limiting or
 * overloaded" (HTTP 429/529 texts, the providers' and agents' own overload errors — never a `refusal`), and how long
 * to wait before trying again (exponential backoff with jitter, `retry-after` honoured when the error carries one).
 *
 * Owns the classification and the delays only, pure; the retry loop is in acp-worker.ts. Never reads a clock.
 */
import { overloadWaitNote } from "../../core/product/task-waits.js";

/** How overloaded attempts are retried. Durations are milliseconds. */
export interface OverloadPolicy {
  /** The first delay; each further retry doubles it (then jitter). Default 2 s. */
  baseDelayMs: number;
  /** No single delay is longer (a `retry-after` above it is cut to it). Default 60 s. */
  maxDelayMs: number;
  /** Retries stop once this much time has been spent waiting on one attempt; it then fails as usual. Default 15 min. */
  maxWaitMs: number;
}

export const DEFAULT_OVERLOAD_POLICY: Readonly<OverloadPolicy> = Object.freeze({
  baseDelayMs: 2_000,
  maxDelayMs: 60_000,
  maxWaitMs: 15 * 60_000,
});

/** An overload the worker reported: the words to show and the provider's `retry-after`, when it gave one (ms). */
export interface Overload {
  reason: string;
  retryAfterMs?: number;
}

// 429/529 as status codes (not inside longer numbers), the providers' error types and the usual phrases.
const OVERLOAD_PATTERN =
  /(?<![\d.])(?:429|529)(?![\d.])|overloaded|rate[ _-]?limit|too many requests|resource[ _-]?exhausted|server is busy|capacity exceeded/iu;
const RETRY_AFTER_PATTERN = /retry[ _-]?after["':=\s]*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec|seconds?)?/iu;

/**
 * The overload `text` (an error message, its data, or the end of an agent's stderr) reports, or `undefined` when it
 * reports none. A `retry-after` of N (seconds unless it says `ms`) becomes `retryAfterMs`. Pure.
 */
export function overloadOf(text: string): Overload | undefined {
  const match = OVERLOAD_PATTERN.exec(text);
  if (match === null) return undefined;
  const reason = /529|overloaded|busy|capacity/iu.test(match[0]) ? "provider overloaded" : "provider rate limited";
  const after = RETRY_AFTER_PATTERN.exec(text);
  if (after === null) return { reason };
  const value = Number(after[1]);
  const ms = /^m/iu.test(after[2] ?? "") ? value : value * 1_000;
  return Number.isFinite(ms) && ms >= 0 ? { reason, retryAfterMs: Math.round(ms) } : { reason };
}

/**
 * The delay before retry number `retry` (0-based): the provider's `retryAfterMs` when given, else
 * `baseDelayMs * 2^retry` with jitter (a uniform pick in its upper half, `random()` in [0, 1)); never above
 * `maxDelayMs`. Pure but for `random`.
 */
export function overloadDelayMs(
  retry: number,
  policy: OverloadPolicy,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number {
  if (retryAfterMs !== undefined) return Math.min(policy.maxDelayMs, retryAfterMs);
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(retry, 30));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** "waiting: provider overloaded, retry in 20 s" (whole seconds, at least 1). Pure. */
export function overloadNote(overload: Overload, delayMs: number): string {
  return overloadWaitNote(overload.reason, Math.max(1, Math.round(delayMs / 1_000)));
}
