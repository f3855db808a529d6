/**
 * Test support: an agents config (`--config` file) whose workers are the scripted ACP agent fixture
 * (test/fixtures/agents/scripted-agent.ts), run by this Node as its transpiled program (scripted-agent-program.ts),
 * each reading the script file named by `SCRIPTED_AGENT_SCRIPT` (re-read at every prompt, so a test may rewrite it
 * between turns); and the temp folder of such a test (a git workspace, the script, the config).
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fixturesDir } from "../fixtures/agents/pool-helpers.js";
import { tempDir } from "./server-process.js";
import { SCRIPTED_AGENT_ARGS } from "./scripted-agent-program.js";

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
    args: [...SCRIPTED_AGENT_ARGS],
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

/** The files of one scripted-agent test: a temp folder and what `scriptedWorkspace` put in it. */
export interface ScriptedWorkspace {
  /** The temp folder holding everything below. */
  dir: string;
  /** `<dir>/ws`, an empty git repository (`git init`): the products' `cwd`. */
  workspace: string;
  /** The worker script (`<dir>/script.json` unless named). */
  scriptFile: string;
  /** The config file (`<dir>/acp-orchestrator.json` unless named): one scripted agent. */
  configFile: string;
  /** `<dir>/state.db`, for a SQLite store (not created). */
  statePath: string;
}

/**
 * Makes a temp folder (`prefix`) with an empty git repository `ws`, writes `script` (JSON; a function is given the
 * folder, for scripts naming files in it, e.g. a gate to wait for) as the worker script and a config whose one agent
 * `agentId` runs the scripted agent on it (`writeScriptedAgentConfig`). `names` renames the script and config files
 * inside the folder.
 */
export function scriptedWorkspace(
  prefix: string,
  agentId: string,
  script: object | ((dir: string) => object),
  names: { script?: string; config?: string } = {},
): ScriptedWorkspace {
  const dir = tempDir(prefix);
  const workspace = join(dir, "ws");
  spawnSync("git", ["init", "-q", workspace]);
  const scriptFile = join(dir, names.script ?? "script.json");
  const configFile = join(dir, names.config ?? "acp-orchestrator.json");
  writeFileSync(scriptFile, JSON.stringify(typeof script === "function" ? script(dir) : script));
  writeScriptedAgentConfig(configFile, agentId, scriptFile);
  return { dir, workspace, scriptFile, configFile, statePath: join(dir, "state.db") };
}
