/**
 * The product's pure decisions (issue 27): `decide(model, input) → {events, effects}` says what to do next — what a
 * settled attempt becomes (completed, retried, failed for good, waiting, interrupted), which ready tasks start, when
 * the run ends and how, when a budget trips, which dependents a failure skips — and the small builders of the events
 * of pause, resume, cancel, replay and rollback. Events are what to record (evolve.ts gives them their meaning);
 * effects are what the orchestrator's collaborators carry out after the events were written (launch a worker,
 * consult the leader, pause, end the run, tell the client). Results of effects come back as inputs.
 *
 * Pure: no I/O, no clock, no ports. The time (`now`) and new ids come in with the input; nothing here keeps state.
 */
import type { Instance, Plan, TaskState, TaskWorkspace } from "../../../protocol/common.js";
import { downstreamOf } from "../dag/graph.js";
import type { RefusedPermission, WorkerResult } from "../ports.js";
import { endVerificationCause, verificationError, type Verdict } from "../workspace/verification.js";
import { startedTask } from "./evolve.js";
import type { ProductEvent, ProductState } from "./records.js";
import { attemptsUsed, type ProductModel } from "./state.js";
import { outcomeTasks, supersessions } from "./supersession.js";

/** Events as the orchestrator builds them: `v` and `at` are stamped on append (journal.ts). */
export type NewEvent = ProductEvent extends infer E ? (E extends ProductEvent ? Omit<E, "v" | "at"> : never) : never;

/** A recovery in plain words (guarantee 10), as `phase` events and `product.status` carry it. */
export interface Recovery {
  cause: string;
  resumable: boolean;
  remediation: string;
}

/** Why running workers are being stopped; decides what their tasks become. */
export type StopReason = "pause" | "cancel" | "shutdown" | "reset" | "fenced";

/** The interruption note a task gets when its worker is stopped, by reason. */
export const INTERRUPTION: Record<StopReason, string> = {
  pause: "The product was paused while this task was running; it will run again on resume.",
  cancel: "The product was cancelled while this task was running.",
  shutdown: "The server shut down while this task was running; it will run again on resume.",
  reset: "The task was reset while it was running.",
  fenced: "Another owner took over the product while this task was running.",
};

/** Rough token estimate when a worker reports no usage: 4 characters per token (issue 2, budgets). */
export const estimateTokens = (chars: number): number => Math.ceil(chars / 4);

/** What the orchestrator carries out after the events of a decision were written. */
export type Effect =
  | { kind: "launch"; task: TaskState }
  | { kind: "consult"; taskId: string }
  | { kind: "pause"; recovery: Recovery }
  | { kind: "finish"; phase: "completed" | "failed"; summary: string; recovery: Recovery | null }
  | { kind: "notify"; method: "product.budgetExceeded" | "product.budgetWarning"; reason: string }
  /** Guarantee 17: verify the attempt's merge candidate on the head as it is now, then settle the attempt again. */
  | { kind: "verify"; taskId: string }
  /** Guarantee 17, `when: "end"`: verify the final head (outside the exclusive section), then look again. */
  | { kind: "verifyHead" }
  /** The final head is red: ask the leader for a fix-up task with the failing check's output (`error`). */
  | { kind: "consultFinal"; error: string };

export interface Decision {
  events: NewEvent[];
  effects: Effect[];
}

/** One finished attempt of a task, as the worker pool hands it over (worker-pool.ts). */
export interface SettledAttempt {
  taskId: string;
  attempt: number;
  result: WorkerResult;
  briefChars: number;
  reportedUsage: boolean;
  inputHash: string;
  refusals: readonly RefusedPermission[];
  /** How many times this result was sent back to be verified on a newer head (guarantee 17). */
  verifyRounds?: number;
}

/** A result sent back this many times (the head kept moving under it) fails its attempt instead. */
export const MAX_VERIFY_ROUNDS = 8;

/** What integrating a completed attempt gave (workspace-coordinator.ts), when the product runs isolated. */
export interface IntegrationOutcome {
  ok: boolean;
  error?: string;
  /** Not the attempt's fault and not retryable (the branch was moved): the product pauses with `remediation`. */
  halt?: { remediation: string };
  workspace?: TaskWorkspace;
  events?: NewEvent[];
  /** Guarantee 17 (`when: "each"`): what is known of the merge candidate; absent when no verification applies. */
  verdict?: Verdict;
}

/** The inputs `decide` understands. */
export type Input =
  | {
      kind: "attemptSettled";
      attempt: SettledAttempt;
      integration?: IntegrationOutcome;
      now: string;
      /** True while this process drives the run; `stopReason` says why workers were stopped, if they were. */
      driving: boolean;
      stopReason: StopReason | null;
      defaultMaxAttempts: number;
      /** Completions already decided in this wave but not written yet (for the automatic checkpoint's count). */
      completedUnwritten: number;
      checkpointId: () => string;
    }
  | { kind: "start"; ready: readonly { task: TaskState; workspace?: TaskWorkspace }[]; now: string }
  | { kind: "quiescent" }
  /** Guarantee 17, `when: "end"`: the verdict of the final head; `fixupAsked`: the leader was asked once already. */
  | { kind: "finalVerdict"; verdict: Verdict; tree: string | undefined; fixupAsked: boolean }
  | { kind: "budget"; elapsedMs: number; warningRatio: number }
  | { kind: "failedForGood"; taskId: string };

/**
 * What to do about `input` given the product's current model. Never throws, never changes the model: the caller
 * appends `events` (evolve.ts applies them) and then carries out `effects` in order.
 */
export function decide(model: ProductModel, input: Input): Decision {
  switch (input.kind) {
    case "attemptSettled":
      return settleDecision(model, input);
    case "start":
      return startDecision(input.ready, input.now);
    case "quiescent":
      return finishDecision(model);
    case "finalVerdict":
      return finalVerdictDecision(input);
    case "budget":
      return budgetDecision(model.state, input.elapsedMs, input.warningRatio);
    case "failedForGood":
      return { events: skipEvents(model, input.taskId).events, effects: [] };
  }
}

function settleDecision(model: ProductModel, input: Extract<Input, { kind: "attemptSettled" }>): Decision {
  const current = taskOf(model, input.attempt.taskId);
  if (!current) return { events: [], effects: [] };
  const a = input.attempt;
  const task: TaskState = { ...current, endedAt: input.now };
  let res = a.result;
  const integration = input.integration;
  const verdict = integration?.verdict;
  if (verdict?.state === "unverified") {
    // Guarantee 17: nothing moves on an unverified candidate. Driving: verify it on the head as it is now and settle
    // again (nothing recorded now, the task stays running); stopped: the attempt was interrupted and runs again.
    const rounds = a.verifyRounds ?? 0;
    if (input.driving && input.stopReason === null && rounds < MAX_VERIFY_ROUNDS)
      return { events: [], effects: [{ kind: "verify", taskId: a.taskId }] };
    if (rounds < MAX_VERIFY_ROUNDS) res = { outcome: "cancelled" };
  }
  if (integration) {
    if (integration.workspace) task.workspace = integration.workspace;
    if (!integration.ok && res.outcome === "completed") {
      const error = verdictError(verdict) ?? integration.error ?? "The task's result was not integrated.";
      // Not the attempt's fault (the branch was moved): no attempt spent, the product pauses (guarantee 16).
      res = integration.halt
        ? { outcome: "failed", kind: "configuration", error, ...integration.halt }
        : { outcome: "failed", error };
    }
  }
  const effects = settleStatus(model.state, task, res, input);
  if (a.refusals.length > 0) {
    // Kept on the task across attempts (PROTOCOL.md section 5, TaskState.refusedPermissions), the newest 50.
    task.refusedPermissions = [...(current.refusedPermissions ?? []), ...a.refusals].slice(-50);
  }
  const events: NewEvent[] = [...(res.outcome === "completed" && integration?.ok ? (integration.events ?? []) : [])];
  const event: SettledTaskEvent = { type: "task", task };
  if (task.status === "completed") event.inputHash = a.inputHash;
  // An attempt that never sent a prompt consumed nothing: it is not charged, not even by estimate.
  const prompted = !((res.outcome === "failed" || res.outcome === "cancelled") && res.prompted === false);
  if (!a.reportedUsage && prompted) {
    const outputChars = res.outcome === "completed" ? res.output.length : 0;
    event.usage = {
      inputTokens: estimateTokens(a.briefChars),
      outputTokens: estimateTokens(outputChars),
      estimated: true,
    };
  }
  if (task.status === "completed") {
    const done = model.counts.completed + input.completedUnwritten + 1;
    const total = model.state.tasks.length;
    event.checkpoint = { checkpointId: input.checkpointId(), completed: Math.min(done, total), total };
  }
  // One event per settled attempt: its usage estimate and automatic checkpoint ride on it (issue 34; records.ts).
  events.push(event);
  return { events, effects };
}

/** The `task` event of a settled attempt, as `settleDecision` builds it. */
type SettledTaskEvent = Extract<NewEvent, { type: "task" }>;

/**
 * Guarantee 17: the error of an attempt whose candidate is not green — a red check names itself, its exit code and
 * its output tail (the retry's brief and the leader's consultation get it); `undefined` for a green candidate.
 */
function verdictError(verdict: Verdict | undefined): string | undefined {
  if (!verdict) return undefined;
  if (verdict.state === "red") return verificationError(verdict.entry);
  if (verdict.state === "broken") return verdict.error;
  if (verdict.state === "unverified")
    return "The merge candidate could not be verified: the integration head kept moving while its checks ran.";
  return undefined;
}

/**
 * Guarantee 17, `when: "end"`: green lets the run finish; unverified asks for the head's checks; red asks the leader
 * for a fix-up once (with the failing check's output), then fails the product with a recovery naming the check.
 */
function finalVerdictDecision(input: Extract<Input, { kind: "finalVerdict" }>): Decision {
  const v = input.verdict;
  if (v.state === "green") return { events: [], effects: [] };
  if (v.state === "unverified") return { events: [], effects: [{ kind: "verifyHead" }] };
  const error = v.state === "red" ? verificationError(v.entry) : v.error;
  if (!input.fixupAsked && input.tree !== undefined) {
    return {
      events: [{ type: "verifyFixup", tree: input.tree }],
      effects: [{ kind: "consultFinal", error: error.replace("on the merge candidate", "on the final head") }],
    };
  }
  const cause = v.state === "red" ? endVerificationCause(v.entry) : v.error;
  const summary = `${cause} Every task completed, but the final head is not green.`;
  return {
    events: [],
    effects: [
      {
        kind: "finish",
        phase: "failed",
        summary,
        recovery: {
          cause,
          resumable: false,
          remediation:
            "Fix the failing check on the integration branch (replay a task, or mutate the plan with a fix-up task and replay it), or roll back with product.rollback.",
        },
      },
    ],
  };
}

/** Sets the settled task's status from the attempt's result (in place); returns the effects it calls for. */
function settleStatus(
  state: ProductState,
  task: TaskState,
  res: WorkerResult,
  input: Extract<Input, { kind: "attemptSettled" }>,
): Effect[] {
  if (res.outcome === "completed") {
    task.status = "completed";
    task.output = res.output;
    delete task.error;
    delete task.interruption;
    return [];
  }
  if (res.outcome === "waiting") {
    task.status = "waiting";
    task.question = res.question;
    return [];
  }
  if (res.outcome === "cancelled" || (!input.driving && input.stopReason !== null)) {
    // A worker stopped by pause/cancel/shutdown may report cancelled or failed; both mean "interrupted".
    // A cancelled product stays cancelled (guarantee 5): whatever stopped its worker afterwards (the server's shutdown
    // once `cancel` was answered), its task is cancelled too, never left pending for a resume that cannot come.
    const reason = state.phase === "cancelled" ? "cancel" : (input.stopReason ?? "pause");
    if (reason === "cancel") task.status = "cancelled";
    else {
      task.status = "pending";
      task.interruption = INTERRUPTION[reason];
    }
    return [];
  }
  if (res.outcome === "failed" && res.kind === "configuration") {
    // Retrying cannot fix a configuration error (DESIGN.md "Processes"): the task waits, the product pauses with the
    // fix, no retry is spent and the leader is not consulted (no fix-up task on the same broken agent).
    task.status = "pending";
    task.error = res.error;
    task.interruption = `The attempt could not start: ${res.error}`;
    const remediation = res.remediation ?? "Fix the agent configuration, then call product.resume.";
    return [{ kind: "pause", recovery: { cause: res.error, resumable: true, remediation } }];
  }
  task.error = res.outcome === "failed" ? res.error : "The worker stopped.";
  // A failed attempt is not an interruption: an interruption note left by an earlier attempt (e.g. a configuration
  // error) would make this failure count as interrupted and never use up a retry.
  delete task.interruption;
  const max = task.maxAttempts ?? input.defaultMaxAttempts;
  // A refusal by the permission policy would only be refused again: no retry under the same policy.
  const retryable = !(res.outcome === "failed" && res.kind === "permission");
  // Interrupted attempts (pause, shutdown, crash) do not use up retries: only failed ones count.
  if (retryable && attemptsUsed(state, task) < max && input.driving) {
    task.status = "pending";
    return [];
  }
  task.status = "failed";
  return [{ kind: "consult", taskId: task.taskId }];
}

/**
 * A wave's starts: one `started` event for all of them (issue 34: it was one `task` event per started task; evolve.ts
 * gives the state the same started tasks) and a `launch` per task, with its started state as of `now`.
 */
function startDecision(ready: readonly { task: TaskState; workspace?: TaskWorkspace }[], now: string): Decision {
  if (ready.length === 0) return { events: [], effects: [] };
  const entries: Extract<NewEvent, { type: "started" }>["tasks"] = [];
  const effects: Effect[] = [];
  for (let i = 0; i < ready.length; i++) {
    const r = ready[i] as (typeof ready)[number];
    const task = startedTask(r.task, now, r.workspace);
    entries.push(
      r.workspace
        ? { taskId: task.taskId, attempt: task.attempts, workspace: r.workspace }
        : { taskId: task.taskId, attempt: task.attempts },
    );
    effects.push({ kind: "launch", task });
  }
  return { events: [{ type: "started", tasks: entries }], effects };
}

/**
 * Ends the product when nothing is left to run: completed if every task completed, else failed (guarantee 8). A
 * failed task replaced by a fix-up (supersession.ts, issue 28) is not counted: its fix-up is.
 */
function finishDecision(model: ProductModel): Decision {
  const counts = model.counts;
  if (counts.pending > 0 || counts.running > 0 || counts.waiting > 0) return { events: [], effects: [] };
  const tasks = outcomeTasks(model.state.tasks);
  const failed = tasks.filter((t) => t.status !== "completed");
  const phase = failed.length === 0 ? "completed" : "failed";
  const replaced = [...supersessions(model.state.tasks)].map(([id, by]) => `${id} superseded by ${by}`);
  const summary =
    phase === "completed"
      ? `All ${tasks.length} tasks completed${replaced.length > 0 ? ` (${replaced.join(", ")})` : ""}.`
      : `${tasks.length - failed.length} of ${tasks.length} tasks completed; ${failed
          .map((t) => `${t.taskId} ${t.status}`)
          .join(", ")}.`;
  const recovery =
    phase === "failed"
      ? {
          cause: summary,
          resumable: false,
          remediation:
            "Replay a failed task with product.replayTask, roll back with product.rollback, or mutate the plan and replay.",
        }
      : null;
  return { events: [], effects: [{ kind: "finish", phase, summary, recovery }] };
}

/** The events that record the end of a run (after the integration's end events and the elapsed time). */
export function finishEvents(
  effect: Extract<Effect, { kind: "finish" }>,
  ended: readonly NewEvent[],
  elapsedMs: number,
): NewEvent[] {
  return [
    ...ended,
    { type: "elapsed", elapsedMs },
    { type: "phase", phase: effect.phase, recovery: effect.recovery },
    { type: "dialogue", role: "leader", text: effect.summary, outcome: true },
  ];
}

/**
 * Budget check (guarantee 9): one warning at `warningRatio` of a limit, and on exceed the product pauses (not fails)
 * and the client is told which limit tripped. `elapsedMs`: the run's live elapsed time.
 */
function budgetDecision(s: ProductState, elapsedMs: number, warningRatio: number): Decision {
  const used = s.usage.inputTokens + s.usage.outputTokens;
  const maxTokens = s.budget.maxTotalTokens;
  const maxMs = s.budget.maxDurationMs;
  let exceeded: string | null = null;
  if (maxTokens !== undefined && used >= maxTokens) {
    exceeded = `The token budget is spent: ${used} of ${maxTokens} tokens used.`;
  } else if (maxMs !== undefined && elapsedMs >= maxMs) {
    exceeded = `The time budget is spent: ${elapsedMs} ms of ${maxMs} ms elapsed.`;
  }
  if (exceeded) {
    const remediation = "Call product.resume with additionalBudget to continue; work done so far is kept.";
    return {
      events: [],
      effects: [
        { kind: "pause", recovery: { cause: exceeded, resumable: true, remediation } },
        { kind: "notify", method: "product.budgetExceeded", reason: exceeded },
      ],
    };
  }
  if (s.budgetWarned) return { events: [], effects: [] };
  let reason: string | null = null;
  if (maxTokens !== undefined && used >= warningRatio * maxTokens) {
    reason = `${Math.round((used / maxTokens) * 100)} % of the token budget is used (${used} of ${maxTokens}).`;
  } else if (maxMs !== undefined && elapsedMs >= warningRatio * maxMs) {
    reason = `${Math.round((elapsedMs / maxMs) * 100)} % of the time budget is used (${elapsedMs} of ${maxMs} ms).`;
  }
  if (!reason) return { events: [], effects: [] };
  return {
    events: [{ type: "budgetWarned", reason }],
    effects: [{ kind: "notify", method: "product.budgetWarning", reason }],
  };
}

/** Every pending or waiting transitive dependent of a finally failed task, marked `skipped`. */
export function skipEvents(model: ProductModel, taskId: string): { events: NewEvent[]; skipped: TaskState[] } {
  const ids = downstreamOf(model.state.tasks, taskId).filter((id) => id !== taskId);
  const events: NewEvent[] = [];
  const skipped: TaskState[] = [];
  for (const id of ids) {
    const t = taskOf(model, id);
    if (!t || (t.status !== "pending" && t.status !== "waiting")) continue;
    const task: TaskState = { ...t, status: "skipped", error: `Skipped because task ${taskId} failed.` };
    events.push({ type: "task", task });
    skipped.push(task);
  }
  return { events, skipped };
}

/**
 * `product.cancel`: every unfinished task cancelled (a running one only when its worker does not run in this
 * process: a worker that runs reports its own end), then the phase.
 */
export function cancelEvents(s: ProductState, elapsedMs: number, runsHere: (taskId: string) => boolean): NewEvent[] {
  const events: NewEvent[] = [{ type: "elapsed", elapsedMs }];
  for (const t of s.tasks) {
    if (t.status === "pending" || t.status === "waiting" || (t.status === "running" && !runsHere(t.taskId))) {
      events.push({ type: "task", task: { ...t, status: "cancelled" } });
    }
  }
  events.push({ type: "phase", phase: "cancelled", recovery: null });
  return events;
}

/**
 * Resume (guarantee 7): tasks recorded as running whose worker does not run in this process go back to pending with
 * an interruption note, their attempt counted. Returns the changed task states keyed by id.
 */
export function interruptedTasks(s: ProductState, runsHere: (taskId: string) => boolean): Map<string, TaskState> {
  const changed = new Map<string, TaskState>();
  for (const t of s.tasks) {
    if (t.status === "running" && !runsHere(t.taskId)) {
      changed.set(t.taskId, { ...t, status: "pending", interruption: t.interruption ?? INTERRUPTION.shutdown });
    }
  }
  return changed;
}

/** `product.replayTask`: the task and everything downstream of it back to pending with no attempts. */
export function replayEvents(model: ProductModel, taskId: string): { ids: string[]; events: NewEvent[] } {
  const ids = downstreamOf(model.state.tasks, taskId);
  const events: NewEvent[] = [];
  for (const id of ids) {
    const t = taskOf(model, id);
    if (!t) continue;
    const fresh: TaskState = { ...t, status: "pending", attempts: 0 };
    for (const k of ["output", "error", "startedAt", "endedAt", "question", "interruption", "workspace"] as const)
      delete fresh[k];
    events.push({ type: "task", task: fresh });
  }
  return { ids, events };
}

/** Rollback: the tasks of a checkpoint's state, those that were running then made pending again. */
export function restoredTasks(tasks: readonly TaskState[]): TaskState[] {
  return tasks.map((t) =>
    t.status === "running" ? { ...t, status: "pending" as const, interruption: INTERRUPTION.reset } : t,
  );
}

/** Guarantee 8: a waiting task answered by the user's message becomes runnable again with the answer. */
export function answeredTask(waiting: TaskState, content: string): TaskState {
  const task: TaskState = {
    ...waiting,
    status: "pending",
    description: `${waiting.description}\n\nAnswer to "${waiting.question ?? ""}": ${content}`,
  };
  delete task.question;
  return task;
}

/** The task with id `taskId` in the model, if any. */
export function taskOf(model: ProductModel, taskId: string): TaskState | undefined {
  const i = model.index.get(taskId);
  return i === undefined ? undefined : model.state.tasks[i];
}

/** Each plan's instances by id, built on first use (plans are values, never changed in place; fingerprint.ts relies on it too). */
const INSTANCES = new WeakMap<Plan, Map<string, Instance>>();

/**
 * The instance `instanceId` of `plan` (the first one with that id, as `Array.find` gives it), `undefined` when it has
 * none. O(1) after the first call per plan (issue 34: a launch looked it up in the list, 100 instances per task).
 */
export function instanceOf(plan: Plan, instanceId: string): Instance | undefined {
  let byId = INSTANCES.get(plan);
  if (byId === undefined) {
    byId = new Map();
    for (const i of plan.instances) if (!byId.has(i.instanceId)) byId.set(i.instanceId, i);
    INSTANCES.set(plan, byId);
  }
  return byId.get(instanceId);
}
