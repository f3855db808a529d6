/**
 * The statements of one record write alone on PostgreSQL: a creation (`INSERT … ON CONFLICT DO NOTHING`), an update
 * at an expected revision, or a delete (at an expected revision, or whatever it is), each a compare-and-swap on its
 * own row. Several go together through group commit (postgres-write-batch.ts, issue 32).
 *
 * A refused write's answer carries the record's revision as the same statement saw it (`current`): read in a second
 * query, a later write of the same record (this server's, sent without waiting, or another server's) could land in
 * between, and e.g. a delete of a record that was not there would report a conflict with a record created after it.
 *
 * Owns the requests' shapes and their statements alone. postgres-authority.ts validates arguments, serialises the
 * value, maps errors and turns a refused write into its conflict.
 */
import type pg from "pg";

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
