/**
 * PostgreSQL state URLs without the PostgreSQL client: recognising one, and showing one without its password.
 *
 * Owns only string handling, so choosing a store (open-store.ts) does not load `pg`; the backend itself
 * (postgres-authority.ts) is loaded only when a PostgreSQL store is opened (issue 16: start-up cost).
 */

/** True when `url` selects the PostgreSQL backend (`postgres://` or `postgresql://`). */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
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
