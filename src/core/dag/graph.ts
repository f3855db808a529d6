/**
 * Pure graph functions over a plan's tasks: validation, topological order, downstream sets.
 *
 * Owns the rules that make a task list a valid DAG (unique ids, known dependencies and instances, no self-dependency,
 * no cycle). Every function is O(V+E), never mutates its input, and must never import a `node:` module or know about
 * persistence, scheduling or the wire.
 */
import { invalidPlan, notFound } from "../errors.js";

/** The part of a task the graph functions read. `Task` and `TaskState` both satisfy it. */
export interface GraphTask {
  taskId: string;
  instanceId: string;
  dependsOn: readonly string[];
}

/**
 * The outcome of `validatePlanGraph`. On failure `index` is the offending entry's 0-based index in `list` (the task
 * list for every task problem, the instance list for a duplicate instance id) and `reason` is one sentence naming it.
 */
export type GraphCheck = { ok: true } | { ok: false; index: number; reason: string; list: "tasks" | "instances" };

/**
 * Checks that `tasks` over `instances` form a valid plan DAG.
 *
 * Rejects, in this order: a duplicate instance id; then per task in list order a duplicate task id, an assignment to
 * an unknown instance, a self-dependency, a dependency on an unknown task, a dependency listed twice; then a cycle
 * (the reason spells out one cycle's path, the index is the cycle task that comes first in the list). Reports only
 * the first problem. O(V+E). Does NOT check field lengths or other schema rules (zod does that) and never throws.
 */
export function validatePlanGraph(
  instances: readonly { instanceId: string }[],
  tasks: readonly GraphTask[],
): GraphCheck {
  return checkGraph(instances, tasks).check;
}

/**
 * A task list's id → index map and dependents (`Dependents`), as a check that passed built them: what the scheduler
 * starts from (issue 34: computed once per plan, not again when execution starts).
 */
export interface GraphIndex {
  positions: ReadonlyMap<string, number>;
  dependents: Dependents;
}

/** `validatePlanGraph`, with the index it built when the check passed. */
function checkGraph(
  instances: readonly { instanceId: string }[],
  tasks: readonly GraphTask[],
): { check: GraphCheck; index?: GraphIndex } {
  const check = (failure: Extract<GraphCheck, { ok: false }>): { check: GraphCheck } => ({ check: failure });
  const instanceIds = new Map<string, number>();
  // Indexed loops throughout (issue 34): a plan is validated once per process, in code not yet optimised, where each
  // step of an iterator (and each `[index, item]` pair of `entries()`) is an allocation.
  for (let index = 0; index < instances.length; index += 1) {
    const instance = instances[index] as { instanceId: string };
    const first = instanceIds.get(instance.instanceId);
    if (first !== undefined) {
      return check({
        ok: false,
        list: "instances",
        index,
        reason: `Instance ${instance.instanceId} appears twice (entries ${first + 1} and ${index + 1}).`,
      });
    }
    instanceIds.set(instance.instanceId, index);
  }

  const positions = new Map<string, number>();
  for (let index = 0; index < tasks.length; index += 1) {
    const task = tasks[index] as GraphTask;
    const first = positions.get(task.taskId);
    if (first !== undefined) {
      return check({
        ok: false,
        list: "tasks",
        index,
        reason: `Task id ${task.taskId} is used twice (tasks ${first + 1} and ${index + 1}).`,
      });
    }
    positions.set(task.taskId, index);
  }

  const problem = taskProblem(tasks, instanceIds, positions);
  if (problem) return { check: problem };

  const dependents = dependentsIndex(tasks, positions);
  const order = kahn(tasks, dependents);
  if (order.length < tasks.length) {
    const cycle = findCycle(tasks, positions, order);
    return check({
      ok: false,
      list: "tasks",
      index: cycle.index,
      reason: `Tasks form a dependency cycle (each depends on the next): ${cycle.path}.`,
    });
  }
  return { check: { ok: true }, index: { positions, dependents } };
}

/** The first task of the list with a wrong assignment or dependency list (see `validatePlanGraph`), or undefined. */
function taskProblem(
  tasks: readonly GraphTask[],
  instanceIds: ReadonlyMap<string, number>,
  positions: ReadonlyMap<string, number>,
): Extract<GraphCheck, { ok: false }> | undefined {
  for (let index = 0; index < tasks.length; index += 1) {
    const task = tasks[index] as GraphTask;
    if (!instanceIds.has(task.instanceId)) {
      return {
        ok: false,
        list: "tasks",
        index,
        reason: `Task ${task.taskId} is assigned to instance ${task.instanceId}, which is not in the plan.`,
      };
    }
    const deps = task.dependsOn;
    for (let k = 0; k < deps.length; k += 1) {
      const dep = deps[k] as string;
      if (dep === task.taskId) {
        return { ok: false, list: "tasks", index, reason: `Task ${task.taskId} depends on itself.` };
      }
      if (!positions.has(dep)) {
        return {
          ok: false,
          list: "tasks",
          index,
          reason: `Task ${task.taskId} depends on unknown task ${dep}.`,
        };
      }
    }
    const repeated = firstRepeat(deps);
    if (repeated !== undefined) {
      return {
        ok: false,
        list: "tasks",
        index,
        reason: `Task ${task.taskId} lists dependency ${repeated} twice.`,
      };
    }
  }
  return undefined;
}

/**
 * Plan task lists that passed `validatePlanGraph`, with the instance list they passed with and the index the check
 * built (issue 34: one 1,000-task plan was validated four times between the leader's answer and the first task:
 * planning, confirmation, the catch-up before it and the start of execution; and the scheduler built the same index
 * again).
 */
const validPlanLists = new WeakMap<
  readonly GraphTask[],
  { instances: readonly { instanceId: string }[]; index: GraphIndex }
>();

/**
 * `validatePlanGraph` of a plan's own lists, remembered when they pass: the same task list checked again with the same
 * instance list is answered without a walk. Only for a plan's lists, which are values never changed in place (a new
 * plan, mutation or edit builds new lists; fingerprint.ts `planHash` relies on the same); never for a product state's
 * task states, which are replaced in place as events arrive.
 */
export function validatePlanLists(plan: {
  instances: readonly { instanceId: string }[];
  tasks: readonly GraphTask[];
}): GraphCheck {
  if (validPlanLists.get(plan.tasks)?.instances === plan.instances) return { ok: true };
  const { check, index } = checkGraph(plan.instances, plan.tasks);
  if (check.ok && index) validPlanLists.set(plan.tasks, { instances: plan.instances, index });
  return check;
}

/**
 * The index of a plan's task list that passed `validatePlanLists` (with any instance list), `undefined` when it has
 * not passed in this process. Shared: the caller must not change it.
 */
export function planGraphIndex(tasks: readonly GraphTask[]): GraphIndex | undefined {
  return validPlanLists.get(tasks)?.index;
}

/** True when `b` lists the same tasks as `a`, in the same order, with the same instances and dependencies. O(V+E). */
export function sameGraph(a: readonly GraphTask[], b: readonly GraphTask[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i += 1) {
    const x = a[i] as GraphTask;
    const y = b[i] as GraphTask;
    if (x.taskId !== y.taskId || x.instanceId !== y.instanceId) return false;
    if (x.dependsOn === y.dependsOn) continue;
    if (x.dependsOn.length !== y.dependsOn.length) return false;
    for (let k = 0; k < x.dependsOn.length; k += 1) if (x.dependsOn[k] !== y.dependsOn[k]) return false;
  }
  return true;
}

/**
 * The tasks in a topological order (every task after all of its dependencies), stable: among tasks that are ready at
 * the same time the original list order is kept. O(V+E). Returns new array, the same task objects.
 * Throws `DomainError` `invalid_plan` when a dependency is unknown or the tasks contain a cycle.
 * Repeated entries in one `dependsOn` are tolerated.
 */
export function topologicalOrder<T extends GraphTask>(tasks: readonly T[]): T[] {
  const positions = indexTasks(tasks);
  const order = kahn(tasks, dependentsIndex(tasks, positions));
  if (order.length < tasks.length) {
    const cycle = findCycle(tasks, positions, order);
    throw invalidPlan(`Tasks form a dependency cycle (each depends on the next): ${cycle.path}`, cycle.index);
  }
  return order.map((i) => tasks[i] as T);
}

/**
 * The ids of `taskId` and of every task that transitively depends on it, in topological order (`taskId` first).
 * Used by replay (DESIGN.md, Execution model: "resets that task and everything downstream"). O(V+E).
 * Throws `DomainError` `not_found` (kind `task`) when `taskId` is not in `tasks`, `invalid_plan` on an unknown
 * dependency. Does NOT detect cycles outside the downstream set; inside it a cycle throws `invalid_plan`.
 */
export function downstreamOf(tasks: readonly GraphTask[], taskId: string): string[] {
  const positions = indexTasks(tasks);
  const start = positions.get(taskId);
  if (start === undefined) throw notFound("task", taskId);
  const dependents = dependentsIndex(tasks, positions);

  // Mark everything reachable from the start along "is depended on by" edges.
  const marked = new Uint8Array(tasks.length);
  marked[start] = 1;
  const stack = [start];
  while (stack.length > 0) {
    const i = stack.pop() as number;
    for (let k = dependents.start[i] as number; k < (dependents.start[i + 1] as number); k += 1) {
      const d = dependents.targets[k] as number;
      if (marked[d] === 0) {
        marked[d] = 1;
        stack.push(d);
      }
    }
  }

  // Kahn restricted to the marked subgraph; in-degree counts only marked dependencies.
  const indegree = new Int32Array(tasks.length);
  let members = 0;
  for (const [i, task] of tasks.entries()) {
    if (marked[i] === 0) continue;
    members += 1;
    for (const dep of uniqueDeps(task)) {
      const j = positions.get(dep);
      if (j !== undefined && marked[j] === 1) indegree[i] = (indegree[i] ?? 0) + 1;
    }
  }
  const queue = [start];
  const result: string[] = [];
  for (let head = 0; head < queue.length; head += 1) {
    const i = queue[head] as number;
    result.push((tasks[i] as GraphTask).taskId);
    for (let k = dependents.start[i] as number; k < (dependents.start[i + 1] as number); k += 1) {
      const d = dependents.targets[k] as number;
      indegree[d] = (indegree[d] ?? 0) - 1;
      if (indegree[d] === 0) queue.push(d);
    }
  }
  if (result.length < members || (indegree[start] ?? 0) > 0) {
    throw invalidPlan(`The tasks downstream of ${taskId} contain a dependency cycle`, start);
  }
  return result;
}

/**
 * Who depends on whom, in compressed form: the direct dependents of task index `i` are
 * `targets[start[i]]` … `targets[start[i + 1] - 1]`, each listed once, in task list order. Two typed arrays of
 * V+1 and E entries instead of one array per task (issue 16: at 50,000 tasks the per-task arrays were tens of MB of
 * garbage per plan validation).
 */
export interface Dependents {
  start: Int32Array;
  targets: Int32Array;
}

/**
 * The direct dependents of every task (see `Dependents`), by the task id → index map `positions`. Throws
 * `invalid_plan` on an unknown dependency. O(V+E).
 */
export function dependentsIndex(tasks: readonly GraphTask[], positions: ReadonlyMap<string, number>): Dependents {
  const n = tasks.length;
  const start = new Int32Array(n + 1);
  let edges = 0;
  for (let i = 0; i < n; i += 1) {
    const task = tasks[i] as GraphTask;
    const deps = uniqueDeps(task);
    for (let k = 0; k < deps.length; k += 1) {
      const dep = deps[k] as string;
      const j = positions.get(dep);
      if (j === undefined) throw invalidPlan(`Task ${task.taskId} depends on unknown task ${dep}`, i);
      start[j + 1] = (start[j + 1] as number) + 1;
      edges += 1;
    }
  }
  for (let i = 0; i < n; i += 1) start[i + 1] = (start[i + 1] as number) + (start[i] as number);
  const targets = new Int32Array(edges);
  const fill = start.slice(0, n);
  for (let i = 0; i < n; i += 1) {
    const deps = uniqueDeps(tasks[i] as GraphTask);
    for (let k = 0; k < deps.length; k += 1) {
      const j = positions.get(deps[k] as string) as number;
      targets[fill[j] as number] = i;
      fill[j] = (fill[j] as number) + 1;
    }
  }
  return { start, targets };
}

// ---------------------------------------------------------------------------------------------------------------
// Internals

/** Map task id → index; throws `invalid_plan` on a duplicate id. O(V). */
export function indexTasks(tasks: readonly { taskId: string }[]): Map<string, number> {
  const positions = new Map<string, number>();
  for (let i = 0; i < tasks.length; i += 1) {
    const task = tasks[i] as { taskId: string };
    if (positions.has(task.taskId)) throw invalidPlan(`Task id ${task.taskId} is used twice`, i);
    positions.set(task.taskId, i);
  }
  return positions;
}

/** The task's dependencies without repeats (allocation-free when there are none to drop). */
function uniqueDeps(task: GraphTask): readonly string[] {
  return firstRepeat(task.dependsOn) === undefined ? task.dependsOn : [...new Set(task.dependsOn)];
}

/** The first id that occurs twice in `ids`, or undefined. Quadratic only for short lists, a Set beyond that. */
function firstRepeat(ids: readonly string[]): string | undefined {
  if (ids.length < 2) return undefined;
  if (ids.length <= 8) {
    for (let a = 1; a < ids.length; a += 1) {
      for (let b = 0; b < a; b += 1) if (ids[a] === ids[b]) return ids[a];
    }
    return undefined;
  }
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) return id;
    seen.add(id);
  }
  return undefined;
}

/**
 * Kahn's algorithm with a FIFO seeded in list order over the list's `dependents`: returns the indices in topological
 * order. When the result is shorter than the list, the remaining tasks contain (or depend on) a cycle.
 */
function kahn(tasks: readonly GraphTask[], dependents: Dependents): number[] {
  const indegree = new Int32Array(tasks.length);
  for (let i = 0; i < tasks.length; i += 1) indegree[i] = uniqueDeps(tasks[i] as GraphTask).length;
  const order: number[] = [];
  for (let i = 0; i < tasks.length; i += 1) if (indegree[i] === 0) order.push(i);
  for (let head = 0; head < order.length; head += 1) {
    const i = order[head] as number;
    for (let k = dependents.start[i] as number; k < (dependents.start[i + 1] as number); k += 1) {
      const d = dependents.targets[k] as number;
      indegree[d] = (indegree[d] ?? 0) - 1;
      if (indegree[d] === 0) order.push(d);
    }
  }
  return order;
}

/**
 * Given a Kahn order that left some tasks out, describes one cycle: `index` is the cycle's task that comes first in
 * the list, `path` the ids in "depends on" direction starting and ending with that task (`t1 → t2 → t1`).
 */
function findCycle(
  tasks: readonly GraphTask[],
  positions: Map<string, number>,
  order: readonly number[],
): { index: number; path: string } {
  const cycle = cycleIndices(tasks, positions, order);
  const index = cycle.reduce((min, i) => (i < min ? i : min), Number.MAX_SAFE_INTEGER);
  const at = cycle.indexOf(index);
  const rotated = [...cycle.slice(at), ...cycle.slice(0, at), index];
  return { index, path: rotated.map((i) => tasks[i]?.taskId ?? "?").join(" → ") };
}

/**
 * The indices of one cycle among the tasks a Kahn order left out, in "depends on" direction. Every left-out task
 * has at least one left-out dependency, so walking those from any left-out task must revisit a task; the revisited
 * stretch is a cycle. O(V+E).
 */
function cycleIndices(tasks: readonly GraphTask[], positions: Map<string, number>, order: readonly number[]): number[] {
  const done = new Uint8Array(tasks.length);
  for (const i of order) done[i] = 1;
  let current = done.indexOf(0);
  const visitedAt = new Map<number, number>();
  const walk: number[] = [];
  while (!visitedAt.has(current)) {
    visitedAt.set(current, walk.length);
    walk.push(current);
    const task = tasks[current] as GraphTask;
    let next = -1;
    for (const dep of task.dependsOn) {
      const j = positions.get(dep);
      if (j !== undefined && done[j] === 0) {
        next = j;
        break;
      }
    }
    if (next < 0) return walk; // unreachable for a genuine Kahn remainder; keeps the function total
    current = next;
  }
  return walk.slice(visitedAt.get(current));
}
