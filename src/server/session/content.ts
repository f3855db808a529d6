/**
 * Prompt content beyond text (PROTOCOL.md section 4, ACP `promptCapabilities`): images and embedded resources in a
 * user's prompt. Each binary block (an `image`, a `resource` with a `blob`) is checked against its size limit on its
 * base64 length before anything is decoded, then stored once, by content, as an attachment record of the run-state
 * authority (project `_`, kind `attachment`, id `<sessionId>/<sha256>`); the session's conversation and the product
 * keep only a reference to it. The prompt's text carries a note per attachment (its kind, media type, size and
 * reference); the agents' prompts get its content only in the types each agent advertises (product/agent-inputs.ts,
 * adapters/agents/prompt-content.ts, reading the record through `attachmentReader`). Embedded text resources are
 * inlined in the prompt's text, as before.
 */
import * as z from "zod";
import type { ContentBlock } from "../../../protocol/acp.js";
import type { RunStateAuthority } from "../../core/ports.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";
import {
  AttachmentRef,
  attachmentNote,
  MAX_ATTACHMENT_BYTES,
  MAX_ATTACHMENTS_PER_PROMPT,
  type ReadAttachment,
} from "../../core/product/agent-inputs.js";
import { invalidParams } from "../wire-errors.js";
import { nodeCrypto } from "../../adapters/system/node-builtins.js";

/** The authority project of attachment records (as for session records). */
const ATTACHMENT_PROJECT = "_";

export { AttachmentRef, attachmentNote, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS_PER_PROMPT };

/** Image media types a prompt may carry (those the ACP reference clients send). */
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The stored record of one attachment. */
export interface AttachmentRecord {
  v: 1;
  mimeType: string;
  /** The content, base64. */
  data: string;
  bytes: number;
}

/** The decoded size of base64 text of `length` characters ending in `padding` `=` signs. */
function decodedBytes(length: number, padding: number): number {
  return (length / 4) * 3 - padding;
}

/** Checks one binary block's base64 text and media type; returns its decoded size. Throws -32602. */
function checkBinary(data: string, index: number, field: string, mimeType: string | null | undefined): number {
  const path = ["prompt", index, ...field.split(".")];
  // The limit is checked on the text's length, before anything is decoded.
  const max = Math.ceil(MAX_ATTACHMENT_BYTES / 3) * 4;
  if (data.length > max) {
    throw invalidParams([
      { path, message: `is too large: at most ${MAX_ATTACHMENT_BYTES} bytes (base64: ${max} characters) per block` },
    ]);
  }
  if (data.length % 4 !== 0 || !BASE64.test(data)) throw invalidParams([{ path, message: "must be base64" }]);
  if (mimeType === "" || mimeType === undefined || mimeType === null) {
    throw invalidParams([{ path: ["prompt", index, "mimeType"], message: "must name the media type" }]);
  }
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return decodedBytes(data.length, padding);
}

/**
 * Stores the binary blocks of a prompt as attachments of session `sessionId` and returns their references, in
 * prompt order. Throws -32602 (nothing stored) for a block over its limit, more than `MAX_ATTACHMENTS_PER_PROMPT`
 * blocks, an image media type other than PNG, JPEG, GIF or WebP, or text that is not base64. An attachment already
 * stored (same session, same bytes) is not written again.
 */
export async function storeAttachments(
  authority: RunStateAuthority,
  sessionId: string,
  blocks: ContentBlock[],
): Promise<AttachmentRef[]> {
  const pending: { ref: AttachmentRef; record: AttachmentRecord }[] = [];
  for (const [index, b] of blocks.entries()) {
    let data: string;
    let mimeType: string;
    let kind: AttachmentRef["kind"];
    let uri: string | undefined;
    if (b.type === "image") {
      checkBinary(b.data, index, "data", b.mimeType);
      if (!IMAGE_TYPES.has(b.mimeType)) {
        throw invalidParams([
          { path: ["prompt", index, "mimeType"], message: `must be one of ${[...IMAGE_TYPES].join(", ")}` },
        ]);
      }
      ({ data, mimeType } = b);
      kind = "image";
      uri = b.uri ?? undefined;
    } else if (b.type === "audio") {
      throw invalidParams([
        { path: ["prompt", index], message: "audio is not accepted (promptCapabilities.audio is false)" },
      ]);
    } else if (b.type === "resource" && "blob" in b.resource && typeof b.resource.blob === "string") {
      mimeType = b.resource.mimeType ?? "application/octet-stream";
      checkBinary(b.resource.blob, index, "resource.blob", mimeType);
      data = b.resource.blob;
      kind = "blob";
      uri = b.resource.uri;
    } else continue;
    if (pending.length >= MAX_ATTACHMENTS_PER_PROMPT) {
      throw invalidParams([
        { path: ["prompt"], message: `carries more than ${MAX_ATTACHMENTS_PER_PROMPT} images or binary resources` },
      ]);
    }
    const bytes = Buffer.from(data, "base64");
    const digest = nodeCrypto().createHash("sha256").update(bytes).digest("hex");
    pending.push({
      ref: { ref: `${sessionId}/${digest}`, kind, mimeType, bytes: bytes.length, ...(uri ? { uri } : {}) },
      record: { v: 1, mimeType, data, bytes: bytes.length },
    });
  }
  for (const { ref, record } of pending) {
    if (await authority.get(ATTACHMENT_PROJECT, "attachment", ref.ref)) continue;
    await authority.put(ATTACHMENT_PROJECT, "attachment", ref.ref, record as never, null).catch(async (err) => {
      // Written meanwhile by a concurrent prompt of the same session: the same bytes, nothing to do.
      if (!(await authority.get(ATTACHMENT_PROJECT, "attachment", ref.ref))) throw err;
    });
  }
  return pending.map((p) => p.ref);
}

/** Deletes every attachment of a session (when the session is deleted); best effort per record. */
export async function deleteAttachments(authority: RunStateAuthority, sessionId: string): Promise<void> {
  for (const info of await authority.list(ATTACHMENT_PROJECT, "attachment", `${sessionId}/`)) {
    await authority.delete(ATTACHMENT_PROJECT, "attachment", info.id);
  }
}

const StoredAttachment = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      mimeType: z.string().max(200),
      data: z.string().max(Math.ceil(MAX_ATTACHMENT_BYTES / 3) * 4),
      bytes: z.number().int().min(0),
    }),
  "StoredAttachment",
);

/**
 * Reads the content of stored attachment `ref` (for the agents' prompts, product/agent-inputs.ts `ReadAttachment`):
 * `undefined` when the record is gone or does not parse (guarantee 4: never half-read). Never throws for a missing
 * record; an authority failure rejects.
 */
export function attachmentReader(authority: RunStateAuthority): ReadAttachment {
  return async (ref) => {
    const rec = await authority.get(ATTACHMENT_PROJECT, "attachment", ref);
    const parsed = rec ? StoredAttachment.safeParse(rec.value) : undefined;
    return parsed?.success ? { mimeType: parsed.data.mimeType, data: parsed.data.data } : undefined;
  };
}

/**
 * The content block of a stored attachment (for `session/load`'s replay), or a text note when its record is gone or
 * does not parse (guarantee 4: never half-read). Never throws for a missing record.
 */
export async function attachmentBlock(authority: RunStateAuthority, a: AttachmentRef): Promise<ContentBlock> {
  const rec = await authority.get(ATTACHMENT_PROJECT, "attachment", a.ref);
  const parsed = rec ? StoredAttachment.safeParse(rec.value) : undefined;
  if (!parsed?.success) return { type: "text", text: `${attachmentNote(a)} (no longer stored)` };
  if (a.kind === "image") {
    return { type: "image", data: parsed.data.data, mimeType: parsed.data.mimeType, ...(a.uri ? { uri: a.uri } : {}) };
  }
  return {
    type: "resource",
    resource: { uri: a.uri ?? `attachment:${a.ref}`, blob: parsed.data.data, mimeType: parsed.data.mimeType },
  };
}
