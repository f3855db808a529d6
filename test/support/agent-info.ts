/** Test support: a roster entry (`AgentInfo`, the core's view of a configured agent) for unit tests of the leader. */
import type { AgentInfo } from "../../src/core/team.js";

/** A `worker` agent named after its id, without strengths; `extra` overrides or adds fields. */
export function agentInfo(agentId: string, extra: Partial<AgentInfo> = {}): AgentInfo {
  return { agentId, name: agentId, role: "worker", strengths: [], ...extra };
}
