/**
 * The product reducer: how each persisted event changes a product's state.
 *
 * `applyEvent` is the only place that interprets events, so live execution, loading from disk and rollback all agree.
 * It mutates the given `ProductModel` in place (O(1) per task event; a 50,000-task run must not copy arrays per
 * event). It never performs I/O and never rejects an event: validation happens before an event is appended.
 */
import type { Plan, Progress, TaskState, TaskStatus } from "../../../protocol/common.js";
import { applyWorkspaceEvent, isWorkspaceEvent } from "../workspace/integration.js";
import type { CheckpointRef, ProductEvent, ProductState } from "./records.js";

/** Default number of checkpoints kept (DESIGN.md, Execution model: "History keeps the newest N (default 20)"). */
export const DEFAULT_CHECKPOINT_HISTORY = 20;

/** A product state plus the derived task index; the index is rebuilt, never persisted. */
export interface ProductModel {
  state: ProductState;
  /** taskId → index into `state.tasks`. */
  index: Map<string, number>;
  /** How many tasks are in each status, kept up to date by `applyEvent` (O(1) per task event). */
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

function reindex(model: ProductModel): void {
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

/** Merges a new plan's task definitions into existing task states, keeping run state of tasks that remain. */
function mergePlanTasks(plan: Plan, previous: ProductModel): TaskState[] {
  return plan.tasks.map((t) => {
    const i = previous.index.get(t.taskId);
    const old = i === undefined ? undefined : previous.state.tasks[i];
    if (!old) return { ...t, dependsOn: [...t.dependsOn], status: "pending" as const, attempts: 0 };
    const merged: TaskState = { ...old, ...t, dependsOn: [...t.dependsOn] };
    if (t.acceptance === undefined) delete merged.acceptance;
    if (t.maxAttempts === undefined) delete merged.maxAttempts;
    return merged;
  });
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

/**
 * Applies one event with sequence number `seq` to the model, in place.
 * Does NOT validate the event (the caller appended or parsed it) and does NOT notify anyone.
 */
export function applyEvent(model: ProductModel, event: ProductEvent, seq: number): void {
  const s = model.state;
  s.seq = seq;
  s.updatedAt = event.at;
  if (isWorkspaceEvent(event)) {
    applyWorkspaceEvent(s, event);
    return;
  }
  switch (event.type) {
    case "created":
      s.productId = event.productId;
      s.projectId = event.projectId;
      s.name = event.name;
      s.goal = event.goal;
      s.cwd = event.cwd;
      if (event.sessionId !== undefined) s.sessionId = event.sessionId;
      if (event.leaderAgentId !== undefined) s.leaderAgentId = event.leaderAgentId;
      if (event.maxParallelTasks !== undefined) s.maxParallelTasks = event.maxParallelTasks;
      if (event.allowedAgents !== undefined) s.allowedAgents = event.allowedAgents;
      s.budget = { ...(event.budget ?? {}) };
      if (event.isolation !== undefined || event.integration !== undefined) {
        s.isolationRequest = {
          ...(event.isolation !== undefined ? { isolation: event.isolation } : {}),
          ...(event.integration !== undefined ? { integration: event.integration } : {}),
        };
      }
      s.phase = "planning";
      s.createdAt = event.at;
      break;
    case "dialogue": {
      const entry = { role: event.role, text: event.text, at: event.at, ...(event.outcome ? { outcome: true as const } : {}) };
      // A run's outcome supersedes the outcome just before it when nobody spoke in between (a rollback or replay ran
      // the product again): the conversation keeps what was said, not one summary per run, so a product rolled back
      // 500 times keeps a dialogue (and snapshots) of constant size (guarantee 14; issue 10, finding 6).
      const last = s.dialogue[s.dialogue.length - 1];
      if (entry.outcome && last?.outcome) s.dialogue[s.dialogue.length - 1] = entry;
      else s.dialogue.push(entry);
      break;
    }
    case "planProposed":
      s.plan = event.plan;
      s.phase = "awaiting_confirmation";
      delete s.planError;
      delete s.pendingAsk;
      if (event.plan.budget) s.budget = { ...s.budget, ...event.plan.budget };
      break;
    case "planFailed":
      s.planError = event.error;
      break;
    case "asked":
      s.pendingAsk = { askId: event.askId, questions: event.questions };
      break;
    case "confirmed":
      s.plan = event.plan;
      s.tasks = initialTaskStates(event.plan);
      delete s.inputHashes;
      if (event.fingerprint) s.fingerprint = event.fingerprint;
      if (event.plan.budget) s.budget = { ...s.budget, ...event.plan.budget };
      s.phase = "executing";
      delete s.pendingAsk;
      reindex(model);
      break;
    case "phase":
      s.phase = event.phase;
      if (event.recovery) s.recovery = event.recovery;
      else delete s.recovery;
      break;
    case "task": {
      const i = model.index.get(event.task.taskId);
      if (i === undefined) {
        model.index.set(event.task.taskId, s.tasks.length);
        s.tasks.push(event.task);
      } else {
        const old = s.tasks[i];
        if (old) model.counts[old.status]--;
        if (old?.status === "running" && event.task.status === "pending" && event.task.interruption !== undefined) {
          countInterruption(s, event.task.taskId, 1);
        }
        s.tasks[i] = event.task;
      }
      if (event.task.attempts === 0) countInterruption(s, event.task.taskId, 0);
      model.counts[event.task.status]++;
      bindInput(s, event.task.taskId, event.task.status === "completed" ? event.inputHash : undefined);
      break;
    }
    case "mutated": {
      s.plan = event.plan;
      s.tasks = mergePlanTasks(event.plan, model);
      reindex(model);
      if (s.inputHashes) {
        for (const id of Object.keys(s.inputHashes)) if (!model.index.has(id)) delete s.inputHashes[id];
      }
      break;
    }
    case "usage":
      s.usage.inputTokens += event.inputTokens;
      s.usage.outputTokens += event.outputTokens;
      if (event.estimated) s.usage.estimatedTokens += event.inputTokens + event.outputTokens;
      break;
    case "elapsed":
      s.usage.elapsedMs = event.elapsedMs;
      break;
    case "budgetAdded":
      s.budget = addBudget(s, event.budget);
      s.budgetWarned = false;
      break;
    case "budgetWarned":
      s.budgetWarned = true;
      break;
    case "checkpoint": {
      const ref: CheckpointRef = {
        checkpointId: event.checkpointId,
        at: event.at,
        seq,
        completed: event.completed,
        total: event.total,
      };
      if (s.integration) {
        ref.integrationHead = s.integration.head;
        ref.merged = [...s.integration.merged];
      }
      s.checkpoints.push(ref);
      if (s.checkpoints.length > model.checkpointHistory) {
        s.checkpoints.splice(0, s.checkpoints.length - model.checkpointHistory);
      }
      break;
    }
    case "restored":
      if (event.plan) s.plan = event.plan;
      else delete s.plan;
      s.tasks = event.tasks;
      reindex(model);
      delete s.inputHashes;
      for (const t of s.tasks) {
        const h = event.inputHashes;
        if (t.status === "completed" && h && Object.hasOwn(h, t.taskId)) bindInput(s, t.taskId, h[t.taskId]);
      }
      break;
    case "fingerprint":
      s.fingerprint = event.fingerprint;
      break;
  }
}

/**
 * Records (or, with `undefined`, forgets) the input hash of a task's completed result (guarantee 7). Only completed
 * tasks keep an entry; a completion recorded without a hash (older runs) has none and is trusted as it is.
 */
function bindInput(s: ProductState, taskId: string, hash: string | undefined): void {
  if (hash !== undefined) {
    // defineProperty, not assignment: a task id such as `__proto__` must stay an ordinary key.
    Object.defineProperty((s.inputHashes ??= {}), taskId, { value: hash, enumerable: true, writable: true, configurable: true });
  } else if (s.inputHashes && Object.hasOwn(s.inputHashes, taskId)) delete s.inputHashes[taskId];
}

/** The recorded input hash of a completed task, if any (own keys only). */
export function inputHashOf(s: ProductState, taskId: string): string | undefined {
  return s.inputHashes && Object.hasOwn(s.inputHashes, taskId) ? s.inputHashes[taskId] : undefined;
}

/**
 * Adds budget on resume (DESIGN.md guarantee 9: "Resume may add budget"): limits grow by the given amounts on top of
 * what was already spent, so spent counters are kept. A limit that was unset stays unset unless given.
 */
function addBudget(s: ProductState, extra: { maxTotalTokens?: number; maxDurationMs?: number }): ProductState["budget"] {
  const out = { ...s.budget };
  const used = s.usage.inputTokens + s.usage.outputTokens;
  if (extra.maxTotalTokens !== undefined) {
    out.maxTotalTokens = Math.max(out.maxTotalTokens ?? used, used) + extra.maxTotalTokens;
  }
  if (extra.maxDurationMs !== undefined) {
    out.maxDurationMs = Math.max(out.maxDurationMs ?? s.usage.elapsedMs, s.usage.elapsedMs) + extra.maxDurationMs;
  }
  return out;
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

/** Adds `delta` interrupted attempts for a task (`0` resets its count, e.g. on replay). */
function countInterruption(s: ProductState, taskId: string, delta: number): void {
  const counts = (s.interruptedAttempts ??= {});
  const now = delta === 0 ? 0 : (Object.hasOwn(counts, taskId) ? (counts[taskId] ?? 0) : 0) + delta;
  if (now === 0) {
    if (Object.hasOwn(counts, taskId)) delete counts[taskId];
  } else {
    Object.defineProperty(counts, taskId, { value: now, enumerable: true, writable: true, configurable: true });
  }
}

/** Attempts of a task that failed or completed (its interrupted attempts excluded): what `maxAttempts` limits. */
export function attemptsUsed(s: ProductState, task: { taskId: string; attempts: number }): number {
  const counts = s.interruptedAttempts;
  const interrupted = counts && Object.hasOwn(counts, task.taskId) ? (counts[task.taskId] ?? 0) : 0;
  return Math.max(0, task.attempts - interrupted);
}
