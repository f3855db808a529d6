/**
 * Fleet: many servers on one shared store (issue 14; DESIGN.md, Persistence backends: `postgres`; guarantees 6, 13).
 *
 * Owns three things, all built on the authority's change feed (`RunStateAuthority.watch`, PostgreSQL LISTEN/NOTIFY)
 * with periodic checks as a fallback:
 * - the owner hears at once when another server writes its product's lease, and re-checks its lease (a take-over
 *   fences it without waiting for the next heartbeat);
 * - control forwarding: `product.pause`, `product.cancel` and `product.mutate` sent to a server that does not own the
 *   product are written as a control request record (`control/<productId>/<requestId>` in the product's project);
 *   the owner, told by the feed, applies it as if its own client had asked and writes the answer into the same
 *   record, which the requesting server returns to its client;
 * - recovery (`serve --recover`): products left `executing` by an owner that is gone (no lease, an expired one, or
 *   one the lease policy finds dead: same host and process gone, or its liveness lock in the shared store released,
 *   which fleet-liveness.ts hears of within a probe period) are resumed here, then goal runs left `running` by a driver that is gone (the
 *   goal service's pass, `recoverGoals`); the lease's compare-and-swap lets exactly one server win.
 *
 * It never bypasses the orchestrator: every change goes through ProductService, so the durability guarantees hold
 * unchanged. It never performs I/O except through the authority and the service.
 */
import * as z from "zod";
import { Id, Mutation, Timestamp } from "../../../protocol/common.js";
import { DomainError, isDomainError, type DomainErrorCode } from "../errors.js";
import type { AuthorityChange, Clock, IdGenerator, Logger, OwnerLiveness, RunStateAuthority } from "../ports.js";
import { AuthorityConflict } from "../ports.js";
import { WorkInFlight } from "../work-in-flight.js";
import { FleetLiveness } from "./fleet-liveness.js";
import type { ControlRequest, ProductService } from "./service.js";
import type { ProductStore } from "./store.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";
import { CONTROL_REQUEST_KIND } from "./control-requests.js";

/** The record kind of control requests. */
export const CONTROL_KIND = "control";

/**
 * The changes the fleet reacts to: lease records (a take-over or a release) and control requests. An authority with
 * a change feed needs to announce only these. PostgreSQL serialises the commits of every transaction that sends a
 * `NOTIFY` (a database-wide lock held through the commit's WAL flush), so announcing every task write takes group
 * commit away from a fleet of servers (issue 14: 4 servers fell to 0.35x one server's throughput).
 * A product's own event appends are not announced: a server that takes a product over writes its lease first, and a
 * stray append by a non-owner is refused to the owner by the stream's sequence check (guarantee 6).
 * A lease record created where none was (`created`: a product started or resumed) is not announced either: it fences
 * nobody (a take-over writes over the holder's revision, a release deletes the record, and both are announced) and
 * starts no recovery, yet every server's feed would wake for it, one database transaction each (issue 32: 0.8 per
 * task at 8 servers). A holder whose record another server deleted hears that delete.
 */
export function fleetWatches(change: { kind?: string; stream?: string; created?: true }): boolean {
  if (change.kind === "lease") return change.created !== true;
  return change.kind === CONTROL_KIND || change.kind === CONTROL_REQUEST_KIND;
}

/** A control request forwarded to a product's owner, and its answer (written by the owner into the same record). */
export const ControlRequestRecord = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      productId: Id,
      op: z.enum(["pause", "cancel", "mutate"]),
      mutations: z.array(Mutation).max(1_000).optional(),
      /** Owner id of the server that forwarded it. */
      by: z.string().min(1).max(500),
      at: Timestamp,
      state: z.enum(["pending", "done", "refused"]),
      result: z.record(z.string(), z.unknown()).optional(),
      error: z.object({ code: z.string(), message: z.string(), details: z.unknown() }).optional(),
    }),
  "ControlRequestRecord",
);
export type ControlRequestRecord = z.infer<typeof ControlRequestRecord>;

export interface FleetOptions {
  service: ProductService;
  store: ProductStore;
  authority: RunStateAuthority;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  /** This server's lease owner id. */
  ownerId: string;
  /** Proves a same-host owner's process gone (guarantee 13); without it only expiry frees a lease. */
  liveness?: OwnerLiveness;
  /** Resume products whose owner is gone (`serve --recover`). */
  recover: boolean;
  /**
   * With `recover`, the recovery pass for goal runs whose driver is gone (GoalService.recoverOrphans), run after the
   * products' pass of each scan, so a goal run re-attaches to a phase product this server just took over.
   */
  recoverGoals?: () => Promise<unknown>;
  /** Period of the recovery scan and of the owner's fallback check for control requests, ms. */
  scanMs: number;
  /**
   * With a shared liveness service (`liveness.watch`, docs/FLEET.md): how often a product fenced by a loss of this
   * server's liveness is checked for its new owner, ms. Default 1000.
   */
  livenessCheckMs?: number;
  /** How long a forwarded request waits for the owner's answer before the original conflict is returned, ms. */
  forwardTimeoutMs?: number;
}

export class Fleet {
  readonly #o: FleetOptions;
  #unwatch: (() => void) | null = null;
  #cancelScan: (() => void) | null = null;
  #scanning: Promise<void> | null = null;
  #rescan = false;
  #stopped = false;
  /** Control requests being applied here (by record id), so a request is never applied twice by this server. */
  readonly #handling = new Set<string>();
  /** Answers awaited by forwarded requests of this server (by record id). */
  readonly #waiters = new Map<string, () => void>();
  readonly #work = new WorkInFlight();
  /** Wakes the released-lease checks waiting out their jitter (`stop` ends them at once). */
  readonly #jitters = new Set<() => void>();
  /** Reactions to the shared liveness service (fleet-liveness.ts), when there is one. */
  readonly #liveness: FleetLiveness | null;

  constructor(options: FleetOptions) {
    this.#o = options;
    const liveness = options.liveness;
    this.#liveness =
      liveness?.watch === undefined
        ? null
        : new FleetLiveness({
            liveness,
            loaded: () => options.service.loaded(),
            ownerId: options.ownerId,
            clock: options.clock,
            logger: options.logger,
            // An owner lost its liveness lock: look for its products now (a little jitter spreads the survivors).
            onOwnersGone: () => {
              if (options.recover) this.#schedule(Math.floor(Math.random() * 100));
            },
            checkMs: options.livenessCheckMs ?? 1_000,
          });
  }

  /** True when the authority has a change feed, so forwarding can reach an owner at once. */
  get canForward(): boolean {
    return this.#o.authority.watch !== undefined;
  }

  /**
   * Subscribes to the change feed (when the authority has one) and starts the periodic checks; with `recover`, scans
   * for orphaned products at once. Call once.
   */
  start(): void {
    const watch = this.#o.authority.watch;
    if (watch) this.#unwatch = watch.call(this.#o.authority, (change) => this.#onChange(change));
    this.#liveness?.start();
    if (this.#o.recover || this.canForward) this.#schedule(this.#o.recover ? 0 : this.#o.scanMs);
  }

  /**
   * Stops listening and scanning. Resolves once the scan, lease re-checks and forwarded requests being applied here
   * finished, so the authority can be closed after it. Forwarded requests this server still waits for give up at
   * their timeout. Idempotent; never rejects.
   */
  stop(): Promise<void> {
    this.#stopped = true;
    this.#liveness?.stop();
    this.#unwatch?.();
    this.#unwatch = null;
    this.#cancelScan?.();
    this.#cancelScan = null;
    for (const wake of [...this.#jitters]) wake();
    return this.#work.settled();
  }

  // -------------------------------------------------------------------------------------------------------------
  // The change feed

  #onChange(change: AuthorityChange): void {
    if (this.#stopped) return;
    if (change.kind === "lease") {
      if (change.id === undefined) return;
      this.#verifyOwnership(change.id);
      // Only a released lease can leave a product to recover: a written one names an owner that was live to write
      // it (a dead one is the liveness's and the scan's). That one product is checked, not every executing one.
      if (this.#o.recover && change.deleted === true) {
        void this.#work.track(this.#recoverReleased(change.projectId, change.id));
      }
      return;
    }
    if (change.kind === CONTROL_KIND && change.id !== undefined) {
      const waiter = this.#waiters.get(change.id);
      if (waiter) {
        waiter();
        return;
      }
      const productId = change.id.slice(0, change.id.indexOf("/"));
      if (this.#drives(productId)) void this.#work.track(this.#apply(change.projectId, change.id));
    }
  }

  #drives(productId: string): boolean {
    return this.#o.service.loaded().some((o) => o.productId === productId && o.isDriving);
  }

  /** Another server wrote this product's lease: the owner re-checks its lease now (guarantee 6). */
  #verifyOwnership(productId: string): void {
    const orchestrator = this.#o.service.loaded().find((o) => o.productId === productId && o.isDriving);
    if (!orchestrator) return;
    void this.#work.track(
      orchestrator.verifyLease().catch((err: unknown) => {
        this.#o.logger.warn({ productId, err }, "could not re-check the product lease");
      }),
    );
  }

  // -------------------------------------------------------------------------------------------------------------
  // Control forwarding: the owner's side

  /** Applies one pending control request addressed to a product this server drives, and writes the answer. */
  async #apply(projectId: string, id: string): Promise<void> {
    if (this.#handling.has(id)) return;
    this.#handling.add(id);
    try {
      const stored = await this.#o.authority.get(projectId, CONTROL_KIND, id);
      if (!stored) return;
      const parsed = ControlRequestRecord.safeParse(stored.value);
      if (!parsed.success || parsed.data.state !== "pending") return;
      const request = parsed.data;
      let answer: ControlRequestRecord;
      try {
        const result = await this.#run(request);
        answer = { ...request, state: "done", result };
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        answer = {
          ...request,
          state: "refused",
          error: { code: err.code, message: err.message, details: err.details },
        };
      }
      this.#o.logger.info(
        { productId: request.productId, op: request.op, by: request.by, state: answer.state },
        "applied a forwarded control request",
      );
      await this.#o.authority.put(projectId, CONTROL_KIND, id, answer, stored.revision).catch((err: unknown) => {
        // The requester withdrew (timed out) or the store failed: it reports the original conflict.
        if (!(err instanceof AuthorityConflict)) this.#o.logger.warn({ id, err }, "could not answer a control request");
      });
    } catch (err) {
      this.#o.logger.warn({ id, err }, "could not apply a control request");
    } finally {
      this.#handling.delete(id);
    }
  }

  async #run(request: ControlRequestRecord): Promise<Record<string, unknown>> {
    const local = { forward: false };
    switch (request.op) {
      case "pause":
        return this.#o.service.pause(request.productId, local);
      case "cancel":
        return this.#o.service.cancel(request.productId, local);
      case "mutate":
        return this.#o.service.mutate(request.productId, request.mutations ?? [], local);
    }
  }

  /** Fallback for a missed notification: pending requests of the products this server drives. */
  async #applyPending(): Promise<void> {
    for (const orchestrator of this.#o.service.loaded()) {
      if (!orchestrator.isDriving) continue;
      const projectId = orchestrator.model.state.projectId;
      const pending = await this.#o.authority.list(projectId, CONTROL_KIND, `${orchestrator.productId}/`);
      for (const { id } of pending) await this.#apply(projectId, id);
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Control forwarding: the requesting side

  /**
   * Asks the owner of `productId` (another server) to apply `request`, and returns its result; throws the owner's
   * DomainError when it refused. When no answer comes within the forward timeout the request is withdrawn and
   * `refusal` (the conflict that made this server forward) is thrown. Throws `persistence_failed` (as a DomainError
   * from the caller's mapping) when the store fails.
   */
  async forward(productId: string, request: ControlRequest, refusal: DomainError): Promise<Record<string, unknown>> {
    const projectId = await this.#o.store.projectOf(productId);
    if (projectId === undefined) throw refusal;
    const id = `${productId}/${this.#o.ids("ctl")}`;
    const record: ControlRequestRecord = {
      v: 1,
      productId,
      op: request.op,
      ...(request.op === "mutate" ? { mutations: request.mutations } : {}),
      by: this.#o.ownerId,
      at: new Date(this.#o.clock.now()).toISOString(),
      state: "pending",
    };
    let wake: () => void = () => undefined;
    this.#waiters.set(id, () => wake());
    try {
      await this.#o.authority.put(projectId, CONTROL_KIND, id, record, null);
      const deadline = this.#o.clock.now() + (this.#o.forwardTimeoutMs ?? 10_000);
      for (;;) {
        const stored = await this.#o.authority.get(projectId, CONTROL_KIND, id);
        const answer = stored ? ControlRequestRecord.safeParse(stored.value) : null;
        if (stored && answer?.success && answer.data.state !== "pending") {
          await this.#o.authority.delete(projectId, CONTROL_KIND, id, stored.revision).catch(() => false);
          if (answer.data.state === "done") return answer.data.result ?? {};
          const error = answer.data.error;
          throw new DomainError(
            (error?.code ?? "conflict") as DomainErrorCode,
            error?.message ?? refusal.message,
            (error?.details ?? {}) as never,
          );
        }
        const left = deadline - this.#o.clock.now();
        if (left <= 0) {
          // Withdraw unless the owner took it meanwhile (then read its answer on the next turn).
          const withdrawn = stored
            ? await this.#o.authority.delete(projectId, CONTROL_KIND, id, stored.revision).catch((err: unknown) => {
                if (err instanceof AuthorityConflict) return false;
                throw err;
              })
            : true;
          if (withdrawn) throw refusal;
          continue;
        }
        // Woken by the change feed at once; polled every 500 ms in case a notification is lost.
        await new Promise<void>((resolve) => {
          const cancel = this.#o.clock.setTimer(Math.min(500, left), () => resolve());
          wake = () => {
            cancel();
            resolve();
          };
        });
      }
    } finally {
      this.#waiters.delete(id);
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Recovery and periodic checks

  #schedule(ms: number): void {
    if (this.#stopped) return;
    if (this.#scanning) {
      this.#rescan = true;
      return;
    }
    this.#cancelScan?.();
    this.#cancelScan = this.#o.clock.setTimer(ms, () => {
      this.#cancelScan = null;
      this.#scanning = this.#work.track(this.#tick()).finally(() => {
        this.#scanning = null;
        const again = this.#rescan;
        this.#rescan = false;
        // Jitter keeps servers that started together from scanning in lockstep.
        this.#schedule(again ? 0 : this.#o.scanMs + Math.floor(Math.random() * (this.#o.scanMs / 4)));
      });
    });
  }

  async #tick(): Promise<void> {
    try {
      if (this.canForward) await this.#applyPending();
      if (this.#o.recover) {
        const t0 = this.#o.clock.now();
        const taken = await this.recoverOrphans();
        if (!this.#stopped) await this.#o.recoverGoals?.();
        // Read by the bench (test/bench/postgres.ts: start-up with 100,000 stored products) at log level debug.
        this.#o.logger.debug({ taken: taken.length, ms: this.#o.clock.now() - t0 }, "recovery pass done");
      }
    } catch (err) {
      this.#o.logger.warn({ err }, "fleet check failed; retrying at the next period");
    }
  }

  /**
   * A product whose lease was released elsewhere: after a short jitter (so the survivors do not all race), resumed
   * here when its header still says `executing`, as the recovery pass would (`#recoverOne`). A product that completed
   * costs one header read. Never throws.
   */
  async #recoverReleased(projectId: string, productId: string): Promise<void> {
    await new Promise<void>((resolve) => {
      const wake = (): void => {
        this.#jitters.delete(wake);
        cancel();
        resolve();
      };
      const cancel = this.#o.clock.setTimer(50 + Math.floor(Math.random() * 200), wake);
      this.#jitters.add(wake);
    });
    if (this.#stopped || this.#drives(productId) || this.#o.liveness?.selfLive?.() === false) return;
    try {
      const header = await this.#o.store.headerOf(projectId, productId);
      if (header?.phase === "executing" && !this.#stopped) await this.#recoverOne(header);
    } catch (err) {
      this.#o.logger.warn({ productId, err }, "could not check a product whose lease was released");
    }
  }

  /**
   * One recovery pass: every product whose header says `executing`, not driven here, whose lease is missing, expired,
   * or held by an owner the liveness port proves dead (same host, process gone), is resumed here (an
   * automatic resume: a run whose inputs drifted waits for an explicit one). A lost race with another server is not
   * an error. Returns the ids of the products this server took over.
   */
  async recoverOrphans(): Promise<string[]> {
    const taken: string[] = [];
    // A server that cannot prove itself live takes nothing over (docs/FLEET.md): its leases would not be respected.
    if (this.#o.liveness?.selfLive?.() === false) return taken;
    const headers = await this.#o.store.headersInPhase("executing");
    for (const header of headers) {
      if (this.#stopped) break;
      if (await this.#recoverOne(header)) taken.push(header.productId);
    }
    return taken;
  }

  /**
   * Resumes one product left `executing` when this server does not drive it and its lease is missing, expired, or
   * held by an owner the liveness port proves dead. True when it was taken over here; a lost race is not an error.
   */
  async #recoverOne(header: { projectId: string; productId: string }): Promise<boolean> {
    if (this.#drives(header.productId)) return false;
    const { lease } = await this.#o.store.readLease(header.projectId, header.productId);
    const unexpired = lease !== null && Date.parse(lease.expiresAt) > this.#o.clock.now();
    // A verdict on a recent probe only: reading many headers and leases under load may take longer than one lasts.
    if (unexpired && lease.owner !== this.#o.ownerId) await this.#o.liveness?.fresh?.();
    const dead = lease !== null && this.#o.liveness?.check(lease.owner) === "dead";
    if (lease && unexpired && !dead) return false;
    try {
      await this.#o.service.resume(header.productId, undefined, { automatic: true });
      this.#o.logger.info(
        { productId: header.productId, previousOwner: lease?.owner },
        "recovered a product whose owner is gone",
      );
      return true;
    } catch (err) {
      const expected = isDomainError(err, "conflict") || isDomainError(err, "invalid_phase");
      if (!expected) this.#o.logger.warn({ productId: header.productId, err }, "could not recover a product");
      // A lost race or a run that waits for an explicit resume: routine, but the reason is what explains a slow
      // takeover (the fleet tests print the survivors' debug lines when one is late).
      else
        this.#o.logger.debug(
          { productId: header.productId, reason: (err as Error).message },
          "did not recover a product",
        );
      return false;
    }
  }
}
