/**
 * The hot path of a worker's `session/update` stream (issue 16, memory): text chunks are taken off the parsed message
 * stream before the ACP SDK sees them, so they are not validated twice against the SDK's full `SessionUpdate` union
 * of intersections (its client validates every `session/update` once in its session router and once more for the
 * registered handler; that was most of the allocation per streamed notification).
 *
 * Owns: recognising a frame that is certainly a well-formed text chunk — exactly what the SDK's schema accepts for
 * `agent_message_chunk` / `agent_thought_chunk` with a `text` content block — and taking such frames out of the stream
 * in order. Everything else (other updates, requests, responses, anything malformed or unusual) goes on to the SDK
 * unchanged, which validates it and rejects what is malformed as it always did. Pure apart from the web stream it
 * wraps; never writes anything.
 */

/** A text chunk of a worker's session (`agent_message_chunk` or `agent_thought_chunk` with a text block). */
export interface TextChunk {
  sessionId: string;
  kind: "agent_message_chunk" | "agent_thought_chunk";
  text: string;
  /** The chunk's `messageId`; `undefined` when absent, null, or not a string (the SDK's schema drops those too). */
  messageId: string | undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The text chunk `frame` carries, when it is a JSON-RPC 2.0 `session/update` notification that the SDK's schema
 * (`zSessionNotification`) would certainly accept as an `agent_message_chunk` or `agent_thought_chunk` whose content
 * is a `text` block; else `undefined` (the frame is then left to the SDK). The optional fields the SDK parses
 * leniently (`_meta`, `annotations`: replaced by `undefined` when malformed) are not needed here and never make a
 * frame rejected; `messageId` is read the same lenient way. Pure.
 */
export function textChunkOf(frame: unknown): TextChunk | undefined {
  if (!isObject(frame) || frame["jsonrpc"] !== "2.0" || frame["method"] !== "session/update" || "id" in frame) {
    return undefined;
  }
  const params = frame["params"];
  if (!isObject(params)) return undefined;
  const sessionId = params["sessionId"];
  const update = params["update"];
  if (typeof sessionId !== "string" || !isObject(update)) return undefined;
  const kind = update["sessionUpdate"];
  if (kind !== "agent_message_chunk" && kind !== "agent_thought_chunk") return undefined;
  const content = update["content"];
  if (!isObject(content) || content["type"] !== "text") return undefined;
  const text = content["text"];
  if (typeof text !== "string") return undefined;
  const messageId = update["messageId"];
  return { sessionId, kind, text, messageId: typeof messageId === "string" ? messageId : undefined };
}

/** True for a frame that is a `session/update` notification (of any shape): the SDK handles it asynchronously. */
function isSessionUpdate(frame: unknown): boolean {
  return isObject(frame) && frame["method"] === "session/update" && !("id" in frame);
}

/**
 * `source` without the text chunks, which go to `onChunk` instead, in stream order: a chunk is handed over only once
 * every frame read before it reached its handler. The SDK handles a frame it read in microtasks (its notification
 * handlers are synchronous here), so when a `session/update` went on to the SDK just before, the chunk waits for one
 * turn of the event loop first; a run of chunks costs no wait. A throwing `onChunk` does not break the stream (the
 * caller guards its handler). Cancelling the result cancels `source`; an error of `source` errors the result.
 */
export function divertTextChunks<T>(source: ReadableStream<T>, onChunk: (chunk: TextChunk) => void): ReadableStream<T> {
  const reader = source.getReader();
  let sdkUpdatePending = false;
  return new ReadableStream<T>(
    {
      async pull(controller) {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) {
            controller.close();
            return;
          }
          const chunk = textChunkOf(value);
          if (chunk === undefined) {
            sdkUpdatePending = isSessionUpdate(value);
            controller.enqueue(value);
            return;
          }
          if (sdkUpdatePending) {
            await new Promise<void>((resolve) => setImmediate(resolve));
            sdkUpdatePending = false;
          }
          onChunk(chunk);
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
