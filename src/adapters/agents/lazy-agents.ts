/**
 * The ACP agent adapters loaded on first use (issue 16, cold start): `AcpWorkerPool` (acp-worker.ts) and the ACP
 * leaders of `createLeaderResolver` (leader-resolver.ts) import the official ACP SDK, whose module graph and zod schemas
 * cost more start-up time than the rest of the server. Most sessions need neither before their first prompt is
 * planned and confirmed, so the server starts with these stand-ins and loads the real adapters (once) when a task
 * first runs on an agent or an ACP leader first takes a turn. The built-in heuristic leader is loaded on its first
 * call too (lazyHeuristicLeader; issue 34, cold start).
 *
 * Owns only the deferral: every call is handed unchanged to the real adapter, whose contract applies as documented
 * there. It must never change what a worker or a leader does, and never load the SDK before it is needed.
 */
import { HEURISTIC_LEADER_ID } from "../../core/leader/heuristic-leader-id.js";
import type { AcpWorkerPool, AcpWorkerPoolOptions, OutputGate, PermissionForwarder } from "./acp-worker.js";
import type { LeaderResolverOptions, LeaderSelection } from "./leader-resolver.js";
import type {
  LeaderPort,
  LeaderResolver,
  WorkerEvents,
  WorkerPort,
  WorkerRequest,
  WorkerResult,
} from "../../core/ports.js";

/**
 * A `WorkerPort` that builds its `AcpWorkerPool` on the first `runTask`. Permission forwarder and output gate set
 * before that are handed to the pool when it is built. `shutdown` before any task ran has nothing to stop, and a task
 * asked for after it gets what the real pool gives after its shutdown (`cancelled`).
 */
export class LazyAcpWorkerPool implements WorkerPort {
  private pool: Promise<AcpWorkerPool> | undefined;
  private forwarder: PermissionForwarder | undefined;
  private gate: OutputGate | undefined;
  private shutDown = false;

  constructor(private readonly options: AcpWorkerPoolOptions) {}

  /** As `AcpWorkerPool.setPermissionForwarder`; kept until the pool exists. */
  setPermissionForwarder(forwarder: PermissionForwarder | undefined): void {
    this.forwarder = forwarder;
    void this.pool?.then((p) => p.setPermissionForwarder(forwarder));
  }

  /** As `AcpWorkerPool.setOutputGate`; kept until the pool exists. */
  setOutputGate(gate: OutputGate | undefined): void {
    this.gate = gate;
    void this.pool?.then((p) => p.setOutputGate(gate));
  }

  /** Loads acp-worker.ts (and the ACP SDK) on the first call, then runs the task as `AcpWorkerPool.runTask`. */
  async runTask(request: WorkerRequest, events: WorkerEvents): Promise<WorkerResult> {
    this.pool ??= import("./acp-worker.js").then(async ({ AcpWorkerPool }) => {
      const pool = new AcpWorkerPool(this.options);
      pool.setPermissionForwarder(this.forwarder);
      pool.setOutputGate(this.gate);
      if (this.shutDown) await pool.shutdown();
      return pool;
    });
    return (await this.pool).runTask(request, events);
  }

  /** As `AcpWorkerPool.shutdown`; resolves at once when no task ever ran (no pool, no process). */
  async shutdown(): Promise<void> {
    this.shutDown = true;
    if (this.pool !== undefined) await (await this.pool).shutdown();
  }
}

/**
 * The built-in heuristic leader (core/leader/heuristic-leader.ts), its modules loaded on its first call (issue 34, cold
 * start): they build about a dozen Unicode-aware regular expressions when they load (ICU property sets, case folding),
 * which a start of `serve` paid before answering `initialize` although no product is planned yet. Every call is the
 * real leader's, with its answers and rejections.
 */
export function lazyHeuristicLeader(): LeaderPort {
  let real: Promise<LeaderPort> | undefined;
  const leader = (): Promise<LeaderPort> =>
    (real ??= import("../../core/leader/heuristic-leader.js").then(({ HeuristicLeader }) => new HeuristicLeader()));
  return forwardedLeader(leader);
}

/** A leader whose every call awaits `leader()` and takes its answer (errors included). */
function forwardedLeader(leader: () => Promise<LeaderPort>): LeaderPort {
  return {
    plan: async (request) => (await leader()).plan(request),
    message: async (request) => (await leader()).message(request),
    consultOnFailure: async (request) => (await leader()).consultOnFailure(request),
    deriveChecklist: async (request) => (await leader()).deriveChecklist(request),
    planPhase: async (request) => (await leader()).planPhase(request),
    assess: async (request) => (await leader()).assess(request),
  };
}

/**
 * `createLeaderResolver` with leader-resolver.ts (and acp-leader.ts) loaded on the first turn of an ACP leader. A product without a leader
 * agent (none given, none configured) gets `options.fallback` at once, as from the real resolver; any other choice
 * gets a stand-in whose calls load the real resolver and take the real leader's answer (errors included: an unknown
 * agent, a closed resolver).
 */
export function lazyLeaderResolver(options: LeaderResolverOptions): LeaderSelection {
  let real: Promise<LeaderSelection> | undefined;
  let closed = false;
  const load = (): Promise<LeaderSelection> =>
    (real ??= import("./leader-resolver.js").then(async ({ createLeaderResolver }) => {
      const selection = createLeaderResolver(options);
      if (closed) await selection.close();
      return selection;
    }));
  const resolve: LeaderResolver = (leaderAgentId) => {
    const chosen = leaderAgentId ?? options.defaultLeaderAgentId;
    if (chosen === undefined || chosen === HEURISTIC_LEADER_ID) return options.fallback;
    return forwardedLeader(async () => (await load()).resolve(leaderAgentId));
  };
  return {
    resolve,
    async close() {
      closed = true;
      if (real !== undefined) await (await real).close();
    },
  };
}
