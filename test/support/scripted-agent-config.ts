/**
 * Test support: an agents config (`--config` file) whose workers are the scripted ACP agent fixture
 * (test/fixtures/agents/scripted-agent.ts), run by this Node through the tsx loader, each reading the script file
 * named by `SCRIPTED_AGENT_SCRIPT` (re-read at every prompt, so a test may rewrite it between turns).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";

/** The scripted agent fixture's source file. */
export const SCRIPTED_AGENT = join(fixturesDir, "scripted-agent.ts");

/** One `agents` entry of the config file, as the registry reads it. */
export interface ScriptedAgentEntry {
  agentId: string;
  role: string;
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** The config entry of a `worker` agent `agentId` running the scripted agent with the script at `scriptFile`. */
export function scriptedAgent(agentId: string, scriptFile: string): ScriptedAgentEntry {
  return {
    agentId,
    role: "worker",
    command: process.execPath,
    args: ["--import", tsxLoader, SCRIPTED_AGENT],
    env: { SCRIPTED_AGENT_SCRIPT: scriptFile },
  };
}

/**
 * Writes the config file `configFile`: `{agents: [scriptedAgent(agentId, scriptFile)], ...extra}` (`extra` for other
 * top-level keys, e.g. `maxParallelTasks`).
 */
export function writeScriptedAgentConfig(
  configFile: string,
  agentId: string,
  scriptFile: string,
  extra: Record<string, unknown> = {},
): void {
  writeFileSync(configFile, JSON.stringify({ agents: [scriptedAgent(agentId, scriptFile)], ...extra }));
}
