/**
 * Where the heuristic leader puts a fix-up task (issue 28): on a different instance than the failed task's, another
 * agent's where the plan has one the product may use, so a fix-up does not fail again on the instance that just
 * failed — unless the failure was the task's own content (the permission policy refused what the task asked for:
 * another instance would be refused the same), which keeps the instance. Pure.
 */
import type { Instance, Plan, TaskState } from "../../../../protocol/common.js";
import type { AgentInfo } from "../../team.js";
import { instanceLoads, leastLoadedInstance } from "./placement.js";

/** The chosen instance and why, in words for the leader's message. */
export interface FixUpPlacement {
  instance: Instance;
  reason: string;
}

/**
 * Chooses the fix-up's instance: (1) the failed instance when the failure was the task's content (refused
 * permissions); (2) else a worker instance of another agent of `roster` (or the roster is empty: any agent); (3)
 * else another instance of the same agent; (4) else the failed instance (the plan has no other). In (2) and (3) the
 * least loaded of them by the tasks' live `states` (placement.ts: idle first, then fewest ready and pending tasks,
 * then plan order).
 */
export function placeFixUp(
  plan: Plan,
  roster: readonly AgentInfo[],
  failed: TaskState,
  states: readonly TaskState[],
): FixUpPlacement {
  const own = plan.instances.find((i) => i.instanceId === failed.instanceId) ?? {
    instanceId: failed.instanceId,
    agentId: failed.instanceId,
    role: "worker",
  };
  if ((failed.refusedPermissions?.length ?? 0) > 0) {
    return {
      instance: own,
      reason: "on the same instance (what failed was the task's own request, refused by policy)",
    };
  }
  const allowed = new Set(roster.map((a) => a.agentId));
  const others = plan.instances.filter(
    (i) => i.instanceId !== own.instanceId && i.agentId !== "leader" && (allowed.size === 0 || allowed.has(i.agentId)),
  );
  const loads = instanceLoads(plan, states);
  const otherAgents = others.filter((i) => i.agentId !== own.agentId);
  if (otherAgents.length > 0) {
    const otherAgent = leastLoadedInstance(otherAgents, loads);
    return {
      instance: otherAgent,
      reason: `on ${otherAgent.instanceId} (agent ${otherAgent.agentId}, not ${own.agentId})`,
    };
  }
  const sibling = others.length > 0 ? leastLoadedInstance(others, loads) : undefined;
  if (sibling) return { instance: sibling, reason: `on another instance of ${own.agentId} (${sibling.instanceId})` };
  return { instance: own, reason: "on the same instance (the plan has no other)" };
}
