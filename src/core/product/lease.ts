/**
 * ProductLease: one owner at a time (DESIGN.md guarantees 6 and 13). A product being executed holds a lease record
 * (`lease/<productId>`: `{v: 1, owner, expiresAt, ttlMs}`) in the run-state authority, taken and renewed only by
 * compare-and-swap on its revision, renewed by a heartbeat on the Clock, and deleted when the owner stops.
 *
 * Policy: a live lease of another owner refuses the take-over (`conflict` with `{owner, expiresAt, live: true}`); an
 * expired lease, a missing one, one that does not parse, one with this process's own owner id, or one whose owner is
 * provably dead (`OwnerLiveness` says `dead`: same host, process gone) may be taken at once. A renewal that finds the
 * revision changed means someone else took the lease: the owner is told (`onLost`) and never renews again. Lease
 * operations of one product run one at a time, so a release never races a renewal.
 *
 * Trust (guarantee 14): a reader never believes `expiresAt` further than the lease's lifetime (`ttlMs`, capped at
 * `MAX_LEASE_TTL_MS`; this process's TTL for records without one) past the moment it first saw the record's current
 * revision. A renewing owner writes a new revision every `renewMs`, so this only ever shortens leases that stopped
 * being renewed, such as one dated far in the future by a wrong clock or a hand edit.
 *
 * This file never decides what losing the lease means for the product (the orchestrator fences itself) and never
 * performs I/O except through the ProductStore and the liveness port.
 */
import { DomainError, conflict, persistenceFailed } from "../errors.js";
import type { Clock, Logger, OwnerLiveness } from "../ports.js";
import { AuthorityConflict } from "../ports.js";
import { MAX_LEASE_TTL_MS, type LeaseRecord } from "./records.js";
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
  | { kind: "failed"; error: unknown }
  /**
   * This process lost its own liveness (`OwnerLiveness.selfLive()` is false, docs/FLEET.md): it must stop at once,
   * another server may take the lease over without waiting for it to expire.
   */
  | { kind: "fenced" };

/** Who holds a lease now, as read from the authority. */
export interface LeaseHolder {
  owner: string;
  /** ISO-8601 UTC: the record's `expiresAt`, never later than its lifetime past when this process first saw it. */
  expiresAt: string;
  /**
   * True when it has not expired by this process's clock and its owner is not provably dead (guarantee 13); the
   * `live` of PROTOCOL.md section 5 `Owner`.
   */
  live: boolean;
  /** True when the owner is this process's owner id. */
  mine: boolean;
  /** What the liveness port proved about the owner's process. */
  process: "alive" | "dead" | "unknown";
  /**
   * ISO-8601 UTC, by the owner's clock: when the owner last renewed (the record's `expiresAt` less its `ttlMs`);
   * absent for records without `ttlMs` (issue 28: "driven by server X (renewed 2 s ago)").
   */
  renewedAt?: string;
}

/** The conflict details of a refusal by a live holder (PROTOCOL.md section 3, `-32012` data). */
export function holderDetails(holder: LeaseHolder): { owner: string; expiresAt: string; live: boolean } {
  return { owner: holder.owner, expiresAt: holder.expiresAt, live: holder.live };
}

/**
 * How a reader sees a lease record (guarantees 13 and 14): its expiry is never believed further than the lease's
 * lifetime (`ttlMs`, capped at `MAX_LEASE_TTL_MS`; `view.ttlMs` for records without one) past `seenAtMs`, when the
 * reader first saw the record's current revision (`nowMs` for a one-off read); it is live while that expiry is ahead
 * of `nowMs` and the liveness port does not prove its owner dead. Pure.
 */
export function describeLease(
  lease: LeaseRecord,
  view: { nowMs: number; seenAtMs: number; owner: string; ttlMs: number; liveness?: OwnerLiveness },
): LeaseHolder {
  const ttlMs = Math.min(lease.ttlMs ?? view.ttlMs, MAX_LEASE_TTL_MS);
  const expiresAtMs = Math.min(Date.parse(lease.expiresAt), view.seenAtMs + ttlMs);
  const mine = lease.owner === view.owner;
  const process = mine ? "alive" : (view.liveness?.check(lease.owner) ?? "unknown");
  const renewedAtMs = lease.ttlMs === undefined ? NaN : Date.parse(lease.expiresAt) - lease.ttlMs;
  return {
    owner: lease.owner,
    expiresAt: new Date(expiresAtMs).toISOString(),
    live: expiresAtMs > view.nowMs && process !== "dead",
    mine,
    process,
    ...(Number.isFinite(renewedAtMs) ? { renewedAt: new Date(renewedAtMs).toISOString() } : {}),
  };
}

/** The lease records a `ProductLease` reads and writes (ProductStore implements it; goal runs use it too). */
export type LeaseStore = Pick<ProductStore, "readLease" | "putLease" | "deleteLease">;

/** Another owner's lease as `acquire` took it over: when that owner last renewed it, and how often it renewed. */
export interface TakenOver {
  /** Epoch ms of its last renewal (`expiresAt` − `ttlMs`). */
  renewedAtMs: number;
  /** Its renewal period, ms (a third of `ttlMs`): had it lived, it would have renewed again this much later. */
  renewMs: number;
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
  /**
   * The lease record this process last read (its revision, owner and expiry: a released lease's record is deleted,
   * so a later holding starts at revision 1 again and the revision alone does not name one holding) and when (epoch
   * ms) it first saw it.
   */
  #seen: { key: string; atMs: number } | null = null;
  /** What the last `acquire` learned of another owner's lease it took over (`takenOver`); null when none. */
  #takenOver: TakenOver | null = null;

  /**
   * `productId` names the lease record (`lease/<productId>`); a goal run's lease uses its goal run id (ids never
   * collide: they carry their kind's prefix). `subject` starts the conflict messages (default `Product <id>`).
   */
  constructor(
    private readonly store: LeaseStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly projectId: string,
    private readonly productId: string,
    private readonly settings: LeaseSettings,
    private readonly onLost: (loss: LeaseLoss) => void,
    private readonly liveness?: OwnerLiveness,
    private readonly subject = `Product ${productId}`,
  ) {}

  /**
   * What the last `acquire` that took over the lease of another owner proven dead (guarantee 13) learned of that
   * owner's last renewal; null when the last `acquire` created the lease, renewed this owner's own or took over an
   * expired one.
   */
  get takenOver(): TakenOver | null {
    return this.#takenOver;
  }

  /** True while this process holds the lease (acquired, not released, not lost). */
  get held(): boolean {
    return this.#revision !== null;
  }

  /** The owner id this lease is taken under. */
  get owner(): string {
    return this.settings.owner;
  }

  /** True while the lease is held, by this process's clock not past its expiry, and this process is live. */
  isFresh(): boolean {
    return this.#revision !== null && this.clock.now() < this.#expiresAtMs && this.liveness?.selfLive?.() !== false;
  }

  /**
   * Drops the held lease at once, without writing and without waiting for a renewal in flight, and reports
   * `{kind: "fenced"}` through `onLost` (this process lost its liveness: docs/FLEET.md). Returns false (and does
   * nothing) when none is held.
   */
  fence(): boolean {
    if (this.#revision === null) return false;
    this.drop();
    this.onLost({ kind: "fenced" });
    return true;
  }

  /**
   * Reads the current holder of the lease, or `null` when there is none (or the record does not parse). With `mark`
   * (the store's `changeMark()`), a read at an unchanged mark may be answered from memory. Never writes.
   */
  async holder(mark?: string): Promise<LeaseHolder | null> {
    const { lease, revision } = await this.store.readLease(this.projectId, this.productId, mark);
    return lease && revision !== null ? this.describe(lease, revision) : null;
  }

  /** The holder as this process may believe it: expiry bounded by the lease's lifetime, liveness of its process. */
  private describe(lease: LeaseRecord, revision: number): LeaseHolder {
    const now = this.clock.now();
    const key = `${revision}\u0000${lease.owner}\u0000${lease.expiresAt}`;
    if (this.#seen?.key !== key) this.#seen = { key, atMs: now };
    return describeLease(lease, {
      nowMs: now,
      seenAtMs: this.#seen.atMs,
      owner: this.settings.owner,
      ttlMs: this.settings.ttlMs,
      ...(this.liveness ? { liveness: this.liveness } : {}),
    });
  }

  /**
   * Takes the lease (or renews it when already held) and starts the heartbeat. Throws `DomainError(conflict)` with
   * the owner when another owner's lease is live or another process took it first in a race, and
   * `DomainError(persistence_failed)` when the authority failed; in both cases this process holds nothing.
   */
  acquire(): Promise<void> {
    return this.serial(async () => {
      this.#takenOver = null;
      if (this.#revision !== null) {
        const loss = await this.renewInside();
        if (this.#revision !== null) return;
        // A renewal the authority failed is a persistence failure (guarantee 2), not another owner's conflict.
        if (loss?.kind === "failed") throw persistenceFailed(loss.error);
        throw conflict(loss?.kind === "taken" && loss.owner !== undefined ? { owner: loss.owner } : {}, this.subject);
      }
      if (this.liveness?.selfLive?.() === false) {
        throw persistenceFailed("this server cannot confirm its liveness to the shared store (docs/FLEET.md)");
      }
      try {
        // Most takes find no lease (a product started, or resumed after a release): the record is created by CAS
        // without reading first (issue 32: one statement fewer per run). One that exists refuses the creation and is
        // read and judged below, as before.
        if (await this.createLease()) return;
        const current = await this.store.readLease(this.projectId, this.productId);
        if (current.invalid) {
          this.logger.warn({ productId: this.productId }, "lease record does not parse; treating it as expired");
        }
        if (current.lease && current.revision !== null) {
          // Another owner's lease: its verdict must rest on a recent probe, however long this resume took so far.
          if (current.lease.owner !== this.settings.owner) await this.liveness?.fresh?.();
          const holder = this.describe(current.lease, current.revision);
          if (holder.live && !holder.mine) throw conflict(holderDetails(holder), this.subject);
          if (holder.process === "dead" && !holder.mine) {
            // Only an owner proven dead: it stopped between its last renewal (`describeLease`'s `renewedAt`) and the
            // one it would have made next, a third of the lifetime later (serve.ts). An expired lease tells nothing of
            // when its owner stopped: its time is not counted, as before.
            const { ttlMs } = current.lease;
            if (holder.renewedAt !== undefined && ttlMs !== undefined)
              this.#takenOver = { renewedAtMs: Date.parse(holder.renewedAt), renewMs: Math.floor(ttlMs / 3) };
            this.logger.warn(
              { productId: this.productId, owner: holder.owner },
              "the lease's owner process is gone; taking the product over without waiting for the lease to expire",
            );
          }
        }
        await this.write(current.revision);
      } catch (err) {
        if (err instanceof AuthorityConflict) {
          const winner = await this.holder().catch(() => null);
          throw conflict(winner ? holderDetails(winner) : {}, this.subject);
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
    return this.serial(async () => {
      await this.renewInside();
    });
  }

  /**
   * Stops the heartbeat and deletes the lease if it is still this process's (CAS on the held revision). Never throws:
   * a failed delete is logged and the lease simply expires. `announce` false: the delete is not announced on the
   * change feed (`RunStateAuthority.delete`), for a product nobody needs to recover.
   */
  release(announce = true): Promise<void> {
    return this.serial(async () => {
      const revision = this.#revision;
      this.disarm();
      this.#revision = null;
      this.#expiresAtMs = 0;
      this.#generation++;
      if (revision === null) return;
      try {
        await this.store.deleteLease(this.projectId, this.productId, revision, announce);
      } catch (err) {
        this.logger.warn({ productId: this.productId, err }, "could not release the product lease; it will expire");
      }
    });
  }

  /** Creates the lease record where none exists (inside `serial`); false when one exists. */
  private async createLease(): Promise<boolean> {
    try {
      await this.write(null);
      return true;
    } catch (err) {
      if (err instanceof AuthorityConflict) return false;
      throw err;
    }
  }

  /** Writes this owner's lease by CAS on `expected` (inside `serial`), holds it and starts the heartbeat. */
  private async write(expected: number | null): Promise<void> {
    const now = this.clock.now();
    this.#revision = await this.store.putLease(this.projectId, this.productId, this.value(now), expected);
    this.#expiresAtMs = now + this.settings.ttlMs;
    this.#generation++;
    this.arm();
  }

  /** Forgets the lease without writing (it was lost): stops the heartbeat. */
  drop(): void {
    this.disarm();
    this.#revision = null;
    this.#expiresAtMs = 0;
    this.#generation++;
  }

  private value(now: number): LeaseRecord {
    return {
      v: 1,
      owner: this.settings.owner,
      expiresAt: new Date(now + this.settings.ttlMs).toISOString(),
      ttlMs: this.settings.ttlMs,
    };
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

  /**
   * One renewal (inside `serial`): the record is read first and must still be this owner's at the held revision, then
   * written by CAS on that revision; a conflict or failure loses the lease. The owner check matters because a lease
   * record is deleted when released: after another server took the lease over and released it, a third one's new
   * lease starts at revision 1 again, and a CAS on the revision alone would let a holder that was frozen since its own
   * revision 1 overwrite a live owner's lease (guarantee 13). Only this process writes records naming its owner id,
   * so a record that names it at the held revision is this holding's.
   */
  private async renewInside(): Promise<LeaseLoss | undefined> {
    const revision = this.#revision;
    if (revision === null) return undefined;
    if (this.liveness?.selfLive?.() === false) {
      this.fence();
      return { kind: "fenced" };
    }
    const generation = this.#generation;
    try {
      const current = await this.store.readLease(this.projectId, this.productId);
      if (current.revision !== revision || current.lease?.owner !== this.settings.owner) {
        throw new AuthorityConflict(`${this.subject}'s lease is no longer this owner's.`);
      }
      const now = this.clock.now();
      const written = await this.store.putLease(this.projectId, this.productId, this.value(now), revision);
      // Fenced or released meanwhile (fence() does not wait for this renewal): the holding is over.
      if (generation !== this.#generation) return undefined;
      this.#revision = written;
      this.#expiresAtMs = now + this.settings.ttlMs;
      this.arm();
      return undefined;
    } catch (err) {
      if (generation !== this.#generation) return undefined;
      this.drop();
      let loss: LeaseLoss;
      if (err instanceof AuthorityConflict) {
        const current = await this.store.readLease(this.projectId, this.productId).catch(() => null);
        const owner = current?.lease?.owner;
        this.logger.error({ productId: this.productId, owner }, "lease taken by another owner");
        loss = owner !== undefined ? { kind: "taken", owner } : { kind: "taken" };
      } else {
        this.logger.error({ productId: this.productId, err }, "lease renewal failed");
        loss = { kind: "failed", error: err };
      }
      this.onLost(loss);
      return loss;
    }
  }
}
