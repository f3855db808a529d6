/**
 * What a product gives its agents from the ACP session that started it (issue 28: MCP servers; issue 31: additional
 * directories and the user's attachments), recorded with the product so a resumed run gives them the same:
 *
 * - `additionalDirectories`: the session's further file-system roots (ACP session-setup) when the product started,
 *   absolute; the leader and every worker get them in `session/new` when they advertise
 *   `sessionCapabilities.additionalDirectories`, and workers' `fs/*` requests are served inside them as inside the
 *   task's workspace. They are shared, not isolated: no worktree is made of them and nothing in them is integrated.
 * - attachments: the images and binary resources of the user's messages to the product, by reference only (the bytes
 *   are one attachment record of the run-state authority, kept by the session layer). The leader gets those of the
 *   turn it answers; every task gets those of the product's whole conversation (the plan was made from it), the
 *   newest `MAX_ATTACHMENTS_PER_PROMPT`, each once.
 *
 * Pure: schemas, types and selection only.
 */
import * as z from "zod";
import { lazySchema } from "../../../protocol/lazy-schema.js";
import type { StoredMcpServer } from "./mcp-servers.js";

/** Largest decoded attachment, in bytes (512 KiB: its base64 text stays well within the input bound of 1 MiB a string). */
export const MAX_ATTACHMENT_BYTES = 512 * 1024;
/** Most binary blocks one prompt may carry, and most attachments one agent prompt is given. */
export const MAX_ATTACHMENTS_PER_PROMPT = 8;

/** A reference to one stored attachment: what the conversation and the product keep, never the bytes. */
export const AttachmentRef = lazySchema(
  () =>
    z.object({
      /** `<sessionId>/<sha256 of the bytes>`: the id of its attachment record. */
      ref: z.string().max(200),
      kind: z.enum(["image", "blob"]),
      mimeType: z.string().max(200),
      bytes: z.number().int().min(0),
      /** The URI the client gave the image or resource, if any. */
      uri: z.string().max(4_096).optional(),
    }),
  "AttachmentRef",
);
export type AttachmentRef = z.infer<typeof AttachmentRef>;

/** At most this many attachments on one message. */
export const AttachmentRefs = lazySchema(
  () => z.array(AttachmentRef).max(MAX_ATTACHMENTS_PER_PROMPT),
  "AttachmentRefs",
);

/** The text note for an attachment (in the user's message, and for an agent that cannot take its content). Pure. */
export function attachmentNote(a: AttachmentRef): string {
  const what = a.kind === "image" ? "Image" : "Binary resource";
  return `[${what} attached by the user: ${a.mimeType}, ${a.bytes} bytes${a.uri ? `, ${a.uri}` : ""}; attachment ${a.ref}]`;
}

/** Reads the content of a stored attachment (base64 `data`); `undefined` when it is gone or does not parse. */
export type ReadAttachment = (ref: string) => Promise<{ mimeType: string; data: string } | undefined>;

/** What a product passes to its agents' ACP sessions (leader and workers). */
export interface SessionInputs {
  /** The product's MCP servers as stored (secrets by name only; issue 28, mcp-servers.ts). */
  mcpServers?: StoredMcpServer[];
  /** The product's additional directories: further fs roots beside `cwd` (absolute; see the file comment). */
  additionalDirectories?: string[];
}

/** `SessionInputs` and the attachments an agent's prompt carries (by reference). */
export interface AgentInputs extends SessionInputs {
  attachments?: AttachmentRef[];
}

/**
 * The attachments of a conversation's user messages: the newest `MAX_ATTACHMENTS_PER_PROMPT`, each reference once,
 * oldest first. Pure.
 */
export function conversationAttachments(
  dialogue: readonly { role: string; attachments?: readonly AttachmentRef[] }[],
): AttachmentRef[] {
  const seen = new Set<string>();
  const newestFirst: AttachmentRef[] = [];
  for (let i = dialogue.length - 1; i >= 0 && newestFirst.length < MAX_ATTACHMENTS_PER_PROMPT; i--) {
    const entry = dialogue[i] as (typeof dialogue)[number];
    if (entry.role !== "user" || entry.attachments === undefined) continue;
    for (let j = entry.attachments.length - 1; j >= 0 && newestFirst.length < MAX_ATTACHMENTS_PER_PROMPT; j--) {
      const a = entry.attachments[j] as AttachmentRef;
      if (seen.has(a.ref)) continue;
      seen.add(a.ref);
      newestFirst.push(a);
    }
  }
  return newestFirst.reverse();
}

/** The session inputs of a product's state, for a leader request (only the fields it has). Pure. */
export function sessionInputsOf(s: SessionInputs): SessionInputs {
  return {
    ...(s.mcpServers ? { mcpServers: s.mcpServers } : {}),
    ...(s.additionalDirectories?.length ? { additionalDirectories: s.additionalDirectories } : {}),
  };
}

/** What a task attempt of the product gets (session inputs and the conversation's attachments). Pure. */
export function taskInputsOf(
  s: SessionInputs & { dialogue: readonly { role: string; attachments?: readonly AttachmentRef[] }[] },
): AgentInputs {
  const attachments = conversationAttachments(s.dialogue);
  return { ...sessionInputsOf(s), ...(attachments.length > 0 ? { attachments } : {}) };
}

/** Copies the agent inputs of a launch into a worker request (only the fields it has). Pure. */
export function agentInputsOf(spec: AgentInputs): AgentInputs {
  return {
    ...sessionInputsOf(spec),
    ...(spec.attachments?.length ? { attachments: spec.attachments } : {}),
  };
}
