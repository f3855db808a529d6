/**
 * The product reducer: `evolve(model, event, seq)`, the one meaning of a product's journal (issue 27). The live run
 * (store.ts `append` applies what it wrote), loading and catching up (store.ts `load`, `catchUp`), resume and
 * rollback (store.ts `stateAtCheckpoint`) all go through it, so what an event means can never differ between them;
 * test/core/product/evolve.test.ts checks that replaying a journal always gives the live state.
 *
 * It changes the given `ProductModel` in place and returns it (O(1) per task event: a 50,000-task run must not copy
 * arrays per event). It never performs I/O, never reads a clock and never rejects an event: events are validated
 * before they are appended or when they are read back.
 */
import type { Plan, TaskState, TaskWorkspace } from "../../../protocol/common.js";
import { applyWorkspaceEvent, isWorkspaceEvent, type WorkspaceEvent } from "../workspace/integration.js";
import { applyVerified, applyVerifyFixup, initialVerification } from "../workspace/verification.js";
import type { CheckpointRef, ProductEvent, ProductState } from "./records.js";
import { initialTaskStates, reindex, type ProductModel } from "./state.js";

/** A product event that is not a workspace event (those are src/core/workspace/integration.ts's). */
type CoreEvent = Exclude<ProductEvent, WorkspaceEvent>;
type EventOf<T extends CoreEvent["type"]> = Extract<CoreEvent, { type: T }>;
type Handlers = { [T in CoreEvent["type"]]: (model: ProductModel, event: EventOf<T>, seq: number) => void };

/**
 * Applies one event with sequence number `seq` to the model, in place, and returns the model.
 * Does NOT validate the event (the caller appended or parsed it) and does NOT notify anyone.
 */
export function evolve(model: ProductModel, event: ProductEvent, seq: number): ProductModel {
  const s = model.state;
  s.seq = seq;
  s.updatedAt = event.at;
  if (isWorkspaceEvent(event)) {
    applyWorkspaceEvent(s, event);
    return model;
  }
  const handler = HANDLERS[event.type] as (model: ProductModel, event: CoreEvent, seq: number) => void;
  handler(model, event, seq);
  return model;
}

const HANDLERS: Handlers = {
  created: onCreated,
  dialogue: onDialogue,
  planProposed: ({ state: s }, e) => {
    s.plan = e.plan;
    // The first plan names a product whose name was provisional (issue 28): its title from now on.
    if (s.provisionalName) {
      if (e.plan.name.trim() !== "") s.name = e.plan.name;
      delete s.provisionalName;
    }
    s.phase = "awaiting_confirmation";
    delete s.planError;
    delete s.pendingAsk;
    if (e.plan.budget) s.budget = { ...s.budget, ...e.plan.budget };
  },
  planFailed: ({ state: s }, e) => {
    s.planError = e.error;
  },
  asked: ({ state: s }, e) => {
    s.pendingAsk = { askId: e.askId, questions: e.questions };
  },
  confirmed: onConfirmed,
  phase: ({ state: s }, e) => {
    s.phase = e.phase;
    if (e.recovery) s.recovery = e.recovery;
    else delete s.recovery;
  },
  task: onTask,
  started: onStarted,
  mutated: onMutated,
  usage: ({ state: s }, e) => addUsage(s, e),
  elapsed: ({ state: s }, e) => {
    s.usage.elapsedMs = e.elapsedMs;
    s.usage.elapsedAt = e.at;
  },
  budgetAdded: ({ state: s }, e) => {
    s.budget = addBudget(s, e.budget);
    s.budgetWarned = false;
  },
  budgetWarned: ({ state: s }) => {
    s.budgetWarned = true;
  },
  checkpoint: onCheckpoint,
  restored: onRestored,
  fingerprint: ({ state: s }, e) => {
    s.fingerprint = e.fingerprint;
  },
  verified: ({ state: s }, e) => applyVerified(s, e),
  verifyFixup: ({ state: s }, e) => applyVerifyFixup(s, e),
};

function onCreated({ state: s }: ProductModel, e: EventOf<"created">): void {
  s.productId = e.productId;
  s.projectId = e.projectId;
  s.name = e.name;
  if (e.provisionalName) s.provisionalName = true;
  s.goal = e.goal;
  s.cwd = e.cwd;
  if (e.sessionId !== undefined) s.sessionId = e.sessionId;
  if (e.leaderAgentId !== undefined) s.leaderAgentId = e.leaderAgentId;
  if (e.maxParallelTasks !== undefined) s.maxParallelTasks = e.maxParallelTasks;
  if (e.allowedAgents !== undefined) s.allowedAgents = e.allowedAgents;
  if (e.mcpServers !== undefined) s.mcpServers = e.mcpServers;
  if (e.additionalDirectories !== undefined) s.additionalDirectories = e.additionalDirectories;
  s.budget = { ...(e.budget ?? {}) };
  if (e.workspace !== undefined) s.workspace = { ...e.workspace };
  if (e.isolation !== undefined || e.integration !== undefined) {
    s.isolationRequest = {
      ...(e.isolation !== undefined ? { isolation: e.isolation } : {}),
      ...(e.integration !== undefined ? { integration: e.integration } : {}),
    };
  }
  const verification = initialVerification(e.verify);
  if (verification) s.verification = verification;
  s.phase = "planning";
  s.createdAt = e.at;
}

function onDialogue({ state: s }: ProductModel, e: EventOf<"dialogue">): void {
  const entry = {
    role: e.role,
    text: e.text,
    at: e.at,
    ...(e.outcome ? { outcome: true as const } : {}),
    ...(e.attachments?.length ? { attachments: e.attachments } : {}),
  };
  // A run's outcome supersedes the outcome just before it when nobody spoke in between (a rollback or replay ran the
  // product again): the conversation keeps what was said, not one summary per run, so a product rolled back 500
  // times keeps a dialogue (and snapshots) of constant size (guarantee 14; issue 10, finding 6).
  const last = s.dialogue[s.dialogue.length - 1];
  if (entry.outcome && last?.outcome) s.dialogue[s.dialogue.length - 1] = entry;
  else s.dialogue.push(entry);
}

function onConfirmed(model: ProductModel, e: EventOf<"confirmed">): void {
  const s = model.state;
  s.plan = e.plan;
  s.tasks = initialTaskStates(e.plan);
  delete s.inputHashes;
  if (e.fingerprint) s.fingerprint = e.fingerprint;
  if (e.plan.budget) s.budget = { ...s.budget, ...e.plan.budget };
  s.phase = "executing";
  delete s.pendingAsk;
  reindex(model);
}

function onTask(model: ProductModel, e: EventOf<"task">, seq: number): void {
  const s = model.state;
  const i = model.index.get(e.task.taskId);
  if (i === undefined) {
    model.index.set(e.task.taskId, s.tasks.length);
    s.tasks.push(e.task);
  } else {
    const old = s.tasks[i];
    if (old) model.counts[old.status]--;
    if (old?.status === "running" && e.task.status === "pending" && e.task.interruption !== undefined) {
      countInterruption(s, e.task.taskId, 1);
    }
    s.tasks[i] = e.task;
  }
  if (e.task.attempts === 0) countInterruption(s, e.task.taskId, 0);
  model.counts[e.task.status]++;
  bindInput(s, e.task.taskId, e.task.status === "completed" ? e.inputHash : undefined);
  // A settled attempt's usage and automatic checkpoint, in the order their own events were applied before (issue 34).
  if (e.usage !== undefined) addUsage(s, e.usage);
  if (e.checkpoint !== undefined) onCheckpoint(model, { ...e.checkpoint, at: e.at }, seq);
}

/**
 * A task as it starts an attempt at `now`: `running`, its attempt count `attempt`, its end, question and output of an
 * earlier attempt cleared, `workspace` as its attempt's worktree (recorded with its running state, before it is
 * created; absent: none). A new object; `current` is not changed.
 */
export function startedTask(
  current: TaskState,
  now: string,
  workspace: TaskWorkspace | undefined,
  attempt = current.attempts + 1,
): TaskState {
  const task: TaskState = { ...current, status: "running", attempts: attempt, startedAt: now };
  delete task.endedAt;
  delete task.question;
  delete task.output;
  if (workspace) task.workspace = workspace;
  else delete task.workspace;
  return task;
}

/**
 * A wave's starts (issue 34): each listed task becomes what a `task` event of its started state (`startedTask` at the
 * event's `at`) made it: counted as running, its completed result's input hash forgotten. A task id the state does not
 * have is added as a running task with no definition, as a `task` event of it added it, so that the whole-state check
 * (integrity.ts, guarantee 15) refuses the stream: the server never writes one.
 */
function onStarted(model: ProductModel, e: EventOf<"started">): void {
  const s = model.state;
  for (let k = 0; k < e.tasks.length; k++) {
    const entry = e.tasks[k] as (typeof e.tasks)[number];
    const i = model.index.get(entry.taskId);
    const old = i === undefined ? undefined : s.tasks[i];
    if (i === undefined || old === undefined) {
      const stray = {
        taskId: entry.taskId,
        title: entry.taskId,
        description: "",
        instanceId: "unplanned",
        dependsOn: [],
      };
      model.index.set(entry.taskId, s.tasks.length);
      s.tasks.push(startedTask({ ...stray, status: "pending", attempts: 0 }, e.at, entry.workspace, entry.attempt));
      model.counts.running++;
      continue;
    }
    model.counts[old.status]--;
    s.tasks[i] = startedTask(old, e.at, entry.workspace, entry.attempt);
    model.counts.running++;
    bindInput(s, entry.taskId, undefined);
  }
}

/** Adds an attempt's tokens to the product's usage (`estimated`: counted as an estimate too). */
function addUsage(s: ProductState, u: { inputTokens: number; outputTokens: number; estimated: boolean }): void {
  s.usage.inputTokens += u.inputTokens;
  s.usage.outputTokens += u.outputTokens;
  if (u.estimated) s.usage.estimatedTokens += u.inputTokens + u.outputTokens;
}

function onMutated(model: ProductModel, e: EventOf<"mutated">): void {
  const s = model.state;
  s.plan = e.plan;
  s.tasks = mergePlanTasks(e.plan, model);
  reindex(model);
  if (s.inputHashes) {
    for (const id of Object.keys(s.inputHashes)) if (!model.index.has(id)) delete s.inputHashes[id];
  }
}

function onCheckpoint(
  model: ProductModel,
  e: Pick<EventOf<"checkpoint">, "checkpointId" | "at" | "completed" | "total">,
  seq: number,
): void {
  const s = model.state;
  const ref: CheckpointRef = { checkpointId: e.checkpointId, at: e.at, seq, completed: e.completed, total: e.total };
  if (s.integration) {
    ref.integrationHead = s.integration.head;
    ref.merged = [...s.integration.merged];
  }
  s.checkpoints.push(ref);
  if (s.checkpoints.length > model.checkpointHistory) {
    s.checkpoints.splice(0, s.checkpoints.length - model.checkpointHistory);
  }
}

function onRestored(model: ProductModel, e: EventOf<"restored">): void {
  const s = model.state;
  if (e.plan) s.plan = e.plan;
  else delete s.plan;
  s.tasks = e.tasks;
  reindex(model);
  delete s.inputHashes;
  const h = e.inputHashes;
  for (const t of s.tasks) {
    if (t.status === "completed" && h && Object.hasOwn(h, t.taskId)) bindInput(s, t.taskId, h[t.taskId]);
  }
}

/** Merges a new plan's task definitions into existing task states, keeping run state of tasks that remain. */
function mergePlanTasks(plan: Plan, previous: ProductModel): TaskState[] {
  return plan.tasks.map((t) => {
    const i = previous.index.get(t.taskId);
    return plannedTaskState(t, i === undefined ? undefined : previous.state.tasks[i]);
  });
}

/**
 * The state of task `t` as a `mutated` event leaves it: `old`'s run state with `t`'s definition (the plan's
 * `acceptance` and `maxAttempts`, absent there, absent here), or pending with no attempt when it had no state
 * (`old` undefined). A new object. The dashboard's task history (ui/task-history.ts) follows mutations with it.
 */
export function plannedTaskState(t: Plan["tasks"][number], old: TaskState | undefined): TaskState {
  if (!old) return { ...t, dependsOn: [...t.dependsOn], status: "pending" as const, attempts: 0 };
  const merged: TaskState = { ...old, ...t, dependsOn: [...t.dependsOn] };
  if (t.acceptance === undefined) delete merged.acceptance;
  if (t.maxAttempts === undefined) delete merged.maxAttempts;
  return merged;
}

/**
 * Records (or, with `undefined`, forgets) the input hash of a task's completed result (guarantee 7). Only completed
 * tasks keep an entry; a completion recorded without a hash (older runs) has none and is trusted as it is.
 */
function bindInput(s: ProductState, taskId: string, hash: string | undefined): void {
  if (hash !== undefined) (s.inputHashes = taskRecord(s.inputHashes))[taskId] = hash;
  else if (s.inputHashes && Object.hasOwn(s.inputHashes, taskId))
    delete (s.inputHashes = taskRecord(s.inputHashes))[taskId];
}

/**
 * A per-task record of the state (`inputHashes`, `interruptedAttempts`) as an object without prototype, the given one
 * when it already is (else a copy of its own keys): there, assignment cannot reach `Object.prototype`'s `__proto__`
 * setter, so a task id `__proto__` stays an ordinary key, and V8 keeps such an object as a hash table, so adding and
 * deleting one key per task event is O(1) (issue 34: `Object.defineProperty` on a plain object, needed there for the
 * same key, made V8 rebuild the object's shape on every call: 10-50 ms per 1,000 tasks). A record read back from a
 * snapshot (JSON.parse, zod) is a plain object: it is copied once, on its first change. Its JSON text and its
 * own keys are the same either way.
 */
function taskRecord<V>(record: Record<string, V> | undefined): Record<string, V> {
  if (record !== undefined && Object.getPrototypeOf(record) === null) return record;
  const out = Object.create(null) as Record<string, V>;
  if (record !== undefined) for (const key of Object.keys(record)) out[key] = record[key] as V;
  return out;
}

/**
 * Adds budget on resume (DESIGN.md guarantee 9: "Resume may add budget"): limits grow by the given amounts on top of
 * what was already spent, so spent counters are kept. A limit that was unset stays unset unless given.
 */
function addBudget(
  s: ProductState,
  extra: { maxTotalTokens?: number; maxDurationMs?: number },
): ProductState["budget"] {
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

/** Adds `delta` interrupted attempts for a task (`0` resets its count, e.g. on replay). */
function countInterruption(s: ProductState, taskId: string, delta: number): void {
  const had = s.interruptedAttempts !== undefined && Object.hasOwn(s.interruptedAttempts, taskId);
  if (delta === 0 && !had && s.interruptedAttempts !== undefined) return;
  const counts = (s.interruptedAttempts = taskRecord(s.interruptedAttempts));
  const now = delta === 0 ? 0 : (had ? (counts[taskId] ?? 0) : 0) + delta;
  if (now !== 0) counts[taskId] = now;
  else if (had) delete counts[taskId];
}
