/**
 * The PostgreSQL change feed (`LISTEN/NOTIFY`): how a write is announced to the other servers on one database and
 * schema, and the dedicated connection that hears the other servers' announcements (postgres-authority.ts `watch`).
 *
 * Owns the channel name, the payload format (short keys, at most 8000 bytes: longer keys are announced without their
 * id), the choice of which writes are announced (`announce`), and the `LISTEN` connection with its reconnection. It
 * never delivers a change to the writer that made it, never lets a listener's exception stop the others, and never
 * replays changes made while it was disconnected (callers keep their periodic checks).
 */
import pg from "pg";
import type { AuthorityChange } from "../../core/ports.js";

/** `NOTIFY` channel of the change feed. */
const CHANNEL = "acp_orchestrator_changes";

/** PostgreSQL limits a NOTIFY payload to 8000 bytes; changes with longer keys are announced without their id. */
const MAX_PAYLOAD_BYTES = 7_900;

/** The wire payload of one change on the channel (short keys: it travels with every write). */
interface ChangePayload {
  /** Writer: the `writerId` of the authority that made the change. */
  w: string;
  /** Schema, so two schemas on one database do not hear each other. */
  n: string;
  p: string;
  k?: string;
  i?: string;
  s?: string;
  /** 1 when the record was deleted. */
  d?: 1;
}

/** The change a write announces: project, and either a record's kind and id or a stream. */
export type AnnouncedChange = Omit<ChangePayload, "w" | "n">;

/**
 * Decides whether a write is announced (PostgresAuthorityOptions.announce): the record's `kind` or the `stream`, and
 * `created` when the write is a put that creates the record (compare-and-swap on "does not exist").
 */
export type AnnounceFilter = (change: { kind?: string; stream?: string; created?: true }) => boolean;

export interface ChangeFeedOptions {
  connectionString: string;
  connectionTimeoutMs: number;
  schema: string;
  /** The writer id of the authority that owns this feed: its own writes are not delivered back to it. */
  writerId: string;
  /** Which writes are announced; default every one (PostgresAuthorityOptions.announce). */
  announce?: AnnounceFilter;
  /** Where connection problems are reported (the feed reconnects by itself). */
  onFeedError?: (error: Error) => void;
}

/** The announcing side (a SQL fragment for a write statement) and the listening side of the change feed. */
export class ChangeFeed {
  readonly #o: ChangeFeedOptions;
  readonly #listeners = new Set<(change: AuthorityChange) => void>();
  #client: pg.Client | null = null;
  #starting: Promise<void> | null = null;
  #retry: NodeJS.Timeout | null = null;
  #closed = false;

  constructor(options: ChangeFeedOptions) {
    this.#o = options;
  }

  /**
   * A `pg_notify` call announcing one change (delivered only if the surrounding transaction commits), with its
   * payload as parameter number `index` of the statement, and the suffix of a prepared statement's name; a change
   * that `announce` leaves out (`created`: the write creates the record), or any with `quiet`, gets a column that
   * sends nothing (suffix `-quiet`).
   */
  notifySql(
    change: AnnouncedChange,
    index: number,
    options: { quiet?: boolean; created?: boolean } = {},
  ): { sql: string; params: string[]; name: string } {
    const announce = this.#o.announce;
    if (
      options.quiet === true ||
      (announce &&
        !announce({
          ...(change.k !== undefined ? { kind: change.k } : {}),
          ...(change.s !== undefined ? { stream: change.s } : {}),
          ...(options.created === true ? { created: true as const } : {}),
        }))
    ) {
      // The parameter stays (typed, unused) so the statement keeps its shape; a prepared one gets its own name.
      return { sql: `$${index}::text AS unannounced`, params: [""], name: "-quiet" };
    }
    const { writerId: w, schema: n } = this.#o;
    let text = JSON.stringify({ w, n, ...change } satisfies ChangePayload);
    if (Buffer.byteLength(text) > MAX_PAYLOAD_BYTES) {
      const short: ChangePayload = { w, n, p: change.p.slice(0, 1000) };
      if (change.k !== undefined) short.k = change.k.slice(0, 1000);
      if (change.d !== undefined) short.d = change.d;
      text = JSON.stringify(short);
    }
    return { sql: `pg_notify('${CHANNEL}', $${index}::text)`, params: [text], name: "" };
  }

  /** Adds a listener (opening the LISTEN connection when it is the first); returns the unsubscribe function. */
  watch(listener: (change: AuthorityChange) => void): () => void {
    this.#listeners.add(listener);
    this.#ensure();
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** Resolves once the LISTEN connection is up (or the feed is closed). */
  async ready(): Promise<void> {
    this.#ensure();
    while (this.#client === null && !this.#closed) {
      await (this.#starting ?? new Promise((resolve) => setTimeout(resolve, 50)));
    }
  }

  /** Ends the LISTEN connection and forgets every listener. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#listeners.clear();
    if (this.#retry) clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => undefined);
  }

  /** Opens the LISTEN connection when someone listens and none is open; retries after errors. */
  #ensure(): void {
    if (this.#closed || this.#client !== null || this.#starting !== null || this.#listeners.size === 0) return;
    this.#starting = this.#start().finally(() => {
      this.#starting = null;
    });
  }

  async #start(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.#o.connectionString,
      connectionTimeoutMillis: this.#o.connectionTimeoutMs,
      application_name: "acp-orchestrator-feed",
      keepAlive: true,
    });
    const retry = (error: Error): void => {
      if (this.#client === client) this.#client = null;
      client.end().catch(() => undefined);
      if (this.#closed) return;
      this.#o.onFeedError?.(error);
      if (this.#retry === null) {
        this.#retry = setTimeout(() => {
          this.#retry = null;
          this.#ensure();
        }, 1_000);
        this.#retry.unref();
      }
    };
    client.on("error", retry);
    client.on("end", () => {
      if (this.#client === client) retry(new Error("the change feed connection ended"));
    });
    client.on("notification", (message) => this.#deliver(message.payload));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      if (this.#closed) {
        await client.end();
        return;
      }
      this.#client = client;
    } catch (error) {
      retry(error instanceof Error ? error : new Error(String(error)));
    }
  }

  #deliver(text: string | undefined): void {
    if (text === undefined) return;
    let payload: ChangePayload;
    try {
      payload = JSON.parse(text) as ChangePayload;
    } catch {
      return;
    }
    if (payload.w === this.#o.writerId || payload.n !== this.#o.schema || typeof payload.p !== "string") return;
    const change: AuthorityChange =
      payload.s !== undefined
        ? { projectId: payload.p, stream: payload.s }
        : {
            projectId: payload.p,
            ...(payload.k !== undefined ? { kind: payload.k } : {}),
            ...(payload.i !== undefined ? { id: payload.i } : {}),
            ...(payload.d === 1 ? { deleted: true as const } : {}),
          };
    for (const listener of this.#listeners) {
      try {
        listener(change);
      } catch {
        // listeners must not throw; one that does cannot stop the others
      }
    }
  }
}
