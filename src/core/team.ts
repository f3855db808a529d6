/**
 * The agents a product's plan may draw from, as the core sees them (DESIGN.md, Agents; issue 28: the team the user
 * configured). Types only; the registry (adapters/agents/registry.ts) implements `AgentDirectory`.
 */

/** A registry entry as the core sees it (the command line stays in the adapter). */
export interface AgentInfo {
  agentId: string;
  name: string;
  role: string;
  strengths: string[];
  /** At most this many instances of this agent in one plan (issue 28); absent = unbounded. */
  maxInstances?: number;
  /** True for the config's `defaultAgent`: it takes the tasks no agent's strengths match (issue 28). */
  default?: true;
}

/** The agent registry: which agents exist and are ready to be started. */
export interface AgentDirectory {
  list(): AgentInfo[];
  get(agentId: string): AgentInfo | undefined;
}
