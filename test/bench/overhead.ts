/**
 * Figures 1 and 2 of issue 7: cold start (spawn → `initialize` answered) and request overhead (sequential
 * `product.status` round trips, median and p99, and pipelined throughput) of the built server, each beside the same
 * measurement of the echo floor (echo-server.ts) through the same client and the same kind of pipes.
 *
 * Owns the measurement loops only. Processes are started with plain `node`; the server gets a fresh SQLite state file
 * in a temporary folder and its default log level (logs go to stderr, which the client drains).
 */
import { join } from "node:path";
import { NdjsonProcess } from "./support/ndjson-process.js";
import { lastCpu, pin, placements, type Placement } from "./support/placement.js";
import { SERVER_CLI, benchScript, serverNodeArgs } from "./support/paths.js";

export const INITIALIZE_PARAMS = {
  protocolVersion: 1,
  clientCapabilities: {},
  clientInfo: { name: "acp-orchestrator-bench", version: "1" },
};

/** How to start one of the two processes under test. */
export interface Target {
  name: "server" | "echo";
  start(onNotification?: (method: string, params: Record<string, unknown>) => void): NdjsonProcess;
}

/** The built server on a state file in `dir`, with `dir` as its working directory (no agent config there). */
export function serverTarget(dir: string): Target {
  return {
    name: "server",
    start: (onNotification) =>
      new NdjsonProcess({
        command: process.execPath,
        args: [...serverNodeArgs(), SERVER_CLI, "serve", "--state", join(dir, "state.db")],
        cwd: dir,
        ...(onNotification ? { onNotification } : {}),
      }),
  };
}

/** The echo floor. */
export function echoTarget(dir: string): Target {
  return {
    name: "echo",
    start: (onNotification) =>
      new NdjsonProcess({
        command: process.execPath,
        args: [benchScript("echo-server")],
        cwd: dir,
        ...(onNotification ? { onNotification } : {}),
      }),
  };
}

/**
 * Spawn-to-first-answer in milliseconds: the `initialize` request is written right after `spawn` (it waits in the
 * pipe) and the clock stops when its response line arrives. Each sample is a fresh process, closed gracefully after.
 */
export async function coldStartOnce(target: Target): Promise<number> {
  const proc = target.start();
  await proc.request("initialize", INITIALIZE_PARAMS);
  const ms = performance.now() - proc.spawnedAt;
  const code = await proc.close();
  if (code !== 0) throw new Error(`${target.name} exited with ${String(code)}: ${proc.stderr.slice(-2000)}`);
  return ms;
}

/**
 * Cold start samples of both targets, interleaved (echo, server, echo, …) so that a burst of load on this shared
 * machine hits both alike. One unmeasured warm-up of each first (file cache, state file creation).
 */
export async function coldStart(
  server: Target,
  echo: Target,
  runs: number,
): Promise<{ server: number[]; echo: number[] }> {
  await coldStartOnce(echo);
  await coldStartOnce(server);
  const out = { server: [] as number[], echo: [] as number[] };
  for (let i = 0; i < runs; i += 1) {
    out.echo.push(await coldStartOnce(echo));
    out.server.push(await coldStartOnce(server));
  }
  return out;
}

/** Sequential round trips: each request is sent when the previous answer arrived. Returns each one's ms. */
export async function sequential(proc: NdjsonProcess, method: string, params: unknown, n: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const t0 = performance.now();
    await proc.call(method, params);
    samples.push(performance.now() - t0);
  }
  return samples;
}

/** Pipelined: `n` requests written at once; resolves with the ms until the last answer and the requests per second. */
export async function pipelined(
  proc: NdjsonProcess,
  method: string,
  params: unknown,
  n: number,
): Promise<{ ms: number; perSecond: number }> {
  const t0 = performance.now();
  const all: Promise<unknown>[] = [];
  for (let i = 0; i < n; i += 1) all.push(proc.call(method, params));
  await Promise.all(all);
  const ms = performance.now() - t0;
  return { ms, perSecond: (n / ms) * 1000 };
}

/** Measured pipelined rounds per process; the figure is the best of them. */
const PIPELINED_ROUNDS = 5;

/** Sequential round trips are taken in this many interleaved blocks per process. */
const BLOCKS = 10;

/** Sequential round trips of both processes in one placement. */
export interface SequentialFigure {
  placement: Placement["name"];
  server: number[];
  echo: number[];
  /** Unpinned only: the share of samples in which the process had last run on the client's core. */
  sameCore?: { server: number; echo: number };
}

/** The best pipelined round of both processes in one placement. */
export interface PipelinedFigure {
  placement: Placement["name"];
  server: { ms: number; perSecond: number };
  echo: { ms: number; perSecond: number };
}

export interface OverheadResult {
  /** One per placement this machine can measure (support/placement.ts), `scheduler` last. */
  sequential: SequentialFigure[];
  /** `two cores` (when it can be measured) and `scheduler`. */
  pipelined: PipelinedFigure[];
  /** Size of one `product.status` answer (bytes of JSON), for context. */
  statusBytes: number;
  requests: { sequential: number; pipelined: number };
}

/** Sequential requests between two looks at where the processes last ran (unpinned placement). */
const SAMPLE_EVERY = 20;

/**
 * Request overhead of a real product: the server plans one product (`product.plan`, then waits for
 * `product.planReady` from the built-in heuristic leader) and answers `product.status` for it; the echo answers the
 * same request with its params. `warmup` unmeasured round trips first on each (JIT, caches). Both processes are
 * measured in every placement (support/placement.ts), pinned alike.
 */
export async function requestOverhead(
  server: Target,
  echo: Target,
  dir: string,
  counts: { sequential: number; pipelined: number; warmup: number },
): Promise<OverheadResult> {
  let planReady: (() => void) | undefined;
  const ready = new Promise<void>((resolve) => (planReady = resolve));
  const srv = server.start((method) => {
    if (method === "product.planReady") planReady?.();
  });
  const ech = echo.start();
  const all = placements();
  const unpinned = all[all.length - 1] as Placement;
  try {
    await srv.request("initialize", INITIALIZE_PARAMS);
    await ech.request("initialize", INITIALIZE_PARAMS);
    const { productId } = await srv.request<{ productId: string }>("product.plan", {
      goal: "Write a short README for a command-line tool, then add a usage example and a changelog.",
      cwd: dir,
    });
    await ready;
    const params = { productId };
    const status = await srv.request("product.status", params);
    const statusBytes = JSON.stringify(status).length;
    for (const p of [ech, srv]) await sequential(p, "product.status", params, counts.warmup);
    const seq: SequentialFigure[] = [];
    for (const where of all) {
      pin(where, [ech.pid, srv.pid]);
      for (const p of [ech, srv]) await sequential(p, "product.status", params, Math.ceil(counts.warmup / 4));
      const figure: SequentialFigure = { placement: where.name, server: [], echo: [] };
      const shared = { server: 0, echo: 0, looks: 0 };
      // Interleaved in blocks (echo, server, echo, …) so that a burst of load on this shared machine hits both alike.
      const block = Math.max(1, Math.ceil(counts.sequential / BLOCKS));
      for (let done = 0; done < counts.sequential; done += block) {
        const n = Math.min(block, counts.sequential - done);
        for (const [p, out, key] of [
          [ech, figure.echo, "echo"],
          [srv, figure.server, "server"],
        ] as const) {
          for (let i = 0; i < n; i += SAMPLE_EVERY) {
            out.push(...(await sequential(p, "product.status", params, Math.min(SAMPLE_EVERY, n - i))));
            if (where.client !== undefined) continue;
            if (key === "echo") shared.looks += 1;
            if (lastCpu(p.pid) === lastCpu(process.pid)) shared[key] += 1;
          }
        }
      }
      if (where.client === undefined && shared.looks > 0)
        figure.sameCore = { server: shared.server / shared.looks, echo: shared.echo / shared.looks };
      seq.push(figure);
    }
    // Pipelined: one unmeasured round of each first (the pipelined path's own JIT warm-up, as `warmup` is for the
    // sequential one), then the best of five interleaved rounds of each (load only ever slows a round down).
    const pipe: PipelinedFigure[] = [];
    for (const where of all.filter((p) => p.name !== "one core")) {
      pin(where, [ech.pid, srv.pid]);
      for (const p of [ech, srv]) await pipelined(p, "product.status", params, counts.pipelined);
      const figure: PipelinedFigure = {
        placement: where.name,
        echo: { ms: Infinity, perSecond: 0 },
        server: { ms: Infinity, perSecond: 0 },
      };
      for (let round = 0; round < PIPELINED_ROUNDS; round += 1) {
        const e = await pipelined(ech, "product.status", params, counts.pipelined);
        const s = await pipelined(srv, "product.status", params, counts.pipelined);
        if (e.perSecond > figure.echo.perSecond) figure.echo = e;
        if (s.perSecond > figure.server.perSecond) figure.server = s;
      }
      pipe.push(figure);
    }
    return {
      sequential: seq,
      pipelined: pipe,
      statusBytes,
      requests: { sequential: counts.sequential, pipelined: counts.pipelined },
    };
  } finally {
    pin(unpinned, []);
    await Promise.all([srv.close(), ech.close()]);
  }
}
