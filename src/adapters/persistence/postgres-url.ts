/**
 * PostgreSQL state URLs without the PostgreSQL client: recognising one, and showing one without its password.
 *
 * Owns only string handling (recognising, redacting and splitting URLs, quoting identifiers), so choosing a store
 * (open-store.ts) does not load `pg`; the backend itself (postgres-authority.ts) is loaded only when a PostgreSQL
 * store is opened (issue 16: start-up cost).
 */
import { AuthorityFailure } from "../../core/ports.js";

/** True when `url` selects the PostgreSQL backend (`postgres://` or `postgresql://`). */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * The URL without its password, for a command printed for a person to run (a resume hint, a refusal, the dashboard's
 * answer): run as is, node-postgres takes the password from `PGPASSWORD` or `~/.pgpass` (docs/POSTGRESQL.md). An
 * unparsable URL is returned as `redact` shows it.
 */
export function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.password = "";
    return parsed.toString();
  } catch {
    return redact(url);
  }
}

/** The URL with its password replaced, for messages and logs. */
export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(an invalid URL)";
  }
}

/** A state URL split into what node-postgres gets and the PostgreSQL schema (namespace) it names. */
export interface PostgresLocation {
  /** The URL without our own `schema` query parameter. */
  connectionString: string;
  schema: string;
}

/**
 * Splits our own `schema` query parameter off `url` (else `schemaOption`, else `fallback`); everything else goes to
 * node-postgres as is. Throws `AuthorityFailure` with one plain sentence for a URL that does not parse, is not
 * `postgres://`/`postgresql://`, or names a schema that is not lower-case letters, digits and `_` (at most 63).
 */
export function parsePostgresUrl(url: string, schemaOption: string | undefined, fallback: string): PostgresLocation {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new AuthorityFailure("The PostgreSQL state URL is not a valid URL (expected postgres://user@host/db).");
  }
  if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
    throw new AuthorityFailure(`The PostgreSQL state URL must start with postgres://, got ${parsed.protocol}//.`);
  }
  const schema = parsed.searchParams.get("schema") ?? schemaOption ?? fallback;
  parsed.searchParams.delete("schema");
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new AuthorityFailure(
      `The PostgreSQL schema name "${schema}" is not allowed: use lower-case letters, digits and _ (at most 63).`,
    );
  }
  return { connectionString: parsed.toString(), schema };
}

/** `name` as a quoted SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
