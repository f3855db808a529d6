/**
 * Figure 6 (issue 16): the orchestrator beside LangGraph.js on the identical random layered DAG (support/dag.ts: same
 * generator, seed and width), instant tasks, each side in its own process, interleaved (ours, then the peer, for every
 * repeat), at each size on both stores; then a crash (SIGKILL halfway) and resume of the same DAG on SQLite on both
 * sides, interleaved too.
 *
 * Owns the case matrix and the peer's child processes; our side's measurements are scale-case.ts, the peer's are
 * langgraph-case.ts. A peer case that runs past `timeoutMs` is killed (SIGKILL of that child only) and reported as
 * timed out, with the limit.
 */
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { PeerGraph, PeerOptions, PeerResult } from "./langgraph-case.js";
import { runCase } from "./scale.js";
import type { ScaleResult } from "./scale-case.js";
import { benchScript } from "./support/paths.js";

/** Every LangGraph writing of the DAG (langgraph-case.ts `PeerGraph`), in the order they run and print. */
export const PEER_GRAPHS: readonly PeerGraph[] = ["nodes", "send", "functional"];

/** How each writing is named in the tables. */
export const PEER_GRAPH_NAMES: Readonly<Record<PeerGraph, string>> = {
  nodes: "one node per task",
  send: "Send map-reduce",
  functional: "Functional API",
};

/** A peer case that did not finish within its limit. */
export interface PeerTimeout {
  timedOut: true;
  graph: PeerGraph;
  tasks: number;
  store: PeerOptions["store"];
  mode: PeerOptions["mode"];
  limitMs: number;
}

export type PeerOutcome = PeerResult | PeerTimeout;

export function timedOut(r: PeerOutcome | undefined): r is PeerTimeout {
  return r !== undefined && "timedOut" in r;
}

/** Runs one LangGraph case in a fresh `node` process; kills it after `timeoutMs` (crash mode expects its SIGKILL). */
export function runPeerCase(options: PeerOptions, timeoutMs: number): Promise<PeerOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [benchScript("langgraph-case"), JSON.stringify(options)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    let killedByUs = false;
    const timer = setTimeout(() => {
      killedByUs = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err = (err + d).slice(-20_000)));
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      const base = { graph: options.graph ?? "nodes", tasks: options.tasks, store: options.store, mode: options.mode };
      if (killedByUs) {
        resolve({ timedOut: true, ...base, limitMs: timeoutMs });
        return;
      }
      if (options.mode === "crash") {
        if (signal === "SIGKILL") resolve(base as PeerResult);
        else reject(new Error(`the peer's crash case did not crash (exit ${String(code)}): ${err.slice(-2000)}`));
        return;
      }
      if (code !== 0) {
        reject(
          new Error(
            `peer case ${JSON.stringify(options)} failed (exit ${String(code ?? signal)}): ${err.slice(-3000)}`,
          ),
        );
        return;
      }
      try {
        resolve(JSON.parse(out.trim().split("\n").pop() ?? "") as PeerResult);
      } catch {
        reject(new Error(`peer case printed no result: ${out.slice(-500)} ${err.slice(-2000)}`));
      }
    });
  });
}

function removeDb(file: string): void {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
}

/** One (size, store) cell: every run of each side (the peer's runs of every LangGraph writing of the DAG). */
export interface PeerCell {
  tasks: number;
  store: "memory" | "sqlite";
  ours: ScaleResult[];
  peer: PeerOutcome[];
}

export interface PeerResume {
  tasks: number;
  ours: ScaleResult[];
  peer: PeerOutcome[];
}

export interface PeerPlan {
  sizes: readonly number[];
  /** Repeats per size (index-aligned with `sizes`). */
  repeats: readonly number[];
  /** Peer runs per size and LangGraph writing at most (a 10,000-task LangGraph run takes minutes: fewer of them). */
  peerRepeats: readonly number[];
  /** The LangGraph writings of the DAG to run (default all, `PEER_GRAPHS`). */
  graphs?: readonly PeerGraph[];
  /** Time limit of one peer case, ms. */
  timeoutMs: number;
  resumeTasks: number;
  resumeRepeats: number;
}

/**
 * Runs the comparison. For every size and store, `repeats` rounds of (ours, then the peer in each of its writings of
 * the DAG), each writing only in the first `peerRepeats` rounds and not again after it timed out. Every run must
 * finish cleanly with every task done.
 */
export async function peerComparison(
  dir: string,
  plan: PeerPlan,
  width: number,
  log: (line: string) => void,
): Promise<{ cells: PeerCell[]; resume: PeerResume }> {
  const cells: PeerCell[] = [];
  for (const [i, tasks] of plan.sizes.entries()) {
    for (const store of ["memory", "sqlite"] as const) {
      const cell: PeerCell = { tasks, store, ours: [], peer: [] };
      cells.push(cell);
      const repeats = plan.repeats[i] ?? 1;
      const peerRepeats = plan.peerRepeats[i] ?? repeats;
      for (let r = 0; r < repeats; r += 1) {
        const file = join(dir, `peer-ours-${tasks}-${store}.db`);
        removeDb(file);
        const ours = await runCase({ mode: "run", tasks, authority: store, file, maxParallelTasks: width, width });
        removeDb(file);
        if (ours.phase !== "completed" || ours.started !== tasks || ours.errors > 0)
          throw new Error(`our ${tasks}/${store} case did not complete cleanly: ${JSON.stringify(ours).slice(0, 500)}`);
        cell.ours.push(ours);
        let line = `  peer ${store} ${tasks} round ${r + 1}/${repeats}: ours ${(ours.planMs + ours.runMs).toFixed(0)} ms`;
        for (const graph of plan.graphs ?? PEER_GRAPHS) {
          if (r >= peerRepeats || cell.peer.some((p) => timedOut(p) && p.graph === graph)) continue;
          const pfile = join(dir, `peer-langgraph-${tasks}-${store}.db`);
          removeDb(pfile);
          const peer = await runPeerCase({ mode: "run", graph, tasks, store, file: pfile, width }, plan.timeoutMs);
          removeDb(pfile);
          if (!timedOut(peer) && (peer.ran !== tasks || peer.outputs !== tasks))
            throw new Error(
              `the peer's ${tasks}/${store}/${graph} case did not run every task: ${JSON.stringify(peer)}`,
            );
          cell.peer.push(peer);
          line += timedOut(peer)
            ? `, LangGraph ${graph} timed out after ${(plan.timeoutMs / 1000).toFixed(0)} s`
            : `, LangGraph ${graph} ${(peer.compileMs + peer.runMs).toFixed(0)} ms`;
        }
        log(line);
      }
    }
  }
  const resume: PeerResume = { tasks: plan.resumeTasks, ours: [], peer: [] };
  const tasks = plan.resumeTasks;
  const crashAfter = Math.floor(tasks / 2);
  for (let r = 0; r < plan.resumeRepeats; r += 1) {
    const file = join(dir, `peer-resume-ours.db`);
    const idFile = join(dir, `peer-resume-ours.id`);
    removeDb(file);
    await runCase({
      mode: "crash",
      tasks,
      authority: "sqlite",
      file,
      idFile,
      maxParallelTasks: width,
      crashAfter,
      width,
    });
    const ours = await runCase({
      mode: "resume",
      tasks,
      authority: "sqlite",
      file,
      idFile,
      maxParallelTasks: width,
      width,
    });
    removeDb(file);
    resume.ours.push(ours);
    const pfile = join(dir, `peer-resume-langgraph.db`);
    removeDb(pfile);
    const crashed = await runPeerCase(
      { mode: "crash", tasks, store: "sqlite", file: pfile, width, crashAfter },
      plan.timeoutMs,
    );
    const peer = timedOut(crashed)
      ? crashed
      : await runPeerCase({ mode: "resume", tasks, store: "sqlite", file: pfile, width }, plan.timeoutMs);
    removeDb(pfile);
    resume.peer.push(peer);
    log(
      `  peer resume ${tasks} round ${r + 1}/${plan.resumeRepeats}: ours running after ${ours.toExecutingMs?.toFixed(0)} ms, ` +
        (timedOut(peer) ? "LangGraph timed out" : `LangGraph running after ${peer.toExecutingMs?.toFixed(0)} ms`),
    );
  }
  return { cells, resume };
}
