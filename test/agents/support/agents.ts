/**
 * The published ACP agents of the real-agent suite, at the versions pinned in package.json's devDependencies, as
 * config-file entries that talk to the fake model server (never to a real model).
 *
 * Owns: where each pinned agent's entry point is, the private home every agent gets (HOME, its config folder, XDG
 * folders: nothing of the developer's own config is read or written), the environment that points it at the fake
 * model, and a per-agent marker variable (`AGENT_SUITE_MARK`) that everything the agent starts inherits, so a test
 * can find every process an agent left behind (processes.ts). Other agents (codex-acp) add their entry factory here.
 */
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { randomBytes } from "node:crypto";
import { tempDir } from "../../support/server-process.js";
import type { FakeModel } from "./fake-model.js";

const require = createRequire(import.meta.url);

/** Name of the environment variable that marks an agent and everything it starts (see processes.ts). */
export const MARK_VARIABLE = "AGENT_SUITE_MARK";

/** The pinned Claude ACP agents (package names under `@zed-industries/`). */
export type ClaudePackage = "claude-agent-acp" | "claude-code-acp";

/** A config-file agent entry (README "Config file") plus what the suite needs to follow the agent. */
export interface SuiteAgent {
  entry: {
    agentId: string;
    name: string;
    role?: string;
    command: string;
    args: string[];
    env: Record<string, string>;
    strengths?: string[];
  };
  /** The agent's private home folder. */
  home: string;
  /** The value of `AGENT_SUITE_MARK` in the agent's environment (inherited by all it starts). */
  mark: string;
  /** Package name and installed version (from its package.json). */
  packageName: string;
  version: string;
}

/** The installed entry point (`bin`) and version of a pinned package, resolved from node_modules. */
export function pinnedBin(packageName: string): { path: string; version: string } {
  const manifestPath = require.resolve(`${packageName}/package.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as {
    version: string;
    bin: string | Record<string, string>;
  };
  const bin = typeof manifest.bin === "string" ? manifest.bin : Object.values(manifest.bin)[0];
  if (bin === undefined) throw new Error(`${packageName} declares no bin`);
  return { path: join(dirname(manifestPath), bin), version: manifest.version };
}

/** A fresh private home with the usual folders; returns its path. */
export function privateHome(prefix: string): string {
  const home = tempDir(`agents-home-${prefix}-`);
  for (const sub of [".config", ".cache", ".local/share", ".local/state"])
    mkdirSync(join(home, sub), { recursive: true });
  return home;
}

/** The environment of a private home (HOME, XDG folders) plus the suite mark. */
export function homeEnv(home: string, mark: string): Record<string, string> {
  return {
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_CACHE_HOME: join(home, ".cache"),
    XDG_DATA_HOME: join(home, ".local/share"),
    XDG_STATE_HOME: join(home, ".local/state"),
    [MARK_VARIABLE]: mark,
  };
}

/** What every suite agent starts from: its pinned entry point, a private home and a fresh mark. */
export interface AgentBase {
  packageName: string;
  bin: { path: string; version: string };
  home: string;
  mark: string;
}

/** The base of a suite agent `agentId` of the pinned `packageName`. */
export function agentBase(agentId: string, packageName: string): AgentBase {
  return {
    packageName,
    bin: pinnedBin(packageName),
    home: privateHome(agentId),
    mark: `${agentId}-${randomBytes(6).toString("hex")}`,
  };
}

/** The suite agent of `base`: its config-file entry (run with `node BIN`, `env` as given) and what tests follow. */
export function suiteAgent(
  base: AgentBase,
  options: { agentId: string; role?: string; strengths?: string[] },
  name: string,
  env: Record<string, string>,
): SuiteAgent {
  return {
    entry: {
      agentId: options.agentId,
      name,
      ...(options.role !== undefined ? { role: options.role } : {}),
      command: process.execPath,
      args: [base.bin.path],
      env,
      ...(options.strengths !== undefined ? { strengths: options.strengths } : {}),
    },
    home: base.home,
    mark: base.mark,
    packageName: base.packageName,
    version: base.bin.version,
  };
}

export interface ClaudeAgentOptions {
  agentId: string;
  package: ClaudePackage;
  model: FakeModel;
  role?: string;
  strengths?: string[];
  /** Extra environment for the agent. */
  env?: Record<string, string>;
}

/**
 * A Claude agent (claude-agent-acp or claude-code-acp, as pinned) pointed at the fake model: `ANTHROPIC_BASE_URL`, a
 * fake key, a private `CLAUDE_CONFIG_DIR`, telemetry and updates off, and `IS_SANDBOX=1` when running as root (the
 * Claude Code CLI refuses its permission modes as root otherwise; README "Real coding agents").
 */
export function claudeAgent(options: ClaudeAgentOptions): SuiteAgent {
  const base = agentBase(options.agentId, `@zed-industries/${options.package}`);
  const { home, mark } = base;
  const env: Record<string, string> = {
    ...homeEnv(home, mark),
    CLAUDE_CONFIG_DIR: join(home, ".claude"),
    ANTHROPIC_BASE_URL: options.model.urlFor(mark),
    ANTHROPIC_API_KEY: "sk-ant-fake-key-for-tests",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    ...(process.getuid?.() === 0 ? { IS_SANDBOX: "1" } : {}),
    ...options.env,
  };
  return suiteAgent(base, options, options.package === "claude-agent-acp" ? "Claude Agent" : "Claude Code", env);
}
