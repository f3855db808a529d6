/**
 * Fleet liveness: what a server does with what a shared liveness service tells it (docs/FLEET.md; guarantees 6, 13).
 *
 * Owns two reactions to `OwnerLiveness.watch` events, and nothing else:
 * - `ownersGone` (an owner seen alive lost its liveness lock): the fleet runs a recovery pass now instead of at its
 *   next periodic scan (`onOwnersGone`), so a dead server's products are taken over within about a probe period;
 * - `selfLost` (this server cannot prove itself live): every product it holds a lease for is fenced at once — lease
 *   dropped without writing, scheduling stopped, workers (their agents' process groups) stopped — and
 *   `product.ownershipLost` is reported for each once its lease no longer names this server (another owner took it
 *   over, and may have finished and released it already; checked every `checkMs`).
 *
 * It never writes to the authority, never takes a lease and never decides a takeover: leases and their epoch checks
 * (lease.ts, the stream's sequence check) stay the only arbiters, so a wrong verdict costs time, never a duplicate.
 */
import type { Clock, Logger, OwnerLiveness, OwnerLivenessEvent } from "../ports.js";
import type { ProductOrchestrator } from "./orchestrator.js";

export interface FleetLivenessOptions {
  liveness: OwnerLiveness;
  /** The products this server has loaded (ProductService.loaded). */
  loaded: () => readonly ProductOrchestrator[];
  /** This server's lease owner id. */
  ownerId: string;
  clock: Clock;
  logger: Logger;
  /** Called on `ownersGone`: run a recovery pass soon. */
  onOwnersGone: () => void;
  /** How often the lease of a self-fenced product is read to see whether a new owner shows, ms. */
  checkMs: number;
}

export class FleetLiveness {
  readonly #o: FleetLivenessOptions;
  /** Products fenced here by a loss of liveness, waiting for a new owner to show (by product id). */
  readonly #fenced = new Map<string, ProductOrchestrator>();
  #unwatch: (() => void) | null = null;
  #cancelCheck: (() => void) | null = null;
  #checking = false;

  constructor(options: FleetLivenessOptions) {
    this.#o = options;
  }

  /** Subscribes to the liveness service's events. Does nothing when it has none (SQLite, host authorities). */
  start(): void {
    const watch = this.#o.liveness.watch;
    if (watch && this.#unwatch === null) this.#unwatch = watch.call(this.#o.liveness, (e) => this.#onEvent(e));
  }

  /** Unsubscribes and stops checking for new owners. Idempotent. */
  stop(): void {
    this.#unwatch?.();
    this.#unwatch = null;
    this.#cancelCheck?.();
    this.#cancelCheck = null;
    this.#fenced.clear();
  }

  #onEvent(event: OwnerLivenessEvent): void {
    switch (event.kind) {
      case "ownersGone":
        this.#o.onOwnersGone();
        return;
      case "selfLost":
        this.#fenceAll();
        return;
      case "selfBack":
        this.#o.logger.info({ ownerId: this.#o.ownerId }, "liveness confirmed again; this server takes work again");
        return;
    }
  }

  /** Fences every product holding a lease here, synchronously (guarantee 6: stop before another owner starts). */
  #fenceAll(): void {
    let count = 0;
    for (const orchestrator of this.#o.loaded()) {
      if (!orchestrator.fenceNow()) continue;
      count += 1;
      this.#fenced.set(orchestrator.productId, orchestrator);
    }
    this.#o.logger.error(
      { ownerId: this.#o.ownerId, fenced: count },
      "this server lost its liveness in the shared store: it stopped its products' workers and starts no work",
    );
    this.#armCheck();
  }

  #armCheck(): void {
    if (this.#cancelCheck !== null || this.#fenced.size === 0 || this.#unwatch === null) return;
    this.#cancelCheck = this.#o.clock.setTimer(this.#o.checkMs, () => {
      this.#cancelCheck = null;
      void this.#checkNewOwners().finally(() => this.#armCheck());
    });
  }

  /** Reports `product.ownershipLost` for each fenced product whose lease no longer names this server. Never throws. */
  async #checkNewOwners(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      for (const [productId, orchestrator] of [...this.#fenced]) {
        // Replaced by a freshly loaded instance (a resume here): nothing left to report.
        if (!this.#o.loaded().includes(orchestrator)) {
          this.#fenced.delete(productId);
          continue;
        }
        let owner: { ownerId: string } | undefined;
        try {
          owner = await orchestrator.owner();
        } catch {
          continue; // the store cannot be read yet: try again at the next check
        }
        // Still this server's own (unrenewed) lease: nobody took the product over yet.
        if (owner?.ownerId === this.#o.ownerId) continue;
        // Another owner's lease, or none at all: only an owner deletes its lease, so another one took the product
        // over (and may already have finished it).
        this.#fenced.delete(productId);
        orchestrator.reportOwnershipLost(owner?.ownerId);
      }
    } finally {
      this.#checking = false;
    }
  }
}
