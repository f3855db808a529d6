/**
 * Where the embedded state lives and which project a workspace belongs to (DESIGN.md, Persistence backends and
 * Vocabulary: "project").
 *
 * Owns the rules for the default SQLite state file location and the default project id. Pure functions of their
 * arguments (environment, platform, home directory, path): they must never touch the filesystem (no mkdir, no
 * realpath) — `SqliteAuthority.open` creates directories when it opens the file.
 */
import { homedir } from "node:os";
import path from "node:path";
import { nodeCrypto } from "../system/node-builtins.js";

/** Environment variable that overrides the state file location. */
export const STATE_PATH_ENV = "ACP_ORCHESTRATOR_STATE";

const APP_DIR = "acp-orchestrator";
const STATE_FILE = "state.db";

/**
 * The default state file path, first match wins:
 * 1. `$ACP_ORCHESTRATOR_STATE` when set and non-empty (resolved against the current directory when relative);
 * 2. `$XDG_STATE_HOME/acp-orchestrator/state.db` when `XDG_STATE_HOME` is an absolute path (the XDG spec says a
 *    relative value is to be ignored);
 * 3. per platform: Windows `%LOCALAPPDATA%\acp-orchestrator\state.db` (falling back to `<home>\AppData\Local`),
 *    macOS `~/Library/Application Support/acp-orchestrator/state.db`, elsewhere `~/.local/state/acp-orchestrator/state.db`.
 * Returns an absolute path in the platform's syntax. Does NOT create anything or check that the path is writable.
 */
export function defaultStatePath(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
  homeDir: string = homedir(),
): string {
  const p = platform === "win32" ? path.win32 : path.posix;
  const override = env[STATE_PATH_ENV];
  if (override) return p.resolve(override);
  const xdg = env.XDG_STATE_HOME;
  if (xdg && p.isAbsolute(xdg)) return p.join(xdg, APP_DIR, STATE_FILE);
  if (platform === "win32") {
    const localAppData =
      env.LOCALAPPDATA && p.isAbsolute(env.LOCALAPPDATA) ? env.LOCALAPPDATA : p.join(homeDir, "AppData", "Local");
    return p.join(localAppData, APP_DIR, STATE_FILE);
  }
  if (platform === "darwin") return p.join(homeDir, "Library", "Application Support", APP_DIR, STATE_FILE);
  return p.join(homeDir, ".local", "state", APP_DIR, STATE_FILE);
}

/**
 * A stable project id for a workspace directory: `p_` followed by the first 16 hex digits of the SHA-256 of the
 * resolved absolute path (on Windows, lower-cased, since its paths are case-insensitive). The same directory always
 * gives the same id on the same platform; trailing separators and `..` segments do not matter. Does NOT follow
 * symbolic links (two links to one directory are two projects) and does NOT require the directory to exist.
 */
export function defaultProjectId(cwd: string, platform: NodeJS.Platform = process.platform): string {
  const resolved = platform === "win32" ? path.win32.resolve(cwd).toLowerCase() : path.posix.resolve(cwd);
  return `p_${nodeCrypto().createHash("sha256").update(resolved, "utf8").digest("hex").slice(0, 16)}`;
}
