/**
 * A product's history as the dashboard shows it (issue 29, "Dashboard views"), rebuilt from its stored events (each
 * `task` event carries the task's whole state at that moment, a `started` event the attempts a wave started): a task's attempt history (agent, times, outcome,
 * output, commit), and the timeline (a Gantt row per instance seat: each attempt's running span and the spans a task
 * spent waiting for an answer). A replay restarts attempt numbers; its attempts are listed after the earlier ones.
 * Events removed by compaction are not shown (the attempt history then starts later).
 *
 * Reads only (guarantee 3).
 */
import type { Plan, TaskState } from "../../protocol/common.js";
import { plannedTaskState, startedTask } from "../core/product/evolve.js";
import type { RunStateReader } from "../operator/run-state-reader.js";

/** The longest output tail one attempt carries, characters. */
export const ATTEMPT_OUTPUT_CHARS = 2_000;

export interface AttemptView {
  attempt: number;
  agent: string;
  instanceId: string;
  status: string;
  startedAt?: string;
  endedAt?: string;
  error?: string;
  commit?: string;
  outputTail: string;
  outputLength: number;
}

export interface TimelineBar {
  taskId: string;
  attempt: number;
  /** `run`: the attempt ran; `wait`: the task waited for an answer. */
  kind: "run" | "wait";
  from: string;
  /** Absent while it still runs or waits. */
  to?: string;
  /** The task's status when the span ended (or now). */
  status: string;
}

export interface TimelineView {
  /** The first and the last instant of the product's events (the right edge of open spans is `now`). */
  start?: string;
  now: string;
  seats: { instanceId: string; agent: string; bars: TimelineBar[] }[];
}

type PlannedTask = Omit<TaskState, "status" | "attempts">;

/**
 * Every task state a product's stored events recorded, oldest first, with its instant: each `task` event's, and each
 * task of a `started` event (issue 34: one event for a wave's starts) as evolve.ts gives it (`startedTask` of the task
 * as the events before it left it, or as the plan defines it when no earlier state of it is stored).
 */
async function taskEvents(
  reader: RunStateReader,
  productId: string,
  planned: ReadonlyMap<string, PlannedTask>,
): Promise<{ at: string; task: TaskState }[]> {
  const out: { at: string; task: TaskState }[] = [];
  const last = new Map<string, TaskState>();
  let definitions: ReadonlyMap<string, PlannedTask> = planned;
  for (let after = 0; ; ) {
    const page = await reader.productEvents(productId, after, 1000);
    for (const row of page) {
      const e = row.event;
      if (e?.type === "task") {
        last.set(e.task.taskId, e.task as TaskState);
        out.push({ at: e.at, task: e.task as TaskState });
      } else if (e?.type === "started") {
        for (const entry of e.tasks) {
          const before = last.get(entry.taskId) ?? initialState(entry.taskId, definitions);
          const task = startedTask(before, e.at, entry.workspace as TaskState["workspace"], entry.attempt);
          last.set(entry.taskId, task);
          out.push({ at: e.at, task });
        }
      } else if (e?.type === "confirmed" || e?.type === "mutated" || e?.type === "restored") {
        // A later start expands from the task as these left it (its instance, definition), as evolve.ts does.
        definitions = followPlan(e as PlanEvent, last, definitions);
      }
    }
    if (page.length < 1000) return out;
    after = page[page.length - 1]?.seq ?? after;
  }
}

interface PlanEvent {
  type: "confirmed" | "mutated" | "restored";
  plan?: { tasks: PlannedTask[] };
  tasks?: TaskState[];
}

/**
 * Brings `last` (each task's latest state) in step with a plan event as evolve.ts does: a confirmed plan starts every
 * task afresh, a mutation gives each remaining task its new definition (a removed one is forgotten), a rollback
 * restores the checkpoint's task states. Returns the task definitions from then on.
 */
function followPlan(
  e: PlanEvent,
  last: Map<string, TaskState>,
  definitions: ReadonlyMap<string, PlannedTask>,
): ReadonlyMap<string, PlannedTask> {
  const next = e.plan ? new Map(e.plan.tasks.map((t) => [t.taskId, t])) : definitions;
  if (e.type === "restored") {
    last.clear();
    for (const t of e.tasks ?? []) last.set(t.taskId, t);
  } else if (e.type === "confirmed") last.clear();
  else {
    for (const id of [...last.keys()]) {
      const t = next.get(id);
      const old = last.get(id);
      if (t === undefined) last.delete(id);
      else last.set(id, plannedTaskState(t as Plan["tasks"][number], old));
    }
  }
  return next;
}

/** A task that has no stored state yet: pending, as the plan defines it (its id alone when the plan does not). */
function initialState(taskId: string, planned: ReadonlyMap<string, PlannedTask>): TaskState {
  const t = planned.get(taskId);
  return t
    ? { ...t, status: "pending", attempts: 0 }
    : { taskId, title: taskId, description: "", dependsOn: [], instanceId: "", status: "pending", attempts: 0 };
}

/** The product's plan as its status has it: each instance's agent, and each task's definition. */
async function planOf(
  reader: RunStateReader,
  productId: string,
): Promise<{ agents: Map<string, string>; planned: Map<string, PlannedTask> }> {
  const status = await reader.productStatus(productId);
  const plan = status.plan as
    | { instances?: { instanceId: string; agentId: string }[]; tasks?: PlannedTask[] }
    | undefined;
  return {
    agents: new Map((plan?.instances ?? []).map((i) => [i.instanceId, i.agentId])),
    planned: new Map((plan?.tasks ?? []).map((t) => [t.taskId, t])),
  };
}

/** Task `taskId`'s attempts, oldest first. Throws not_found for an unknown product. */
export async function attemptHistory(
  reader: RunStateReader,
  productId: string,
  taskId: string,
): Promise<AttemptView[]> {
  const { agents, planned } = await planOf(reader, productId);
  const attempts: AttemptView[] = [];
  let last = 0;
  for (const { task } of await taskEvents(reader, productId, planned)) {
    if (task.taskId !== taskId) continue;
    if (task.attempts === 0) {
      last = 0; // reset (a replay): the next attempt is a new entry even with an earlier number
      continue;
    }
    const output = task.output ?? "";
    const view: AttemptView = {
      attempt: task.attempts,
      agent: agents.get(task.instanceId) ?? task.instanceId,
      instanceId: task.instanceId,
      status: task.status,
      ...(task.startedAt ? { startedAt: task.startedAt } : {}),
      ...(task.endedAt ? { endedAt: task.endedAt } : {}),
      ...(task.error ? { error: task.error } : {}),
      ...(task.workspace?.commit ? { commit: task.workspace.commit } : {}),
      outputTail: output.length > ATTEMPT_OUTPUT_CHARS ? output.slice(-ATTEMPT_OUTPUT_CHARS) : output,
      outputLength: output.length,
    };
    // The same attempt again (a later state of it) replaces it; a new number (or a replay's restart) is a new one.
    if (task.attempts === last && attempts.length > 0) attempts[attempts.length - 1] = view;
    else attempts.push(view);
    last = task.attempts;
  }
  return attempts;
}

/** The Gantt rows of a product (see the header). `now` closes nothing: open spans have no `to`. */
export async function timeline(reader: RunStateReader, productId: string, now: number): Promise<TimelineView> {
  const { agents, planned } = await planOf(reader, productId);
  const seats = new Map<string, TimelineBar[]>();
  const open = new Map<string, TimelineBar>();
  const events = await taskEvents(reader, productId, planned);
  for (const { at, task } of events) {
    const current = open.get(task.taskId);
    const kind = task.status === "running" ? "run" : task.status === "waiting" ? "wait" : undefined;
    if (current && (current.kind !== kind || current.attempt !== task.attempts)) {
      current.to = task.endedAt && current.kind === "run" ? task.endedAt : at;
      current.status = task.status;
      open.delete(task.taskId);
    }
    if (kind && !open.has(task.taskId)) {
      const bar: TimelineBar = {
        taskId: task.taskId,
        attempt: task.attempts,
        kind,
        from: kind === "run" && task.startedAt ? task.startedAt : at,
        status: task.status,
      };
      open.set(task.taskId, bar);
      const row = seats.get(task.instanceId) ?? [];
      row.push(bar);
      seats.set(task.instanceId, row);
    }
  }
  return {
    ...(events[0] ? { start: events[0].at } : {}),
    now: new Date(now).toISOString(),
    seats: [...seats].map(([instanceId, bars]) => ({ instanceId, agent: agents.get(instanceId) ?? instanceId, bars })),
  };
}
