/**
 * Store-level helpers for the worktree-safety e2e tests (issue 26, case 6): how many bytes a product's records take
 * in a server's SQLite file, and a rewrite of its records into the shape main at 7314467 wrote (every change list in
 * full, no `changedFilesTotal`), so a test can show that such a store still reads and resumes.
 */
import Database from "better-sqlite3";

/** Bytes of a product's stored records (UTF-8 lengths of the JSON text), with how many rows each kind has. */
export interface ProductStorage {
  eventBytes: number;
  events: number;
  snapshotBytes: number;
  snapshots: number;
}

/** Reads the storage a product takes in the SQLite store at `statePath` (the server must not be writing to it). */
export function productStorage(statePath: string, productId: string): ProductStorage {
  const db = new Database(statePath, { readonly: true });
  try {
    const events = db
      .prepare(
        "SELECT count(*) AS n, coalesce(sum(length(CAST(event AS BLOB))), 0) AS bytes FROM events WHERE stream = ?",
      )
      .get(`product/${productId}`) as { n: number; bytes: number };
    const snapshots = db
      .prepare(
        "SELECT count(*) AS n, coalesce(sum(length(CAST(value AS BLOB))), 0) AS bytes FROM records WHERE kind = 'snapshot' AND id LIKE ?",
      )
      .get(`${productId}/%`) as { n: number; bytes: number };
    return { eventBytes: events.bytes, events: events.n, snapshotBytes: snapshots.bytes, snapshots: snapshots.n };
  } finally {
    db.close();
  }
}

/** A pair of keys holding a change list and the count of its full length, in today's records. */
const LIST_KEYS: [string, string][] = [
  ["changedFiles", "changedFilesTotal"],
  ["files", "filesTotal"],
];

/** Replaces, everywhere in `value`, a sampled change list (`list` + `total`) by `full` when its sample is a prefix. */
function unbound(value: unknown, full: string[]): number {
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + unbound(v, full), 0);
  if (value === null || typeof value !== "object") return 0;
  const bag = value as Record<string, unknown>;
  let rewritten = 0;
  for (const [list, total] of LIST_KEYS) {
    const sample = bag[list];
    if (!Array.isArray(sample) || bag[total] !== full.length) continue;
    if (sample.some((p, i) => p !== full[i])) throw new Error(`the stored sample is not a prefix of the full list`);
    bag[list] = full;
    delete bag[total];
    rewritten++;
  }
  for (const v of Object.values(bag)) rewritten += unbound(v, full);
  return rewritten;
}

/**
 * Rewrites the product's events and snapshots in the SQLite store at `statePath` as main at 7314467 wrote them for a
 * task that changed `full` (every path, no total): each sampled list whose total is `full.length` becomes `full`.
 * Returns how many lists were rewritten. The server must be stopped.
 */
export function rewriteAsUnbounded(statePath: string, productId: string, full: string[]): number {
  const db = new Database(statePath);
  try {
    let rewritten = 0;
    const rewrite = db.transaction(() => {
      const events = db.prepare("SELECT seq, event FROM events WHERE stream = ?").all(`product/${productId}`) as {
        seq: number;
        event: string;
      }[];
      const setEvent = db.prepare("UPDATE events SET event = ? WHERE stream = ? AND seq = ?");
      for (const row of events) {
        const parsed = JSON.parse(row.event) as unknown;
        const n = unbound(parsed, full);
        if (n > 0) setEvent.run(JSON.stringify(parsed), `product/${productId}`, row.seq);
        rewritten += n;
      }
      const snapshots = db
        .prepare("SELECT id, value FROM records WHERE kind = 'snapshot' AND id LIKE ?")
        .all(`${productId}/%`) as { id: string; value: string }[];
      const setSnapshot = db.prepare("UPDATE records SET value = ? WHERE kind = 'snapshot' AND id = ?");
      for (const row of snapshots) {
        const parsed = JSON.parse(row.value) as unknown;
        const n = unbound(parsed, full);
        if (n > 0) setSnapshot.run(JSON.stringify(parsed), row.id);
        rewritten += n;
      }
    });
    rewrite();
    db.pragma("wal_checkpoint(TRUNCATE)");
    return rewritten;
  } finally {
    db.close();
  }
}
