/**
 * The error an agent that cannot be started raises through the ports (DESIGN.md "Processes"), and how its remediation
 * is reworded; re-exported by ports.ts. No I/O.
 */

/**
 * An agent failure that retrying cannot fix (DESIGN.md "Processes"): its command does not exist or cannot run, it
 * requires authentication, or it refused `initialize`, `authenticate` or `session/new`. `message` says what happened
 * naming the agent; `remediation` says what the operator should do. A `LeaderPort` method rejects with one when its
 * leader agent cannot be started: the product (or goal run) then pauses with that recovery instead of failing.
 */
export class AgentConfigurationError extends Error {
  override readonly name = "AgentConfigurationError";
  constructor(
    message: string,
    readonly agentId: string,
    readonly remediation: string,
  ) {
    super(message);
  }
}

/**
 * `remediation` of an `AgentConfigurationError` with its last step ("…, then resume.") replaced by `nextStep` (a
 * sentence fragment such as `send product.message to plan again`). Pure.
 */
export function remediationThen(remediation: string, nextStep: string): string {
  const fix = remediation.replace(/[\s,;.]*(?:then|Then) resume\.?\s*$/u, "").replace(/\.$/u, "");
  return `${fix}; then ${nextStep}.`;
}
