/**
 * The hot path of a worker's `session/update` stream (issue 16, memory): text chunks are taken off the parsed stream
 * before the ACP SDK validates them, in order, and everything else still reaches the SDK, which validates it and
 * rejects what is malformed.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AcpWorkerPool } from "../../../src/adapters/agents/acp-worker.js";
import { AgentRegistry, parseAgentConfig } from "../../../src/adapters/agents/registry.js";
import { divertTextChunks, textChunkOf } from "../../../src/adapters/agents/session-updates.js";
import type { TextChunk } from "../../../src/adapters/agents/session-updates.js";
import { fixturesDir, memoryLogger, taskRequest, tsxLoader } from "../../fixtures/agents/pool-helpers.js";

const update = (u: Record<string, unknown>, sessionId: unknown = "s1") => ({
  jsonrpc: "2.0",
  method: "session/update",
  params: { sessionId, update: u },
});
const chunk = (text: unknown, extra: Record<string, unknown> = {}) =>
  update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text }, ...extra });

describe("textChunkOf", () => {
  it("reads a well-formed text chunk, with its messageId when it is a string", () => {
    expect(textChunkOf(chunk("hi", { messageId: "m1" }))).toEqual({
      sessionId: "s1",
      kind: "agent_message_chunk",
      text: "hi",
      messageId: "m1",
    });
    expect(
      textChunkOf(update({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "hmm" } })),
    ).toMatchObject({ kind: "agent_thought_chunk", text: "hmm", messageId: undefined });
  });

  it("reads the optional fields as leniently as the SDK's schema does (a malformed one is dropped, not fatal)", () => {
    expect(textChunkOf(chunk("a", { messageId: null }))?.messageId).toBeUndefined();
    expect(textChunkOf(chunk("a", { messageId: 7 }))?.messageId).toBeUndefined();
    const annotated = update({
      sessionUpdate: "agent_message_chunk",
      content: { type: "text", text: "a", annotations: "not an object", _meta: 3 },
      _meta: [],
    });
    expect(textChunkOf(annotated)?.text).toBe("a");
  });

  it("leaves every other frame to the SDK", () => {
    const others: unknown[] = [
      { ...chunk("a"), jsonrpc: "1.0" },
      { ...chunk("a"), id: 1 },
      { ...chunk("a"), method: "session/other" },
      { jsonrpc: "2.0", method: "session/update", params: [] },
      chunk("a", { content: { type: "text", text: 42 } }),
      chunk("a", { content: [{ type: "text", text: "a" }] }),
      chunk("a", { content: { type: "image", data: "AA==", mimeType: "image/png" } }),
      update({ sessionUpdate: "tool_call", toolCallId: "c1", title: "Run" }),
      update({ sessionUpdate: "agent_message_chunk" }),
      chunk("a", {}),
      null,
      "text",
    ];
    (others[9] as { params: { sessionId: unknown } }).params.sessionId = 5;
    for (const frame of others) expect(textChunkOf(frame)).toBeUndefined();
  });
});

/** A readable of `frames`, and a consumer that handles each frame it reads a few microtasks later, as the SDK does. */
function sdkLike(frames: unknown[], log: string[]) {
  const source = new ReadableStream<unknown>({
    start(controller) {
      for (const f of frames) controller.enqueue(f);
      controller.close();
    },
  });
  const stream = divertTextChunks(source, (c: TextChunk) => log.push(`chunk ${c.text}`));
  const consumed = (async () => {
    const reader = stream.getReader();
    const pending: Promise<void>[] = [];
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      const frame = r.value as { method?: string; params?: { update?: { sessionUpdate?: string } } };
      pending.push(
        (async () => {
          for (let i = 0; i < 10; i += 1) await Promise.resolve();
          log.push(`sdk ${frame.params?.update?.sessionUpdate ?? frame.method ?? "?"}`);
        })(),
      );
    }
    await Promise.all(pending);
  })();
  return consumed;
}

describe("divertTextChunks", () => {
  it("hands text chunks over in stream order, after the SDK handled the update read before them", async () => {
    const log: string[] = [];
    await sdkLike(
      [
        chunk("1"),
        update({ sessionUpdate: "tool_call", toolCallId: "c1", title: "Run" }),
        chunk("2"),
        chunk("3"),
        { jsonrpc: "2.0", id: 4, result: {} },
      ],
      log,
    );
    expect(log.slice(0, 4)).toEqual(["chunk 1", "sdk tool_call", "chunk 2", "chunk 3"]);
    expect(log).toContain("sdk ?");
  });

  it("passes errors of the source on and cancels the source when cancelled", async () => {
    const failing = divertTextChunks(
      new ReadableStream({
        pull() {
          throw new Error("pipe broke");
        },
      }),
      () => undefined,
    );
    await expect(failing.getReader().read()).rejects.toThrow("pipe broke");
    let cancelled: unknown;
    const source = new ReadableStream({ cancel: (reason) => void (cancelled = reason) });
    await divertTextChunks(source, () => undefined).cancel("stop");
    expect(cancelled).toBe("stop");
  });
});

describe("a worker's session/update stream through the pool", () => {
  let dir: string;
  let pool: AcpWorkerPool | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "acp-updates-"));
  });
  afterEach(async () => {
    await pool?.shutdown();
    pool = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps text and tool calls in order, drops thoughts, other sessions and malformed frames", async () => {
    const script = join(dir, "frames.json");
    const text = (t: unknown, extra: Record<string, unknown> = {}) =>
      update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: t }, ...extra }, "$SESSION");
    await writeFile(
      script,
      JSON.stringify([
        text("one ", { messageId: "m1" }),
        update({ sessionUpdate: "tool_call", toolCallId: "c1", title: "Run tests", kind: "execute" }, "$SESSION"),
        text("two", { messageId: "m1" }),
        text(42),
        update({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "thinking" } }, "$SESSION"),
        update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "elsewhere" } }, "other"),
        update(
          { sessionUpdate: "agent_message_chunk", content: { type: "image", data: "AA==", mimeType: "image/png" } },
          "$SESSION",
        ),
        text("three", { messageId: "m2" }),
        "not json",
        text("four", { messageId: 7 }),
      ]),
    );
    const registry = new AgentRegistry(
      parseAgentConfig(
        {
          agents: [
            {
              agentId: "raw",
              command: process.execPath,
              args: ["--import", tsxLoader, join(fixturesDir, "raw-updates-agent.ts"), script],
            },
          ],
        },
        join(dir, "acp-orchestrator.json"),
      ),
    );
    pool = new AcpWorkerPool({ registry, logger: memoryLogger(), graceMs: 300 });
    const seen: string[] = [];
    const result = await pool.runTask(taskRequest("raw", dir), {
      onText: (t) => seen.push(`text ${JSON.stringify(t)}`),
      onActivity: (a) => seen.push(`activity ${a}`),
      onUsage: () => undefined,
    });
    expect(seen).toEqual([
      'text "one "',
      "activity Run tests",
      'text "\\n\\ntwo"',
      'text "\\n\\nthree"',
      'text "four"',
    ]);
    expect(result).toEqual({ outcome: "completed", output: "one \n\ntwo\n\nthreefour" });
  });
});
