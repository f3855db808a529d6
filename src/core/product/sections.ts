/**
 * Serialisation of one product's operations: `run(fn)` runs `fn` after every earlier section of the product finished
 * (pause, cancel, waves, leader answers and status catch-ups never interleave their writes). Owns only the queue;
 * knows nothing of what the sections do. Never performs I/O.
 */
export class ExclusiveSections {
  #lock: Promise<unknown> = Promise.resolve();
  #active = 0;

  /** Runs `fn` after every earlier section finished; its error propagates to this caller only. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    this.#active += 1;
    const next = this.#lock.then(fn, fn).finally(() => {
      this.#active -= 1;
    });
    this.#lock = next.catch(() => undefined);
    return next;
  }

  /** Sections queued or running. */
  get active(): number {
    return this.#active;
  }
}
