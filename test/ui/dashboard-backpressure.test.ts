/**
 * SSE backpressure (issue 29, "Must show"): 40 event-stream clients that never read, held open for 60 s against a
 * real `ui` process on a store a real server is driving (a running task makes every poll a new view of ~50 KB), over
 * real sockets. The dashboard's RSS (read from /proc) stays under 150 MB throughout, clients that do not read are
 * disconnected (and replaced, as a browser's EventSource would reconnect), and once they are gone the RSS is within
 * 20 % of what it was before they came. A stream past --max-streams is refused with 503.
 */
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { startLiveProduct, startUi, waitForTask, type LiveProduct, type UiProcess } from "./live-product.js";

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0) / 1024;
}

/** An event-stream request on a raw socket that is paused at once: it never reads a byte of the answer. */
function nonReadingClient(url: string, path: string): Socket {
  const u = new URL(url);
  const socket = connect(Number(u.port), u.hostname);
  socket.on("error", () => undefined);
  socket.write(`GET /api/stream?path=${encodeURIComponent(path)} HTTP/1.1\r\nHost: ${u.host}\r\n\r\n`);
  socket.pause();
  return socket;
}

/** The status line of one request (read, then closed). */
function statusOf(url: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const socket = connect(Number(u.port), u.hostname);
    let text = "";
    socket.on("data", (d: Buffer) => {
      text += d.toString();
      if (text.includes("\r\n")) {
        resolve(text.split("\r\n")[0] as string);
        socket.destroy();
      }
    });
    socket.on("error", reject);
    socket.write(`GET /api/stream?path=${encodeURIComponent(path)} HTTP/1.1\r\nHost: ${u.host}\r\n\r\n`);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let live: LiveProduct | undefined;
let ui: UiProcess | undefined;
afterAll(async () => {
  await ui?.stop();
  live?.open(live.plan.tasks.map((t) => t.taskId));
  if (live && live.server.child.exitCode === null) await live.server.close();
});

describe("dashboard SSE backpressure", () => {
  it("40 non-reading clients for 60 s: RSS under 150 MB, back within 20 % after; the stream cap holds", async () => {
    const big = "x".repeat(100) + "\n";
    live = await startLiveProduct({
      goal: "- Write part one\n- Write part two\n- Write part three\n- Write part four\n- Write part five\n- Write part six",
      tasks: (gate) => {
        const tasks: Record<string, unknown> = {};
        for (let i = 1; i <= 5; i++) tasks[`t${i}`] = { actions: [{ say: big.repeat(80) }], text: `t${i} done` };
        tasks.t6 = { actions: [{ say: "t6: waiting\n" }, { waitForFile: gate("t6") }], text: "t6 done" };
        return tasks;
      },
    });
    const { server, productId } = live;
    await waitForTask(server, productId, "t6", "running", 90_000);
    ui = await startUi(live.state, ["--poll-ms", "100", "--max-streams", "48", "--log-level", "info"]);
    const pid = ui.child.pid as number;
    const path = `/api/products/${productId}`;
    // The start: the dashboard in use, one browser-like client reading the product's stream (polling at 10 Hz).
    const reader = connect(Number(new URL(ui.url).port), "127.0.0.1");
    let views = 0;
    reader.on("data", (d: Buffer) => (views += d.toString().split("event: view").length - 1));
    reader.write(`GET /api/stream?path=${encodeURIComponent(path)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    await sleep(8_000);
    expect(views).toBeGreaterThan(5);
    const before = rssMb(pid);
    const samples: number[] = [];

    const clients: Socket[] = [];
    for (let i = 0; i < 40; i++) clients.push(nonReadingClient(ui.url, path));
    const drops = () => (ui?.stderr().match(/dashboard stream dropped/g) ?? []).length;
    let replaced = 0;
    let peak = before;
    const started = Date.now();
    while (Date.now() - started < 60_000) {
      await sleep(1_000);
      samples.push(Math.round(rssMb(pid)));
      peak = Math.max(peak, samples[samples.length - 1] as number);
      // A dropped client is replaced, as a browser's EventSource reconnects: 40 non-reading streams all along.
      for (; replaced < drops(); replaced++) clients.push(nonReadingClient(ui.url, path));
    }
    const during = rssMb(pid);
    // The cap: about 40 are open of 48; more are served until the 49th, which is refused.
    const extra: Socket[] = [];
    let refused = "";
    for (let i = 0; i < 20 && refused === ""; i++) {
      const line = await statusOf(ui.url, path);
      if (line.startsWith("HTTP/1.1 503")) refused = line;
      else extra.push(nonReadingClient(ui.url, path));
    }
    expect(refused).toBe("HTTP/1.1 503 Service Unavailable");
    for (const c of [...clients, ...extra]) c.destroy();

    let after = rssMb(pid);
    const settled = Date.now();
    while (Math.abs(after - before) > 0.2 * before && Date.now() - settled < 30_000) {
      await sleep(500);
      after = rssMb(pid);
    }
    process.stderr.write(
      `dashboard RSS: before ${before.toFixed(1)} MB, peak ${peak.toFixed(1)} MB, at 60 s ${during.toFixed(1)} MB, ` +
        `after ${after.toFixed(1)} MB; ${drops()} non-reading clients disconnected; samples ${samples.join(" ")}\n`,
    );
    expect(peak).toBeLessThan(150);
    expect(Math.abs(after - before)).toBeLessThanOrEqual(0.2 * before);
    expect(drops()).toBeGreaterThanOrEqual(40);
    // The reading client kept getting views all along, and still does.
    const seen = views;
    await sleep(1_000);
    expect(views).toBeGreaterThan(seen);
    reader.destroy();
    expect(await statusOf(ui.url, "/api/overview")).toBe("HTTP/1.1 200 OK");
  }, 180_000);
});
