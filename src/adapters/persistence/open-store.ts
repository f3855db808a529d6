/**
 * Opens the embedded run-state store named by `--state` or `ACP_ORCHESTRATOR_STATE` (DESIGN.md, Persistence
 * backends): a `postgres://` (or `postgresql://`) URL selects PostgreSQL, anything else is a SQLite file path.
 *
 * Owns only that choice; each backend owns its own settings. It must never print a URL's password: `describe` gives
 * the location as logs may show it.
 */
import { resolve } from "node:path";
import type { RunStateAuthority } from "../../core/ports.js";
import { fleetWatches } from "../../core/product/fleet.js";
import { isPostgresUrl, redact } from "./postgres-url.js";
import { ReadOnlyAuthority } from "./read-only-authority.js";
import { STATE_PATH_ENV, defaultStatePath } from "./state-path.js";

/** Where the embedded state lives. */
export type StateLocation = { kind: "postgres"; url: string } | { kind: "sqlite"; path: string };

/**
 * The store selected by `flag` (the `--state` value), else `$ACP_ORCHESTRATOR_STATE`, else the default SQLite file
 * (state-path.ts). A relative file path is resolved against the current directory. Touches nothing.
 */
export function stateLocation(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): StateLocation {
  const text = flag ?? (env[STATE_PATH_ENV] || undefined);
  if (text !== undefined && isPostgresUrl(text)) return { kind: "postgres", url: text };
  return { kind: "sqlite", path: text !== undefined ? resolve(text) : defaultStatePath(env) };
}

/** The location as logs may show it (a URL without its password). */
export function describeLocation(location: StateLocation): string {
  return location.kind === "postgres" ? redact(location.url) : location.path;
}

/** How a store is opened. */
export interface OpenStoreOptions {
  /**
   * Read only (the operator commands and the dashboard, guarantee 3): every write through the returned authority is
   * refused, and an SQLite file is opened read-only by SQLite itself (it must exist; it is never migrated).
   */
  readOnly?: boolean;
}

/**
 * Opens the store at `location` (migrating its schema when needed, unless `readOnly`). Throws `AuthorityFailure` with
 * one plain sentence when it cannot be opened or was written by a newer acp-orchestrator. The PostgreSQL backend (and
 * `pg`) is loaded here, on first use, so a server on SQLite never pays for it at start-up (issue 16).
 */
export async function openStore(location: StateLocation, options: OpenStoreOptions = {}): Promise<RunStateAuthority> {
  if (location.kind === "postgres") {
    const { PostgresAuthority } = await import("./postgres-authority.js");
    // Only what the fleet reacts to is announced (a NOTIFY serialises commits across servers: fleetWatches).
    const authority = await PostgresAuthority.open(location.url, { announce: fleetWatches });
    return options.readOnly ? new ReadOnlyAuthority(authority) : authority;
  }
  // better-sqlite3 loads here too, on first use: `serve` answers `initialize` before it opens its store (issue 34).
  const { SqliteAuthority } = await import("./sqlite-authority.js");
  if (options.readOnly) return new ReadOnlyAuthority(SqliteAuthority.open(location.path, { readOnly: true }));
  return SqliteAuthority.open(location.path);
}
