/**
 * The product's journal (DESIGN.md guarantees 1, 2 and 6): appends stamped events through the ProductStore (which
 * applies them with `evolve` once they are durable), writes the header and snapshots (compaction), and stops for good
 * once a write was refused (`fenced`). What a failed write means for the run (pause, fence, tell the client) is the
 * orchestrator's `onWriteError`; the journal only reports it. Never performs I/O of its own: the store is a port.
 * The stamping and reading rules are the ones every journal follows (event-journal.ts; goal runs use them too).
 */
import { conflict, isDomainError, type DomainError } from "../errors.js";
import { AuthorityConflict } from "../ports.js";
import type { ProductContext } from "./context.js";
import type { NewEvent } from "./decide.js";
import { stampEvents } from "./event-journal.js";
import { HeaderPacing } from "./header-pacing.js";
import type { ProductEvent } from "./records.js";
import type { ProductModel } from "./state.js";

export class ProductJournal {
  #fenced = false;
  /** When a running product's header is written (header-pacing.ts). */
  readonly #pacing: HeaderPacing;

  constructor(
    private readonly model: ProductModel,
    private readonly ctx: ProductContext,
    /** Maps a failed write to the error the caller gets, after reacting to it (orchestrator.ts). */
    private readonly onWriteError: (err: unknown) => DomainError,
    /** Runs `fn` in the product's exclusive section (sections.ts): the trailing header write runs there. */
    private readonly exclusive: (fn: () => Promise<void>) => Promise<void> = (fn) => fn(),
    /**
     * Resolves true when this instance holds the product's lease, renewed just now by compare-and-swap (orchestrator.ts);
     * false when it holds none or lost it (the loss then reached the lease's owner). Only a refused header write asks.
     */
    private readonly confirmOwner: () => Promise<boolean> = () => Promise.resolve(false),
  ) {
    this.#pacing = new HeaderPacing(ctx.clock, ctx.options.headerProgressMs ?? DEFAULT_HEADER_PROGRESS_MS, () =>
      this.#trailingWrite(),
    );
  }

  /** True once a write of this instance was refused or its lease was taken (guarantee 6): it never writes again. */
  get fenced(): boolean {
    return this.#fenced;
  }

  /** Fences this instance for good. */
  fence(): void {
    this.#fenced = true;
  }

  /** The last timestamp `now` formatted, and the clock reading it was formatted from (ms since the epoch). */
  #lastMs = Number.NaN;
  #lastIso = "";

  /**
   * The clock's now as an ISO-8601 UTC timestamp. Formatted once per clock reading (issue 34: a wave asks for it once
   * per settled result, mostly within the same millisecond).
   */
  now(): string {
    const ms = this.ctx.clock.now();
    if (ms !== this.#lastMs) {
      this.#lastIso = new Date(ms).toISOString();
      this.#lastMs = ms;
    }
    return this.#lastIso;
  }

  /**
   * Appends events (write before act, guarantee 1), and the header with `header`. On a failure `onWriteError` decides
   * what the product does and its DomainError is thrown, so the caller acts on nothing. A phase change is reported to
   * `ctx.onPhaseChange` (also after a failure that paused the product in memory).
   */
  async commit(events: NewEvent[], opts: { header?: boolean } = {}): Promise<void> {
    if (this.#fenced) throw conflict({}, `Product ${this.model.state.productId}`);
    const at = this.now();
    const stamped = stampEvents<ProductEvent>(events, at);
    const phaseBefore = this.model.state.phase;
    try {
      await this.ctx.store.append(this.model, stamped);
      if (opts.header) await this.#writeHeader();
    } catch (err) {
      throw this.onWriteError(err);
    } finally {
      const phase = this.model.state.phase;
      if (phase !== phaseBefore) this.ctx.onPhaseChange?.(this.model.state.productId, phase);
    }
  }

  /** Writes a snapshot now and compacts behind it (store.ts `writeSnapshot`), a write like any other (guarantee 2). */
  async compact(): Promise<void> {
    if (this.#fenced) throw conflict({}, `Product ${this.model.state.productId}`);
    try {
      await this.ctx.store.writeSnapshot(this.model);
    } catch (err) {
      throw this.onWriteError(err);
    }
  }

  /** Writes the header record (`product.list`'s index) now. */
  async writeHeader(): Promise<void> {
    try {
      await this.#writeHeader();
    } catch (err) {
      throw this.onWriteError(err);
    }
  }

  /**
   * An execution wave's header: written now when its phase changed or the pacing period ended, else held back for
   * the trailing write (header-pacing.ts); compaction is checked either way (store.ts `compactIfDue`, guarantee 14).
   */
  async writeWaveHeader(): Promise<void> {
    try {
      if (this.#pacing.writeNow(this.model.state.phase)) await this.#writeHeader();
      else await this.ctx.store.compactIfDue(this.model);
    } catch (err) {
      throw this.onWriteError(err);
    }
  }

  /** True while a wave's header change is held back (the product is not idle: orchestrator.ts `isIdle`). */
  get headerPending(): boolean {
    return this.#pacing.pending;
  }

  /**
   * Writes a held-back header now (before the lease is given back at shutdown); nothing when none is held back or
   * this instance is fenced. Call inside the product's exclusive section.
   */
  async flushHeader(): Promise<void> {
    this.#pacing.cancel();
    if (!this.#pacing.pending) return;
    // A fenced instance never writes again.
    if (this.#fenced) this.#pacing.drop();
    else await this.writeHeader();
  }

  /**
   * Forgets a held-back header without writing it: the product paused in memory after a failed write (guarantee 2).
   * Its `paused` is in no event (the next successful write records it) and its lease is given back, so a trailing
   * write must not put it in the header: the header keeps saying `executing`, as the events do, and a recovery
   * (fleet.ts, `serve --recover`) still finds the product. Its progress is in the events already.
   */
  dropHeldHeader(): void {
    this.#pacing.drop();
  }

  /**
   * Writes the header. A header write refused while this instance still holds the lease is written again once, over
   * the revision found: the header is an index of the events (their writer's, and this instance's appends are the ones
   * accepted), and the refusal came from a write of an earlier owner sent before the take-over and landing after this
   * owner read the header (a trailing header write, issue 32). Fencing the live owner for it would leave the product
   * driven by nobody until its lease expired. Any other refusal is thrown (fences): the lease is gone, the header is
   * gone (a delete), or the stream holds events this instance lacks (another process wrote while the lease had
   * expired untaken, e.g. a cancel: its header is the truth).
   */
  async #writeHeader(): Promise<void> {
    try {
      await this.ctx.store.writeHeader(this.model);
    } catch (err) {
      if (!(err instanceof AuthorityConflict) || this.#fenced) throw err;
      // The header found must index no event this instance lacks (not another process's write or delete), and the
      // lease must still be this instance's; checked in that order, so a refusal renews no lease.
      if (!(await this.ctx.store.adoptHeaderRevision(this.model)) || !(await this.confirmOwner())) throw err;
      this.ctx.logger.warn(
        { productId: this.model.state.productId, err: err.message },
        "header write refused while this server holds the lease: written again over another owner's late write",
      );
      await this.ctx.store.writeHeader(this.model);
    }
    this.#pacing.written(this.model.state.phase);
  }

  #trailingWrite(): void {
    this.exclusive(() => this.flushHeader()).catch((err: unknown) => {
      // A failed write already paused or fenced the product (onWriteError); only an unexpected error is news.
      if (!isDomainError(err))
        this.ctx.logger.error({ productId: this.model.state.productId, err }, "header write failed");
    });
  }
}

/** Default of `ProductOptions.headerProgressMs`: a running product's header is at most 1 s behind its progress. */
export const DEFAULT_HEADER_PROGRESS_MS = 1_000;
