/**
 * Goal runs are event-sourced (issue 5, PROTOCOL.md section 6): every step is an event appended to the goal's stream
 * `goal/<goalRunId>` before it takes effect, and the status is rebuilt by replaying the events through `applyGoalEvent`.
 *
 * Storage: the event stream and a header record `goal/<goalRunId>` (for `x/goal.list`) under the goal's project, and
 * an index record `goal-index/<goalRunId>` in project `_`. Every record read back is validated (guarantee 4).
 * This file holds schemas and the reducer only; it never performs I/O.
 */
import { z } from "zod";
import { Count, Id, Timestamp } from "../../../protocol/common.js";
import { GoalEndReason, GoalStatus } from "../../../protocol/goal.js";

export const goalStream = (goalRunId: string): string => `goal/${goalRunId}`;

const GoalBudget = z.object({
  maxTotalTokens: z.number().int().positive().optional(),
  maxDurationMs: z.number().int().positive().optional(),
  maxPhases: z.number().int().positive().optional(),
});
export type GoalBudget = z.infer<typeof GoalBudget>;

const CriterionRecord = z.object({ id: Id, text: z.string() });
const base = { v: z.literal(1), at: Timestamp };

export const GoalEvent = z.discriminatedUnion("type", [
  z.object({
    ...base,
    type: z.literal("goal_started"),
    goalRunId: Id,
    projectId: Id,
    goal: z.string(),
    cwd: z.string(),
    sessionId: z.string().optional(),
    budget: GoalBudget,
    noProgressLimit: z.number().int().min(1).max(100),
  }),
  z.object({ ...base, type: z.literal("criteria_derived"), criteria: z.array(CriterionRecord).min(1), message: z.string() }),
  z.object({ ...base, type: z.literal("goal_edited"), goal: z.string() }),
  z.object({ ...base, type: z.literal("message_queued"), content: z.string() }),
  /** A phase boundary: pending goal edits take effect and the first `consumed` queued messages are used, once. */
  z.object({ ...base, type: z.literal("boundary"), goal: z.string(), consumed: Count }),
  z.object({ ...base, type: z.literal("phase_planned"), phaseIndex: Count, targets: z.array(Id), message: z.string() }),
  z.object({ ...base, type: z.literal("phase_started"), phaseIndex: Count, productId: Id }),
  z.object({
    ...base,
    type: z.literal("task_settled"),
    phaseIndex: Count,
    taskId: Id,
    status: z.string(),
  }),
  z.object({
    ...base,
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
  z.object({ ...base, type: z.literal("status"), status: GoalStatus, reason: z.string().optional() }),
  z.object({ ...base, type: z.literal("resumed"), additionalBudget: GoalBudget.optional() }),
  z.object({
    ...base,
    type: z.literal("ended"),
    endReason: GoalEndReason,
    summary: z.string(),
    failedReason: z.string().optional(),
  }),
]);
export type GoalEvent = z.infer<typeof GoalEvent>;

export interface GoalCriterion {
  id: string;
  text: string;
  passed: boolean;
}

export interface GoalPhaseRecord {
  phaseIndex: number;
  productId?: string;
  targets: string[];
  message: string;
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
  /** Index of the current (or, between phases, the next) phase. */
  phaseIndex: number;
  phasesStarted: number;
  /** The product of the current phase while it runs (cleared when it is assessed). */
  productId?: string;
  lastProductId?: string;
  targets: string[];
  phases: GoalPhaseRecord[];
  queued: string[];
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
    phaseIndex: 0,
    phasesStarted: 0,
    targets: [],
    phases: [],
    queued: [],
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

/** Applies one event in place. Never rejects: events are validated before they are appended. */
export function applyGoalEvent(s: GoalState, e: GoalEvent, seq: number): void {
  s.seq = seq;
  s.updatedAt = e.at;
  switch (e.type) {
    case "goal_started":
      s.goalRunId = e.goalRunId;
      s.projectId = e.projectId;
      s.cwd = e.cwd;
      if (e.sessionId !== undefined) s.sessionId = e.sessionId;
      s.goal = e.goal;
      s.originalGoal = e.goal;
      s.budget = { ...e.budget };
      s.noProgressLimit = e.noProgressLimit;
      s.status = "running";
      s.startedAt = e.at;
      break;
    case "criteria_derived": {
      const before = new Map(s.criteria.map((c) => [c.text, c.passed]));
      s.criteria = e.criteria.map((c) => ({ id: c.id, text: c.text, passed: before.get(c.text) ?? false }));
      break;
    }
    case "goal_edited":
      s.pendingGoal = e.goal;
      break;
    case "message_queued":
      s.queued.push(e.content);
      break;
    case "boundary":
      s.goal = e.goal;
      delete s.pendingGoal;
      s.consumedMessages.push(...s.queued.splice(0, e.consumed));
      break;
    case "phase_planned":
      s.phaseIndex = e.phaseIndex;
      s.targets = e.targets;
      s.phases[e.phaseIndex] = { phaseIndex: e.phaseIndex, targets: e.targets, message: e.message };
      break;
    case "phase_started": {
      s.phaseIndex = e.phaseIndex;
      s.productId = e.productId;
      s.lastProductId = e.productId;
      s.phasesStarted = Math.max(s.phasesStarted, e.phaseIndex + 1);
      const p = s.phases[e.phaseIndex] ?? { phaseIndex: e.phaseIndex, targets: s.targets, message: "" };
      p.productId = e.productId;
      s.phases[e.phaseIndex] = p;
      break;
    }
    case "task_settled":
      break;
    case "phase_assessed": {
      const passed = new Set(e.passed);
      for (const c of s.criteria) c.passed = passed.has(c.id);
      s.usedTokens += e.phaseTokens;
      s.elapsedMs += e.phaseElapsedMs;
      s.noProgressCount = e.newlyPassed.length === 0 ? s.noProgressCount + 1 : 0;
      const p = s.phases[e.phaseIndex] ?? { phaseIndex: e.phaseIndex, targets: [], message: "" };
      p.assessment = e.message;
      p.productPhase = e.productPhase;
      s.phases[e.phaseIndex] = p;
      delete s.productId;
      s.phaseIndex = e.phaseIndex + 1;
      break;
    }
    case "status":
      s.status = e.status;
      if (e.reason !== undefined) s.statusReason = e.reason;
      else delete s.statusReason;
      break;
    case "resumed": {
      const add = e.additionalBudget;
      if (add?.maxTotalTokens !== undefined) {
        s.budget.maxTotalTokens = Math.max(s.budget.maxTotalTokens ?? s.usedTokens, s.usedTokens) + add.maxTotalTokens;
      }
      if (add?.maxDurationMs !== undefined) {
        s.budget.maxDurationMs = Math.max(s.budget.maxDurationMs ?? s.elapsedMs, s.elapsedMs) + add.maxDurationMs;
      }
      if (add?.maxPhases !== undefined) {
        s.budget.maxPhases = Math.max(s.budget.maxPhases ?? s.phasesStarted, s.phasesStarted) + add.maxPhases;
      }
      s.status = "running";
      delete s.statusReason;
      delete s.endReason;
      delete s.summary;
      s.noProgressCount = 0;
      break;
    }
    case "ended":
      s.endReason = e.endReason;
      s.summary = e.summary;
      if (e.failedReason !== undefined) s.failedReason = e.failedReason;
      s.status = STATUS_AFTER_END[e.endReason];
      break;
  }
}

export const GoalHeaderRecord = z.object({
  v: z.literal(1),
  goalRunId: Id,
  projectId: Id,
  status: GoalStatus,
  goal: z.string(),
  phaseIndex: Count,
  startedAt: Timestamp,
  updatedAt: Timestamp,
});
export type GoalHeaderRecord = z.infer<typeof GoalHeaderRecord>;

export const GoalIndexRecord = z.object({ v: z.literal(1), projectId: Id });
