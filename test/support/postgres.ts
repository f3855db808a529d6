/**
 * The test PostgreSQL database (issue 14): `ACP_ORCHESTRATOR_TEST_PG` names it (scripts/pg-test-cluster.sh starts a
 * private cluster and sets it; `npm run test:postgres` and `.ci/run` do so). Without it the Postgres suites are
 * skipped, and this module says so loudly on stderr, once per test file; with `ACP_ORCHESTRATOR_REQUIRE_PG=1` (set by
 * `.ci/run`) they fail instead.
 *
 * Every authority a test opens gets its own PostgreSQL schema (a fresh namespace), dropped again afterwards, so
 * tests never see each other's data.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { describe, it } from "vitest";
import { PostgresAuthority, type PostgresAuthorityOptions } from "../../src/adapters/persistence/postgres-authority.js";

/** The test database URL, or undefined when none is configured. */
export const TEST_PG_URL = process.env.ACP_ORCHESTRATOR_TEST_PG || undefined;

/** `describe`, or `describe.skip` with a loud message when no test database is configured. */
export function describePostgres(title: string, body: () => void): void {
  if (TEST_PG_URL === undefined) {
    // CI sets ACP_ORCHESTRATOR_REQUIRE_PG: there a missing database is a broken set-up, not a reason to skip.
    if (process.env.ACP_ORCHESTRATOR_REQUIRE_PG === "1") {
      throw new Error(
        `"${title}" needs PostgreSQL: ACP_ORCHESTRATOR_TEST_PG is not set (ACP_ORCHESTRATOR_REQUIRE_PG=1)`,
      );
    }
    process.stderr.write(
      `\n*** SKIPPED (no PostgreSQL): "${title}". Set ACP_ORCHESTRATOR_TEST_PG=postgres://… or run ` +
        "`npm run test:postgres` (scripts/pg-test-cluster.sh starts a private cluster). ***\n\n",
    );
    // The suite's body is not run: it may set things up at collection time that need the database.
    describe.skip(`${title} (SKIPPED: ACP_ORCHESTRATOR_TEST_PG is not set)`, () => {
      it("needs ACP_ORCHESTRATOR_TEST_PG", () => undefined);
    });
    return;
  }
  describe(title, body);
}

/** A fresh schema name for one test. */
export function freshSchema(): string {
  return `t_${randomUUID().replace(/-/g, "").slice(0, 20)}`;
}

/** The test URL with `schema` set (the authority creates the schema). */
export function urlWithSchema(schema: string, url = TEST_PG_URL): string {
  if (url === undefined) throw new Error("ACP_ORCHESTRATOR_TEST_PG is not set");
  const parsed = new URL(url);
  parsed.searchParams.set("schema", schema);
  return parsed.toString();
}

/** Opens an authority on the test database, in `options.schema` or else a fresh schema. */
export async function openTestAuthority(options: PostgresAuthorityOptions = {}): Promise<PostgresAuthority> {
  return PostgresAuthority.open(urlWithSchema(options.schema ?? freshSchema()), { maxConnections: 4, ...options });
}

/** Empties the tables of `schema` when it exists (keeping its migrations). */
export async function emptySchema(schema: string): Promise<void> {
  checkSchemaName(schema);
  const exists = await adminQuery("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]);
  if (exists.rowCount === 0) return;
  await adminQuery(`DELETE FROM "${schema}".records; DELETE FROM "${schema}".streams; DELETE FROM "${schema}".events`);
}

function checkSchemaName(schema: string): void {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`bad schema name ${schema}`);
}

let admin: pg.Pool | undefined;

/** Runs SQL as the test database's owner (on a small pool that lets the process exit when idle). */
export async function adminQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  sql: string,
  params: unknown[] = [],
): Promise<pg.QueryResult<R>> {
  admin ??= new pg.Pool({ connectionString: TEST_PG_URL, max: 2, idleTimeoutMillis: 1_000, allowExitOnIdle: true });
  return admin.query<R>(sql, params);
}

/** Drops a test schema and everything in it. */
export async function dropSchema(schema: string): Promise<void> {
  checkSchemaName(schema);
  await adminQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

export { eventually } from "./eventually.js";
