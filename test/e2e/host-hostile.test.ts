/**
 * Hostile run-state hosts are bounded (issue 31; DESIGN.md guarantee 14; PROTOCOL.md section 7). The host is a
 * script (test/fixtures/hosts/hostile-host.ts) that spawns the built server and is its client: one product's stream
 * answers `readEvents` with full pages of valid consecutive events and `more: true` forever, another's with ~40 MB
 * pages. Reading either must fail that product closed, in under 10 s, with a `-32013` whose message names the host's
 * fault, while the server's resident memory stays under 300 MB (its peak, VmHWM) and `product.list` /
 * `product.status` of the other products keep answering in under 1 s throughout.
 *
 * Before the bounds: the endless host drove the server to thousands of calls and ~900 MB, and `product.status` of the
 * bad product never answered (issue 31).
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { isJsonRpcLine, tempDir } from "../support/server-process.js";
import { hostCapabilities } from "../support/test-host.js";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
/** The products the fixture seeds (hostile-host.ts): good ones, and the two its hostile answers are for. */
const GOOD = 3;
const ENDLESS = "prd_endless";
const HUGE = "prd_huge";
const RSS_BOUND_MIB = 300;
const FAIL_CLOSED_MS = 10_000;
const ANSWER_MS = 1_000;

/** Resident memory of a process (VmRSS now, or VmHWM: its peak), in MiB. Linux only. */
function memoryMiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(new RegExp(`${field}:\\s+(\\d+)\\s+kB`).exec(status)?.[1] ?? NaN) / 1024;
}

interface Answer {
  id: number;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
}

let host: ChildProcessWithoutNullStreams | undefined;
afterAll(() => {
  if (host && host.exitCode === null) host.kill("SIGKILL");
});

function startHost(): {
  call(method: string, params: unknown): Promise<Answer>;
  serverPid: Promise<number>;
  lines: string[];
} {
  const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/hosts/hostile-host.ts"], {
    cwd: REPO,
    env: {
      ...process.env,
      HOSTILE_HOST_SERVER_ARGS: JSON.stringify(["--state", join(tempDir("acp-hostile-"), "s.db")]),
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  host = child;
  const lines: string[] = [];
  const waiting = new Map<number, (a: Answer) => void>();
  let partial = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    partial += chunk;
    let at: number;
    while ((at = partial.indexOf("\n")) >= 0) {
      const line = partial.slice(0, at);
      partial = partial.slice(at + 1);
      lines.push(line);
      const m = JSON.parse(line) as Answer;
      waiting.get(m.id)?.(m);
      waiting.delete(m.id);
    }
  });
  let stderr = "";
  const serverPid = new Promise<number>((resolve) => {
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
      const m = /hostile-host: server pid (\d+)/.exec(stderr);
      if (m) resolve(Number(m[1]));
    });
  });
  let next = 1;
  return {
    lines,
    serverPid,
    call(method, params) {
      const id = next++;
      child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
      return new Promise((resolve) => waiting.set(id, resolve));
    },
  };
}

describe("a hostile run-state host cannot exhaust the server (issue 31)", () => {
  it("endless pages and 40 MB pages fail their products closed in bounded memory while other products answer", async () => {
    const h = startHost();
    const pid = await h.serverPid;
    const init = await h.call("initialize", { protocolVersion: 1, clientCapabilities: hostCapabilities() });
    expect(init.error).toBeUndefined();
    // The good products answer before anything hostile starts (and are loaded once).
    for (let i = 0; i < GOOD; i += 1) {
      expect((await h.call("product.status", { productId: `prd_good_${i}` })).result?.phase).toBe("completed");
    }

    let polling = true;
    const latencies: number[] = [];
    const rss: number[] = [];
    const poller = (async () => {
      for (let n = 0; polling; n += 1) {
        const started = performance.now();
        const answer =
          n % 2 === 0
            ? await h.call("product.list", {})
            : await h.call("product.status", { productId: `prd_good_${n % GOOD}` });
        latencies.push(performance.now() - started);
        expect(answer.error, JSON.stringify(answer.error)).toBeUndefined();
        rss.push(memoryMiB(pid, "VmRSS"));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    const failClosed = async (productId: string) => {
      const started = performance.now();
      const answer = await h.call("product.status", { productId });
      return { answer, ms: performance.now() - started };
    };
    const [endless, huge] = await Promise.all([failClosed(ENDLESS), failClosed(HUGE)]);
    // Asked again, each fails the same way, again bounded.
    const again = await failClosed(ENDLESS);
    polling = false;
    await poller;
    const peak = memoryMiB(pid, "VmHWM");

    process.stderr.write(
      `host-hostile: endless failed closed in ${endless.ms.toFixed(0)} ms (again ${again.ms.toFixed(0)} ms), ` +
        `40 MB pages in ${huge.ms.toFixed(0)} ms; server RSS peak ${peak.toFixed(0)} MiB, max sampled ` +
        `${Math.max(...rss).toFixed(0)} MiB; ${latencies.length} list/status answers, slowest ` +
        `${Math.max(...latencies).toFixed(0)} ms\n`,
    );
    process.stderr.write(
      `host-hostile: ${endless.answer.error?.message}\nhost-hostile: ${huge.answer.error?.message}\n`,
    );
    for (const { answer } of [endless, huge, again]) {
      expect(answer.error?.code).toBe(-32013);
      expect(answer.error?.message).toMatch(/The host is at fault/);
    }
    expect(endless.answer.error?.message).toMatch(/more than 100000 events/);
    expect(huge.answer.error?.message).toMatch(/larger than the 32 MiB the server accepts and was dropped unread/);
    expect(endless.ms).toBeLessThan(FAIL_CLOSED_MS);
    expect(huge.ms).toBeLessThan(FAIL_CLOSED_MS);
    expect(again.ms).toBeLessThan(FAIL_CLOSED_MS);
    expect(latencies.length).toBeGreaterThan(5);
    expect(Math.max(...latencies)).toBeLessThan(ANSWER_MS);
    expect(peak).toBeLessThan(RSS_BOUND_MIB);
    for (const line of h.lines) expect(isJsonRpcLine(line), line).toBe(true);
    host?.stdin.end();
  }, 90_000);
});
