/**
 * What the authority conformance rule files (src/host-kit/rules/*.ts) share: the rule shape, the project ids, the
 * record kinds they write, and the helper that awaits a refusal. Never depends on a backend or a test framework.
 */
import type { RunStateAuthority } from "../../core/ports.js";
import { ExpectationFailure } from "../expect.js";

/** One conformance rule. */
export interface AuthorityRule {
  /** The port method it is about (`get`, `put`, … `close`). */
  method: string;
  /** What must hold, in plain words. */
  title: string;
  /** Checks it on `authority`; throws (`ExpectationFailure` or the call's error) when it does not hold. */
  run(authority: RunStateAuthority): Promise<void>;
}

/** The project ids rules write to. Under vitest each test has a fresh authority; check-host gives each rule its own. */
export interface RuleProjects {
  P: string;
  Q: string;
}

/** Adds one rule to the list being built. */
export type DefineRule = (method: string, title: string, run: (a: RunStateAuthority) => Promise<void>) => void;

/** The record kind most rules write. */
export const KIND = "product";
/** A second record kind, to check that kinds are separate. */
export const OTHER_KIND = "checkpoint";
/** An ISO-8601 UTC timestamp, as `updatedAt` must be. */
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** Awaits a promise that must reject and returns the rejection reason; fails the rule when it resolves. */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new ExpectationFailure("expected the call to be refused, but it succeeded");
}
