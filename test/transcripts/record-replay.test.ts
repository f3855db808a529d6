/**
 * Issue 6, "Must show": recording a session with the server through `acp-orchestrator record --normalize` (the
 * official ACP SDK client in front, the built server behind) and replaying the file against a fresh server passes;
 * the same file edited to expect a different value fails with a clear mismatch and a non-zero exit. Also: the proxy
 * is byte-for-byte transparent both ways and passes stderr through.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Readable, Writable } from "node:stream";
import { client, ndJsonStream } from "@agentclientprotocol/sdk";
import { afterAll, describe, expect, it } from "vitest";
import { parseTranscript } from "../../src/transcripts/format.js";

const REPO = join(import.meta.dirname, "..", "..");
const CLI = join(REPO, "dist", "src", "cli.js");
const dir = mkdtempSync(join(tmpdir(), "acp-record-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI to completion; resolves with its exit code and output. */
function runCli(args: string[], cwd = dir): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

type Msg = Record<string, unknown>;

/**
 * Records one session with the official SDK client through the recorder in front of the built server: a product
 * planned, confirmed and run to completion on the built-in agents, its status, and an ACP session whose plan is
 * revised (permission answered "revise").
 */
async function recordSession(out: string): Promise<{ stdoutLines: string[]; code: number | null }> {
  const workspace = mkdtempSync(join(dir, "ws-"));
  const stateDir = mkdtempSync(join(dir, "state-"));
  const child = spawn(
    process.execPath,
    [
      CLI,
      "record",
      "--out",
      out,
      "--normalize",
      "--",
      process.execPath,
      CLI,
      "serve",
      "--state",
      join(stateDir, "s.db"),
    ],
    { cwd: stateDir, stdio: ["pipe", "pipe", "pipe"] },
  );
  child.stderr.resume();
  const stdoutLines: string[] = [];
  let buffer = "";
  const pass = new PassThrough();
  child.stdout.on("data", (chunk: Buffer) => {
    buffer += chunk.toString("utf8");
    let i: number;
    while ((i = buffer.indexOf("\n")) >= 0) {
      stdoutLines.push(buffer.slice(0, i));
      buffer = buffer.slice(i + 1);
    }
    pass.write(chunk);
  });
  child.stdout.on("end", () => pass.end());
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  const notifications: Msg[] = [];
  const waiters: (() => void)[] = [];
  const waitFor = async (pred: (n: Msg) => boolean) => {
    const deadline = Date.now() + 20_000;
    while (!notifications.some(pred)) {
      if (Date.now() > deadline) throw new Error(`timed out: ${JSON.stringify(notifications.map((n) => n.method))}`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  };
  const connection = client({ name: "record-test" })
    .onRequest("session/request_permission", () => ({ outcome: { outcome: "selected", optionId: "revise" } }) as never)
    .onNotification("*", ({ method, params }) => {
      notifications.push({ method, params });
      for (const w of waiters.splice(0)) w();
    })
    .connect(
      ndJsonStream(
        Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
        Readable.toWeb(pass) as ReadableStream<Uint8Array>,
      ),
    );
  const request = <T = Msg>(method: string, params: unknown) => connection.agent.request<T>(method, params);
  await request("initialize", { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "t", version: "1" } });
  const goal = "- Write the parser\n- Then write the tests for the parser";
  const { productId } = await request<{ productId: string }>("product.plan", { goal, cwd: workspace });
  await waitFor((n) => n.method === "product.planReady");
  await request("product.confirm", { productId });
  await waitFor((n) => n.method === "product.completed");
  await request("product.status", { productId });
  const { sessionId } = await request<{ sessionId: string }>("session/new", { cwd: workspace, mcpServers: [] });
  const turn = await request<{ stopReason: string }>("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "Write the release notes" }],
  });
  expect(turn.stopReason).toBe("end_turn");
  child.stdin.end();
  return { stdoutLines, code: await exited };
}

describe("record, then replay", () => {
  const file = join(dir, "session.jsonl");

  it("records a session through the proxy (the SDK client works through it) and the file replays against a fresh server", async () => {
    expect(existsSync(CLI), "run `npm run build` first").toBe(true);
    const { stdoutLines, code } = await recordSession(file);
    expect(code).toBe(0);
    const transcript = parseTranscript(readFileSync(file, "utf8"), file);
    // One recv line per message the client received, nothing invented, nothing lost.
    expect(transcript.lines.filter((l) => l.kind === "recv")).toHaveLength(stdoutLines.length);
    const text = readFileSync(file, "utf8");
    expect(text).toContain('"productId":{"$capture":"prd1"}');
    expect(text).toContain('"id":{"$capture":"req1"},"method":"session/request_permission"');
    expect(text).toContain('"id":{"$ref":"req1"},"result":{"outcome":{"outcome":"selected","optionId":"revise"}}');
    expect(text).not.toMatch(/prd_[0-9a-f]{20}|ses_[0-9a-f]{20}|\d{4}-\d{2}-\d{2}T\d{2}:/);

    const replay = await runCli(["replay", file]);
    expect(replay.stdout, replay.stdout).toMatch(/^PASS .*session\.jsonl/);
    expect(replay.stdout.trimEnd().split("\n").at(-1)).toBe("1 passed, 0 failed");
    expect(replay.code).toBe(0);
  });

  it("reports a clear mismatch and exits 1 when the transcript is edited to expect a different value", async () => {
    const edited = join(dir, "edited.jsonl");
    const original = readFileSync(file, "utf8");
    const target = '"result":{"productId":{"$capture":"prd1"},"phase":"planning"}';
    expect(original).toContain(target);
    writeFileSync(edited, original.replace(target, target.replace('"planning"', '"executing"')));
    const lineNo = original.split("\n").findIndex((l) => l.includes(target)) + 1;

    const replay = await runCli(["replay", edited, "--timeout", "8000"]);
    expect(replay.code).toBe(1);
    const out = replay.stdout;
    expect(out).toContain(`FAIL ${edited}`);
    expect(out).toContain(`line ${lineNo}: no received message fits this recv line (waited 8000 ms)`);
    const id = /"id":(\d+),"result":\{"productId":\{"\$capture"/.exec(original)![1];
    expect(out).toContain(
      `expected: {"jsonrpc":"2.0","id":${id},"result":{"productId":{"$capture":"prd1"},"phase":"executing"}}`,
    );
    expect(out).toMatch(
      new RegExp(
        `closest received \\(message #\\d+\\): \\{"jsonrpc":"2\\.0","id":${id},"result":\\{"productId":"prd_[0-9a-f]{20}","phase":"planning"\\}\\}`,
      ),
    );
    expect(out).toContain('    result.phase: expected "executing", got "planning"');
    expect(out.trimEnd().split("\n").at(-1)).toBe("0 passed, 1 failed");
  });
});

describe("the recording proxy", () => {
  it("passes bytes both ways unchanged, passes stderr through, and records raw input and non-JSON output", async () => {
    const received = join(dir, "agent-stdin.bin");
    const agent = join(dir, "odd-agent.mjs");
    const agentOutput = '{"jsonrpc":"2.0",  "id":1,"result":{"text":"ünïcödé ✓"}}\r\nnot json from the agent\n';
    writeFileSync(
      agent,
      `import { writeFileSync } from "node:fs";
const chunks = [];
let answered = false;
process.stdin.on("data", (c) => {
  chunks.push(c);
  if (!answered && Buffer.concat(chunks).includes("\\n")) {
    answered = true;
    process.stdout.write(${JSON.stringify(agentOutput)});
  }
});
process.stdin.on("end", () => { writeFileSync(process.argv[2], Buffer.concat(chunks)); process.stderr.write("agent stderr line\\n"); });
`,
    );
    const out = join(dir, "odd.jsonl");
    const child = spawn(process.execPath, [CLI, "record", "--out", out, "--", process.execPath, agent, received], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    const stdout: Buffer[] = [];
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => stdout.push(c));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const first = '{"jsonrpc":"2.0","id":1,"method":"x","params":{"ü":1}}\n';
    const rest = "  \nnot json from the client\n";
    const input = first + rest;
    // The request in two chunks; the rest only once the agent answered, so the transcript order is fixed.
    child.stdin.write(first.slice(0, 10));
    child.stdin.write(first.slice(10));
    await new Promise((resolve) => child.stdout.once("data", resolve));
    child.stdin.end(rest);
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    expect(code).toBe(0);
    expect(Buffer.concat(stdout).toString("utf8")).toBe(agentOutput);
    expect(readFileSync(received, "utf8")).toBe(input);
    expect(stderr).toBe("agent stderr line\n");
    const lines = readFileSync(out, "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Msg);
    expect(lines).toEqual([
      { transcript: { version: 1, title: expect.stringMatching(/^Recorded from: .*odd-agent\.mjs/) } },
      { dir: "send", msg: { jsonrpc: "2.0", id: 1, method: "x", params: { ü: 1 } } },
      { dir: "recv", msg: { jsonrpc: "2.0", id: 1, result: { text: "ünïcödé ✓" } } },
      { comment: "agent wrote a non-JSON line: not json from the agent" },
      { dir: "send", raw: "not json from the client" },
    ]);
  });

  it("refuses a call without --out or without a command, with usage on stderr and exit code 2", async () => {
    const noOut = await runCli(["record", "--", "true"]);
    expect(noOut.code).toBe(2);
    expect(noOut.stderr).toContain("record needs --out FILE");
    const noCommand = await runCli(["record", "--out", join(dir, "x.jsonl")]);
    expect(noCommand.code).toBe(2);
    expect(noCommand.stderr).toContain("record needs the agent command after --");
    const noFiles = await runCli(["replay"]);
    expect(noFiles.code).toBe(2);
    expect(noFiles.stderr).toContain("replay needs at least one transcript file");
  });
});
