/**
 * Goal runs are event-sourced (issue 5, PROTOCOL.md section 6): every step is an event appended to the goal's stream
 * `goal/<goalRunId>` before it takes effect, and the status is rebuilt by replaying the events through `evolveGoal`
 * (evolve.ts).
 *
 * Storage: the event stream and a header record `goal/<goalRunId>` (for `x/goal.list`) under the goal's project, and
 * an index record `goal-index/<goalRunId>` in project `_`. Every record read back is validated (guarantee 4).
 * This file holds schemas and the state's shape only; it never performs I/O, never gives events their meaning
 * (evolve.ts does) and never decides what the loop does next (decide.ts does).
 */
import * as z from "zod";
import { Count, Id, Timestamp } from "../../../protocol/common.js";
import {
  CriterionCheck,
  CriterionCheckError,
  CriterionCheckResult,
  GoalEndReason,
  GoalStatus,
  type CriterionCheckError as CheckErrorShape,
  type CriterionCheckResult as CheckResultShape,
} from "../../../protocol/goal.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";

export const goalStream = (goalRunId: string): string => `goal/${goalRunId}`;

const GoalBudget = lazySchema(
  () =>
    z.object({
      maxTotalTokens: z.number().int().positive().optional(),
      maxDurationMs: z.number().int().positive().optional(),
      maxPhases: z.number().int().positive().optional(),
    }),
  "GoalBudget",
);
export type GoalBudget = z.infer<typeof GoalBudget>;

/** A criterion as recorded: derived by the leader (text only), or given by the client (`check`: a command decides it). */
const CriterionRecord = lazySchema(
  () => z.object({ id: Id, text: z.string(), check: CriterionCheck.optional() }),
  "CriterionRecord",
);
const base = () => ({ v: z.literal(1), at: Timestamp });

/**
 * `criterion_checked`: a command criterion's check ran to its end on phase `phaseIndex`'s integrated head
 * (docs/VERIFY.md, Goals); a check cut short (pause, stop, crash) records nothing and runs again.
 */
const criterionChecked = () =>
  z.object({
    ...base(),
    type: z.literal("criterion_checked"),
    criterionId: Id,
    result: CriterionCheckResult.omit({ at: true }),
  });

/**
 * `criterion_check_errored`: a command criterion's check could not be run at all on phase `error.phaseIndex`'s
 * integrated head (the verify worktree could not be prepared, or the command could not be started): not a verdict on
 * the criterion. `error.attempts` counts such tries on that head (evolve.ts keeps it across a crash and a resume of a
 * running goal; a resume of a blocked goal starts counting again).
 */
const criterionCheckErrored = () =>
  z.object({
    ...base(),
    type: z.literal("criterion_check_errored"),
    criterionId: Id,
    error: CriterionCheckError.omit({ at: true }),
  });

export const GoalEvent = lazySchema(
  () =>
    z.discriminatedUnion("type", [
      z.object({
        ...base(),
        type: z.literal("goal_started"),
        goalRunId: Id,
        projectId: Id,
        goal: z.string(),
        cwd: z.string(),
        sessionId: z.string().optional(),
        budget: GoalBudget,
        noProgressLimit: z.number().int().min(1).max(100),
        /** The acceptance criteria the client gave (the leader then derives none, ever). */
        criteria: z.array(CriterionRecord).min(1).max(50).optional(),
      }),
      z.object({
        ...base(),
        type: z.literal("criteria_derived"),
        criteria: z.array(CriterionRecord).min(1),
        message: z.string(),
      }),
      z.object({ ...base(), type: z.literal("goal_edited"), goal: z.string() }),
      z.object({ ...base(), type: z.literal("message_queued"), content: z.string() }),
      /**
       * A phase boundary: the pending goal edit (if any) takes effect and the first `consumed` queued messages are handed
       * to the next phase that starts, exactly once.
       */
      z.object({ ...base(), type: z.literal("boundary"), goal: z.string(), consumed: Count }),
      z.object({
        ...base(),
        type: z.literal("phase_planned"),
        phaseIndex: Count,
        targets: z.array(Id),
        message: z.string(),
      }),
      z.object({ ...base(), type: z.literal("phase_started"), phaseIndex: Count, productId: Id }),
      criterionChecked(),
      criterionCheckErrored(),
      z.object({
        ...base(),
        type: z.literal("task_settled"),
        phaseIndex: Count,
        taskId: Id,
        status: z.string(),
      }),
      z.object({
        ...base(),
        type: z.literal("phase_assessed"),
        phaseIndex: Count,
        passed: z.array(Id),
        newlyPassed: z.array(Id),
        regressed: z.array(Id),
        /** Tokens the phase's product used (added to the goal's total). */
        phaseTokens: Count,
        phaseElapsedMs: Count,
        productPhase: z.string(),
        message: z.string(),
      }),
      z.object({ ...base(), type: z.literal("status"), status: GoalStatus, reason: z.string().optional() }),
      z.object({
        ...base(),
        type: z.literal("resumed"),
        additionalBudget: GoalBudget.optional(),
        /**
         * Tokens and milliseconds spent so far including the running phase's product, when one was open: added budget
         * counts from what is really spent, not only from what earlier assessments recorded.
         */
        spentTokens: Count.optional(),
        spentMs: Count.optional(),
      }),
      z.object({
        ...base(),
        type: z.literal("ended"),
        endReason: GoalEndReason,
        summary: z.string(),
        failedReason: z.string().optional(),
      }),
    ]),
  "GoalEvent",
);
export type GoalEvent = z.infer<typeof GoalEvent>;

export interface GoalCriterion {
  id: string;
  text: string;
  passed: boolean;
  /** A command decides this criterion (given by the client). */
  check?: CriterionCheck;
  /** The last run of `check` that ran to its end. */
  lastCheck?: CheckResultShape;
  /** Why the last tries of `check` on the current head could not run (cleared by a check that ran to its end). */
  checkError?: CheckErrorShape;
}

export interface GoalPhaseRecord {
  phaseIndex: number;
  productId?: string;
  targets: string[];
  message: string;
  /** User messages this phase was planned with (handed over at the boundary before it). */
  messages: string[];
  assessment?: string;
  productPhase?: string;
}

/** The reduced state of a goal run. */
export interface GoalState {
  seq: number;
  goalRunId: string;
  projectId: string;
  cwd: string;
  sessionId?: string;
  goal: string;
  originalGoal: string;
  /** A goal edit recorded but not yet in effect (it takes effect at the next phase boundary). */
  pendingGoal?: string;
  status: GoalStatus;
  statusReason?: string;
  criteria: GoalCriterion[];
  /** The goal text the criteria were derived from; when the goal changed at a boundary they are derived again. */
  criteriaGoal?: string;
  /** The client gave the criteria at start: the leader never derives them (a goal edit keeps them). */
  criteriaGiven: boolean;
  /** Index of the current (or, between phases, the next) phase. */
  phaseIndex: number;
  phasesStarted: number;
  /** The product of the current phase while it runs (cleared when it is assessed). */
  productId?: string;
  lastProductId?: string;
  targets: string[];
  phases: GoalPhaseRecord[];
  /** Messages queued since the last boundary (not yet in effect). */
  queued: string[];
  /** Messages consumed at a boundary and not yet handed to a started phase (the next `planPhase` gets them). */
  phaseMessages: string[];
  /** Every message consumed at a boundary so far, oldest first. */
  consumedMessages: string[];
  noProgressCount: number;
  noProgressLimit: number;
  usedTokens: number;
  elapsedMs: number;
  budget: GoalBudget;
  startedAt: string;
  updatedAt: string;
  endReason?: GoalEndReason;
  failedReason?: string;
  summary?: string;
  /** Records that failed validation when loaded (guarantee 4). */
  dropped: number;
}

export const TERMINAL_GOAL_STATUSES: readonly GoalStatus[] = ["completed", "stopped", "failed"];

/**
 * The status a goal run is left in when it ends: `achieved` completes it; `no_progress` blocks it (the user may edit
 * the goal or send a message and resume); `budget` and `max_phases` leave it budget-limited (resumable with
 * `additionalBudget`); `stopped` and `failed` are terminal.
 */
export const STATUS_AFTER_END: Record<GoalEndReason, GoalStatus> = {
  achieved: "completed",
  no_progress: "blocked",
  budget: "budget_limited",
  max_phases: "budget_limited",
  stopped: "stopped",
  failed: "failed",
};

export function emptyGoalState(): GoalState {
  return {
    seq: 0,
    goalRunId: "",
    projectId: "",
    cwd: "",
    goal: "",
    originalGoal: "",
    status: "running",
    criteria: [],
    criteriaGiven: false,
    phaseIndex: 0,
    phasesStarted: 0,
    targets: [],
    phases: [],
    queued: [],
    phaseMessages: [],
    consumedMessages: [],
    noProgressCount: 0,
    noProgressLimit: 3,
    usedTokens: 0,
    elapsedMs: 0,
    budget: {},
    startedAt: new Date(0).toISOString(),
    updatedAt: new Date(0).toISOString(),
    dropped: 0,
  };
}

export const GoalHeaderRecord = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      goalRunId: Id,
      projectId: Id,
      status: GoalStatus,
      goal: z.string(),
      phaseIndex: Count,
      startedAt: Timestamp,
      updatedAt: Timestamp,
    }),
  "GoalHeaderRecord",
);
export type GoalHeaderRecord = z.infer<typeof GoalHeaderRecord>;

export const GoalIndexRecord = lazySchema(() => z.object({ v: z.literal(1), projectId: Id }), "GoalIndexRecord");
