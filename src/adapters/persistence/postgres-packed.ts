/**
 * The packed form of an event row (PostgreSQL schema version 4, issue 34: WAL bytes per task): the texts of one
 * append compressed together by this process before they are sent, into the row's `packed` (`bytea`).
 *
 * PostgreSQL compresses a value only once its row passes about 2 KB (`TOAST_TUPLE_THRESHOLD`; a lower
 * `toast_tuple_target` does not start it earlier), so the rows of a commit of a few tasks (1-2 KB of JSON) went to
 * the WAL as they were; and its lz4 starts every value from nothing. A packed row is raw DEFLATE (RFC 1951, node's
 * zlib) primed with a preset dictionary of the text product and goal-run events repeat (their keys and the shapes of
 * their values), so even one event shrinks to about a third and a batch to about a sixth.
 *
 * Layout: byte 0 is the format (1 = raw DEFLATE with `DICTIONARY_1`); the rest inflates to the UTF-8 texts joined by
 * `\n`. A text packs only when it holds no `\n` and no lone surrogate (JSON.stringify writes neither, so every text
 * this server appends packs); `packTexts` answers `null` otherwise and the caller stores the plain text form.
 * Released formats never change: another dictionary or layout is another format byte, and every reader keeps
 * reading the old ones.
 */
import { promisify } from "node:util";
import { deflateRaw, deflateRawSync, inflateRawSync } from "node:zlib";
import { AuthorityFailure } from "../../core/ports.js";

/** Format byte of `DICTIONARY_1` rows. */
const FORMAT_1 = 1;

/**
 * The preset dictionary of format 1: fragments of the events and records the product and goal journals write (the
 * most frequent last: DEFLATE reaches the end of the dictionary with the shortest distances). Frozen with the
 * format: changing one byte makes every stored row of format 1 unreadable.
 */
const DICTIONARY_1 = Buffer.from(
  [
    '"type":"created","name":"","goal":"","cwd":"","maxParallelTasks":,"sessionId":"","leaderAgentId":"",',
    '"allowedAgents":[],"type":"dialogue","role":"leader","role":"user","text":"","outcome":true,',
    '"type":"planProposed","plan":{"tasks":[{"id":"","title":"","description":"","dependsOn":[],"agent":"",',
    '"instances":[{"id":"","agent":"","name":""}]},"type":"planFailed","error":"","type":"asked","questions":',
    '[{"question":"","options":[]}],"type":"confirmed","fingerprint":{"plan":"pl1:","agents":"ag1:"},',
    '"type":"phase","phase":"executing","recovery":null},"type":"phase","phase":"completed","recovery":null}',
    '"type":"mutated","mutations":[],"by":"leader","type":"elapsed","elapsedMs":,"type":"budgetAdded",',
    '"budget":{"type":"budgetWarned","reason":"","type":"restored","tasks":[],"type":"fingerprint",',
    '"acknowledged":[],"status":"failed","error":"","status":"cancelled","status":"pending","attempts":0,',
    '"changedFiles":[],"commit":"","integrationHead":"","merged":[],"seq":,',
    '{"v":1,"at":"2026-01-01T00:00:00.000Z","type":"checkpoint","checkpointId":"ckp_","completed":,"total":}',
    '{"v":1,"at":"2026-01-01T00:00:00.000Z","type":"usage","taskId":"t","inputTokens":,"outputTokens":,',
    '"estimated":true}{"v":1,"at":"2026-01-01T00:00:00.000Z","type":"usage","taskId":"","inputTokens":',
    '{"v":1,"at":"2026-01-01T00:00:00.000Z","type":"task","task":{"taskId":"","title":"","description":"",',
    '"instanceId":"","dependsOn":[""],"status":"completed","attempts":1,"startedAt":"2026-01-01T00:00:00.000Z",',
    '"endedAt":"2026-01-01T00:00:00.000Z","output":""},"inputHash":"ti1:"}',
    '{"v":1,"at":"2026-01-01T00:00:00.000Z","type":"task","task":{"taskId":"t","title":"Task ","description":"',
    '","instanceId":"w","dependsOn":["t"],"status":"running","attempts":1,"startedAt":"2026-01-01T00:00:00.000Z"}}',
  ].join(""),
  "latin1",
);

const deflateRawAsync = promisify(deflateRaw);

/**
 * Bodies up to this many bytes are compressed on the event loop, larger ones on the thread pool. Measured on this
 * project's 2-core machine (issue 32, figure 9): a commit's body of 0.4-7 KB costs about 15-50 µs of CPU compressed
 * in place and about 450 µs through the thread pool (a zlib stream object, its handle, the hand-off and the
 * callback), which was a third of a fleet server's CPU per task; 64 KB compress in about 1 ms, the longest pause
 * this allows the event loop.
 */
const SYNC_LIMIT = 64 * 1024;

/**
 * zlib's sizes for packing: a 4 KB window holds the dictionary (1.7 KB) and the start of the body, and a smaller
 * hash table means less memory to set up per call; the bodies came out no larger than with the defaults (32 KB, 8)
 * for 1-100 task events. Any window up to 32 KB inflates with the reader's default settings: the format is the same.
 */
const DEFLATE_OPTIONS = { windowBits: 12, memLevel: 5 } as const;

/** A UTF-16 code unit of a surrogate pair standing alone (UTF-8 cannot carry it; the `u` flag reads pairs whole). */
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * The packed form of `texts` (at least one): resolves with the bytes to store in `packed`, or `null` when a text
 * holds `\n` or a lone surrogate (store the plain form then). Compresses on the event loop up to `SYNC_LIMIT`
 * bytes, on the thread pool above.
 */
export async function packTexts(texts: readonly string[]): Promise<Buffer | null> {
  for (const text of texts) if (text.includes("\n") || LONE_SURROGATE.test(text)) return null;
  const raw = Buffer.from(texts.join("\n"), "utf8");
  const options = { ...DEFLATE_OPTIONS, dictionary: DICTIONARY_1 };
  const body = raw.length <= SYNC_LIMIT ? deflateRawSync(raw, options) : await deflateRawAsync(raw, options);
  return Buffer.concat([Buffer.of(FORMAT_1), body]);
}

/**
 * The `n` texts of a packed row, oldest first. Throws `AuthorityFailure` (one sentence) for an unknown format, bytes
 * that do not inflate, or a count other than `n`: a damaged row fails closed rather than yielding other events.
 */
export function unpackTexts(packed: Buffer, n: number): string[] {
  if (packed[0] !== FORMAT_1) {
    throw new AuthorityFailure(`A packed event row has format ${String(packed[0])}, which this server cannot read.`);
  }
  let text: string;
  try {
    text = inflateRawSync(packed.subarray(1), { dictionary: DICTIONARY_1 }).toString("utf8");
  } catch (error) {
    throw new AuthorityFailure("A packed event row does not decompress: the stored bytes are damaged.", {
      cause: error,
    });
  }
  const texts = text.split("\n");
  if (texts.length !== n) {
    throw new AuthorityFailure(`A packed event row holds ${texts.length} events where its count says ${n}.`);
  }
  return texts;
}
