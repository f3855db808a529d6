/**
 * zod schemas of the server → host `runState/*` requests and their results (PROTOCOL.md section 7).
 *
 * Params are what this server sends: strict, so a field the protocol does not name is a bug caught in tests.
 * Results come from the host and are untrusted: stored values and events are `unknown` here, because the caller
 * validates each record against its own versioned schema and skips (counts) the ones that fail (DESIGN.md
 * guarantee 4) — one bad record must not fail the whole answer. This file must never import anything but zod and
 * common.ts.
 */
import * as z from "zod";
import { Count, Id, Timestamp } from "./common.js";
import { lazySchema } from "./lazy-schema.js";

/** A JSON object the server versions itself; the host stores it opaquely. */
export const JsonObject = lazySchema(() => z.record(z.string(), z.unknown()), "JsonObject");

/** A record kind (`product`, `checkpoint`, …); chosen by the server. */
export const RecordKind = lazySchema(() => z.string().min(1).max(100), "RecordKind");

/** An event stream name; chosen by the server. */
export const StreamName = lazySchema(() => z.string().min(1).max(300), "StreamName");

/** A record id; chosen by the server (may be composite, so longer than a wire `Id`). */
export const RecordId = lazySchema(() => z.string().min(1).max(1_000), "RecordId");

/** A record revision: monotonic per record, starting at 1 on creation. */
export const Revision = lazySchema(() => z.number().int().min(1).max(Number.MAX_SAFE_INTEGER), "Revision");

const recordAddress = () => ({ projectId: Id, kind: RecordKind, id: RecordId });

export const RunStateGetParams = lazySchema(() => z.strictObject(recordAddress()), "RunStateGetParams");
export type RunStateGetParams = z.infer<typeof RunStateGetParams>;

export const StoredRecordWire = lazySchema(
  () => z.object({ value: z.unknown(), revision: Revision, updatedAt: Timestamp }),
  "StoredRecordWire",
);
export const RunStateGetResult = lazySchema(
  () => z.object({ record: StoredRecordWire.nullable() }),
  "RunStateGetResult",
);
export type RunStateGetResult = z.infer<typeof RunStateGetResult>;

/** `expectedRevision: null` means the record must not exist yet; a mismatch is answered with `-32012`. */
export const RunStatePutParams = lazySchema(
  () =>
    z.strictObject({
      ...recordAddress(),
      value: JsonObject,
      expectedRevision: Revision.nullable(),
    }),
  "RunStatePutParams",
);
export type RunStatePutParams = z.infer<typeof RunStatePutParams>;

export const RunStatePutResult = lazySchema(() => z.object({ revision: Revision }), "RunStatePutResult");
export type RunStatePutResult = z.infer<typeof RunStatePutResult>;

export const RunStateDeleteParams = lazySchema(
  () => z.strictObject({ ...recordAddress(), expectedRevision: Revision.optional() }),
  "RunStateDeleteParams",
);
export type RunStateDeleteParams = z.infer<typeof RunStateDeleteParams>;

export const RunStateDeleteResult = lazySchema(() => z.object({ deleted: z.boolean() }), "RunStateDeleteResult");
export type RunStateDeleteResult = z.infer<typeof RunStateDeleteResult>;

export const RunStateListParams = lazySchema(
  () =>
    z.strictObject({
      projectId: Id,
      kind: RecordKind,
      /** Only ids that start with this prefix. */
      prefix: z.string().optional(),
    }),
  "RunStateListParams",
);
export type RunStateListParams = z.infer<typeof RunStateListParams>;

export const RecordInfoWire = lazySchema(
  () => z.object({ id: RecordId, revision: Revision, updatedAt: Timestamp }),
  "RecordInfoWire",
);
/** Ordered by id. */
export const RunStateListResult = lazySchema(
  () => z.object({ records: z.array(RecordInfoWire) }),
  "RunStateListResult",
);
export type RunStateListResult = z.infer<typeof RunStateListResult>;

/** Succeeds only when the stream's last sequence number equals `expectedSeq` (0 for a new stream), else `-32012`. */
export const RunStateAppendEventsParams = lazySchema(
  () =>
    z.strictObject({
      projectId: Id,
      stream: StreamName,
      events: z.array(JsonObject),
      expectedSeq: Count,
    }),
  "RunStateAppendEventsParams",
);
export type RunStateAppendEventsParams = z.infer<typeof RunStateAppendEventsParams>;

export const RunStateAppendEventsResult = lazySchema(() => z.object({ lastSeq: Count }), "RunStateAppendEventsResult");
export type RunStateAppendEventsResult = z.infer<typeof RunStateAppendEventsResult>;

/** Events with `seq > afterSeq`, oldest first; at most `limit` of them when given. */
export const RunStateReadEventsParams = lazySchema(
  () =>
    z.strictObject({
      projectId: Id,
      stream: StreamName,
      afterSeq: Count,
      limit: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
    }),
  "RunStateReadEventsParams",
);
export type RunStateReadEventsParams = z.infer<typeof RunStateReadEventsParams>;

/** `seq` is 1-based within the stream. */
export const StoredEventWire = lazySchema(
  () =>
    z.object({
      seq: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
      event: z.unknown(),
    }),
  "StoredEventWire",
);
/** In `seq` order; `more: true` when the stream has events after the last one returned (ask again after it). */
export const RunStateReadEventsResult = lazySchema(
  () => z.object({ events: z.array(StoredEventWire), more: z.boolean() }),
  "RunStateReadEventsResult",
);
export type RunStateReadEventsResult = z.infer<typeof RunStateReadEventsResult>;

/** Deletes a whole event stream (`product.delete`); its numbering starts again at 1. */
export const RunStateDeleteStreamParams = lazySchema(
  () => z.strictObject({ projectId: Id, stream: StreamName }),
  "RunStateDeleteStreamParams",
);
export type RunStateDeleteStreamParams = z.infer<typeof RunStateDeleteStreamParams>;

/** `deleted: false` when the stream held no event. */
export const RunStateDeleteStreamResult = lazySchema(
  () => z.object({ deleted: z.boolean() }),
  "RunStateDeleteStreamResult",
);
export type RunStateDeleteStreamResult = z.infer<typeof RunStateDeleteStreamResult>;
