/**
 * ProductLease: one owner at a time (DESIGN.md guarantee 6). A product being executed holds a lease record
 * (`lease/<productId>`: `{v: 1, owner, expiresAt}`) in the run-state authority, taken and renewed only by
 * compare-and-swap on its revision, renewed by a heartbeat on the Clock, and deleted when the owner stops.
 *
 * Policy: a live lease of another owner refuses the take-over (`conflict` with the owner); an expired lease, a
 * missing one, one that does not parse, or one with this process's own owner id may be taken. A renewal that finds
 * the revision changed means someone else took the lease: the owner is told (`onLost`) and never renews again.
 * Lease operations of one product run one at a time, so a release never races a renewal.
 *
 * This file never decides what losing the lease means for the product (the orchestrator fences itself) and never
 * performs I/O except through the ProductStore.
 */
import { DomainError, conflict, persistenceFailed } from "../errors.js";
import type { Clock, Logger } from "../ports.js";
import { AuthorityConflict } from "../ports.js";
import type { LeaseRecord } from "./records.js";
import type { ProductStore } from "./store.js";

export interface LeaseSettings {
  /** This process's owner id (unique per live process). */
  owner: string;
  /** Lifetime of a lease without renewal, ms. */
  ttlMs: number;
  /** Heartbeat period, ms (well below `ttlMs`). */
  renewMs: number;
}

/** Why a held lease was lost. */
export type LeaseLoss =
  /** Someone else wrote the lease record (took it over after it expired, or deleted it). */
  | { kind: "taken"; owner?: string }
  /** The authority failed the renewal write (guarantee 2: a persistence failure). */
  | { kind: "failed"; error: unknown };

/** Who holds a lease now, as read from the authority. */
export interface LeaseHolder {
  owner: string;
  /** ISO-8601 UTC. */
  expiresAt: string;
  /** True when it has not expired by this process's clock. */
  live: boolean;
  /** True when the owner is this process's owner id. */
  mine: boolean;
}

export class ProductLease {
  /** The revision of the lease record this process last wrote; `null` when it holds none. */
  #revision: number | null = null;
  /** Epoch ms until which the held lease is valid (0 when none). */
  #expiresAtMs = 0;
  #cancelHeartbeat: (() => void) | null = null;
  #queue: Promise<unknown> = Promise.resolve();
  /** Bumped by every acquire and release, so a heartbeat scheduled for an earlier holding does nothing. */
  #generation = 0;

  constructor(
    private readonly store: ProductStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly projectId: string,
    private readonly productId: string,
    private readonly settings: LeaseSettings,
    private readonly onLost: (loss: LeaseLoss) => void,
  ) {}

  /** True while this process holds the lease (acquired, not released, not lost). */
  get held(): boolean {
    return this.#revision !== null;
  }

  /** The owner id this lease is taken under. */
  get owner(): string {
    return this.settings.owner;
  }

  /** True while the lease is held and, by this process's clock, not past its expiry. */
  isFresh(): boolean {
    return this.#revision !== null && this.clock.now() < this.#expiresAtMs;
  }

  /** Reads the current holder of the lease, or `null` when there is none (or the record does not parse). Never writes. */
  async holder(): Promise<LeaseHolder | null> {
    const { lease } = await this.store.readLease(this.projectId, this.productId);
    return lease ? this.describe(lease) : null;
  }

  private describe(lease: LeaseRecord): LeaseHolder {
    return {
      owner: lease.owner,
      expiresAt: lease.expiresAt,
      live: Date.parse(lease.expiresAt) > this.clock.now(),
      mine: lease.owner === this.settings.owner,
    };
  }

  /**
   * Takes the lease (or renews it when already held) and starts the heartbeat. Throws `DomainError(conflict)` with
   * the owner when another owner's lease is live or another process took it first in a race, and
   * `DomainError(persistence_failed)` when the authority failed; in both cases this process holds nothing.
   */
  acquire(): Promise<void> {
    return this.serial(async () => {
      if (this.#revision !== null) {
        await this.renewInside();
        if (this.#revision === null) throw conflict({}, `Product ${this.productId}`);
        return;
      }
      try {
        const current = await this.store.readLease(this.projectId, this.productId);
        if (current.invalid) {
          this.logger.warn({ productId: this.productId }, "lease record does not parse; treating it as expired");
        }
        if (current.lease) {
          const holder = this.describe(current.lease);
          if (holder.live && !holder.mine) throw conflict({ owner: holder.owner }, `Product ${this.productId}`);
        }
        const now = this.clock.now();
        this.#revision = await this.store.putLease(this.projectId, this.productId, this.value(now), current.revision);
        this.#expiresAtMs = now + this.settings.ttlMs;
        this.#generation++;
        this.arm();
      } catch (err) {
        if (err instanceof AuthorityConflict) {
          const winner = await this.store.readLease(this.projectId, this.productId).catch(() => null);
          const owner = winner?.lease?.owner;
          throw conflict(owner !== undefined ? { owner } : {}, `Product ${this.productId}`);
        }
        if (err instanceof DomainError) throw err;
        throw persistenceFailed(err);
      }
    });
  }

  /**
   * Renews the held lease now (outside the heartbeat), e.g. when the clock says it may have lapsed. Resolves once done;
   * a loss is reported through `onLost`, never thrown.
   */
  renewNow(): Promise<void> {
    return this.serial(() => this.renewInside());
  }

  /**
   * Stops the heartbeat and deletes the lease if it is still this process's (CAS on the held revision). Never throws:
   * a failed delete is logged and the lease simply expires.
   */
  release(): Promise<void> {
    return this.serial(async () => {
      const revision = this.#revision;
      this.disarm();
      this.#revision = null;
      this.#expiresAtMs = 0;
      this.#generation++;
      if (revision === null) return;
      try {
        await this.store.deleteLease(this.projectId, this.productId, revision);
      } catch (err) {
        this.logger.warn({ productId: this.productId, err }, "could not release the product lease; it will expire");
      }
    });
  }

  /** Forgets the lease without writing (it was lost): stops the heartbeat. */
  drop(): void {
    this.disarm();
    this.#revision = null;
    this.#expiresAtMs = 0;
    this.#generation++;
  }

  private value(now: number): LeaseRecord {
    return { v: 1, owner: this.settings.owner, expiresAt: new Date(now + this.settings.ttlMs).toISOString() };
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(fn, fn);
    this.#queue = next.catch(() => undefined);
    return next;
  }

  private arm(): void {
    this.disarm();
    const generation = this.#generation;
    this.#cancelHeartbeat = this.clock.setTimer(this.settings.renewMs, () => {
      this.#cancelHeartbeat = null;
      if (generation !== this.#generation) return;
      this.renewNow().catch(() => undefined);
    });
  }

  private disarm(): void {
    this.#cancelHeartbeat?.();
    this.#cancelHeartbeat = null;
  }

  /** One renewal (inside `serial`): CAS on the held revision; a conflict or failure loses the lease. */
  private async renewInside(): Promise<void> {
    const revision = this.#revision;
    if (revision === null) return;
    const now = this.clock.now();
    try {
      this.#revision = await this.store.putLease(this.projectId, this.productId, this.value(now), revision);
      this.#expiresAtMs = now + this.settings.ttlMs;
      this.arm();
    } catch (err) {
      this.drop();
      if (err instanceof AuthorityConflict) {
        const current = await this.store.readLease(this.projectId, this.productId).catch(() => null);
        const owner = current?.lease?.owner;
        this.logger.error({ productId: this.productId, owner }, "lease taken by another owner");
        this.onLost(owner !== undefined ? { kind: "taken", owner } : { kind: "taken" });
      } else {
        this.logger.error({ productId: this.productId, err }, "lease renewal failed");
        this.onLost({ kind: "failed", error: err });
      }
    }
  }
}
