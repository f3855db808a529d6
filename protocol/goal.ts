/**
 * zod schemas of every `x/goal.*` request and notification of PROTOCOL.md section 6 (goal runs).
 *
 * Request params are strict (an unknown key is -32602) except for an optional `_meta` object, like product.ts.
 * This file must never import anything but zod, common.ts and product.ts, and never describe a shape PROTOCOL.md
 * does not.
 */
import { z } from "zod";
import { AbsolutePath, Count, Id, Recovery, Timestamp } from "./common.js";
import { BudgetInput, requestParams } from "./product.js";

export const GoalStatus = z.enum(["running", "paused", "blocked", "budget_limited", "completed", "stopped", "failed"]);
export type GoalStatus = z.infer<typeof GoalStatus>;

export const GoalEndReason = z.enum(["achieved", "no_progress", "budget", "max_phases", "stopped", "failed"]);
export type GoalEndReason = z.infer<typeof GoalEndReason>;

/** A goal's budget: the product budget plus the maximum number of phases. */
export const GoalBudgetInput = BudgetInput.extend({ maxPhases: z.number().int().min(1).max(1_000).optional() }).strict();
export type GoalBudgetInput = z.infer<typeof GoalBudgetInput>;

const GoalText = z
  .string()
  .min(1, { abort: true })
  .max(100_000, { abort: true })
  .refine((s) => s.trim().length > 0, { message: "must not be blank" });

export const GoalStartParams = requestParams({
  goal: GoalText,
  cwd: AbsolutePath,
  projectId: Id.optional(),
  sessionId: Id.optional(),
  budget: GoalBudgetInput.optional(),
  noProgressLimit: z.number().int().min(1).max(100).optional(),
});
export const GoalStartResult = z.object({ goalRunId: Id });

export const Criterion = z.object({ id: Id, text: z.string(), passed: z.boolean() });

export const GoalStatusParams = requestParams({ goalRunId: Id });
export const GoalStatusResult = z.object({
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
});

export const GoalListParams = requestParams({ projectId: Id.optional() });
export const GoalListResult = z.object({
  goals: z.array(z.object({ goalRunId: Id, status: GoalStatus, goal: z.string(), phaseIndex: Count })),
});

export const GoalPauseParams = requestParams({ goalRunId: Id });
export const GoalResumeParams = requestParams({ goalRunId: Id, additionalBudget: GoalBudgetInput.optional() });
const goalStatusOnlyResult = () => z.object({ goalRunId: Id, status: GoalStatus });
export const GoalPauseResult = goalStatusOnlyResult();
export const GoalResumeResult = goalStatusOnlyResult();

export const GoalStopParams = requestParams({ goalRunId: Id, reason: z.string().max(2_000).optional() });
export const GoalStopResult = z.object({ goalRunId: Id, status: z.literal("stopped") });

export const GoalEditParams = requestParams({ goalRunId: Id, goal: GoalText });
export const GoalEditResult = z.object({ goalRunId: Id, goal: z.string() });

export const GoalMessageParams = requestParams({ goalRunId: Id, content: GoalText });
export const GoalMessageResult = z.object({ goalRunId: Id, queued: Count });

// Notifications (server → client); every one carries `goalRunId`.
export const GoalStartedNotification = z.object({
  goalRunId: Id,
  criteria: z.array(z.object({ id: Id, text: z.string() })),
});
export const GoalPhaseStartedNotification = z.object({ goalRunId: Id, phaseIndex: Count, productId: Id });
export const GoalPhaseAssessedNotification = z.object({
  goalRunId: Id,
  phaseIndex: Count,
  passed: Count,
  total: Count,
  newlyPassed: z.array(Id),
  regressed: z.array(Id),
});
export const GoalStatusChangedNotification = z.object({ goalRunId: Id, status: GoalStatus });
export const GoalEndedNotification = z.object({ goalRunId: Id, endReason: GoalEndReason, summary: z.string() });
