/**
 * ACP session records (PROTOCOL.md section 4): persisted through the run-state authority (project `_`, kind
 * `session`) so `session/load`, `session/resume` and `session/list` work after a restart; kept in memory while the
 * session is in use.
 *
 * Each write is compare-and-swap on the record's last revision, serialised per session. A record that does not parse
 * reads as unknown (`-32002`). Owns nothing about turns or products.
 */
import * as z from "zod";
import type { TaskStatus } from "../../../protocol/common.js";
import { notFound } from "../../core/errors.js";
import type { Clock, Logger, RunStateAuthority } from "../../core/ports.js";
import { MODE_IDS } from "./settings.js";
import { AttachmentRef, MAX_ATTACHMENTS_PER_PROMPT } from "./content.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";

/** The authority project that holds session records (sessions are looked up by id alone). */
const SESSION_PROJECT = "_";

export const SessionRecord = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      sessionId: z.string(),
      cwd: z.string(),
      /** ACP `additionalDirectories`: further roots of the session's file system (absolute, existing when given). */
      additionalDirectories: z.array(z.string()).max(64).optional(),
      projectId: z.string(),
      title: z.string().optional(),
      productId: z.string().optional(),
      /** The goal run the session's last goal-mode prompt or `/goal` started (the current work while set). */
      goalRunId: z.string().optional(),
      /** Version of the product's plan last shown to the user (a confirm word never runs a plan the user did not see). */
      shownPlanVersion: z.number().int().min(0).optional(),
      /** Set by `session/close`; a closed session takes no prompt until `session/load` or `session/resume` opens it. */
      closed: z.boolean().optional(),
      /** The session's mode (PROTOCOL.md section 4); absent in records written before modes existed = `confirm`. */
      modeId: z.enum(MODE_IDS).optional(),
      /** The session's config values; absent = the defaults at the time it is read. */
      config: z
        .object({
          leader: z.string(),
          parallelism: z.string(),
          isolation: z.enum(["worktree", "shared"]),
          integration: z.enum(["branch", "merge"]).optional(),
        })
        .optional(),
      createdAt: z.string(),
      updatedAt: z.string(),
      messages: z.array(
        z.object({
          role: z.enum(["user", "agent"]),
          text: z.string(),
          /** Images and binary resources of a user message, by reference (session/content.ts). */
          attachments: z.array(AttachmentRef).max(MAX_ATTACHMENTS_PER_PROMPT).optional(),
        }),
      ),
    }),
  "SessionRecord",
);
export type SessionRecord = z.infer<typeof SessionRecord>;

/** A session in memory. */
export interface LiveSession {
  record: SessionRecord;
  revision: number | null;
  /** Serialises writes of this record (each put is compare-and-swap on the previous revision). */
  saving: Promise<void>;
  /** Created, loaded, resumed or prompted through this connection and not closed: the client knows it. */
  open: boolean;
  /** Tasks of the current product already announced as `tool_call`s in this session, with the last status sent. */
  announced: Map<string, TaskStatus>;
  announcedFor: string | undefined;
}

/** Reads and writes session records. */
export class SessionStore {
  /** Sessions in memory, by id. */
  readonly live = new Map<string, LiveSession>();

  constructor(
    private readonly authority: RunStateAuthority,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  now(): string {
    return new Date(this.clock.now()).toISOString();
  }

  /** A new session in memory (not saved yet). */
  fresh(record: SessionRecord): LiveSession {
    return this.wrap(record, null);
  }

  private wrap(record: SessionRecord, revision: number | null): LiveSession {
    return { record, revision, saving: Promise.resolve(), open: false, announced: new Map(), announcedFor: undefined };
  }

  /**
   * Writes the record (serialised per session; each write is compare-and-swap on the last revision). `streaming`:
   * gives the text of an agent message still streaming (`""`: none), read when this write runs, after the writes
   * queued before it; that text is stored as the last message (the record in memory gets it when the stream ends,
   * and then `streaming` gives `""`: never stored twice), so a server killed mid-turn keeps what was said so far.
   */
  save(s: LiveSession, streaming: () => string = () => ""): Promise<void> {
    const run = async (): Promise<void> => {
      s.record.updatedAt = this.now();
      const text = streaming();
      const record =
        text === "" ? s.record : { ...s.record, messages: [...s.record.messages, { role: "agent" as const, text }] };
      const { revision } = await this.authority.put(SESSION_PROJECT, "session", s.record.sessionId, record, s.revision);
      s.revision = revision;
    };
    const next = s.saving.then(run, run);
    s.saving = next.catch(() => undefined);
    return next;
  }

  /** `save`, logging a failure instead of rejecting. */
  saveQuietly(s: LiveSession, streaming?: () => string): Promise<void> {
    return this.save(s, streaming).catch((err: unknown) =>
      this.logger.warn({ err, sessionId: s.record.sessionId }, "could not save the session"),
    );
  }

  /** The session, read from the authority on first use. Throws not_found for an unknown or unreadable record. */
  async get(sessionId: string): Promise<LiveSession> {
    const cached = this.live.get(sessionId);
    if (cached) return cached;
    const rec = await this.authority.get(SESSION_PROJECT, "session", sessionId);
    const parsed = rec ? SessionRecord.safeParse(rec.value) : undefined;
    if (!rec || !parsed?.success) throw notFound("session", sessionId);
    const again = this.live.get(sessionId);
    if (again) return again;
    const s = this.wrap(parsed.data, rec.revision);
    this.live.set(sessionId, s);
    return s;
  }

  /** Every readable session record, newest first, optionally only those of `cwd`. */
  async list(cwd: string | undefined): Promise<SessionRecord[]> {
    const infos = await this.authority.list(SESSION_PROJECT, "session");
    const records: SessionRecord[] = [];
    for (const info of infos) {
      let record = this.live.get(info.id)?.record;
      if (!record) {
        const rec = await this.authority.get(SESSION_PROJECT, "session", info.id);
        const parsed = rec ? SessionRecord.safeParse(rec.value) : undefined;
        if (!parsed?.success) continue;
        record = parsed.data;
      }
      if (cwd !== undefined && record.cwd !== cwd) continue;
      records.push(record);
    }
    records.sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0));
    return records;
  }

  /** Forgets the session in memory and deletes its record; an unknown id is not an error. */
  async delete(sessionId: string): Promise<void> {
    const s = this.live.get(sessionId);
    this.live.delete(sessionId);
    if (s) await s.saving;
    await this.authority.delete(SESSION_PROJECT, "session", sessionId);
  }
}
