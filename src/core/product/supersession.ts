/**
 * Fix-ups and the tasks they replace (issue 28): a task whose `supersedes` names a failed task is that task's
 * fix-up. The failed task stays in the plan and in every view, linked to its fix-up (`supersededBy`), and no longer
 * counts against the product once replaced: the product completes when every task that is not superseded completed.
 * Pure: reads the tasks it is given.
 */
import type { Task, TaskState } from "../../../protocol/common.js";

/**
 * failed task id → the id of the fix-up that replaces it. Only a `failed` task can be superseded; a `supersedes`
 * naming any other task (or an unknown one) links nothing. The first fix-up in plan order wins.
 */
export function supersessions(
  tasks: readonly (Pick<Task, "taskId" | "supersedes"> & { status?: string })[],
): Map<string, string> {
  const out = new Map<string, string>();
  // Most plans have no fix-up: then nothing is indexed (issue 34: the end of a 1,000-task run asked twice).
  let fixups = false;
  for (let i = 0; i < tasks.length && !fixups; i++) fixups = tasks[i]?.supersedes !== undefined;
  if (!fixups) return out;
  const byId = new Map(tasks.map((t) => [t.taskId, t]));
  for (const t of tasks) {
    const target = t.supersedes === undefined ? undefined : byId.get(t.supersedes);
    if (target === undefined || target.taskId === t.taskId || target.status !== "failed") continue;
    if (!out.has(target.taskId)) out.set(target.taskId, t.taskId);
  }
  return out;
}

/** `tasks` with `supersededBy` on each superseded failed task (new objects only for those). */
export function withSupersededBy(tasks: TaskState[]): TaskState[] {
  const links = supersessions(tasks);
  if (links.size === 0) return tasks;
  return tasks.map((t) => {
    const by = links.get(t.taskId);
    return by === undefined ? t : { ...t, supersededBy: by };
  });
}

/** The tasks that count for the product's outcome: all but the superseded ones. */
export function outcomeTasks(tasks: TaskState[]): TaskState[] {
  const links = supersessions(tasks);
  return links.size === 0 ? tasks : tasks.filter((t) => !links.has(t.taskId));
}
