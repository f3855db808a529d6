/**
 * The agent registry (DESIGN.md, Agents): the `acp-orchestrator.json` config file schema, its loader, and
 * `AgentRegistry`, which knows every agent the orchestrator may start and how to launch it as an ACP subprocess.
 *
 * Owns: config validation (strict: an unknown key is an error naming the key and the file), the always-present
 * built-in worker entry (`builtin-worker`), and launch specs. It must never start a process itself (that is
 * `AcpWorkerPool`'s job), never write to stdout, and never mutate the config it was given.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import * as z from "zod";
import { McpServer } from "../../../protocol/acp.js";
import { Id } from "../../../protocol/common.js";
import { VerifyConfig } from "../../../protocol/verify.js";
import { WorkspaceRemote } from "../../../protocol/workspace-remote.js";
import type { AgentDirectory, AgentInfo } from "../../core/ports.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";
import { packageLayout, packageModulePath } from "../../package-files.js";

/** Name of the config file looked up in the workspace when no `--config FILE` is given. */
export const AGENT_CONFIG_FILE_NAME = "acp-orchestrator.json";

/** Agent id of the built-in worker agent, which is always in the registry. */
export const BUILTIN_WORKER_AGENT_ID = "builtin-worker";

/** One `agents[]` entry of the config file: an ACP agent started as `command args…` with `env` added. */
export const AgentConfigEntry = lazySchema(
  () =>
    z
      .object({
        agentId: Id,
        /** Display name; defaults to the agent id. */
        name: z.string().min(1).max(200).optional(),
        /** Role in a team, e.g. `worker`, `leader`, `reviewer`; defaults to `worker`. */
        role: z.string().min(1).max(200).default("worker"),
        /** Executable to start. A path starting with `./` or `../` is resolved against the config file's folder. */
        command: z.string().min(1),
        args: z.array(z.string()).default([]),
        /** Environment variables added to the orchestrator's own environment for this agent. */
        env: z.record(z.string(), z.string()).default({}),
        /** Free-form hints for the leader's assignment, e.g. `["typescript", "tests"]`. */
        strengths: z.array(z.string().min(1).max(200)).default([]),
        /**
         * ACP authentication: when the agent advertises auth methods in `initialize`, the client calls `authenticate`
         * with this `methodId` before opening a session (issue 11). Absent: no `authenticate` call.
         */
        auth: z
          .object({ methodId: z.string().min(1).max(200) })
          .strict()
          .optional(),
        /**
         * At most this many instances (seats) of this agent in one plan (issue 28). Absent: unbounded (only the
         * product's `maxParallelTasks` bounds the seats).
         */
        maxInstances: z.number().int().min(1).max(1_000).optional(),
        /**
         * MCP servers (ACP `McpServer` shapes) given to this agent's `session/new` besides the ACP session's own,
         * merged by `name` (this entry wins); only in the transports the agent advertises (issue 28).
         */
        mcpServers: z.array(McpServer).max(100).optional(),
      })
      .strict(),
  "AgentConfigEntry",
);
export type AgentConfigEntry = z.infer<typeof AgentConfigEntry>;

/** One answer to a worker's `session/request_permission`: pick a reject option (`deny`) or an allow option (`allow`). */
export const PermissionDecision = lazySchema(() => z.enum(["deny", "allow"]), "PermissionDecision");
export type PermissionDecision = z.infer<typeof PermissionDecision>;

/** ACP v1 tool kinds (`ToolKind`); a permission request without a kind counts as `other`. */
export const PermissionToolKind = lazySchema(
  () => z.enum(["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]),
  "PermissionToolKind",
);
export type PermissionToolKind = z.infer<typeof PermissionToolKind>;

/**
 * What to do with a worker's `session/request_permission` when nobody above (an IDE, for a product of an ACP session)
 * can answer it: `"deny"` (the default), `"allow"`, or per-tool-kind rules, e.g.
 * `{"default": "deny", "rules": {"read": "allow", "edit": "deny"}}` (a kind without a rule gets `default`).
 */
export const PermissionPolicy = lazySchema(
  () =>
    z.union(
      [
        PermissionDecision,
        z
          .object({
            default: PermissionDecision.default("deny"),
            rules: z.partialRecord(PermissionToolKind, PermissionDecision).default({}),
          })
          .strict(),
      ],
      { error: 'must be "deny", "allow", or {"default": "deny"|"allow", "rules": {<tool kind>: "deny"|"allow"}}' },
    ),
  "PermissionPolicy",
);
export type PermissionPolicy = z.infer<typeof PermissionPolicy>;

/** The policy in words for messages: `"deny"`, or its JSON for per-kind rules. Pure. */
export function describePolicy(policy: PermissionPolicy): string {
  return typeof policy === "string" ? `"${policy}"` : JSON.stringify(policy);
}

/** The decision of `policy` for a request of tool kind `kind` (`undefined`/`null` = `other`). Pure. */
export function permissionDecision(policy: PermissionPolicy, kind: string | null | undefined): PermissionDecision {
  if (typeof policy === "string") return policy;
  const parsed = PermissionToolKind.safeParse(kind ?? "other");
  const rule = parsed.success ? policy.rules[parsed.data] : undefined;
  return rule ?? policy.default;
}

/** The config's `agents`: ids unique, `builtin-worker` reserved. */
const AgentConfigList = lazySchema(
  () =>
    z
      .array(AgentConfigEntry)
      .superRefine((agents, ctx) => {
        const seen = new Set<string>();
        agents.forEach((agent, index) => {
          if (agent.agentId === BUILTIN_WORKER_AGENT_ID) {
            ctx.addIssue({
              code: "custom",
              path: [index, "agentId"],
              message: `"${BUILTIN_WORKER_AGENT_ID}" is reserved for the built-in worker`,
            });
          } else if (seen.has(agent.agentId)) {
            ctx.addIssue({
              code: "custom",
              path: [index, "agentId"],
              message: `duplicate agent id "${agent.agentId}"`,
            });
          }
          seen.add(agent.agentId);
        });
      })
      .default([]),
  "AgentConfigList",
);

/**
 * How a task attempt whose model provider is overloaded (429/529, overload errors) is retried without spending the
 * attempt (issue 28, overload.ts): backoff from `baseDelayMs` doubling up to `maxDelayMs` per wait, with jitter, or
 * the provider's `retry-after`; at most `maxWaitMs` of waiting per attempt. Milliseconds.
 */
const OverloadSettings = lazySchema(
  () =>
    z
      .object({
        baseDelayMs: z.number().int().min(1).max(3_600_000).optional(),
        maxDelayMs: z.number().int().min(1).max(3_600_000).optional(),
        maxWaitMs: z
          .number()
          .int()
          .min(0)
          .max(7 * 24 * 3_600_000)
          .optional(),
      })
      .strict(),
  "OverloadSettings",
);

/** `allowedAgents` and `defaultAgent` must name agents of `agents` (or the built-in worker). */
function checkTeamReferences(
  config: { agents: { agentId: string }[]; allowedAgents?: string[] | undefined; defaultAgent?: string | undefined },
  ctx: z.RefinementCtx,
): void {
  const known = new Set([...config.agents.map((a) => a.agentId), BUILTIN_WORKER_AGENT_ID]);
  (config.allowedAgents ?? []).forEach((id, index) => {
    if (!known.has(id))
      ctx.addIssue({ code: "custom", path: ["allowedAgents", index], message: `"${id}" is not one of "agents"` });
  });
  if (config.defaultAgent !== undefined && !known.has(config.defaultAgent)) {
    ctx.addIssue({
      code: "custom",
      path: ["defaultAgent"],
      message: `"${config.defaultAgent}" is not one of "agents"`,
    });
  }
}

/**
 * The whole config file. Only `agents` is used by the registry; the other keys are validated here and consumed by
 * the composition root (`leader`: default leader agent id; `maxParallelTasks`; `taskTimeoutMs`: per task attempt, ms;
 * `permissions`: worker permission policy).
 */
export const AgentConfigFile = lazySchema(
  () =>
    z
      .object({
        $schema: z.string().optional(),
        agents: AgentConfigList,
        leader: Id.optional(),
        /**
         * Whether the built-in worker may take tasks (issue 28). Default: `true` when no agent is configured, else
         * `false` (the team is the configured agents; a plan or `allowedAgents` may still name it).
         */
        builtinWorker: z.boolean().optional(),
        /** The agents plans may use (ids of `agents`, or `builtin-worker`). Absent: every configured agent. */
        allowedAgents: z.array(Id).min(1).max(1_000).optional(),
        /** The agent that takes a task whose words match no agent's `strengths`. Absent: round-robin. */
        defaultAgent: Id.optional(),
        maxParallelTasks: z.number().int().min(1).max(1_000).optional(),
        taskTimeoutMs: z
          .number()
          .int()
          .min(1)
          .max(7 * 24 * 3_600_000)
          .optional(),
        /** Wall-time limit of starting a worker (spawn, `initialize`, `authenticate`, `session/new`), ms. Default 60 s. */
        startTimeoutMs: z
          .number()
          .int()
          .min(1)
          .max(24 * 3_600_000)
          .optional(),
        permissions: PermissionPolicy.optional(),
        /** Retries of attempts whose model provider is overloaded (see `OverloadSettings`). */
        overload: OverloadSettings.optional(),
        /** Default isolation of products whose `product.plan` does not say (PROTOCOL.md section 5). */
        isolation: z.enum(["worktree", "shared"]).optional(),
        /** Default integration of products whose `product.plan` does not say. */
        integration: z
          .object({ mode: z.enum(["branch", "merge"]).optional(), targetBranch: z.string().min(1).max(250).optional() })
          .strict()
          .optional(),
        /** Verification commands of products whose `product.plan` does not say (guarantee 17; docs/VERIFY.md). */
        verify: VerifyConfig.optional(),
        /** Default git remote of products whose `product.plan` names none (issue 33; docs/FLEET.md). */
        workspace: WorkspaceRemote.optional(),
      })
      .strict()
      .superRefine(checkTeamReferences),
  "AgentConfigFile",
);
export type AgentConfig = z.infer<typeof AgentConfigFile>;

/** A config file that cannot be read, is not JSON, or does not match `AgentConfigFile`. The message names the file. */
export class AgentConfigError extends Error {
  override readonly name = "AgentConfigError";
  constructor(
    message: string,
    readonly file: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** How to start one agent: `command` with `args`; `env` holds only the variables to ADD to the parent's environment. */
export interface LaunchSpec {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Working directory of the process; when absent the caller uses the task's workspace. */
  cwd?: string;
  /** The auth method to use when the agent advertises any (`authenticate {methodId}`). */
  auth?: { methodId: string };
  /** The agent's own MCP servers from the config (merged with the session's by name, mcp-servers.ts). */
  mcpServers?: McpServer[];
}

/** The result of `loadAgentConfig`: the validated config and the file it came from (`null` = none, defaults). */
export interface LoadedAgentConfig {
  config: AgentConfig;
  path: string | null;
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out === "" ? "(top level)" : out;
}

/** Turns zod issues into one readable sentence per issue, e.g. `unknown key "foo" at agents[0]`. */
function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const where = formatPath(issue.path);
      if (issue.code === "unrecognized_keys") {
        const keys = issue.keys.map((k) => `"${k}"`).join(", ");
        return `unknown key${issue.keys.length > 1 ? "s" : ""} ${keys} at ${where}`;
      }
      if (issue.code === "invalid_type" && issue.input === undefined) return `${where}: required`;
      return `${where}: ${issue.message}`;
    })
    .join("; ");
}

/**
 * The config of a server without a config file: what `parseAgentConfig({})` returns (no agents, every setting at its
 * default), without building the config schema, which a start without a config file has no other use for (issue 16,
 * cold start; test/adapters/agents/registry.test.ts checks that the two agree). A fresh object on every call.
 */
export function emptyAgentConfig(): AgentConfig {
  return { agents: [] };
}

/**
 * Validates an already-parsed config value. `file` is only used in the error message.
 * Throws `AgentConfigError` naming the file and every offending key/path. Pure: reads nothing.
 */
export function parseAgentConfig(value: unknown, file: string): AgentConfig {
  const parsed = AgentConfigFile.safeParse(value, { reportInput: true });
  if (!parsed.success) {
    throw new AgentConfigError(`Invalid agent config ${file}: ${describeIssues(parsed.error)}.`, file);
  }
  const config = parsed.data;
  // Relative commands are relative to the config file, not to whatever cwd the server was started in.
  const baseDir = dirname(file);
  for (const agent of config.agents) {
    if (agent.command.startsWith("./") || agent.command.startsWith("../"))
      agent.command = resolve(baseDir, agent.command);
  }
  return config;
}

/**
 * Reads and validates the agent config: `configPath` when given (relative to `cwd`; it must exist), else
 * `<cwd>/acp-orchestrator.json` when present, else an empty config (only the built-in worker).
 * Throws `AgentConfigError` for a missing explicit file, unreadable file, invalid JSON or schema violations.
 * Reads only; never writes or creates the file.
 */
export async function loadAgentConfig(options: { configPath?: string; cwd: string }): Promise<LoadedAgentConfig> {
  let file: string;
  if (options.configPath !== undefined) {
    file = isAbsolute(options.configPath) ? options.configPath : resolve(options.cwd, options.configPath);
  } else {
    file = join(options.cwd, AGENT_CONFIG_FILE_NAME);
    if (!existsSync(file)) return { config: emptyAgentConfig(), path: null };
  }
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === "ENOENT" ? "file not found" : String(error);
    throw new AgentConfigError(`Cannot read agent config ${file}: ${reason}.`, file, { cause: error });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new AgentConfigError(`Invalid JSON in agent config ${file}: ${(error as Error).message}.`, file, {
      cause: error,
    });
  }
  return { config: parseAgentConfig(json, file), path: file };
}

/**
 * How to start the built-in worker agent with the current Node binary. From compiled or bundled code it runs the
 * compiled `dist/src/adapters/agents/builtin-worker-agent.js` of the package (src/package-files.ts; the bundle moves
 * this module, so it is not looked up beside it); from TypeScript sources (tsx, vitest) it runs the `.ts` file
 * through `--import <tsx loader>`, with the loader given as an absolute URL so it resolves from any child cwd.
 * `moduleUrl` stands for this module's own URL (tests pass another layout's).
 */
export function builtinWorkerLaunchSpec(moduleUrl: string = import.meta.url): LaunchSpec {
  const layout = packageLayout(moduleUrl);
  const script = packageModulePath("adapters/agents/builtin-worker-agent", layout);
  if (layout.fromSource) {
    const tsxLoader = pathToFileURL(createRequire(moduleUrl).resolve("tsx")).href;
    return { command: process.execPath, args: ["--import", tsxLoader, script], env: {} };
  }
  return { command: process.execPath, args: [script], env: {} };
}

/** The registry entry of the built-in worker (DESIGN.md, Agents: it needs no model). */
export const BUILTIN_WORKER_INFO: Readonly<AgentInfo> = Object.freeze({
  agentId: BUILTIN_WORKER_AGENT_ID,
  name: "Built-in worker",
  role: "worker",
  strengths: ["notes", "documentation"],
});

/**
 * Whether the built-in worker is on the team (issue 28): when no agent is configured (agents whose role is `leader`
 * do not count: a config that only names a model-backed leader still needs a worker), when the config's
 * `builtinWorker` is `true`, or when `allowedAgents` names it; `builtinWorker: false` with no worker agent configured
 * still keeps it (a team cannot be empty). Pure.
 */
export function builtinWorkerOnTeam(config: AgentConfig): boolean {
  if (config.allowedAgents?.includes(BUILTIN_WORKER_AGENT_ID) === true) return true;
  if (config.agents.every((agent) => agent.role === "leader")) return true;
  return config.builtinWorker === true;
}

/**
 * Every agent the orchestrator may start: the configured ones plus the built-in worker (always startable, listed
 * last). Implements the core's `AgentDirectory`: `list()` is the team plans draw from (issue 28: the configured agents,
 * narrowed by `allowedAgents`; the built-in worker only per `builtinWorkerOnTeam`), `get()` knows every agent, so a
 * plan that names the built-in worker still runs. `launchSpec` is adapter-only. Immutable after construction.
 */
export class AgentRegistry implements AgentDirectory {
  private readonly infos = new Map<string, AgentInfo>();
  private readonly specs = new Map<string, LaunchSpec>();
  private readonly team: string[];

  /**
   * Builds the registry from a validated config (default: no configured agents). Does not touch the disk. `path` is
   * the absolute path of the file the config was read from (`null`: none, only the built-in worker).
   */
  constructor(
    readonly config: AgentConfig = emptyAgentConfig(),
    readonly path: string | null = null,
  ) {
    for (const agent of config.agents) {
      this.infos.set(agent.agentId, {
        agentId: agent.agentId,
        name: agent.name ?? agent.agentId,
        role: agent.role,
        strengths: [...agent.strengths],
        ...(agent.maxInstances !== undefined ? { maxInstances: agent.maxInstances } : {}),
        ...(config.defaultAgent === agent.agentId ? { default: true as const } : {}),
      });
      this.specs.set(agent.agentId, {
        command: agent.command,
        args: [...agent.args],
        env: { ...agent.env },
        ...(agent.auth !== undefined ? { auth: { ...agent.auth } } : {}),
        ...(agent.mcpServers !== undefined ? { mcpServers: structuredClone(agent.mcpServers) } : {}),
      });
    }
    this.infos.set(BUILTIN_WORKER_AGENT_ID, {
      ...BUILTIN_WORKER_INFO,
      strengths: [...BUILTIN_WORKER_INFO.strengths],
      ...(config.defaultAgent === BUILTIN_WORKER_AGENT_ID ? { default: true as const } : {}),
    });
    this.specs.set(BUILTIN_WORKER_AGENT_ID, builtinWorkerLaunchSpec());
    const allowed = config.allowedAgents === undefined ? undefined : new Set(config.allowedAgents);
    this.team = config.agents
      .map((a) => a.agentId)
      .filter((id) => allowed === undefined || allowed.has(id))
      .concat(builtinWorkerOnTeam(config) ? [BUILTIN_WORKER_AGENT_ID] : []);
  }

  /** Loads the config (see `loadAgentConfig`) and builds a registry from it. Throws `AgentConfigError`. */
  static async load(options: { configPath?: string; cwd: string }): Promise<AgentRegistry> {
    const { config, path } = await loadAgentConfig(options);
    return new AgentRegistry(config, path);
  }

  /** The team: configured agents in file order (narrowed by `allowedAgents`), then the built-in worker when on it. Copies. */
  list(): AgentInfo[] {
    return this.team.map((id) => copyInfo(this.infos.get(id) as AgentInfo));
  }

  /** Every agent the registry can start, team or not, configured ones first. Copies. */
  all(): AgentInfo[] {
    return [...this.infos.values()].map(copyInfo);
  }

  /** The agent with this id (on the team or not), or `undefined`. Returns a copy. */
  get(agentId: string): AgentInfo | undefined {
    const info = this.infos.get(agentId);
    return info === undefined ? undefined : copyInfo(info);
  }

  /** How to start `agentId` as an ACP subprocess. Throws `Error` for an unknown agent id. Returns a copy. */
  launchSpec(agentId: string): LaunchSpec {
    const spec = this.specs.get(agentId);
    if (spec === undefined) throw new Error(`Unknown agent "${agentId}": it is not in the agent registry.`);
    return {
      ...spec,
      args: [...spec.args],
      env: { ...spec.env },
      ...(spec.auth !== undefined ? { auth: { ...spec.auth } } : {}),
      ...(spec.mcpServers !== undefined ? { mcpServers: structuredClone(spec.mcpServers) } : {}),
    };
  }
}

function copyInfo(info: AgentInfo): AgentInfo {
  return { ...info, strengths: [...info.strengths] };
}

/**
 * Why the config's `leader` cannot lead, in one sentence, or `undefined` when it is absent or names an agent of the
 * registry. Checked by `serve` (and so `run`/`resume`) and `check-agents` alike. Pure.
 */
export function configuredLeaderProblem(registry: AgentRegistry): string | undefined {
  const leader = registry.config.leader;
  if (leader === undefined || registry.get(leader) !== undefined) return undefined;
  return `the config's "leader" is "${leader}", which is not one of its "agents".`;
}
