/**
 * `acp-orchestrator check-agents [--config FILE] [--timeout MS] [--json]` (issue 11): starts every agent of the
 * registry (behind its watchdog), initializes it, authenticates it when configured, opens a session in a temporary
 * folder and stops it; prints a table (ok, or the error with its fix; capabilities; auth methods). Exit code 1 when
 * any agent fails, 2 for a bad config or option.
 *
 * Owns the command's options and output. The probing itself is adapters/agents/agent-check.ts.
 */
import { resolve } from "node:path";
import { checkAgents, formatAgentChecks } from "../adapters/agents/agent-check.js";
import { DEFAULT_START_TIMEOUT_MS } from "../adapters/agents/acp-worker.js";
import { AgentConfigError, AgentRegistry, configuredLeaderProblem } from "../adapters/agents/registry.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";

const HELP = `Usage: acp-orchestrator check-agents [--config FILE] [--timeout MS] [--json]

Starts each configured agent (and the built-in worker when it is on the team), sends initialize, authenticate (when the agent's entry names
"auth": {"methodId": ...} and the agent offers auth methods) and session/new in a temporary folder, then stops it.
Prints one row per agent: ok, or the stage that failed; its capabilities and auth methods; then each failure with
its fix. Exits 1 when any agent fails.

Options:
  --config FILE   agent registry file (default: acp-orchestrator.json in the working directory, if present)
  --timeout MS    how long one agent may take to start (default: the config's startTimeoutMs, else 60000)
  --json          print the findings as JSON instead of a table
`;

const OPTIONS = { config: { type: "string" }, timeout: { type: "string" }, json: { type: "boolean" } } as const;

export const checkAgentsCommand: Command = {
  name: "check-agents",
  options: OPTIONS,
  synopsis: "check-agents [--config FILE] [--timeout MS] [--json]",
  summary: "start every configured agent once and report whether it works",
  help: HELP,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("check-agents", argv, OPTIONS);
    expectPositionals("check-agents", positionals, 0, 0, "no arguments");
    let registry: AgentRegistry;
    try {
      registry = await AgentRegistry.load({
        ...(values.config ? { configPath: resolve(values.config) } : {}),
        cwd: process.cwd(),
      });
    } catch (err) {
      if (err instanceof AgentConfigError) {
        process.stderr.write(`acp-orchestrator: ${err.message}\n`);
        return 2;
      }
      throw err;
    }
    const leaderProblem = configuredLeaderProblem(registry);
    if (leaderProblem !== undefined) {
      process.stderr.write(`acp-orchestrator: ${leaderProblem}\n`);
      return 2;
    }
    let timeoutMs = registry.config.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    if (values.timeout !== undefined) {
      timeoutMs = Number(values.timeout);
      if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
        throw new UsageError(
          `The option --timeout of "check-agents" needs a positive number of milliseconds.`,
          "check-agents",
        );
      }
    }
    const checks = await checkAgents(registry, timeoutMs);
    process.stdout.write(values.json ? `${JSON.stringify({ agents: checks }, null, 2)}\n` : formatAgentChecks(checks));
    return checks.every((c) => c.ok) ? 0 : 1;
  },
};
