/**
 * Settings that come from an option or, when it is absent, an environment variable (`--log-level` or
 * `ACP_ORCHESTRATOR_LOG_LEVEL`, ...). A bad value is a `UsageError` that names where it came from: the option when it
 * was given, else the environment variable.
 *
 * Owns the reading and checking of these values only; it never changes the environment.
 */
import type { LogLevel } from "../server/logger.js";
import { UsageError } from "../cli-kit/errors.js";

export const LOG_LEVEL_ENV = "ACP_ORCHESTRATOR_LOG_LEVEL";
export const HOST_TIMEOUT_ENV = "ACP_ORCHESTRATOR_HOST_TIMEOUT_MS";
/** The deadline of one git call that talks to a workspace remote, in ms (serve --remote-timeout-ms; issue 33). */
export const REMOTE_TIMEOUT_ENV = "ACP_ORCHESTRATOR_REMOTE_TIMEOUT_MS";
export const LEASE_TTL_ENV = "ACP_ORCHESTRATOR_LEASE_TTL_MS";
export const OWNER_ID_ENV = "ACP_ORCHESTRATOR_OWNER_ID";
export const RECOVER_SCAN_ENV = "ACP_ORCHESTRATOR_RECOVER_SCAN_MS";
export const LIVENESS_PROBE_ENV = "ACP_ORCHESTRATOR_LIVENESS_PROBE_MS";
export const LIVENESS_FENCE_ENV = "ACP_ORCHESTRATOR_LIVENESS_FENCE_MS";
export const HEAP_GROWTH_ENV = "ACP_ORCHESTRATOR_HEAP_GROWTH_PERCENT";

const LOG_LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

/** A value with where it came from, for messages. */
interface Sourced {
  text: string;
  source: string;
}

/** The option's value when given, else the environment variable's when set and non-empty. */
function pick(
  flag: string | undefined,
  flagValue: string | undefined,
  envName: string,
  env: NodeJS.ProcessEnv,
): Sourced | undefined {
  if (flag !== undefined && flagValue !== undefined) return { text: flagValue, source: `--${flag}` };
  const fromEnv = env[envName];
  if (fromEnv !== undefined && fromEnv !== "") return { text: fromEnv, source: `the environment variable ${envName}` };
  return undefined;
}

/**
 * The log level from `--log-level`, else `$ACP_ORCHESTRATOR_LOG_LEVEL`, else `fallback`.
 * Throws `UsageError` naming the option or the variable when the value is not a pino level.
 */
export function logLevelSetting(
  command: string,
  flagValue: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  fallback: LogLevel = "info",
): LogLevel {
  const picked = pick("log-level", flagValue, LOG_LEVEL_ENV, env);
  if (picked === undefined) return fallback;
  if (!(LOG_LEVELS as readonly string[]).includes(picked.text)) {
    throw new UsageError(
      `The log level "${picked.text}" from ${picked.source} is not one of ${LOG_LEVELS.join(", ")}.`,
      command,
    );
  }
  return picked.text as LogLevel;
}

/**
 * An integer setting from `--FLAG` (when `flag` is given), else `$ENVNAME`, else `fallback`.
 * Throws `UsageError` naming the option or the variable when the value is not a safe integer >= `min`.
 */
export function integerSetting(
  command: string,
  options: {
    flag?: string;
    flagValue?: string | undefined;
    envName: string;
    fallback: number;
    min: number;
    unit?: string;
  },
  env: NodeJS.ProcessEnv = process.env,
): number {
  const picked = pick(options.flag, options.flagValue, options.envName, env);
  if (picked === undefined) return options.fallback;
  const n = Number(picked.text);
  if (picked.text.trim() === "" || !Number.isSafeInteger(n) || n < options.min) {
    throw new UsageError(
      `The value "${picked.text}" from ${picked.source} must be an integer of at least ${options.min}${options.unit ? ` ${options.unit}` : ""}.`,
      command,
    );
  }
  return n;
}
