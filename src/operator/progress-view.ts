/**
 * Live progress of one product for the terminal (issue 15: TTY-aware): in a terminal a block of one line per task
 * (status, duration, attempts, last output line) redrawn in place; otherwise plain lines, one per status change.
 *
 * Owns rendering only; it is fed task states and output text, and writes through the `write` it is given.
 */
import type { TaskState } from "../../protocol/common.js";
import { clip, formatDuration, lastLine, shownStatus, taskDurationMs } from "./format.js";

const MARK: Record<string, string> = {
  pending: "·",
  running: "▶",
  waiting: "?",
  completed: "✓",
  failed: "✗",
  skipped: "-",
  cancelled: "-",
};

export interface ProgressViewOptions {
  write: (text: string) => void;
  /** Redraw in place (a terminal) rather than print lines. */
  live: boolean;
  /** Terminal width for clipping (default 100). */
  columns?: number;
}

export class ProgressView {
  private tasks: TaskState[] = [];
  private readonly output = new Map<string, string>();
  private readonly reported = new Map<string, string>();
  private drawn = 0;

  constructor(private readonly options: ProgressViewOptions) {}

  /** Appends streamed output of a task (its last line is shown). */
  addOutput(taskId: string, text: string): void {
    const prev = this.output.get(taskId) ?? "";
    this.output.set(taskId, (prev + text).slice(-2000));
  }

  /** Takes the current task states (from product.status) and renders what changed. */
  update(tasks: TaskState[], now: number): void {
    this.tasks = tasks;
    if (this.options.live) return this.redraw(now);
    for (const t of tasks) {
      // A failed task a fix-up replaces is shown superseded (as status shows it), once more when that is known.
      const key = `${shownStatus(t)}:${t.attempts}`;
      if (this.reported.get(t.taskId) === key) continue;
      this.reported.set(t.taskId, key);
      if (t.status === "pending" && t.attempts === 0) continue;
      this.options.write(`${this.line(t, now)}\n`);
    }
  }

  /** The final redraw (live) — plain mode has printed everything already. */
  finish(now: number): void {
    if (this.options.live) this.redraw(now);
  }

  /** Tasks that ran at the same time as at least one other task (parallel lanes), by start/end times. */
  static lanes(tasks: readonly TaskState[]): Map<string, number> {
    const spans = tasks
      .filter((t) => t.startedAt && t.endedAt)
      .map((t) => ({ id: t.taskId, start: Date.parse(t.startedAt as string), end: Date.parse(t.endedAt as string) }))
      .sort((a, b) => a.start - b.start);
    const laneEnds: number[] = [];
    const lanes = new Map<string, number>();
    for (const s of spans) {
      let lane = laneEnds.findIndex((end) => end <= s.start);
      if (lane < 0) lane = laneEnds.push(s.end) - 1;
      else laneEnds[lane] = s.end;
      lanes.set(s.id, lane + 1);
    }
    return lanes;
  }

  private line(t: TaskState, now: number): string {
    const d = taskDurationMs(t, now);
    const out = lastLine(this.output.get(t.taskId) ?? t.output, 60);
    const err = t.error ? ` — ${clip(t.error.replace(/\s+/g, " "), 60)}` : "";
    const text = `${MARK[t.status] ?? " "} ${t.taskId.padEnd(4)} ${shownStatus(t).padEnd(9)} ${(d === undefined ? "" : formatDuration(d)).padStart(8)}  #${t.attempts}  ${clip(t.title, 40)}${err}${out && !err ? `  | ${out}` : ""}`;
    return clip(text, this.options.columns ?? 100);
  }

  private redraw(now: number): void {
    let text = this.drawn > 0 ? `\x1b[${this.drawn}F` : "";
    for (const t of this.tasks) text += `\x1b[2K${this.line(t, now)}\n`;
    this.drawn = this.tasks.length;
    this.options.write(text);
  }
}
