/**
 * What a stored product event says about task states, for tests that read a product's stream: a `task` event's task,
 * and each task of a `started` event (issue 34: a wave's starts in one event) as running at its attempt number. Other
 * events say nothing here. Takes the raw JSON shape (parsed or not), so SQLite, PostgreSQL and host stores read alike.
 */
export interface RecordedTask {
  taskId: string;
  status: string;
  attempts: number;
  error?: string;
}

interface RawEvent {
  type?: unknown;
  task?: { taskId: string; status: string; attempts: number; error?: string };
  tasks?: { taskId: string; attempt: number }[];
}

/** The task states `event` records, in the order it records them (empty for other events). */
export function recordedTasks(event: unknown): RecordedTask[] {
  const e = event as RawEvent;
  if (e.type === "task" && e.task !== undefined) return [e.task];
  if (e.type === "started")
    return (e.tasks ?? []).map((t) => ({ taskId: t.taskId, status: "running", attempts: t.attempt }));
  return [];
}
