/**
 * The run-time ready set of one product's DAG (DESIGN.md, Execution model).
 *
 * Owns which tasks may start now: per-task remaining-dependency counts, a FIFO of ready tasks, per-instance queues of
 * ready tasks whose instance is busy, the busy instances and the running count. Incremental: O(V+E) over a whole run,
 * never a full scan per event. It only tracks statuses; it never calls workers, persists, reads the clock or
 * notifies anyone, and it never modifies the task objects it is given.
 */
import type { Task, TaskStatus } from "../../../protocol/common.js";
import { invalidInput, notFound } from "../errors.js";
import { dependentsIndex, indexTasks, type Dependents, type GraphIndex } from "./graph.js";

/** A task with its current status, as the scheduler is built from (`TaskState` satisfies it). */
export type SchedulerTask = Task & { status: TaskStatus };

/** The statuses a running (or otherwise unfinished) task can be settled to. */
export type SettleStatus = "completed" | "failed" | "skipped" | "cancelled" | "pending" | "waiting";

/** Task counts by status. `ready` is the subset of `pending` whose dependencies are all completed. */
export interface SchedulerCounts {
  total: number;
  pending: number;
  ready: number;
  running: number;
  waiting: number;
  completed: number;
  failed: number;
  skipped: number;
  cancelled: number;
}

const STATUSES = ["pending", "running", "waiting", "completed", "failed", "skipped", "cancelled"] as const;
type StatusCode = number;
const CODE: Readonly<Record<TaskStatus, StatusCode>> = {
  pending: 0,
  running: 1,
  waiting: 2,
  completed: 3,
  failed: 4,
  skipped: 5,
  cancelled: 6,
};
const PENDING = CODE.pending;
const RUNNING = CODE.running;
const COMPLETED = CODE.completed;
const SKIPPED = CODE.skipped;

/**
 * Holds the ready set and hands out tasks that may start now.
 *
 * Rules: a task is ready when it is `pending` and every dependency is `completed`; an instance runs one task at a
 * time; at most `maxParallelTasks` tasks run at once; ready tasks start in the order they became ready (FIFO), except
 * that a task whose instance is busy waits in that instance's queue without blocking others. A `waiting` task
 * (DESIGN.md guarantee 8) does not complete, so its dependents stay pending and are neither run nor skipped.
 *
 * Cost: O(V+E) to build or rebuild; amortised O(1) per `next()` result and O(out-degree) per `settle()`.
 * Not thread-safe in any sense; the orchestrator drives it from one place.
 */
export class Scheduler<T extends SchedulerTask = SchedulerTask> {
  private maxParallel: number;
  private tasks: T[] = [];
  private positions: ReadonlyMap<string, number> = new Map<string, number>();
  private status = new Uint8Array(0);
  /** Distinct dependencies of each task that are not `completed`. */
  private remaining = new Int32Array(0);
  /** For each task, the indices of its direct dependents (graph.ts `Dependents`). */
  private dependents: Dependents = { start: new Int32Array(1), targets: new Int32Array(0) };
  /** For each task, the index of its instance in `busy` / `parked`. */
  private instanceOf = new Int32Array(0);
  private busy = new Uint8Array(0);
  /** Per instance: ready tasks that were due while the instance was busy, oldest first. */
  private parked: Fifo<number>[] = [];
  /** Instances that became free while they had parked tasks. */
  private freed = new Fifo<number>();
  private inFreed = new Uint8Array(0);
  /** Tasks that became ready, oldest first. Entries may be stale; they are checked when popped. */
  private readyQueue = new Fifo<number>();
  /** 1 while a task has an entry in `readyQueue` or a `parked` queue (so it is never queued twice). */
  private queued = new Uint8Array(0);
  private statusCounts = new Int32Array(STATUSES.length);
  private readyCount = 0;
  /** Generation stamps for traversals (so `skipDependentsOf` allocates nothing proportional to V). */
  private visited = new Int32Array(0);
  private generation = 0;

  /**
   * Builds the ready set from `tasks` (each with its current status; `running` tasks keep their instance busy).
   * `maxParallelTasks` is a positive integer or `Infinity`.
   * Throws `DomainError` `invalid_plan` on a duplicate task id or a dependency on an unknown task, `invalid_input`
   * on a bad `maxParallelTasks`. Does NOT detect cycles: tasks on a cycle simply never become ready (validate the
   * plan with `validatePlanGraph` first). `index`: the id → index map and dependents of a task list with the same
   * ids, in the same order, with the same dependencies (graph.ts `planGraphIndex` of a plan `sameGraph` says `tasks`
   * follows), used as it is instead of built again; it is not changed.
   */
  constructor(tasks: readonly T[], maxParallelTasks: number, index?: GraphIndex) {
    this.maxParallel = checkMax(maxParallelTasks);
    this.rebuild(tasks, index);
  }

  /**
   * Replaces the whole state with `tasks` and their statuses, e.g. after a DAG mutation or a rollback. O(V+E).
   * Same errors as the constructor; on error the previous state is kept.
   */
  rebuild(tasks: readonly T[], index?: GraphIndex): void {
    const n = tasks.length;
    // Indexed loops (issue 34): built once per run in code not yet optimised, where iterator steps allocate.
    const positions = index?.positions ?? indexTasks(tasks);
    const status = new Uint8Array(n);
    const instances = new Map<string, number>();
    const instanceOf = new Int32Array(n);
    for (let i = 0; i < n; i += 1) {
      const task = tasks[i] as T;
      status[i] = CODE[task.status];
      let inst = instances.get(task.instanceId);
      if (inst === undefined) {
        inst = instances.size;
        instances.set(task.instanceId, inst);
      }
      instanceOf[i] = inst;
    }
    const dependents = index?.dependents ?? dependentsIndex(tasks, positions);
    const remaining = new Int32Array(n);
    for (let j = 0; j < n; j += 1) {
      if (status[j] === COMPLETED) continue;
      for (let k = dependents.start[j] as number; k < (dependents.start[j + 1] as number); k += 1) {
        const d = dependents.targets[k] as number;
        remaining[d] = (remaining[d] as number) + 1;
      }
    }

    // Validation passed: commit the new state.
    this.tasks = [...tasks];
    this.positions = positions;
    this.status = status;
    this.remaining = remaining;
    this.dependents = dependents;
    this.instanceOf = instanceOf;
    this.busy = new Uint8Array(instances.size);
    this.parked = Array.from({ length: instances.size }, () => new Fifo<number>());
    this.freed = new Fifo<number>();
    this.inFreed = new Uint8Array(instances.size);
    this.readyQueue = new Fifo<number>();
    this.queued = new Uint8Array(n);
    this.statusCounts = new Int32Array(STATUSES.length);
    this.readyCount = 0;
    this.visited = new Int32Array(n);
    this.generation = 0;
    for (let i = 0; i < n; i += 1) {
      const code = status[i] as StatusCode;
      this.statusCounts[code] = (this.statusCounts[code] ?? 0) + 1;
      if (code === RUNNING) this.busy[instanceOf[i] as number] = 1;
      if (this.isReady(i)) {
        this.readyCount += 1;
        this.enqueue(i);
      }
    }
  }

  /** Changes the product-wide bound on running tasks (e.g. on resume). Running tasks are never stopped by it. */
  setMaxParallelTasks(maxParallelTasks: number): void {
    this.maxParallel = checkMax(maxParallelTasks);
  }

  /**
   * Starts as many ready tasks as may start now and returns them, marking them `running` and their instances busy.
   * Honours one task per instance and `maxParallelTasks`. Returns `[]` when nothing can start. The returned objects
   * are the ones given to the constructor/rebuild; their own `status` field is NOT updated.
   */
  next(): T[] {
    const started: T[] = [];
    while (this.running() < this.maxParallel) {
      const i = this.pickFromFreed() ?? this.pickFromReadyQueue();
      if (i === undefined) break;
      this.start(i);
      started.push(this.tasks[i] as T);
    }
    return started;
  }

  /**
   * Records the outcome of a task and frees its instance if it was running.
   *
   * `completed` makes dependents whose last dependency this was ready; `pending` puts the task back (retry,
   * interruption, or answer to a `waiting` question) at the end of the ready FIFO once its dependencies allow;
   * `waiting` keeps its dependents pending (guarantee 8); `failed`, `skipped`, `cancelled` only record the status
   * (call `skipDependentsOf` to skip what can no longer run). Settling to the current status is a no-op.
   * Throws `not_found` for an unknown task and `invalid_input` when un-completing a completed task (use `rebuild`).
   */
  settle(taskId: string, status: SettleStatus): void {
    const i = this.indexOf(taskId);
    const prev = this.status[i] as StatusCode;
    const next = CODE[status];
    if (prev === next) return;
    if (prev === COMPLETED) {
      throw invalidInput(
        `Task ${taskId} is already completed and cannot become ${status}; rebuild the scheduler to reset it`,
      );
    }
    const wasReady = this.isReady(i);
    if (prev === RUNNING) this.release(this.instanceOf[i] as number);
    this.setStatus(i, next);
    if (wasReady) this.readyCount -= 1;
    if (this.isReady(i)) {
      this.readyCount += 1;
      this.enqueue(i);
    }
    if (next === COMPLETED) {
      const { start, targets } = this.dependents;
      for (let k = start[i] as number; k < (start[i + 1] as number); k += 1) {
        const d = targets[k] as number;
        const left = (this.remaining[d] ?? 0) - 1;
        this.remaining[d] = left;
        if (left === 0 && this.status[d] === PENDING) {
          this.readyCount += 1;
          this.enqueue(d);
        }
      }
    }
  }

  /**
   * Marks every `pending` task that transitively depends on `taskId` as `skipped` and returns their ids (nearest
   * first). Tasks in other statuses are left alone, but the walk continues through them. Cost proportional to the
   * downstream part of the graph. Throws `not_found` for an unknown task.
   */
  skipDependentsOf(taskId: string): string[] {
    const start = this.indexOf(taskId);
    this.generation += 1;
    const gen = this.generation;
    this.visited[start] = gen;
    const skipped: string[] = [];
    const queue = [start];
    const { start: first, targets } = this.dependents;
    for (let head = 0; head < queue.length; head += 1) {
      const i = queue[head] as number;
      for (let k = first[i] as number; k < (first[i + 1] as number); k += 1) {
        const d = targets[k] as number;
        if (this.visited[d] === gen) continue;
        this.visited[d] = gen;
        queue.push(d);
        if (this.status[d] === PENDING) {
          if (this.isReady(d)) this.readyCount -= 1;
          this.setStatus(d, SKIPPED);
          skipped.push((this.tasks[d] as T).taskId);
        }
      }
    }
    return skipped;
  }

  /** True when no task is running. */
  isIdle(): boolean {
    return this.running() === 0;
  }

  /**
   * True when at least one task is ready (pending with every dependency completed). It may still have to wait for a
   * busy instance or a free parallel slot; when `isIdle()` is also true, `next()` will start it. `isIdle() &&
   * !hasRunnable()` means the run can make no further progress on its own (finished, failed, or waiting).
   */
  hasRunnable(): boolean {
    return this.readyCount > 0;
  }

  /** The scheduler's view of a task's status, or undefined for an unknown id. */
  statusOf(taskId: string): TaskStatus | undefined {
    const i = this.positions.get(taskId);
    return i === undefined ? undefined : STATUSES[this.status[i] as StatusCode];
  }

  /** Task counts by status. O(1). */
  counts(): SchedulerCounts {
    const c = (s: TaskStatus): number => this.statusCounts[CODE[s]] ?? 0;
    return {
      total: this.tasks.length,
      pending: c("pending"),
      ready: this.readyCount,
      running: c("running"),
      waiting: c("waiting"),
      completed: c("completed"),
      failed: c("failed"),
      skipped: c("skipped"),
      cancelled: c("cancelled"),
    };
  }

  // -------------------------------------------------------------------------------------------------------------

  private running(): number {
    return this.statusCounts[RUNNING] ?? 0;
  }

  private indexOf(taskId: string): number {
    const i = this.positions.get(taskId);
    if (i === undefined) throw notFound("task", taskId);
    return i;
  }

  private isReady(i: number): boolean {
    return this.status[i] === PENDING && this.remaining[i] === 0;
  }

  private setStatus(i: number, code: StatusCode): void {
    const prev = this.status[i] as StatusCode;
    this.statusCounts[prev] = (this.statusCounts[prev] ?? 0) - 1;
    this.statusCounts[code] = (this.statusCounts[code] ?? 0) + 1;
    this.status[i] = code;
  }

  private enqueue(i: number): void {
    if (this.queued[i] === 1) return; // an older entry is still queued and will serve
    this.queued[i] = 1;
    this.readyQueue.push(i);
  }

  private start(i: number): void {
    this.readyCount -= 1;
    this.setStatus(i, RUNNING);
    this.busy[this.instanceOf[i] as number] = 1;
  }

  private release(inst: number): void {
    this.busy[inst] = 0;
    if (!(this.parked[inst] as Fifo<number>).isEmpty() && this.inFreed[inst] === 0) {
      this.inFreed[inst] = 1;
      this.freed.push(inst);
    }
  }

  /** A ready task parked on an instance that has become free, oldest freed instance first. */
  private pickFromFreed(): number | undefined {
    while (!this.freed.isEmpty()) {
      const inst = this.freed.shift() as number;
      this.inFreed[inst] = 0;
      if (this.busy[inst] === 1) continue; // re-added when it is released again
      const parked = this.parked[inst] as Fifo<number>;
      while (!parked.isEmpty()) {
        const i = parked.shift() as number;
        this.queued[i] = 0;
        if (this.isReady(i)) return i;
      }
    }
    return undefined;
  }

  /** The oldest ready task whose instance is free; ready tasks of busy instances are parked on the way. */
  private pickFromReadyQueue(): number | undefined {
    while (!this.readyQueue.isEmpty()) {
      const i = this.readyQueue.shift() as number;
      if (!this.isReady(i)) {
        this.queued[i] = 0; // stale entry
        continue;
      }
      const inst = this.instanceOf[i] as number;
      if (this.busy[inst] === 1) {
        (this.parked[inst] as Fifo<number>).push(i); // stays `queued`
        continue;
      }
      this.queued[i] = 0;
      return i;
    }
    return undefined;
  }
}

function checkMax(maxParallelTasks: number): number {
  if (!(maxParallelTasks === Infinity || (Number.isInteger(maxParallelTasks) && maxParallelTasks >= 1))) {
    throw invalidInput(`maxParallelTasks must be a positive integer or Infinity, not ${String(maxParallelTasks)}`);
  }
  return maxParallelTasks;
}

/** An array-backed FIFO with amortised O(1) push and shift. */
class Fifo<V> {
  private items: V[] = [];
  private head = 0;

  push(value: V): void {
    this.items.push(value);
  }

  shift(): V | undefined {
    if (this.head >= this.items.length) return undefined;
    const value = this.items[this.head];
    this.head += 1;
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return value;
  }

  isEmpty(): boolean {
    return this.head >= this.items.length;
  }
}
