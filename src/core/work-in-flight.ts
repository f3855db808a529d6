/**
 * Work a background loop started and has not finished: a component that owns such work (a poll, a change-feed
 * handler) tracks each piece here so its `stop` can wait for what is already running before the owner closes what
 * that work uses (the run-state authority, on shutdown: a late read of a closed authority logged a warning after
 * every `run`). Pure bookkeeping, no timers.
 */
export class WorkInFlight {
  readonly #running = new Set<Promise<unknown>>();

  /** Tracks `work` until it settles and returns it unchanged. */
  track<T>(work: Promise<T>): Promise<T> {
    const tracked = work.finally(() => this.#running.delete(tracked));
    this.#running.add(tracked);
    // The caller handles `work`'s outcome; this copy must never surface as an unhandled rejection.
    tracked.catch(() => undefined);
    return work;
  }

  /** How many pieces are running now. */
  get size(): number {
    return this.#running.size;
  }

  /**
   * Resolves once nothing tracked is running, including work started by work that was running when it was called.
   * Never rejects.
   */
  async settled(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }
}
