/**
 * The rules every journal in the run-state authority follows, the product's (journal.ts, store.ts) and the goal run's
 * (src/core/goal/journal.ts): how a writer's events are stamped (`v`, one `at` per append), how stored events are read
 * back (parsed one by one; one that does not parse, and a gap in the sequence, are skipped and counted as dropped,
 * guarantee 4; each sequence number is applied once, in order), and what a refused append means (guarantee 6: the
 * writer is fenced). Pure apart from the callbacks it is given: it never performs I/O and keeps no state.
 */
import { conflict, persistenceFailed, type DomainError } from "../errors.js";
import { AuthorityConflict } from "../ports.js";
import { missingBefore } from "./compaction.js";

/** Events as a journal's writer builds them: `v` and `at` are stamped on append (`stampEvents`). */
export type Unstamped<E> = E extends unknown ? Omit<E, "v" | "at"> : never;

/** Stamps events with the record version 1 and the time of the append, ISO-8601 UTC (one `at` for the whole append). */
export function stampEvents<E>(events: readonly Unstamped<E>[], at: string): E[] {
  return events.map((e) => ({ v: 1, at, ...e }) as E);
}

/** A stored event as the authority returns it. */
export interface StoredRecord {
  seq: number;
  event: unknown;
}

/** What reading stored events back does with each one; `position` is the sequence number applied last. */
export interface FoldTarget<E> {
  position(): number;
  /** Parses one stored event; undefined when it does not match its schema. */
  parse(raw: unknown): E | undefined;
  /** Applies a parsed event (the journal's `evolve`); afterwards `position()` is `seq`. */
  apply(event: E, seq: number): void;
  /** Skips an event that did not parse; afterwards `position()` is `seq`. */
  skip(seq: number): void;
}

/**
 * Applies the stored events after the target's position, oldest first, each sequence number once. Returns how many
 * were dropped: events that did not parse plus sequence numbers missing before one that was read (guarantee 4).
 * Records at or before the position are ignored (a concurrent reader applied them already). Never throws.
 */
export function foldStored<E>(records: readonly StoredRecord[], target: FoldTarget<E>): number {
  let dropped = 0;
  for (const { seq, event } of records) {
    const position = target.position();
    if (seq <= position) continue;
    dropped += missingBefore(position, seq);
    const parsed = target.parse(event);
    if (parsed === undefined) {
      dropped++;
      target.skip(seq);
    } else target.apply(parsed, seq);
  }
  return dropped;
}

/**
 * The DomainError a failed append of `subject`'s journal becomes: `conflict` (with the authority's details) when
 * another writer appended first — the caller must fence itself, it never writes again (guarantee 6) — and
 * `persistence_failed` for any other failure (guarantee 2). `refused` tells which it was.
 */
export function appendFailure(err: unknown, subject: string): { refused: boolean; error: DomainError } {
  if (err instanceof AuthorityConflict) return { refused: true, error: conflict(err.details, subject) };
  return { refused: false, error: persistenceFailed(err instanceof Error ? err.message : String(err)) };
}
