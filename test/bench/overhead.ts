/**
 * Figures 1 and 2 of issue 7: cold start (spawn → `initialize` answered) and request overhead (sequential
 * `product.status` round trips, median and p99, and pipelined throughput with the CPU time each process spent per
 * request) of the built server, each beside the same measurement of the echo floor (echo-server.ts) through the same
 * client and the same kind of pipes. The request figures' floor is "echo1k" (issue 34): the echo started with the
 * server's own `product.status` answer, so both read the same requests and write the same bytes.
 *
 * Owns the measurement loops only. Processes are started with plain `node`; the server gets a fresh SQLite state file
 * in a temporary folder and its default log level (logs go to stderr, which the client drains).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { NdjsonProcess } from "./support/ndjson-process.js";
import { cpuNs, lastCpu, pin, placements, type Placement } from "./support/placement.js";
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

/**
 * The echo floor: answers each request with its params, or, with `answerFile`, with the JSON in that file (echo1k,
 * echo-server.ts).
 */
export function echoTarget(dir: string, answerFile?: string): Target {
  return {
    name: "echo",
    start: (onNotification) =>
      new NdjsonProcess({
        command: process.execPath,
        args: [benchScript("echo-server"), ...(answerFile !== undefined ? ["--answer", answerFile] : [])],
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

/**
 * Pipelined: `n` requests written at once; resolves with the ms until the last answer, the requests per second and
 * the CPU time the process spent meanwhile (ns, all its threads; undefined without /proc schedstat).
 */
export async function pipelined(
  proc: NdjsonProcess,
  method: string,
  params: unknown,
  n: number,
): Promise<{ ms: number; perSecond: number; cpuNs: number | undefined }> {
  const cpuBefore = cpuNs(proc.pid);
  const t0 = performance.now();
  const all: Promise<unknown>[] = [];
  for (let i = 0; i < n; i += 1) all.push(proc.call(method, params));
  await Promise.all(all);
  const ms = performance.now() - t0;
  const cpuAfter = cpuNs(proc.pid);
  const cpu = cpuBefore !== undefined && cpuAfter !== undefined ? cpuAfter - cpuBefore : undefined;
  return { ms, perSecond: (n / ms) * 1000, cpuNs: cpu };
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

/** One process's pipelined figure: its best round, and its CPU time per request over all measured rounds. */
export interface PipelinedSide {
  ms: number;
  perSecond: number;
  /** µs of CPU (all threads, user and kernel) per request, over every measured round; undefined without /proc. */
  cpuPerRequestUs: number | undefined;
}

/** The best pipelined round of both processes in one placement, and the CPU each spent per request. */
export interface PipelinedFigure {
  placement: Placement["name"];
  server: PipelinedSide;
  echo: PipelinedSide;
}

export interface OverheadResult {
  /** One per placement this machine can measure (support/placement.ts), `scheduler` last. */
  sequential: SequentialFigure[];
  /** One per placement, as `sequential`. */
  pipelined: PipelinedFigure[];
  /** Size of one `product.status` answer (bytes of JSON); echo1k answers the same bytes. */
  statusBytes: number;
  requests: { sequential: number; pipelined: number };
}

/** Sequential requests between two looks at where the processes last ran (unpinned placement). */
const SAMPLE_EVERY = 20;

/**
 * Request overhead of a real product: the server plans one product (`product.plan`, then waits for
 * `product.planReady` from the built-in heuristic leader) and answers `product.status` for it; the echo (echo1k,
 * `echoFor(file)` started with the server's own answer written to `file`) answers the same request with the same
 * bytes. `warmup` unmeasured round trips first on each (JIT, caches). Both processes are measured in every placement
 * (support/placement.ts), pinned alike.
 */
export async function requestOverhead(
  server: Target,
  echoFor: (answerFile: string) => Target,
  dir: string,
  counts: { sequential: number; pipelined: number; warmup: number },
): Promise<OverheadResult> {
  let planReady: (() => void) | undefined;
  const ready = new Promise<void>((resolve) => (planReady = resolve));
  const srv = server.start((method) => {
    if (method === "product.planReady") planReady?.();
  });
  let ech: NdjsonProcess | undefined;
  const all = placements();
  const unpinned = all[all.length - 1] as Placement;
  try {
    await srv.request("initialize", INITIALIZE_PARAMS);
    const { productId } = await srv.request<{ productId: string }>("product.plan", {
      goal: "Write a short README for a command-line tool, then add a usage example and a changelog.",
      cwd: dir,
    });
    await ready;
    const params = { productId };
    const status = await srv.request("product.status", params);
    const statusBytes = JSON.stringify(status).length;
    const answerFile = join(dir, "echo1k-answer.json");
    writeFileSync(answerFile, JSON.stringify(status));
    ech = echoFor(answerFile).start();
    await ech.request("initialize", INITIALIZE_PARAMS);
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
    // sequential one), then the best of five interleaved rounds of each (load only ever slows a round down); the CPU
    // per request is over all five rounds (other processes' load does not add to a process's own CPU time).
    const pipe: PipelinedFigure[] = [];
    for (const where of all) {
      pin(where, [ech.pid, srv.pid]);
      for (const p of [ech, srv]) await pipelined(p, "product.status", params, counts.pipelined);
      pipe.push(await pipelinedRounds(where, ech, srv, params, counts.pipelined));
    }
    return {
      sequential: seq,
      pipelined: pipe,
      statusBytes,
      requests: { sequential: counts.sequential, pipelined: counts.pipelined },
    };
  } finally {
    pin(unpinned, []);
    await Promise.all([srv.close(), ech?.close()]);
  }
}

/** `PIPELINED_ROUNDS` interleaved rounds of `n` pipelined requests on each process, in placement `where`. */
async function pipelinedRounds(
  where: Placement,
  ech: NdjsonProcess,
  srv: NdjsonProcess,
  params: unknown,
  n: number,
): Promise<PipelinedFigure> {
  const best = { echo: { ms: Infinity, perSecond: 0 }, server: { ms: Infinity, perSecond: 0 } };
  const cpu = { echo: 0 as number | undefined, server: 0 as number | undefined };
  for (let round = 0; round < PIPELINED_ROUNDS; round += 1) {
    for (const [p, key] of [
      [ech, "echo"],
      [srv, "server"],
    ] as const) {
      const r = await pipelined(p, "product.status", params, n);
      if (r.perSecond > best[key].perSecond) best[key] = { ms: r.ms, perSecond: r.perSecond };
      const spent = cpu[key];
      cpu[key] = spent === undefined || r.cpuNs === undefined ? undefined : spent + r.cpuNs;
    }
  }
  const perRequestUs = (ns: number | undefined) => (ns === undefined ? undefined : ns / 1000 / (PIPELINED_ROUNDS * n));
  return {
    placement: where.name,
    echo: { ...best.echo, cpuPerRequestUs: perRequestUs(cpu.echo) },
    server: { ...best.server, cpuPerRequestUs: perRequestUs(cpu.server) },
  };
}
