/**
 * What an agent's ACP session is given of its product's session inputs, in the types the agent advertises (issue 31,
 * core product/agent-inputs.ts; ACP initialization.mdx, "Prompt capabilities"; session-setup.mdx, "Additional
 * directories"):
 *
 * - `additionalDirectories` go into `session/new` only when the agent advertises
 *   `sessionCapabilities.additionalDirectories` (ACP: a client must not send them otherwise); else they are left out,
 *   with a debug log.
 * - Each attachment becomes an `image` block for an agent with `promptCapabilities.image`, a `resource` block with its
 *   `blob` for one with `promptCapabilities.embeddedContext`, otherwise a `resource_link` to the URI the user gave it
 *   or, without one, a short text note naming it. An attachment whose record is gone is a note too.
 *
 * Owns nothing but the choice; the bytes are read through `ReadAttachment` at prompt time (bounded when they were
 * stored: at most 512 KiB each, at most 8 per prompt), never kept.
 */
import type { ContentBlock } from "@agentclientprotocol/sdk";
import type { Logger } from "../../core/ports.js";
import { attachmentNote } from "../../core/product/agent-inputs.js";
import type { AttachmentRef, ReadAttachment } from "../../core/product/agent-inputs.js";

/** The prompt capabilities an agent advertised (`initialize`'s `agentCapabilities.promptCapabilities`). */
export interface PromptCaps {
  image?: boolean | null;
  embeddedContext?: boolean | null;
}

/**
 * `{additionalDirectories}` for an agent's `session/new` when it advertised the capability and there are any; `{}`
 * otherwise (logged at debug level when some were left out). Pure but for the log.
 */
export function sessionDirectories(
  directories: readonly string[] | undefined,
  sessionCapabilities: { additionalDirectories?: unknown } | null | undefined,
  log: Logger,
): { additionalDirectories?: string[] } {
  if (directories === undefined || directories.length === 0) return {};
  const advertised = sessionCapabilities?.additionalDirectories;
  if (advertised === undefined || advertised === null) {
    log.debug(
      { additionalDirectories: directories },
      "the agent does not advertise sessionCapabilities.additionalDirectories: its session gets none",
    );
    return {};
  }
  return { additionalDirectories: [...directories] };
}

/**
 * The content blocks of `attachments` for an agent with `caps` (see the file comment), in order. With `notes: false`
 * an attachment the agent cannot take as content and that has no URI adds nothing (the prompt's text already names
 * it, e.g. the leader's dialogue). Without `read` every attachment falls back as if the agent could take no content.
 * Never throws: a failed read falls back to the note.
 */
export async function attachmentBlocks(
  attachments: readonly AttachmentRef[] | undefined,
  caps: PromptCaps | null | undefined,
  read: ReadAttachment | undefined,
  log: Logger,
  options: { notes: boolean } = { notes: true },
): Promise<ContentBlock[]> {
  const blocks: ContentBlock[] = [];
  for (const a of attachments ?? []) {
    const takes = a.kind === "image" ? caps?.image === true : caps?.embeddedContext === true;
    const wanted = takes && read !== undefined;
    const stored = wanted ? await readQuietly(read, a, log) : undefined;
    if (stored !== undefined && a.kind === "image") {
      blocks.push({ type: "image", data: stored.data, mimeType: stored.mimeType, ...(a.uri ? { uri: a.uri } : {}) });
    } else if (stored !== undefined) {
      const uri = a.uri ?? `attachment:${a.ref}`;
      blocks.push({ type: "resource", resource: { uri, blob: stored.data, mimeType: stored.mimeType } });
    } else if (a.uri !== undefined && !wanted) {
      blocks.push({ type: "resource_link", uri: a.uri, name: nameOf(a.uri), mimeType: a.mimeType, size: a.bytes });
    } else if (options.notes || wanted) {
      blocks.push({ type: "text", text: `${attachmentNote(a)}${wanted ? " (no longer stored)" : ""}` });
    }
  }
  return blocks;
}

async function readQuietly(
  read: ReadAttachment,
  a: AttachmentRef,
  log: Logger,
): Promise<{ mimeType: string; data: string } | undefined> {
  try {
    const stored = await read(a.ref);
    if (stored === undefined)
      log.warn({ attachment: a.ref }, "an attachment is no longer stored; the agent gets a note");
    return stored;
  } catch (error) {
    log.warn({ err: error, attachment: a.ref }, "an attachment could not be read; the agent gets a note");
    return undefined;
  }
}

/** The last path segment of a URI (a resource_link's required `name`), or the URI itself. */
function nameOf(uri: string): string {
  const tail = uri
    .replace(/[?#].*$/, "")
    .split("/")
    .filter((part) => part !== "")
    .pop();
  return tail !== undefined && tail !== "" ? decodeURIComponentSafe(tail) : uri;
}

function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
