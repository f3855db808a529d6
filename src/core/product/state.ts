/**
 * The product's state as plain data: the model (state plus its derived task index and counts), the state before any
 * event, and small read-only questions about it (progress, attempts used, a completed task's input hash). How events
 * change it is evolve.ts, the one reducer. Never performs I/O.
 */
import type { Plan, Progress, TaskState, TaskStatus } from "../../../protocol/common.js";
import type { ProductState } from "./records.js";

/** Default number of checkpoints kept (DESIGN.md, Execution model: "History keeps the newest N (default 20)"). */
export const DEFAULT_CHECKPOINT_HISTORY = 20;

/** A product state plus the derived task index; the index is rebuilt, never persisted. */
export interface ProductModel {
  state: ProductState;
  /** taskId → index into `state.tasks`. */
  index: Map<string, number>;
  /** How many tasks are in each status, kept up to date by `evolve` (evolve.ts) (O(1) per task event). */
  counts: Record<TaskStatus, number>;
  checkpointHistory: number;
}

function zeroCounts(): Record<TaskStatus, number> {
  return { pending: 0, running: 0, waiting: 0, completed: 0, failed: 0, skipped: 0, cancelled: 0 };
}

/** Builds a model around a state (e.g. one read from a snapshot). */
export function modelOf(state: ProductState, checkpointHistory = DEFAULT_CHECKPOINT_HISTORY): ProductModel {
  const model: ProductModel = { state, index: new Map(), counts: zeroCounts(), checkpointHistory };
  reindex(model);
  return model;
}

/** Replaces a model's state in place (e.g. with a snapshot that covers it) and rebuilds the derived index. */
export function resetModel(model: ProductModel, state: ProductState): void {
  model.state = state;
  reindex(model);
}

/** Rebuilds the derived task index and counts of a model from its tasks (evolve.ts, after a whole-task-list event). */
export function reindex(model: ProductModel): void {
  model.index.clear();
  model.counts = zeroCounts();
  model.state.tasks.forEach((t, i) => {
    model.index.set(t.taskId, i);
    model.counts[t.status]++;
  });
}

/** Task states for a freshly confirmed plan: every task pending, no attempts. */
export function initialTaskStates(plan: Plan): TaskState[] {
  return plan.tasks.map((t) => ({ ...t, dependsOn: [...t.dependsOn], status: "pending" as const, attempts: 0 }));
}

/**
 * The state a product starts with before any event. `created` fills the identity fields.
 */
export function emptyState(): ProductState {
  return {
    v: 1,
    seq: 0,
    productId: "unknown",
    projectId: "unknown",
    name: "",
    goal: "",
    cwd: "",
    phase: "planning",
    tasks: [],
    dialogue: [],
    budget: {},
    usage: { inputTokens: 0, outputTokens: 0, estimatedTokens: 0, elapsedMs: 0 },
    budgetWarned: false,
    checkpoints: [],
    createdAt: new Date(0).toISOString(),
    updatedAt: new Date(0).toISOString(),
  };
}

/** The recorded input hash of a completed task, if any (own keys only). */
export function inputHashOf(s: ProductState, taskId: string): string | undefined {
  return s.inputHashes && Object.hasOwn(s.inputHashes, taskId) ? s.inputHashes[taskId] : undefined;
}

/** Progress from a model's maintained counts: O(1). */
export function progressOfModel(model: ProductModel): Progress {
  const c = model.counts;
  return {
    total: model.state.tasks.length,
    completed: c.completed,
    running: c.running,
    failed: c.failed,
    pending: c.pending + c.waiting,
  };
}

/** Counts of tasks by the status groups of `product.status`. `pending` includes waiting tasks. */
export function progressOf(tasks: readonly TaskState[]): Progress {
  const p = { total: tasks.length, completed: 0, running: 0, failed: 0, pending: 0 };
  for (const t of tasks) {
    if (t.status === "completed") p.completed++;
    else if (t.status === "running") p.running++;
    else if (t.status === "failed") p.failed++;
    else if (t.status === "pending" || t.status === "waiting") p.pending++;
  }
  return p;
}

/** Attempts of a task that failed or completed (its interrupted attempts excluded): what `maxAttempts` limits. */
export function attemptsUsed(s: ProductState, task: { taskId: string; attempts: number }): number {
  const counts = s.interruptedAttempts;
  const interrupted = counts && Object.hasOwn(counts, task.taskId) ? (counts[task.taskId] ?? 0) : 0;
  return Math.max(0, task.attempts - interrupted);
}
