/**
 * `record --normalize` (src/transcripts/normalizer.ts, protocol/TRANSCRIPTS.md "Normalisation"): run-specific values
 * become captures, references and placeholders, decided from earlier messages only, and the result is a valid
 * transcript that matches the original messages.
 */
import { describe, expect, it } from "vitest";
import { formatTranscript, parseTranscript, type Json, type TranscriptLine } from "../../src/transcripts/format.js";
import { matchMessage, resolveSend } from "../../src/transcripts/matcher.js";
import { Normalizer } from "../../src/transcripts/normalizer.js";

const WS = "/tmp/acp-transcript-abc/workspace";
const PRD = "prd_793ac256e0174f4ea9b9";
const CKP = "ckp_8b3381b4f4cb4b8387ad";

function normalizeAll(messages: ["send" | "recv", unknown][]): TranscriptLine[] {
  const n = new Normalizer();
  return messages.map(([dir, m]) => n.line(dir, m));
}

describe("Normalizer", () => {
  const recorded: ["send" | "recv", unknown][] = [
    ["send", { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } }],
    ["recv", { jsonrpc: "2.0", id: 1, result: { agentInfo: { name: "acp-orchestrator", version: "0.1.0" } } }],
    ["send", { jsonrpc: "2.0", id: 2, method: "product.plan", params: { goal: "Write it", cwd: WS } }],
    ["recv", { jsonrpc: "2.0", id: 2, result: { productId: PRD, phase: "planning" } }],
    [
      "recv",
      {
        jsonrpc: "2.0",
        method: "product.checkpoint",
        params: { productId: PRD, checkpointId: CKP, at: "2026-11-29T08:52:11.237Z" },
      },
    ],
    [
      "recv",
      { jsonrpc: "2.0", method: "product.budgetUpdate", params: { productId: PRD, inputTokens: 26, elapsedMs: 321 } },
    ],
    [
      "recv",
      {
        jsonrpc: "2.0",
        id: 0,
        method: "session/request_permission",
        params: { toolCall: { toolCallId: `plan-${PRD}`, title: `Wrote ${WS}/notes/t1.md` } },
      },
    ],
    ["send", { jsonrpc: "2.0", id: 0, result: { outcome: { outcome: "selected", optionId: "confirm" } } }],
    ["recv", { jsonrpc: "2.0", method: "$/cancel_request", params: { requestId: 0 } }],
    ["send", { jsonrpc: "2.0", id: 3, method: "product.status", params: { productId: PRD } }],
    [
      "recv",
      {
        jsonrpc: "2.0",
        method: "x/log",
        params: { text: "session ses_0123456789abcdef0123 started at 2026-11-29T08:52:11Z" },
      },
    ],
  ];

  it("captures generated ids and server request ids, refers to them later, and replaces workspace, dates and volatile counters", () => {
    const lines = normalizeAll(recorded);
    expect(lines.map((l) => ("msg" in l ? l.msg : l))).toEqual([
      recorded[0]![1],
      { jsonrpc: "2.0", id: 1, result: { agentInfo: { name: "acp-orchestrator", version: { $type: "string" } } } },
      { jsonrpc: "2.0", id: 2, method: "product.plan", params: { goal: "Write it", cwd: { $ref: "workspace" } } },
      { jsonrpc: "2.0", id: 2, result: { productId: { $capture: "prd1" }, phase: "planning" } },
      {
        jsonrpc: "2.0",
        method: "product.checkpoint",
        params: { productId: { $ref: "prd1" }, checkpointId: { $capture: "ckp1" }, at: { $type: "iso-date" } },
      },
      {
        jsonrpc: "2.0",
        method: "product.budgetUpdate",
        params: { productId: { $ref: "prd1" }, inputTokens: { $type: "integer" }, elapsedMs: { $type: "integer" } },
      },
      {
        jsonrpc: "2.0",
        id: { $capture: "req1" },
        method: "session/request_permission",
        params: {
          toolCall: {
            toolCallId: { $template: "plan-${prd1}" },
            title: { $template: "Wrote ${workspace}/notes/t1.md" },
          },
        },
      },
      { jsonrpc: "2.0", id: { $ref: "req1" }, result: { outcome: { outcome: "selected", optionId: "confirm" } } },
      { jsonrpc: "2.0", method: "$/cancel_request", params: { requestId: { $ref: "req1" } } },
      { jsonrpc: "2.0", id: 3, method: "product.status", params: { productId: { $ref: "prd1" } } },
      {
        jsonrpc: "2.0",
        method: "x/log",
        params: {
          text: {
            $regex:
              "^session (?<ses1>ses_[0-9a-f]{20}) started at \\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,9})?(?:Z|[+-]\\d{2}:\\d{2})$",
          },
        },
      },
    ]);
  });

  it("produces a valid transcript whose recv lines match the recorded messages and whose send lines resolve back", () => {
    const lines = normalizeAll(recorded);
    const transcript = parseTranscript(formatTranscript(lines), "n.jsonl");
    let bindings = new Map<string, Json>([["workspace", WS]]);
    transcript.lines.forEach((line, i) => {
      const original = recorded[i]![1] as Json;
      if (line.kind === "recv") {
        const outcome = matchMessage(line.value.msg as Json, original, bindings);
        expect(outcome.differences).toEqual([]);
        bindings = outcome.bindings;
      } else if (line.kind === "send") {
        expect(resolveSend(line.value.msg as Json, bindings)).toEqual(original);
      }
    });
  });

  it("keeps ids the client chose literally, and wraps objects with $ keys in $literal", () => {
    const lines = normalizeAll([
      ["send", { jsonrpc: "2.0", id: "c-1", method: "product.status", params: { productId: "prd_does_not_exist" } }],
      [
        "recv",
        { jsonrpc: "2.0", id: "c-1", error: { code: -32002, data: { kind: "product", id: "prd_does_not_exist" } } },
      ],
      ["recv", { jsonrpc: "2.0", method: "odd", params: { $weird: 1 } }],
    ]);
    expect(lines.map((l) => ("msg" in l ? l.msg : l))).toEqual([
      { jsonrpc: "2.0", id: "c-1", method: "product.status", params: { productId: "prd_does_not_exist" } },
      { jsonrpc: "2.0", id: "c-1", error: { code: -32002, data: { kind: "product", id: "prd_does_not_exist" } } },
      { jsonrpc: "2.0", method: "odd", params: { $literal: { $weird: 1 } } },
    ]);
  });
});
