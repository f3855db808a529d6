/**
 * OrchestratorServer: the JSON-RPC surface over one pair of streams (PROTOCOL.md sections 1-5).
 *
 * Owns the connection, the `initialize` handshake (version negotiation, capability advertisement, the notification
 * prefix opt-in), the registration of every method of the table in protocol/methods.ts, and the notification fan-out
 * from the core to the client and the ACP session adapter. It never decides anything about a product (the core does)
 * and never writes to stdout except through the framed writer.
 */
import { JsonTextMemo, type JsonText } from "./json-text.js";
import { listText, streamedListText } from "./list-text.js";
import type { Readable, Writable } from "node:stream";
import type { InitializeResult } from "../../protocol/acp.js";
import { extensionMethodNames, extensionNotificationNames, serverMethods } from "../../protocol/methods.js";
import type { ParamsOf } from "../../protocol/methods.js";
import { LIST_LIMIT_MAX, decodeListCursor, encodeListCursor } from "../../protocol/product.js";
import type { ProductContext, ProductOptions } from "../core/product/context.js";
import { GoalService } from "../core/goal/service.js";
import { Fleet } from "../core/product/fleet.js";
import { ControlRequestPickup } from "../core/product/control-requests.js";
import { LiveOutputRecorder } from "../core/product/live-output.js";
import { ProductService } from "../core/product/service.js";
import type { VersionedStatus } from "../core/product/status.js";
import { ProductStore } from "../core/product/store.js";
import type { DelegatingAuthority } from "../adapters/persistence/delegating-authority.js";
import { HostAuthority } from "../adapters/persistence/host-authority.js";
import { withFailureOperations } from "../adapters/persistence/failure-operation.js";
import { BUILTIN_WORKER_AGENT_ID } from "../adapters/agents/registry.js";
import type { McpSecrets } from "../adapters/agents/mcp-servers.js";
import { nodeSha256Hex } from "../adapters/system/digest.js";
import { HEURISTIC_LEADER_ID } from "../core/leader/heuristic-leader-id.js";
import type {
  AgentDirectory,
  Clock,
  IdGenerator,
  LeaderResolver,
  Logger,
  Notifier,
  OwnerLiveness,
  RunStateAuthority,
  WorkerPort,
  WorkspacePort,
  WorkspaceProbe,
} from "../core/ports.js";
import type { VerifyPort } from "../core/workspace/verify-port.js";
import { SessionAdapter } from "./acp-session.js";
import { mapDomainError } from "./error-mapping.js";
import { createFramedTransport } from "./framing.js";
import { requireDirectory } from "./workspace-check.js";
import { invalidParams } from "./wire-errors.js";
import { RpcConnection } from "./rpc-connection.js";

export interface ServerOptions {
  input: Readable;
  output: Writable;
  logger: Logger;
  authority: RunStateAuthority;
  /** Tells whether a lease's owner process still runs (guarantee 13); without it, leases are respected until expiry. */
  liveness?: OwnerLiveness;
  agents: AgentDirectory;
  workers: WorkerPort;
  leader: LeaderResolver;
  clock: Clock;
  ids: IdGenerator;
  /** The server's package version, advertised in `initialize`. */
  version: string;
  productOptions: ProductOptions;
  /** The default `projectId` of a workspace (DESIGN.md vocabulary: derived from the workspace path). */
  projectIdFor(cwd: string): string;
  /** Reads a workspace's git HEAD for drift detection (issue 4); without it no workspace counts as a git checkout. */
  workspace?: WorkspaceProbe;
  /** Worktrees and integration (guarantee 11); without it every product runs `shared`. */
  workspaces?: WorkspacePort;
  /** Runs verification commands in verify worktrees (guarantee 17); without it `verify` settings are not run. */
  verifier?: VerifyPort;
  /** Worktrees and integration of products with a workspace remote (issue 33); without it such plans are refused. */
  remoteWorkspaces?: WorkspacePort;
  /**
   * The configured default leader agent (config `leader`), offered as the current value of an ACP session's `leader`
   * config option (PROTOCOL.md section 4); without it the built-in `heuristic` leader is the default.
   */
  defaultLeaderAgentId?: string;
  /**
   * Host-owned run state (PROTOCOL.md section 7): when the first `initialize` declares
   * `clientCapabilities._meta["acp-orchestrator"].runStateAuthority: true`, `target` (normally the same object as
   * `authority`) is switched to a `HostAuthority` over this connection, whose requests time out after `timeoutMs`.
   * Without it the offer is logged and the server keeps its own store.
   */
  hostAuthority?: { target: DelegatingAuthority; timeoutMs?: number };
  /**
   * Many servers on one shared store (issue 14, fleet.ts): with `recover`, products whose owner is gone are resumed
   * here; requests for products another live server owns are forwarded to it when the store has a change feed.
   * `scanMs` is the period of the recovery scan (default: the lease renewal period).
   */
  fleet?: { recover: boolean; scanMs?: number; livenessCheckMs?: number };
  /** Where the secrets of the ACP sessions' MCP servers are held for their products' agents (issue 28). */
  mcpSecrets?: McpSecrets;
  /**
   * Opens the run-state store behind `authority` (issue 34, cold start): called by `serve()` after the event loop's
   * first read of the input, so an `initialize` already waiting in the input is answered first; every other request
   * waits until it settled, and the fleet and the control-request pickup start after it. When it rejects, `serve()`
   * shuts down and rejects with its error. Without it the store is open already.
   */
  openStore?: () => Promise<void>;
}

type Handler<M extends string> = M extends keyof HandlerParams
  ? (p: HandlerParams[M]) => Promise<unknown> | JsonText
  : never;
type HandlerParams = { [M in (typeof serverMethods)[number]["method"]]: ParamsOf<M> };

/** Fans a notification out to the client connection and to in-process listeners (the ACP session adapter). */
class FanOutNotifier implements Notifier {
  private readonly listeners: ((method: string, params: Record<string, unknown>) => void)[] = [];

  constructor(
    private readonly send: (method: string, params: Record<string, unknown>) => void,
    private readonly logger: Logger,
  ) {}

  subscribe(listener: (method: string, params: Record<string, unknown>) => void): void {
    this.listeners.push(listener);
  }

  notify(method: string, params: Record<string, unknown>): void {
    this.send(method, params);
    for (const l of this.listeners) {
      try {
        l(method, params);
      } catch (err) {
        this.logger.error({ err, method }, "notification listener failed");
      }
    }
  }
}

export class OrchestratorServer {
  readonly connection: RpcConnection;
  readonly products: ProductService;
  /** Leases, forwarding and recovery across servers sharing one store (fleet.ts). */
  readonly fleet: Fleet;
  /** Control requests written by other processes (the CLI, the dashboard) for products this server owns. */
  readonly controlRequests: ControlRequestPickup;
  /** The owner's live-output writer (live-output.ts), closed at shutdown after the products stopped. */
  private readonly liveOutput: LiveOutputRecorder;
  readonly goals: GoalService;
  readonly sessions: SessionAdapter;
  private readonly notifier: FanOutNotifier;
  /** The text of the last `product.status` answer per product (issue 16). */
  private readonly statusTexts = new JsonTextMemo();
  private closed: Promise<void>;
  private resolveClosed!: () => void;

  constructor(private readonly options: ServerOptions) {
    const { reader, writer, framing } = createFramedTransport(options.input, options.output, {
      logger: options.logger,
    });
    // A batch of pipelined requests shares one look at whether the store changed (issue 16; sound because the reader's
    // chunk count moves before any message of new input is handed over, and is NaN outside its delivery).
    options.authority.shareChangeMarks?.(() => reader.dispatchEpoch);
    this.connection = new RpcConnection({
      reader,
      writer,
      framing,
      methods: serverMethods,
      logger: options.logger,
      mapError: mapDomainError,
    });
    this.notifier = new FanOutNotifier((method, params) => {
      this.connection.notify(method, params).catch((err: unknown) => {
        options.logger.warn({ err, method }, "could not send a notification");
      });
    }, options.logger);
    // -32013 says whether a read or a write failed (PROTOCOL.md section 3).
    const authority = withFailureOperations(options.authority);
    this.liveOutput = new LiveOutputRecorder(authority, options.clock, options.logger);
    const ctx = this.productContext(authority);
    this.products = new ProductService(ctx);
    this.fleet = this.buildFleet(ctx);
    this.controlRequests = new ControlRequestPickup({
      service: this.products,
      authority: options.authority,
      clock: options.clock,
      logger: options.logger.child({ component: "control-requests" }),
      ownerId: options.productOptions.ownerId,
      ...(ctx.liveness ? { liveness: ctx.liveness } : {}),
    });
    this.products.setForwarder((productId, request, refusal) => {
      if (!this.fleet.canForward) return Promise.reject(refusal);
      return this.fleet.forward(productId, request, refusal);
    });
    this.goals = this.buildGoals(authority, ctx);
    this.sessions = this.buildSessions(authority);
    this.notifier.subscribe((method, params) => this.sessions.onProductNotification(method, params));
    // Idle products leave memory (guarantee 14) unless a goal run or a session follows them.
    this.products.addRetainer((productId) => this.goals.follows(productId));
    this.products.addRetainer((productId) => this.sessions.follows(productId));
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
    this.register();
  }

  /** The context every product orchestrator of this server shares (core/product/context.ts). */
  private productContext(authority: RunStateAuthority): ProductContext {
    const options = this.options;
    return {
      store: new ProductStore(authority, options.productOptions.checkpointHistory),
      leader: options.leader,
      workers: options.workers,
      agents: options.agents,
      notifier: this.notifier,
      clock: options.clock,
      ids: options.ids,
      logger: options.logger,
      defer: (fn) => setImmediate(fn),
      options: options.productOptions,
      ...(options.workspace ? { workspace: options.workspace } : {}),
      ...(options.workspaces ? { workspaces: options.workspaces } : {}),
      ...(options.verifier ? { verifier: options.verifier } : {}),
      ...(options.remoteWorkspaces ? { remoteWorkspaces: options.remoteWorkspaces } : {}),
      ...(options.liveness ? { liveness: options.liveness } : {}),
      digest: nodeSha256Hex,
      liveOutput: this.liveOutput,
      onPhaseChange: (productId) => this.goals.onProductPhaseChange(productId),
    };
  }

  /** Leases, forwarding and recovery across servers sharing the store (fleet.ts). Not started yet. */
  private buildFleet(ctx: ProductContext): Fleet {
    const options = this.options;
    return new Fleet({
      service: this.products,
      store: ctx.store,
      authority: options.authority,
      clock: options.clock,
      ids: options.ids,
      logger: options.logger.child({ component: "fleet" }),
      ownerId: options.productOptions.ownerId,
      ...(ctx.liveness ? { liveness: ctx.liveness } : {}),
      recover: options.fleet?.recover ?? false,
      recoverGoals: () => this.goals.recoverOrphans(),
      scanMs: options.fleet?.scanMs ?? options.productOptions.leaseRenewMs,
      ...(options.fleet?.livenessCheckMs !== undefined ? { livenessCheckMs: options.fleet.livenessCheckMs } : {}),
    });
  }

  /** The goal runs (`x/goal.*`) over this server's products. */
  private buildGoals(authority: RunStateAuthority, ctx: ProductContext): GoalService {
    const options = this.options;
    return new GoalService({
      authority,
      products: this.products,
      leader: options.leader,
      agents: options.agents,
      notifier: this.notifier,
      clock: options.clock,
      ids: options.ids,
      logger: options.logger,
      defer: (fn) => setImmediate(fn),
      ...(options.verifier ? { verifier: options.verifier } : {}),
      lease: {
        store: ctx.store,
        settings: {
          owner: options.productOptions.ownerId,
          ttlMs: options.productOptions.leaseTtlMs,
          renewMs: options.productOptions.leaseRenewMs,
        },
        ...(options.liveness ? { liveness: options.liveness } : {}),
      },
    });
  }

  /** The ACP session adapter (session/* over products and goal runs). */
  private buildSessions(authority: RunStateAuthority): SessionAdapter {
    const options = this.options;
    return new SessionAdapter({
      products: this.products,
      goals: this.goals,
      settings: {
        agents: () => options.agents.list(),
        nonLeaders: new Set([BUILTIN_WORKER_AGENT_ID]),
        defaultLeader: options.defaultLeaderAgentId ?? HEURISTIC_LEADER_ID,
        defaultParallelism: options.productOptions.maxParallelTasks,
      },
      ...(options.workspace ? { workspace: options.workspace } : {}),
      ...(options.mcpSecrets ? { mcpSecrets: options.mcpSecrets } : {}),
      connection: this.connection,
      authority,
      logger: options.logger,
      clock: options.clock,
      ids: options.ids,
      projectIdFor: options.projectIdFor,
    });
  }

  private on<M extends keyof HandlerParams>(method: M, handler: Handler<M>): void {
    this.connection.handle(method, (params) => (handler as (p: unknown) => Promise<unknown> | JsonText)(params));
  }

  /** The text of a `product.status` answer (see `statusTexts`). */
  private statusText(productId: string, { status, version }: VersionedStatus): JsonText {
    return this.statusTexts.text(productId, status, version);
  }

  /**
   * `statusText` once `answer` settles. A method of its own so that the synchronous path allocates no closure (issue
   * 16, request path).
   */
  private async statusTextLater(productId: string, answer: Promise<VersionedStatus>): Promise<JsonText> {
    return this.statusText(productId, await answer);
  }

  private initializeResult(): InitializeResult {
    return {
      protocolVersion: 1,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { image: true, audio: false, embeddedContext: true },
        mcpCapabilities: { http: false, sse: false },
        sessionCapabilities: { list: {}, close: {}, resume: {}, delete: {}, additionalDirectories: {} },
        _meta: {
          "acp-orchestrator": {
            version: this.options.version,
            methods: [...extensionMethodNames],
            notifications: [...extensionNotificationNames],
          },
        },
      },
      agentInfo: { name: "acp-orchestrator", version: this.options.version },
      authMethods: [],
    };
  }

  /**
   * Routes every later persistence call to the client (PROTOCOL.md section 7). Only at the first `initialize`: no
   * other request is served before it, so nothing was persisted in the embedded store; a later `initialize` does not
   * switch stores under running products.
   */
  private useHostAuthority(): void {
    const host = this.options.hostAuthority;
    if (host === undefined || this.connection.initialized) {
      this.options.logger.warn({}, "the client offers a run-state authority; this server keeps its own store");
      return;
    }
    host.target.use(
      new HostAuthority({
        connection: this.connection,
        logger: this.options.logger.child({ component: "host-authority" }),
        ...(host.timeoutMs !== undefined ? { timeoutMs: host.timeoutMs } : {}),
      }),
    );
    this.options.logger.info({ timeoutMs: host.timeoutMs }, "run state is persisted by the host (runState/*)");
  }

  /**
   * The agents a plan may name, for an unknown-agent refusal (a new user's trial: a typo in `--agents` must show what
   * there is): the team's ids (at most 20, then "and N more"), and the built-in worker, which is always startable.
   */
  private knownAgents(): string {
    const ids = this.options.agents.list().map((a) => a.agentId);
    if (!ids.includes(BUILTIN_WORKER_AGENT_ID)) ids.push(BUILTIN_WORKER_AGENT_ID);
    const shown = ids.slice(0, 20).join(", ");
    return `its agents: ${shown}${ids.length > 20 ? ` and ${ids.length - 20} more` : ""}`;
  }

  private register(): void {
    const p = this.products;
    this.on("initialize", async (params) => {
      const meta = params.clientCapabilities?._meta?.["acp-orchestrator"];
      // Present (even `{}`): the client uses the extension (PROTOCOL.md section 2); absent: plain ACP until it
      // calls an extension method.
      if (meta) this.connection.declareExtension(meta.extensionPrefix);
      if (meta?.runStateAuthority) this.useHostAuthority();
      return this.initializeResult();
    });
    this.sessions.register((method, handler) => this.connection.handle(method, handler));

    const projectOf = (params: { projectId?: string | undefined; cwd: string }): string =>
      params.projectId ?? this.options.projectIdFor(params.cwd);
    this.on("product.plan", async (params) => {
      await requireDirectory(params.cwd);
      // Issue 28: a team member the registry does not know is a typo, not an empty team.
      const unknown = (params.allowedAgents ?? []).findIndex((id) => this.options.agents.get(id) === undefined);
      if (unknown >= 0) {
        throw invalidParams([
          {
            path: ["allowedAgents", unknown],
            message: `names "${params.allowedAgents?.[unknown]}", which is not an agent of the registry (${this.knownAgents()})`,
          },
        ]);
      }
      if (params.sessionId !== undefined) await this.sessions.assertSessionProject(params.sessionId, projectOf(params));
      return p.plan({
        goal: params.goal,
        cwd: params.cwd,
        projectId: projectOf(params),
        ...(params.sessionId !== undefined ? { sessionId: params.sessionId } : {}),
        ...(params.name !== undefined ? { name: params.name } : {}),
        ...(params.maxParallelTasks !== undefined ? { maxParallelTasks: params.maxParallelTasks } : {}),
        ...(params.leaderAgentId !== undefined ? { leaderAgentId: params.leaderAgentId } : {}),
        ...(params.allowedAgents !== undefined ? { allowedAgents: params.allowedAgents } : {}),
        ...(params.budget !== undefined ? { budget: params.budget } : {}),
        ...(params.isolation !== undefined ? { isolation: params.isolation } : {}),
        ...(params.integration !== undefined ? { integration: params.integration } : {}),
        ...(params.verify !== undefined ? { verify: params.verify } : {}),
        ...(params.workspace !== undefined ? { workspace: params.workspace } : {}),
      });
    });
    this.on("product.message", (params) => p.message(params.productId, params.content, params.askId));
    this.on("product.confirm", (params) =>
      p.confirm(params.productId, {
        ...(params.instances !== undefined ? { instances: params.instances } : {}),
        ...(params.tasks !== undefined ? { tasks: params.tasks } : {}),
        ...(params.budget !== undefined ? { budget: params.budget } : {}),
      }),
    );
    // Hosts poll this: an answer equal to the last one is not serialised again (issue 16, json-text.ts).
    // An unchanged product is answered in the turn its request arrived (no await on the way: issue 16).
    this.on("product.status", (params) => {
      const answer = p.statusVersioned(params.productId);
      return answer instanceof Promise
        ? this.statusTextLater(params.productId, answer)
        : this.statusText(params.productId, answer);
    });
    this.on("product.list", (params) => listProducts(p, params));
    this.on("product.pause", (params) => p.pause(params.productId));
    this.on("product.resume", (params) => p.resume(params.productId, params.additionalBudget));
    this.on("product.cancel", (params) => p.cancel(params.productId));
    this.on("product.checkpoint", (params) => p.checkpoint(params.productId));
    this.on("product.checkpoints", (params) => p.checkpoints(params.productId));
    this.on("product.rollback", (params) => p.rollback(params.productId, params.checkpointId));
    this.on("product.replayTask", (params) => p.replayTask(params.productId, params.taskId));
    this.on("product.mutate", (params) => p.mutate(params.productId, params.mutations));
    this.on("product.delete", async (params) => {
      const deleted = await p.delete(params.productId);
      this.statusTexts.forget(params.productId);
      return deleted;
    });

    this.registerGoalMethods(projectOf);
  }

  /** The `x/goal.*` methods (PROTOCOL.md section 6). */
  private registerGoalMethods(projectOf: (params: { projectId?: string | undefined; cwd: string }) => string): void {
    const g = this.goals;
    this.on("x/goal.start", async (params) => {
      await requireDirectory(params.cwd);
      return g.start({
        goal: params.goal,
        cwd: params.cwd,
        projectId: projectOf(params),
        ...(params.sessionId !== undefined ? { sessionId: params.sessionId } : {}),
        ...(params.budget !== undefined ? { budget: params.budget } : {}),
        ...(params.noProgressLimit !== undefined ? { noProgressLimit: params.noProgressLimit } : {}),
        // Ids default to c1, c2, … by position (the schema made sure the result is unique).
        ...(params.criteria !== undefined
          ? {
              criteria: params.criteria.map((c, i) => ({
                id: c.id ?? `c${i + 1}`,
                text: c.text,
                ...(c.check !== undefined ? { check: c.check } : {}),
              })),
            }
          : {}),
      });
    });
    this.on("x/goal.status", (params) => g.status(params.goalRunId));
    this.on("x/goal.list", (params) => g.list(params.projectId));
    this.on("x/goal.pause", (params) => g.pause(params.goalRunId));
    this.on("x/goal.resume", (params) => g.resume(params.goalRunId, params.additionalBudget));
    this.on("x/goal.stop", (params) => g.stop(params.goalRunId, params.reason));
    this.on("x/goal.edit", (params) => g.edit(params.goalRunId, params.goal));
    this.on("x/goal.message", (params) => g.message(params.goalRunId, params.content));
  }

  /**
   * Serves until the input ends, then shuts down gracefully: scheduling stops, in-flight tasks are persisted as
   * interrupted, workers are stopped, pending writes are flushed (PROTOCOL.md section 1). Resolves when done; with
   * `openStore`, rejects with its error after shutting down when the store cannot be opened.
   */
  async serve(): Promise<void> {
    this.connection.onClose(() => this.resolveClosed());
    const openStore = this.options.openStore;
    // In the check phase after the next poll phase, in which the input is first read (whatever phase this is).
    const opened =
      openStore && new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve))).then(openStore);
    if (opened) this.connection.holdUntil(opened);
    this.connection.listen();
    if (opened) {
      try {
        await opened;
      } catch (err) {
        await this.shutdown();
        throw err;
      }
    }
    this.fleet.start();
    this.controlRequests.start();
    await this.closed;
    await this.shutdown();
  }

  private shuttingDown: Promise<void> | null = null;

  /** Stops everything this server runs. Idempotent. Does NOT close the authority (the owner of it does). */
  shutdown(): Promise<void> {
    this.shuttingDown ??= (async () => {
      // Their work already running (a recovery pass, a control request) ends before the owner closes the authority.
      const pickupsDone = Promise.all([this.fleet.stop(), this.controlRequests.stop()]);
      this.sessions.shutdown();
      const goalsDown = this.goals.shutdown();
      await this.products.shutdown();
      await goalsDown;
      await this.options.workers.shutdown();
      await pickupsDone;
      // A pickup or request already past the service's shutdown check may have started a run meanwhile: stop it.
      await this.products.shutdown();
      await this.liveOutput.close();
      // Requests that arrived before stdin closed are still answered (e.g. `initialize` piped then EOF).
      this.connection.abortInFlight();
      await this.connection.idle();
      await this.connection.flush().catch(() => undefined);
      this.connection.dispose();
    })();
    return this.shuttingDown;
  }
}

/**
 * `product.list` (PROTOCOL.md section 5): every product, or one page when `limit` or `cursor` is given (a `cursor`
 * alone pages by `LIST_LIMIT_MAX`); `nextCursor` names the page after it when more remain. zod validated the cursor.
 */
async function listProducts(p: ProductService, params: ParamsOf<"product.list">) {
  const after = params.cursor === undefined ? undefined : decodeListCursor(params.cursor);
  const paged = params.limit !== undefined || after !== undefined;
  if (!paged) {
    // In the store's order a batch at a time where it can (PostgreSQL), else every entry at once (issue 32).
    const streamed = await streamedListText((sink) => p.streamEntries(params.projectId, params.phase, sink));
    if (streamed !== undefined) return streamed;
    const entries = await p.listEntries(params.projectId, params.phase);
    if (entries !== undefined) return listText(entries.products, entries.dropped);
  }
  const page = paged ? { limit: params.limit ?? LIST_LIMIT_MAX, ...(after ? { after } : {}) } : undefined;
  const { next, ...rest } = await p.list(params.projectId, params.phase, page);
  return next ? { ...rest, nextCursor: encodeListCursor(next) } : rest;
}
