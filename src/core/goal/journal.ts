/**
 * The goal run's journal (DESIGN.md guarantees 1, 2, 4 and 6; PROTOCOL.md section 6): appends stamped, validated
 * events to the stream `goal/<goalRunId>` by compare-and-swap on its sequence number, applies them with `evolveGoal`
 * only once they are durable, reads back what other writers (another process, or this one before a restart) appended,
 * announces status changes (`x/goal.statusChanged`) and keeps the `x/goal.list` header in step. It follows the rules
 * every journal follows (src/core/product/event-journal.ts: stamping, reading back, what a refused append means).
 *
 * Owns the state's position in the stream and the fence: once an append was refused this instance never writes again
 * (`onFenced` tells the goal run to stop). Never decides what to record (decide.ts does); no I/O except the ports.
 */
import { conflict } from "../errors.js";
import type { Clock, Logger, Notifier, RunStateAuthority } from "../ports.js";
import { appendFailure, foldStored, stampEvents, type Unstamped } from "../product/event-journal.js";
import { evolveGoal } from "./evolve.js";
import { GoalEvent, goalStream, type GoalHeaderRecord, type GoalState } from "./records.js";

/** Events as decide.ts builds them: `v` and `at` are stamped on append. */
export type NewGoalEvent = Unstamped<GoalEvent>;

/** What the journal needs of the goal run's context. */
export interface GoalJournalContext {
  authority: RunStateAuthority;
  notifier: Notifier;
  clock: Clock;
  logger: Logger;
}

/** Event types after which the goal's status may have changed (`x/goal.statusChanged` follows each). */
const STATUS_EVENTS: ReadonlySet<GoalEvent["type"]> = new Set(["status", "resumed", "ended"]);

/**
 * Validates events against the schema after stamping. An event that does not match is a bug of the caller: throws a
 * plain Error before anything is written. Pure.
 */
export function stampGoalEvents(events: readonly NewGoalEvent[], at: string): GoalEvent[] {
  return stampEvents<GoalEvent>(events, at).map((e) => {
    const parsed = GoalEvent.safeParse(e);
    if (!parsed.success) throw new Error(`invalid goal event ${e.type}: ${parsed.error.message}`);
    return parsed.data;
  });
}

export class GoalJournal {
  #fenced = false;
  /** The header record's revision: undefined until read (or after a failed write), null when there is none. */
  #headerRevision: number | null | undefined = undefined;

  constructor(
    /** The goal run's state, changed in place by `evolveGoal` as events are applied. */
    readonly state: GoalState,
    private readonly ctx: GoalJournalContext,
    /** Called once when an append is refused (another writer appended): the goal run stops. */
    private readonly onFenced: () => void,
  ) {}

  /** True once an append of this instance was refused: it never writes again. */
  get fenced(): boolean {
    return this.#fenced;
  }

  /** Fences this instance for good (its lease was lost: another process drives the goal run now). */
  fence(): void {
    this.#fenced = true;
  }

  private get subject(): string {
    return `Goal run ${this.state.goalRunId}`;
  }

  /**
   * Appends events (compare-and-swap on the stream's sequence number), then applies them and announces status
   * changes. Call after `refresh`, serialised with every other write of the goal run. Throws `conflict` when someone
   * else appended (this instance is fenced), `persistence_failed` when the authority failed; nothing is applied then.
   * A failed header write is logged, never thrown.
   */
  async commit(events: readonly NewGoalEvent[]): Promise<void> {
    if (this.#fenced) throw conflict({}, this.subject);
    const stamped = stampGoalEvents(events, new Date(this.ctx.clock.now()).toISOString());
    const s = this.state;
    const from = s.seq;
    try {
      await this.ctx.authority.appendEvents(s.projectId, goalStream(s.goalRunId), stamped, from);
    } catch (err) {
      const failure = appendFailure(err, this.subject);
      if (failure.refused) {
        this.#fenced = true;
        this.onFenced();
      }
      throw failure.error;
    }
    // A concurrent `refresh` may already have applied some of them: each seq is applied once.
    stamped.forEach((e, i) => {
      if (from + i + 1 > s.seq) evolveGoal(s, e, from + i + 1);
    });
    for (const e of stamped) {
      if (STATUS_EVENTS.has(e.type)) {
        this.ctx.notifier.notify("x/goal.statusChanged", { goalRunId: s.goalRunId, status: s.status });
      }
    }
    await this.writeHeader().catch((err: unknown) => {
      this.#headerRevision = undefined; // re-read it next time
      this.ctx.logger.warn({ err, goalRunId: s.goalRunId }, "goal header write failed");
    });
  }

  /**
   * Applies events written since we last looked (by this process, another one, or before a restart). Reading never
   * writes; an event that does not parse, or a gap in the sequence, is skipped and counted in `dropped` (guarantee
   * 4), and a goal run with one is never driven again (PROTOCOL.md section 6: goal runs fail closed).
   */
  async refresh(): Promise<void> {
    const s = this.state;
    const events = await this.ctx.authority.readEvents(s.projectId, goalStream(s.goalRunId), s.seq);
    s.dropped += foldStored<GoalEvent>(events, {
      position: () => s.seq,
      parse: (raw) => {
        const parsed = GoalEvent.safeParse(raw);
        return parsed.success ? parsed.data : undefined;
      },
      apply: (event, seq) => evolveGoal(s, event, seq),
      skip: (seq) => {
        s.seq = seq;
      },
    });
  }

  /** Writes the `x/goal.list` header from the current state (compare-and-swap on its revision). */
  private async writeHeader(): Promise<void> {
    const s = this.state;
    const header: GoalHeaderRecord = {
      v: 1,
      goalRunId: s.goalRunId,
      projectId: s.projectId,
      status: s.status,
      goal: s.goal,
      phaseIndex: currentPhaseIndex(s),
      startedAt: s.startedAt,
      updatedAt: s.updatedAt,
    };
    if (this.#headerRevision === undefined) {
      const current = await this.ctx.authority.get(s.projectId, "goal", s.goalRunId);
      this.#headerRevision = current ? current.revision : null;
    }
    const { revision } = await this.ctx.authority.put(s.projectId, "goal", s.goalRunId, header, this.#headerRevision);
    this.#headerRevision = revision;
  }
}

/**
 * The `phaseIndex` of `x/goal.status` and `x/goal.list`: the 0-based index of the latest phase that started, as in the
 * `x/goal.phaseStarted` and `x/goal.phaseAssessed` notifications (PROTOCOL.md section 6); 0 before any phase started.
 * (The state's own `phaseIndex` moves to the next phase once one is assessed, one ahead of what the client was told.)
 */
export function currentPhaseIndex(s: { phaseIndex: number; phasesStarted: number }): number {
  return Math.max(0, Math.min(s.phaseIndex, s.phasesStarted - 1));
}
