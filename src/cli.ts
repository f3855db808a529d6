#!/usr/bin/env node
/**
 * The composition root (DESIGN.md, Layers): parses flags, builds the logger, the run-state authority, the agent
 * registry, the workers and the leader, and serves JSON-RPC on stdin/stdout.
 *
 *   acp-orchestrator [serve] [--config FILE] [--state PATH] [--log-level LEVEL] [--log-file FILE]
 *   acp-orchestrator demo [--goal TEXT] [--keep]
 *   acp-orchestrator record --out FILE [--normalize] -- COMMAND...   (src/transcripts/commands.ts)
 *   acp-orchestrator replay FILE... [-- COMMAND...]                  (src/transcripts/commands.ts)
 *   acp-orchestrator --help | --version
 *
 * stdout carries protocol frames only; everything else goes to stderr (or --log-file).
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { AgentConfigError, AgentRegistry } from "./adapters/agents/registry.js";
import { AcpWorkerPool } from "./adapters/agents/acp-worker.js";
import { DelegatingAuthority } from "./adapters/persistence/delegating-authority.js";
import { DEFAULT_HOST_TIMEOUT_MS } from "./adapters/persistence/host-authority.js";
import { describeLocation, openStore, stateLocation } from "./adapters/persistence/open-store.js";
import { defaultProjectId } from "./adapters/persistence/state-path.js";
import { LEADER_PROMPT_VERSION } from "./adapters/agents/leader-prompts.js";
import { createLeaderResolver } from "./adapters/agents/acp-leader.js";
import { GitWorkspaceProbe } from "./adapters/workspace/git-probe.js";
import { agentsHash } from "./core/product/fingerprint.js";
import { HeuristicLeader } from "./core/leader/heuristic-leader.js";
import { DEFAULT_PRODUCT_OPTIONS } from "./core/product/context.js";
import { AuthorityFailure, type Clock } from "./core/ports.js";
import { createLogger, type LogLevel } from "./server/logger.js";
import { OrchestratorServer } from "./server/server.js";

const HELP = `acp-orchestrator — an ACP agent that turns a team of coding agents into one agent.

Usage:
  acp-orchestrator [serve] [options]   serve JSON-RPC (ACP) on stdin/stdout (the default)
  acp-orchestrator demo [--goal TEXT]  run a product end to end against a spawned server
  acp-orchestrator record --out FILE [--normalize] -- COMMAND...
                                       proxy an ACP agent's stdio and write a transcript (record --help)
  acp-orchestrator replay FILE... [-- COMMAND...]
                                       replay transcripts against fresh servers (replay --help)
  acp-orchestrator --help | --version

Options:
  --config FILE      agent registry file (default: acp-orchestrator.json in the working directory, if present)
  --state PATH|URL   SQLite state file, or a postgres://user:password@host:port/db[?schema=name] URL shared by
                     many servers (default: $ACP_ORCHESTRATOR_STATE, else a file in the user's state directory)
  --log-level LEVEL  trace | debug | info | warn | error | fatal | silent (default: info)
  --log-file FILE    write logs to FILE instead of stderr
  --host-timeout-ms N  how long a host that owns the run state (runState/*) has to answer each request
                     (default: $ACP_ORCHESTRATOR_HOST_TIMEOUT_MS, else ${DEFAULT_HOST_TIMEOUT_MS})
  --goal TEXT        (demo) the goal to plan and run (use --goal=TEXT when TEXT starts with "-")
  --keep             (demo) keep the temporary workspace

Environment:
  ACP_ORCHESTRATOR_LEASE_TTL_MS  lifetime of a product lease without renewal (default 30000; renewed every third)
  ACP_ORCHESTRATOR_OWNER_ID      this process's lease owner id (default: host:pid:random; must be unique per process)
`;

/** The package version, read from package.json next to dist/ or the sources. */
export function packageVersion(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [join(here, "..", "package.json"), join(here, "..", "..", "package.json")]) {
    try {
      const pkg = JSON.parse(readFileSync(candidate, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "acp-orchestrator" && pkg.version) return pkg.version;
    } catch {
      // try the next location
    }
  }
  return "0.0.0";
}

const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, Math.min(Math.max(0, ms), 2_147_483_647));
    t.unref();
    return () => clearTimeout(t);
  },
};

const LOG_LEVELS = new Set(["trace", "debug", "info", "warn", "error", "fatal", "silent"]);

async function serve(values: {
  config?: string;
  state?: string;
  "log-level"?: string;
  "log-file"?: string;
  "host-timeout-ms"?: string;
}) {
  const level = (values["log-level"] ?? process.env.ACP_ORCHESTRATOR_LOG_LEVEL ?? "info") as LogLevel;
  if (!LOG_LEVELS.has(level)) {
    process.stderr.write(`acp-orchestrator: unknown --log-level "${level}"\n`);
    return 2;
  }
  const hostTimeoutText = values["host-timeout-ms"] ?? process.env.ACP_ORCHESTRATOR_HOST_TIMEOUT_MS;
  const hostTimeoutMs = hostTimeoutText === undefined ? DEFAULT_HOST_TIMEOUT_MS : Number(hostTimeoutText);
  if (!Number.isSafeInteger(hostTimeoutMs) || hostTimeoutMs <= 0) {
    process.stderr.write(`acp-orchestrator: --host-timeout-ms must be a positive integer, got "${hostTimeoutText}"\n`);
    return 2;
  }
  const logger = createLogger({ level, ...(values["log-file"] ? { file: values["log-file"] } : {}) });
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
  // Guarantee 6: the lease owner id of this process and how long its leases live without renewal.
  const leaseText = process.env.ACP_ORCHESTRATOR_LEASE_TTL_MS;
  const leaseTtlMs = leaseText === undefined ? DEFAULT_PRODUCT_OPTIONS.leaseTtlMs : Number(leaseText);
  if (!Number.isSafeInteger(leaseTtlMs) || leaseTtlMs < 30) {
    process.stderr.write(`acp-orchestrator: ACP_ORCHESTRATOR_LEASE_TTL_MS must be an integer >= 30, got "${leaseText}"\n`);
    return 2;
  }
  const ownerId =
    process.env.ACP_ORCHESTRATOR_OWNER_ID || `${hostname().slice(0, 80)}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const location = stateLocation(values.state);
  const statePath = describeLocation(location);
  // The embedded store (SQLite, or PostgreSQL for a postgres:// URL) until a client declares `runStateAuthority` in
  // initialize (PROTOCOL.md section 7).
  const authority = new DelegatingAuthority(await openStore(location));
  const config = registry.config;
  const workers = new AcpWorkerPool({
    registry,
    logger: logger.child({ component: "workers" }),
    ...(config.taskTimeoutMs !== undefined ? { taskTimeoutMs: config.taskTimeoutMs } : {}),
    ...(config.permissions !== undefined ? { permissions: config.permissions } : {}),
  });
  if (config.leader !== undefined && registry.get(config.leader) === undefined) {
    process.stderr.write(`acp-orchestrator: the config's "leader" is "${config.leader}", which is not one of its "agents".\n`);
    return 2;
  }
  // The leader: a product's `leaderAgentId`, else the config's `leader`, as an ACP agent; with neither, the heuristic one.
  const leaders = createLeaderResolver({
    registry,
    logger: logger.child({ component: "leader" }),
    fallback: new HeuristicLeader(),
    ...(config.leader !== undefined ? { defaultLeaderAgentId: config.leader } : {}),
    leaderOptions: {
      clientVersion: packageVersion(),
      defaultCwd: process.cwd(),
      ...(config.taskTimeoutMs !== undefined ? { turnTimeoutMs: config.taskTimeoutMs } : {}),
    },
  });
  const server = new OrchestratorServer({
    input: process.stdin,
    output: process.stdout,
    logger,
    authority,
    agents: registry,
    workers,
    leader: leaders.resolve,
    clock: systemClock,
    ids: (prefix) => `${prefix}_${randomUUID().replace(/-/g, "").slice(0, 20)}`,
    version: packageVersion(),
    productOptions: {
      ...DEFAULT_PRODUCT_OPTIONS,
      ...(config.maxParallelTasks !== undefined ? { maxParallelTasks: config.maxParallelTasks } : {}),
      ownerId,
      leaseTtlMs,
      leaseRenewMs: Math.max(10, Math.floor(leaseTtlMs / 3)),
      // Drift detection: plans depend on both leaders' prompt templates; the registry is immutable once loaded.
      leaderPromptVersion: `${DEFAULT_PRODUCT_OPTIONS.leaderPromptVersion}+${LEADER_PROMPT_VERSION}`,
      agentsFingerprint: ((hash: string) => () => hash)(agentsHash(config.agents)),
    },
    workspace: new GitWorkspaceProbe(),
    projectIdFor: (cwd) => defaultProjectId(cwd),
    hostAuthority: { target: authority, timeoutMs: hostTimeoutMs },
  });
  // Worker permission questions go to the IDE of the product's ACP session, else the config's policy decides.
  workers.setPermissionForwarder((request) => server.sessions.forwardWorkerPermission(request));
  // Backpressure (issue 7): workers' output is read only while the client keeps up with the notifications it becomes.
  workers.setOutputGate(() => server.connection.whenWritable());
  logger.info({ statePath, ownerId }, "acp-orchestrator serving on stdio");
  const stop = (signal: string) => {
    logger.info({ signal }, "stopping");
    void server.shutdown().finally(() => {
      void Promise.allSettled([leaders.close(), authority.close()]).finally(() => process.exit(0));
    });
  };
  process.once("SIGTERM", () => stop("SIGTERM"));
  process.once("SIGINT", () => stop("SIGINT"));
  await server.serve();
  await leaders.close();
  await authority.close();
  logger.info({}, "stdin closed; stopped");
  logger.flush();
  return 0;
}

async function main(argv: string[]): Promise<number> {
  if (argv[0] === "record" || argv[0] === "replay") {
    // Their own flags (and a COMMAND after --) are parsed by the transcript commands (protocol/TRANSCRIPTS.md).
    const { runRecordCommand, runReplayCommand } = await import("./transcripts/commands.js");
    return argv[0] === "record" ? runRecordCommand(argv.slice(1)) : runReplayCommand(argv.slice(1));
  }
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      help: { type: "boolean", short: "h" },
      version: { type: "boolean", short: "v" },
      config: { type: "string" },
      state: { type: "string" },
      "log-level": { type: "string" },
      "log-file": { type: "string" },
      "host-timeout-ms": { type: "string" },
      goal: { type: "string" },
      keep: { type: "boolean" },
    },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  const command = positionals[0] ?? "serve";
  if (command === "serve") return serve(values);
  if (command === "demo") {
    const { runDemo } = await import("./demo.js");
    return runDemo({ ...(values.goal ? { goal: values.goal } : {}), keep: values.keep ?? false });
  }
  process.stderr.write(`acp-orchestrator: unknown command "${command}"\n\n${HELP}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    if (code !== 0 || process.argv[2] === "demo") setImmediate(() => process.exit(code));
    else process.exit(code);
  },
  (err: unknown) => {
    // Mistakes of the user (an unknown flag, a state file that cannot be opened) get one plain sentence and exit 2;
    // anything else is a bug and gets its stack.
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_")) {
      process.stderr.write(`acp-orchestrator: ${(err as Error).message} (see acp-orchestrator --help)\n`);
      process.exit(2);
    }
    if (err instanceof AuthorityFailure) {
      process.stderr.write(`acp-orchestrator: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`acp-orchestrator: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
