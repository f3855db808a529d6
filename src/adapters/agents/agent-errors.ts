/**
 * Configuration errors of agents (DESIGN.md "Processes"; issue 11): failures that retrying cannot fix — the command
 * does not exist or cannot be run, the agent requires authentication, the agent refuses `initialize`,
 * `authenticate` or `session/new`. Each gets a plain-words cause naming the agent and a remediation saying the fix.
 *
 * Owns: recognising those failures and wording them (the error class itself is the core's, ports.ts). Pure: no I/O.
 */
import { RequestError } from "@agentclientprotocol/sdk";
import { AgentConfigurationError } from "../../core/ports.js";
import type { SpawnFailure } from "./agent-process.js";

/** ACP's "authentication required" error code. */
export const AUTH_REQUIRED_CODE = -32000;

/** The start stages of an agent, in order; a start timeout names the one that did not finish. */
export type StartStage = "spawn" | "initialize" | "authenticate" | "session/new";

/** A failure retrying cannot fix (core/ports.ts): `message` says what happened, `remediation` what to do. */
export { AgentConfigurationError };

/** Where an agent's entry lives, for remediations. */
const WHERE = "in the agent configuration (acp-orchestrator.json, or the file given with --config)";

/**
 * The configuration error of an agent id that is not in the agent registry (e.g. a product resumed without the
 * `--config` it was planned with): retrying cannot fix it (issue 11). Pure.
 */
export function unknownAgentConfigurationError(agentId: string, known: readonly string[]): AgentConfigurationError {
  const list = known.length > 0 ? `configured agents: ${known.join(", ")}` : "no agent is configured";
  return new AgentConfigurationError(
    `Unknown agent "${agentId}": it is not in the agent registry (${list}).`,
    agentId,
    `Start the server with the agent configuration the product was planned with (--config), or add agent "${agentId}" ${WHERE}, then resume.`,
  );
}

/** The configuration error of an agent whose command could not be started at all. Pure. */
export function spawnConfigurationError(
  agentId: string,
  command: string,
  failure: SpawnFailure,
): AgentConfigurationError {
  const what =
    failure.code === "ENOENT"
      ? `the command "${command}" was not found`
      : failure.code === "EACCES"
        ? `the command "${command}" is not executable`
        : `the command "${command}" could not be started (${failure.code}: ${failure.message})`;
  return new AgentConfigurationError(
    `Could not start agent "${agentId}": ${what}.`,
    agentId,
    `Install the agent, or fix "command" of agent "${agentId}" ${WHERE} (an absolute path, or a name on PATH), then resume.`,
  );
}

/** An auth method as ACP `initialize` advertises it. */
export interface AdvertisedAuthMethod {
  id: string;
  name?: string;
}

function methodList(methods: AdvertisedAuthMethod[]): string {
  return methods.length === 0 ? "none advertised" : methods.map((m) => `"${m.id}"`).join(", ");
}

/** The configuration error of an agent that requires authentication (ACP `-32000`, or a failed `authenticate`). */
export function authConfigurationError(
  agentId: string,
  methods: AdvertisedAuthMethod[],
  detail: string,
): AgentConfigurationError {
  return new AgentConfigurationError(
    `Agent "${agentId}" requires authentication: ${detail}.`,
    agentId,
    `Give agent "${agentId}" its credentials: put its API key in "env" of its entry ${WHERE}, or log in with the ` +
      `agent's own CLI, or name an auth method as "auth": {"methodId": …} (advertised: ${methodList(methods)}); then resume.`,
  );
}

/**
 * Classifies an error answered during a start stage: every JSON-RPC error answer to `initialize`, `authenticate` or
 * `session/new` is a configuration error (the agent refuses its configuration); `-32000` is authentication required.
 * Anything else (a crash, a closed connection) returns `undefined`: an ordinary, retryable failure. Pure.
 */
export function handshakeConfigurationError(
  agentId: string,
  stage: StartStage,
  error: unknown,
  methods: AdvertisedAuthMethod[],
): AgentConfigurationError | undefined {
  if (error instanceof AgentConfigurationError) return error;
  if (!(error instanceof RequestError) || stage === "spawn") return undefined;
  if (error.code === AUTH_REQUIRED_CODE || stage === "authenticate") {
    return authConfigurationError(agentId, methods, `${stage} answered error ${error.code}: ${error.message}`);
  }
  return new AgentConfigurationError(
    `Agent "${agentId}" refused ${stage} (error ${error.code}: ${error.message}).`,
    agentId,
    `Check agent "${agentId}" ${WHERE}: its "args" and "env" (model, API keys, flags), and that it speaks ACP v1; ` +
      `"acp-orchestrator check-agents" starts it and shows the answer. Then resume.`,
  );
}

/** The configuration error of an agent that speaks another ACP protocol version. Pure. */
export function protocolConfigurationError(
  agentId: string,
  version: number,
  expected: number,
): AgentConfigurationError {
  return new AgentConfigurationError(
    `Agent "${agentId}" speaks ACP protocol version ${version}, not ${expected}.`,
    agentId,
    `Use a version of agent "${agentId}" that speaks ACP v${expected}, or remove it ${WHERE}; then resume.`,
  );
}

/** The configuration error of an agent whose configured auth method it does not advertise. Pure. */
export function unknownAuthMethodError(
  agentId: string,
  methodId: string,
  methods: AdvertisedAuthMethod[],
): AgentConfigurationError {
  return new AgentConfigurationError(
    `Agent "${agentId}" does not offer the auth method "${methodId}" (advertised: ${methodList(methods)}).`,
    agentId,
    `Set "auth": {"methodId": …} of agent "${agentId}" ${WHERE} to one of ${methodList(methods)}, or remove it; then resume.`,
  );
}
