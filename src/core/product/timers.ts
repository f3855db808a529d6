/**
 * The run's clock and timers (DESIGN.md guarantee 9 and Execution model): the elapsed time of execution in this
 * process, the budget timers that wake the loop when a time limit (or its warning) falls due, and the periodic safety
 * checkpoint (5 min; 30 min once a run is older than 48 h). Owns the start of the current driving span and the armed
 * timers; time comes only from the `Clock` port. Never writes anything itself.
 */
import type { Clock } from "../ports.js";
import type { ProductOptions } from "./context.js";
import type { ProductModel } from "./state.js";

export class RunTimers {
  /** When the current span of driving began (clock ms), `null` while this process does not drive the run. */
  #since: number | null = null;
  #cancels: (() => void)[] = [];

  constructor(
    private readonly model: ProductModel,
    private readonly clock: Clock,
    private readonly options: ProductOptions,
  ) {}

  /** True while a driving span is open (between `start` and `stop`). */
  get counting(): boolean {
    return this.#since !== null;
  }

  /** True while any timer is armed. */
  get armed(): boolean {
    return this.#cancels.length > 0;
  }

  /** Opens a driving span now. */
  start(): void {
    this.#since = this.clock.now();
  }

  /** Closes the driving span and disarms every timer. */
  stop(): void {
    this.disarm();
    this.#since = null;
  }

  /** The run's elapsed ms including the open span, and moves the span's start to now (for an `elapsed` event). */
  elapsedMs(): number {
    const base = this.model.state.usage.elapsedMs;
    if (this.#since === null) return base;
    const now = this.clock.now();
    const add = Math.max(0, now - this.#since);
    this.#since = now;
    return base + add;
  }

  /** The run's elapsed ms including the open span, without moving anything (for status and budgets). */
  liveElapsedMs(): number {
    const base = this.model.state.usage.elapsedMs;
    return this.#since === null ? base : base + Math.max(0, this.clock.now() - this.#since);
  }

  /**
   * Arms the budget timers (`wake` when the time limit or its warning falls due) and the safety checkpoint
   * (`checkpoint`, again and again while `driving()` says so). Disarms what was armed before.
   */
  arm(wake: () => void, checkpoint: () => Promise<unknown>, driving: () => boolean): void {
    this.disarm();
    const maxMs = this.model.state.budget.maxDurationMs;
    if (maxMs !== undefined) {
      const left = Math.max(0, maxMs - this.liveElapsedMs());
      this.#cancels.push(this.clock.setTimer(left + 1, wake));
      const warnAt = this.options.budgetWarningRatio * maxMs - this.liveElapsedMs();
      if (warnAt > 0) this.#cancels.push(this.clock.setTimer(warnAt + 1, wake));
    }
    this.scheduleSafetyCheckpoint(checkpoint, driving);
  }

  disarm(): void {
    for (const cancel of this.#cancels.splice(0)) cancel();
  }

  private scheduleSafetyCheckpoint(checkpoint: () => Promise<unknown>, driving: () => boolean): void {
    const ageMs = this.clock.now() - Date.parse(this.model.state.createdAt);
    const period = ageMs > 48 * 3_600_000 ? this.options.longRunSafetyCheckpointMs : this.options.safetyCheckpointMs;
    this.#cancels.push(
      this.clock.setTimer(period, () => {
        if (!driving()) return;
        checkpoint()
          .catch(() => undefined)
          .finally(() => {
            if (driving()) this.scheduleSafetyCheckpoint(checkpoint, driving);
          });
      }),
    );
  }
}
