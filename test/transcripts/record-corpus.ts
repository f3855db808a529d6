/**
 * Regenerates the transcript corpus in protocol/transcripts/ by recording real sessions with the recorder
 * (`acp-orchestrator record --normalize`) in front of the built server, driven by scripted clients.
 *
 *   npm run build && npx tsx test/transcripts/record-corpus.ts [scenario-name...]
 *
 * Each scenario is a small client script (test/transcripts/corpus-scenarios.ts). After recording, a documented
 * post-processing step (see `finish`) adds the title, comments before the lines they explain, and per-scenario
 * adjustments: notifications the scenario does not care about are dropped (responses and every message the script
 * waited for are always kept), `ordered` is set on notification sequences, and values that depend on timing or on
 * token estimates (budget wording and limits) are loosened. The `initialize` answer is kept in full only in
 * initialize.jsonl. It is a developer tool, not a test: the corpus test replays what it wrote.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Json, RecvLine, TranscriptLine } from "../../src/transcripts/format.js";
import { namesIn, parseTranscript } from "../../src/transcripts/format.js";
import { makeRunDirectories } from "../../src/transcripts/replayer.js";
import { MessageTap } from "../../src/transcripts/stream-tap.js";
import { scenarios, type Scenario } from "./corpus-scenarios.js";

const REPO = resolve(import.meta.dirname, "..", "..");
const CLI = join(REPO, "dist", "src", "cli.js");
const OUT_DIR = join(REPO, "protocol", "transcripts");

type Msg = Record<string, unknown>;

/** A scripted JSON-RPC client talking to the recorder's stdio (which proxies the server's). */
export class ScriptClient {
  /** Every message received, in arrival order (index = recv line index in the recording). */
  readonly received: Msg[] = [];
  /** Received indices the script waited for (never dropped). */
  readonly essential = new Set<number>();
  /** Received indices to drop regardless of the scenario's `keep`. */
  readonly dropped = new Set<number>();
  /** Comments to put before the send line with this index. */
  readonly notes = new Map<number, string[]>();
  private readonly taken = new Set<number>();
  private sent = 0;
  private nextId = 0;
  private waiters: (() => void)[] = [];
  readonly exited: Promise<number | null>;

  constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    readonly workspace: string,
  ) {
    const tap = new MessageTap((m) => {
      this.received.push((m.value ?? { nonJson: m.text }) as Msg);
      for (const w of this.waiters.splice(0)) w();
    });
    child.stdout.on("data", (c: Buffer) => tap.push(c));
    this.exited = new Promise((r) => child.once("close", (code) => r(code)));
  }

  /** A comment placed before the next message this client sends. */
  note(text: string): void {
    const list = this.notes.get(this.sent) ?? [];
    list.push(text);
    this.notes.set(this.sent, list);
  }

  /** Writes messages (objects) or raw lines (strings) in one write. */
  write(...messages: (Msg | unknown[] | string)[]): void {
    const text = messages.map((m) => (typeof m === "string" ? m : JSON.stringify(m))).join("\n") + "\n";
    this.sent += messages.length;
    this.child.stdin.write(text);
  }

  id(): number {
    return ++this.nextId;
  }

  /** Sends a request and returns its id and a promise of the response. */
  start(method: string, params: unknown = {}): { id: number; response: Promise<Msg> } {
    const id = this.id();
    this.write({ jsonrpc: "2.0", id, method, params });
    return { id, response: this.waitFor((m) => m.id === id && m.method === undefined) };
  }

  /** Sends a request and waits for its response. */
  call(method: string, params: unknown = {}): Promise<Msg> {
    return this.start(method, params).response;
  }

  /** Sends several requests in one write; resolves with their responses in the same order. */
  callTogether(...calls: [string, unknown][]): Promise<Msg[]> {
    const ids = calls.map(() => this.id());
    this.write(...calls.map(([method, params], i) => ({ jsonrpc: "2.0", id: ids[i], method, params })));
    return Promise.all(ids.map((id) => this.waitFor((m) => m.id === id && m.method === undefined)));
  }

  notify(method: string, params: unknown = {}): void {
    this.write({ jsonrpc: "2.0", method, params });
  }

  respond(id: unknown, result: unknown): void {
    this.write({ jsonrpc: "2.0", id, result });
  }

  /** Resolves with the first not-yet-taken received message that satisfies `pred` (waits up to `timeoutMs`). */
  async waitFor(pred: (m: Msg) => boolean, timeoutMs = 60_000): Promise<Msg> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.received.findIndex((m, k) => !this.taken.has(k) && pred(m));
      if (i >= 0) {
        this.taken.add(i);
        this.essential.add(i);
        return this.received[i]!;
      }
      if (Date.now() > deadline) {
        throw new Error(
          `timed out; received:\n${this.received.map((m) => JSON.stringify(m).slice(0, 200)).join("\n")}`,
        );
      }
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  /** A notification `method` (bare or `_`) about `productId`. */
  product(method: string, productId: string, extra: (p: Msg) => boolean = () => true): Promise<Msg> {
    return this.waitFor(
      (m) =>
        (m.method === method || m.method === `_${method}`) &&
        (m.params as Msg | undefined)?.productId === productId &&
        extra(m.params as Msg),
    );
  }

  /** The number of messages received so far (a mark for `dropSince`). */
  mark(): number {
    return this.received.length;
  }

  /** Drops the notifications received since `mark` (not responses, not waited-for messages) from the transcript. */
  dropSince(mark: number, pred: (m: Msg) => boolean = () => true): void {
    for (let i = mark; i < this.received.length; i++) {
      const m = this.received[i]!;
      if (m.method !== undefined && m.id === undefined && pred(m)) this.dropped.add(i);
    }
  }

  close(): Promise<number | null> {
    this.child.stdin.end();
    return this.exited;
  }
}

/**
 * The initialize answer is checked in full only in initialize.jsonl; elsewhere only these keys, so that a method added
 * to the table (advertised in `_meta`) changes one transcript, not all of them.
 */
const INITIALIZE_ESSENTIALS: Record<string, Json> = {
  protocolVersion: 1,
  agentInfo: { name: "acp-orchestrator", version: { $type: "string" } },
};

function isInitializeAnswer(m: Record<string, unknown>): boolean {
  const result = m.result as Record<string, unknown> | undefined;
  return m.method === undefined && typeof result === "object" && result !== null && "agentCapabilities" in result;
}

/** A recv line the scenario does not keep, unless a kept line needs a name it captures. */
interface Dropped {
  dropped: RecvLine;
}

/**
 * Un-drops the first line capturing each name that a kept line refers to but no earlier kept line captures, so that
 * dropping notifications never leaves a `$ref` without its capture.
 */
function restoreCapturingLines(lines: (TranscriptLine | Dropped)[]): void {
  const captured = new Set<string>(["workspace"]);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if ("dropped" in line) continue;
    if (!("msg" in line)) continue;
    const { captures, refs } = namesIn(line.msg as Json);
    for (const ref of refs) {
      if (captured.has(ref)) continue;
      const j = lines.findIndex(
        (l, k) => k < i && "dropped" in l && namesIn(l.dropped.msg as Json).captures.includes(ref),
      );
      if (j >= 0) {
        const restored = (lines[j] as Dropped).dropped;
        lines[j] = restored;
        for (const n of namesIn(restored.msg).captures) captured.add(n);
      }
    }
    for (const n of captures) captured.add(n);
  }
}

/** Post-processing of one recording (see the file header). */
function finish(scenario: Scenario, client: ScriptClient, file: string): void {
  const rows = readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "");
  const out: (TranscriptLine | Dropped)[] = [
    { transcript: { version: 1, title: scenario.title, description: scenario.description } },
  ];
  let sendIndex = 0;
  let recvIndex = 0;
  for (const row of rows.slice(1)) {
    const line = JSON.parse(row) as TranscriptLine & { dir?: string; msg?: Record<string, Json> };
    if ("dir" in line && line.dir === "send") {
      for (const text of client.notes.get(sendIndex) ?? []) out.push({ comment: text });
      sendIndex++;
      out.push(line);
      continue;
    }
    const index = recvIndex++;
    if (!("dir" in line) || line.dir !== "recv" || !line.msg) {
      out.push(line);
      continue;
    }
    const raw = client.received[index]!;
    const isNotification = raw.method !== undefined && raw.id === undefined;
    const keep =
      client.essential.has(index) ||
      !isNotification ||
      (!client.dropped.has(index) && (scenario.keep ? scenario.keep(raw) : true));
    let msg = scenario.loosen ? scenario.loosen(line.msg, raw) : line.msg;
    if (scenario.name !== "initialize" && isInitializeAnswer(raw)) msg = { ...msg, result: INITIALIZE_ESSENTIALS };
    const recv: TranscriptLine = { dir: "recv", msg };
    if (scenario.timeoutMs) recv.timeoutMs = scenario.timeoutMs;
    if (scenario.ordered?.(raw)) recv.ordered = true;
    out.push(keep ? recv : { dropped: recv });
  }
  for (const text of client.notes.get(sendIndex) ?? []) out.push({ comment: text });
  restoreCapturingLines(out);
  const text =
    out
      .filter((l) => !("dropped" in l))
      .map((l) => JSON.stringify(l))
      .join("\n") + "\n";
  parseTranscript(text, file); // validates what we are about to write
  writeFileSync(file, text);
}

async function recordScenario(scenario: Scenario): Promise<void> {
  const dirs = makeRunDirectories();
  const file = join(OUT_DIR, `${scenario.name}.jsonl`);
  const child = spawn(
    process.execPath,
    [
      CLI,
      "record",
      "--out",
      file,
      "--normalize",
      "--",
      process.execPath,
      CLI,
      "serve",
      "--state",
      join(dirs.stateDir, "state.db"),
    ],
    { cwd: dirs.stateDir, stdio: ["pipe", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => (stderr += d));
  const client = new ScriptClient(child, dirs.workspace);
  const started = Date.now();
  try {
    await scenario.run(client);
  } catch (err) {
    child.kill("SIGKILL");
    throw new Error(
      `${scenario.name}: ${err instanceof Error ? err.message : String(err)}\nstderr: ${stderr.slice(-3000)}`,
    );
  }
  const code = await client.close();
  if (code !== 0) throw new Error(`${scenario.name}: the recorded server exited with ${code}\n${stderr.slice(-3000)}`);
  finish(scenario, client, file);
  rmSync(dirs.root, { recursive: true, force: true });
  process.stdout.write(`recorded ${scenario.name} (${client.received.length} messages, ${Date.now() - started} ms)\n`);
}

const wanted = process.argv.slice(2);
for (const s of scenarios) {
  if (wanted.length === 0 || wanted.includes(s.name)) await recordScenario(s);
}
