/**
 * The Anthropic Messages API route of the fake model (`POST /v1/messages`, plus `/v1/messages/count_tokens`), as the
 * Claude agents call it through `ANTHROPIC_BASE_URL`.
 *
 * Owns: reading a Messages request into the provider-neutral `ModelRequest` views and writing a `ScriptedReply` as
 * the API does: server-sent events (`message_start`, `content_block_start/delta/stop` for text and `tool_use` with
 * `input_json_delta`, `message_delta` with `stop_reason` and `usage`, `message_stop`) when `stream` is true, else one
 * JSON message. `usage` carries exactly the scripted counts (`input_tokens`, `output_tokens`, cache counts 0).
 */
import type { ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import type { ApiRoute, ModelRequest, ModelUsage, ScriptedReply } from "./fake-model.js";

interface ContentBlock {
  type: string;
  text?: string;
  tool_use_id?: string;
  content?: unknown;
  is_error?: boolean;
}

interface MessagesBody {
  model?: string;
  stream?: boolean;
  system?: string | ContentBlock[];
  tools?: { name?: string }[];
  messages?: { role: string; content: string | ContentBlock[] }[];
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((b: ContentBlock) => (b.type === "text" ? (b.text ?? "") : b.type === "tool_result" ? textOf(b.content) : ""))
    .join("\n");
}

function id(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString("hex")}`;
}

function message(body: MessagesBody, reply: ScriptedReply, usage: ModelUsage) {
  const content: unknown[] = [];
  if (reply.text !== undefined && reply.text !== "") content.push({ type: "text", text: reply.text });
  for (const call of reply.toolCalls ?? []) {
    content.push({ type: "tool_use", id: call.id ?? id("toolu"), name: call.name, input: call.input });
  }
  return {
    id: id("msg"),
    type: "message",
    role: "assistant",
    model: body.model ?? "claude-fake",
    content,
    stop_reason: (reply.toolCalls?.length ?? 0) > 0 ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: {
      input_tokens: usage.inputTokens,
      output_tokens: usage.outputTokens,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    },
  };
}

function sse(res: ServerResponse, event: string, data: unknown): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed || res.writableEnded) return resolve();
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`, () => resolve());
  });
}

/** Splits text into a few deltas, so agents see a real stream. */
function chunks(text: string): string[] {
  const size = Math.max(1, Math.ceil(text.length / 3));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

async function writeStart(res: ServerResponse, body: MessagesBody, reply: ScriptedReply, usage: ModelUsage) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const m = message(body, reply, usage);
  await sse(res, "message_start", {
    type: "message_start",
    message: { ...m, content: [], stop_reason: null, usage: { ...m.usage, output_tokens: 0 } },
  });
}

async function writeRest(res: ServerResponse, body: MessagesBody, reply: ScriptedReply, usage: ModelUsage) {
  const m = message(body, reply, usage);
  let index = 0;
  for (const block of m.content as { type: string; text?: string; id?: string; name?: string; input?: unknown }[]) {
    if (block.type === "text") {
      await sse(res, "content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "text", text: "" },
      });
      for (const part of chunks(block.text ?? "")) {
        await sse(res, "content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "text_delta", text: part },
        });
      }
    } else {
      await sse(res, "content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: block.id, name: block.name, input: {} },
      });
      for (const part of chunks(JSON.stringify(block.input))) {
        await sse(res, "content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "input_json_delta", partial_json: part },
        });
      }
    }
    await sse(res, "content_block_stop", { type: "content_block_stop", index });
    index++;
  }
  await sse(res, "message_delta", {
    type: "message_delta",
    delta: { stop_reason: m.stop_reason, stop_sequence: null },
    usage: { output_tokens: usage.outputTokens },
  });
  await sse(res, "message_stop", { type: "message_stop" });
  res.end();
}

/** The Anthropic Messages route (streaming and non-streaming), for `startFakeModel({routes: [anthropicMessages]})`. */
export const anthropicMessages: ApiRoute = {
  api: "anthropic-messages",
  matches: (method, path) => method === "POST" && /\/v1\/messages(\/count_tokens)?$/.test(path),
  describe(raw) {
    const body = (raw ?? {}) as MessagesBody;
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const last = [...messages].reverse().find((m) => m.role === "user");
    const lastBlocks: ContentBlock[] = Array.isArray(last?.content)
      ? last.content
      : last === undefined
        ? []
        : [{ type: "text", text: last.content }];
    return {
      stream: body.stream === true,
      system: textOf(body.system),
      toolNames: (body.tools ?? []).map((t) => String(t.name ?? "")),
      lastUserText: lastBlocks
        .filter((b) => b.type === "text")
        .map((b) => b.text ?? "")
        .join("\n"),
      toolResults: lastBlocks
        .filter((b) => b.type === "tool_result")
        .map((b) => ({
          toolCallId: String(b.tool_use_id ?? ""),
          content: textOf(b.content),
          isError: b.is_error === true,
        })),
      allText: messages.map((m) => textOf(m.content)).join("\n"),
      assistantTurns: messages.filter((m) => m.role === "assistant").length,
    };
  },
  auxiliary(request: ModelRequest) {
    if (!request.path.endsWith("/count_tokens")) return undefined;
    return {
      status: 200,
      body: { input_tokens: Math.max(1, Math.ceil(JSON.stringify(request.body ?? "").length / 4)) },
    };
  },
  async write(res, request, reply, usage) {
    const body = (request.body ?? {}) as MessagesBody;
    if (!request.stream) {
      if (reply.hold === true) {
        res.writeHead(200, { "content-type": "application/json" });
        res.flushHeaders();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(message(body, reply, usage)));
      return;
    }
    await writeStart(res, body, reply, usage);
    if (reply.hold === true) return;
    await writeRest(res, body, reply, usage);
  },
  async finishHeld(res, request, reply, usage) {
    const body = (request.body ?? {}) as MessagesBody;
    if (!request.stream) {
      res.end(JSON.stringify(message(body, reply, usage)));
      return;
    }
    await writeRest(res, body, reply, usage);
  },
};
