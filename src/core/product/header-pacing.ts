/**
 * How often a running product's header record is written (issue 32: a fleet of servers on one PostgreSQL database).
 *
 * The header is `product.list`'s index of a product (store.ts `writeHeader`): phase, progress, `updatedAt`. It is
 * derived data, never read to rebuild a product (its events are: guarantee 1). Written after every execution wave
 * it was 6 of a 10-task product's 23 statements, each its own transaction and WAL flush. So while a product runs, a
 * wave whose header differs from the last one written only in progress (the same phase) writes it at most once per
 * `intervalMs`; the last such change is written when the period ends (a trailing write), so a header is never older
 * than the period while its product runs. A phase change is always written at once (recovery scans read the phase:
 * fleet.ts), and so is every header write outside a wave. A server's own `product.list` and `product.status` read a
 * product it holds in memory from the memory, not from its header.
 *
 * Owns only the timing: when the header was last written, with which phase, and the trailing write's timer. Never
 * performs I/O; the journal writes (journal.ts).
 */
import type { Clock } from "../ports.js";
import type { Phase } from "../../../protocol/common.js";

export class HeaderPacing {
  /** Clock reading of the last header write (ms since the epoch). */
  #atMs = Number.NEGATIVE_INFINITY;
  /** Phase of the last header written; `undefined` before the first. */
  #phase: Phase | undefined;
  /** A progress change was held back and is not written yet. */
  #dirty = false;
  #cancelTimer: (() => void) | null = null;

  /**
   * `intervalMs`: the least time between two progress-only writes (0: every wave writes, as before issue 32).
   * `onDue`: called once the period of a held-back change ended; it must write the header (`written` then follows).
   */
  constructor(
    private readonly clock: Clock,
    private readonly intervalMs: number,
    private readonly onDue: () => void,
  ) {}

  /** A progress change is held back, waiting for its trailing write. */
  get pending(): boolean {
    return this.#dirty;
  }

  /** Records a header write with `phase` now; a held-back change is thereby written and its timer cancelled. */
  written(phase: Phase): void {
    this.#atMs = this.clock.now();
    this.#phase = phase;
    this.#dirty = false;
    this.cancel();
  }

  /**
   * Whether a wave's header with `phase` is to be written now: yes outside `executing` (a run's last waves: the store
   * skips a header equal to the last one written), when its phase differs from the last one written, when pacing is
   * off, or when the period since the last write has ended (or the clock reads earlier than that write). Otherwise
   * the change is held back and the trailing write armed (once per period).
   */
  writeNow(phase: Phase): boolean {
    const now = this.clock.now();
    if (this.intervalMs <= 0 || phase !== "executing" || phase !== this.#phase) return true;
    // A clock reading before the last write (the wall clock stepped back: NTP, a resumed VM) ends the period too, or
    // the change would be held back for as long as the step, not for at most `intervalMs`.
    if (now - this.#atMs >= this.intervalMs || now < this.#atMs) return true;
    this.#dirty = true;
    if (this.#cancelTimer === null) {
      this.#cancelTimer = this.clock.setTimer(this.#atMs + this.intervalMs - now, () => {
        this.#cancelTimer = null;
        if (this.#dirty) this.onDue();
      });
    }
    return false;
  }

  /** Forgets a held-back change without writing it (no longer `pending`) and cancels its timer. */
  drop(): void {
    this.#dirty = false;
    this.cancel();
  }

  /** Cancels the trailing write's timer (a held-back change stays `pending`). */
  cancel(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = null;
  }
}
