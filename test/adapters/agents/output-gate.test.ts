/**
 * Backpressure from the client down to worker agents (issue 7, notification streaming): the pool reads a worker's
 * stdout only while its output gate is open, so a slow client holds a streaming agent back (its pipe fills, its writes
 * wait) instead of the server buffering everything the agent says.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { AcpWorkerPool, gatedReadable } from "../../../src/adapters/agents/acp-worker.js";
import { AgentRegistry, parseAgentConfig } from "../../../src/adapters/agents/registry.js";
import { memoryLogger, recorder, sleep, taskRequest, tsxLoader } from "../../fixtures/agents/pool-helpers.js";

/** A latch the test opens; `calls` counts how often the gate was consulted while closed. */
function latch() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const state = { isOpen: false, closedCalls: 0 };
  return {
    state,
    gate: () => {
      if (state.isOpen) return Promise.resolve();
      state.closedCalls += 1;
      return opened;
    },
    open: () => {
      state.isOpen = true;
      open();
    },
  };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("gatedReadable", () => {
  it("reads nothing from the source while the gate is closed, then everything in order once it opens", async () => {
    const source = new PassThrough();
    const l = latch();
    const reader = gatedReadable(source, () => l.gate).getReader();
    source.write("first\n");
    source.end("second\n");
    let got: string | undefined;
    const first = reader.read().then((r) => (got = Buffer.from(r.value ?? new Uint8Array()).toString()));
    for (let i = 0; i < 5; i += 1) await tick();
    expect(got).toBeUndefined();
    expect(l.state.closedCalls).toBe(1);
    l.open();
    await first;
    let text = got ?? "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value).toString();
    expect(text).toBe("first\nsecond\n");
  });

  it("reads freely without a gate", async () => {
    const source = new PassThrough();
    const reader = gatedReadable(source, () => undefined).getReader();
    source.end("all\n");
    const r = await reader.read();
    expect(Buffer.from(r.value ?? new Uint8Array()).toString()).toBe("all\n");
  });
});

describe("AcpWorkerPool output gate", () => {
  let pool: AcpWorkerPool | undefined;
  afterEach(async () => {
    await pool?.shutdown();
    pool = undefined;
  });

  it("holds a streaming agent back while the gate is closed and delivers every chunk once it opens", async () => {
    const chunks = 20_000;
    const agent = join(import.meta.dirname, "..", "..", "bench", "fixtures", "streaming-agent.ts");
    const registry = new AgentRegistry(
      parseAgentConfig(
        {
          agents: [
            {
              agentId: "streamer",
              command: process.execPath,
              args: ["--import", tsxLoader, agent],
              env: { BENCH_CHUNKS: String(chunks) },
            },
          ],
        },
        join(tmpdir(), "acp-orchestrator.json"),
      ),
    );
    pool = new AcpWorkerPool({ registry, logger: memoryLogger(), graceMs: 2_000 });
    const rec = recorder();
    const l = latch();
    // Open while fewer than 1,000 chunks arrived; closed after that until the test opens it for good.
    pool.setOutputGate(() => (rec.texts.length < 1_000 ? Promise.resolve() : l.gate()));
    const cwd = mkdtempSync(join(tmpdir(), "acp-gate-"));
    const result = pool.runTask(taskRequest("streamer", cwd), rec.events);

    for (let i = 0; i < 600 && l.state.closedCalls === 0; i += 1) await sleep(25);
    expect(l.state.closedCalls).toBeGreaterThan(0);
    const held = rec.texts.length;
    await sleep(300);
    // Nothing more was read while closed: at most what one read had already brought in.
    expect(rec.texts.length).toBe(held);
    expect(held).toBeLessThan(chunks / 2);

    l.open();
    const outcome = await result;
    expect(outcome.outcome).toBe("completed");
    expect(rec.texts).toHaveLength(chunks);
    expect(rec.texts[chunks - 1]).toBe(`chunk ${chunks - 1}\n`);
  }, 90_000);
});
