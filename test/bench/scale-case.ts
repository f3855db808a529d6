/**
 * One scheduler-scale / durability case, run in its own process so its peak RSS (VmHWM) is its own (issue 7,
 * figures 4 and 5). Started by run.ts as `node --import tsx test/bench/scale-case.ts <json options>`; prints one JSON
 * line (`ScaleResult`) on stdout.
 *
 * Modes: `run` plans and runs a random DAG to completion; `crash` runs the same DAG on SQLite and SIGKILLs its own
 * process after `crashAfter` worker starts (a real crash: nothing is flushed or shut down); `resume` opens the same
 * SQLite file in a fresh process, loads and resumes the product, and runs it to completion. It must never fake time
 * or skip the authority; it never writes anything but its SQLite file and the `idFile`.
 */
// Loaded here, before the clocks, as LangGraph's case has it loaded by its own imports (@langchain/langgraph loads
// node:crypto when it is imported): src loads it on its first digest (node-builtins.ts, for serve's cold start), which
// in this fresh process would be inside the measured plan, a one-time process cost the peer's clock does not hold.
import "node:crypto";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { DEFAULT_HEAP_GROWTH_PERCENT, limitHeapGrowth } from "../../src/adapters/system/heap-growth.js";
import { randomDag } from "./support/dag.js";
import {
  benchService,
  openAuthority,
  type AuthorityKind,
  type Completion,
  type MeterReading,
} from "./support/in-process.js";

export interface ScaleOptions {
  mode: "run" | "crash" | "resume";
  tasks: number;
  authority: AuthorityKind;
  /** SQLite file (sqlite, crash, resume). */
  file?: string;
  width?: number;
  maxParallelTasks: number;
  /** crash: SIGKILL after this many worker starts. */
  crashAfter?: number;
  /** crash writes, resume reads the product id here. */
  idFile?: string;
  /** Meter the JSON bytes of every write (one extra stringify per write: off for timing runs). */
  countBytes?: boolean;
  /** How worker results arrive (default `instant`; see `Completion`). */
  completion?: Completion;
}

export interface ScaleResult {
  tasks: number;
  authority: AuthorityKind;
  mode: ScaleOptions["mode"];
  completion: Completion;
  /** plan → planReady (leader plan validated, persisted, announced), ms. */
  planMs: number;
  /** confirm → product.completed, ms (resume: resume call → product.completed). */
  runMs: number;
  /** CPU time of this process (user + system, all threads) from plan (resume: load) to product.completed, ms. */
  cpuMs: number;
  /** Peak resident set size of this process (VmHWM), MB. */
  peakRssMb: number;
  /**
   * Longest and 99th-percentile event-loop delay during the run, ms: how long a request arriving meanwhile would
   * have waited (the server serves every client request on this same loop).
   */
  loopDelayMaxMs: number;
  loopDelayP99Ms: number;
  /** Worker attempts started in this process. */
  started: number;
  phase: string;
  meter: MeterReading;
  /** Bytes this process caused to be written to storage (/proc/self/io write_bytes) during the run. */
  diskWriteBytes: number;
  /** SQLite file + WAL size after the run, bytes (0 for memory). */
  fileBytes: number;
  notifications: Record<string, number>;
  errors: number;
  /** resume only: load (service.get), resume call, and time until the first task is running again, ms. */
  loadMs?: number;
  resumeCallMs?: number;
  toExecutingMs?: number;
  /** resume only: tasks completed before the crash, and how many of them ran again (must be 0). */
  completedBeforeResume?: number;
  rerunCompleted?: number;
  /** resume only: tasks that were running at the crash (re-run with an interruption note). */
  interrupted?: number;
}

function vmHwmMb(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

function writeBytes(): number {
  try {
    const m = /^write_bytes: (\d+)$/m.exec(readFileSync("/proc/self/io", "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function fileBytes(file: string | undefined): number {
  if (file === undefined) return 0;
  let total = 0;
  for (const f of [file, `${file}-wal`]) {
    try {
      total += statSync(f).size;
    } catch {
      // absent
    }
  }
  return total;
}

async function runCase(o: ScaleOptions): Promise<ScaleResult> {
  const plan = randomDag({ tasks: o.tasks, width: o.width ?? 100 });
  const authority = openAuthority(o.authority, o.file);
  // A crashed process and the one that resumes after it use the same lease owner id: a server restarted with its old
  // id takes its own lease back at once (context.ts). With a new id it would wait for the lease to expire (30 s).
  const b = benchService(
    authority,
    plan,
    { maxParallelTasks: o.maxParallelTasks, ownerId: "bench-owner" },
    o.countBytes ?? false,
    o.completion ?? "instant",
  );
  const result: Partial<ScaleResult> = {
    tasks: o.tasks,
    authority: o.authority,
    mode: o.mode,
    completion: o.completion ?? "instant",
  };

  let productId: string;
  let completed: Promise<Record<string, unknown>>;
  const io0 = writeBytes();
  const cpu0 = process.cpuUsage();
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  if (o.mode === "resume") {
    productId = readFileSync(o.idFile as string, "utf8").trim();
    completed = b.notifier.next("product.completed", (p) => p.productId === productId);
    const executing = b.notifier.next("product.taskStatus", (p) => p.status === "running");
    const t0 = performance.now();
    const orchestrator = await b.service.get(productId);
    const t1 = performance.now();
    const before = orchestrator.model.state.tasks;
    const done = new Set(before.filter((t) => t.status === "completed").map((t) => t.taskId));
    result.interrupted = before.filter((t) => t.status === "running").length;
    await b.service.resume(productId);
    const t2 = performance.now();
    await executing;
    const t3 = performance.now();
    result.planMs = 0;
    result.loadMs = t1 - t0;
    result.resumeCallMs = t2 - t1;
    result.toExecutingMs = t3 - t0;
    await completed;
    result.runMs = performance.now() - t1;
    result.completedBeforeResume = done.size;
    result.rerunCompleted = [...b.worker.runs.keys()].filter((id) => done.has(id)).length;
  } else {
    const t0 = performance.now();
    ({ productId } = await b.service.plan({ goal: "Benchmark", cwd: "/tmp/bench", projectId: "bench" }));
    await b.notifier.next("product.planReady", (p) => p.productId === productId);
    result.planMs = performance.now() - t0;
    if (o.mode === "crash") {
      writeFileSync(o.idFile as string, productId);
      const crashAfter = o.crashAfter ?? Math.floor(o.tasks / 2);
      b.worker.afterEach = (started) => {
        if (started >= crashAfter) process.kill(process.pid, "SIGKILL");
      };
    }
    completed = b.notifier.next("product.completed", (p) => p.productId === productId);
    const t1 = performance.now();
    await b.service.confirm(productId, {});
    await completed;
    result.runMs = performance.now() - t1;
  }
  const cpu = process.cpuUsage(cpu0);
  result.cpuMs = (cpu.user + cpu.system) / 1000;
  loop.disable();
  result.loopDelayMaxMs = loop.max / 1e6;
  result.loopDelayP99Ms = loop.percentile(99) / 1e6;
  const orchestrator = await b.service.get(productId);
  result.phase = orchestrator.phase;
  result.started = b.worker.started;
  result.meter = b.meter.reading;
  result.diskWriteBytes = writeBytes() - io0;
  await authority.close();
  result.fileBytes = fileBytes(o.file);
  result.peakRssMb = vmHwmMb();
  result.notifications = Object.fromEntries(b.notifier.counts);
  result.errors = b.logger.errors.length;
  if (b.logger.errors.length > 0) process.stderr.write(`${JSON.stringify(b.logger.errors.slice(0, 3))}\n`);
  return result as ScaleResult;
}

const options = JSON.parse(process.argv[2] ?? "{}") as ScaleOptions;
// The core runs here as `serve` runs it, with the heap growth `serve` sets by default (issue 16; heap-growth.ts).
limitHeapGrowth(DEFAULT_HEAP_GROWTH_PERCENT);
runCase(options).then(
  (r) => {
    process.stdout.write(`${JSON.stringify(r)}\n`, () => process.exit(0));
  },
  (err: unknown) => {
    process.stderr.write(`scale-case failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
