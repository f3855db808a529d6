/**
 * Draft → plan for the heuristic leader: task ids, instances (assignment by strengths, ties round-robin), task
 * descriptions with the goal as context, and the plan message. Pure.
 */
import type { Instance, Task } from "../../../../protocol/common.js";
import { validatePlanGraph } from "../../dag/graph.js";
import type { AgentInfo, DraftPlan } from "../../ports.js";
import { splitGoal } from "./goal-items.js";
import type { DraftTask } from "./goal-items.js";
import { planName } from "./titles.js";
import { MAX_DESCRIPTION, clip, keywords, oneLine } from "./words.js";

/** The instance used when the roster is empty: the leader works alone. */
export const LEADER_INSTANCE: Instance = { instanceId: "leader", agentId: "leader", role: "leader" };
/** How much of the goal is repeated in each task description as context. */
export const MAX_GOAL_CONTEXT = 2_000;
/** At least this many instances (seats) when the roster is smaller and the plan has enough tasks. */
export const MIN_PARALLEL_SEATS = 3;

/**
 * Assigns ids `t1…`, instances (pinned by an "assign" revision, else by strengths, see `assignSeats`), descriptions
 * with goal context and constraints. The plan always passes `validatePlanGraph`.
 */
export function finishDraft(
  goal: string,
  draft: readonly DraftTask[],
  roster: readonly AgentInfo[],
  constraints: string[],
): DraftPlan {
  const id = new Map(draft.map((t, i) => [t, `t${i + 1}`]));
  // Seats: one instance per roster agent, plus extra instances of the same agents (round-robin) up to
  // MIN_PARALLEL_SEATS, so independent tasks can run side by side even with a single agent.
  const seatCount = roster.length === 0 ? 0 : Math.max(roster.length, Math.min(MIN_PARALLEL_SEATS, draft.length));
  const seatOf = assignSeats(draft, roster, seatCount);
  const used = new Set(seatOf.filter((seat) => seat >= 0));
  const order = [...used].sort((a, b) => a - b);
  const instanceIdOf = new Map(order.map((seat, k) => [seat, `i${k + 1}`]));
  const instances: Instance[] =
    roster.length === 0
      ? [{ ...LEADER_INSTANCE }]
      : order.map((seat) => {
          const info = roster[seat % roster.length] as AgentInfo;
          // Numbered among the instances of the same agent the plan uses (#2 is its second one, whatever its seat).
          const copy = order.filter((other) => other < seat && other % roster.length === seat % roster.length).length;
          const name = info.name ? (copy === 0 ? info.name : `${info.name} #${copy + 1}`) : undefined;
          return {
            instanceId: instanceIdOf.get(seat) as string,
            agentId: info.agentId,
            role: clip(info.role || "worker", 200),
            ...(name ? { name: clip(name, 200) } : {}),
          };
        });
  const context = goalContext(goal, constraints);
  const tasks: Task[] = draft.map((t, i) => ({
    taskId: id.get(t) as string,
    title: clip(t.title, 500) || `Step ${i + 1}`,
    description: clip(`${t.text.trim()}${context}`, MAX_DESCRIPTION),
    instanceId: roster.length === 0 ? LEADER_INSTANCE.instanceId : (instanceIdOf.get(seatOf[i] as number) as string),
    dependsOn: [...new Set(t.deps)].filter((d) => id.has(d)).map((d) => id.get(d) as string),
  }));
  if (!validatePlanGraph(instances, tasks).ok) {
    // Unreachable by construction (every revision keeps the draft acyclic); keep only backward edges to be safe.
    const position = new Map(tasks.map((t, i) => [t.taskId, i]));
    tasks.forEach((t, i) => (t.dependsOn = t.dependsOn.filter((d) => (position.get(d) ?? i) < i)));
  }
  const name = planName(goal, splitGoal(goal).length >= 2 ? draft.map((t) => t.title) : []);
  const summary = clip(`${teamPhrase(tasks.length, instances)} for: ${oneLine(goal, 1_000) || name}`, 20_000);
  return { name, summary, instances, tasks };
}

/** "3 tasks on 2 agents". */
export function teamPhrase(tasks: number, instances: readonly Instance[]): string {
  const agents = new Set(instances.map((i) => i.agentId)).size;
  const taskWord = `${tasks} ${tasks === 1 ? "task" : "tasks"}`;
  const agentWord = `${agents} ${agents === 1 ? "agent" : "agents"}`;
  if (instances.length === agents) return `${taskWord} on ${agentWord}`;
  return `${taskWord} on ${instances.length} instances of ${agentWord}`;
}

export function goalContext(goal: string, constraints: readonly string[]): string {
  const g = goal.trim();
  let text = g === "" ? "" : `\n\nOverall goal:\n${clip(g, MAX_GOAL_CONTEXT)}`;
  if (constraints.length > 0)
    text += `\n\nConstraints from the user:\n${constraints.map((c) => `- ${oneLine(c, 1_000)}`).join("\n")}`;
  return text;
}

/** The leader's message about a plan: one line per task, then what changed and the constraints. */
export function planMessage(plan: DraftPlan, notes: readonly string[], constraints: readonly string[]): string {
  const roleOf = new Map(plan.instances.map((i) => [i.instanceId, i.name ? `${i.name}, ${i.role}` : i.role]));
  const lines = [`Here is the plan "${plan.name}": ${teamPhrase(plan.tasks.length, plan.instances)}.`, ""];
  for (const t of plan.tasks) {
    const after = t.dependsOn.length > 0 ? ` (after ${t.dependsOn.join(", ")})` : "";
    lines.push(`${t.taskId}. ${t.title} — ${roleOf.get(t.instanceId) ?? t.instanceId}${after}`);
  }
  if (notes.length > 0) lines.push("", "Changes from your messages:", ...notes.map((n) => `- ${n}`));
  if (constraints.length > 0)
    lines.push("", "Every task also follows:", ...constraints.map((c) => `- ${oneLine(c, 300)}`));
  lines.push(
    "",
    'Confirm to start, or tell me what to change (e.g. "add a task to write docs", "remove task 2", ' +
      '"make t3 depend on t1", "run them in order", "split task 2").',
  );
  return lines.join("\n");
}

/**
 * The seat of each draft task (issue 15, Build 4: strengths drive assignment). Seat `s` is an instance of roster
 * agent `s % roster.length`. A task pinned by an "assign" revision keeps its agent. Otherwise the agents whose
 * strengths share most words with the task's title and text (a strength word matches a task word equal to it or
 * starting with it, "doc" → "documentation") get it, round-robin over their seats when several tie; when no agent's
 * strengths match, the task's position picks the seat round-robin over every seat. When the seat so picked already
 * holds a task that could run beside this one (neither depends on the other, directly or not) and another seat the
 * task may take holds none, the first such seat at or after the picked one is taken instead: independent tasks get
 * instances of their own whichever rule picked them (the two rules used to be counted apart, so a matched and an
 * unmatched task could share an instance and run one after the other). Returns -1s for an empty roster.
 */
export function assignSeats(draft: readonly DraftTask[], roster: readonly AgentInfo[], seatCount: number): number[] {
  if (seatCount === 0) return draft.map(() => -1);
  const strengths = roster.map((a) => keywords(a.strengths.join(" ")));
  const ancestors = ancestorSets(draft);
  const turn = new Map<string, number>();
  const seatOf: number[] = [];
  /** True when seat `seat` holds a task placed so far that could run beside task `i`. */
  const busy = (seat: number, i: number): boolean =>
    seatOf.some((other, j) => other === seat && !ancestors[i]?.has(j) && !ancestors[j]?.has(i));
  draft.forEach((t, i) => {
    if (t.agent !== undefined && t.agent < roster.length) {
      seatOf.push(t.agent);
      return;
    }
    const words = keywords(`${t.title} ${t.text}`);
    const scores = strengths.map((s) => strengthScore(s, words));
    const best = Math.max(...scores);
    const all = Array.from({ length: seatCount }, (_, s) => s);
    let seats = all;
    let picked = i % seatCount;
    if (best > 0) {
      const tied = scores.flatMap((score, k) => (score === best ? [k] : []));
      seats = all.filter((s) => tied.includes(s % roster.length));
      const key = tied.join(",");
      const n = turn.get(key) ?? 0;
      turn.set(key, n + 1);
      picked = seats[n % seats.length] as number;
    }
    if (busy(picked, i)) {
      const free = seats.filter((s) => !busy(s, i));
      picked = free.find((s) => s > picked) ?? free[0] ?? picked;
    }
    seatOf.push(picked);
  });
  return seatOf;
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

/** How many of an agent's strength words match one of the task's words (equal, or one starts the other, ≥ 3 letters). */
function strengthScore(strengths: ReadonlySet<string>, words: ReadonlySet<string>): number {
  let score = 0;
  for (const s of strengths) {
    for (const w of words) {
      if (s === w || (Math.min(s.length, w.length) >= 3 && (w.startsWith(s) || s.startsWith(w)))) {
        score += 1;
        break;
      }
    }
  }
  return score;
}
