/**
 * `npm run bench` (issue 7): measures the server's overhead, scale and cost against their floors, prints one table
 * and writes BENCHMARKS.md at the repository root (machine, Node version, date, every figure beside its baseline,
 * each target met or not with its ratio; the format is test/bench/support/results-doc.ts).
 *
 *   node dist/bench/test/bench/run.js [--quick] [--only overhead,streaming,scale,durability,resume,peer,worktrees,remote,verify,postgres,pickup,fleet]
 *     [--no-write | --write FILE | --update]
 *     [--fleet-products N] [--fleet-rounds N] [--fleet-in-flight N] [--fleet-warmup N] [--fleet-service-only]
 *     [--stored-products N] [--stored-schema NAME]
 *     [--peer-sizes N,N] [--peer-rounds N]
 *
 * `--peer-sizes` keeps only those sizes of figure 6 (e.g. `--peer-sizes 1000`: the 1,000-task cases of issue 34's
 * target, minutes instead of half an hour), `--peer-rounds` sets its rounds per size (ours and every LangGraph writing).
 * The figure 9 knobs shrink its sizes on a busy machine (its section states the sizes it ran and the command with
 * them); `--stored-schema` keeps the seeded stored products for the next run.
 *
 * Figure 8 (PostgreSQL, test/bench/postgres.ts) runs on the database ACP_ORCHESTRATOR_TEST_PG names, else on a
 * private cluster started and stopped by scripts/pg-test-cluster.sh; when none can be started it says why and the
 * figure is "not measured".
 *
 * `--quick` runs small sizes (a smoke test of the benchmark itself; its numbers are not the published ones and it
 * never writes BENCHMARKS.md; `--write FILE` writes its page elsewhere). `--update` puts the sections of an `--only` run in
 * place of theirs in BENCHMARKS.md, keeping the others (support/results-doc.ts, updateBenchmarksDocument). Not part of `npm test`. It starts processes
 * with plain `node` on compiled code and removes its temporary folder at the end; it never touches the user's state
 * directory.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { coldStart, echoTarget, requestOverhead, serverTarget, type OverheadResult } from "./overhead.js";
import {
  PEER_GRAPH_NAMES,
  PEER_GRAPHS,
  peerComparison,
  timedOut,
  type PeerCell,
  type PeerOutcome,
  type PeerResume,
} from "./peer.js";
import type { PeerResult } from "./langgraph-case.js";
import { crashAndResume, durabilityCost, ioCompletions, scaleMatrix, type ScaleCell } from "./scale.js";
import type { ScaleResult } from "./scale-case.js";
import { streaming, type StreamingResult } from "./streaming.js";
import { scratchRoot, worktreeCost, type WorktreeCost } from "./worktrees.js";
import { verifyCost, verifyRows, type VerifyCost } from "./verify.js";
import { remoteCost, type PathCost, type RemoteCost } from "./remote.js";
import { postgresFigures, withPostgres, type PostgresFigures } from "./postgres.js";
import { LIST_PAGE } from "./postgres-stored.js";
import { controlPickup, type PickupResult } from "./pickup.js";
import { COMPILED, REPO_ROOT } from "./support/paths.js";
import { describeMachine, fmt, markdownTable, median, percentile, type Machine } from "./support/stats.js";
import {
  BENCH_SECTIONS,
  benchmarksDocument,
  resultsTable,
  updateBenchmarksDocument,
  type BenchSection,
  type ResultRow,
  type SectionResult,
} from "./support/results-doc.js";

const SECTIONS = BENCH_SECTIONS;
type Section = BenchSection;

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    only: { type: "string" },
    "no-write": { type: "boolean", default: false },
    write: { type: "string" },
    update: { type: "boolean", default: false },
    // Figure 9's sizes (issue 32 defaults: 2,000 products, 5 rounds, 100,000 stored products).
    "fleet-products": { type: "string" },
    "fleet-rounds": { type: "string" },
    "fleet-in-flight": { type: "string" },
    "fleet-warmup": { type: "string" },
    "fleet-service-only": { type: "boolean", default: false },
    "stored-products": { type: "string" },
    "stored-schema": { type: "string" },
    "peer-sizes": { type: "string" },
    "peer-rounds": { type: "string" },
  },
});
const quick = values.quick ?? false;
const only = new Set<Section>(
  (values.only?.split(",").map((s) => s.trim()) ?? [...SECTIONS]).filter((s): s is Section =>
    (SECTIONS as readonly string[]).includes(s),
  ),
);

/** Sizes and counts: the published run, and a quick smoke run. */
const PLAN = quick
  ? {
      coldRuns: 3,
      seq: 200,
      warmup: 50,
      pipe: 500,
      chunks: 5_000,
      sizes: [1_000, 5_000],
      repeats: 1,
      ioTasks: 5_000,
      resumeTasks: 2_000,
      resumeRepeats: 1,
      postgres: { tasks: 1_000, fleetProducts: 0, productTasks: 10, storedProducts: 0 },
      fleet: {
        fleetProducts: 40,
        productTasks: 10,
        fleetRounds: 2,
        inFlight: 1,
        fleetWarmup: 5,
        fleetRecover: true,
        storedProducts: 2_000,
        storedRuns: 1,
      },
      peer: {
        sizes: [1_000],
        repeats: [1],
        peerRepeats: [1],
        timeoutMs: 120_000,
        resumeTasks: 1_000,
        resumeRepeats: 1,
      },
    }
  : {
      coldRuns: 10,
      seq: 2_000,
      warmup: 3_000,
      pipe: 5_000,
      chunks: 100_000,
      sizes: [1_000, 10_000, 50_000],
      repeats: 5,
      ioTasks: 10_000,
      resumeTasks: 10_000,
      resumeRepeats: 3,
      postgres: { tasks: 10_000, fleetProducts: 0, productTasks: 10, storedProducts: 0 },
      fleet: {
        fleetProducts: 2_000,
        productTasks: 10,
        fleetRounds: 5,
        inFlight: 4,
        // A server's CPU per task still falls until about 200 products (V8 optimises the hot paths late): the
        // figure is the fleet's steady state, so each server runs 300 first (issue 32).
        fleetWarmup: 300,
        fleetRecover: true,
        storedProducts: 100_000,
        storedRuns: 3,
      },
      // A 10,000-task LangGraph run takes minutes on this machine: one run per store, stopped at the limit.
      peer: {
        sizes: [1_000, 10_000],
        repeats: [5, 3],
        peerRepeats: [5, 1],
        timeoutMs: 240_000,
        resumeTasks: 1_000,
        resumeRepeats: 5,
      },
    };
/**
 * Figure 6's plan with `--peer-sizes` (only those sizes, each with its repeats) and `--peer-rounds` (rounds per size for
 * ours and the peer) applied. Throws on a size the plan does not have or a round count that is not a positive integer.
 */
function peerPlan(plan: typeof PLAN.peer): typeof PLAN.peer {
  const wanted = values["peer-sizes"]?.split(",").map((s) => Number(s.trim()));
  const rounds = values["peer-rounds"] === undefined ? undefined : Number(values["peer-rounds"]);
  if (rounds !== undefined && !(Number.isSafeInteger(rounds) && rounds > 0))
    throw new Error(`--peer-rounds must be a positive integer, not ${String(values["peer-rounds"])}`);
  const picked = (wanted ?? plan.sizes).map((size) => {
    const i = plan.sizes.indexOf(size);
    if (i < 0) throw new Error(`--peer-sizes: figure 6 has sizes ${plan.sizes.join(", ")}, not ${String(size)}`);
    return { size, repeats: rounds ?? plan.repeats[i] ?? 1, peerRepeats: rounds ?? plan.peerRepeats[i] ?? 1 };
  });
  return {
    ...plan,
    sizes: picked.map((p) => p.size),
    repeats: picked.map((p) => p.repeats),
    peerRepeats: picked.map((p) => p.peerRepeats),
  };
}

/** The DAG width, and the product's `maxParallelTasks` (a whole level may run at once). */
const WIDTH = 100;
/** The slow reader of figure 3: 32 KiB every 10 ms (about 3 MB/s, well below what the server can produce). */
const SLOW = { bytesPerTick: 32 * 1024, tickMs: 10 };

/** One line of a figure's table. */
type Row = ResultRow;

const log = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

function verdict(ok: boolean | undefined): Row["met"] {
  return ok === undefined ? "—" : ok ? "yes" : "no";
}

async function main(): Promise<void> {
  if (!COMPILED)
    throw new Error("Run the benchmark compiled: `npm run bench` (it builds dist/ and dist/bench/ first).");
  const machine = describeMachine();
  const dir = mkdtempSync(join(tmpdir(), "acp-orchestrator-bench-"));
  const rows: Row[] = [];
  const details: string[] = [];
  const raw: Record<string, unknown> = { machine, plan: PLAN, quick };
  const started = performance.now();
  // Each section's rows and details, with the load average when it started (BENCHMARKS.md shows it per figure).
  const spans: { section: Section; loadAverage: string; row: number; detail: number }[] = [];
  const begin = (section: Section): void => {
    spans.push({ section, loadAverage: describeMachine().loadAverage, row: rows.length, detail: details.length });
  };
  try {
    if (only.has("overhead")) {
      begin("overhead");
      log("figures 1-2: cold start and request overhead");
      const server = serverTarget(dir);
      const echo = echoTarget(dir);
      const cold = await coldStart(server, echo, PLAN.coldRuns);
      const over = await requestOverhead(server, (answerFile) => echoTarget(dir, answerFile), dir, {
        sequential: PLAN.seq,
        pipelined: PLAN.pipe,
        warmup: PLAN.warmup,
      });
      raw.coldStart = cold;
      raw.overhead = { ...over, sequential: summarizeSeq(over) };
      overheadRows(rows, details, cold, over);
    }
    if (only.has("streaming")) {
      begin("streaming");
      log("figure 3: notification streaming");
      const fast = await streaming(mkdtempSync(join(dir, "stream-fast-")), PLAN.chunks);
      log(`  fast reader: ${fast.perSecond.toFixed(0)}/s, server peak ${fast.serverPeakMb.toFixed(0)} MB`);
      const slow = await streaming(mkdtempSync(join(dir, "stream-slow-")), PLAN.chunks, SLOW);
      log(`  slow reader: ${slow.perSecond.toFixed(0)}/s, server peak ${slow.serverPeakMb.toFixed(0)} MB`);
      raw.streaming = { fast, slow };
      streamingRows(rows, details, fast, slow);
    }
    let cells: ScaleCell[] | undefined;
    if (only.has("scale")) {
      begin("scale");
      log("figure 4: scheduler scale");
      cells = await scaleMatrix(dir, PLAN.sizes, PLAN.repeats, WIDTH, log);
      const io = await ioCompletions(dir, PLAN.ioTasks, WIDTH, log);
      raw.scale = cells;
      raw.ioCompletions = io;
      scaleRows(rows, details, cells, io);
    }
    if (only.has("durability")) {
      begin("durability");
      log("figure 5: durability cost");
      const bytes = await durabilityCost(dir, PLAN.sizes, WIDTH, log);
      raw.durability = bytes;
      durabilityRows(rows, details, bytes, cells);
    }
    if (only.has("resume")) {
      begin("resume");
      log("figure 5: resume from disk");
      const resumes = await crashAndResume(dir, PLAN.resumeTasks, PLAN.resumeRepeats, WIDTH, log);
      raw.resume = resumes;
      resumeRows(rows, details, resumes);
    }
    if (only.has("peer")) {
      begin("peer");
      log("figure 6: LangGraph.js on the identical DAG");
      const peer = await peerComparison(dir, peerPlan(PLAN.peer), WIDTH, log);
      raw.peer = peer;
      peerRows(rows, details, peer.cells, peer.resume, PLAN.peer.timeoutMs);
    }
    if (only.has("worktrees")) {
      begin("worktrees");
      log("figure 7: worktree isolation cost per task");
      const costs: WorktreeCost[] = [];
      const scratch = mkdtempSync(join(scratchRoot(), "acp-orchestrator-bench-worktrees-"));
      try {
        for (const files of quick ? [100, 1_000] : [100, 10_000, 100_000]) {
          const cost = await worktreeCost(
            scratch,
            join(scratchRoot(), "acp-orchestrator-bench-cache"),
            files,
            quick ? 4 : 20,
          );
          log(
            `  ${files} files: prepare ${fmt(cost.prepareMs)} ms, commit ${fmt(cost.commitMs)} ms, integrate ${fmt(cost.integrateMs)} ms,` +
              ` total ${fmt(cost.totalMs)} ms; raw git floor ${fmt(cost.floor.prepareMs)} + ${fmt(cost.floor.commitMs)} +` +
              ` ${fmt(cost.floor.integrateMs)} = ${fmt(cost.floor.totalMs)} ms: ${fmt(cost.totalMs / cost.floor.totalMs, 2)}x` +
              ` (first prepare ${fmt(cost.coldPrepareMs)} ms, removing parked worktrees at the end ${fmt(cost.removeParkedMs)} ms;` +
              ` CPU ${cpuText(cost.cpuMsPerTask)} vs ${cpuText(cost.floor.cpuMsPerTask)} ms per task)`,
          );
          costs.push(cost);
        }
      } finally {
        rmSync(scratch, { recursive: true, force: true });
      }
      raw.worktrees = costs;
      worktreeRows(rows, details, costs);
    }
    if (only.has("remote")) {
      begin("remote");
      log("figure 7b: the remote path per task (a local bare repository as the remote) beside the local path");
      const files = quick ? 1_000 : 10_000;
      const cache = join(scratchRoot(), "acp-orchestrator-bench-cache");
      const cost = await remoteCost(join(dir, "remote"), cache, files, quick ? 4 : 20);
      const line = (name: string, c: PathCost) =>
        `  ${name}: prepare ${fmt(c.prepareMs)} ms, commit ${fmt(c.commitMs)} ms, integrate ${fmt(c.integrateMs)} ms,` +
        ` total ${fmt(c.totalMs)} ms, ${fmt(c.pushesPerTask)} pushes per task,` +
        ` CPU ${c.cpuMsPerTask === null ? "n/a" : fmt(c.cpuMsPerTask)} ms per task`;
      log(`  ${files} files, ${cost.tasks} tasks per path; first clone of the mirror ${fmt(cost.cloneMs)} ms`);
      log(line("local", cost.local));
      log(line("remote, batched (the server's way)", cost.batched));
      log(line("remote, one push per ref", cost.unbatched));
      raw.remote = cost;
      remoteRows(rows, details, cost);
    }
    if (only.has("verify")) {
      begin("verify");
      log("figure 10: verification bookkeeping per task (verify.when each, check `true`)");
      const costs: VerifyCost[] = [];
      const scratch = mkdtempSync(join(scratchRoot(), "acp-orchestrator-bench-verify-"));
      try {
        for (const files of quick ? [100, 1_000] : [100, 10_000]) {
          const cache = join(scratchRoot(), "acp-orchestrator-bench-cache");
          const cost = await verifyCost(scratch, cache, files, quick ? 4 : 12);
          log(
            `  ${files} files: bookkeeping ${fmt(cost.bookkeepingMs)} ms per task (with ${fmt(cost.withMs)} ms incl. check` +
              ` ${fmt(cost.checkMs)} ms [bare sh ${fmt(cost.bareCheckMs)} ms], without ${fmt(cost.withoutMs)} ms;` +
              ` first task ${fmt(cost.coldBookkeepingMs)} ms, release ${fmt(cost.releaseMs)} ms;` +
              ` CPU ${cpuText(cost.cpuBookkeepingMs)} ms per task, check alone ${cpuText(cost.cpuCheckMs)} ms;` +
              ` git processes per task ${fmt(cost.gitPerTaskWith, 1)} with, ${fmt(cost.gitPerTaskWithout, 1)} without,` +
              ` ${fmt(cost.gitPerCheck, 1)} per check in the verify worktree)`,
          );
          costs.push(cost);
        }
      } finally {
        rmSync(scratch, { recursive: true, force: true });
      }
      raw.verify = costs;
      verifyRows(rows, details, costs);
    }
    if (only.has("pickup")) {
      begin("pickup");
      log(
        "control request pickup: checkpoint from a second process, owner a running server on SQLite, then PostgreSQL",
      );
      const samples = quick ? 5 : 20;
      const results: PickupResult[] = [await controlPickup(samples)];
      const onPostgres = await withPostgres(log, (url) => controlPickup(samples, url));
      if ("skipped" in onPostgres) log(`  PostgreSQL: ${onPostgres.skipped}`);
      else results.push(onPostgres.result);
      for (const r of results) {
        log(
          `  ${r.store}, ${r.samples} samples: owner saw it after median ${fmt(r.medianAcceptedMs)} ms (max ${fmt(r.maxAcceptedMs)}),` +
            ` answered after median ${fmt(r.medianAnsweredMs)} ms (max ${fmt(r.maxAnsweredMs)});` +
            ` ${r.withinOneSecond ? "PASS" : "FAIL"}: every answer <= 1 s after filing`,
        );
      }
      raw.pickup = results;
      pickupRows(rows, details, results, "skipped" in onPostgres ? onPostgres.skipped : undefined);
    }
    if (only.has("fleet")) {
      begin("fleet");
      log("figure 9: 1, 2, 4 and 8 servers on one PostgreSQL; serve --recover and product.list on stored products");
      const fleetPlan = fleetSizes();
      const outcome = await withPostgres(log, (url) =>
        postgresFigures(url, { tasks: 0, skipStores: true, ...fleetPlan, log }),
      );
      if ("skipped" in outcome) log(`  ${outcome.skipped}`);
      raw.fleet = "skipped" in outcome ? outcome : outcome.result;
      fleetRows(rows, details, outcome, fleetPlan);
    }
    if (only.has("postgres")) {
      begin("postgres");
      log("figure 8: PostgreSQL store beside SQLite and memory; 1, 2 and 4 servers on one database");
      const outcome = await withPostgres(log, (url) => postgresFigures(url, { ...PLAN.postgres, log }));
      if ("skipped" in outcome) log(`  ${outcome.skipped}`);
      raw.postgres = "skipped" in outcome ? outcome : outcome.result;
      postgresRows(rows, details, outcome);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const seconds = (performance.now() - started) / 1000;
  const sections: SectionResult[] = spans.map((span, i) => ({
    section: span.section,
    loadAverage: span.loadAverage,
    rows: rows.slice(span.row, spans[i + 1]?.row ?? rows.length),
    details: details.slice(span.detail, spans[i + 1]?.detail ?? details.length),
  }));
  process.stdout.write(
    `\n${machineLine(machine)}\n\n${resultsTable(rows)}\n\n(benchmark took ${seconds.toFixed(0)} s)\n`,
  );
  // The raw figures, for whoever wants more than the page shows (not committed: dist/ is the build's).
  const rawFile = join(REPO_ROOT, "dist", "bench", "results.json");
  mkdirSync(dirname(rawFile), { recursive: true });
  writeFileSync(
    rawFile,
    JSON.stringify(raw, (key, value: unknown) => (key === "runs" ? undefined : value), 1),
  );
  log(`raw results: ${rawFile}`);
  // `--write FILE` writes the page of whatever ran (a quick or partial run included) to FILE; a full run rewrites
  // BENCHMARKS.md unless `--no-write`.
  const full = !quick && only.size === SECTIONS.length;
  const file = values.write ?? (full && !values["no-write"] ? join(REPO_ROOT, "BENCHMARKS.md") : undefined);
  if (values.update && file === undefined) {
    const page = join(REPO_ROOT, "BENCHMARKS.md");
    writeFileSync(page, updateBenchmarksDocument(readFileSync(page, "utf8"), { machine, seconds, sections, quick }));
    log(`rewrote the sections ${[...only].join(", ")} of ${page}`);
  } else if (file !== undefined) {
    writeFileSync(file, benchmarksDocument({ machine, seconds, sections, quick }));
    log(`wrote ${file}`);
  } else {
    log("BENCHMARKS.md not written (quick, --only or --no-write run; --update or --write FILE writes one anyway)");
  }
}

/** Targets (issue 34): the worktree path per task at most 1.2x the raw git floor at 10,000 files, 1.1x at 100,000. */
function worktreeTarget(files: number): number | undefined {
  return files >= 100_000 ? 1.1 : files >= 10_000 ? 1.2 : undefined;
}

function cpuText(ms: number | null): string {
  return ms === null ? "n/a" : fmt(ms);
}

function pickupRows(rows: Row[], details: string[], results: PickupResult[], postgresSkipped?: string): void {
  for (const r of results) {
    rows.push({
      figure: "pickup",
      measure: `${r.store === "sqlite" ? "SQLite" : "PostgreSQL"}: checkpoint filed by a second process → answered (median / max of ${r.samples})`,
      value: `${fmt(r.medianAnsweredMs)} / ${fmt(r.maxAnsweredMs)} ms`,
      baseline: "—",
      ratio: "—",
      target: "every answer ≤ 1,000 ms",
      met: verdict(r.withinOneSecond),
    });
  }
  details.push(
    "### Control request pickup\n\n" +
      "A real `serve` process owns a confirmed product whose one task waits at a gate; the benchmark process files " +
      "`product.checkpoint` through the store as the CLI's `checkpoint ID` does (operator/control-client.ts), at a random " +
      "phase of the owner's catch-up tick, and times filing → accepted by the owner → answered." +
      (postgresSkipped === undefined ? "" : ` PostgreSQL was not measured: ${postgresSkipped}`),
  );
}

function remoteRows(rows: Row[], details: string[], c: RemoteCost): void {
  const files = c.files.toLocaleString("en-US");
  rows.push(
    {
      figure: "7b",
      measure: `remote path cost per task, ${files} files (fetch + prepare + commit + integrate + 1 push)`,
      value: `${fmt(c.batched.totalMs)} ms`,
      baseline: `local path: ${fmt(c.local.totalMs)} ms`,
      ratio: `${(c.batched.totalMs / c.local.totalMs).toFixed(2)}x`,
      target: "—",
      met: "—",
    },
    {
      figure: "7b",
      measure: `pushes per task, attempt ref and branch in one push (saved per task: ${fmt(c.unbatched.integrateMs - c.batched.integrateMs)} ms)`,
      value: `${fmt(c.batched.pushesPerTask)}`,
      baseline: `one push per ref: ${fmt(c.unbatched.pushesPerTask)}`,
      ratio: `${(c.batched.integrateMs / c.unbatched.integrateMs).toFixed(2)}x integrate`,
      target: "1 push per task",
      met: verdict(c.batched.pushesPerTask === 1),
    },
  );
  const cell = (p: PathCost) => [
    `${fmt(p.prepareMs)} ms`,
    `${fmt(p.commitMs)} ms`,
    `${fmt(p.integrateMs)} ms`,
    `${fmt(p.totalMs)} ms`,
    fmt(p.pushesPerTask),
    p.cpuMsPerTask === null ? "n/a" : `${fmt(p.cpuMsPerTask)} ms`,
  ];
  details.push(
    "### Figure 7b: the remote path per task\n\n" +
      `Median per task over ${c.tasks} tasks per path, ${files} files, run in pairs from one head as in figure 7. ` +
      "The remote path is the adapter the server uses for a product with `workspace: {remote}` (RemoteWorkspace): a " +
      "mirror clone under the workspace root, fetched before each prepare, every ref move a `git push " +
      "--force-with-lease` acknowledged before the mirror's ref moves; the remote is a local bare repository (a path " +
      "URL), so the figure is what the remote path itself adds (one fetch and the pushes per task, each a git " +
      "process and a receive-pack on the remote), not a network's latency: over a network add a round trip or more " +
      "per fetch and per push. Batched is the server's way (core keepAndMoveBranch with `moveRefs`: the attempt ref " +
      "and the integration branch in one push); one push per ref is what a port without `moveRefs` would cost. The " +
      "remote's pre-receive hook counts the pushes. CPU per task is the user + system time of the benchmark process " +
      "and every git process it ran (the remote's receive-pack included), over the whole loop: what a task costs the " +
      "machine whatever its load, where the wall-clock medians move with the load of the shared machine. The mirror's first clone (once per remote and server, e.g. on a " +
      `take-over) took ${fmt(c.cloneMs)} ms.\n\n` +
      markdownTable(
        ["path", "prepare", "commit", "integrate", "total", "pushes per task", "CPU per task (this process + git)"],
        [
          ["local (GitWorkspace on the repository)", ...cell(c.local)],
          ["remote, batched (the server's way)", ...cell(c.batched)],
          ["remote, one push per ref", ...cell(c.unbatched)],
        ],
      ),
  );
}

function worktreeRows(rows: Row[], details: string[], costs: WorktreeCost[]): void {
  for (const c of costs) {
    const target = worktreeTarget(c.files);
    const ratio = c.totalMs / c.floor.totalMs;
    rows.push({
      figure: "7",
      measure: `worktree path per task, ${c.files.toLocaleString("en-US")} files (prepare + commit + integrate, median ms)`,
      value: `${fmt(c.totalMs)} ms`,
      baseline: `${fmt(c.floor.totalMs)} ms (raw git)`,
      ratio: `${fmt(ratio, 2)}x`,
      target: target === undefined ? "—" : `≤ ${target}x`,
      met: target === undefined ? "—" : verdict(ratio <= target),
    });
  }
  details.push(
    "### Figure 7: worktree isolation cost per task\n\n" +
      `Median per task over ${costs[0]?.tasks ?? 0} tasks run in pairs from one head (every second integration is a ` +
      "real merge), one changed file per task, on the git adapter the server uses and, interleaved pair by pair in the " +
      "same run, on the raw git floor: plain `git` in two long-lived worktrees, `checkout -f --detach` + `clean -ffdxq` " +
      "+ `add -A` + `write-tree` + `commit-tree` + (`merge-tree --write-tree` + `commit-tree` when the head moved) + " +
      "`update-ref`, with none of the safety rules of guarantee 16. Ours keeps them all (explicit `--git-dir`/" +
      "`--work-tree`, hooks, fsmonitor and filters off, the gitfile verified, the capture against the prepared base, " +
      "the attempt ref kept): a finished attempt's worktree is parked and the next attempt of the product takes it, " +
      "so only the first attempts pay a full checkout (first prepare) and the parked worktrees are removed once, when " +
      "the product stops (not per task). The first pair of each side is left out of the medians. The repositories are " +
      "generated by `git fast-import` once and cached (on /dev/shm when it exists), each side in its own clone. CPU " +
      "per task is the user + system time of the benchmark process and every git process the side ran, over its tasks " +
      "after the first pair: what a task costs the machine whatever its load, where the wall-clock medians move with " +
      "the load of the shared machine.\n\n" +
      markdownTable(
        [
          "files",
          "side",
          "prepare",
          "commit",
          "integrate",
          "total",
          "CPU per task",
          "first prepare (worktree add)",
          "removal at the end",
        ],
        costs.flatMap((c) => [
          [
            c.files.toLocaleString("en-US"),
            "acp-orchestrator",
            `${fmt(c.prepareMs)} ms`,
            `${fmt(c.commitMs)} ms`,
            `${fmt(c.integrateMs)} ms`,
            `${fmt(c.totalMs)} ms`,
            `${cpuText(c.cpuMsPerTask)} ms`,
            `${fmt(c.coldPrepareMs)} ms`,
            `${fmt(c.removeParkedMs)} ms`,
          ],
          [
            c.files.toLocaleString("en-US"),
            "raw git floor",
            `${fmt(c.floor.prepareMs)} ms`,
            `${fmt(c.floor.commitMs)} ms`,
            `${fmt(c.floor.integrateMs)} ms`,
            `${fmt(c.floor.totalMs)} ms`,
            `${cpuText(c.floor.cpuMsPerTask)} ms`,
            "—",
            "—",
          ],
        ]),
      ),
  );
}

/** Targets (issue 14): 10,000 tasks on PostgreSQL under 5 s on one server; 4 servers at least 0.8× one server. */
const POSTGRES_TARGET_S = 5;

/**
 * DBOS Transact's WAL bytes per task on the same DAG, lowest and highest, as issue 34's independent measurement gave
 * them (DBOS is not run here). Issue 34's target: ours at most DBOS's, judged against the lowest.
 */
const DBOS_WAL_BYTES = [577, 606] as const;

function postgresRows(
  rows: Row[],
  details: string[],
  outcome: { result: PostgresFigures } | { skipped: string },
): void {
  if ("skipped" in outcome) {
    rows.push({
      figure: "8",
      measure: "PostgreSQL store",
      value: "not measured",
      baseline: "—",
      ratio: "—",
      target: "—",
      met: "—",
    });
    details.push(`### Figure 8: PostgreSQL\n\nNot measured: ${outcome.skipped}\n`);
    return;
  }
  const { stores, markdown } = outcome.result;
  // The headline is figure 4's workload (a whole level in parallel); the 4-in-parallel runs are in the details.
  const pgRun = stores.find((f) => f.store === "postgres" && f.parallel > 4);
  const sqlite = stores.find((f) => f.store === "sqlite" && f.parallel > 4);
  if (pgRun && sqlite) {
    const big = pgRun.tasks >= 10_000;
    rows.push({
      figure: "8",
      measure: `${pgRun.tasks.toLocaleString("en-US")} tasks on PostgreSQL, one server (s)`,
      value: fmt(pgRun.runMs / 1000, 2),
      baseline: `${fmt(sqlite.runMs / 1000, 2)} (SQLite)`,
      ratio: `${fmt(pgRun.runMs / sqlite.runMs, 2)}x`,
      target: big ? `< ${POSTGRES_TARGET_S} s` : "—",
      met: big ? verdict(pgRun.runMs / 1000 < POSTGRES_TARGET_S) : "—",
    });
  }
  for (const f of stores) {
    if (f.store !== "postgres" || !f.db) continue;
    const wal = f.db.walLsnBytes;
    rows.push({
      figure: "8",
      measure: `WAL bytes per task on PostgreSQL, ${f.parallel} in parallel (\`pg_current_wal_lsn()\` delta)`,
      value: fmt(wal),
      baseline: `${fmt(DBOS_WAL_BYTES[0])}–${fmt(DBOS_WAL_BYTES[1])} (DBOS Transact, issue 34's measurement, not measured here)`,
      ratio: `${fmt(wal / DBOS_WAL_BYTES[0], 2)}x`,
      target: `≤ ${fmt(DBOS_WAL_BYTES[0])} B`,
      met: verdict(wal <= DBOS_WAL_BYTES[0]),
    });
  }
  details.push(
    "### Figure 8: PostgreSQL store and many servers on one database\n\n" +
      "In-process product service (as figure 4) on each store, instant workers, a whole level in parallel (figure 4's " +
      "workload: the summary's row) and 4 in parallel (about one commit per 1.3 tasks: bound by the disk's flush " +
      'time); many servers on one database and stored products are figure 9. "Time in store calls" is the share of ' +
      "the run spent waiting for the run-state authority (the database's share of the time). test/bench/postgres.ts.\n\n" +
      `${markdown}\n`,
  );
}

/** Figure 9's sizes: the plan's, with the command line's knobs over them. */
function fleetSizes(): typeof PLAN.fleet & { storedSchema?: string } {
  const n = (v: string | undefined, fallback: number): number => (v === undefined ? fallback : Number(v));
  return {
    ...PLAN.fleet,
    fleetProducts: n(values["fleet-products"], PLAN.fleet.fleetProducts),
    fleetRounds: n(values["fleet-rounds"], PLAN.fleet.fleetRounds),
    inFlight: n(values["fleet-in-flight"], PLAN.fleet.inFlight),
    fleetWarmup: n(values["fleet-warmup"], PLAN.fleet.fleetWarmup),
    fleetRecover: values["fleet-service-only"] ? false : PLAN.fleet.fleetRecover,
    storedProducts: n(values["stored-products"], PLAN.fleet.storedProducts),
    ...(values["stored-schema"] ? { storedSchema: values["stored-schema"] } : {}),
  };
}

/** Issue 14: 4 servers on one database keep at least this share of one server's throughput. */
const FLEET_FOUR_RATIO = 0.8;

function fleetRows(
  rows: Row[],
  details: string[],
  outcome: { result: PostgresFigures } | { skipped: string },
  sizes: ReturnType<typeof fleetSizes>,
): void {
  if ("skipped" in outcome) {
    rows.push({
      figure: "9",
      measure: "fleet on PostgreSQL",
      value: "not measured",
      baseline: "—",
      ratio: "—",
      target: "—",
      met: "—",
    });
    details.push(`### Figure 9\n\nNot measured: ${outcome.skipped}\n`);
    return;
  }
  const { fleet, stored, markdown } = outcome.result;
  const one = fleet.find((f) => f.servers === 1);
  const spread = (f: { tasksPerSecond: number; minTasksPerSecond: number; maxTasksPerSecond: number }): string =>
    `${fmt(f.tasksPerSecond, 0)} (${fmt(f.minTasksPerSecond, 0)}–${fmt(f.maxTasksPerSecond, 0)})`;
  for (const f of fleet) {
    if (!one || f.servers === 1) continue;
    const target = f.servers === 8 ? "≥ 1x" : f.servers === 4 ? `≥ ${FLEET_FOUR_RATIO}x` : "—";
    rows.push({
      figure: "9",
      measure:
        `tasks/s, ${f.servers} servers on one database, median (lowest–highest) of ${f.rounds.length}; ` +
        `${fmt(f.statementsPerTask, 2)} statements/task` +
        (f.servers === 8 ? " (no contention collapse)" : ""),
      value: spread(f),
      baseline: `${spread(one)} (1 server, ${fmt(one.statementsPerTask, 2)} statements/task)`,
      ratio: `${fmt(f.vsOne, 2)}x`,
      target,
      met: f.servers === 8 ? verdict(f.vsOne >= 1) : f.servers === 4 ? verdict(f.vsOne >= FLEET_FOUR_RATIO) : "—",
    });
  }
  if (stored) {
    const startup = Math.max(stored.initializeMs, stored.recoveredMs);
    const n = stored.products.toLocaleString("en-US");
    rows.push({
      figure: "9",
      measure: `serve --recover start-up (spawn → initialized and recovery pass done), ${n} stored products, median ms`,
      value: fmt(startup, 0),
      baseline: `${fmt(stored.emptyStartupMs, 0)} (empty schema)`,
      ratio: `${fmt(startup / stored.emptyStartupMs, 2)}x`,
      target: "< 1000 ms",
      met: verdict(startup < 1000),
    });
    rows.push({
      figure: "9",
      measure: `product.list of all ${n} stored products, request sent → last byte of the answer received, median ms`,
      value: fmt(stored.listMs, 0),
      baseline: "—",
      ratio: "—",
      target: "< 1000 ms",
      met: verdict(stored.listMs < 1000),
    });
    rows.push({
      figure: "9",
      measure: `product.list of all ${n} stored products, request sent → answer parsed by the bench client, median ms`,
      value: fmt(stored.listParsedMs, 0),
      baseline: `${fmt(stored.listMs, 0)} (last byte received)`,
      ratio: `${fmt(stored.listParsedMs / stored.listMs, 2)}x`,
      target: "—",
      met: "—",
    });
    for (const [what, ms] of [
      [`the first page (limit ${LIST_PAGE})`, stored.listPageMs],
      ["the next page (its nextCursor)", stored.listNextPageMs],
    ] as const) {
      rows.push({
        figure: "9",
        measure: `product.list, ${what}, of ${n} stored products, median ms`,
        value: fmt(ms, 0),
        baseline: `${fmt(stored.listMs, 0)} (all)`,
        ratio: `${fmt(ms / stored.listMs, 3)}x`,
        target: "< 1000 ms",
        met: verdict(ms < 1000),
      });
    }
  }
  details.push(
    "### Figure 9\n\n" +
      `Part 2 and 3 of test/bench/postgres.ts (issue 32). Sizes of this run: ${sizes.fleetProducts.toLocaleString("en-US")} ` +
      `products of ${sizes.productTasks} instant tasks shared by 1, 2, 4 and 8 server processes (each its own ` +
      `\`node\` process with its own pool, ${sizes.inFlight} product(s) in flight per server, a fresh schema per run, ` +
      (sizes.fleetRecover
        ? "each running the fleet as `serve --recover` composes it: change feed, recovery, PostgreSQL liveness; "
        : "each running the product service alone (`--fleet-service-only`: no change feed, recovery or liveness); ") +
      `each server first runs ${sizes.fleetWarmup} products of its own, not counted, and the clock starts when every ` +
      "server is warm and ready: a fleet's servers are long-lived, so this is their steady state; a server's CPU " +
      "per task still falls until about 200 products, while V8 optimises its hot paths), " +
      `${sizes.fleetRounds} round(s), each round running every server count once in order; then ` +
      `${sizes.storedProducts.toLocaleString("en-US")} completed products stored in one schema (one real product ` +
      "cloned in SQL) and the built CLI's `serve --recover` started on it, beside the same start-up on an empty " +
      "schema (the floor). Reproduce with these sizes: `npm run bench -- --only fleet --fleet-products " +
      `${sizes.fleetProducts} --fleet-rounds ${sizes.fleetRounds} --fleet-in-flight ${sizes.inFlight} --fleet-warmup ${sizes.fleetWarmup} ` +
      `${sizes.fleetRecover ? "" : "--fleet-service-only "}--stored-products ` +
      `${sizes.storedProducts}\` (add \`--update\` to write the section here).\n\n${markdown}\n`,
  );
}

function machineLine(m: Machine): string {
  return `${m.cpuModel}, ${m.cores} cores, ${m.memoryGb} GB, Node ${m.node} (${m.platform}), load average ${m.loadAverage}, ${m.date}`;
}

// ---------------------------------------------------------------------------------------------------------------
// Figures → rows

function summarizeSeq(o: OverheadResult) {
  return o.sequential.map((f) => ({
    placement: f.placement,
    server: { median: median(f.server), p99: percentile(f.server, 99) },
    echo: { median: median(f.echo), p99: percentile(f.echo, 99) },
    ...(f.sameCore ? { sameCore: f.sameCore } : {}),
  }));
}

/** How a placement reads in a row (support/placement.ts). */
function placementLabel(name: string): string {
  return name === "scheduler" ? "not pinned" : `pinned, ${name}`;
}

/**
 * The targets: issue 34's (cold start, sequential on two cores, pipelined on one core: req/s and CPU per request) and
 * issue 7's that it left in place (sequential on one core, pipelined on two cores).
 */
const OVERHEAD_TARGETS = {
  coldStart: 1.6,
  sequentialTwoCores: 1.2,
  sequentialOneCore: 1.5,
  pipelined: 0.8,
  pipelinedTwoCores: 0.5,
  cpu: 1.5,
};

function overheadRows(
  rows: Row[],
  details: string[],
  cold: { server: number[]; echo: number[] },
  o: OverheadResult,
): void {
  const cs = median(cold.server);
  const ce = median(cold.echo);
  rows.push({
    figure: "1 cold start",
    measure: "spawn → initialize answered (median ms)",
    value: fmt(cs, 0),
    baseline: `${fmt(ce, 0)} (echo)`,
    ratio: `${fmt(cs / ce, 2)}x`,
    target: `≤ ${OVERHEAD_TARGETS.coldStart}x`,
    met: verdict(cs / ce <= OVERHEAD_TARGETS.coldStart),
  });
  sequentialRows(rows, o);
  pipelinedRows(rows, o);
  overheadDetails(details, cold, o);
}

/**
 * The sequential rows: judged on two cores (issue 34: ≤ 1.2x echo1k) and on one core (issue 7: ≤ 1.5x); the
 * scheduler's own placement is reported beside them (with where it put each process), judged only when nothing
 * could be pinned.
 */
function sequentialRows(rows: Row[], o: OverheadResult): void {
  const pinned = o.sequential.some((f) => f.placement !== "scheduler");
  const limitOf = (placement: string): number | undefined =>
    placement === "two cores"
      ? OVERHEAD_TARGETS.sequentialTwoCores
      : placement === "one core" || !pinned
        ? OVERHEAD_TARGETS.sequentialOneCore
        : undefined;
  for (const s of summarizeSeq(o)) {
    const ratio = s.server.median / s.echo.median;
    const limit = limitOf(s.placement);
    const shared = s.sameCore
      ? `; on the client's core: server ${fmt(100 * s.sameCore.server, 0)} %, echo ${fmt(100 * s.sameCore.echo, 0)} % of samples`
      : "";
    rows.push({
      figure: "2 request overhead",
      measure: `sequential product.status, median (ms), ${placementLabel(s.placement)}${shared}`,
      value: fmt(s.server.median, 3),
      baseline: `${fmt(s.echo.median, 3)} (echo1k)`,
      ratio: `${fmt(ratio, 2)}x`,
      target: limit !== undefined ? `≤ ${limit}x` : "—",
      met: limit !== undefined ? verdict(ratio <= limit) : "—",
    });
    rows.push({
      figure: "2 request overhead",
      measure: `sequential product.status, p99 (ms), ${placementLabel(s.placement)}`,
      value: fmt(s.server.p99, 3),
      baseline: `${fmt(s.echo.p99, 3)} (echo1k)`,
      ratio: `${fmt(s.server.p99 / s.echo.p99, 2)}x`,
      target: "—",
      met: "—",
    });
  }
}

/**
 * The pipelined rows, req/s and CPU per request in each placement; judged on one core (issue 34: ≥ 0.8x echo1k's
 * req/s, ≤ 1.5x its CPU per request), the others reported beside.
 */
function pipelinedRows(rows: Row[], o: OverheadResult): void {
  const judgedHere = (placement: string) =>
    placement === "one core" || (placement === "scheduler" && !o.pipelined.some((f) => f.placement === "one core"));
  for (const f of o.pipelined) {
    const judged = judgedHere(f.placement);
    // Two cores keeps issue 7's target (≥ 0.5x), one core has issue 34's.
    const floor = judged
      ? OVERHEAD_TARGETS.pipelined
      : f.placement === "two cores"
        ? OVERHEAD_TARGETS.pipelinedTwoCores
        : undefined;
    const ps = f.server.perSecond;
    const pe = f.echo.perSecond;
    rows.push({
      figure: "2 request overhead",
      measure: `pipelined product.status (${o.requests.pipelined} at once), req/s, ${placementLabel(f.placement)}`,
      value: fmt(ps, 0),
      baseline: `${fmt(pe, 0)} (echo1k)`,
      ratio: `${fmt(ps / pe, 2)}x`,
      target: floor !== undefined ? `≥ ${floor}x` : "—",
      met: floor !== undefined ? verdict(ps / pe >= floor) : "—",
    });
    const sc = f.server.cpuPerRequestUs;
    const ec = f.echo.cpuPerRequestUs;
    if (sc === undefined || ec === undefined) continue;
    rows.push({
      figure: "2 request overhead",
      measure: `pipelined product.status, CPU per request (µs, all threads), ${placementLabel(f.placement)}`,
      value: fmt(sc, 2),
      baseline: `${fmt(ec, 2)} (echo1k)`,
      ratio: `${fmt(sc / ec, 2)}x`,
      target: judged ? `≤ ${OVERHEAD_TARGETS.cpu}x` : "—",
      met: judged ? verdict(sc / ec <= OVERHEAD_TARGETS.cpu) : "—",
    });
  }
}

function overheadDetails(details: string[], cold: { server: number[]; echo: number[] }, o: OverheadResult): void {
  const cs = median(cold.server);
  const ce = median(cold.echo);
  const best = o.pipelined
    .map((f) => `${placementLabel(f.placement)}: server ${fmt(f.server.ms, 0)} ms, echo1k ${fmt(f.echo.ms, 0)} ms`)
    .join("; ");
  details.push(
    "### 1–2. Cold start and request overhead",
    "",
    `Cold start: ${cold.server.length} fresh processes of each, interleaved; spawn → \`initialize\` response. Server ` +
      `min/median/max ${fmt(Math.min(...cold.server), 0)}/${fmt(cs, 0)}/${fmt(Math.max(...cold.server), 0)} ms; echo ` +
      `${fmt(Math.min(...cold.echo), 0)}/${fmt(ce, 0)}/${fmt(Math.max(...cold.echo), 0)} ms. The floor is ` +
      "test/bench/echo-server.ts: plain `node` reading NDJSON with `readline` and answering with its params.",
    "",
    `Requests: one product planned by the built-in leader, then, in each placement, ${o.requests.sequential} sequential ` +
      `\`product.status\` calls on each process, in interleaved blocks, and, after one unmeasured round each, five interleaved rounds of ` +
      `${o.requests.pipelined} pipelined ones (the best round of each counts; CPU per request is the CPU time of all ` +
      "the process's threads over the five rounds, from /proc/PID/task/*/schedstat, divided by the requests). The " +
      `answer is ${o.statusBytes} bytes of JSON; the floor, echo1k, is the echo started with that answer: it parses ` +
      "each request and writes the same bytes (the answer's text with the id spliced in, the answers to one input " +
      `chunk in one write). Best pipelined rounds: ${best}.`,
    "",
    "Placements (test/bench/support/placement.ts): a round trip between two processes costs several times more when " +
      "the kernel runs them on two cores (each answer wakes the other core) than on one (a direct switch), and when " +
      "nothing is pinned the scheduler chooses differently for the small echo than for the server, so its ratio " +
      "measures that choice as much as the server. Both processes are therefore measured pinned alike with " +
      "`taskset` (the client's main thread and every thread of the process): on one core, on two cores, and, for " +
      "reference, not pinned, with the share of samples in which each process had last run on the client's core. " +
      "Sequential requests are judged on two cores (≤ 1.2x, issue 34) and one core (≤ 1.5x); pipelined ones on one " +
      "core, where client and process share the CPU, so the server's CPU per request shows directly in its req/s.",
    "",
  );
}

function streamingRows(rows: Row[], details: string[], fast: StreamingResult, slow: StreamingResult): void {
  rows.push({
    figure: "3 streaming",
    measure: `${fast.chunks} taskOutputDelta, fast reader (notifications/s)`,
    value: fmt(fast.perSecond, 0),
    baseline: "—",
    ratio: "—",
    target: "all delivered",
    met: verdict(fast.received === fast.chunks),
  });
  rows.push({
    figure: "3 streaming",
    measure: "server peak RSS, fast reader (MB)",
    value: fmt(fast.serverPeakMb, 0),
    baseline: `${fmt(fast.serverBaseMb, 0)} (idle server)`,
    ratio: `${fmt(fast.serverPeakMb / fast.serverBaseMb, 2)}x`,
    target: "—",
    met: "—",
  });
  rows.push({
    figure: "3 streaming",
    measure: `server peak RSS, slow reader ${Math.round((((SLOW.bytesPerTick / SLOW.tickMs) * 1000) / 1e6) * 10) / 10} MB/s (MB)`,
    value: fmt(slow.serverPeakMb, 0),
    baseline: `${fmt(slow.serverBaseMb, 0)} (idle server)`,
    ratio: `${fmt(slow.serverPeakMb / slow.serverBaseMb, 2)}x`,
    target: "< 150 MB",
    met: verdict(slow.serverPeakMb < 150 && slow.received === slow.chunks),
  });
  details.push(
    "### 3. Notification streaming",
    "",
    `One task on a real worker agent subprocess (test/bench/fixtures/streaming-agent.ts, configured through ` +
      `\`acp-orchestrator.json\`) that streams ${fast.chunks} small \`agent_message_chunk\`s; the server turns each ` +
      `into a \`product.taskOutputDelta\`. Fast reader: ${fast.received} received in ${fmt(fast.ms, 0)} ms ` +
      `(${fmt(fast.bytes / 1e6, 1)} MB of stdout). Slow reader (${SLOW.bytesPerTick} bytes every ${SLOW.tickMs} ms): ` +
      `${slow.received} received in ${fmt(slow.ms, 0)} ms. Peak RSS is the server's VmHWM; its RSS sampled every ` +
      `100 ms, highest by the time 25/50/75/100 % of the notifications had arrived: fast reader ` +
      `${fast.rssByQuarter.map((x) => fmt(x, 0)).join("/")} MB, slow reader ${slow.rssByQuarter.map((x) => fmt(x, 0)).join("/")} MB.`,
    "",
  );
}

function scaleRows(rows: Row[], details: string[], cells: ScaleCell[], io: ScaleResult): void {
  const cell = (tasks: number, authority: string) => cells.find((c) => c.tasks === tasks && c.authority === authority);
  const sizes = [...new Set(cells.map((c) => c.tasks))].sort((a, b) => a - b);
  for (const authority of ["memory", "sqlite"] as const) {
    for (const tasks of sizes) {
      const c = cell(tasks, authority);
      if (!c) continue;
      const mem = cell(tasks, "memory");
      const limit = tasks === 10_000 ? (authority === "memory" ? 2_000 : 6_000) : undefined;
      rows.push({
        figure: "4 scheduler scale",
        measure: `${tasks} tasks, ${authority}: total ms, best (median; µs/task)`,
        value: `${fmt(c.bestRunMs, 0)} (${fmt(c.runMs, 0)}; ${fmt((c.bestRunMs * 1000) / tasks, 0)})`,
        baseline: authority === "sqlite" && mem ? `${fmt(mem.bestRunMs, 0)} (memory)` : "—",
        ratio: authority === "sqlite" && mem ? `${fmt(c.bestRunMs / mem.bestRunMs, 2)}x` : "—",
        target: limit ? `< ${limit / 1000} s` : "—",
        met: limit ? verdict(c.bestRunMs < limit) : "—",
      });
    }
    for (let i = 1; i < sizes.length; i += 1) {
      const a = cell(sizes[i - 1] as number, authority);
      const b = cell(sizes[i] as number, authority);
      if (!a || !b) continue;
      const sizeRatio = b.tasks / a.tasks;
      const growth = b.bestRunMs / a.bestRunMs;
      const isTarget = a.tasks === 10_000 && b.tasks === 50_000;
      rows.push({
        figure: "4 scheduler scale",
        measure: `${authority}: time growth ${a.tasks} → ${b.tasks} (${sizeRatio}x tasks), best (median)`,
        value: `${fmt(growth, 2)}x (${fmt(b.runMs / a.runMs, 2)}x)`,
        baseline: `${sizeRatio}x (linear)`,
        ratio: `${fmt(growth / sizeRatio, 2)}`,
        target: isTarget ? "≤ 6x" : "—",
        met: isTarget ? verdict(growth <= 6) : "—",
      });
    }
    const largest = cell(sizes[sizes.length - 1] as number, authority);
    if (largest) {
      const isTarget = largest.tasks === 50_000;
      rows.push({
        figure: "4 scheduler scale",
        measure: `${largest.tasks} tasks, ${authority}: peak RSS (MB)`,
        value: fmt(largest.peakRssMb, 0),
        baseline: "—",
        ratio: "—",
        target: isTarget ? "< 300 MB" : "—",
        met: isTarget ? verdict(largest.peakRssMb < 300) : "—",
      });
    }
  }
  const instant = cell(io.tasks, "sqlite");
  if (instant) {
    const baseWrites = instant.runs[0]?.meter.writes ?? 0;
    rows.push({
      figure: "4 scheduler scale",
      measure: `${io.tasks} tasks, sqlite, results on separate event-loop turns: total ms (commits)`,
      value: `${fmt(io.runMs, 0)} (${io.meter.writes})`,
      baseline: `${fmt(instant.runMs, 0)} (${baseWrites}) instant`,
      ratio: `${fmt(io.runMs / instant.runMs, 2)}x`,
      target: "grouped per wave",
      met: verdict(io.meter.writes <= baseWrites * 1.1),
    });
    rows.push({
      figure: "4 scheduler scale",
      measure: `${io.tasks} tasks, sqlite: longest event-loop stall during the run (ms)`,
      value: fmt(instant.loopDelayMaxMs, 0),
      baseline: `${fmt(instant.runMs, 0)} (whole run)`,
      ratio: "—",
      target: "—",
      met: "—",
    });
  }
  const body = cells.map((c) => [
    String(c.tasks),
    c.authority,
    fmt(c.planMs, 0),
    fmt(c.runMs, 0),
    `${fmt(Math.min(...c.runs.map((r) => r.runMs)), 0)}–${fmt(Math.max(...c.runs.map((r) => r.runMs)), 0)}`,
    fmt((c.runMs * 1000) / c.tasks, 0),
    fmt(c.writeMs, 0),
    String(c.runs[0]?.meter.writes ?? 0),
    fmt(c.loopDelayMaxMs, 0),
    fmt(c.peakRssMb, 0),
  ]);
  details.push(
    "### 4. Scheduler scale",
    "",
    `Random layered DAGs (width ${WIDTH}, 1–3 dependencies on the level before, seeded), one instance per column, ` +
      `\`maxParallelTasks\` ${WIDTH}; instant in-process workers (a resolved promise), the real clock, ` +
      `\`ProductService\` wired as the server wires it; each case in its own process, ${cells[0]?.runs.length ?? 0} ` +
      `runs each, medians. "plan" is product.plan → planReady (validation and persistence of the plan); "run" is ` +
      `confirm → product.completed; time targets are judged on the best run (other work on this shared machine only ` +
      `adds time), medians are shown beside. "authority ms" is time spent inside authority writes (SQLite commits with fsync); ` +
      `"loop stall" the longest event-loop delay during the run (a request arriving then waits that long). The ` +
      `"separate event-loop turns" case has each worker answer arrive on its own turn (setImmediate), as real ` +
      `agents' answers arrive through I/O callbacks: ${io.tasks} tasks in ${fmt(io.runMs, 0)} ms with ${io.meter.writes} ` +
      `authority writes.`,
    "",
    markdownTable(
      [
        "tasks",
        "authority",
        "plan ms",
        "run ms",
        "run range",
        "µs/task",
        "authority ms",
        "writes",
        "loop stall ms",
        "peak RSS MB",
      ],
      body,
    ),
    "",
  );
}

function durabilityRows(rows: Row[], details: string[], results: ScaleResult[], cells: ScaleCell[] | undefined): void {
  const perTask = results.map((r) => r.meter.bytes / r.tasks);
  const spread = Math.max(...perTask) / Math.min(...perTask);
  for (const r of results) {
    const sqlite = cells?.find((c) => c.tasks === r.tasks && c.authority === "sqlite");
    const memory = cells?.find((c) => c.tasks === r.tasks && c.authority === "memory");
    rows.push({
      figure: "5 durability",
      measure: `${r.tasks} tasks: bytes written per task (disk bytes/task)`,
      value: `${fmt(r.meter.bytes / r.tasks, 0)} (${fmt(r.diskWriteBytes / r.tasks, 0)})`,
      baseline: "—",
      ratio: "—",
      target: "—",
      met: "—",
    });
    if (sqlite && memory) {
      rows.push({
        figure: "5 durability",
        measure: `${r.tasks} tasks: time per task completion spent in authority writes (µs)`,
        value: `${fmt((sqlite.writeMs * 1000) / r.tasks, 0)} (SQLite)`,
        baseline: `${fmt((memory.writeMs * 1000) / r.tasks, 0)} (memory)`,
        ratio: `${fmt(sqlite.writeMs / memory.writeMs, 2)}x`,
        target: "—",
        met: "—",
      });
    }
  }
  rows.push({
    figure: "5 durability",
    measure: "bytes per task completion: largest / smallest over sizes",
    value: fmt(spread, 2),
    baseline: "1.00 (independent of size)",
    ratio: fmt(spread, 2),
    target: "independent (≤ 1.25)",
    met: verdict(spread <= 1.25),
  });
  const kinds = [...new Set(results.flatMap((r) => Object.keys(r.meter.bytesBy)))].sort();
  details.push(
    "### 5. Durability cost",
    "",
    "Logical bytes are the UTF-8 JSON handed to the authority (events appended and records put), metered in a " +
      "separate SQLite run per size (metering costs one extra stringify, so those runs are not timed); disk bytes are " +
      "the process's `write_bytes` from /proc (WAL frames, checkpoints). Time per completion is the time spent inside " +
      "authority writes (SQLite commits with fsync, all synchronous inside the call) per task, median of the scale " +
      "runs, beside the memory authority's.",
    "",
    markdownTable(
      ["bytes per task", ...results.map((r) => String(r.tasks))],
      kinds.map((k) => [k, ...results.map((r) => fmt((r.meter.bytesBy[k] ?? 0) / r.tasks, 1))]),
    ),
    "",
  );
}

function resumeRows(rows: Row[], details: string[], results: ScaleResult[]): void {
  // Best of the repeats for the verdict (as for the scale times), the median beside it.
  const best = results.reduce((a, b) => ((b.toExecutingMs ?? Infinity) < (a.toExecutingMs ?? Infinity) ? b : a));
  const exec = median(results.map((r) => r.toExecutingMs ?? NaN));
  const rerun = Math.max(...results.map((r) => r.rerunCompleted ?? 0));
  const tasks = results[0]?.tasks ?? 0;
  rows.push({
    figure: "5 resume",
    measure: `${tasks}-task run after a crash: load + resume → a task running, best (median) ms`,
    value: `${fmt(best.toExecutingMs, 0)} (${fmt(exec, 0)})`,
    baseline: `${fmt(best.loadMs, 0)} (its load alone)`,
    ratio: "—",
    target: "< 1 s",
    met: verdict((best.toExecutingMs ?? Infinity) < 1_000),
  });
  rows.push({
    figure: "5 resume",
    measure: "completed tasks run again after resume",
    value: String(rerun),
    baseline: `${results[0]?.completedBeforeResume ?? 0} completed before the crash`,
    ratio: "—",
    target: "0 (guarantee 7)",
    met: verdict(rerun === 0 && results.every((r) => r.phase === "completed")),
  });
  details.push(
    "### 5. Resume from disk",
    "",
    `A ${tasks}-task SQLite run SIGKILLs its own process after ${Math.floor(tasks / 2)} worker starts (a real crash: ` +
      `nothing flushed or shut down); a fresh process opens the same file, \`service.get\` (load: snapshot + event ` +
      `tail, validated), \`resume\`, and the clock stops when the first task is running again. The restarted process ` +
      `uses the crashed one's lease owner id, so it takes its lease back at once (with a new id it would wait for the ` +
      `lease to expire, 30 s by default). Runs: ${results
        .map(
          (r) =>
            `load ${fmt(r.loadMs, 0)} + resume ${fmt(r.resumeCallMs, 0)} → running at ${fmt(r.toExecutingMs, 0)} ms (${r.interrupted} interrupted, then completed in ${fmt(r.runMs, 0)} ms)`,
        )
        .join("; ")}.`,
    "",
  );
}

function peerDone(outcomes: PeerOutcome[]): PeerResult[] {
  return outcomes.filter((o): o is PeerResult => !timedOut(o));
}

/** Best and median of plan/compile + run over the completed runs, ms. */
function totals(xs: number[]): { best: number; median: number } {
  return { best: Math.min(...xs), median: median(xs) };
}

function peerRows(rows: Row[], details: string[], cells: PeerCell[], resume: PeerResume, limitMs: number): void {
  const limitS = `${fmt(limitMs / 1000, 0)} s`;
  const table: string[][] = [];
  for (const c of cells) {
    const ours = totals(c.ours.map((r) => r.planMs + r.runMs));
    // Issue 34: at least 8x at 1,000 tasks against every LangGraph writing of the DAG; 5x elsewhere (issue 16).
    const target = c.tasks <= 1_000 ? 8 : 5;
    table.push([
      String(c.tasks),
      c.store,
      "acp-orchestrator",
      String(c.ours.length),
      fmt(median(c.ours.map((r) => r.planMs)), 0),
      fmt(median(c.ours.map((r) => r.runMs)), 0),
      `${fmt(ours.best, 0)} (${fmt(ours.median, 0)})`,
      fmt(median(c.ours.map((r) => r.peakRssMb)), 0),
      c.store === "sqlite" ? fmt(median(c.ours.map((r) => r.diskWriteBytes / r.tasks)), 0) : "—",
      c.store === "sqlite" ? fmt(median(c.ours.map((r) => r.fileBytes / r.tasks)), 0) : "—",
      c.store === "sqlite" ? `${c.ours[0]?.meter.writes ?? 0} commits` : "—",
    ]);
    for (const graph of PEER_GRAPHS) {
      const runs = c.peer.filter((p) => p.graph === graph);
      if (runs.length === 0) continue;
      const done = peerDone(runs);
      const peer = done.length > 0 ? totals(done.map((r) => r.compileMs + r.runMs)) : undefined;
      const timeout = runs.some(timedOut);
      // Judged on the best runs of both sides (other work on this machine only adds time); a timed-out peer counts
      // as the limit, so its ratio is a lower bound.
      const ratio = (peer?.best ?? limitMs) / ours.best;
      const name = `LangGraph ${PEER_GRAPH_NAMES[graph]}`;
      rows.push({
        figure: "6 LangGraph.js",
        measure: `${c.tasks} tasks, ${c.store}, vs ${PEER_GRAPH_NAMES[graph]}: plan + run ms, best (median)`,
        value: `${fmt(ours.best, 0)} (${fmt(ours.median, 0)})`,
        baseline: peer ? `${fmt(peer.best, 0)} (${fmt(peer.median, 0)}) ${name}` : `> ${limitS} (stopped) ${name}`,
        ratio: `${timeout && !peer ? "> " : ""}${fmt(ratio, 1)}x faster`,
        target: `≥ ${target}x faster`,
        met: verdict(ratio >= target),
      });
      if (c.store === "sqlite") {
        const oursBytes = median(c.ours.map((r) => r.diskWriteBytes / r.tasks));
        const peerBytes = done.length > 0 ? median(done.map((r) => r.diskWriteBytes / r.tasks)) : undefined;
        rows.push({
          figure: "6 LangGraph.js",
          measure: `${c.tasks} tasks, sqlite, vs ${PEER_GRAPH_NAMES[graph]}: disk bytes written per task (median)`,
          value: fmt(oursBytes, 0),
          baseline: peerBytes !== undefined ? `${fmt(peerBytes, 0)} ${name}` : "— (timed out)",
          ratio: peerBytes !== undefined ? `${fmt(peerBytes / oursBytes, 1)}x fewer` : "—",
          target: "fewer",
          met: peerBytes !== undefined ? verdict(oursBytes < peerBytes) : "—",
        });
      }
      table.push([
        String(c.tasks),
        c.store,
        name,
        `${done.length}${timeout ? ` (+1 stopped at ${limitS})` : ""}`,
        done.length > 0 ? fmt(median(done.map((r) => r.compileMs)), 0) : "—",
        done.length > 0 ? fmt(median(done.map((r) => r.runMs)), 0) : `> ${limitS}`,
        peer ? `${fmt(peer.best, 0)} (${fmt(peer.median, 0)})` : `> ${limitS}`,
        done.length > 0 ? fmt(median(done.map((r) => r.peakRssMb)), 0) : "—",
        c.store === "sqlite" && done.length > 0 ? fmt(median(done.map((r) => r.diskWriteBytes / r.tasks)), 0) : "—",
        c.store === "sqlite" && done.length > 0 ? fmt(median(done.map((r) => r.fileBytes / r.tasks)), 0) : "—",
        c.store === "sqlite" && done[0]
          ? `${done[0].checkpoints ?? 0} checkpoints + ${done[0].writeRows ?? 0} task writes`
          : "—",
      ]);
    }
  }
  const oursResume = resume.ours.map((r) => r.toExecutingMs ?? NaN);
  const peerResumed = peerDone(resume.peer);
  const peerResume = peerResumed.map((r) => r.toExecutingMs ?? NaN);
  const ob = Math.min(...oursResume);
  const pb = peerResume.length > 0 ? Math.min(...peerResume) : undefined;
  rows.push({
    figure: "6 LangGraph.js",
    measure: `${resume.tasks}-task SQLite run SIGKILLed halfway: load + resume → a task running, best (median) ms`,
    value: `${fmt(ob, 0)} (${fmt(median(oursResume), 0)})`,
    baseline: pb !== undefined ? `${fmt(pb, 0)} (${fmt(median(peerResume), 0)}) LangGraph` : "— (timed out)",
    ratio: pb !== undefined ? `${fmt(pb / ob, 1)}x faster` : "—",
    target: "faster",
    met: pb !== undefined ? verdict(ob < pb) : "—",
  });
  const rerunOurs = Math.max(...resume.ours.map((r) => r.rerunCompleted ?? 0));
  const rerunPeer = peerResumed.length > 0 ? Math.max(...peerResumed.map((r) => r.rerunCompleted ?? 0)) : undefined;
  rows.push({
    figure: "6 LangGraph.js",
    measure: "completed tasks run again after that resume",
    value: String(rerunOurs),
    baseline: rerunPeer !== undefined ? `${rerunPeer} LangGraph` : "—",
    ratio: "—",
    target: "0",
    met: verdict(rerunOurs === 0 && resume.ours.every((r) => r.phase === "completed")),
  });
  const sq = peerDone(cells.find((c) => c.store === "sqlite")?.peer ?? [])[0];
  const largest = cells
    .filter((c) => c.store === "sqlite")
    .flatMap((c) => {
      const done = peerDone(c.peer);
      if (done.length === 0) return [];
      return [`${c.tasks} tasks: ${fmt(Math.max(...done.map((r) => r.largestCheckpointBytes ?? 0)) / 1024, 0)} KiB`];
    })
    .join(", ");
  details.push(
    "### 6. LangGraph.js on the identical DAG",
    "",
    "The peer is LangGraph.js (`@langchain/langgraph` 1.7.3, `@langchain/langgraph-checkpoint-sqlite` 1.0.4, pinned " +
      "devDependencies used only by test/bench/langgraph-case.ts). Both sides run the same random layered DAG " +
      "(test/bench/support/dag.ts: same generator, seed 7, width 100, 1–3 dependencies on the level before) with " +
      "instant tasks (a resolved promise returning `done <taskId>`), each case in its own `node` process, ours then " +
      "the peer's in every round. LangGraph gets one node per task, an edge from START for first-level tasks, an edge " +
      "from the single dependency or one waiting edge from all of them (`addEdge([a, b], c)`: c runs once, after all), " +
      "and one `outputs` channel merged by the usual `{...a, ...b}` reducer (one channel per task was tried too and " +
      "was slower). The same DAG is also written as LangGraph's idiomatic graphs (issue 34): **Send map-reduce**, a " +
      "`schedule` node whose conditional edge sends every ready task (all dependencies in `outputs`) to one `task` " +
      "node that returns to `schedule` (two super-steps per level), and the **Functional API**, one `entrypoint` " +
      "calling a `task` per DAG task as soon as the promises of its dependencies resolved. Each writing runs in its " +
      'own process after ours in every round. "plan + run" is, for us, `product.plan` → planReady (leader plan validated and persisted) plus ' +
      "confirm → `product.completed`; for LangGraph, building the StateGraph and `compile()` plus `invoke` → resolved " +
      "(the graph or entrypoint is code, so every process that runs it builds and compiles it). Time verdicts are judged on each " +
      `side's best run. LangGraph cases are stopped after ${limitS}; a stopped case counts as the limit, so its ratio ` +
      "is a lower bound.",
    "",
    "What each side guarantees in these runs. **Ours** (SqliteAuthority): WAL, `synchronous=FULL` (fsync on every " +
      "commit), one commit per wave holding the events of what changed (tasks' states and outputs, usage, automatic " +
      "checkpoint events), a full snapshot only when the events since the last one reach 4x its size; results are " +
      "committed before any dependent starts or anything is announced; `memory` is MemoryAuthority (events kept as " +
      "structured clones, no disk). **LangGraph** (SqliteSaver): WAL as the saver sets it, `synchronous=FULL` set " +
      `by the benchmark on the saver's connection (its own default is ${sq?.defaultSynchronous === 1 ? "NORMAL (1): in WAL mode no fsync per commit, so it is durable against a process crash but not a power loss" : String(sq?.defaultSynchronous ?? "?")}; ` +
      `measured in force: journal_mode=${sq?.journalMode ?? "?"}, synchronous=${String(sq?.synchronous ?? "?")}), ` +
      "`durability: \"sync\"` (a super-step's checkpoint is written before the next one starts); every task's output " +
      "is saved as a pending write (one transaction per task) and every super-step writes a full checkpoint row: all " +
      "channel values (the whole `outputs` record so far), channel versions and the versions each node has seen; " +
      `every checkpoint is kept. Largest checkpoint row: ${largest || "—"}. "memory" is MemorySaver. Bytes are the ` +
      "process's `write_bytes` from /proc during the run (WAL frames and checkpoints) and the file + WAL size at the end.",
    "",
    markdownTable(
      [
        "tasks",
        "store",
        "side",
        "runs",
        "plan / compile ms",
        "run ms",
        "plan + run: best (median)",
        "peak RSS MB",
        "disk bytes/task",
        "file bytes/task",
        "commits",
      ],
      table,
    ),
    "",
    `Resume: a ${resume.tasks}-task SQLite run of each side SIGKILLs itself after ${Math.floor(resume.tasks / 2)} task ` +
      "starts; a fresh process loads and continues it (ours: `service.get` + `resume`; LangGraph: build and compile the " +
      "graph, read the latest checkpoint, `invoke(null)` on the same thread), and the clock stops when the first task " +
      `runs again. Ours: ${resume.ours.map((r) => `${fmt(r.toExecutingMs, 0)} ms (load ${fmt(r.loadMs, 0)})`).join(", ")}; ` +
      `LangGraph: ${
        resume.peer
          .map((r) =>
            timedOut(r)
              ? `stopped at ${limitS}`
              : `${fmt(r.toExecutingMs, 0)} ms (build + compile ${fmt(r.compileMs, 0)}, load ${fmt(r.loadMs, 0)}; ${r.completedBeforeResume ?? 0} outputs durable, ${r.rerunCompleted ?? 0} run again)`,
          )
          .join(", ") || "—"
      }.`,
    "",
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
