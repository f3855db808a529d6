/**
 * `serve`'s fleet settings and its liveness service (docs/FLEET.md): the recovery scan period, and for a PostgreSQL
 * store the liveness lock this server holds for its whole life (postgres-liveness.ts), taken before the server takes
 * any lease. For SQLite and host stores liveness stays same-host process liveness, unchanged.
 *
 * Wires only; the rules live in the adapters and the core.
 */
import type { StateLocation } from "../adapters/persistence/open-store.js";
import type { ProcessLiveness } from "../adapters/system/process-liveness.js";
import type { Logger, OwnerLiveness } from "../core/ports.js";
import { integerSetting, LIVENESS_FENCE_ENV, LIVENESS_PROBE_ENV, RECOVER_SCAN_ENV } from "./environment.js";

/** The flags these settings are read from (parseArgs options of `serve`). */
export const FLEET_OPTIONS = {
  "recover-scan-ms": { type: "string" },
  "liveness-probe-ms": { type: "string" },
  "liveness-fence-ms": { type: "string" },
} as const;

/** Defaults: a liveness probe a second, fenced after 5 s (the recovery scan runs once per lease renewal period). */
export const DEFAULT_LIVENESS_PROBE_MS = 1_000;
export const DEFAULT_LIVENESS_FENCE_MS = 5_000;

/** `serve --help` lines for these flags. */
export const FLEET_HELP = `  --recover-scan-ms N  period of the recovery scan (with --recover) and of the fallback check for forwarded
                       requests, in ms (default: $${RECOVER_SCAN_ENV}, else the lease renewal period, a third of the
                       lease lifetime); on PostgreSQL a dead server is noticed sooner, through its liveness lock
                       (docs/FLEET.md)
  --liveness-probe-ms N
                       PostgreSQL: how often this server confirms its own liveness lock and looks for released
                       ones, in ms (default: $${LIVENESS_PROBE_ENV}, else ${DEFAULT_LIVENESS_PROBE_MS})
  --liveness-fence-ms N
                       PostgreSQL: a server whose lock was not confirmed for this long stops its workers and starts
                       no work, in ms (default: $${LIVENESS_FENCE_ENV}, else ${DEFAULT_LIVENESS_FENCE_MS})
`;

export interface FleetSettings {
  recoverScanMs: number;
  probeMs: number;
  fenceMs: number;
}

/**
 * Reads the settings from the flags, else the environment, else the defaults (`renewMs`, the lease renewal period,
 * for the recovery scan). Throws UsageError on a bad value.
 */
export function fleetSettings(
  values: { [K in keyof typeof FLEET_OPTIONS]?: string | undefined },
  renewMs: number,
): FleetSettings {
  const setting = (flag: keyof typeof FLEET_OPTIONS, envName: string, fallback: number, min: number): number =>
    integerSetting("serve", { flag, flagValue: values[flag], envName, fallback, min, unit: "milliseconds" });
  const probeMs = setting("liveness-probe-ms", LIVENESS_PROBE_ENV, DEFAULT_LIVENESS_PROBE_MS, 100);
  return {
    recoverScanMs: setting("recover-scan-ms", RECOVER_SCAN_ENV, renewMs, 100),
    probeMs,
    // The fence bound must leave room for at least two probes.
    fenceMs: Math.max(2 * probeMs, setting("liveness-fence-ms", LIVENESS_FENCE_ENV, DEFAULT_LIVENESS_FENCE_MS, 200)),
  };
}

/** The liveness the server uses, and how to end it (after the leases were released). */
export interface ServeLiveness {
  liveness: OwnerLiveness;
  close(): Promise<void>;
}

/**
 * For a PostgreSQL store, takes this owner id's liveness lock (PostgresLiveness.open: throws AuthorityFailure when it
 * cannot, e.g. another process uses the same owner id) with same-host process liveness as its fallback; otherwise
 * the process liveness alone. `pg` is loaded only for a PostgreSQL store.
 */
export async function openServeLiveness(
  location: StateLocation,
  ownerId: string,
  processLiveness: ProcessLiveness,
  settings: FleetSettings,
  logger: Logger,
): Promise<ServeLiveness> {
  if (location.kind !== "postgres") return { liveness: processLiveness, close: async () => undefined };
  const { PostgresLiveness } = await import("../adapters/persistence/postgres-liveness.js");
  const liveness = await PostgresLiveness.open(location.url, {
    ownerId,
    fallback: processLiveness,
    probeMs: settings.probeMs,
    fenceMs: settings.fenceMs,
    onProblem: (message) => logger.warn({ ownerId }, `liveness: ${message}`),
  });
  return { liveness, close: () => liveness.close() };
}
