/**
 * A session's modes and config options (PROTOCOL.md section 4, ACP-V1.md section 2.3).
 *
 * Modes: `confirm` (default: the user confirms each plan through `session/request_permission`), `auto` (plans are
 * confirmed automatically) and `goal` (a prompt starts a goal run). Config options, all of type `select`, each with a
 * current value at all times: `leader` (category `model`: `heuristic` and every registry agent that can lead),
 * `parallelism` (category `_parallelism`: `1`, `2`, `4`, `8`, the `maxParallelTasks` of products started in the
 * session), `isolation` (category `_isolation`: `worktree` or `shared`) and `integration` (category `_integration`:
 * `branch` or `merge`, the `integration.mode` of products started in the session). Every value applies to the
 * session's next product. Pure: no I/O; the adapter stores the values in the session record.
 */
import type { SessionConfigOption, SessionModeState } from "../../../protocol/acp.js";
import type { AgentInfo } from "../../core/ports.js";
import { invalidParams } from "../wire-errors.js";

export const MODE_IDS = ["confirm", "auto", "goal"] as const;
export type ModeId = (typeof MODE_IDS)[number];

export const DEFAULT_MODE: ModeId = "confirm";

const MODES: { id: ModeId; name: string; description: string }[] = [
  { id: "confirm", name: "Confirm", description: "Show each plan and run it once you confirm it." },
  { id: "auto", name: "Auto", description: "Run each plan as soon as it is ready, to the product's end." },
  {
    id: "goal",
    name: "Goal",
    description: "Work toward the prompt as a goal, phase after phase, until its acceptance criteria pass.",
  },
];

/** The config option ids of PROTOCOL.md section 4. */
export const CONFIG_IDS = ["leader", "parallelism", "isolation", "integration"] as const;
export type ConfigId = (typeof CONFIG_IDS)[number];

/** A session's config values (every option has one at all times). */
export interface SessionConfig {
  leader: string;
  parallelism: string;
  isolation: "worktree" | "shared";
  /** Absent in records written before the option existed: `branch` (the products' default). */
  integration?: "branch" | "merge";
}

/** What the session settings are computed from: the server's agents and defaults. */
export interface SettingsContext {
  /** Registry agents; every one but the built-in worker can lead. */
  agents(): AgentInfo[];
  /** Agent ids that cannot lead (the built-in worker). */
  nonLeaders: ReadonlySet<string>;
  /** The leader products use when none is chosen: the configured `leader`, else `heuristic`. */
  defaultLeader: string;
  /** The server's `maxParallelTasks`. */
  defaultParallelism: number;
}

const PARALLELISM = ["1", "2", "4", "8"];

/** ACP `modes` of a session whose current mode is `current`. */
export function modeState(current: ModeId): SessionModeState {
  return { currentModeId: current, availableModes: MODES.map((m) => ({ ...m })) };
}

/** True when `modeId` is one of the modes; throws `-32602` naming them otherwise. */
export function checkMode(modeId: string): ModeId {
  if ((MODE_IDS as readonly string[]).includes(modeId)) return modeId as ModeId;
  throw invalidParams([{ path: ["modeId"], message: `must be one of ${MODE_IDS.join(", ")}` }]);
}

function leaderValues(ctx: SettingsContext): { value: string; name: string; description: string }[] {
  const values = [
    { value: "heuristic", name: "Heuristic", description: "The built-in leader: plans from the goal's items." },
  ];
  for (const a of ctx.agents()) {
    if (ctx.nonLeaders.has(a.agentId)) continue;
    values.push({ value: a.agentId, name: a.name, description: `The ${a.name} agent (${a.role}) plans and leads.` });
  }
  if (!values.some((v) => v.value === ctx.defaultLeader)) {
    values.push({ value: ctx.defaultLeader, name: ctx.defaultLeader, description: "The configured leader." });
  }
  return values;
}

function parallelismValues(ctx: SettingsContext): string[] {
  const configured = String(ctx.defaultParallelism);
  return PARALLELISM.includes(configured) || !Number.isFinite(ctx.defaultParallelism)
    ? PARALLELISM
    : [...PARALLELISM, configured].sort((a, b) => Number(a) - Number(b));
}

/** The config values of a new session. `git`: the session's cwd is a git checkout with a commit. */
export function defaultConfig(ctx: SettingsContext, git: boolean): SessionConfig {
  const parallel = String(ctx.defaultParallelism);
  return {
    leader: ctx.defaultLeader,
    parallelism: parallelismValues(ctx).includes(parallel) ? parallel : "4",
    isolation: git ? "worktree" : "shared",
    integration: "branch",
  };
}

/** The complete list of config options with `config`'s current values (always the same four, in this order). */
export function configOptions(ctx: SettingsContext, config: SessionConfig): SessionConfigOption[] {
  return [
    {
      id: "leader",
      name: "Leader",
      description: "The agent that plans products started in this session and consults on failures.",
      category: "model",
      type: "select",
      currentValue: config.leader,
      options: leaderValues(ctx),
    },
    {
      id: "parallelism",
      name: "Max parallel tasks",
      description: "At most this many tasks of a product run at once (maxParallelTasks).",
      category: "_parallelism",
      type: "select",
      currentValue: config.parallelism,
      options: parallelismValues(ctx).map((v) => ({ value: v, name: v })),
    },
    {
      id: "isolation",
      name: "Isolation",
      description:
        "worktree: each task attempt runs in its own git worktree; shared: every task runs in the workspace.",
      category: "_isolation",
      type: "select",
      currentValue: config.isolation,
      options: [
        { value: "worktree", name: "Worktree per task" },
        { value: "shared", name: "Shared workspace" },
      ],
    },
    {
      id: "integration",
      name: "Integration",
      description:
        "branch: results stay on the product's branch acp/<productId>; merge: they are merged into your branch at the end.",
      category: "_integration",
      type: "select",
      currentValue: config.integration ?? "branch",
      options: [
        { value: "branch", name: "Product branch only" },
        { value: "merge", name: "Merge into the checkout's branch" },
      ],
    },
  ];
}

/**
 * Applies `session/set_config_option`: returns the new config. Throws `-32602` for an unknown option id, a boolean
 * value, or a value that is not one of the option's values.
 */
export function setConfig(
  ctx: SettingsContext,
  config: SessionConfig,
  configId: string,
  value: string | boolean,
): SessionConfig {
  const option = configOptions(ctx, config).find((o) => o.id === configId);
  if (!option) throw invalidParams([{ path: ["configId"], message: `must be one of ${CONFIG_IDS.join(", ")}` }]);
  const values = option.options.map((o) => o.value);
  if (typeof value !== "string" || !values.includes(value)) {
    throw invalidParams([{ path: ["value"], message: `must be one of ${values.join(", ")} for ${configId}` }]);
  }
  return { ...config, [configId]: value } as SessionConfig;
}
