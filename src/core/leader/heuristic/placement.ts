/**
 * Where the heuristic leader puts a task it adds to a live plan (issue 28: the team the user configured is the team
 * that runs): on the least loaded instance able to take it, not on the next one in turn. A task added by a user's
 * message while one instance is busy and another idle starts at once on the idle one instead of waiting behind the
 * running task. The choice is the `instanceId` of the `addTask` mutation, stored with the `mutated` event: replay and
 * recovery read it from there and never choose again. Pure; no I/O.
 */
import type { Instance, Plan, TaskState } from "../../../../protocol/common.js";
import type { AgentInfo } from "../../team.js";
import { matchedStrengths } from "./assignment.js";
import { joinList, keywords } from "./words.js";

/** What one instance has on its hands: tasks running now, pending tasks ready to start, all pending tasks. */
export interface InstanceLoad {
  running: number;
  ready: number;
  pending: number;
}

/** The chosen instance and why, in words for the leader's answer (empty when the plan had no choice to make). */
export interface AddedTaskPlacement {
  instance: Instance;
  /**
   * Where the task goes and why, for the leader's answer: `on i2 (codex, idle)`; always names the instance and its
   * agent (docs/AGENTS.md "Tasks added during the run"), also when only one instance could take it.
   */
  reason: string;
}

/**
 * The load of every instance of `plan` from the tasks' live `states` (a state whose instance is not in the plan is
 * not counted). `ready` counts the pending tasks whose dependencies all completed (the scheduler would start them
 * now, or parks them behind the instance's running task); `pending` counts every pending task. O(V+E).
 */
export function instanceLoads(plan: Plan, states: readonly TaskState[]): Map<string, InstanceLoad> {
  const loads = new Map(plan.instances.map((i) => [i.instanceId, { running: 0, ready: 0, pending: 0 }]));
  const status = new Map(states.map((s) => [s.taskId, s.status]));
  for (const s of states) {
    const load = loads.get(s.instanceId);
    if (!load) continue;
    if (s.status === "running") load.running += 1;
    if (s.status !== "pending") continue;
    load.pending += 1;
    if (s.dependsOn.every((d) => status.get(d) === "completed")) load.ready += 1;
  }
  return loads;
}

/**
 * The least loaded of `candidates` (non-empty): an idle instance (nothing running) before a busy one; among equals
 * the one with the fewest ready tasks, then the fewest pending tasks; a remaining tie goes to the first in
 * `candidates` order (the plan's instance order), so the same live state always gives the same instance.
 */
export function leastLoadedInstance(
  candidates: readonly Instance[],
  loads: ReadonlyMap<string, InstanceLoad>,
): Instance {
  const none: InstanceLoad = { running: 0, ready: 0, pending: 0 };
  const key = (i: Instance): number[] => {
    const load = loads.get(i.instanceId) ?? none;
    return [Math.min(load.running, 1), load.ready, load.pending];
  };
  let pick = candidates[0] as Instance;
  let best = key(pick);
  for (const candidate of candidates.slice(1)) {
    const k = key(candidate);
    const i = k.findIndex((v, n) => v !== best[n]);
    if (i >= 0 && (k[i] as number) < (best[i] as number)) {
      pick = candidate;
      best = k;
    }
  }
  return pick;
}

/**
 * Chooses the instance of a task added to the live plan, from its title and text. Able to take it: a worker
 * instance (role not `leader`) of an agent of `roster` (the product's team; every instance when the roster is empty
 * or names none of them); among those, the instances of the agents whose `strengths` share most words with the task
 * (the planning rule, assignment.ts), else those of the config's default agent, else all of them. Of these, the least
 * loaded (`leastLoadedInstance` over `states`). A plan without worker instances (the leader works alone) gives its
 * first instance. Non-empty `plan.instances`.
 */
export function placeAddedTask(
  plan: Plan,
  states: readonly TaskState[],
  roster: readonly AgentInfo[],
  text: string,
): AddedTaskPlacement {
  const workers = plan.instances.filter((i) => i.role !== "leader");
  const team = new Map(roster.map((a) => [a.agentId, a]));
  const onTeam = workers.filter((i) => team.has(i.agentId));
  const able = onTeam.length > 0 ? onTeam : workers.length > 0 ? workers : plan.instances;
  const words = keywords(text);
  const matched = (i: Instance): string[] =>
    matchedStrengths(keywords(team.get(i.agentId)?.strengths.join(" ") ?? ""), words);
  const best = Math.max(...able.map((i) => matched(i).length));
  let candidates = able;
  let why = "";
  if (best > 0) {
    candidates = able.filter((i) => matched(i).length === best);
  } else {
    const byDefault = able.filter((i) => team.get(i.agentId)?.default === true);
    if (byDefault.length > 0) {
      candidates = byDefault;
      why = "the default agent";
    }
  }
  const loads = instanceLoads(plan, states);
  const instance = leastLoadedInstance(candidates, loads);
  // One instance able to take it: nothing was chosen, but the answer still says where the task runs.
  if (able.length < 2)
    return { instance, reason: `on ${instance.instanceId} (${instance.agentId}, the only instance able to take it)` };
  if (best > 0) why = `its strengths match ${joinList(matched(instance).map((w) => `"${w}"`))}`;
  const idle = (loads.get(instance.instanceId)?.running ?? 0) === 0 ? "idle" : "busy, fewest queued";
  return { instance, reason: `on ${instance.instanceId} (${instance.agentId}, ${why ? `${why}, ` : ""}${idle})` };
}
