/**
 * ProductService: the facade behind every `product.*` method (PROTOCOL.md section 5).
 *
 * Owns the set of products loaded in this process and routes each operation to its ProductOrchestrator, loading it
 * from the run-state authority on first use (reading never writes: guarantee 3). It validates nothing that the wire
 * schema already did, and it never speaks JSON-RPC: errors are DomainErrors mapped by the server.
 */
import type { Budget, Instance, Mutation, Phase, Plan, Task } from "../../../protocol/common.js";
import type { VerifyConfig } from "../../../protocol/verify.js";
import type { DraftPlan } from "../ports.js";
import type { WorkspaceRemote } from "../../../protocol/workspace-remote.js";
import { invalidInput, isDomainError, shuttingDown, type DomainError } from "../errors.js";
import type { ProductContext } from "./context.js";
import { describeLease } from "./lease.js";
import { ProductOrchestrator } from "./orchestrator.js";
import type { VersionedStatus } from "./status.js";
import type { ProductEvent } from "./records.js";
import type { HeaderQuery } from "./header-list.js";
import { listProductEntries, listProducts, streamProductEntries, type ListSources } from "./product-list.js";
import { storedMcpServers } from "./mcp-servers.js";
import type { AttachmentRef } from "./agent-inputs.js";
import type { McpServer } from "../../../protocol/acp.js";

export interface PlanParams {
  goal: string;
  cwd: string;
  projectId: string;
  sessionId?: string;
  name?: string;
  /** At most this many tasks of the product run at once (default: the server's `maxParallelTasks`). */
  maxParallelTasks?: number;
  leaderAgentId?: string;
  allowedAgents?: string[];
  /** The session's MCP servers; stored without their secrets (issue 28, mcp-servers.ts). */
  mcpServers?: McpServer[];
  /** The session's additional directories (absolute, checked by the session layer; issue 31, agent-inputs.ts). */
  additionalDirectories?: string[];
  /** The goal message's images and binary resources, by reference (issue 31). */
  attachments?: AttachmentRef[];
  budget?: Budget;
  isolation?: "worktree" | "shared";
  integration?: { mode?: "branch" | "merge"; targetBranch?: string };
  /** Verification commands (guarantee 17); default: the server's `verify` option (config file). */
  verify?: VerifyConfig;
  /** A remote-backed product's git remote (validated: no credentials) and base ref (issue 33). */
  workspace?: WorkspaceRemote;
}

/** `forward: false` answers locally only (the owner applying a forwarded request must never forward it again). */
export interface ForwardOptions {
  forward?: boolean;
}

/** What a server that does not own a product asks its owner to do (fleet.ts). */
export type ControlRequest = { op: "pause" } | { op: "cancel" } | { op: "mutate"; mutations: Mutation[] };

/** Forwards a request to the product's owner on another server; resolves with its result or throws its refusal. */
export type Forwarder = (productId: string, request: ControlRequest, refusal: DomainError) => Promise<unknown>;

/** Idle products kept in memory when no bound is given (ProductService constructor). */
export const DEFAULT_IDLE_PRODUCTS = 32;

/** Tells whether something outside the product layer follows a product and needs its instance kept (e.g. a session). */
export type Retainer = (productId: string) => boolean;

export class ProductService {
  /** Products in memory, least recently used first (every `get` moves its product to the end). */
  private readonly live = new Map<string, ProductOrchestrator>();
  /** The last key of `live` when known (then a `get` of it needs no move), else `undefined`. */
  private mostRecent: string | undefined;
  private readonly loading = new Map<string, Promise<ProductOrchestrator>>();
  private readonly retainers: Retainer[] = [];
  /** Operations of this service in flight, per product: such a product is never dropped from memory. */
  private readonly inFlight = new Map<string, number>();
  /**
   * Set once `shutdown` began: `forWrite` (every request that may drive or change a product) and `plan` then refuse
   * with `busy` (`shuttingDown`). A request already past that check when shutdown began may still start a run; the
   * server calls `shutdown` again once its background work has settled, which stops what it started.
   */
  private closing = false;
  /** Products dropped from memory because they were idle (guarantee 14), since this service started. */
  evicted = 0;
  /** Orchestrator instances made by this service: each gets its own number (status answer versions, status.ts). */
  private instances = 0;

  private nextInstance(): number {
    this.instances += 1;
    return this.instances;
  }

  /**
   * `idleProducts`: how many idle products stay in memory (the most recently used; guarantee 14: memory holds the
   * products being driven or recently read, not every product ever loaded). Products in use are never dropped.
   */
  constructor(
    private readonly ctx: ProductContext,
    private readonly idleProducts: number = DEFAULT_IDLE_PRODUCTS,
  ) {}

  /**
   * Adds a check that keeps a product in memory while it returns true (the session adapter and goal runs hold
   * references to the products they follow: dropping one would leave them watching a copy nobody updates).
   */
  addRetainer(retainer: Retainer): void {
    this.retainers.push(retainer);
  }

  /** The orchestrator of a product already loaded in this process, else `undefined`. Never loads, never throws. */
  peek(productId: string): ProductOrchestrator | undefined {
    return this.live.get(productId);
  }

  /** Returns the orchestrator of a product, loading it once. Throws not_found. */
  async get(productId: string): Promise<ProductOrchestrator> {
    const live = this.live.get(productId);
    // An instance that found its product deleted by another process is dropped; loading it again says not_found.
    if (live?.deletedElsewhere) this.forgetLive(productId);
    else if (live) {
      this.touch(productId, live);
      return live;
    }
    let pending = this.loading.get(productId);
    if (!pending) {
      pending = this.ctx.store.load(productId).then((loaded) => {
        const orchestrator = new ProductOrchestrator(loaded.model, this.ctx, this.nextInstance());
        orchestrator.dropped = loaded.dropped;
        orchestrator.lost = loaded.lost;
        orchestrator.invalid = loaded.invalid;
        orchestrator.loadedFromStore = true;
        this.remember(productId, orchestrator);
        this.evictIdle(productId);
        return orchestrator;
      });
      this.loading.set(productId, pending);
      pending.then(
        () => this.loading.delete(productId),
        () => this.loading.delete(productId),
      );
    }
    return pending;
  }

  /** Marks a product in `live` used now: most recently used last, so eviction takes the ones used longest ago. */
  private touch(productId: string, live: ProductOrchestrator): void {
    if (this.mostRecent !== productId) this.remember(productId, live);
  }

  /** Puts `orchestrator` last in `live` (the most recently used), under `productId`. */
  private remember(productId: string, orchestrator: ProductOrchestrator): void {
    this.live.delete(productId);
    this.live.set(productId, orchestrator);
    this.mostRecent = productId;
  }

  /** Drops `productId` from `live`. */
  private forgetLive(productId: string): void {
    this.live.delete(productId);
    if (this.mostRecent === productId) this.mostRecent = undefined;
  }

  /**
   * Runs one operation of this service on a product, keeping the product in memory from before its instance is looked
   * up until the operation ends (an instance dropped between the look-up and its first write would leave two copies).
   */
  private async inUse<T>(productId: string, fn: () => Promise<T>): Promise<T> {
    this.inFlight.set(productId, (this.inFlight.get(productId) ?? 0) + 1);
    try {
      return await fn();
    } finally {
      const n = (this.inFlight.get(productId) ?? 1) - 1;
      if (n > 0) this.inFlight.set(productId, n);
      else this.inFlight.delete(productId);
    }
  }

  /**
   * Drops the idle products used longest ago from memory until at most `idleProducts` idle ones remain (guarantee 14).
   * A product is dropped only when its instance is idle (`isIdle`: nothing in flight, nothing driven, no lease) and
   * no retainer follows it; `keep` (the product just loaded) is never dropped. A dropped product is loaded again from
   * the authority on its next use, like after a restart; its store caches are forgotten with it. Never writes.
   */
  private evictIdle(keep: string): void {
    if (this.live.size <= this.idleProducts) return;
    const idle = [...this.live.values()].filter(
      (o) =>
        o.productId !== keep &&
        !this.inFlight.has(o.productId) &&
        o.isIdle &&
        !this.retainers.some((retains) => retains(o.productId)),
    );
    for (const o of idle.slice(0, Math.max(0, idle.length + 1 - this.idleProducts))) {
      this.forgetLive(o.productId);
      this.ctx.store.forget(o.productId);
      this.evicted += 1;
      this.ctx.logger.debug({ productId: o.productId, inMemory: this.live.size }, "idle product dropped from memory");
    }
  }

  /**
   * Returns the orchestrator a write request should go to. An instance that was fenced (a write of it was refused or
   * its lease taken: it never writes again, guarantee 6) is first left to stop its workers, then replaced by one
   * freshly loaded from the authority, which decides anew whether this process may write. Throws not_found.
   */
  async forWrite(productId: string): Promise<ProductOrchestrator> {
    if (this.closing) throw shuttingDown(productId);
    const current = await this.get(productId);
    if (this.closing) throw shuttingDown(productId);
    if (!current.isFenced) return current;
    await current.whenStopped();
    if (this.live.get(productId) === current) this.forgetLive(productId);
    return this.get(productId);
  }

  /** `product.plan`: records the product and its goal, then starts the leader after the answer is sent. */
  async plan(params: PlanParams): Promise<{ productId: string; phase: "planning" }> {
    const productId = this.ctx.ids("prd");
    if (this.closing) throw shuttingDown(productId, "was not created");
    const at = new Date(this.ctx.clock.now()).toISOString();
    const name = params.name ?? defaultName(params.goal);
    const created: ProductEvent = {
      v: 1,
      at,
      type: "created",
      productId,
      projectId: params.projectId,
      name,
      // Without a name of its own the product is named by its leader's first plan (issue 28: one title).
      ...(params.name === undefined ? { provisionalName: true as const } : {}),
      goal: params.goal,
      cwd: params.cwd,
      ...(params.maxParallelTasks !== undefined ? { maxParallelTasks: params.maxParallelTasks } : {}),
      ...(params.sessionId !== undefined ? { sessionId: params.sessionId } : {}),
      ...(params.leaderAgentId !== undefined ? { leaderAgentId: params.leaderAgentId } : {}),
      ...(params.allowedAgents !== undefined ? { allowedAgents: params.allowedAgents } : {}),
      ...(params.mcpServers?.length ? { mcpServers: storedMcpServers(params.mcpServers) } : {}),
      ...(params.additionalDirectories?.length ? { additionalDirectories: params.additionalDirectories } : {}),
      ...(params.budget !== undefined ? { budget: params.budget } : {}),
      ...(params.isolation !== undefined ? { isolation: params.isolation } : {}),
      ...(params.integration !== undefined ? { integration: params.integration } : {}),
      ...((params.verify ?? this.ctx.options.verify) !== undefined
        ? { verify: params.verify ?? this.ctx.options.verify }
        : {}),
      ...remoteWorkspace(params, this.ctx),
    };
    const attachments = params.attachments?.length ? { attachments: params.attachments } : {};
    const dialogue: ProductEvent = { v: 1, at, type: "dialogue", role: "user", text: params.goal, ...attachments };
    const model = await this.ctx.store.create(params.projectId, productId, [created, dialogue]);
    const orchestrator = new ProductOrchestrator(model, this.ctx, this.nextInstance());
    this.remember(productId, orchestrator);
    this.evictIdle(productId);
    this.ctx.defer(() => orchestrator.startPlanning());
    return { productId, phase: "planning" };
  }

  /**
   * Starts a product whose plan is already made and confirms it at once (a goal run's phase, PROTOCOL.md section 6):
   * the product is recorded with the plan as proposed, then confirmed through the normal path (written before any
   * task starts, guarantee 1). Throws invalid_plan when the plan is not a valid DAG. `productId` lets the caller
   * record the id before the product exists (a goal run's `phase_started` is written before the phase starts).
   */
  async launch(
    params: PlanParams,
    draft: DraftPlan,
    message: string,
    productId: string = this.ctx.ids("prd"),
  ): Promise<ProductOrchestrator> {
    const at = new Date(this.ctx.clock.now()).toISOString();
    const budget = params.budget ?? draft.budget;
    // One title (issue 28): the plan carries the product's name.
    const name = params.name ?? draft.name;
    const plan: Plan = { ...draft, name, productId, version: 1, ...(budget ? { budget } : {}) };
    const created: ProductEvent = {
      v: 1,
      at,
      type: "created",
      productId,
      projectId: params.projectId,
      name,
      goal: params.goal,
      cwd: params.cwd,
      ...(params.sessionId !== undefined ? { sessionId: params.sessionId } : {}),
      ...(budget !== undefined ? { budget } : {}),
      // Green-only integration (guarantee 17) for a goal's phases too: the config file's `verify` applies.
      ...((params.verify ?? this.ctx.options.verify) !== undefined
        ? { verify: params.verify ?? this.ctx.options.verify }
        : {}),
    };
    const events: ProductEvent[] = [
      created,
      { v: 1, at, type: "dialogue", role: "user", text: params.goal },
      { v: 1, at, type: "dialogue", role: "leader", text: message },
      { v: 1, at, type: "planProposed", plan },
    ];
    const model = await this.ctx.store.create(params.projectId, productId, events);
    const orchestrator = new ProductOrchestrator(model, this.ctx, this.nextInstance());
    this.remember(productId, orchestrator);
    this.evictIdle(productId);
    await orchestrator.confirm({});
    return orchestrator;
  }

  /** `product.message`; `attachments` (ACP sessions only) are recorded with the user's message by reference. */
  async message(productId: string, content: string, askId?: string, attachments?: AttachmentRef[]) {
    return this.inUse(productId, async () => (await this.forWrite(productId)).message(content, askId, attachments));
  }

  async confirm(
    productId: string,
    edit: { instances?: Instance[]; tasks?: Task[]; budget?: Budget },
  ): Promise<{ productId: string; ok: true; phase: "executing" }> {
    await this.inUse(productId, async () => (await this.forWrite(productId)).confirm(edit));
    return { productId, ok: true, phase: "executing" };
  }

  /** `product.status`: brought up to date with the authority and the workspace when not driven here; never writes. */
  async status(productId: string): Promise<Record<string, unknown>> {
    return (await this.statusVersioned(productId)).status;
  }

  /**
   * `status` with the answer's version (status.ts `inspectVersioned`): equal defined versions of one product are
   * equal answers. The kept answer of an unchanged product is returned as is, synchronously (issue 16, request path:
   * no await between the request and its answer); anything else is a promise. The store's change mark is read once
   * for both. Never writes.
   */
  statusVersioned(productId: string): VersionedStatus | Promise<VersionedStatus> {
    const mark = this.ctx.store.changeMark();
    return (
      this.keptStatus(productId, mark) ??
      this.inUse(productId, async () => (await this.get(productId)).inspectVersioned(mark))
    );
  }

  /**
   * The answer `statusVersioned` would give, when it can be given at once: the product is in memory and its kept
   * answer's version is current at `mark` (the store's change mark, read now; status.ts `keptAnswer`). Else
   * `undefined`. Synchronous; never reads or writes the store beyond the change mark.
   */
  keptStatus(productId: string, mark = this.ctx.store.changeMark()): VersionedStatus | undefined {
    const live = this.live.get(productId);
    const kept = live?.keptAnswer(mark);
    if (live !== undefined && kept !== undefined) this.touch(productId, live);
    return kept;
  }

  /**
   * `product.list`: persisted products (headers), live ones refreshed from memory, oldest first. With `page`, at most
   * `page.limit` of them after `page.after`, and `next` when more remain (product-list.ts). Never writes.
   */
  list(projectId?: string, phase?: Phase, page?: HeaderQuery["page"]) {
    return listProducts(this.listSources(), projectId, phase, page);
  }

  /**
   * `product.list` without a page, entries as objects or as JSON text cut from the stored headers, or `undefined`
   * when the store cannot read header texts (product-list.ts `listProductEntries`, issue 32). Never writes.
   */
  listEntries(projectId?: string, phase?: Phase) {
    return listProductEntries(this.listSources(), projectId, phase);
  }

  /** The same entries a batch at a time, or `undefined` (product-list.ts `streamProductEntries`). Never writes. */
  streamEntries(
    projectId: string | undefined,
    phase: Phase | undefined,
    sink: Parameters<typeof streamProductEntries>[3],
  ) {
    return streamProductEntries(this.listSources(), projectId, phase, sink);
  }

  /** What product-list.ts reads: the store, products in memory, leases. */
  private listSources(): ListSources {
    return {
      store: this.ctx.store,
      loaded: (productId) => this.live.get(productId),
      ownerOf: (projectId, productId) => this.ownerOf(projectId, productId),
    };
  }

  /** The `Owner` of a product's lease as this process sees it now (PROTOCOL.md section 5), or `undefined`. Read-only. */
  private async ownerOf(
    projectId: string,
    productId: string,
  ): Promise<{ ownerId: string; expiresAt: string; live: boolean } | undefined> {
    const loaded = this.live.get(productId);
    if (loaded) return loaded.owner();
    const { lease } = await this.ctx.store.readLease(projectId, productId);
    if (!lease) return undefined;
    const nowMs = this.ctx.clock.now();
    const o = this.ctx.options;
    const holder = describeLease(lease, {
      nowMs,
      seenAtMs: nowMs,
      owner: o.ownerId,
      ttlMs: o.leaseTtlMs,
      ...(this.ctx.liveness ? { liveness: this.ctx.liveness } : {}),
    });
    return { ownerId: holder.owner, expiresAt: holder.expiresAt, live: holder.live };
  }

  /**
   * `product.pause`. When another live server owns the product and a forwarder is set (a shared store with a change
   * feed), the request is forwarded to the owner instead of refused (fleet.ts); `forward: false` never forwards.
   */
  async pause(productId: string, opts: ForwardOptions = {}): Promise<{ productId: string; phase: "paused" }> {
    return this.orForward(productId, { op: "pause" }, opts, async () => {
      await this.inUse(productId, async () => (await this.forWrite(productId)).pause());
      return { productId, phase: "paused" as const };
    });
  }

  /**
   * Sets who forwards a request refused because another live server owns the product (fleet.ts). Without one, the
   * refusal (`conflict` with the owner) reaches the client as before.
   */
  setForwarder(forwarder: Forwarder): void {
    this.forwarder = forwarder;
  }

  private forwarder: Forwarder | undefined;

  private async orForward<T>(
    productId: string,
    request: ControlRequest,
    opts: ForwardOptions,
    local: () => Promise<T>,
  ): Promise<T> {
    try {
      return await local();
    } catch (err) {
      const forwarder = this.forwarder;
      if (opts.forward === false || !forwarder || !isDomainError(err, "conflict") || err.details.owner === undefined) {
        throw err;
      }
      return (await forwarder(productId, request, err)) as T;
    }
  }

  /**
   * `product.resume`. Throws `conflict` (with the owner) while another process holds a live lease (guarantee 6).
   * With `automatic: true` (a resume nobody asked for explicitly, e.g. a goal run continuing) it refuses with
   * `invalid_phase` when the run's inputs drifted since its last checkpoint; an explicit resume acknowledges drift.
   */
  async resume(
    productId: string,
    additionalBudget?: Budget,
    opts: { automatic?: boolean } = {},
  ): Promise<{ productId: string; phase: "executing" }> {
    await this.inUse(productId, async () => (await this.forWrite(productId)).resume(additionalBudget, opts));
    return { productId, phase: "executing" };
  }

  /** `product.cancel`; forwarded to a live owner elsewhere like `pause`. */
  async cancel(productId: string, opts: ForwardOptions = {}): Promise<{ productId: string; phase: "cancelled" }> {
    return this.orForward(productId, { op: "cancel" }, opts, async () => {
      await this.inUse(productId, async () => (await this.forWrite(productId)).cancel());
      return { productId, phase: "cancelled" as const };
    });
  }

  async checkpoint(productId: string) {
    return this.inUse(productId, async () => (await this.forWrite(productId)).checkpoint());
  }

  /** `product.checkpoints`: kept checkpoints, oldest first. */
  async checkpoints(productId: string) {
    const o = await this.get(productId);
    return {
      checkpoints: o.model.state.checkpoints.map((c) => ({
        checkpointId: c.checkpointId,
        at: c.at,
        completed: c.completed,
        total: c.total,
      })),
    };
  }

  async rollback(productId: string, checkpointId?: string) {
    const result = await this.inUse(productId, async () => (await this.forWrite(productId)).rollback(checkpointId));
    return { productId, ...result };
  }

  async replayTask(productId: string, taskId: string) {
    const reset = await this.inUse(productId, async () => (await this.forWrite(productId)).replayTask(taskId));
    return { productId, reset };
  }

  /** `product.mutate`; forwarded to a live owner elsewhere like `pause`. */
  async mutate(
    productId: string,
    mutations: Mutation[],
    opts: ForwardOptions = {},
  ): Promise<{ productId: string; applied: number; version: number }> {
    return this.orForward(productId, { op: "mutate", mutations }, opts, async () => {
      const r = await this.inUse(productId, async () => (await this.forWrite(productId)).mutate(mutations));
      return { productId, ...r };
    });
  }

  /** `product.delete`: stops a live run first; `deleted: false` when there was nothing to delete. */
  async delete(productId: string): Promise<{ deleted: boolean }> {
    return this.inUse(productId, () => this.deleteNow(productId));
  }

  private async deleteNow(productId: string): Promise<{ deleted: boolean }> {
    let orchestrator: ProductOrchestrator | undefined;
    try {
      orchestrator = await this.forWrite(productId);
    } catch (err) {
      if (isDomainError(err, "not_found")) return { deleted: false };
      throw err;
    }
    // Another process executing it keeps it (conflict with its owner): deleting would pull its state away.
    if (!orchestrator.isDriving) await orchestrator.assertWritable();
    await orchestrator.shutdown();
    // No worktree, branch or ref of the product outlives it (PROTOCOL.md section 5, Isolation and integration).
    await orchestrator.removeWorkspaces();
    this.forgetLive(productId);
    const deleted = await this.ctx.store.delete(productId);
    return { deleted };
  }

  /** Products loaded in this process (for the session adapter and shutdown). */
  loaded(): ProductOrchestrator[] {
    return [...this.live.values()];
  }

  /**
   * Stops every product this process drives: scheduling stops, running tasks are persisted as interrupted (pending
   * with a note), and the persisted phase stays `executing` so `product.resume` continues after a restart. From the
   * first call on, requests that would drive or change a product are refused (`closing`). Callable again: a later
   * call stops the runs that requests already in flight at the first call started since.
   */
  async shutdown(): Promise<void> {
    const again = this.closing;
    this.closing = true;
    // A later call stops only what work in flight at the first call started since (an idle instance has no run).
    const pending = [...this.live.values()].filter((o) => !again || !o.isIdle);
    await Promise.all(pending.map((o) => o.shutdown().catch(() => undefined)));
  }
}

/**
 * The `workspace` field of a new product's `created` event: `product.plan`'s, else the server's default (config
 * `workspace`), else none. Throws `invalid_input` (-32602) when a remote-backed product asks for what it cannot have:
 * `shared` isolation or integration mode `merge` (a remote product's result is its pushed branch), verification (not
 * wired to the mirror yet), or a server without a workspace root for remote products.
 */
function remoteWorkspace(
  params: PlanParams,
  ctx: Pick<ProductContext, "options" | "remoteWorkspaces">,
): { workspace?: WorkspaceRemote } {
  const workspace = params.workspace ?? ctx.options.workspace;
  if (!workspace) return {};
  if (params.isolation === "shared")
    throw invalidInput(
      "A product with a workspace remote runs in worktrees of its mirror; isolation shared is refused",
    );
  if (params.integration?.mode === "merge")
    throw invalidInput(
      "Integration mode merge applies to products in a local cwd only; a product with a workspace remote ends on its pushed branch",
    );
  if ((params.verify ?? ctx.options.verify) !== undefined)
    throw invalidInput(
      "Verification (verify) is not available yet for a product with a workspace remote; omit one of them",
    );
  if (!ctx.remoteWorkspaces)
    throw invalidInput("This server has no workspace root for products with a workspace remote");
  return { workspace: { ...workspace } };
}

/** A short product name from the goal's first line (at most 80 characters). */
export function defaultName(goal: string): string {
  const first = goal.trim().split(/\r?\n/)[0]?.trim() ?? "";
  const clean = first.replace(/^[-*+]\s+|^\d+[.)]\s+/, "");
  return clean.length > 80 ? `${clean.slice(0, 77)}...` : clean || "Untitled product";
}
