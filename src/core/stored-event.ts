/**
 * Events as the run-state authority returns them (ports.ts `RunStateAuthority.readEvents`, `appendEvents`), with the
 * length of the JSON text each was stored as when the authority knows it (issue 16 resume, issue 34 compaction).
 * Pure data; no I/O.
 */

export interface StoredEvent {
  /** 1-based sequence number within the stream. */
  seq: number;
  event: unknown;
  /**
   * The length, in UTF-16 code units, of the JSON text the authority stored `event` as, when it knows it: what the
   * store's compaction policy measures, so a load need not serialise every event again to count it (issue 16,
   * resume). Non-enumerable (see `storedEvent`): stored events still compare and print as `{ seq, event }`.
   */
  readonly [STORED_TEXT_LENGTH]?: number;
}

/** The key of `StoredEvent`'s stored text length. */
export const STORED_TEXT_LENGTH: unique symbol = Symbol("acp-orchestrator.storedTextLength");

/** A `StoredEvent` that states the length of the JSON text `event` was stored as (non-enumerable). */
export function storedEvent(seq: number, event: unknown, textLength: number): StoredEvent {
  const stored: StoredEvent = { seq, event };
  Object.defineProperty(stored, STORED_TEXT_LENGTH, { value: textLength });
  return stored;
}

/**
 * `appendEvents`' answer: the last sequence number and, when known, the summed length of the events' stored JSON texts
 * (non-enumerable, as in `StoredEvent`; issue 34: the compaction policy need not serialise each batch again). */
export interface AppendedEvents {
  lastSeq: number;
  readonly [STORED_TEXT_LENGTH]?: number;
}
