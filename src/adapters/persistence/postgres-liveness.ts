/**
 * Liveness through PostgreSQL (issue 32; docs/FLEET.md has the safety argument): each server holds, for its whole
 * life, a session-level advisory lock keyed by its lease owner id, on a dedicated connection; PostgreSQL releases it
 * by itself when that session ends — the server process died (its socket closes at once), its connection was
 * terminated, or the database's TCP keepalives / `tcp_user_timeout` gave up on a partitioned client.
 *
 * Owns that connection, the lock, and one probe per period (default once a second) on the same connection: the set
 * of advisory locks held in the database (`pg_locks`), which tells this server both that its own lock is still held
 * and which other owners' locks disappeared. From it:
 * - `check(owner)`: `dead` when an owner's lock was seen held by this process and is free in a fresh probe (at most
 *   1.5 probe periods old); `alive` while it is held; otherwise the fallback's verdict (same-host process liveness);
 * - `fresh()`: a probe now unless the last one was sent within half a period, so the verdict a takeover rests on is
 *   recent however long the steps before it took (issue 32);
 * - `selfLive()`: false from the moment the connection fails, the lock is found missing, or no probe answered within
 *   the fence bound (`fenceMs`), until the lock is taken again on a new connection and two probe periods passed;
 * - events: `ownersGone` on the probe that saw a lock disappear (and the next two, in case a takeover raced a last
 *   renewal), `selfLost`, `selfBack`.
 *
 * It never writes a record, never takes the lock of another owner id, and after losing its lock waits three probe
 * periods before taking it again (so the other servers see it free first). `check` and `selfLive` never throw.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import {
  AuthorityFailure,
  type OwnerLiveness,
  type OwnerLivenessEvent,
  type OwnerLivenessVerdict,
} from "../../core/ports.js";
import { DEFAULT_POSTGRES_SCHEMA } from "./postgres-schema.js";
import { messageOf } from "./authority-checks.js";
import { positive } from "./postgres-text.js";
import { parsePostgresUrl, redact } from "./postgres-url.js";

export interface PostgresLivenessOptions {
  /** This server's lease owner id: its lock is keyed by it (with the schema). */
  ownerId: string;
  /** The PostgreSQL schema of the store (a `schema` query parameter of the URL wins), default `acp_orchestrator`. */
  schema?: string;
  /** Verdicts where the database proves nothing (e.g. ProcessLiveness: same host, process gone). */
  fallback?: OwnerLiveness;
  /** Probe period, ms. Default 1000. */
  probeMs?: number;
  /** This server fences itself when no probe confirmed its lock for this long, ms. Default 5000. */
  fenceMs?: number;
  /**
   * After how many seconds without a packet the database starts probing this server's liveness connection (TCP
   * keepalives: then every second, three times) and gives up on unacknowledged data (`tcp_user_timeout`). Must stay
   * above `fenceMs` plus the agents' cancellation grace (docs/FLEET.md). Default 10.
   */
  serverTimeoutS?: number;
  /** Longest to wait for the connection, ms. Default 10000. */
  connectionTimeoutMs?: number;
  /** Where losses and reconnections are reported. Default: ignored. */
  onProblem?: (message: string) => void;
  /** Source of time, ms. Default `Date.now`. */
  now?: () => number;
}

/** The probe: every advisory lock on one bigint key granted in this database. */
const PROBE_SQL = `SELECT ((classid::bigint << 32) | objid::bigint)::text AS k FROM pg_locks
  WHERE locktype = 'advisory' AND objsubid = 1 AND granted
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`;

/** How many owner keys this process remembers having seen held (a fleet restarting for months stays far below). */
const MAX_SEEN = 100_000;

/** The advisory lock key of `ownerId` in `schema`: 63 bits of a SHA-256, as decimal text (a PostgreSQL bigint). */
export function livenessKey(schema: string, ownerId: string): string {
  const digest = createHash("sha256").update(`acp-orchestrator-liveness\u0000${schema}\u0000${ownerId}`).digest();
  return (digest.readBigUInt64BE(0) & 0x7fff_ffff_ffff_ffffn).toString();
}

export class PostgresLiveness implements OwnerLiveness {
  readonly ownerId: string;
  readonly #key: string;
  readonly #schema: string;
  readonly #connectionString: string;
  readonly #o: Required<
    Pick<PostgresLivenessOptions, "probeMs" | "fenceMs" | "serverTimeoutS" | "connectionTimeoutMs">
  >;
  readonly #fallback: OwnerLiveness | undefined;
  readonly #onProblem: (message: string) => void;
  readonly #now: () => number;
  readonly #listeners = new Set<(event: OwnerLivenessEvent) => void>();
  readonly #seen = new Set<string>();
  readonly #keys = new Map<string, string>();
  #client: pg.Client | null = null;
  /** Send time of the last probe that found this server's lock held (0: none on this connection). */
  #confirmedAt = 0;
  /** This server counts as live only from this time on (two probe periods after taking the lock again). */
  #liveFrom = 0;
  #reported = false;
  #snapshot: { atMs: number; keys: ReadonlySet<string> } | null = null;
  #goneProbes = 0;
  /** The probe in flight, if any (joined by `fresh`). */
  #probing: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #fence: NodeJS.Timeout | null = null;
  #closed = false;

  private constructor(connectionString: string, schema: string, options: PostgresLivenessOptions) {
    this.ownerId = options.ownerId;
    this.#schema = schema;
    this.#key = livenessKey(schema, options.ownerId);
    this.#connectionString = connectionString;
    this.#o = {
      probeMs: positive(options.probeMs ?? 1_000, "probeMs"),
      fenceMs: positive(options.fenceMs ?? 5_000, "fenceMs"),
      serverTimeoutS: positive(options.serverTimeoutS ?? 10, "serverTimeoutS"),
      connectionTimeoutMs: positive(options.connectionTimeoutMs ?? 10_000, "connectionTimeoutMs"),
    };
    this.#fallback = options.fallback;
    this.#onProblem = options.onProblem ?? (() => undefined);
    this.#now = options.now ?? Date.now;
  }

  /**
   * Connects to `url`, takes this owner id's lock and probes once; resolves when this server is live. Throws
   * `AuthorityFailure` with one plain sentence when the database cannot be reached or another session already holds
   * the lock (two processes with one owner id: each must have its own, guarantee 6).
   */
  static async open(url: string, options: PostgresLivenessOptions): Promise<PostgresLiveness> {
    const { connectionString, schema } = parsePostgresUrl(url, options.schema, DEFAULT_POSTGRES_SCHEMA);
    const liveness = new PostgresLiveness(connectionString, schema, options);
    try {
      if (!(await liveness.#connect())) {
        throw new AuthorityFailure(
          `Another process holds the liveness lock of owner id "${options.ownerId}" in ${redact(url)}: ` +
            "every server needs its own owner id.",
        );
      }
    } catch (error) {
      await liveness.close();
      if (error instanceof AuthorityFailure) throw error;
      throw new AuthorityFailure(`Cannot open the PostgreSQL liveness connection ${redact(url)}: ${messageOf(error)}`, {
        cause: error,
      });
    }
    liveness.#liveFrom = liveness.#now();
    await liveness.#probe();
    liveness.#schedule(liveness.#o.probeMs);
    return liveness;
  }

  /** The PostgreSQL schema the lock keys belong to. */
  get schema(): string {
    return this.#schema;
  }

  check(ownerId: string): OwnerLivenessVerdict {
    const fallback = this.#fallback?.check(ownerId) ?? "unknown";
    if (fallback === "dead" || ownerId === this.ownerId) return fallback;
    const snapshot = this.#snapshot;
    if (snapshot === null || !this.selfLive() || this.#now() - snapshot.atMs > 1.5 * this.#o.probeMs) return fallback;
    const key = this.#keyOf(ownerId);
    if (snapshot.keys.has(key)) return "alive";
    return this.#seen.has(key) ? "dead" : fallback;
  }

  selfLive(): boolean {
    const now = this.#now();
    return (
      !this.#closed &&
      this.#client !== null &&
      this.#confirmedAt > 0 &&
      now - this.#confirmedAt < this.#o.fenceMs &&
      now >= this.#liveFrom
    );
  }

  async fresh(): Promise<void> {
    const snapshot = this.#snapshot;
    if (snapshot !== null && this.#now() - snapshot.atMs <= this.#o.probeMs / 2) return;
    // The probe in flight was sent before this call: it may already be too old when it answers, so run one after it.
    if (this.#probing) await this.#probing;
    const after = this.#snapshot;
    if (after !== null && this.#now() - after.atMs <= this.#o.probeMs / 2) return;
    await this.#probe();
  }

  watch(listener: (event: OwnerLivenessEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** Ends the connection (PostgreSQL releases the lock) and stops probing. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#listeners.clear();
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#fence) clearTimeout(this.#fence);
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => undefined);
  }

  // -------------------------------------------------------------------------------------------------------------

  /** Opens a connection and tries the lock on it; true when held (the client is kept), false when not. */
  async #connect(): Promise<boolean> {
    const s = this.#o.serverTimeoutS;
    const client = new pg.Client({
      connectionString: this.#connectionString,
      connectionTimeoutMillis: this.#o.connectionTimeoutMs,
      application_name: "acp-orchestrator-liveness",
      keepAlive: true,
      keepAliveInitialDelayMillis: 1_000,
      // The database's side of the connection: when this server is partitioned away, the backend (and the lock) goes
      // after s seconds of silence plus three one-second keepalive probes, or s seconds of unacknowledged data.
      options: `-c tcp_keepalives_idle=${s} -c tcp_keepalives_interval=1 -c tcp_keepalives_count=3 -c tcp_user_timeout=${s * 1000} -c statement_timeout=${this.#o.fenceMs}`,
    });
    client.on("error", (error) => this.#lost(client, `the liveness connection failed: ${error.message}`));
    client.on("end", () => this.#lost(client, "the liveness connection ended"));
    await client.connect();
    const locked = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1::bigint) AS ok", [this.#key]);
    if (locked.rows[0]?.ok !== true) {
      await client.end().catch(() => undefined);
      return false;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return false;
    }
    this.#client = client;
    this.#confirmedAt = 0;
    return true;
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.#tick();
    }, ms);
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    if (this.#client === null) {
      try {
        if (await this.#connect()) {
          // Taken again: live only once every other server's verdict about this owner id was refreshed.
          this.#liveFrom = this.#now() + 2 * this.#o.probeMs;
          this.#onProblem("the liveness lock is held again");
        }
      } catch (error) {
        this.#onProblem(`cannot take the liveness lock again yet: ${messageOf(error)}`);
      }
      this.#schedule(this.#client === null ? 3 * this.#o.probeMs : 0);
      return;
    }
    await this.#probe();
    this.#schedule(this.#o.probeMs);
  }

  /** One probe on the liveness connection (joins the one in flight: the fence timer covers a stall). Never throws. */
  #probe(): Promise<void> {
    if (this.#probing) return this.#probing;
    const client = this.#client;
    if (client === null) return Promise.resolve();
    this.#probing = this.#probeOn(client).finally(() => {
      this.#probing = null;
    });
    return this.#probing;
  }

  async #probeOn(client: pg.Client): Promise<void> {
    const sentAt = this.#now();
    try {
      const result = await client.query<{ k: string }>(PROBE_SQL);
      if (client !== this.#client) return;
      const keys = new Set(result.rows.map((row) => row.k));
      if (!keys.has(this.#key)) {
        this.#lost(client, "the liveness lock is no longer held by this server");
        return;
      }
      const before = this.#snapshot?.keys;
      if (before && [...before].some((k) => !keys.has(k))) this.#goneProbes = 3;
      this.#snapshot = { atMs: sentAt, keys };
      for (const k of keys) if (this.#seen.size < MAX_SEEN) this.#seen.add(k);
      this.#confirmedAt = sentAt;
      this.#armFence();
      if (!this.#reported && this.selfLive()) {
        this.#reported = true;
        this.#emit({ kind: "selfBack" });
      }
      if (this.#goneProbes > 0) {
        this.#goneProbes -= 1;
        this.#emit({ kind: "ownersGone" });
      }
    } catch (error) {
      this.#lost(client, `the liveness probe failed: ${messageOf(error)}`);
    }
  }

  /** Fences this server when the next confirmation does not come within `fenceMs` of the last one's sending. */
  #armFence(): void {
    if (this.#fence) clearTimeout(this.#fence);
    const client = this.#client;
    const left = this.#confirmedAt + this.#o.fenceMs - this.#now();
    this.#fence = setTimeout(
      () => {
        this.#fence = null;
        // Decide after the event loop's I/O phase: a probe answer that arrived with the timer is counted first.
        setImmediate(() => {
          if (client === null || client !== this.#client) return;
          if (this.#now() - this.#confirmedAt < this.#o.fenceMs) this.#armFence();
          else this.#lost(client, `no liveness probe answered within ${this.#o.fenceMs} ms`);
        });
      },
      Math.max(0, left),
    );
    this.#fence.unref();
  }

  /** The connection `client` is no good any more: drop it, fence, and try again three probe periods later. */
  #lost(client: pg.Client, why: string): void {
    if (client !== this.#client) return;
    this.#client = null;
    this.#confirmedAt = 0;
    this.#snapshot = null;
    if (this.#fence) clearTimeout(this.#fence);
    // Not awaited: on a partitioned network ending the connection may take as long as TCP does.
    client.end().catch(() => undefined);
    if (this.#closed) return;
    this.#onProblem(why);
    if (this.#reported) {
      this.#reported = false;
      this.#emit({ kind: "selfLost" });
    }
    this.#schedule(3 * this.#o.probeMs);
  }

  #emit(event: OwnerLivenessEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // listeners must not throw; one that does cannot stop the others
      }
    }
  }

  #keyOf(ownerId: string): string {
    let key = this.#keys.get(ownerId);
    if (key === undefined) {
      key = livenessKey(this.#schema, ownerId);
      if (this.#keys.size >= MAX_SEEN) this.#keys.clear();
      this.#keys.set(ownerId, key);
    }
    return key;
  }
}
