/**
 * Ownership of one run — a product or a goal run (DESIGN.md guarantees 6 and 13): its lease in the authority
 * (lease.ts: acquire, renew by heartbeat, take over from a dead owner, release), the epoch of each holding (a delayed
 * release meant for an earlier holding does nothing), and, for a product, the one `product.ownershipLost` notice of
 * this instance. Owns the lease and nothing else; what a lost lease means for the run is its driver's (`onLost`).
 * Never writes events.
 */
import type { Clock, Logger, OwnerLiveness } from "../ports.js";
import type { ProductContext } from "./context.js";
import {
  ProductLease,
  type LeaseHolder,
  type LeaseLoss,
  type LeaseSettings,
  type LeaseStore,
  type TakenOver,
} from "./lease.js";
import type { ProductModel } from "./state.js";

/** What an `Ownership` needs: where the lease record lives, its policy, and who is told when it is lost. */
export interface OwnershipSpec {
  store: LeaseStore;
  clock: Clock;
  logger: Logger;
  liveness?: OwnerLiveness;
  projectId: string;
  /** The run's id: the lease record is `lease/<id>` in `projectId`. */
  id: string;
  settings: LeaseSettings;
  /** Starts the conflict messages (default `Product <id>`). */
  subject?: string;
  onLost: (loss: LeaseLoss) => void;
  /** Tells the client this instance stopped driving (`announceLost`); without it `announceLost` does nothing. */
  announce?: (ownerId: string, newOwner: string | undefined) => void;
}

/** The ownership of a product: the lease settings of `ctx.options`, `product.ownershipLost` as its notice. */
export function productOwnership(
  model: ProductModel,
  ctx: ProductContext,
  onLost: (loss: LeaseLoss) => void,
): Ownership {
  const o = ctx.options;
  return new Ownership({
    store: ctx.store,
    clock: ctx.clock,
    logger: ctx.logger,
    ...(ctx.liveness ? { liveness: ctx.liveness } : {}),
    projectId: model.state.projectId,
    id: model.state.productId,
    settings: { owner: o.ownerId ?? "local", ttlMs: o.leaseTtlMs ?? 30_000, renewMs: o.leaseRenewMs ?? 10_000 },
    onLost,
    announce: (ownerId, newOwner) => {
      const productId = model.state.productId;
      const by = newOwner !== undefined && newOwner !== ownerId ? ` (owner ${newOwner})` : "";
      ctx.notifier.notify("product.ownershipLost", {
        productId,
        ownerId,
        error:
          `Another server process${by} took product ${productId} over, so this server stopped driving it; ` +
          "follow it through that process, or with product.status.",
      });
    },
  });
}

export class Ownership {
  readonly lease: ProductLease;
  #epoch = 0;
  #lostAnnounced = false;
  readonly #announce: OwnershipSpec["announce"];

  constructor(spec: OwnershipSpec) {
    this.lease = new ProductLease(
      spec.store,
      spec.clock,
      spec.logger,
      spec.projectId,
      spec.id,
      spec.settings,
      spec.onLost,
      spec.liveness,
      spec.subject,
    );
    this.#announce = spec.announce;
  }

  get held(): boolean {
    return this.lease.held;
  }

  /** The current holding's epoch (bumped by every `take`). */
  get epoch(): number {
    return this.#epoch;
  }

  /**
   * Takes the lease (or renews it when held) and returns the new holding's epoch. Throws `conflict` (with the owner)
   * when another live owner holds it, `persistence_failed` when the authority failed.
   */
  async take(): Promise<number> {
    await this.lease.acquire();
    return ++this.#epoch;
  }

  /**
   * Releases the lease unless it was taken again since `epoch` (default: the current holding) or `keep` says so;
   * `announce` false leaves the delete unannounced on the change feed (lease.ts `release`).
   */
  async release(epoch = this.#epoch, keep = false, announce = true): Promise<void> {
    if (epoch !== this.#epoch || keep || !this.lease.held) return;
    await this.lease.release(announce);
  }

  /**
   * True when the lease is held and fresh enough to start workers; renews it first when the clock says it may have
   * lapsed (e.g. a stalled event loop). A lost lease reaches `onLost`.
   */
  async ready(): Promise<boolean> {
    if (!this.lease.isFresh()) await this.lease.renewNow();
    return this.lease.held && this.lease.isFresh();
  }

  /** Re-checks the held lease now (a take-over is seen at once instead of at the next heartbeat). */
  async verify(): Promise<void> {
    if (this.lease.held) await this.lease.renewNow();
  }

  /** Who holds the lease, read through the store's change mark `mark` when given. Read-only. */
  holder(mark?: string): Promise<LeaseHolder | null> {
    return this.lease.holder(mark);
  }

  /** What the last `take` learned of another owner's lease it took over (lease.ts `takenOver`), or null. */
  get takenOver(): TakenOver | null {
    return this.lease.takenOver;
  }

  /** Forgets the lease without writing (another owner's record is the truth now). */
  drop(): void {
    this.lease.drop();
  }

  /**
   * Tells the client that another server took the run over and this one stopped driving it (guarantee 13; for a
   * product `product.ownershipLost {productId, ownerId, error}`, `ownerId` being the id this server held the lease
   * under). Sent once per instance: a fenced instance never drives again.
   */
  announceLost(newOwner: string | undefined): void {
    if (this.#lostAnnounced) return;
    this.#lostAnnounced = true;
    this.#announce?.(this.lease.owner, newOwner);
  }
}
