/**
 * Validates and applies a batch of DAG mutations to a plan, all or nothing (DESIGN.md, Execution model).
 *
 * Owns the mutation rules: unknown task/instance ids, duplicate ids, cycles, removing a task that is still depended
 * on, and touching a task that is running, waiting or completed. Pure: it never modifies the plan or states it is
 * given, never persists, never announces; the orchestrator does that with the result.
 */
import { Mutation as MutationSchema } from "../../../protocol/common.js";
import type { Mutation, Plan, Task, TaskState, TaskStatus } from "../../../protocol/common.js";

/** Task statuses as `applyMutations` reads them: a map by task id, or a list of task states. */
export type TaskStatuses =
  | ReadonlyMap<string, Pick<TaskState, "status">>
  | readonly Pick<TaskState, "taskId" | "status">[];

/**
 * The outcome of `applyMutations`. On success `plan` is a new plan with `version + 1`; `added` holds the added tasks
 * in their final form (after later mutations of the same batch), `removed` the ids of pre-existing tasks that were
 * removed, `changed` the ids of pre-existing tasks that were modified and kept (in plan order). A task added and
 * removed within the same batch appears in neither list. On failure `index` is the 0-based index of the first
 * offending mutation and `reason` one sentence naming the task.
 */
export type MutationOutcome =
  | { ok: true; plan: Plan; added: Task[]; removed: string[]; changed: string[] }
  | { ok: false; index: number; reason: string };

/**
 * Statuses in which a task is locked against mutation as the dependent side: it has started (or finished), so its
 * definition is part of history. `waiting` counts as started: its worker holds a pending question and the task must
 * stay resumable as it is (DESIGN.md guarantee 8).
 */
const LOCKED: ReadonlySet<TaskStatus> = new Set<TaskStatus>(["running", "waiting", "completed"]);

/** One task of the working copy; `dependsOn` is owned by the copy and safe to change. */
interface WorkingTask {
  task: Task;
  status: TaskStatus;
  /** True for tasks of the original plan (false for tasks added in this batch). */
  original: boolean;
  touched: boolean;
}

/**
 * Validates `mutations` in order against a working copy of `plan` and, if every one is valid, returns the new plan.
 *
 * A later mutation sees the effect of earlier ones (it may refer to a task added earlier in the batch, or remove a
 * task whose dependents were removed or re-pointed earlier). A task absent from `states` counts as `pending` (a plan
 * awaiting confirmation has no states yet). Rejects: a mutation that does not parse; an unknown task, dependency or
 * instance id; `addTask` with an id that exists or was removed earlier in the batch; a self-dependency, a repeated
 * dependency or a dependency that closes a cycle; `removeDependency` of an edge that does not exist; removing a task
 * other tasks still depend on; `removeTask`, `updateTask`, `reassign`, `addDependency`/`removeDependency` on a task
 * (as the dependent) that is running, waiting or completed. Depending ON a completed task is fine. An empty batch is
 * rejected. O(V+E) to copy, plus O(V+E) per dependency added (cycle search); mutations are rare.
 * Never throws for invalid input, and never modifies `plan`, its tasks or `states`.
 */
export function applyMutations(plan: Plan, states: TaskStatuses, mutations: readonly Mutation[]): MutationOutcome {
  if (mutations.length === 0) return { ok: false, index: 0, reason: "The batch contains no mutations." };
  const b = workingCopy(plan, states);
  for (const [index, raw] of mutations.entries()) {
    const parsed = MutationSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue && issue.path.length > 0 ? ` at ${issue.path.join(".")}` : "";
      return fail(index, `The mutation is malformed${where}: ${issue?.message ?? "it does not match the schema"}.`);
    }
    const m = parsed.data;
    const reason = (OPS[m.op] as (b: Batch, m: Mutation) => string | undefined)(b, m);
    if (reason !== undefined) return fail(index, reason);
  }
  const tasks: Task[] = [];
  const added: Task[] = [];
  const changed: string[] = [];
  for (const entry of b.working.values()) {
    tasks.push(entry.task);
    if (!entry.original) added.push(entry.task);
    else if (entry.touched) changed.push(entry.task.taskId);
  }
  return {
    ok: true,
    plan: { ...plan, version: plan.version + 1, instances: plan.instances.map((i) => ({ ...i })), tasks },
    added,
    removed: b.removedOriginals,
    changed,
  };
}

/** The working copy a batch is applied to: tasks by id, who depends on whom, and what the batch removed. */
interface Batch {
  working: Map<string, WorkingTask>;
  /** dependents.get(x) = ids of tasks whose dependsOn contains x. */
  dependents: Map<string, Set<string>>;
  instanceIds: ReadonlySet<string>;
  removedInBatch: Set<string>;
  removedOriginals: string[];
}

/** A working copy of `plan` (its tasks' `dependsOn` owned by the copy); a task absent from `states` is pending. */
function workingCopy(plan: Plan, states: TaskStatuses): Batch {
  const statusOf = statusLookup(states);
  const working = new Map<string, WorkingTask>();
  for (const task of plan.tasks) {
    working.set(task.taskId, {
      task: { ...task, dependsOn: [...task.dependsOn] },
      status: statusOf(task.taskId) ?? "pending",
      original: true,
      touched: false,
    });
  }
  const dependents = new Map<string, Set<string>>();
  for (const { task } of working.values()) {
    for (const dep of task.dependsOn) dependentSet(dependents, dep).add(task.taskId);
  }
  const instanceIds = new Set(plan.instances.map((i) => i.instanceId));
  return { working, dependents, instanceIds, removedInBatch: new Set(), removedOriginals: [] };
}

type MutationOf<K extends Mutation["op"]> = Extract<Mutation, { op: K }>;

/** One rule per mutation op: applies it to the batch, or returns why it is rejected (one sentence). */
const OPS: { [K in Mutation["op"]]: (b: Batch, m: MutationOf<K>) => string | undefined } = {
  addTask: (b, m) => {
    const { task } = m;
    if (b.working.has(task.taskId)) return `Task ${task.taskId} already exists.`;
    if (b.removedInBatch.has(task.taskId)) {
      return `Task ${task.taskId} was removed earlier in this batch; give the new task another id.`;
    }
    if (!b.instanceIds.has(task.instanceId)) {
      return `Task ${task.taskId} is assigned to unknown instance ${task.instanceId}.`;
    }
    if (task.supersedes !== undefined && b.working.get(task.supersedes)?.status !== "failed") {
      return `Task ${task.taskId} supersedes ${task.supersedes}, which is not a failed task of the plan.`;
    }
    const seen = new Set<string>();
    for (const dep of task.dependsOn) {
      if (dep === task.taskId) return `Task ${task.taskId} cannot depend on itself.`;
      if (!b.working.has(dep)) return `Task ${task.taskId} depends on unknown task ${dep}.`;
      if (seen.has(dep)) return `Task ${task.taskId} lists dependency ${dep} twice.`;
      seen.add(dep);
    }
    // A new task has no dependents yet, so its edges cannot close a cycle.
    b.working.set(task.taskId, {
      task: { ...task, dependsOn: [...task.dependsOn] },
      status: "pending",
      original: false,
      touched: false,
    });
    for (const dep of task.dependsOn) dependentSet(b.dependents, dep).add(task.taskId);
    return undefined;
  },
  removeTask: (b, m) => {
    const entry = b.working.get(m.taskId);
    if (!entry) return unknownTask(m.taskId, b.removedInBatch);
    if (LOCKED.has(entry.status)) return lockedReason(m.taskId, entry.status, "removed");
    const still = b.dependents.get(m.taskId);
    if (still && still.size > 0) {
      const names = [...still].sort().slice(0, 5).join(", ");
      return `Task ${m.taskId} cannot be removed while ${names}${still.size > 5 ? " and others" : ""} still depend on it.`;
    }
    for (const dep of entry.task.dependsOn) b.dependents.get(dep)?.delete(m.taskId);
    b.dependents.delete(m.taskId);
    b.working.delete(m.taskId);
    b.removedInBatch.add(m.taskId);
    if (entry.original) b.removedOriginals.push(m.taskId);
    return undefined;
  },
  updateTask: (b, m) => {
    const entry = b.working.get(m.taskId);
    if (!entry) return unknownTask(m.taskId, b.removedInBatch);
    if (LOCKED.has(entry.status)) return lockedReason(m.taskId, entry.status, "updated");
    const { patch } = m;
    if (patch.title !== undefined) entry.task.title = patch.title;
    if (patch.description !== undefined) entry.task.description = patch.description;
    if (patch.acceptance !== undefined) entry.task.acceptance = patch.acceptance;
    entry.touched = true;
    return undefined;
  },
  reassign: (b, m) => {
    const entry = b.working.get(m.taskId);
    if (!entry) return unknownTask(m.taskId, b.removedInBatch);
    if (LOCKED.has(entry.status)) return lockedReason(m.taskId, entry.status, "reassigned");
    if (!b.instanceIds.has(m.instanceId)) {
      return `Task ${m.taskId} cannot be reassigned to unknown instance ${m.instanceId}.`;
    }
    entry.task.instanceId = m.instanceId;
    entry.touched = true;
    return undefined;
  },
  addDependency: (b, m) => {
    const entry = b.working.get(m.taskId);
    if (!entry) return unknownTask(m.taskId, b.removedInBatch);
    if (!b.working.has(m.dependsOn)) {
      return `Task ${m.taskId} cannot depend on unknown task ${m.dependsOn}.`;
    }
    if (LOCKED.has(entry.status)) return lockedReason(m.taskId, entry.status, "given a new dependency");
    if (m.dependsOn === m.taskId) return `Task ${m.taskId} cannot depend on itself.`;
    if (entry.task.dependsOn.includes(m.dependsOn)) {
      return `Task ${m.taskId} already depends on ${m.dependsOn}.`;
    }
    const path = dependencyPath(b.working, m.dependsOn, m.taskId);
    if (path) {
      return (
        `Making ${m.taskId} depend on ${m.dependsOn} would create a cycle, because ${m.dependsOn} already ` +
        `depends on ${m.taskId} (${path.join(" → ")}).`
      );
    }
    entry.task.dependsOn.push(m.dependsOn);
    dependentSet(b.dependents, m.dependsOn).add(m.taskId);
    entry.touched = true;
    return undefined;
  },
  removeDependency: (b, m) => {
    const entry = b.working.get(m.taskId);
    if (!entry) return unknownTask(m.taskId, b.removedInBatch);
    if (LOCKED.has(entry.status)) return lockedReason(m.taskId, entry.status, "changed");
    const at = entry.task.dependsOn.indexOf(m.dependsOn);
    if (at < 0) return `Task ${m.taskId} does not depend on ${m.dependsOn}.`;
    entry.task.dependsOn.splice(at, 1);
    b.dependents.get(m.dependsOn)?.delete(m.taskId);
    entry.touched = true;
    return undefined;
  },
};

// ---------------------------------------------------------------------------------------------------------------
// Internals

function fail(index: number, reason: string): { ok: false; index: number; reason: string } {
  return { ok: false, index, reason };
}

function statusLookup(states: TaskStatuses): (taskId: string) => TaskStatus | undefined {
  if (isStatusMap(states)) return (taskId) => states.get(taskId)?.status;
  const map = new Map<string, TaskStatus>();
  for (const s of states) map.set(s.taskId, s.status);
  return (taskId) => map.get(taskId);
}

function isStatusMap(states: TaskStatuses): states is ReadonlyMap<string, Pick<TaskState, "status">> {
  return !Array.isArray(states);
}

function dependentSet(dependents: Map<string, Set<string>>, taskId: string): Set<string> {
  let set = dependents.get(taskId);
  if (!set) {
    set = new Set();
    dependents.set(taskId, set);
  }
  return set;
}

function unknownTask(taskId: string, removedInBatch: ReadonlySet<string>): string {
  return removedInBatch.has(taskId)
    ? `Task ${taskId} was removed earlier in this batch.`
    : `Task ${taskId} does not exist in the plan.`;
}

function lockedReason(taskId: string, status: TaskStatus, verb: string): string {
  const state = status === "waiting" ? "waiting for an answer" : status;
  return `Task ${taskId} is ${state} and cannot be ${verb}.`;
}

/**
 * A path `from → … → to` along "depends on" edges of the working copy, or undefined when `to` is not reachable.
 * Iterative DFS, O(V+E).
 */
function dependencyPath(working: ReadonlyMap<string, WorkingTask>, from: string, to: string): string[] | undefined {
  const parent = new Map<string, string | null>([[from, null]]);
  const stack = [from];
  while (stack.length > 0) {
    const id = stack.pop() as string;
    if (id === to) {
      const path: string[] = [];
      for (let at: string | null | undefined = id; at != null; at = parent.get(at)) path.push(at);
      return path.reverse();
    }
    for (const dep of working.get(id)?.task.dependsOn ?? []) {
      if (!parent.has(dep)) {
        parent.set(dep, id);
        stack.push(dep);
      }
    }
  }
  return undefined;
}
