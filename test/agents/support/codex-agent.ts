/**
 * codex-acp (`@zed-industries/codex-acp`, as pinned) as a suite agent: a config-file entry whose private
 * `$CODEX_HOME/config.toml` names the fake model as a custom provider speaking the OpenAI Responses API
 * (openai-responses.ts), so Codex never talks to a real model.
 *
 * Owns: the Codex configuration of the suite. `approval_policy = "untrusted"` makes Codex ask the client
 * (`session/request_permission`, kind `execute`) before every command that changes something, so the orchestrator's
 * permission policy decides; `sandbox_mode = "danger-full-access"` because Codex's Linux sandbox cannot start in
 * the CI container (its helper panics), which would fail every command before any permission is asked.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { agentBase, homeEnv, suiteAgent, type SuiteAgent } from "./agents.js";
import type { FakeModel } from "./fake-model.js";
import type { WorkerStep } from "./scripts.js";

/** The model name Codex is configured with (unknown to Codex: it uses its fallback model metadata). */
export const CODEX_FAKE_MODEL = "fake-model";

export interface CodexAgentOptions {
  agentId: string;
  model: FakeModel;
  role?: string;
  strengths?: string[];
  /** Extra environment for the agent. */
  env?: Record<string, string>;
}

/** A codex-acp agent entry pointed at the fake model (Responses API on `model.urlFor(mark)/v1`). */
export function codexAgent(options: CodexAgentOptions): SuiteAgent {
  const base = agentBase(options.agentId, "@zed-industries/codex-acp");
  const { home, mark } = base;
  const codexHome = join(home, ".codex");
  mkdirSync(codexHome, { recursive: true });
  writeFileSync(
    join(codexHome, "config.toml"),
    [
      `model = "${CODEX_FAKE_MODEL}"`,
      `model_provider = "fake"`,
      `approval_policy = "untrusted"`,
      `sandbox_mode = "danger-full-access"`,
      `check_for_update_on_startup = false`,
      "",
      "[model_providers.fake]",
      `name = "Fake model (tests)"`,
      `base_url = "${options.model.urlFor(mark)}/v1"`,
      `wire_api = "responses"`,
      `env_key = "FAKE_MODEL_API_KEY"`,
      "",
    ].join("\n"),
  );
  const env: Record<string, string> = {
    ...homeEnv(home, mark),
    CODEX_HOME: codexHome,
    FAKE_MODEL_API_KEY: "sk-fake-key-for-tests",
    ...options.env,
  };
  return suiteAgent(base, options, "Codex", env);
}

/**
 * A Codex `exec_command` tool call running `cmd` (a shell command line) in the task's workspace. Under the suite's
 * `approval_policy = "untrusted"` Codex asks the client's permission (kind `execute`) first.
 */
export function execStep(cmd: string, text = `Running ${cmd}`): WorkerStep {
  return (brief, request) => ({
    text,
    toolCalls: [
      {
        name: request.toolNames.includes("exec_command") ? "exec_command" : "shell",
        input: { cmd, workdir: brief.workspace, yield_time_ms: 2_000 },
      },
    ],
  });
}
