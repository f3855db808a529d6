/**
 * Figure 3 of issue 7: notification streaming. The built server runs one task on a real worker agent subprocess
 * (fixtures/streaming-agent.ts, configured through `acp-orchestrator.json` in the server's working directory) that
 * streams N small chunks; the server turns each into a `product.taskOutputDelta` notification. The client reads either
 * as fast as it can (throughput) or slowly (memory under backpressure). The server's memory is sampled from
 * /proc/<pid>/status while it runs (VmRSS) and its peak (VmHWM) read before it is closed.
 *
 * Owns this measurement only; the server and the agent are the real ones, started with plain `node`.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { INITIALIZE_PARAMS } from "./overhead.js";
import { NdjsonProcess, type SlowReader } from "./support/ndjson-process.js";
import { SERVER_CLI, benchScript, serverNodeArgs } from "./support/paths.js";
import { processMemoryMb } from "./support/stats.js";

export interface StreamingResult {
  chunks: number;
  /** `product.taskOutputDelta` notifications the client received (must equal `chunks`). */
  received: number;
  /** confirm sent → `product.completed` received, ms. */
  ms: number;
  perSecond: number;
  /** Peak RSS of the server process (VmHWM), MB. */
  serverPeakMb: number;
  /** RSS of the server right after it started serving (after `initialize`), MB: the baseline of the peak. */
  serverBaseMb: number;
  /** stdout bytes the client received. */
  bytes: number;
  /** Server RSS (VmRSS, MB) sampled every 100 ms: the largest sample by the time 25/50/75/100 % were received. */
  rssByQuarter: number[];
  slow?: SlowReader;
}

/** Runs one streaming measurement in `dir` (a fresh temporary folder; the agent config is written there). */
export async function streaming(dir: string, chunks: number, slow?: SlowReader): Promise<StreamingResult> {
  writeFileSync(
    join(dir, "acp-orchestrator.json"),
    JSON.stringify({
      agents: [
        {
          agentId: "streamer",
          name: "Bench streamer",
          command: process.execPath,
          args: [benchScript("fixtures/streaming-agent")],
          env: { BENCH_CHUNKS: String(chunks) },
        },
      ],
    }),
  );
  let received = 0;
  let onPlanReady: () => void = () => undefined;
  let onCompleted: (phase: string) => void = () => undefined;
  const planReady = new Promise<void>((resolve) => (onPlanReady = resolve));
  const completed = new Promise<string>((resolve) => (onCompleted = resolve));
  const proc = new NdjsonProcess({
    command: process.execPath,
    args: [...serverNodeArgs(), SERVER_CLI, "serve", "--state", join(dir, "state.db")],
    cwd: dir,
    ...(slow ? { slow } : {}),
    onNotification: (method, params) => {
      if (method === "product.taskOutputDelta") received += 1;
      else if (method === "product.planReady") onPlanReady();
      else if (method === "product.completed") onCompleted(String(params.phase));
    },
  });
  let sampler: NodeJS.Timeout | undefined;
  try {
    await proc.request("initialize", INITIALIZE_PARAMS);
    const serverBaseMb = processMemoryMb(proc.pid)?.rssMb ?? NaN;
    const { productId } = await proc.request<{ productId: string }>("product.plan", {
      goal: "Stream the benchmark output.",
      cwd: dir,
    });
    await planReady;
    const t0 = performance.now();
    const quarters = [0, 0, 0, 0];
    sampler = setInterval(() => {
      const rss = processMemoryMb(proc.pid)?.rssMb ?? 0;
      const q = Math.min(3, Math.floor((received / chunks) * 4));
      quarters[q] = Math.max(quarters[q] as number, rss);
    }, 100);
    await proc.request("product.confirm", {
      productId,
      instances: [{ instanceId: "s1", agentId: "streamer", role: "worker" }],
      tasks: [
        {
          taskId: "stream",
          title: "Stream chunks",
          description: "Stream the benchmark chunks.",
          instanceId: "s1",
          dependsOn: [],
        },
      ],
    });
    const phase = await completed;
    const ms = performance.now() - t0;
    clearInterval(sampler);
    for (let q = 1; q < 4; q += 1) quarters[q] = Math.max(quarters[q] as number, quarters[q - 1] as number);
    const serverPeakMb = processMemoryMb(proc.pid)?.peakMb ?? NaN;
    if (phase !== "completed") throw new Error(`the streaming product ended ${phase}: ${proc.stderr.slice(-2000)}`);
    return {
      chunks,
      received,
      ms,
      perSecond: (received / ms) * 1000,
      serverPeakMb,
      serverBaseMb,
      bytes: proc.bytesIn,
      rssByQuarter: quarters,
      ...(slow ? { slow } : {}),
    };
  } finally {
    clearInterval(sampler);
    await proc.close();
  }
}
