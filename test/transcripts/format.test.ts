/**
 * The transcript format (src/transcripts/format.ts, protocol/TRANSCRIPTS.md "Format"): valid files parse into
 * numbered lines; every kind of mistake is reported as `SOURCE:LINE: path: what`, all of them at once.
 */
import { describe, expect, it } from "vitest";
import {
  formatTranscript,
  namesIn,
  parseTranscript,
  TranscriptFormatError,
  type TranscriptLine,
} from "../../src/transcripts/format.js";

const lines = (...objects: unknown[]) => objects.map((o) => (typeof o === "string" ? o : JSON.stringify(o))).join("\n");

function problems(text: string): readonly string[] {
  try {
    parseTranscript(text, "t.jsonl");
  } catch (err) {
    expect(err).toBeInstanceOf(TranscriptFormatError);
    return (err as TranscriptFormatError).problems;
  }
  throw new Error("expected a TranscriptFormatError");
}

describe("parseTranscript", () => {
  it("parses header, comments, send (msg and raw) and recv lines with their line numbers, skipping blank lines", () => {
    const t = parseTranscript(
      lines(
        { transcript: { version: 1, title: "A title" } },
        { comment: "hello" },
        "",
        { dir: "send", msg: { jsonrpc: "2.0", id: 1, method: "product.plan", params: { cwd: { $ref: "workspace" } } } },
        { dir: "recv", msg: { id: 1, result: { productId: { $capture: "prd1" } } }, timeoutMs: 500, ordered: true },
        { dir: "send", msg: { jsonrpc: "2.0", id: 2, method: "x", params: { p: { $template: "a-${prd1}" } } } },
        { dir: "send", raw: "not json" },
      ) + "\r\n",
      "t.jsonl",
    );
    expect(t.title).toBe("A title");
    expect(t.lines.map((l) => [l.line, l.kind])).toEqual([
      [1, "header"],
      [2, "comment"],
      [4, "send"],
      [5, "recv"],
      [6, "send"],
      [7, "raw"],
    ]);
  });

  it("reports a line that is not JSON and a line of unknown kind, with their line numbers", () => {
    expect(problems(lines({ dir: "send", msg: {} }, "{nope", { dir: "sideways", msg: {} }))).toEqual([
      expect.stringMatching(/^t\.jsonl:2: not JSON \(/),
      expect.stringMatching(/^t\.jsonl:3: a line is \{"dir": "send"\|"recv", \.\.\.\}/),
    ]);
  });

  it("reports schema problems with their path (unknown keys, a negative timeout, a recv msg that is an array)", () => {
    expect(
      problems(
        lines(
          { dir: "recv", msg: {}, timeoutMs: -1 },
          { dir: "recv", msg: [1] },
          { dir: "send", msg: {}, extra: true },
          { transcript: { version: 2, title: "x" } },
        ),
      ),
    ).toEqual([
      "t.jsonl:1: timeoutMs: Too small: expected number to be >0",
      expect.stringMatching(/^t\.jsonl:2: msg: /),
      expect.stringMatching(/^t\.jsonl:3: \(line\): Unrecognized key: "extra"/),
      't.jsonl:4: the {"transcript": …} header must be the first line',
      expect.stringMatching(/^t\.jsonl:4: transcript\.version: /),
    ]);
  });

  it("refuses match-only operators in send lines and malformed operators anywhere", () => {
    expect(
      problems(
        lines(
          { dir: "send", msg: { id: { $any: true } } },
          { dir: "recv", msg: { id: { $type: "date" } } },
          { dir: "recv", msg: { id: { $regex: "(" } } },
          { dir: "recv", msg: { id: { $foo: 1 } } },
          { dir: "recv", msg: { id: { $capture: "1bad" } } },
          { dir: "recv", msg: { id: { $any: true, $type: "string" } } },
        ),
      ),
    ).toEqual([
      "t.jsonl:1: msg.id: $any is for recv lines; a send line may only use $ref, $template and $literal",
      expect.stringMatching(/^t\.jsonl:2: msg\.id: \$type must be one of string, number, integer/),
      expect.stringMatching(/^t\.jsonl:3: msg\.id: \$regex does not compile: /),
      expect.stringMatching(/^t\.jsonl:4: msg\.id: unknown operator key \$foo/),
      "t.jsonl:5: msg.id: $capture must be a name: a letter, then letters, digits or _",
      't.jsonl:6: msg.id: write {"$any": true} alone',
    ]);
  });

  it("refuses a $ref or ${name} to a name not captured on an earlier line, but accepts one captured earlier in the same pattern and workspace", () => {
    expect(
      problems(
        lines(
          { dir: "send", msg: { id: 1, params: { productId: { $ref: "prd1" } } } },
          {
            dir: "recv",
            msg: { result: { a: { $capture: "x" }, b: { $ref: "x" }, c: { $template: "${workspace}/${y}" } } },
          },
          { dir: "recv", msg: { result: { s: { $regex: "^(?<z>\\d+)-${z}$" } } } },
        ),
      ),
    ).toEqual([
      't.jsonl:1: msg.params.productId: $ref "prd1" is not captured on an earlier line',
      't.jsonl:2: msg.result.c: ${…} in $template "y" is not captured on an earlier line',
      't.jsonl:3: msg.result.s: ${…} in $regex "z" is not captured on an earlier line',
    ]);
  });

  it("counts regex named groups as captures for later lines", () => {
    const t = parseTranscript(
      lines(
        { dir: "recv", msg: { params: { toolCallId: { $regex: "^plan-(?<prd1>prd_[0-9a-f]{20})$" } } } },
        { dir: "send", msg: { params: { productId: { $ref: "prd1" } } } },
      ),
      "t.jsonl",
    );
    expect(t.lines).toHaveLength(2);
  });

  it("refuses an empty transcript", () => {
    expect(problems(lines({ comment: "only a comment" }))).toEqual([
      "t.jsonl: the transcript has no send or recv line",
    ]);
  });

  it("round-trips through formatTranscript", () => {
    const source: TranscriptLine[] = [
      { transcript: { version: 1, title: "x" } },
      { dir: "send", msg: { jsonrpc: "2.0", id: 1, method: "m" } },
      { dir: "recv", msg: { id: 1 }, timeoutMs: 10 },
    ];
    const text = formatTranscript(source);
    expect(text.endsWith("\n")).toBe(true);
    expect(parseTranscript(text, "r").lines.map((l) => l.value)).toEqual(source);
  });

  it("lists the names a pattern captures and uses", () => {
    expect(
      namesIn({
        a: { $capture: "c1" },
        b: [{ $ref: "r1" }, { $template: "x${r2}" }],
        c: { $regex: "(?<c2>a)${r3}" },
        d: { $exact: { e: { $capture: "c3" } } },
      }),
    ).toEqual({ captures: ["c1", "c2", "c3"], refs: ["r1", "r2", "r3"] });
  });
});
