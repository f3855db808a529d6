/**
 * Green-only integration, the pure part (DESIGN.md guarantee 17; docs/VERIFY.md): the `verified` event of a
 * product's stream, the verification state it reduces to, and the decisions around it — whether a candidate needs
 * its checks run, what a red candidate's task error says, what status shows.
 *
 * A verification is bound to the candidate's git TREE id, not to a commit or a task: the same tree reached again (a
 * resume re-running an interrupted attempt, a rollback run forward, a takeover by another server) is never verified
 * again. Only a check that ran to its end is recorded, so a check cut short by a crash leaves nothing behind and runs
 * again. Pure: no I/O, no clock; the orchestrator (product/verify-gate.ts) runs checks through `VerifyPort`.
 */
import * as z from "zod";
import { CommitId, Id, Timestamp } from "../../../protocol/common.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";
import { CheckResult, TreeId, VerifyConfig } from "../../../protocol/verify.js";
import type { VerificationView } from "../../../protocol/verify.js";

/** How many verified trees a product keeps (oldest forgotten first: a forgotten tree is merely verified again). */
export const MAX_VERIFIED_TREES = 1_000;
/** How many verifications `product.status` shows (newest last). */
export const STATUS_VERIFICATIONS = 50;

/** One finished verification of a tree, as recorded. */
export const VerificationEntry = lazySchema(
  () =>
    z.object({
      tree: TreeId,
      commit: CommitId,
      taskId: Id.optional(),
      scope: z.enum(["task", "end", "manual"]),
      ok: z.boolean(),
      at: Timestamp,
      checks: z.array(CheckResult).max(20),
    }),
  "VerificationEntry",
);
export type VerificationEntry = z.infer<typeof VerificationEntry>;

/** `verified`: a tree's checks ran to their end (appended after the last check exited, before any branch move). */
export const VerifiedEvent = lazySchema(
  () => VerificationEntry.extend({ v: z.literal(1), type: z.literal("verified") }),
  "VerifiedEvent",
);
export type VerifiedEvent = z.infer<typeof VerifiedEvent>;

/**
 * `verifyFixup`: the final head's checks failed (`when: "end"`) and the leader was asked for a fix-up. Asked once per
 * product: a second red final head fails the product.
 */
export const VerifyFixupEvent = lazySchema(
  () => z.object({ v: z.literal(1), at: Timestamp, type: z.literal("verifyFixup"), tree: TreeId }),
  "VerifyFixupEvent",
);
export type VerifyFixupEvent = z.infer<typeof VerifyFixupEvent>;

/** The verification part of a product's state: its configuration and the trees verified so far (oldest first). */
export const VerificationState = lazySchema(
  () =>
    z.object({
      config: VerifyConfig,
      results: z.array(VerificationEntry).max(MAX_VERIFIED_TREES),
      /** The final head's check failed and the leader was asked for a fix-up (`when: "end"`): asked once per tree. */
      endFixupAsked: TreeId.optional(),
    }),
  "VerificationState",
);
export type VerificationState = z.infer<typeof VerificationState>;

/** The part of a product state this file reads and writes. */
export interface HasVerification {
  verification?: VerificationState;
}

/** The state a product gets from its `created` event's `verify` (none: no verification). */
export function initialVerification(config: VerifyConfig | undefined): VerificationState | undefined {
  return config ? { config, results: [] } : undefined;
}

/** Applies a `verified` event in place: the tree's entry replaces an older one of the same tree. Never throws. */
export function applyVerified(s: HasVerification, event: VerifiedEvent): void {
  const v = s.verification;
  if (!v) return;
  const entry: VerificationEntry = {
    tree: event.tree,
    commit: event.commit,
    ...(event.taskId !== undefined ? { taskId: event.taskId } : {}),
    scope: event.scope,
    ok: event.ok,
    at: event.at,
    checks: event.checks,
  };
  const i = v.results.findIndex((r) => r.tree === event.tree);
  if (i >= 0) v.results.splice(i, 1);
  v.results.push(entry);
  if (v.results.length > MAX_VERIFIED_TREES) v.results.splice(0, v.results.length - MAX_VERIFIED_TREES);
}

/** Applies a `verifyFixup` event in place. Never throws. */
export function applyVerifyFixup(s: HasVerification, event: VerifyFixupEvent): void {
  if (s.verification) s.verification.endFixupAsked = event.tree;
}

/**
 * What is known of a candidate before its branch move (guarantee 17): `green` or `red` (its recorded verification),
 * `broken` (its checks could not be run, with why), or `unverified` (no check ran to its end yet).
 */
export type Verdict =
  | { state: "green"; entry: VerificationEntry }
  | { state: "red"; entry: VerificationEntry }
  | { state: "broken"; error: string }
  | { state: "unverified" };

/** The recorded verification of `tree`, if its checks ever ran to their end. */
export function recordedVerification(s: HasVerification, tree: string): VerificationEntry | undefined {
  return s.verification?.results.find((r) => r.tree === tree);
}

/** `each` when a task's candidate must be green before the branch moves, `end` for the final head only, or none. */
export function verifyWhen(s: HasVerification): "each" | "end" | undefined {
  const config = s.verification?.config;
  return config ? (config.when ?? "each") : undefined;
}

/** Checks running at once in one product (`verify.maxParallel`, default 2). */
export function verifyParallelism(s: HasVerification): number {
  return s.verification?.config.maxParallel ?? 2;
}

/** The first failing check of a red verification (the one its error names). */
export function failingCheck(entry: Pick<VerificationEntry, "checks">): CheckResult | undefined {
  return entry.checks.find((c) => !c.ok);
}

/**
 * The task error of a red candidate (guarantee 17): the failing command's name, exit code (or timeout) and output
 * tail, so the retry and the leader's fix-up see why. One sentence, then the output.
 */
export function verificationError(entry: Pick<VerificationEntry, "checks" | "tree">): string {
  const failed = failingCheck(entry);
  if (!failed) return `The verification of tree ${entry.tree.slice(0, 12)} failed.`;
  const how = failed.timedOut
    ? "timed out"
    : failed.exitCode === null
      ? "was ended by a signal"
      : `failed with exit code ${failed.exitCode}`;
  const output = failed.outputTail.trim() === "" ? "(no output)" : failed.outputTail.trimEnd();
  return (
    `The verification check "${failed.name}" ${how} on the merge candidate (tree ${entry.tree.slice(0, 12)}); ` +
    `the integration branch did not move. Output of "${failed.name}":\n${output}`
  );
}

/** The recovery cause of a product whose final head failed `when: "end"` checks. */
export function endVerificationCause(entry: Pick<VerificationEntry, "checks" | "tree">): string {
  const failed = failingCheck(entry);
  const name = failed ? `"${failed.name}"` : "a check";
  const how = failed?.timedOut ? "timed out" : `failed (exit code ${String(failed?.exitCode ?? "none")})`;
  return `The verification check ${name} ${how} on the final head (tree ${entry.tree.slice(0, 12)}), so the product is not completed.`;
}

/** The verifications `product.status` shows: the newest `STATUS_VERIFICATIONS`, oldest first. */
export function verificationsView(s: HasVerification): VerificationView[] {
  const results = s.verification?.results ?? [];
  return results.slice(-STATUS_VERIFICATIONS).map((r) => ({ ...r, checks: r.checks.map((c) => ({ ...c })) }));
}

/** The `verification` of `product.status` (docs/PROTOCOL.md, Verification): `{}` when none is configured. */
export function verificationStatus(s: HasVerification & { isolation?: string }): {
  verification?: { when: "each" | "end"; commands: string[]; results: VerificationView[]; note?: string };
} {
  const v = s.verification;
  if (!v) return {};
  const note = verificationNote(s);
  return {
    verification: {
      when: v.config.when ?? "each",
      commands: v.config.commands.map((c) => c.name),
      results: verificationsView(s),
      ...(note !== undefined ? { note } : {}),
    },
  };
}

/** A plain note for status when verification is configured but cannot run (no worktree isolation). */
export function verificationNote(s: HasVerification & { isolation?: string }): string | undefined {
  if (!s.verification || s.isolation === undefined || s.isolation === "worktree") return undefined;
  return "Verification commands are configured but run only with worktree isolation (a verify worktree, never cwd); this product's results were not verified.";
}
