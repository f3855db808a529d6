/**
 * Draft → plan for the heuristic leader: task ids, instances (assignment.ts), task descriptions with the goal as
 * context, and the plan message (which says why each task went to its agent). Pure.
 */
import type { Instance, Task } from "../../../../protocol/common.js";
import { validatePlanGraph } from "../../dag/graph.js";
import type { AgentInfo, DraftPlan } from "../../ports.js";
import { assignTasks, describeReason } from "./assignment.js";
import { splitGoal } from "./goal-items.js";
import type { DraftTask } from "./goal-items.js";
import { planName } from "./titles.js";
import { MAX_DESCRIPTION, clip, oneLine } from "./words.js";

/** The instance used when the roster is empty: the leader works alone. */
export const LEADER_INSTANCE: Instance = { instanceId: "leader", agentId: "leader", role: "leader" };
/** How much of the goal is repeated in each task description as context. */
export const MAX_GOAL_CONTEXT = 2_000;

/** A finished draft and, per task id, why its agent was chosen (in words, for the plan message). */
export interface FinishedDraft {
  plan: DraftPlan;
  reasons: Map<string, string>;
}

/**
 * Assigns ids `t1…`, instances (assignment.ts: pinned by an "assign" revision, else by strengths, else the default
 * agent, else round-robin; at most `maxSeats` instances — the product's `maxParallelTasks` — and each agent's
 * `maxInstances`), descriptions with goal context and constraints. The plan always passes `validatePlanGraph`.
 */
export function finishDraft(
  goal: string,
  draft: readonly DraftTask[],
  roster: readonly AgentInfo[],
  constraints: string[],
  maxSeats = Infinity,
): FinishedDraft {
  const id = new Map(draft.map((t, i) => [t, `t${i + 1}`]));
  const assignment = assignTasks(draft, roster, Math.max(1, maxSeats));
  const instances: Instance[] =
    roster.length === 0
      ? [{ ...LEADER_INSTANCE }]
      : assignment.seats.map((seat, k) => {
          const info = roster[seat.agent] as AgentInfo;
          // Numbered among the instances of the same agent (#2 is its second one).
          const name = info.name ? (seat.copy === 0 ? info.name : `${info.name} #${seat.copy + 1}`) : undefined;
          return {
            instanceId: `i${k + 1}`,
            agentId: info.agentId,
            role: clip(info.role || "worker", 200),
            ...(name ? { name: clip(name, 200) } : {}),
          };
        });
  const context = goalContext(goal, constraints);
  const reasons = new Map<string, string>();
  const tasks: Task[] = draft.map((t, i) => {
    const taskId = id.get(t) as string;
    const reason = assignment.reasons[i];
    // With one agent there is no choice to explain.
    if (roster.length > 1 && reason !== undefined) reasons.set(taskId, describeReason(reason));
    return {
      taskId,
      title: clip(t.title, 500) || `Step ${i + 1}`,
      description: clip(`${t.text.trim()}${context}`, MAX_DESCRIPTION),
      instanceId: roster.length === 0 ? LEADER_INSTANCE.instanceId : `i${(assignment.seatOf[i] as number) + 1}`,
      dependsOn: [...new Set(t.deps)].filter((d) => id.has(d)).map((d) => id.get(d) as string),
    };
  });
  if (!validatePlanGraph(instances, tasks).ok) {
    // Unreachable by construction (every revision keeps the draft acyclic); keep only backward edges to be safe.
    const position = new Map(tasks.map((t, i) => [t.taskId, i]));
    tasks.forEach((t, i) => (t.dependsOn = t.dependsOn.filter((d) => (position.get(d) ?? i) < i)));
  }
  const name = planName(goal, splitGoal(goal).length >= 2 ? draft.map((t) => t.title) : []);
  const summary = clip(`${teamPhrase(tasks.length, instances)} for: ${oneLine(goal, 1_000) || name}`, 20_000);
  return { plan: { name, summary, instances, tasks }, reasons };
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

/**
 * The leader's message about a plan: one line per task (with why its agent was chosen, from `reasons`), then what
 * changed and the constraints.
 */
export function planMessage(
  plan: DraftPlan,
  notes: readonly string[],
  constraints: readonly string[],
  reasons: ReadonlyMap<string, string> = new Map(),
): string {
  const roleOf = new Map(plan.instances.map((i) => [i.instanceId, i.name ? `${i.name}, ${i.role}` : i.role]));
  const lines = [`Here is the plan "${plan.name}": ${teamPhrase(plan.tasks.length, plan.instances)}.`, ""];
  for (const t of plan.tasks) {
    const after = t.dependsOn.length > 0 ? ` (after ${t.dependsOn.join(", ")})` : "";
    const why = reasons.get(t.taskId);
    lines.push(
      `${t.taskId}. ${t.title} — ${roleOf.get(t.instanceId) ?? t.instanceId}${after}${why ? ` [${why}]` : ""}`,
    );
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
