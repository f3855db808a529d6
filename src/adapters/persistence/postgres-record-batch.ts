/**
 * The record write statements on PostgreSQL: a creation (`INSERT … ON CONFLICT DO NOTHING`) and an update at an
 * expected revision, each alone or, for group commit (postgres-group-commit.ts, issue 32), several on distinct
 * records as one statement. Each is a compare-and-swap on its own row, decided by the statement per row.
 *
 * Owns the put statements and which puts may be sent together. postgres-authority.ts validates arguments, serialises
 * the value, maps errors and reads the current revision of a refused put for its conflict.
 */
import type pg from "pg";
import { bySize, GroupCommit, valuesList } from "./postgres-group-commit.js";

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

/** The statement of one put alone; resolves with the new revision, or `null` when its check failed. */
async function sendAlone(pool: pg.Pool, r: PutRequest): Promise<number | null> {
  const { notify } = r;
  const result =
    r.expectedRevision === null
      ? await pool.query<{ revision: string }>({
          name: `acp-put-new${notify.name}`,
          text: `WITH written AS (
             INSERT INTO records (project_id, kind, id, value, revision, updated_at)
             VALUES ($1, $2, $3, $4, 1, $5) ON CONFLICT DO NOTHING RETURNING revision)
           SELECT revision, ${notify.sql} FROM written`,
          values: [r.projectId, r.kind, r.id, r.json, r.updatedAt, ...notify.params],
        })
      : await pool.query<{ revision: string }>({
          name: `acp-put-next${notify.name}`,
          text: `WITH written AS (
             UPDATE records SET value = $4, revision = revision + 1, updated_at = $5
             WHERE project_id = $1 AND kind = $2 AND id = $3 AND revision = $7 RETURNING revision)
           SELECT revision, ${notify.sql} FROM written`,
          values: [r.projectId, r.kind, r.id, r.json, r.updatedAt, ...notify.params, r.expectedRevision],
        });
  const row = result.rows[0];
  return row ? Number(row.revision) : null;
}

/**
 * The statement of `size` creations: five parameters each (project, kind, id, value, updated at) as a `VALUES` list;
 * the records created come back.
 */
const creationStatement = bySize(
  (size) => `WITH input (project_id, kind, id, value, updated_at) AS (
        VALUES ${valuesList(size, ["text", "text", "text", "text", "text"])})
      INSERT INTO records (project_id, kind, id, value, revision, updated_at)
      SELECT project_id, kind, id, value, 1, updated_at FROM input ON CONFLICT DO NOTHING
      RETURNING project_id, kind, id, revision`,
);

/**
 * The statement of `size` updates: six parameters each (project, kind, id, value, updated at, expected revision);
 * each row at its expected revision moves to the next one, and those records come back with their new revision.
 */
const updateStatement = bySize(
  (size) => `WITH input (project_id, kind, id, value, updated_at, expected) AS (
        VALUES ${valuesList(size, ["text", "text", "text", "text", "text", "bigint"])})
      UPDATE records r SET value = i.value, revision = r.revision + 1, updated_at = i.updated_at FROM input i
      WHERE r.project_id = i.project_id COLLATE "C" AND r.kind = i.kind COLLATE "C" AND r.id = i.id COLLATE "C"
        AND r.revision = i.expected
      RETURNING r.project_id, r.kind, r.id, r.revision`,
);

const keyOf = (r: { projectId: string; kind: string; id: string }): string =>
  `${r.projectId}\u0000${r.kind}\u0000${r.id}`;

/** The statement of 2 … `MAX_BATCH` puts of one sort (all creations or all updates) on distinct records. */
async function sendTogether(pool: pg.Pool, puts: readonly PutRequest[]): Promise<(number | null)[]> {
  const creating = puts[0]?.expectedRevision === null;
  const values: unknown[] = [];
  for (const r of puts) {
    values.push(r.projectId, r.kind, r.id, r.json, r.updatedAt);
    if (!creating) values.push(r.expectedRevision);
  }
  const result = await pool.query<{ project_id: string; kind: string; id: string; revision: string }>({
    name: `${creating ? "acp-put-new-batch" : "acp-put-next-batch"}-${puts.length}`,
    text: creating ? creationStatement(puts.length) : updateStatement(puts.length),
    values,
  });
  const written = new Map(result.rows.map((row) => [keyOf({ projectId: row.project_id, ...row }), row.revision]));
  return puts.map((r) => {
    const revision = written.get(keyOf(r));
    return revision === undefined ? null : Number(revision);
  });
}

/** The puts of one authority: unannounced ones through group commit (creations and updates in queues of their own). */
export class RecordBatcher {
  readonly #creations: GroupCommit<PutRequest, number | null>;
  readonly #updates: GroupCommit<PutRequest, number | null>;

  constructor(private readonly pool: pg.Pool) {
    const statements = {
      key: (r: PutRequest) => keyOf(r),
      alone: (r: PutRequest) => sendAlone(pool, r),
      together: (puts: readonly PutRequest[]) => sendTogether(pool, puts),
    };
    this.#creations = new GroupCommit(statements);
    this.#updates = new GroupCommit(statements);
  }

  /**
   * Writes `r` and resolves with the record's new revision once committed (1 on creation), `null` when its check
   * failed (nothing written); rejects with the database's error. An announced put goes alone at once (its own
   * `pg_notify`).
   */
  put(r: PutRequest): Promise<number | null> {
    if (r.notify.name !== "-quiet") return sendAlone(this.pool, r);
    return (r.expectedRevision === null ? this.#creations : this.#updates).submit(r);
  }

  /** Resolves once no put is queued or in flight. */
  async drained(): Promise<void> {
    await Promise.all([this.#creations.drained(), this.#updates.drained()]);
  }
}
