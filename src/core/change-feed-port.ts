/**
 * The change feed's part of the persistence port (`RunStateAuthority.watch`, PostgreSQL LISTEN/NOTIFY; docs/FLEET.md):
 * what a listener hears, and how a writer may leave a delete unannounced. Types only; ports.ts re-exports them.
 */

/** One change announced by `RunStateAuthority.watch`: a record (`kind`, `id`) or an event stream (`stream`). */
export interface AuthorityChange {
  projectId: string;
  kind?: string;
  /** Absent when the key was too long to announce: the listener must then check every record of `kind`. */
  id?: string;
  stream?: string;
  /** Set when the change deleted the record (`delete`); absent for a put, an append, or an announcer that omits it. */
  deleted?: true;
}

/** Options of `RunStateAuthority.delete`. */
export interface DeleteOptions {
  /**
   * `false`: an authority with a change feed does not announce this delete (default: announced as it announces
   * writes). A hint for a write every listener would find nothing to do about (a finished product's lease, issue 32):
   * a listener never depends on an announcement (guarantee 13: the fleet's periodic scan is the fallback).
   */
  announce?: boolean;
}
