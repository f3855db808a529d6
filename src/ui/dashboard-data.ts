/**
 * The dashboard's view models (issue 15), built from a `RunStateReader` (the same core code that answers
 * `product.status` and `x/goal.status`), so the page shows what a client would be told:
 * - `overview`: every product (phase, progress, owner liveness, updated time) and goal run;
 * - `productView`: one product's status with its DAG laid out (graph-layout.ts), each node carrying the colours of
 *   its status (operator/format.ts `statusStyle`, the same as `graph`), each task's output tail, error, attempts,
 *   duration, worktree commit and changed files, plus the checkpoints timeline, budget, recovery and integration;
 * - `goalView`: a goal run's status (criteria, phase, progress summary).
 *
 * Reads only (guarantee 3). A product that is planned but not confirmed shows its proposed plan's tasks as `pending`
 * (a new user's first look at a product is before confirming it).
 */
import type { TaskState } from "../../protocol/common.js";
import { readLiveOutput } from "../core/product/live-output.js";
import { shownStatus, statusStyle, taskDurationMs } from "../operator/format.js";
import type { GoalRow, ProductRow, RunStateReader } from "../operator/run-state-reader.js";
import { layoutDag, type DagLayout } from "./graph-layout.js";

/** The largest output tail a view carries per task, in characters (the full output has its own route). */
export const OUTPUT_TAIL_CHARS = 4_000;

export interface Overview {
  store: string;
  products: ProductRow[];
  goals: GoalRow[];
}

/** One task as the product page shows it. */
export interface TaskView {
  taskId: string;
  title: string;
  /** The task's status as views show it: `superseded` for a failed task a fix-up replaces (issue 28). */
  status: string;
  /** A superseded task's fix-up; a fix-up's failed task (issue 28). */
  supersededBy?: string;
  supersedes?: string;
  /** true when the task comes from a proposed, not yet confirmed plan. */
  proposed: boolean;
  agent: string;
  dependsOn: string[];
  attempts: number;
  startedAt?: string;
  endedAt?: string;
  durationMs?: number;
  error?: string;
  interruption?: string;
  question?: string;
  /** The last OUTPUT_TAIL_CHARS characters of the output, and the output's full length. */
  outputTail: string;
  /**
   * A running attempt's output so far, as its owner persisted it (core/product/live-output.ts: the last 16 Ki
   * characters, written at most every 500 ms); `length` counts every character of the attempt. Only while it runs.
   */
  liveOutput?: { text: string; length: number; attempt: number; at: string };
  outputLength: number;
  commit?: string;
  branch?: string;
  changedFiles?: string[];
  refusedPermissions?: { kind: string; title: string; by: string }[];
  /** What a pending task waits for (dependencies, seat, budget, leader, workspace). */
  waitingFor?: string;
  fill: string;
  stroke: string;
}

export interface ProductView {
  status: Record<string, unknown>;
  tasks: TaskView[];
  layout: DagLayout;
  checkpoints: { checkpointId: string; at: string; completed: number; total: number }[];
}

export async function overview(reader: RunStateReader, store: string): Promise<Overview> {
  const [products, goals] = [await reader.listProducts(), await reader.listGoals()];
  return { store, products, goals };
}

/** One product's page. Throws the reader's not_found for an unknown id. `now` is the clock for running durations. */
export async function productView(reader: RunStateReader, productId: string, now: number): Promise<ProductView> {
  const status = await reader.productStatus(productId);
  const checkpoints = await reader.checkpoints(productId);
  const plan = status.plan as { instances: { instanceId: string; agentId: string }[]; tasks: TaskState[] } | undefined;
  const agents = new Map((plan?.instances ?? []).map((i) => [i.instanceId, i.agentId]));
  const states = status.tasks as TaskState[];
  const proposed = states.length === 0 && plan !== undefined;
  const projectId = typeof status.projectId === "string" ? status.projectId : undefined;
  const running = states.some((t) => t.status === "running" || t.status === "waiting");
  const live = projectId && running ? await readLiveOutput(reader.authority, projectId, productId) : new Map();
  const source: TaskState[] = proposed
    ? (plan?.tasks ?? []).map((t) => ({ ...t, status: "pending", attempts: 0 }))
    : states;
  const tasks = source.map((t): TaskView => {
    const shown = shownStatus(t);
    const style = statusStyle(shown);
    const output = t.output ?? "";
    const duration = taskDurationMs(t, now);
    const chunk = live.get(t.taskId);
    const liveNow = chunk && chunk.attempt === t.attempts && (t.status === "running" || t.status === "waiting");
    return {
      taskId: t.taskId,
      title: t.title,
      status: shown,
      proposed,
      agent: agents.get(t.instanceId) ?? t.instanceId,
      dependsOn: [...t.dependsOn],
      attempts: t.attempts,
      ...(t.startedAt ? { startedAt: t.startedAt } : {}),
      ...(t.endedAt ? { endedAt: t.endedAt } : {}),
      ...(duration !== undefined ? { durationMs: duration } : {}),
      ...(t.error ? { error: t.error } : {}),
      ...(t.interruption ? { interruption: t.interruption } : {}),
      ...(t.question ? { question: t.question } : {}),
      outputTail: output.length > OUTPUT_TAIL_CHARS ? output.slice(-OUTPUT_TAIL_CHARS) : output,
      outputLength: output.length,
      ...(liveNow
        ? { liveOutput: { text: chunk.text, length: chunk.length, attempt: chunk.attempt, at: chunk.at } }
        : {}),
      ...(t.workspace?.commit ? { commit: t.workspace.commit } : {}),
      ...(t.workspace?.branch ? { branch: t.workspace.branch } : {}),
      ...(t.workspace?.changedFiles ? { changedFiles: [...t.workspace.changedFiles] } : {}),
      ...(t.refusedPermissions ? { refusedPermissions: t.refusedPermissions.map((r) => ({ ...r })) } : {}),
      ...optionalText(t, "waitingFor"),
      ...optionalText(t, "supersededBy"),
      ...optionalText(t, "supersedes"),
      fill: style.fill,
      stroke: style.stroke,
    };
  });
  const slim = {
    ...status,
    tasks: undefined,
    plan: plan ? { version: (plan as { version?: number }).version } : undefined,
  };
  return { status: slim, tasks, layout: layoutDag(tasks), checkpoints };
}

/** `{[key]: value}` when the task has a string under `key` (fields other issues add to TaskState), else `{}`. */
function optionalText(t: TaskState, key: string): Record<string, string> {
  const value = (t as unknown as Record<string, unknown>)[key];
  return typeof value === "string" && value !== "" ? { [key]: value } : {};
}

/** A task's full output (undefined when the product has no such task). Throws not_found for an unknown product. */
export async function taskOutput(
  reader: RunStateReader,
  productId: string,
  taskId: string,
): Promise<string | undefined> {
  const status = await reader.productStatus(productId);
  const task = (status.tasks as TaskState[]).find((t) => t.taskId === taskId);
  return task === undefined ? undefined : (task.output ?? "");
}

/** One goal run's page (`x/goal.status`). Throws not_found for an unknown id. */
export async function goalView(reader: RunStateReader, goalRunId: string): Promise<Record<string, unknown>> {
  return reader.goalStatus(goalRunId);
}
