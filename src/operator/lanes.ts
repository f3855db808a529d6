/**
 * Which tasks ran in parallel (issue 15, the demo's "parallel lanes"): each task that ran gets a lane, the lowest one
 * free when it started (interval partitioning), so tasks sharing a time span sit in different lanes; and a text
 * timeline of those lanes.
 *
 * Pure functions of the tasks' recorded `startedAt`/`endedAt` (ISO times) and the `now` passed in: no I/O.
 */
import { formatDuration } from "./format.js";

export interface TimedTask {
  taskId: string;
  startedAt?: string;
  endedAt?: string;
}

export interface LaneAssignment {
  /** taskId → lane (1-based); tasks that never started have none. */
  lanes: Map<string, number>;
  /** Number of lanes used (the most tasks that ran at once). */
  count: number;
  /** When the first task started and the last one ended (ms since the epoch); undefined when none ran. */
  start?: number;
  end?: number;
}

function span(t: TimedTask, now: number): [number, number] | undefined {
  const s = t.startedAt ? Date.parse(t.startedAt) : NaN;
  if (!Number.isFinite(s)) return undefined;
  const e = t.endedAt ? Date.parse(t.endedAt) : now;
  return [s, Number.isFinite(e) ? Math.max(s, e) : s];
}

/** Assigns lanes by start time; a task still running counts as running until `now`. */
export function assignLanes(tasks: readonly TimedTask[], now: number): LaneAssignment {
  const timed = tasks
    .map((t) => ({ t, s: span(t, now) }))
    .filter((x): x is { t: TimedTask; s: [number, number] } => x.s !== undefined)
    .sort((a, b) => a.s[0] - b.s[0] || a.t.taskId.localeCompare(b.t.taskId));
  const laneEnds: number[] = [];
  const lanes = new Map<string, number>();
  for (const { t, s } of timed) {
    let lane = laneEnds.findIndex((end) => end <= s[0]);
    if (lane < 0) lane = laneEnds.push(s[1]) - 1;
    else laneEnds[lane] = s[1];
    lanes.set(t.taskId, lane + 1);
  }
  if (timed.length === 0) return { lanes, count: 0 };
  return {
    lanes,
    count: laneEnds.length,
    start: Math.min(...timed.map((x) => x.s[0])),
    end: Math.max(...timed.map((x) => x.s[1])),
  };
}

/**
 * One line per lane, `width` characters of time axis: each task drawn as `[id===]` over the span it ran (at least its
 * id's width), e.g. `lane 1 |[t1====]  [t3==]  |`. Followed by the axis' length. Empty string when nothing ran.
 */
export function laneTimeline(tasks: readonly TimedTask[], now: number, width = 60): string {
  const a = assignLanes(tasks, now);
  if (a.count === 0 || a.start === undefined || a.end === undefined) return "";
  const total = Math.max(1, a.end - a.start);
  const rows: string[][] = Array.from({ length: a.count }, () => Array<string>(width).fill(" "));
  for (const t of tasks) {
    const lane = a.lanes.get(t.taskId);
    const s = span(t, now);
    if (lane === undefined || s === undefined) continue;
    const row = rows[lane - 1] as string[];
    const from = Math.min(width - 1, Math.floor(((s[0] - a.start) / total) * width));
    const to = Math.min(width, Math.max(from + t.taskId.length + 2, Math.floor(((s[1] - a.start) / total) * width)));
    const cells = `[${t.taskId}${"=".repeat(Math.max(0, to - from - t.taskId.length - 2))}]`.slice(0, width - from);
    for (let i = 0; i < cells.length; i++) row[from + i] = cells[i] as string;
  }
  const lines = rows.map((r, i) => `lane ${i + 1} |${r.join("")}|`);
  lines.push(
    `${" ".repeat(7)}0${" ".repeat(Math.max(1, width - 1 - formatDuration(total).length))}${formatDuration(total)}`,
  );
  return `${lines.join("\n")}\n`;
}
