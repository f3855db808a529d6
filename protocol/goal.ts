/**
 * zod schemas of every `x/goal.*` request and notification of PROTOCOL.md section 6 (goal runs).
 *
 * Request params are strict (an unknown key is -32602) except for an optional `_meta` object, like product.ts.
 * This file must never import anything but zod, common.ts, product.ts and verify.ts, and never describe a shape
 * PROTOCOL.md does not.
 */
import * as z from "zod";
import { AbsolutePath, CommitId, Count, Id, Recovery, Timestamp } from "./common.js";
import { BudgetInput, requestParams } from "./product.js";
import { lazySchema } from "./lazy-schema.js";
import { OUTPUT_HEAD_CHARS, OUTPUT_TAIL_CHARS, TreeId } from "./verify.js";

export const GoalStatus = lazySchema(
  () => z.enum(["running", "paused", "blocked", "budget_limited", "completed", "stopped", "failed"]),
  "GoalStatus",
);
export type GoalStatus = z.infer<typeof GoalStatus>;

export const GoalEndReason = lazySchema(
  () => z.enum(["achieved", "no_progress", "budget", "max_phases", "stopped", "failed"]),
  "GoalEndReason",
);
export type GoalEndReason = z.infer<typeof GoalEndReason>;

/** A goal's budget: the product budget plus the maximum number of phases. */
export const GoalBudgetInput = lazySchema(
  () => BudgetInput.extend({ maxPhases: z.number().int().min(1).max(1_000).optional() }).strict(),
  "GoalBudgetInput",
);
export type GoalBudgetInput = z.infer<typeof GoalBudgetInput>;

const GoalText = lazySchema(
  () =>
    z
      .string()
      .min(1, { abort: true })
      .max(100_000, { abort: true })
      .refine((s) => s.trim().length > 0, { message: "must not be blank" }),
  "GoalText",
);

/**
 * A command acceptance criterion's check (docs/VERIFY.md, Goals): `/bin/sh -c RUN` in a verify worktree at the phase's
 * integrated head; met when it exits 0 within `timeoutMs` (default 10 minutes). Bounded like a `verify` command.
 */
export const CriterionCheck = lazySchema(
  () =>
    z.strictObject({
      run: z.string().min(1).max(10_000),
      timeoutMs: z.number().int().min(1).max(86_400_000).optional(),
    }),
  "CriterionCheck",
);
export type CriterionCheck = z.infer<typeof CriterionCheck>;

/** An acceptance criterion the client gives with the goal: its text, and a command that decides it (optional). */
export const GoalCriterionInput = lazySchema(
  () =>
    z.strictObject({
      id: Id.optional(),
      text: z
        .string()
        .min(1)
        .max(5_000)
        .refine((s) => s.trim().length > 0, { message: "must not be blank" }),
      check: CriterionCheck.optional(),
    }),
  "GoalCriterionInput",
);
export type GoalCriterionInput = z.infer<typeof GoalCriterionInput>;

export const GoalStartParams = lazySchema(
  () =>
    requestParams({
      goal: GoalText,
      cwd: AbsolutePath,
      projectId: Id.optional(),
      sessionId: Id.optional(),
      budget: GoalBudgetInput.optional(),
      noProgressLimit: z.number().int().min(1).max(100).optional(),
      /**
       * The acceptance criteria, given instead of derived by the leader (1-50; ids default to `c1`, `c2`, … and must
       * be unique). A criterion with `check` is met only when its command passes on the phase's integrated head.
       */
      criteria: z
        .array(GoalCriterionInput)
        .min(1)
        .max(50)
        .refine((list) => new Set(list.map((c, i) => c.id ?? `c${i + 1}`)).size === list.length, {
          message: "criterion ids must be unique",
        })
        .optional(),
    }),
  "GoalStartParams",
);
export const GoalStartResult = lazySchema(() => z.object({ goalRunId: Id }), "GoalStartResult");

/**
 * The last run of a command criterion's check: on the integrated head (`commit`, `tree`) of phase `phaseIndex`'s
 * product. `exitCode` is null when the command was ended by a signal or its timeout, or could not run on a head
 * (then `outputTail` says why).
 */
export const CriterionCheckResult = lazySchema(
  () =>
    z.object({
      ok: z.boolean(),
      exitCode: z.number().int().min(-1).max(255).nullable(),
      timedOut: z.boolean().optional(),
      durationMs: Count,
      outputTail: z.string().max(OUTPUT_HEAD_CHARS + OUTPUT_TAIL_CHARS + 200),
      phaseIndex: Count,
      productId: Id,
      commit: CommitId.optional(),
      tree: TreeId.optional(),
      at: Timestamp,
    }),
  "CriterionCheckResult",
);
export type CriterionCheckResult = z.infer<typeof CriterionCheckResult>;

/**
 * Why a command criterion's check could not be run at all on phase `phaseIndex`'s integrated head (docs/VERIFY.md,
 * Goals): the verify worktree could not be prepared or the command could not be started. Not a verdict on the
 * criterion: the check is tried again with backoff, `attempts` counts the tries that errored on this head (at most
 * `CRITERION_CHECK_ATTEMPTS`; then the goal is `blocked` with the reason), and a check that runs to its end clears it.
 */
export const CriterionCheckError = lazySchema(
  () =>
    z.object({
      error: z.string().max(10_000),
      attempts: z.number().int().min(1).max(1_000),
      phaseIndex: Count,
      productId: Id,
      commit: CommitId.optional(),
      at: Timestamp,
    }),
  "CriterionCheckError",
);
export type CriterionCheckError = z.infer<typeof CriterionCheckError>;

/** How many times a command criterion's check is tried on one head when its runner errors (the first try included). */
export const CRITERION_CHECK_ATTEMPTS = 4;

export const Criterion = lazySchema(
  () =>
    z.object({
      id: Id,
      text: z.string(),
      passed: z.boolean(),
      check: CriterionCheck.optional(),
      lastCheck: CriterionCheckResult.optional(),
      /** Set while the check's last tries on the current head could not be run (see CriterionCheckError). */
      checkError: CriterionCheckError.optional(),
    }),
  "Criterion",
);

export const GoalStatusParams = lazySchema(() => requestParams({ goalRunId: Id }), "GoalStatusParams");
export const GoalStatusResult = lazySchema(
  () =>
    z.object({
      goalRunId: Id,
      status: GoalStatus,
      goal: z.string(),
      originalGoal: z.string(),
      phaseIndex: Count,
      productId: Id.optional(),
      startedAt: Timestamp,
      progressSummary: z.string(),
      acceptance: z.object({ passed: Count, total: Count, criteria: z.array(Criterion) }),
      queuedMessages: Count,
      noProgressCount: Count,
      usedTokens: Count,
      endReason: GoalEndReason.optional(),
      failedReason: z.string().optional(),
      /** Stored events that did not parse or are missing; a goal run with any is not driven again (section 6). */
      dropped: Count,
      recovery: Recovery.optional(),
    }),
  "GoalStatusResult",
);

export const GoalListParams = lazySchema(() => requestParams({ projectId: Id.optional() }), "GoalListParams");
export const GoalListResult = lazySchema(
  () =>
    z.object({
      goals: z.array(z.object({ goalRunId: Id, status: GoalStatus, goal: z.string(), phaseIndex: Count })),
    }),
  "GoalListResult",
);

export const GoalPauseParams = lazySchema(() => requestParams({ goalRunId: Id }), "GoalPauseParams");
export const GoalResumeParams = lazySchema(
  () => requestParams({ goalRunId: Id, additionalBudget: GoalBudgetInput.optional() }),
  "GoalResumeParams",
);
const goalStatusOnlyResult = () => z.object({ goalRunId: Id, status: GoalStatus });
export const GoalPauseResult = lazySchema(() => goalStatusOnlyResult(), "GoalPauseResult");
export const GoalResumeResult = lazySchema(() => goalStatusOnlyResult(), "GoalResumeResult");

export const GoalStopParams = lazySchema(
  () => requestParams({ goalRunId: Id, reason: z.string().max(2_000).optional() }),
  "GoalStopParams",
);
export const GoalStopResult = lazySchema(
  () => z.object({ goalRunId: Id, status: z.literal("stopped") }),
  "GoalStopResult",
);

export const GoalEditParams = lazySchema(() => requestParams({ goalRunId: Id, goal: GoalText }), "GoalEditParams");
export const GoalEditResult = lazySchema(() => z.object({ goalRunId: Id, goal: z.string() }), "GoalEditResult");

export const GoalMessageParams = lazySchema(
  () => requestParams({ goalRunId: Id, content: GoalText }),
  "GoalMessageParams",
);
export const GoalMessageResult = lazySchema(() => z.object({ goalRunId: Id, queued: Count }), "GoalMessageResult");

// Notifications (server → client); every one carries `goalRunId`.
export const GoalStartedNotification = lazySchema(
  () =>
    z.object({
      goalRunId: Id,
      criteria: z.array(z.object({ id: Id, text: z.string(), check: CriterionCheck.optional() })),
    }),
  "GoalStartedNotification",
);
export const GoalPhaseStartedNotification = lazySchema(
  () => z.object({ goalRunId: Id, phaseIndex: Count, productId: Id }),
  "GoalPhaseStartedNotification",
);
export const GoalPhaseAssessedNotification = lazySchema(
  () =>
    z.object({
      goalRunId: Id,
      phaseIndex: Count,
      passed: Count,
      total: Count,
      newlyPassed: z.array(Id),
      regressed: z.array(Id),
    }),
  "GoalPhaseAssessedNotification",
);
export const GoalStatusChangedNotification = lazySchema(
  () => z.object({ goalRunId: Id, status: GoalStatus }),
  "GoalStatusChangedNotification",
);
export const GoalEndedNotification = lazySchema(
  () => z.object({ goalRunId: Id, endReason: GoalEndReason, summary: z.string() }),
  "GoalEndedNotification",
);
