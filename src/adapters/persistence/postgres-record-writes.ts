/**
 * The statements of one record write alone on PostgreSQL: a creation (`INSERT … ON CONFLICT DO NOTHING`), an update
 * at an expected revision, or a delete (at an expected revision, or whatever it is), each a compare-and-swap on its
 * own row. Several go together through group commit (postgres-write-batch.ts, issue 32).
 *
 * A refused write's answer carries the record's revision as the same statement saw it (`current`): read in a second
 * query, a later write of the same record (this server's, sent without waiting, or another server's) could land in
 * between, and e.g. a delete of a record that was not there would report a conflict with a record created after it.
 *
 * Owns the requests' shapes, their statements alone and the conflict a refused one reports. postgres-authority.ts
 * validates arguments, serialises the value and maps errors.
 */
import type pg from "pg";
import { AuthorityConflict } from "../../core/ports.js";
import { checkRevisionMatches } from "./authority-checks.js";

/** A refused record write: nothing written; the record's revision as the statement saw it (absent: no record). */
export interface Refused {
  applied: false;
  current?: number;
}

/** What a put did: `applied` with the record's new revision, or refused. */
export type PutOutcome = { applied: true; revision: number } | Refused;

/** What a delete did: `applied` (the row is gone), or refused. */
export type DeleteOutcome = { applied: true } | Refused;

/** A refused write's outcome, from the `current` column of a statement below (NULL: no record). */
export function refused(current: string | null | undefined): Refused {
  return current !== null && current !== undefined ? { applied: false, current: Number(current) } : { applied: false };
}

/** A put's outcome from its `revision` (NULL when refused) and `current` columns. */
export function putOutcome(revision: string | null | undefined, current: string | null | undefined): PutOutcome {
  return revision !== null && revision !== undefined ? { applied: true, revision: Number(revision) } : refused(current);
}

/** The revision of the record `$1/$2/$3` in the statement's snapshot: NULL when there is none. */
const CURRENT = "(SELECT revision FROM records WHERE project_id = $1 AND kind = $2 AND id = $3) AS current";

/** One put as postgres-authority.ts asks for it. */
export interface PutRequest {
  projectId: string;
  kind: string;
  id: string;
  /** The value's JSON text. */
  json: string;
  /** ISO-8601 UTC. */
  updatedAt: string;
  /** `null`: create only when the record does not exist; a number: update only the row at that revision. */
  expectedRevision: number | null;
  /** The change feed's `notifySql` for this put, its payload as parameter 6 (postgres-feed.ts). */
  notify: { sql: string; params: string[]; name: string };
}

/** The statement of one put alone; resolves with its outcome (`revision`: the new one; `current` when refused). */
export async function putAlone(pool: pg.Pool, r: PutRequest): Promise<PutOutcome> {
  const { notify } = r;
  const result =
    r.expectedRevision === null
      ? await pool.query<{ revision: string | null; current: string | null }>({
          name: `acp-put-new${notify.name}`,
          text: `WITH written AS (
             INSERT INTO records (project_id, kind, id, value, revision, updated_at)
             VALUES ($1, $2, $3, $4, 1, $5) ON CONFLICT DO NOTHING RETURNING revision),
           told AS (SELECT revision, ${notify.sql} FROM written)
           SELECT (SELECT revision FROM told) AS revision, ${CURRENT}`,
          values: [r.projectId, r.kind, r.id, r.json, r.updatedAt, ...notify.params],
        })
      : await pool.query<{ revision: string | null; current: string | null }>({
          name: `acp-put-next${notify.name}`,
          text: `WITH written AS (
             UPDATE records SET value = $4, revision = revision + 1, updated_at = $5
             WHERE project_id = $1 AND kind = $2 AND id = $3 AND revision = $7 RETURNING revision),
           told AS (SELECT revision, ${notify.sql} FROM written)
           SELECT (SELECT revision FROM told) AS revision, ${CURRENT}`,
          values: [r.projectId, r.kind, r.id, r.json, r.updatedAt, ...notify.params, r.expectedRevision],
        });
  const row = result.rows[0];
  return putOutcome(row?.revision, row?.current);
}

/** One delete as postgres-authority.ts asks for it. */
export interface DeleteRequest {
  projectId: string;
  kind: string;
  id: string;
  /** Delete only the row at this revision; `undefined`: whatever its revision. */
  expectedRevision: number | undefined;
  /** The change feed's `notifySql` for this delete, its payload as parameter 4 (postgres-feed.ts). */
  notify: { sql: string; params: string[]; name: string };
}

/**
 * The statement of one delete alone (prepared, as every write of a run's hot path: a lease is deleted once per
 * product); resolves `applied` when the row was deleted, else refused with `current` (absent when there was none).
 */
export async function deleteAlone(pool: pg.Pool, d: DeleteRequest): Promise<DeleteOutcome> {
  const at = d.expectedRevision !== undefined;
  const result = await pool.query<{ deleted: string; current: string | null }>({
    name: `acp-delete${at ? "-at" : ""}${d.notify.name}`,
    text: `WITH gone AS (
       DELETE FROM records WHERE project_id = $1 AND kind = $2 AND id = $3 ${at ? "AND revision = $5" : ""} RETURNING 1),
     told AS (SELECT ${d.notify.sql} FROM gone)
     SELECT (SELECT count(*) FROM told) AS deleted, ${CURRENT}`,
    values: [d.projectId, d.kind, d.id, ...d.notify.params, ...(at ? [d.expectedRevision] : [])],
  });
  const row = result.rows[0];
  return row && Number(row.deleted) > 0 ? { applied: true } : refused(row?.current);
}

/** A record's key. */
export interface RecordKey {
  projectId: string;
  kind: string;
  id: string;
}

/** The record's revision now (a query of its own), `undefined` when there is none. */
export async function revisionOf(pool: pg.Pool, k: RecordKey): Promise<number | undefined> {
  const result = await pool.query<{ revision: string }>(
    "SELECT revision FROM records WHERE project_id = $1 AND kind = $2 AND id = $3",
    [k.projectId, k.kind, k.id],
  );
  const row = result.rows[0];
  return row ? Number(row.revision) : undefined;
}

/**
 * The conflict a refused compare-and-swap reports, with the revision its own statement found (`seen`, absent: no
 * record). When `seen` is what was expected, a concurrent write changed the row while the statement waited for it:
 * the revision is read again for the message (`details.revision`; a conflict either way).
 */
export async function refusalConflict(
  pool: pg.Pool,
  k: RecordKey,
  expected: number | null,
  seen: number | undefined,
): Promise<AuthorityConflict> {
  const current = seen === (expected ?? undefined) ? await revisionOf(pool, k) : seen;
  try {
    checkRevisionMatches(k.projectId, k.kind, k.id, current, expected);
  } catch (error) {
    if (error instanceof AuthorityConflict) return error;
    throw error;
  }
  // The record changed back meanwhile: still a conflict (another writer was first).
  return new AuthorityConflict(`The ${k.kind} "${k.id}" of project "${k.projectId}" was changed by another writer.`);
}
