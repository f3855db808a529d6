/**
 * The OpenAI Responses API route of the fake model (`POST …/responses`), as codex-acp calls it through a custom model
 * provider (`wire_api = "responses"` in `$CODEX_HOME/config.toml`, agents.ts `codexAgent`).
 *
 * Owns: reading a Responses request (`instructions`, `input` items, `tools`) into the provider-neutral `ModelRequest`
 * views, and writing a `ScriptedReply` as the API streams it: server-sent events `response.created`, for text
 * `response.output_item.added` / `response.output_text.delta` / `response.output_item.done` (an assistant `message`),
 * for each tool call a `function_call` item (its `arguments` a JSON string) and finally `response.completed` whose
 * `response.usage` carries exactly the scripted counts (`input_tokens`, `output_tokens`, `total_tokens`, cached and
 * reasoning tokens 0). A non-streaming request gets the whole response object as JSON. A held reply sends
 * `response.created` and the text so far, and nothing more until released.
 */
import type { ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import type { ApiRoute, ModelUsage, ScriptedReply } from "./fake-model.js";

/** One item of a Responses request's `input` (the fields the fake reads). */
interface InputItem {
  type?: string;
  role?: string;
  content?: unknown;
  name?: string;
  call_id?: string;
  output?: unknown;
  arguments?: string;
  input?: string;
}

interface ResponsesBody {
  model?: string;
  stream?: boolean;
  instructions?: string;
  tools?: { type?: string; name?: string }[];
  input?: string | InputItem[];
}

function id(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString("hex")}`;
}

/** The text of a message's content (a string, or `input_text` / `output_text` parts) or of a tool output. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part: { type?: string; text?: string }) => (typeof part?.text === "string" ? part.text : ""))
      .join("\n");
  }
  if (typeof content === "object" && content !== null && "content" in content) {
    return textOf((content as { content: unknown }).content);
  }
  return "";
}

/** Items the model produced (an assistant message or a tool call) as opposed to the user's and tools' items. */
function isModelItem(item: InputItem): boolean {
  if (item.type === "message" || item.type === undefined) return item.role === "assistant";
  return ["function_call", "custom_tool_call", "local_shell_call", "reasoning"].includes(item.type);
}

function isToolOutput(item: InputItem): boolean {
  return item.type === "function_call_output" || item.type === "custom_tool_call_output";
}

function itemsOf(body: ResponsesBody): InputItem[] {
  if (typeof body.input === "string") return [{ type: "message", role: "user", content: body.input }];
  return Array.isArray(body.input) ? body.input : [];
}

interface OutputItem {
  type: string;
  id: string;
  [key: string]: unknown;
}

/** The output items of `reply`: one assistant message (when there is text), then one `function_call` per tool call. */
function outputItems(reply: ScriptedReply): OutputItem[] {
  const items: OutputItem[] = [];
  if (reply.text !== undefined && reply.text !== "") {
    items.push({
      type: "message",
      id: id("msg"),
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: reply.text, annotations: [] }],
    });
  }
  for (const call of reply.toolCalls ?? []) {
    items.push({
      type: "function_call",
      id: id("fc"),
      status: "completed",
      call_id: call.id ?? id("call"),
      name: call.name,
      arguments: JSON.stringify(call.input),
    });
  }
  return items;
}

function usageOf(usage: ModelUsage) {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.inputTokens + usage.outputTokens,
  };
}

function responseObject(
  body: ResponsesBody,
  responseId: string,
  status: string,
  output: OutputItem[],
  usage?: ModelUsage,
) {
  return {
    id: responseId,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status,
    model: body.model ?? "fake-model",
    output,
    ...(usage !== undefined ? { usage: usageOf(usage) } : {}),
  };
}

function sse(res: ServerResponse, data: { type: string; [key: string]: unknown }): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed || res.writableEnded) return resolve();
    res.write(`event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`, () => resolve());
  });
}

/** Splits text into a few deltas, so agents see a real stream. */
function chunks(text: string): string[] {
  const size = Math.max(1, Math.ceil(text.length / 3));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** The response id of each streamed request (set by the start, used by the rest; held replies span both). */
const responseIds = new WeakMap<ServerResponse, { responseId: string; items: OutputItem[]; sent: number }>();

async function writeStart(res: ServerResponse, body: ResponsesBody, reply: ScriptedReply): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const state = { responseId: id("resp"), items: outputItems(reply), sent: 0 };
  responseIds.set(res, state);
  const created = responseObject(body, state.responseId, "in_progress", []);
  await sse(res, { type: "response.created", sequence_number: state.sent++, response: created });
  await sse(res, { type: "response.in_progress", sequence_number: state.sent++, response: created });
}

async function writeRest(res: ServerResponse, body: ResponsesBody, usage: ModelUsage): Promise<void> {
  const state = responseIds.get(res);
  if (state === undefined) throw new Error("fake responses: the reply was never started");
  let index = 0;
  for (const item of state.items) {
    /** An event about this output item (numbered in order, with its output index and the fields given). */
    const itemEvent = (type: string, fields: Record<string, unknown>) =>
      sse(res, { type, sequence_number: state.sent++, output_index: index, ...fields });
    /** An event about this item's one content part. */
    const partEvent = (type: string, fields: Record<string, unknown>) =>
      itemEvent(type, { item_id: item.id, ...(item.type === "message" ? { content_index: 0 } : {}), ...fields });
    const started =
      item.type === "message" ? { ...item, status: "in_progress", content: [] } : { ...item, status: "in_progress" };
    await itemEvent("response.output_item.added", { item: started });
    if (item.type === "message") {
      const text = textOf(item["content"]);
      const part = { type: "output_text", text: "", annotations: [] };
      await partEvent("response.content_part.added", { part });
      for (const delta of chunks(text)) await partEvent("response.output_text.delta", { delta });
      await partEvent("response.output_text.done", { text });
      await partEvent("response.content_part.done", { part: { ...part, text } });
    } else {
      await partEvent("response.function_call_arguments.delta", { delta: item["arguments"] });
      await partEvent("response.function_call_arguments.done", { arguments: item["arguments"] });
    }
    await itemEvent("response.output_item.done", { item });
    index++;
  }
  await sse(res, {
    type: "response.completed",
    sequence_number: state.sent++,
    response: responseObject(body, state.responseId, "completed", state.items, usage),
  });
  res.end();
}

/** The OpenAI Responses route (streaming and non-streaming), for `startFakeModel({routes: [openaiResponses]})`. */
export const openaiResponses: ApiRoute = {
  api: "openai-responses",
  matches: (method, path) => method === "POST" && /\/responses$/.test(path),
  describe(raw) {
    const body = (raw ?? {}) as ResponsesBody;
    const items = itemsOf(body);
    // The current exchange: the items after the model's last output (a user message, or the tools' outputs).
    let start = items.length;
    while (start > 0 && !isModelItem(items[start - 1] as InputItem)) start--;
    const current = items.slice(start);
    const lastUser = current.filter((i) => (i.type === "message" || i.type === undefined) && i.role === "user").at(-1);
    let assistantTurns = 0;
    items.forEach((item, i) => {
      if (isModelItem(item) && (i === 0 || !isModelItem(items[i - 1] as InputItem))) assistantTurns++;
    });
    return {
      stream: body.stream === true,
      system: body.instructions ?? "",
      toolNames: (body.tools ?? []).map((t) => String(t.name ?? t.type ?? "")),
      lastUserText: lastUser === undefined ? "" : textOf(lastUser.content),
      toolResults: current.filter(isToolOutput).map((i) => ({
        toolCallId: String(i.call_id ?? ""),
        content: textOf(i.output),
        isError: false,
      })),
      allText: items
        .map((i) =>
          isToolOutput(i) ? textOf(i.output) : i.type === "message" || i.type === undefined ? textOf(i.content) : "",
        )
        .join("\n"),
      assistantTurns,
    };
  },
  async write(res, request, reply, usage) {
    const body = (request.body ?? {}) as ResponsesBody;
    if (!request.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      if (reply.hold === true) {
        res.flushHeaders();
        return;
      }
      res.end(JSON.stringify(responseObject(body, id("resp"), "completed", outputItems(reply), usage)));
      return;
    }
    await writeStart(res, body, reply);
    if (reply.hold === true) return;
    await writeRest(res, body, usage);
  },
  async finishHeld(res, request, reply, usage) {
    const body = (request.body ?? {}) as ResponsesBody;
    if (!request.stream) {
      res.end(JSON.stringify(responseObject(body, id("resp"), "completed", outputItems(reply), usage)));
      return;
    }
    await writeRest(res, body, usage);
  },
};
