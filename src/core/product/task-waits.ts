/**
 * What each task of `product.status` is waiting for (issue 28): a pending task says `waitingFor` — its
 * `dependencies`, a `seat` (its instance or the product's `maxParallelTasks` is taken), the `budget` (the product
 * paused on a spent budget), the `leader` (a consultation or message turn is running), or the `workspace` (a
 * dependency's result is not integrated yet) — and a running task whose provider is overloaded says `waiting`
 * ("waiting: provider overloaded, retry in 20 s"). Pure: reads the state it is given, never the clock but `nowMs`.
 */
import type { TaskState } from "../../../protocol/common.js";
import type { Clock, Notifier } from "../ports.js";
import type { ProductState } from "./records.js";

/** Why a pending task has not started (PROTOCOL.md section 5, `TaskState.waitingFor`). */
export type WaitingFor = "dependencies" | "seat" | "budget" | "leader" | "workspace";

/** A worker waiting for an overloaded provider: the reason in words (`provider overloaded`) and when it retries. */
export interface OverloadWait {
  reason: string;
  retryAtMs: number;
}

/** "waiting: provider overloaded, retry in 20 s": the note of an overloaded task (`seconds` whole). Pure. */
export function overloadWaitNote(reason: string, seconds: number): string {
  return `waiting: ${reason}, retry in ${seconds} s`;
}

/** What the status needs to know beyond the state: in-memory facts of the process driving the product. */
export interface WaitFacts {
  /** True while a leader turn (consultation, message) runs. */
  leaderBusy: boolean;
  /** Running tasks whose worker waits for an overloaded provider: taskId → why and when it retries (epoch ms). */
  overloaded: ReadonlyMap<string, OverloadWait>;
  nowMs: number;
}

/**
 * The tasks of `state` as `product.status` shows them: pending tasks of an executing or paused product with
 * `waitingFor`, overloaded running tasks with `waiting` (the seconds counted down to `nowMs`); every other task as
 * stored. Returns new objects only for the tasks it annotates. Pure.
 */
export function tasksWithWaits(state: ProductState, facts: WaitFacts): TaskState[] {
  if (state.phase !== "executing" && state.phase !== "paused") return state.tasks;
  const byId = new Map(state.tasks.map((t) => [t.taskId, t]));
  const budgetSpent = state.phase === "paused" && /budget is spent/u.test(state.recovery?.cause ?? "");
  return state.tasks.map((t) => {
    if (t.status === "running") {
      const note = facts.overloaded.get(t.taskId);
      if (note === undefined) return t;
      const seconds = Math.max(0, Math.round((note.retryAtMs - facts.nowMs) / 1_000));
      return { ...t, waiting: overloadWaitNote(note.reason, seconds) };
    }
    if (t.status !== "pending") return t;
    const deps = t.dependsOn.map((d) => byId.get(d));
    let waitingFor: WaitingFor;
    if (deps.some((d) => d !== undefined && d.status !== "completed")) waitingFor = "dependencies";
    else if (state.phase === "paused") {
      // A run paused for another reason waits for product.resume, which its recovery says.
      if (!budgetSpent) return t;
      waitingFor = "budget";
    } else if (facts.leaderBusy) waitingFor = "leader";
    else if (state.isolation === "worktree" && deps.some((d) => d?.workspace !== undefined && !integrated(state, d)))
      waitingFor = "workspace";
    else waitingFor = "seat";
    return { ...t, waitingFor };
  });
}

/** True when `task`'s result is on the product's integration branch. */
function integrated(state: ProductState, task: TaskState): boolean {
  return state.integration?.merged.includes(task.taskId) === true;
}

/**
 * Records on the running `entry` that its worker waits for an overloaded provider and announces it
 * (`product.taskOverloaded`); `product.status` then shows the task's `waiting` note until the worker speaks again.
 */
export function noteOverload(
  ctx: { notifier: Notifier; clock: Clock },
  productId: string,
  task: TaskState,
  entry: { attempt: number; overloaded?: OverloadWait },
  wait: { message: string; reason: string; retryInMs: number; retry: number },
): void {
  entry.overloaded = { reason: wait.reason, retryAtMs: ctx.clock.now() + wait.retryInMs };
  ctx.notifier.notify("product.taskOverloaded", {
    productId,
    taskId: task.taskId,
    attempt: entry.attempt,
    retry: wait.retry,
    retryInMs: Math.max(0, Math.round(wait.retryInMs)),
    message: wait.message,
  });
}
