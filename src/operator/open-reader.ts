/**
 * Opens a store for the operator commands and the dashboard: the `--state` location (open-store.ts, the one function
 * every command opens stores with), read-only, wrapped in a `RunStateReader`.
 *
 * Owns that composition only; never writes (guarantee 3).
 */
import { describeLocation, openStore, stateLocation } from "../adapters/persistence/open-store.js";
import { ProcessLiveness } from "../adapters/system/process-liveness.js";
import { GitWorkspaceProbe } from "../adapters/workspace/git-probe.js";
import { RunStateReader } from "./run-state-reader.js";

/** A reader over the store `--state` names (else `$ACP_ORCHESTRATOR_STATE`, else the default file). */
export async function openReader(state: string | undefined): Promise<{ reader: RunStateReader; where: string }> {
  const location = stateLocation(state);
  const authority = await openStore(location, { readOnly: true });
  return { reader: new RunStateReader({ authority, workspace: new GitWorkspaceProbe(), liveness: new ProcessLiveness() }), where: describeLocation(location) };
}
