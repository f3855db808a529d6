/**
 * Replaying a goal run's journal always equals the live state (issue 27, "Must show", for src/core/goal): `evolveGoal`
 * (src/core/goal/evolve.ts) is the one meaning of a goal run's events. The live state (what `GoalJournal.commit`
 * leaves after each append, in random batches), a pure fold of `evolveGoal` over the journal, a fresh load from the
 * authority (`GoalJournal.refresh` from nothing: the goal run after a restart) and a second reader that refreshed
 * half-way and caught up must all give the same state — also when another writer's events arrive in between.
 *
 * The sequences come from a small seeded generator (mulberry32; `GOAL_EVOLVE_SEED` and `GOAL_EVOLVE_RUNS` override)
 * that draws every kind of goal event with schema-valid fields; the journal validates each append, so an invalid
 * draw fails the test instead of being silently skipped by a load.
 */
import { describe, expect, it } from "vitest";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { evolveGoal } from "../../../src/core/goal/evolve.js";
import { GoalJournal, stampGoalEvents, type NewGoalEvent } from "../../../src/core/goal/journal.js";
import { emptyGoalState, goalStream, type GoalEvent, type GoalState } from "../../../src/core/goal/records.js";
import { FakeClock, RecordingLogger, RecordingNotifier } from "../../support/fakes.js";
import { seededRandom as rng } from "../../support/seeded-random.js";

const RUNS = Number(process.env.GOAL_EVOLVE_RUNS ?? 1_000);
const SEED = Number(process.env.GOAL_EVOLVE_SEED ?? 27_2027);
const PROJECT = "proj";
const STATUSES = ["running", "paused", "blocked", "budget_limited", "completed", "stopped", "failed"] as const;
const END_REASONS = ["achieved", "no_progress", "budget", "max_phases", "stopped", "failed"] as const;

class Draw {
  constructor(readonly next: () => number) {}
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  ids(prefix: string, max: number): string[] {
    return Array.from({ length: this.int(max + 1) }, (_, i) => `${prefix}${i}`).filter(() => this.chance(0.7));
  }
}

function drawBudget(d: Draw): Record<string, number> {
  const out: Record<string, number> = {};
  if (d.chance(0.5)) out.maxTotalTokens = 1 + d.int(10_000);
  if (d.chance(0.3)) out.maxDurationMs = 1 + d.int(100_000);
  if (d.chance(0.3)) out.maxPhases = 1 + d.int(5);
  return out;
}

/** One event after `goal_started`, of any kind, about criteria `c0…c3` and phases 0–3. */
function drawEvent(d: Draw, n: number): NewGoalEvent {
  const phaseIndex = d.int(4);
  switch (d.int(13)) {
    case 0:
      return {
        type: "criteria_derived",
        criteria: Array.from({ length: 1 + d.int(4) }, (_, i) => ({ id: `c${i}`, text: d.pick(["A", "B", "C"]) + i })),
        message: `derived ${n}`,
      };
    case 1:
      return { type: "goal_edited", goal: `goal ${d.int(3)}` };
    case 2:
      return { type: "message_queued", content: `message ${n}` };
    case 3:
      return { type: "boundary", goal: `goal ${d.int(3)}`, consumed: d.int(4) };
    case 4:
      return { type: "phase_planned", phaseIndex, targets: d.ids("c", 3), message: `plan ${n}` };
    case 5:
      return { type: "phase_started", phaseIndex, productId: `prd_${n}` };
    case 6:
      return { type: "task_settled", phaseIndex, taskId: `t${d.int(3)}`, status: d.pick(["completed", "failed"]) };
    case 7:
      return {
        type: "phase_assessed",
        phaseIndex,
        passed: d.ids("c", 3),
        newlyPassed: d.ids("c", 2),
        regressed: d.ids("c", 1),
        phaseTokens: d.int(5_000),
        phaseElapsedMs: d.int(50_000),
        productPhase: d.pick(["completed", "failed", "missing"]),
        message: `assessed ${n}`,
      };
    case 8:
      return { type: "status", status: d.pick(STATUSES), ...(d.chance(0.6) ? { reason: `why ${n}` } : {}) };
    case 9:
      return {
        type: "resumed",
        ...(d.chance(0.6) ? { additionalBudget: drawBudget(d) } : {}),
        ...(d.chance(0.5) ? { spentTokens: d.int(20_000), spentMs: d.int(200_000) } : {}),
      };
    case 10:
      return {
        type: "ended",
        endReason: d.pick(END_REASONS),
        summary: `ended ${n}`,
        ...(d.chance(0.3) ? { failedReason: `failed ${n}` } : {}),
      };
    case 11:
      return {
        type: "criterion_checked",
        criterionId: `c${d.int(4)}`,
        result: {
          ok: d.chance(0.5),
          exitCode: d.pick([0, 1, 2, null]),
          ...(d.chance(0.2) ? { timedOut: true } : {}),
          durationMs: d.int(10_000),
          outputTail: `output ${n}`,
          phaseIndex,
          productId: `prd_${d.int(3)}`,
          ...(d.chance(0.8) ? { commit: "c".repeat(40), tree: "d".repeat(40) } : {}),
        },
      };
    default:
      return { type: "message_queued", content: `late message ${n}` };
  }
}

function started(id: string, d: Draw): NewGoalEvent {
  return {
    type: "goal_started",
    goalRunId: id,
    projectId: PROJECT,
    goal: "goal 0",
    cwd: "/work/proj",
    ...(d.chance(0.5) ? { sessionId: "sess_1" } : {}),
    budget: drawBudget(d),
    noProgressLimit: 1 + d.int(5),
    ...(d.chance(0.3)
      ? {
          criteria: Array.from({ length: 1 + d.int(3) }, (_, i) => ({
            id: `c${i}`,
            text: `given ${i}`,
            ...(d.chance(0.5)
              ? { check: { run: `test -f f${i}`, ...(d.chance(0.5) ? { timeoutMs: 1_000 } : {}) } }
              : {}),
          })),
        }
      : {}),
  };
}

function fresh(id: string): GoalState {
  const s = emptyGoalState();
  s.projectId = PROJECT;
  s.goalRunId = id;
  return s;
}

/** A state as plain data (no undefined fields, no sparse-array holes), for comparison. */
function plain(s: GoalState): unknown {
  return JSON.parse(JSON.stringify(s));
}

async function checkOne(run: number): Promise<void> {
  const d = new Draw(rng(SEED + run));
  const id = `goal_${run}`;
  const authority = new MemoryAuthority();
  const clock = new FakeClock();
  const ctx = { authority, clock, notifier: new RecordingNotifier(), logger: new RecordingLogger() };
  const live = new GoalJournal(fresh(id), ctx, () => undefined);
  const reader = new GoalJournal(fresh(id), ctx, () => undefined);
  await live.commit([started(id, d)]);
  const total = 1 + d.int(30);
  let n = 0;
  while (n < total) {
    const batch = Array.from({ length: 1 + d.int(3) }, () => drawEvent(d, n++));
    clock.advance(1 + d.int(5_000));
    if (d.chance(0.15)) {
      // Another writer appends: the live journal is behind until it refreshes, as after another process's write.
      const at = new Date(clock.now()).toISOString();
      await authority.appendEvents(PROJECT, goalStream(id), stampGoalEvents(batch, at), live.state.seq);
      await live.refresh();
    } else await live.commit(batch);
    if (d.chance(0.2)) await reader.refresh();
  }
  const stored = await authority.readEvents(PROJECT, goalStream(id), 0);
  const expected = plain(live.state);
  const folded = fresh(id);
  stored.forEach(({ seq, event }) => evolveGoal(folded, event as GoalEvent, seq));
  expect(plain(folded), "a pure fold of evolveGoal over the journal").toEqual(expected);
  const loaded = new GoalJournal(fresh(id), ctx, () => undefined);
  await loaded.refresh();
  expect(loaded.state.dropped, "events dropped on load").toBe(0);
  expect(plain(loaded.state), "a fresh load").toEqual(expected);
  await reader.refresh();
  expect(plain(reader.state), "a reader that refreshed half-way and caught up").toEqual(expected);
}

describe("evolveGoal: replaying a goal run's journal equals the live state", () => {
  it(`holds for ${RUNS} random journals (seed ${SEED})`, async () => {
    for (let run = 0; run < RUNS; run++) await checkOne(run);
  }, 120_000);

  it("counts a gap and an event that does not parse as dropped, and applies the rest (guarantee 4)", async () => {
    const authority = new MemoryAuthority();
    const ctx = { authority, clock: new FakeClock(), notifier: new RecordingNotifier(), logger: new RecordingLogger() };
    const live = new GoalJournal(fresh("goal_gap"), ctx, () => undefined);
    await live.commit([started("goal_gap", new Draw(rng(1)))]);
    await authority.appendEvents(PROJECT, goalStream("goal_gap"), [{ v: 1, type: "bogus" }], 1);
    await live.refresh();
    await live.commit([{ type: "message_queued", content: "after" }]);
    const loaded = new GoalJournal(fresh("goal_gap"), ctx, () => undefined);
    await loaded.refresh();
    expect(loaded.state.dropped).toBe(1);
    expect(loaded.state.queued).toEqual(["after"]);
    expect(loaded.state.seq).toBe(3);
  });
});
