/**
 * The owner liveness port (DESIGN.md guarantee 13, PROTOCOL.md section 5 "Ownership", docs/FLEET.md): what the core
 * may ask about the process behind a lease owner id, and about this process itself. Types only; ports.ts re-exports
 * them. Adapters: same-host process liveness (adapters/system/process-liveness.ts) and PostgreSQL's liveness locks
 * (adapters/persistence/postgres-liveness.ts).
 */

/** What this process can prove about the process behind a lease owner id (DESIGN.md guarantee 13). */
export type OwnerLivenessVerdict =
  /**
   * The owner ran on this host and its process still runs (same pid, same process start time), or the shared store
   * holds its liveness lock (docs/FLEET.md).
   */
  | "alive"
  /**
   * The owner ran on this host and its process is gone, or its pid now belongs to a process started at another time;
   * or the shared store released the liveness lock it was seen holding (its session ended: docs/FLEET.md).
   */
  | "dead"
  /** Nothing can be proved: another host, or an owner id this host's scheme did not make. */
  | "unknown";

/**
 * Tells whether the process behind a lease owner id still runs (DESIGN.md guarantee 13, PROTOCOL.md section 5
 * "Ownership"). The adapter makes this process's owner id (host, pid, process start time) and knows how to look a
 * process up; the core only asks. `check` must be cheap (it runs on every lease read), must never throw, and answers
 * `dead` only when that is provable: a lease of an owner that may be alive elsewhere is respected until it expires.
 */
export interface OwnerLiveness {
  check(ownerId: string): OwnerLivenessVerdict;
  /**
   * Optional (a liveness service shared by a fleet, e.g. PostgreSQL's liveness locks, docs/FLEET.md): false while
   * this process cannot prove itself live to the other servers (its liveness connection dropped or was not confirmed
   * within the fence bound). While false this process must not take, renew or drive a lease: the others may already
   * take its products over. Cheap, never throws. Absent: always live (SQLite, host authorities).
   */
  selfLive?(): boolean;
  /**
   * Optional: subscribes to what the liveness service learns — `ownersGone` when an owner it had seen alive lost its
   * liveness (a recovery pass may take its products over now), `selfLost` when `selfLive()` turned false (fence at
   * once), `selfBack` when it turned true again. Listeners must not throw. Returns the unsubscribe function.
   */
  watch?(listener: (event: OwnerLivenessEvent) => void): () => void;
  /**
   * Optional (a shared liveness service, docs/FLEET.md): resolves once `check`'s verdicts rest on a probe sent at most
   * half a probe period ago — at once when the last one is that recent, else after a probe run now (or the one in
   * flight). Called right before a verdict decides a takeover, so a step that took long under load (loading a product,
   * a drift check) cannot leave a `dead` verdict too old to use (issue 32). Never throws; resolves too when the probe
   * fails (the verdicts then fall back, as `check` says).
   */
  fresh?(): Promise<void>;
}

/** What a shared liveness service reports (OwnerLiveness.watch). */
export type OwnerLivenessEvent = { kind: "ownersGone" } | { kind: "selfLost" } | { kind: "selfBack" };
