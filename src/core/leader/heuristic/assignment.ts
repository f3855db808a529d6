/**
 * Assignment of draft tasks to instances for the heuristic leader (issue 28: the team the user configured is the team
 * that runs). Every task goes to an agent of the roster — the best match by strengths, else the config's default
 * agent, else round-robin — and then to an instance (seat) of that agent: independent tasks get seats of their own up
 * to `maxSeats` in all and each agent's `maxInstances`. Says why for every task. Pure; no I/O.
 */
import type { AgentInfo } from "../../ports.js";
import type { DraftTask } from "./goal-items.js";
import { joinList, keywords } from "./words.js";

/** Why a task went to its agent. */
export type AssignmentReason =
  | { kind: "pinned" }
  | { kind: "strengths"; matched: string[] }
  | { kind: "default" }
  | { kind: "roundRobin" };

/** One instance of the plan: the roster index of its agent and its number among that agent's instances (0-based). */
export interface Seat {
  agent: number;
  copy: number;
}

/** The result of `assignTasks`: the seats in order of first use, each task's seat index and reason. */
export interface Assignment {
  seats: Seat[];
  seatOf: number[];
  reasons: AssignmentReason[];
}

/**
 * Assigns every draft task to a seat. `maxSeats` bounds the instances of the plan (the product's `maxParallelTasks`:
 * more could never run at once); an agent's `maxInstances` bounds its own. A task pinned by an "assign" revision
 * (`agent`, a roster index) keeps its agent. Otherwise the agents whose strengths share most words with the task's
 * title and text (a strength word matches a task word equal to it or, from 3 letters, starting with it) are the
 * candidates; with no match the config's default agent (`AgentInfo.default`) is, else every agent. Among several
 * candidates a round-robin turn (kept per candidate set) picks the first that has a seat free for this task (holding
 * no task that could run beside it) or may open one; a new seat is opened only when the agent has no free one. With
 * no seat to spare the task shares the least loaded seat of the picked agent (it then runs after the other task).
 * An empty roster gives an empty assignment (`seatOf` all -1).
 */
export function assignTasks(draft: readonly DraftTask[], roster: readonly AgentInfo[], maxSeats: number): Assignment {
  const seats: Seat[] = [];
  const seatOf: number[] = [];
  const reasons: AssignmentReason[] = [];
  if (roster.length === 0)
    return { seats, seatOf: draft.map(() => -1), reasons: draft.map(() => ({ kind: "roundRobin" })) };
  const strengths = roster.map((a) => keywords(a.strengths.join(" ")));
  const ancestors = ancestorSets(draft);
  const turn = new Map<string, number>();
  const fallback = roster.findIndex((a) => a.default === true);
  const busy = (seat: number, i: number): boolean =>
    seatOf.some((other, j) => other === seat && !ancestors[i]?.has(j) && !ancestors[j]?.has(i));
  const seatsOfAgent = (agent: number): number[] => seats.flatMap((s, k) => (s.agent === agent ? [k] : []));
  const canOpen = (agent: number): boolean =>
    seats.length < maxSeats && seatsOfAgent(agent).length < (roster[agent]?.maxInstances ?? Infinity);
  const freeSeat = (agent: number, i: number): number | undefined => seatsOfAgent(agent).find((s) => !busy(s, i));
  draft.forEach((t, i) => {
    let candidates: number[];
    let reason: AssignmentReason;
    const words = keywords(`${t.title} ${t.text}`);
    if (t.agent !== undefined && t.agent < roster.length) {
      candidates = [t.agent];
      reason = { kind: "pinned" };
    } else {
      const scores = strengths.map((s) => matchedStrengths(s, words).length);
      const best = Math.max(...scores);
      if (best > 0) {
        candidates = scores.flatMap((score, k) => (score === best ? [k] : []));
        reason = { kind: "strengths", matched: [] };
      } else if (fallback >= 0) {
        candidates = [fallback];
        reason = { kind: "default" };
      } else {
        candidates = roster.map((_, k) => k);
        reason = { kind: "roundRobin" };
      }
    }
    const key = candidates.join(",");
    const n = turn.get(key) ?? 0;
    turn.set(key, n + 1);
    const rotated = candidates.map((_, k) => candidates[(n + k) % candidates.length] as number);
    const agent = rotated.find((a) => freeSeat(a, i) !== undefined || canOpen(a)) ?? (rotated[0] as number);
    let seat = freeSeat(agent, i);
    if (seat === undefined && canOpen(agent)) {
      seats.push({ agent, copy: seatsOfAgent(agent).length });
      seat = seats.length - 1;
    }
    if (seat === undefined) seat = leastLoaded(seatsOfAgent(agent), seatOf);
    if (reason.kind === "strengths") reason.matched = matchedStrengths(strengths[agent] as ReadonlySet<string>, words);
    seatOf.push(seat);
    reasons.push(reason);
  });
  return { seats, seatOf, reasons };
}

/** The reason in words for the plan message, e.g. `its strengths match "tests"`. Pure. */
export function describeReason(reason: AssignmentReason): string {
  switch (reason.kind) {
    case "pinned":
      return "as you asked";
    case "strengths":
      return `its strengths match ${joinList(reason.matched.map((w) => `"${w}"`))}`;
    case "default":
      return "no agent's strengths match; the default agent";
    case "roundRobin":
      return "no agent's strengths match; round-robin";
  }
}

/** The seat among `candidates` that holds the fewest tasks so far (the first on a tie). Non-empty `candidates`. */
function leastLoaded(candidates: readonly number[], seatOf: readonly number[]): number {
  let pick = candidates[0] as number;
  let load = Infinity;
  for (const seat of candidates) {
    const count = seatOf.filter((s) => s === seat).length;
    if (count < load) {
      pick = seat;
      load = count;
    }
  }
  return pick;
}

/** For each draft task, the indexes of the tasks it depends on, directly or not. */
function ancestorSets(draft: readonly DraftTask[]): Set<number>[] {
  const index = new Map(draft.map((t, i) => [t, i]));
  const memo: (Set<number> | undefined)[] = [];
  const of = (i: number, seen: Set<number>): Set<number> => {
    const known = memo[i];
    if (known !== undefined) return known;
    const out = new Set<number>();
    seen.add(i);
    for (const dep of draft[i]?.deps ?? []) {
      const j = index.get(dep);
      if (j === undefined || seen.has(j)) continue;
      out.add(j);
      for (const k of of(j, seen)) out.add(k);
    }
    seen.delete(i);
    memo[i] = out;
    return out;
  };
  return draft.map((_, i) => of(i, new Set()));
}

/** The agent's strength words that match one of the task's words (equal, or one starts the other, ≥ 3 letters). */
export function matchedStrengths(strengths: ReadonlySet<string>, words: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const s of strengths) {
    for (const w of words) {
      if (s === w || (Math.min(s.length, w.length) >= 3 && (w.startsWith(s) || s.startsWith(w)))) {
        out.push(s);
        break;
      }
    }
  }
  return out;
}
