/**
 * Opens a store for the operator commands and the dashboard: the `--state` location (open-store.ts, the one function
 * every command opens stores with), read-only, wrapped in a `RunStateReader`.
 *
 * Owns that composition, and the message for a SQLite state file that does not exist yet (a new user's first
 * `list` before anything ran): one sentence naming the path, where that path came from, and what creates it.
 * Never writes (guarantee 3): a missing file is not created.
 */
import { existsSync } from "node:fs";
import { SERVER_LEADER_PROMPT_VERSION } from "../adapters/agents/leader-prompts.js";
import { AgentRegistry } from "../adapters/agents/registry.js";
import { nodeSha256Hex } from "../adapters/system/digest.js";
import { agentHashes, agentsHash } from "../core/product/fingerprint.js";
import { describeLocation, openStore, stateLocation } from "../adapters/persistence/open-store.js";
import { STATE_PATH_ENV } from "../adapters/persistence/state-path.js";
import { ProcessLiveness } from "../adapters/system/process-liveness.js";
import { GitWorkspaceProbe } from "../adapters/workspace/git-probe.js";
import { AuthorityFailure } from "../core/ports.js";
import { RunStateReader } from "./run-state-reader.js";

/**
 * A reader over the store `--state` names (else `$ACP_ORCHESTRATOR_STATE`, else the default file). Throws
 * `AuthorityFailure` (the CLI prints it, exit 2) when the SQLite file does not exist or the store cannot be opened.
 */
export async function openReader(state: string | undefined): Promise<{ reader: RunStateReader; where: string }> {
  const location = stateLocation(state);
  if (location.kind === "sqlite" && !existsSync(location.path)) {
    const from =
      state !== undefined
        ? "given by --state"
        : process.env[STATE_PATH_ENV]
          ? `from $${STATE_PATH_ENV}`
          : "the default state file";
    throw new AuthorityFailure(
      `There is no state file at ${location.path} (${from}): nothing has run with this store yet. ` +
        `Pass --state with the file or postgres:// URL a server used, or start a run here with "acp-orchestrator run --goal TEXT".`,
    );
  }
  const authority = await openStore(location, { readOnly: true });
  const agents = await agentsFingerprint();
  return {
    reader: new RunStateReader({
      authority,
      workspace: new GitWorkspaceProbe(),
      liveness: new ProcessLiveness(),
      // Drift is judged as a server started here would judge it: same prompt version, same agent definitions.
      leaderPromptVersion: SERVER_LEADER_PROMPT_VERSION,
      ...(agents !== undefined
        ? { agentsFingerprint: () => agents.agentsHash, agentHashes: () => agents.agentHashes }
        : {}),
    }),
    where: describeLocation(location),
  };
}

/**
 * The fingerprint of the agent definitions a server started in this directory without `--config` would use
 * (acp-orchestrator.json here, else the built-in agents), as serve.ts computes it, overall and per agent; `undefined`
 * when that file does not load (the views then compare what the core sees). A difference from the recorded one is
 * said as this reader's registry differing from the server's (issue 28), naming the agents.
 */
async function agentsFingerprint(): Promise<{ agentsHash: string; agentHashes: Record<string, string> } | undefined> {
  try {
    const registry = await AgentRegistry.load({ cwd: process.cwd() });
    return {
      agentsHash: agentsHash(registry.config.agents, nodeSha256Hex),
      agentHashes: agentHashes(registry.config.agents, nodeSha256Hex),
    };
  } catch {
    return undefined;
  }
}
