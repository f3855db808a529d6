/**
 * Ownership of one product (DESIGN.md guarantees 6 and 13): its lease in the authority (lease.ts: acquire, renew by
 * heartbeat, take over from a dead owner, release), the epoch of each holding (a delayed release meant for an earlier
 * holding does nothing), and the one `product.ownershipLost` notice of this instance. Owns the lease and nothing else;
 * what a lost lease means for the run is the orchestrator's (`onLost`). Never writes events.
 */
import type { ProductContext } from "./context.js";
import { ProductLease, type LeaseHolder, type LeaseLoss } from "./lease.js";
import type { ProductModel } from "./state.js";

export class Ownership {
  readonly lease: ProductLease;
  #epoch = 0;
  #lostAnnounced = false;

  constructor(
    private readonly model: ProductModel,
    private readonly ctx: ProductContext,
    onLost: (loss: LeaseLoss) => void,
  ) {
    const o = ctx.options;
    this.lease = new ProductLease(
      ctx.store,
      ctx.clock,
      ctx.logger,
      model.state.projectId,
      model.state.productId,
      { owner: o.ownerId ?? "local", ttlMs: o.leaseTtlMs ?? 30_000, renewMs: o.leaseRenewMs ?? 10_000 },
      onLost,
      ctx.liveness,
    );
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

  /** Releases the lease unless it was taken again since `epoch` (default: the current holding) or `keep` says so. */
  async release(epoch = this.#epoch, keep = false): Promise<void> {
    if (epoch !== this.#epoch || keep || !this.lease.held) return;
    await this.lease.release();
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

  /** Forgets the lease without writing (another owner's record is the truth now). */
  drop(): void {
    this.lease.drop();
  }

  /**
   * Tells the client that another server took the product over and this one stopped driving it (guarantee 13,
   * `product.ownershipLost {productId, ownerId, error}`; `ownerId` is the id this server held the lease under). Sent
   * once per instance: a fenced instance never drives again.
   */
  announceLost(newOwner: string | undefined): void {
    if (this.#lostAnnounced) return;
    this.#lostAnnounced = true;
    const productId = this.model.state.productId;
    const by = newOwner !== undefined && newOwner !== this.lease.owner ? ` (owner ${newOwner})` : "";
    this.ctx.notifier.notify("product.ownershipLost", {
      productId,
      ownerId: this.lease.owner,
      error:
        `Another server process${by} took product ${productId} over, so this server stopped driving it; ` +
        "follow it through that process, or with product.status.",
    });
  }
}
