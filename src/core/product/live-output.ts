/**
 * Live output of running attempts (issue 29): the owner persists the tail of each running attempt's agent message and
 * tool-call deltas (what it sends as `product.taskOutputDelta` / `product.agentActivity`) as one bounded record per
 * task through the run-state authority, so that a process that does not own the product (the dashboard, `status`)
 * shows it while the attempt runs.
 *
 * Record kind `taskOutputChunk`, id `<productId>/<taskId>`: `{v: 1, productId, taskId, attempt, text, length, at}`,
 * `text` the last LIVE_OUTPUT_MAX_CHARS characters, `length` every character seen this attempt. The record is
 * replaced, never appended (storage stays bounded), written at most once per LIVE_OUTPUT_FLUSH_MS per task, deleted
 * when the attempt settles. It is not an event: replay never reads it (guarantee 7); the attempt's final output stays
 * in the journal as before. A failed write is logged and forgotten (live output is best effort). Never imports I/O.
 */
import * as z from "zod";
import { lazySchema } from "../../../protocol/lazy-schema.js";
import type { Clock, Logger, RunStateAuthority } from "../ports.js";
import { AuthorityConflict } from "../ports.js";
import { listRecordValues } from "../indexed-records.js";

/** The record kind of live output chunks. */
export const LIVE_OUTPUT_KIND = "taskOutputChunk";
/** Characters kept per attempt (UTF-16 code units): the tail; older text is dropped. */
export const LIVE_OUTPUT_MAX_CHARS = 16 * 1024;
/** Shortest interval between two writes of one task's record, ms. */
export const LIVE_OUTPUT_FLUSH_MS = 500;

/** One task's live output as stored. */
export const LiveOutputRecord = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      productId: z.string().min(1).max(200),
      taskId: z.string().min(1).max(200),
      attempt: z.number().int().min(0),
      text: z.string().max(LIVE_OUTPUT_MAX_CHARS),
      length: z.number().int().min(0),
      at: z.string().max(100),
    }),
  "LiveOutputRecord",
);
export type LiveOutputRecord = z.infer<typeof LiveOutputRecord>;

interface Pending {
  projectId: string;
  productId: string;
  taskId: string;
  attempt: number;
  text: string;
  length: number;
  dirty: boolean;
  cancelTimer?: () => void;
  lastWriteAt: number;
  revision: number | null | undefined;
  chain: Promise<void>;
  ended: boolean;
}

/** The owner's writer: coalesces deltas per task and writes the bounded tail. */
export class LiveOutputRecorder {
  readonly #pending = new Map<string, Pending>();
  #closed = false;

  constructor(
    private readonly authority: RunStateAuthority,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** `note` and `end` bound to one attempt of one task. */
  forTask(
    projectId: string,
    productId: string,
    taskId: string,
    attempt: number,
  ): { note(text: string): void; end(): void } {
    return {
      note: (text) => this.note(projectId, productId, taskId, attempt, text),
      end: () => this.end(productId, taskId),
    };
  }

  /** Adds `text` to the running attempt's output; the record is written within LIVE_OUTPUT_FLUSH_MS. */
  note(projectId: string, productId: string, taskId: string, attempt: number, text: string): void {
    if (text === "" || this.#closed) return;
    const key = `${productId}/${taskId}`;
    let p = this.#pending.get(key);
    if (p === undefined || p.attempt !== attempt || p.ended) {
      const chain = p?.chain ?? Promise.resolve();
      p = {
        projectId,
        productId,
        taskId,
        attempt,
        text: "",
        length: 0,
        dirty: false,
        lastWriteAt: 0,
        revision: undefined,
        chain,
        ended: false,
      };
      this.#pending.set(key, p);
    }
    const joined = p.text + text;
    p.text = joined.length > LIVE_OUTPUT_MAX_CHARS ? joined.slice(-LIVE_OUTPUT_MAX_CHARS) : joined;
    p.length += text.length;
    p.dirty = true;
    if (p.cancelTimer) return;
    const wait = Math.max(0, p.lastWriteAt + LIVE_OUTPUT_FLUSH_MS - this.clock.now());
    const entry = p;
    entry.cancelTimer = this.clock.setTimer(wait, () => {
      entry.cancelTimer = undefined;
      this.enqueue(entry, () => this.write(entry));
    });
  }

  /**
   * The attempt settled: pending text is dropped and the record deleted (the journal has the final output). Does
   * nothing after `close`.
   */
  end(productId: string, taskId: string): void {
    const key = `${productId}/${taskId}`;
    const p = this.#pending.get(key);
    // After close the authority may be closed: a record left behind names an attempt readers no longer show.
    if (p === undefined || this.#closed) return;
    p.cancelTimer?.();
    p.cancelTimer = undefined;
    p.ended = true;
    p.dirty = false;
    this.enqueue(p, async () => {
      await this.authority.delete(p.projectId, LIVE_OUTPUT_KIND, key);
      if (this.#pending.get(key) === p) this.#pending.delete(key);
    });
  }

  /**
   * Stops recording: text not yet written is dropped, and the writes and deletes already queued finish before it
   * resolves, so the owner may close the authority after it (a write timer firing after the close read a closed
   * authority and logged "live output not stored"). Notes after it are ignored. Idempotent; never rejects.
   */
  async close(): Promise<void> {
    this.#closed = true;
    for (const p of this.#pending.values()) {
      p.cancelTimer?.();
      p.cancelTimer = undefined;
      p.dirty = false;
    }
    await Promise.all([...this.#pending.values()].map((p) => p.chain));
  }

  private enqueue(p: Pending, fn: () => Promise<void>): void {
    p.chain = p.chain.then(fn).catch((err: unknown) => {
      this.logger.warn({ err, productId: p.productId, taskId: p.taskId }, "live output not stored");
    });
  }

  private async write(p: Pending): Promise<void> {
    if (!p.dirty || p.ended) return;
    p.dirty = false;
    p.lastWriteAt = this.clock.now();
    const id = `${p.productId}/${p.taskId}`;
    const value: LiveOutputRecord = {
      v: 1,
      productId: p.productId,
      taskId: p.taskId,
      attempt: p.attempt,
      text: p.text,
      length: p.length,
      at: new Date(p.lastWriteAt).toISOString(),
    };
    for (let tries = 0; ; tries++) {
      if (p.revision === undefined)
        p.revision = (await this.authority.get(p.projectId, LIVE_OUTPUT_KIND, id))?.revision ?? null;
      try {
        p.revision = (await this.authority.put(p.projectId, LIVE_OUTPUT_KIND, id, value, p.revision)).revision;
        return;
      } catch (err) {
        if (!(err instanceof AuthorityConflict) || tries > 0) throw err;
        p.revision = undefined;
      }
    }
  }
}

/**
 * The live output of a product's tasks as stored, by task id (readers; never writes). Records that do not parse are
 * skipped. The caller shows a record only while its task runs the same attempt.
 */
export async function readLiveOutput(
  authority: RunStateAuthority,
  projectId: string,
  productId: string,
): Promise<Map<string, LiveOutputRecord>> {
  const out = new Map<string, LiveOutputRecord>();
  for (const stored of await listRecordValues(authority, projectId, LIVE_OUTPUT_KIND, `${productId}/`)) {
    const parsed = LiveOutputRecord.safeParse(stored.value);
    if (parsed.success && parsed.data.productId === productId) out.set(parsed.data.taskId, parsed.data);
  }
  return out;
}
