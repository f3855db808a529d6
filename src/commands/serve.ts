/**
 * `acp-orchestrator serve` (the default command): the composition root of the server (DESIGN.md, Layers). Builds the
 * logger, the run-state authority, the agent registry, the workers and the leader, and serves JSON-RPC (ACP) on
 * stdin/stdout until stdin closes or a signal arrives.
 *
 * stdout carries protocol frames only; logs go to stderr (or --log-file). This file wires; it holds no protocol or
 * domain logic.
 */
import { PassThrough, Writable } from "node:stream";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { AgentConfigError, AgentRegistry, configuredLeaderProblem } from "../adapters/agents/registry.js";
import { LazyAcpWorkerPool, lazyHeuristicLeader, lazyLeaderResolver } from "../adapters/agents/lazy-agents.js";
import { McpSecrets } from "../adapters/agents/mcp-servers.js";
import { DelegatingAuthority } from "../adapters/persistence/delegating-authority.js";
import { DEFAULT_HOST_TIMEOUT_MS } from "../adapters/persistence/host-authority.js";
import { describeLocation, openStore, stateLocation, type StateLocation } from "../adapters/persistence/open-store.js";
import { defaultProjectId, defaultStatePath, STATE_PATH_ENV } from "../adapters/persistence/state-path.js";
import { SERVER_LEADER_PROMPT_VERSION } from "../adapters/agents/leader-prompts.js";
import { GitWorkspaceProbe } from "../adapters/workspace/git-probe.js";
import { GitWorkspace } from "../adapters/workspace/git-workspace.js";
import { GitVerifier } from "../adapters/workspace/verify-worktrees.js";
import { DEFAULT_REMOTE_TIMEOUT_MS, RemoteWorkspace } from "../adapters/workspace/remote-mirror.js";
import { nodeSha256Hex } from "../adapters/system/digest.js";
import { ProcessLiveness } from "../adapters/system/process-liveness.js";
import { DEFAULT_HEAP_GROWTH_PERCENT, limitHeapGrowth } from "../adapters/system/heap-growth.js";
import { WORKSPACE_FAULT_ENV, withFaults } from "../adapters/workspace/fault-injection.js";
import { agentHashes, agentsHash } from "../core/product/fingerprint.js";
import { DEFAULT_PRODUCT_OPTIONS, type ProductOptions } from "../core/product/context.js";
import type { Clock, RunStateAuthority } from "../core/ports.js";
import { createLogger, LOG_FORMATS, type LogFormat, type ServerLogger } from "../server/logger.js";
import { OrchestratorServer } from "../server/server.js";
import { attachmentReader } from "../server/session/content.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";
import {
  HEAP_GROWTH_ENV,
  HOST_TIMEOUT_ENV,
  integerSetting,
  LEASE_TTL_ENV,
  logLevelSetting,
  OWNER_ID_ENV,
  REMOTE_TIMEOUT_ENV,
} from "./environment.js";
import { FLEET_HELP, FLEET_OPTIONS, fleetSettings, openServeLiveness } from "./serve-liveness.js";
import { packageVersion } from "./version.js";
import { nodeCrypto } from "../adapters/system/node-builtins.js";

const OPTIONS = {
  config: { type: "string" },
  state: { type: "string" },
  "log-level": { type: "string" },
  "log-file": { type: "string" },
  "log-format": { type: "string" },
  "host-timeout-ms": { type: "string" },
  "heap-growth-percent": { type: "string" },
  recover: { type: "boolean" },
  "no-client": { type: "boolean" },
  "workspace-root": { type: "string" },
  "remote-timeout-ms": { type: "string" },
  ...FLEET_OPTIONS,
} as const;

const HELP = `Usage: acp-orchestrator [serve] [options]

Serves JSON-RPC (ACP) on stdin/stdout: what an IDE or an agent host spawns. When stdin closes the server stops
scheduling, persists running tasks as interrupted, and exits 0.

Options:
  --config FILE        agent registry file (default: acp-orchestrator.json in the working directory, if present)
  --state PATH|URL     SQLite state file, or a postgres://user:password@host:port/db[?schema=name] URL shared by
                       many servers (default: $ACP_ORCHESTRATOR_STATE, else a file in the user's state directory)
  --log-level LEVEL    trace | debug | info | warn | error | fatal | silent (default: $ACP_ORCHESTRATOR_LOG_LEVEL, else info)
  --log-file FILE      write logs to FILE instead of stderr
  --log-format F       json (default: one JSON line each, for machines) or pretty (one plain line each, what the
                       commands a person runs use)
  --host-timeout-ms N  how long a host that owns the run state (runState/*) has to answer each request
                       (default: $ACP_ORCHESTRATOR_HOST_TIMEOUT_MS, else ${DEFAULT_HOST_TIMEOUT_MS})
  --heap-growth-percent N
                       how far the JavaScript heap may grow past what the last full garbage collection kept, in %:
                       lower keeps long runs' peak memory near what they hold (default:
                       $ACP_ORCHESTRATOR_HEAP_GROWTH_PERCENT, else ${DEFAULT_HEAP_GROWTH_PERCENT}; 0 leaves V8's rule, up to 300 %)
  --workspace-root DIR where this server keeps its mirror clone of each git remote of products with a workspace
                       remote, and their worktrees (default: workspaces/ in the user's state directory)
  --remote-timeout-ms N
                       how long one git clone, fetch or push of a workspace remote may take before its processes are
                       killed and the product pauses naming the remote (default: $ACP_ORCHESTRATOR_REMOTE_TIMEOUT_MS,
                       else ${DEFAULT_REMOTE_TIMEOUT_MS})
  --recover            also resume products left executing, and goal runs left running, by a server that is gone
                       (its lease expired, or its process on this host died), each by exactly one server: for a
                       fleet on one PostgreSQL store
  --no-client          with --recover: serve no client (stdin is not read, nothing is written to stdout) and run
                       until SIGTERM or SIGINT: a fleet member started by systemd, docker or nohup that takes over the
                       products of servers that are gone and carries out the requests forwarded to them
${FLEET_HELP}
Environment:
  ${LEASE_TTL_ENV}
                       lifetime of a product lease without renewal, in ms (default
                       ${DEFAULT_PRODUCT_OPTIONS.leaseTtlMs}; renewed every third of it)
  ${OWNER_ID_ENV}
                       this process's lease owner id (default: host:pid:start-time:scope, which lets a restarted
                       server take over at once from a dead one on the same host; must be unique per process)
`;

const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, Math.min(Math.max(0, ms), 2_147_483_647));
    t.unref();
    return () => clearTimeout(t);
  },
};

type ServeValues = ReturnType<typeof parseCommandArgs<typeof OPTIONS>>["values"];

/** The settings of one `serve` run, from its flags and environment (each validated: a bad one is a UsageError). */
interface ServeSettings {
  level: ReturnType<typeof logLevelSetting>;
  logFormat: LogFormat;
  hostTimeoutMs: number;
  remoteTimeoutMs: number;
  heapGrowthPercent: number;
  leaseTtlMs: number;
  leaseRenewMs: number;
  fleet: ReturnType<typeof fleetSettings>;
}

/** Reads and validates the settings of `serve` (throws UsageError, exit 2, for a bad flag or environment value). */
function serveSettings(values: ServeValues): ServeSettings {
  const level = logLevelSetting("serve", values["log-level"]);
  const logFormat = (values["log-format"] ?? "json") as LogFormat;
  if (!LOG_FORMATS.includes(logFormat))
    throw new UsageError(`--log-format takes ${LOG_FORMATS.join(" or ")}, not "${values["log-format"]}".`, "serve");
  const ms = (flag: "host-timeout-ms" | "remote-timeout-ms", envName: string, fallback: number) =>
    integerSetting("serve", { flag, flagValue: values[flag], envName, fallback, min: 1, unit: "milliseconds" });
  const hostTimeoutMs = ms("host-timeout-ms", HOST_TIMEOUT_ENV, DEFAULT_HOST_TIMEOUT_MS);
  // Issue 33: a workspace remote that accepts and never answers pauses its product instead of hanging it.
  const remoteTimeoutMs = ms("remote-timeout-ms", REMOTE_TIMEOUT_ENV, DEFAULT_REMOTE_TIMEOUT_MS);
  // Issue 16: long runs peak near what they hold, not at up to 4x of it (heap-growth.ts).
  const heapGrowthPercent = integerSetting("serve", {
    flag: "heap-growth-percent",
    flagValue: values["heap-growth-percent"],
    envName: HEAP_GROWTH_ENV,
    fallback: DEFAULT_HEAP_GROWTH_PERCENT,
    min: 0,
    unit: "percent",
  });
  // Guarantee 6: how long this process's leases live without renewal.
  const leaseTtlMs = integerSetting("serve", {
    envName: LEASE_TTL_ENV,
    fallback: DEFAULT_PRODUCT_OPTIONS.leaseTtlMs,
    min: 30,
    unit: "milliseconds",
  });
  const leaseRenewMs = Math.max(10, Math.floor(leaseTtlMs / 3));
  const fleet = fleetSettings(values, leaseRenewMs);
  return { level, logFormat, hostTimeoutMs, remoteTimeoutMs, heapGrowthPercent, leaseTtlMs, leaseRenewMs, fleet };
}

/**
 * The agent registry of `--config` (or the working directory's), or the exit code 2 after one plain sentence on
 * stderr when the config is invalid or names a leader or a workspace it cannot use.
 */
async function loadRegistry(values: ServeValues): Promise<AgentRegistry | 2> {
  let registry: AgentRegistry;
  try {
    registry = await AgentRegistry.load({
      ...(values.config ? { configPath: resolve(values.config) } : {}),
      cwd: process.cwd(),
    });
  } catch (err) {
    if (err instanceof AgentConfigError) return configProblem(err.message);
    throw err;
  }
  const problem = configWorkspaceProblem(registry.config) ?? configuredLeaderProblem(registry);
  return problem !== undefined ? configProblem(problem) : registry;
}

/**
 * Why a SQLite state file given by `--state` or `$ACP_ORCHESTRATOR_STATE` cannot be created: its folder does not exist
 * (a new user's trial: `--state /nonexistent/x.db` made /nonexistent, a typo's folder, silently). Only the default
 * state file's folder is made when missing. `undefined` when the store can be opened there (or is PostgreSQL).
 */
function missingStateFolder(location: StateLocation, flag: string | undefined): string | undefined {
  if (location.kind !== "sqlite") return undefined;
  if (location.path === defaultStatePath({ ...process.env, [STATE_PATH_ENV]: "" })) return undefined;
  const folder = dirname(location.path);
  if (existsSync(folder)) return undefined;
  const from = flag !== undefined ? "--state" : `$${STATE_PATH_ENV}`;
  return `The folder ${folder} of the state file ${location.path} (from ${from}) does not exist; create it first, or give a file in an existing folder.`;
}

/** Writes a config problem to stderr; returns the exit code 2. */
function configProblem(message: string): 2 {
  process.stderr.write(`acp-orchestrator: ${message}\n`);
  return 2;
}

/**
 * The workers and the leaders of `registry`, and the MCP secrets they share; both read the user's attachments from
 * `authority` for their prompts (issue 31).
 */
function buildAgents(registry: AgentRegistry, logger: ServerLogger, authority: RunStateAuthority) {
  const config = registry.config;
  const readAttachment = attachmentReader(authority);
  // The ACP SDK and the agent adapters load when a task first runs on an agent or an ACP leader first takes a turn
  // (issue 16: most of the start-up time otherwise).
  // Issue 28: the secrets of the sessions' MCP servers, held in this process's memory only (mcp-servers.ts).
  const mcpSecrets = new McpSecrets();
  const workers = new LazyAcpWorkerPool({
    registry,
    mcpSecrets,
    readAttachment,
    logger: logger.child({ component: "workers" }),
    ...(config.taskTimeoutMs !== undefined ? { taskTimeoutMs: config.taskTimeoutMs } : {}),
    ...(config.startTimeoutMs !== undefined ? { startTimeoutMs: config.startTimeoutMs } : {}),
    ...(config.permissions !== undefined ? { permissions: config.permissions } : {}),
    ...(config.overload !== undefined ? { overload: withoutUndefined(config.overload) } : {}),
  });
  // The leader: a product's `leaderAgentId`, else the config's `leader`, as an ACP agent; with neither, the heuristic one.
  const leaders = lazyLeaderResolver({
    registry,
    logger: logger.child({ component: "leader" }),
    fallback: lazyHeuristicLeader(),
    ...(config.leader !== undefined ? { defaultLeaderAgentId: config.leader } : {}),
    leaderOptions: {
      clientVersion: packageVersion(),
      mcpSecrets,
      readAttachment,
      defaultCwd: process.cwd(),
      ...(config.taskTimeoutMs !== undefined ? { turnTimeoutMs: config.taskTimeoutMs } : {}),
      ...(config.startTimeoutMs !== undefined ? { startTimeoutMs: config.startTimeoutMs } : {}),
    },
  });
  return { mcpSecrets, workers, leaders };
}

/** The product options of this server: the defaults, the config's, the lease owner id and the drift fingerprints. */
function productOptions(registry: AgentRegistry, ownerId: string, settings: ServeSettings): ProductOptions {
  const config = registry.config;
  return {
    ...DEFAULT_PRODUCT_OPTIONS,
    ...(config.maxParallelTasks !== undefined ? { maxParallelTasks: config.maxParallelTasks } : {}),
    ...(config.isolation !== undefined ? { isolation: config.isolation } : {}),
    ...(config.integration !== undefined ? { integration: config.integration } : {}),
    ...(config.verify !== undefined ? { verify: config.verify } : {}),
    ...(config.workspace !== undefined ? { workspace: config.workspace } : {}),
    ownerId,
    leaseTtlMs: settings.leaseTtlMs,
    leaseRenewMs: settings.leaseRenewMs,
    // Drift detection: plans depend on both leaders' prompt templates; the registry is immutable once loaded.
    leaderPromptVersion: SERVER_LEADER_PROMPT_VERSION,
    // Hashed on first use, once: not before `initialize` is answered (issue 34, cold start).
    agentsFingerprint: once(() => agentsHash(config.agents, nodeSha256Hex)),
    agentHashes: once(() => agentHashes(config.agents, nodeSha256Hex)),
    // Recorded with the run so `status` prints a resume command naming the same agents (a new user's trial).
    ...(registry.path !== null ? { configPath: registry.path } : {}),
  };
}

/** What the server is built from besides the registry's agents (see serve). */
interface ServerParts {
  values: ServeValues;
  settings: ServeSettings;
  registry: AgentRegistry;
  agents: ReturnType<typeof buildAgents>;
  logger: ServerLogger;
  authority: DelegatingAuthority;
  liveness: Awaited<ReturnType<typeof openServeLiveness>>["liveness"];
  ownerId: string;
  /** Opens the store and attaches it to `authority` when it was not opened before serving (see `serve`). */
  openStore?: () => Promise<void>;
}

/** The JSON-RPC server on stdin/stdout, wired to its ports (DESIGN.md, Layers); serves nothing until `serve()`. */
function buildServer(parts: ServerParts): OrchestratorServer {
  const { values, settings, registry, logger, authority } = parts;
  const config = registry.config;
  const { workers, leaders, mcpSecrets } = parts.agents;
  // The user's state directory, not $ACP_ORCHESTRATOR_STATE's (that may be a postgres:// URL).
  const workspaceRoot = resolve(
    values["workspace-root"] ?? join(dirname(defaultStatePath({ ...process.env, [STATE_PATH_ENV]: "" })), "workspaces"),
  );
  // --no-client: an input that never ends and an output that keeps nothing (the process ends on a signal alone).
  const noClient = values["no-client"] === true;
  const server = new OrchestratorServer({
    input: noClient ? new PassThrough() : process.stdin,
    output: noClient ? new Writable({ write: (_chunk, _encoding, done) => done() }) : process.stdout,
    logger,
    authority,
    liveness: parts.liveness,
    agents: registry,
    workers,
    leader: leaders.resolve,
    clock: systemClock,
    ids: (prefix) => `${prefix}_${nodeCrypto().randomUUID().replace(/-/g, "").slice(0, 20)}`,
    version: packageVersion(),
    productOptions: productOptions(registry, parts.ownerId, settings),
    workspace: new GitWorkspaceProbe(),
    workspaces: withFaults(
      new GitWorkspace({ logger: logger.child({ component: "workspace" }) }),
      process.env[WORKSPACE_FAULT_ENV],
    ),
    verifier: new GitVerifier(),
    remoteWorkspaces: new RemoteWorkspace(
      workspaceRoot,
      new GitWorkspace({ logger: logger.child({ component: "remote-workspace" }) }),
      { timeoutMs: settings.remoteTimeoutMs },
    ),
    ...(config.leader !== undefined ? { defaultLeaderAgentId: config.leader } : {}),
    projectIdFor: (cwd) => defaultProjectId(cwd),
    hostAuthority: { target: authority, timeoutMs: settings.hostTimeoutMs },
    fleet: {
      recover: values.recover === true,
      scanMs: settings.fleet.recoverScanMs,
      livenessCheckMs: settings.fleet.probeMs,
    },
    mcpSecrets,
    ...(parts.openStore !== undefined ? { openStore: parts.openStore } : {}),
  });
  // Worker permission questions go to the IDE of the product's ACP session, else the config's policy decides.
  workers.setPermissionForwarder((request) => server.sessions.forwardWorkerPermission(request));
  // Backpressure (issue 7): workers' output is read only while the client keeps up with the notifications it becomes.
  workers.setOutputGate(() => server.connection.whenWritable());
  return server;
}

/**
 * The first SIGTERM/SIGINT stops the server: running tasks are written back as interrupted and the leases released
 * (guarantee 13: another server may then resume at once), then `closeRest` runs and the process exits 0. A repeated
 * signal must not cut that short, so it is ignored until the leases are released; after that it ends the process
 * without waiting for the rest.
 */
function stopOnSignals(server: OrchestratorServer, logger: ServerLogger, closeRest: () => Promise<void>): void {
  let stopping = false;
  let leasesReleased = false;
  const stop = (signal: string) => {
    if (stopping) {
      if (leasesReleased) process.exit(0);
      logger.warn({ signal }, "already stopping: the signal is ignored until the product leases are released");
      return;
    }
    stopping = true;
    logger.info({ signal }, "stopping");
    void server.shutdown().finally(() => {
      leasesReleased = true;
      void closeRest().finally(() => process.exit(0));
    });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

async function serve(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs("serve", argv, OPTIONS);
  expectPositionals("serve", positionals, 0, 0, "no arguments");
  const settings = serveSettings(values);
  if (values["no-client"] === true && values.recover !== true)
    throw new UsageError(
      "--no-client needs --recover: a server no client talks to only drives the products it takes over.",
      "serve",
    );
  // Once an `initialize` already waiting is answered (in the check phase after the one after the first read of the
  // input, as the store's open, server.ts): V8 applies the flag from its next full collection, which a start does not
  // reach, and `node:v8` is not loaded before the answer (issue 34, cold start).
  setImmediate(() => setImmediate(() => limitHeapGrowth(settings.heapGrowthPercent)));
  const logger = createLogger({
    level: settings.level,
    format: settings.logFormat,
    ...(values["log-file"] ? { file: values["log-file"] } : {}),
  });
  const registry = await loadRegistry(values);
  if (registry === 2) return 2;
  // Guarantee 13: the owner id names this host, pid and process start time, so a server restarted after a crash can
  // prove the old owner dead and take its products over at once (src/adapters/system/process-liveness.ts).
  const processLiveness = new ProcessLiveness();
  const ownerId = process.env[OWNER_ID_ENV] || processLiveness.ownerId;
  const location = stateLocation(values.state);
  const noFolder = missingStateFolder(location, values.state);
  if (noFolder !== undefined) return configProblem(noFolder);
  // The embedded store (SQLite, or PostgreSQL for a postgres:// URL) until a client declares `runStateAuthority` in
  // initialize (PROTOCOL.md section 7). A SQLite file is opened once serving began, after an `initialize` already
  // waiting is answered (issue 34, cold start: better-sqlite3's load and the open were a sixth of the start); every
  // other request waits for it, and one that cannot be opened still ends the server with its sentence and exit code
  // 2, only after that first answer. PostgreSQL is opened first, as its liveness lock must be held before serving.
  const deferred = location.kind === "sqlite";
  const authority = deferred ? new DelegatingAuthority() : new DelegatingAuthority(await openStore(location));
  // On PostgreSQL, the liveness lock is taken before any lease (docs/FLEET.md) and released after every lease.
  const { liveness, close: closeLiveness } = await openServeLiveness(
    location,
    ownerId,
    processLiveness,
    settings.fleet,
    logger,
  );
  const agents = buildAgents(registry, logger, authority);
  const server = buildServer({
    ...{ values, settings, registry, agents, logger, authority, liveness, ownerId },
    ...(deferred ? { openStore: () => openAndAttach(location, authority) } : {}),
  });
  logger.info(
    { statePath: describeLocation(location), ownerId },
    values["no-client"] === true
      ? "acp-orchestrator serving no client (--no-client): it stops on SIGTERM or SIGINT"
      : "acp-orchestrator serving on stdio",
  );
  // --no-client: nothing else may hold the event loop (a SQLite store, idle timers are unref'd): this timer does.
  if (values["no-client"] === true) setInterval(() => undefined, 2 ** 30);
  stopOnSignals(server, logger, () =>
    Promise.allSettled([agents.leaders.close(), authority.close()]).then(() => closeLiveness()),
  );
  await server.serve();
  await agents.leaders.close();
  await authority.close();
  await closeLiveness();
  logger.info({}, "stdin closed; stopped");
  logger.flush();
  return 0;
}

/** Opens the store at `location` and attaches it to `authority`; closes it again when `authority` closed meanwhile. */
async function openAndAttach(location: StateLocation, authority: DelegatingAuthority): Promise<void> {
  let store: RunStateAuthority;
  try {
    store = await openStore(location);
  } catch (err) {
    authority.openFailed(err); // the requests held meanwhile fail with it (-32013), then the server stops
    throw err;
  }
  try {
    authority.attach(store);
  } catch (err) {
    await store.close();
    throw err;
  }
}

/** `make()`'s value, made on the first call and kept. */
function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

/** `value` without its `undefined` fields (exactOptionalPropertyTypes). */
function withoutUndefined<T extends object>(value: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as never;
}

/** Why the config's default `workspace` cannot be used with its other defaults (issue 33), or `undefined`. */
function configWorkspaceProblem(config: AgentRegistry["config"]): string | undefined {
  if (config.workspace === undefined) return undefined;
  if (config.integration?.mode === "merge")
    return "the config's workspace remote cannot be combined with integration mode merge (it is for products in a local cwd only).";
  if (config.isolation === "shared")
    return "the config's workspace remote cannot be combined with isolation shared (remote products run in worktrees).";
  return undefined;
}

export const serveCommand: Command = {
  name: "serve",
  options: OPTIONS,
  synopsis:
    "[serve] [--config FILE] [--state PATH|URL] [--log-level LEVEL] [--log-file FILE] [--log-format json|pretty] [--host-timeout-ms N] [--heap-growth-percent N] [--recover] [--no-client] [--workspace-root DIR] [--remote-timeout-ms N] [--recover-scan-ms N] [--liveness-probe-ms N] [--liveness-fence-ms N]",
  summary: "serve JSON-RPC (ACP) on stdin/stdout (the default command)",
  help: HELP,
  run: serve,
};
