/**
 * The replayer (src/transcripts/replayer.ts, protocol/TRANSCRIPTS.md "Replaying") against a tiny scripted stdio
 * server (a real subprocess, no SDK): interleaving, `ordered`, batching of consecutive sends, the mismatch report,
 * stdout hygiene, exit checks, custom commands with `{workspace}`, and invalid files.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseTranscript } from "../../src/transcripts/format.js";
import { formatResult, replayFiles, replayTranscript, summaryLine } from "../../src/transcripts/replayer.js";

const dir = mkdtempSync(join(tmpdir(), "acp-replayer-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A line-based JSON-RPC server: answers every request after a `note` notification; modes change its behaviour. */
const FAKE = join(dir, "fake-server.mjs");
writeFileSync(
  FAKE,
  `import { createInterface } from "node:readline";
const mode = process.argv[2] ?? "echo";
let chunks = 0;
process.stdin.on("data", () => { chunks++; });
const out = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
createInterface({ input: process.stdin })
  .on("line", (line) => {
    const m = JSON.parse(line);
    if (mode === "garbage") process.stdout.write("hello from stdout\\n");
    if (m.method === "die") process.exit(4);
    if (m.method === "two") { out({ jsonrpc: "2.0", method: "n", params: { k: 2 } }); out({ jsonrpc: "2.0", method: "n", params: { k: 1 } }); }
    if (m.id !== undefined && m.method) {
      out({ jsonrpc: "2.0", method: "note", params: { about: m.id } });
      out({ jsonrpc: "2.0", id: m.id, result: { method: m.method, params: m.params ?? null, chunk: chunks,
        argv: process.argv.slice(3), ws: process.env.ACP_TRANSCRIPT_WORKSPACE ?? null } });
    }
  })
  .on("close", () => process.exit(mode === "bad-exit" ? 3 : 0));
`,
);

const fake = (mode = "echo", ...args: string[]) => [process.execPath, FAKE, mode, ...args];
const t = (...objects: unknown[]) => parseTranscript(objects.map((o) => JSON.stringify(o)).join("\n"), "inline.jsonl");
const req = (id: number, method: string, params: unknown = {}) => ({
  dir: "send",
  msg: { jsonrpc: "2.0", id, method, params },
});

describe("replayTranscript", () => {
  it("passes when every recv line finds a fitting message, in any order, and the server exits 0", async () => {
    const result = await replayTranscript(
      t(
        req(1, "a", { x: 1 }),
        { dir: "recv", msg: { id: 1, result: { method: "a", params: { x: 1 } } } },
        { dir: "recv", msg: { method: "note", params: { about: 1 } } },
      ),
      { command: fake() },
    );
    expect(formatResult(result)).toMatch(/^PASS inline\.jsonl \(3 lines, 2 messages received, [\d.]+ s\)$/);
    expect(result.ok).toBe(true);
  });

  it("writes a run of consecutive send lines in one write", async () => {
    const result = await replayTranscript(
      t(
        req(1, "a"),
        req(2, "b"),
        { dir: "recv", msg: { id: 1, result: { chunk: { $capture: "c" } } } },
        { dir: "recv", msg: { id: 2, result: { chunk: { $ref: "c" } } } },
        req(3, "c"),
        { dir: "recv", msg: { id: 3, result: { chunk: 2 } } },
      ),
      { command: fake() },
    );
    expect(result.failure).toBeUndefined();
  });

  it("with ordered, requires the message to arrive after the previous ordered line's", async () => {
    const lines = (ordered: boolean) =>
      t(
        req(1, "two"),
        { dir: "recv", msg: { method: "n", params: { k: 1 } }, ordered },
        { dir: "recv", msg: { method: "n", params: { k: 2 } }, ordered, timeoutMs: 5000 },
      );
    expect((await replayTranscript(lines(false), { command: fake() })).ok).toBe(true);
    const result = await replayTranscript(lines(true), { command: fake() });
    expect(result.failure).toMatchObject({
      line: 3,
      reason: "no received message fits this recv line (waited 5000 ms, only after message #1)",
    });
  });

  it("reports the first mismatch with the expected pattern, the closest received message and the keys that differed", async () => {
    const result = await replayTranscript(
      t(req(7, "status"), {
        dir: "recv",
        msg: { id: 7, result: { method: "status", params: { phase: "paused" } } },
        timeoutMs: 5000,
      }),
      { command: fake() },
    );
    expect(result.ok).toBe(false);
    expect(result.failure?.line).toBe(2);
    expect(result.failure?.closest?.index).toBe(1);
    const report = formatResult(result);
    expect(report).toContain("FAIL inline.jsonl");
    expect(report).toContain("line 2: no received message fits this recv line (waited 5000 ms)");
    expect(report).toContain('expected: {"id":7,"result":{"method":"status","params":{"phase":"paused"}}}');
    expect(report).toContain(
      'closest received (message #1): {"jsonrpc":"2.0","id":7,"result":{"method":"status","params":{}',
    );
    expect(report).toContain('    result.params.phase: expected "paused", got (missing)');
  });

  it("fails when the server writes a stdout line that is not JSON", async () => {
    const result = await replayTranscript(t(req(1, "a"), { dir: "recv", msg: { id: 1 } }), {
      command: fake("garbage"),
    });
    expect(result.failure?.reason).toBe('the server wrote a stdout line that is not JSON: "hello from stdout"');
  });

  it("fails when the server exits before a fitting message, or exits non-zero after the transcript", async () => {
    const died = await replayTranscript(t(req(1, "die"), { dir: "recv", msg: { id: 1 } }), { command: fake() });
    expect(died.failure).toMatchObject({
      line: 2,
      reason: "the server exited (code 4) before a message fitting this recv line arrived",
    });
    const badExit = await replayTranscript(t(req(1, "a"), { dir: "recv", msg: { id: 1 } }), {
      command: fake("bad-exit"),
    });
    expect(badExit.failure?.reason).toBe("the server exited (code 3) after the transcript; expected exit code 0");
    const missing = await replayTranscript(t(req(1, "a")), { command: [join(dir, "no-such-server")] });
    expect(missing.failure?.reason).toMatch(/^the server could not start \(spawn .*ENOENT\)/);
  });

  it("replaces {workspace} and {stateDir} in a custom command and predefines workspace", async () => {
    const result = await replayTranscript(
      t(req(1, "a"), {
        dir: "recv",
        msg: { id: 1, result: { argv: [{ $ref: "workspace" }, { $regex: "/state$" }], ws: { $ref: "workspace" } } },
      }),
      { command: fake("echo", "{workspace}", "{stateDir}") },
    );
    expect(result.failure).toBeUndefined();
    expect(result.tempDir).toMatch(/acp-transcript-/);
  });
});

describe("replayFiles", () => {
  it("reports an invalid file as a failure with its problems, keeps the order of files, and counts", async () => {
    const good = join(dir, "good.jsonl");
    const bad = join(dir, "bad.jsonl");
    writeFileSync(good, `${JSON.stringify(req(1, "a"))}\n${JSON.stringify({ dir: "recv", msg: { id: 1 } })}\n`);
    writeFileSync(bad, `${JSON.stringify({ dir: "send", msg: { id: { $any: true } } })}\n`);
    const { results, passed, failed } = await replayFiles([bad, good, join(dir, "missing.jsonl")], {
      command: fake(),
      jobs: 2,
    });
    expect(results.map((r) => [r.source, r.ok])).toEqual([
      [bad, false],
      [good, true],
      [join(dir, "missing.jsonl"), false],
    ]);
    expect(results[0]!.failure?.reason).toBe(
      `invalid transcript:\n${bad}:1: msg.id: $any is for recv lines; a send line may only use $ref, $template and $literal`,
    );
    expect(results[2]!.failure?.reason).toMatch(/^cannot read the file: ENOENT/);
    expect(summaryLine(passed, failed)).toBe("1 passed, 2 failed");
  });
});
