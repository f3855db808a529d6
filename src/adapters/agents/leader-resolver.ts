/**
 * Choosing the leader of a product (issue 5 item 1): the composition root's `LeaderResolver` picks, per product,
 * between model-backed leaders (`AcpLeader`, one per registry agent) and the built-in heuristic one, and an
 * `UnavailableLeader` that names the problem when the requested leader cannot lead.
 *
 * Owns: the map of `AcpLeader`s made and their shutdown. Never throws from `resolve`.
 */
import { HEURISTIC_LEADER_ID } from "../../core/leader/heuristic-leader-id.js";
import type {
  AssessResult,
  ChecklistResult,
  FailureDecision,
  LeaderPort,
  LeaderResolver,
  Logger,
  MessageResult,
  PhasePlanResult,
  PlanResult,
} from "../../core/ports.js";
import { AcpLeader } from "./acp-leader.js";
import type { AcpLeaderOptions } from "./acp-leader.js";
import { BUILTIN_WORKER_AGENT_ID } from "./registry.js";
import type { AgentRegistry } from "./registry.js";

/**
 * A leader that cannot be used (unknown agent id, or an agent that cannot lead): every method rejects with an
 * `Error` carrying `reason`, so planning ends in `product.planFailed` with that reason instead of hanging.
 */
export class UnavailableLeader implements LeaderPort {
  constructor(readonly reason: string) {}
  private fail(): Promise<never> {
    return Promise.reject(new Error(this.reason));
  }
  plan(): Promise<PlanResult> {
    return this.fail();
  }
  message(): Promise<MessageResult> {
    return this.fail();
  }
  consultOnFailure(): Promise<FailureDecision> {
    return this.fail();
  }
  deriveChecklist(): Promise<ChecklistResult> {
    return this.fail();
  }
  planPhase(): Promise<PhasePlanResult> {
    return this.fail();
  }
  assess(): Promise<AssessResult> {
    return this.fail();
  }
}

/** Options of `createLeaderResolver`. */
export interface LeaderResolverOptions {
  registry: AgentRegistry;
  logger: Logger;
  /** The leader used when neither `leaderAgentId` nor `defaultLeaderAgentId` is set (the built-in heuristic one). */
  fallback: LeaderPort;
  /** The config file's `leader`, if any. */
  defaultLeaderAgentId?: string;
  /** Passed to every `AcpLeader` made. */
  leaderOptions?: Omit<AcpLeaderOptions, "agentId" | "registry" | "logger">;
}

/** A `LeaderResolver` plus the means to stop every leader process it started. */
export interface LeaderSelection {
  resolve: LeaderResolver;
  /** Closes every `AcpLeader` made so far; resolves once their processes have exited. Later resolves get an `UnavailableLeader`. */
  close(): Promise<void>;
}

/**
 * The composition root's leader resolver (ports.ts `LeaderResolver`): `leaderAgentId` (from `product.plan`), else
 * `defaultLeaderAgentId` (config `leader`), names a registry agent that leads through an `AcpLeader` (one per agent,
 * shared by every product); with neither, or with `"heuristic"` (`HEURISTIC_LEADER_ID`), `fallback` leads. An unknown agent id, or the built-in worker (which cannot
 * plan), gives an `UnavailableLeader` whose rejection names the problem. Never throws.
 */
export function createLeaderResolver(options: LeaderResolverOptions): LeaderSelection {
  const leaders = new Map<string, AcpLeader>();
  let closed = false;
  const resolve: LeaderResolver = (leaderAgentId) => {
    const agentId = leaderAgentId ?? options.defaultLeaderAgentId;
    if (agentId === undefined || agentId === HEURISTIC_LEADER_ID) return options.fallback;
    if (closed) return new UnavailableLeader("the server is shutting down; no leader turn can start");
    if (agentId === BUILTIN_WORKER_AGENT_ID) {
      return new UnavailableLeader(
        `the built-in worker cannot lead (it does not plan); leave leaderAgentId out to use the configured or built-in leader`,
      );
    }
    if (options.registry.get(agentId) === undefined) {
      // Every configured agent, not only the team `list()` gives plans (issue 28): any of them may lead.
      const known = options.registry
        .all()
        .map((a) => a.agentId)
        .filter((id) => id !== BUILTIN_WORKER_AGENT_ID);
      return new UnavailableLeader(
        `unknown leader agent "${agentId}": it is not in the agent registry (${known.length > 0 ? `configured agents: ${known.join(", ")}` : "no agent is configured"})`,
      );
    }
    let leader = leaders.get(agentId);
    if (leader === undefined) {
      leader = new AcpLeader({ ...options.leaderOptions, agentId, registry: options.registry, logger: options.logger });
      leaders.set(agentId, leader);
    }
    return leader;
  };
  return {
    resolve,
    async close() {
      closed = true;
      await Promise.allSettled([...leaders.values()].map((l) => l.close()));
    },
  };
}
