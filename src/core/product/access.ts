/**
 * What may be done to a product now, and with which lease: the phase and integrity checks every operation starts
 * with (guarantees 4 and 15: a product whose stored state is not whole is never run again), catching up with what
 * other processes wrote (only while this instance drives nothing), the check before a write by a non-driving
 * instance (another live owner refuses it, guarantee 6), and taking and giving back the lease around execution.
 * Owns no state of its own: it reads the model and health and asks the journal, ownership and loop.
 *
 * This file must never import I/O.
 */
import { TerminalPhases, type Phase } from "../../../protocol/common.js";
import { DomainError, conflict, invalidPhase, notFound } from "../errors.js";
import { holderDetails } from "./lease.js";
import type { ProductParts } from "./parts.js";

export class ProductAccess {
  constructor(private readonly p: ProductParts) {}

  private get productId(): string {
    return this.p.model.state.productId;
  }

  /** Throws `invalid_phase` unless the product is in one of `allowed`. */
  requirePhase(allowed: readonly Phase[], operation: string): void {
    const phase = this.p.model.state.phase;
    if (!allowed.includes(phase)) {
      throw invalidPhase(phase, allowed, { subject: `Product ${this.productId}`, operation });
    }
  }

  /**
   * Guarantee 4 (fail closed): a product with stored records that failed validation (or are missing) is never run
   * again — its state could make it repeat completed work or skip work. It can still be read, listed, cancelled and
   * deleted. Throws `invalid_phase` with no allowed phase.
   */
  requireIntact(operation: string): void {
    const { health } = this.p;
    const phase = this.p.model.state.phase;
    if (health.invalid !== undefined) {
      throw new DomainError(
        "invalid_phase",
        `Product ${this.productId} cannot run: its stored state is not whole (${stripDot(health.invalid)}), so ` +
          `${operation} is refused. Restore the state store from a backup, or delete the product.`,
        { phase, allowed: [] },
      );
    }
    const lost = health.lost;
    if (lost === 0) return;
    throw new DomainError(
      "invalid_phase",
      `Product ${this.productId} has ${lost} stored ${lost === 1 ? "event" : "events"} that failed ` +
        `validation or ${lost === 1 ? "is" : "are"} missing, so ${operation} is refused: running it could ` +
        "repeat or skip work. Restore the state store from a backup, or delete the product.",
      { phase, allowed: [] },
    );
  }

  /**
   * Applies events other processes appended since this model was read (only while this instance drives nothing, so
   * it never races its own writes). Read-only; invalid events are skipped and counted in `dropped` (guarantee 4).
   * `mark`: the store's `changeMark()` taken before the call (see `ProductStore.catchUp`).
   */
  async catchUpNow(mark?: string): Promise<void> {
    const { health, run, pool, ctx, model } = this.p;
    if (health.deletedElsewhere) throw notFound("product", this.productId);
    if (run.driving || pool.size > 0) return;
    const { dropped, invalid, deleted } = await ctx.store.catchUp(model, mark);
    if (deleted) {
      // Another process deleted it (guarantee 14: a deleted product leaves nothing behind): from now on this
      // instance answers what a server that loads it now would, and the service drops it from memory.
      health.deletedElsewhere = true;
      throw notFound("product", this.productId);
    }
    health.dropped += dropped;
    health.lost += dropped;
    if (invalid !== undefined) health.invalid ??= invalid;
  }

  /**
   * Before a write by an instance that does not drive the product: catch up with the authority and refuse when
   * another process holds a live lease (`conflict` with its owner). Read-only. Call inside `exclusive`.
   */
  async syncForWrite(): Promise<void> {
    if (this.p.run.driving || this.p.pool.size > 0) return;
    await this.catchUpNow();
    const holder = await this.p.ownership.holder();
    if (holder && holder.live && !holder.mine) throw conflict(holderDetails(holder), `Product ${this.productId}`);
  }

  /**
   * Takes the product's lease (or renews it when held) before execution starts; returns the holding's epoch for
   * `releaseLease`. Throws `conflict` (with the owner) when another live owner holds it, `persistence_failed` when
   * the authority failed. A fenced instance never takes it again.
   */
  async takeLease(): Promise<number> {
    if (this.p.journal.fenced) throw conflict({}, `Product ${this.productId}`);
    return this.p.ownership.take();
  }

  /**
   * Releases the lease unless it was taken again since `epoch` (default: the current holding) or execution runs.
   * The release of a finished product (completed, failed, cancelled: its journal says so, and a phase is only
   * reached once its events are durable, guarantee 1) is not announced on the change feed: every other server of a
   * fleet would read its header to find nothing to recover (fleet.ts `#recoverReleased`), N-1 reads per product for
   * N servers (issue 32). Any other release is announced, so a product left executing is taken over at once.
   */
  async releaseLease(epoch = this.p.ownership.epoch): Promise<void> {
    const finished = TerminalPhases.includes(this.p.model.state.phase);
    // A header change still held back (header-pacing.ts) would be written after the lease is given back, over what a
    // new owner writes: it is dropped (the events hold it). Pause, the end of a run and shutdown wrote it already.
    if (epoch === this.p.ownership.epoch && !this.p.run.driving) this.p.journal.dropHeldHeader();
    await this.p.ownership.release(epoch, this.p.run.driving, !finished);
  }

  /** Releases the lease once running workers have stopped and their results were written (pause, failures). */
  releaseWhenIdle(): void {
    const epoch = this.p.ownership.epoch;
    this.p.run
      .whenIdle()
      .then(() => this.releaseLease(epoch))
      .catch(() => undefined);
  }
}

export function stripDot(text: string): string {
  return text.endsWith(".") ? text.slice(0, -1) : text;
}
