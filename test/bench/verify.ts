/**
 * Figure 10 (issue 30, "Must show": verification bookkeeping cost beyond the check command's own time ≤ 100 ms per
 * task at 10,000 files, verify worktree reuse): what green-only integration (`verify.when: "each"`, DESIGN.md
 * guarantee 17) adds to a task, measured on the classes the server uses — `GitWorkspace` (worktrees, capture, merge),
 * `GitVerifier` (the verify worktrees and the watchdog'd check processes) and the core `VerificationGate` (which
 * records each verification as a `verified` event, here in a real SQLite store) — against real repositories of 100
 * and 10,000 files, with the trivial check `true`.
 *
 * Two sides, each in its own clone of the same repository, run one task each in turn (which side goes first
 * alternates): "without" is a task's integration step as the coordinator runs it without verification (capture,
 * branch check, merge, CAS moves, park the worktree); "with" is `preVerify` (capture, merge with the head as objects,
 * the candidate's tree, `checkout -f` (and `clean -ffdx` when a folder changed) in the reused verify worktree, the
 * check, the `verified` event) followed by the same integration step as workspace-coordinator.ts runs it with verification (the prepared candidate
 * taken from the gate, the verdict by tree id). The bookkeeping of a task is (with − the check's recorded
 * `durationMs`) − without: everything verification adds except the check's own process, spawn to exit (watchdog
 * included: what status shows as the check's time); a bare `/bin/sh -c true` is reported beside it so the watchdog's
 * share is visible. The first task of each side (a full checkout of the verify worktree) is reported apart, as is
 * the removal of the verify worktree when the product stops.
 *
 * Owns its clones and store only (under the given folder); never prints (the caller logs).
 */
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import { GitWorkspace } from "../../src/adapters/workspace/git-workspace.js";
import { runCheckCommand } from "../../src/adapters/workspace/verify-process.js";
import { GitVerifier } from "../../src/adapters/workspace/verify-worktrees.js";
import type { Logger } from "../../src/core/ports.js";
import { attemptMessage, attemptRef, integrationRef, mergeMessage } from "../../src/core/workspace/integration.js";
import { VerificationGate } from "../../src/core/workspace/verification-gate.js";
import { applyVerified, type VerificationState } from "../../src/core/workspace/verification.js";
import type { ResultRow } from "./support/results-doc.js";
import { fmt, markdownTable, median } from "./support/stats.js";
import { cloneRepo, cpuMs } from "./worktrees.js";

export interface VerifyCost {
  files: number;
  tasks: number;
  /** Medians in ms per task over the tasks after the first (verify worktree reused): (with − check) − without. */
  bookkeepingMs: number;
  /** The "with" side's task: preVerify + integration with the verdict, check included. */
  withMs: number;
  /** The check's recorded `durationMs` (spawn to exit, watchdog included). */
  checkMs: number;
  /** A bare `/bin/sh -c true` (spawnSync from this process), ms: the command alone, without the watchdog. */
  bareCheckMs: number;
  /** The "without" side's task: the integration step without verification, ms (the floor). */
  withoutMs: number;
  /** The first task's bookkeeping (the verify worktree is made: a full checkout), ms. */
  coldBookkeepingMs: number;
  /** Removing the verify worktree when the product stops (once per product), ms. */
  releaseMs: number;
  /**
   * CPU time per task (this process and every process it waited for: git, the check's watchdog) of the bookkeeping,
   * after the first task: with − a check run alone (`runCheckCommand` of `true`, measured apart) − without, ms; `null`
   * where /proc is missing. What the bookkeeping costs whatever the machine's load.
   */
  cpuBookkeepingMs: number | null;
  /** CPU time of one check run alone (watchdog + `true`), ms; `null` where /proc is missing. */
  cpuCheckMs: number | null;
  /** Git processes per task of the "with" side (the task's prepare included), from git's trace of counted tasks. */
  gitPerTaskWith: number;
  /** Git processes per task of the "without" side (prepare included). */
  gitPerTaskWithout: number;
  /** Of the "with" side's, those in the verify worktree per check (its preparation: checkout, clean, index bits). */
  gitPerCheck: number;
  /** Every check passed and every candidate's verdict was green before its branch move. */
  allGreen: boolean;
}

/** Tasks per side run after the timed ones with git's trace on, to count git processes. */
const COUNTED_TASKS = 3;

/**
 * The git processes git's trace2 event file `file` recorded (one `start` event each), and those that worked in a
 * verify worktree (their `--work-tree` is under `acp-orchestrator/verify`). None when there is no file.
 */
function gitStarts(file: string): { all: number; verifyWorktree: number } {
  let all = 0;
  let verifyWorktree = 0;
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return { all, verifyWorktree };
  }
  for (const line of text.split("\n")) {
    if (!line) continue;
    const event = JSON.parse(line) as { event?: string; argv?: string[] };
    if (event.event !== "start") continue;
    all++;
    if (event.argv?.some((a) => a.startsWith("--work-tree=") && a.includes("acp-orchestrator/verify")))
      verifyWorktree++;
  }
  return { all, verifyWorktree };
}

const PROJECT = "bench";
const PRODUCT = "prd_verify_bench";
/** The attempts' launch (their `startedAt` in a product): one launch each here. */
const LAUNCH = "bench";

interface Side {
  repo: string;
  head: string;
  port: GitWorkspace;
  cpu: number;
}

function silentLogger(said: string[]): Logger {
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (obj, msg) => said.push(`${msg ?? ""} ${JSON.stringify(obj)}`),
    error: (obj, msg) => said.push(`${msg ?? ""} ${JSON.stringify(obj)}`),
    child: () => logger,
  };
  return logger;
}

/** Prepares task `n`'s worktree at the side's head and writes its one file; returns the worktree. */
async function prepareTask(side: Side, n: number): Promise<string> {
  const path = await side.port.attemptPath(side.repo, PRODUCT, `t${n}`, 1);
  await side.port.prepare(side.repo, path, side.head);
  writeFileSync(join(path, `task-${n}.md`), `# Task ${n}\n`);
  return path;
}

/**
 * The integration step as workspace-coordinator.ts `integrateAttempt` runs it: the candidate `preVerify` prepared
 * (when `gate`) or a fresh capture and merge, the branch check, the verdict by tree id (when `gate`), the CAS moves,
 * the worktree parked. Returns the verdict's state ("none" without a gate).
 */
async function integrate(side: Side, n: number, path: string, gate?: VerificationGate): Promise<string> {
  const { port, repo, head } = side;
  const task = { taskId: `t${n}`, title: `Task ${n}`, description: "", attempts: 1 };
  const prepared = gate?.takeCandidate(task.taskId, 1, path, head, LAUNCH);
  const captured = prepared?.captured ?? (await port.capture(path, attemptMessage(PRODUCT, task, 1), head));
  if (!captured.commit) throw new Error("no commit");
  const ref = integrationRef(PRODUCT);
  if ((await port.readRef(repo, ref)) !== head) throw new Error("the branch moved");
  const reuse = prepared?.merged?.head === head ? prepared.merged.outcome : undefined;
  const merge =
    reuse ?? (await port.merge(repo, head, captured.commit, mergeMessage(PRODUCT, `task ${task.taskId} (attempt 1)`)));
  if (merge.kind === "conflict") throw new Error("unexpected conflict");
  const verdict = gate ? (await gate.verdict(merge.commit)).verdict.state : "none";
  if (!(await port.moveRef(repo, attemptRef(PRODUCT, task.taskId, 1), captured.commit, null)))
    throw new Error("attempt ref");
  if (!(await port.moveRef(repo, ref, merge.commit, head))) throw new Error("CAS failed");
  side.head = merge.commit;
  await port.release(repo, path, { reuse: true });
  return verdict;
}

/** Runs `fn`, adding its CPU time to `side.cpu` when `counted`; false when /proc is missing. */
async function timed(side: Side, counted: boolean, fn: () => Promise<unknown>): Promise<{ ms: number; cpu: boolean }> {
  const before = cpuMs();
  const t = performance.now();
  await fn();
  const ms = performance.now() - t;
  const after = cpuMs();
  if (before === null || after === null) return { ms, cpu: false };
  if (counted) side.cpu += after - before;
  return { ms, cpu: true };
}

/**
 * Runs `tasks` tasks on each side, one after the other, alternating which side goes first, in clones under `dir` of
 * the repository of `files` files cached in `cacheDir`; medians per task.
 */
export async function verifyCost(dir: string, cacheDir: string, files: number, tasks: number): Promise<VerifyCost> {
  const withRepo = join(dir, `verify-with-${files}`);
  const withoutRepo = join(dir, `verify-without-${files}`);
  const on: Side = { repo: withRepo, head: cloneRepo(cacheDir, files, withRepo), port: new GitWorkspace(), cpu: 0 };
  const off: Side = {
    repo: withoutRepo,
    head: cloneRepo(cacheDir, files, withoutRepo),
    port: new GitWorkspace(),
    cpu: 0,
  };
  for (const side of [on, off]) await side.port.moveRef(side.repo, integrationRef(PRODUCT), side.head, null);
  const authority = SqliteAuthority.open(join(dir, `verify-${files}.db`));
  const state: { verification: VerificationState } = {
    verification: { config: { commands: [{ name: "true", run: "true", timeoutMs: 60_000 }] }, results: [] },
  };
  let seq = 0;
  const said: string[] = [];
  const gate = new VerificationGate({
    productId: PRODUCT,
    cwd: () => withRepo,
    state: () => state,
    verifier: new GitVerifier(),
    notifier: { notify: () => undefined },
    logger: silentLogger(said),
    now: () => new Date().toISOString(),
    record: async (body) => {
      const event = { ...body, v: 1 as const, at: new Date().toISOString() };
      seq = (await authority.appendEvents(PROJECT, `product/${PRODUCT}`, [event], seq)).lastSeq;
      applyVerified(state, event);
    },
  });
  const signal = new AbortController().signal;
  const bookkeeping: number[] = [];
  const withMs: number[] = [];
  const checkMs: number[] = [];
  const withoutMs: number[] = [];
  let allGreen = true;
  let cpuKnown = true;
  const traces = { with: join(dir, `trace-with-${files}.json`), without: join(dir, `trace-without-${files}.json`) };
  /** Runs `fn` with git's trace written to `file` when `counting` (the counted tasks after the timed ones). */
  const traced = async (counting: boolean, file: string, fn: () => Promise<void>): Promise<void> => {
    if (counting) process.env.GIT_TRACE2_EVENT = file;
    try {
      await fn();
    } finally {
      if (counting) delete process.env.GIT_TRACE2_EVENT;
    }
  };
  try {
    for (let n = 0; n < tasks + COUNTED_TASKS; n++) {
      // The tasks after the timed ones run with git's trace on, only to count git processes (never timed).
      const counting = n >= tasks;
      let withTask = 0;
      let withoutTask = 0;
      let check = 0;
      const runWith = async (): Promise<void> => {
        const path = await prepareTask(on, n);
        const r = await timed(on, n > 0 && !counting, async () => {
          await gate.preVerify({
            workspaces: on.port,
            worktree: path,
            base: on.head,
            head: on.head,
            captureMessage: attemptMessage(PRODUCT, { taskId: `t${n}`, title: `Task ${n}`, description: "" }, 1),
            mergeMessage: mergeMessage(PRODUCT, `task t${n} (attempt 1)`),
            taskId: `t${n}`,
            launch: LAUNCH,
            attempt: 1,
            signal,
          });
          const entry = state.verification.results.at(-1);
          if (entry?.taskId !== `t${n}`) throw new Error(`task t${n} was not verified: ${said.join("; ")}`);
          check = entry.checks.reduce((sum, c) => sum + c.durationMs, 0);
          if (!entry.ok || (await integrate(on, n, path, gate)) !== "green") allGreen = false;
        });
        withTask = r.ms;
        cpuKnown &&= r.cpu;
      };
      const runWithout = async (): Promise<void> => {
        const path = await prepareTask(off, n);
        const r = await timed(off, n > 0 && !counting, () => integrate(off, n, path));
        withoutTask = r.ms;
        cpuKnown &&= r.cpu;
      };
      const sides = n % 2 === 0 ? [runWith, runWithout] : [runWithout, runWith];
      for (const run of sides) await traced(counting, run === runWith ? traces.with : traces.without, run);
      if (counting) continue;
      bookkeeping.push(withTask - check - withoutTask);
      withMs.push(withTask);
      checkMs.push(check);
      withoutMs.push(withoutTask);
    }
    const t = performance.now();
    await gate.releaseWorktrees(true);
    const releaseMs = performance.now() - t;
    for (const side of [on, off]) {
      for (const path of await side.port.leftovers(side.repo, PRODUCT)) await side.port.release(side.repo, path);
    }
    // The check alone, as the gate runs it (watchdog + `true`), for the CPU it takes by itself.
    let cpuCheck = 0;
    const checkRuns = Math.max(5, tasks - 1);
    for (let i = 0; i < checkRuns; i++) {
      const before = cpuMs();
      await runCheckCommand({ run: "true", cwd: withRepo, env: {}, timeoutMs: 60_000, signal });
      const after = cpuMs();
      if (before === null || after === null) cpuKnown = false;
      else cpuCheck += after - before;
    }
    const bare: number[] = [];
    for (let i = 0; i < checkRuns; i++) {
      const b = performance.now();
      spawnSync("/bin/sh", ["-c", "true"]);
      bare.push(performance.now() - b);
    }
    const cpuCheckMs = cpuKnown ? cpuCheck / checkRuns : null;
    const withGit = gitStarts(traces.with);
    const steady = (xs: number[]) => median(xs.length > 1 ? xs.slice(1) : xs);
    return {
      files,
      tasks,
      bookkeepingMs: steady(bookkeeping),
      withMs: steady(withMs),
      checkMs: steady(checkMs),
      bareCheckMs: median(bare),
      withoutMs: steady(withoutMs),
      coldBookkeepingMs: bookkeeping[0] ?? 0,
      releaseMs,
      cpuBookkeepingMs:
        cpuKnown && cpuCheckMs !== null && tasks > 1 ? (on.cpu - off.cpu) / (tasks - 1) - cpuCheckMs : null,
      cpuCheckMs,
      gitPerTaskWith: withGit.all / COUNTED_TASKS,
      gitPerTaskWithout: gitStarts(traces.without).all / COUNTED_TASKS,
      gitPerCheck: withGit.verifyWorktree / COUNTED_TASKS,
      allGreen,
    };
  } finally {
    await authority.close();
  }
}

/** Target (issue 30): at most 100 ms of verification bookkeeping per task at 10,000 files (verify worktree reused). */
export const VERIFY_TARGET_MS = 100;

/** Figure 10's rows (one per repository size) and its details, for BENCHMARKS.md. */
export function verifyRows(rows: ResultRow[], details: string[], costs: VerifyCost[]): void {
  for (const c of costs) {
    const judged = c.files >= 10_000;
    rows.push({
      figure: "10",
      measure: `verification bookkeeping per task, ${c.files.toLocaleString("en-US")} files ((with − the check's own time) − without)`,
      value: `${fmt(c.bookkeepingMs)} ms`,
      baseline: `task without verify: ${fmt(c.withoutMs)} ms`,
      ratio: c.withoutMs > 0 ? `${fmt((c.withoutMs + c.bookkeepingMs) / c.withoutMs, 2)}x` : "—",
      target: judged ? `≤ ${VERIFY_TARGET_MS} ms` : "—",
      met: judged ? (c.bookkeepingMs <= VERIFY_TARGET_MS && c.allGreen ? "yes" : "no") : "—",
    });
    if (c.cpuBookkeepingMs !== null) {
      rows.push({
        figure: "10",
        measure: `verification bookkeeping CPU per task, ${c.files.toLocaleString("en-US")} files (with − a check alone − without; whatever the load)`,
        value: `${fmt(c.cpuBookkeepingMs)} ms`,
        baseline: `git processes per task: ${fmt(c.gitPerTaskWith, 1)} with, ${fmt(c.gitPerTaskWithout, 1)} without`,
        ratio: "—",
        target: judged ? `≤ ${VERIFY_TARGET_MS} ms` : "—",
        met: judged ? (c.cpuBookkeepingMs <= VERIFY_TARGET_MS && c.allGreen ? "yes" : "no") : "—",
      });
    }
  }
  details.push(
    "### Figure 10: verification bookkeeping per task\n\n" +
      `Median per task over ${costs[0]?.tasks ?? 0} tasks per side (the first apart: it makes the verify worktree). ` +
      "Two sides on clones of one repository take turns task by task (which goes first alternates), on the classes " +
      "the server uses: `GitWorkspace`, `GitVerifier` and the core `VerificationGate`, which writes each verification " +
      "as a `verified` event to a SQLite store. Without: the integration step as without verification (capture, " +
      "branch check, merge, CAS moves, park). With: `preVerify` (capture, merge as objects with the head, the " +
      "candidate's tree, `checkout -f` in the reused verify worktree — its index put back from the orchestrator's " +
      "copy, `clean -ffdx` only when a folder changed since the last check, which `true` never does, the folders " +
      "marked again by one lstat each when their link counts prove there is no other — the check `true` under the " +
      "agent watchdog, the event) and the same integration step with verification (the candidate `preVerify` " +
      "prepared, the verdict by tree id). Bookkeeping = (with − the check's recorded `durationMs`, spawn to exit, " +
      "watchdog included) − without. CPU per task is the user + system time of this process and every process it " +
      "waited for (git, the watchdog) on each side, with − without − a check run alone: what the bookkeeping costs " +
      "the machine whatever its load, where the wall-clock medians move with the load of the shared machine. Git " +
      `processes are counted from git's own trace (trace2 events) over ${COUNTED_TASKS} more tasks per side run after ` +
      "the timed ones (the task's prepare included on both sides); the check alone (watchdog + `true`) is not " +
      "bookkeeping here, and is shown apart: its wall time is mostly the agent watchdog's start, not git's. What is " +
      "left of the bookkeeping at 10,000 files is mostly `checkout -f`'s scan of every tracked file (each lstat'ed " +
      "and compared with the index, the index read and written): a check may rewrite any tracked file in place, and " +
      "only that file's own ctime shows it, so a sound preparation reads them all; the wall time on top of the CPU " +
      "time is the wait for a core on the shared machine.\n\n" +
      markdownTable(
        [
          "files",
          "bookkeeping",
          "with (check included)",
          "check durationMs (watchdog + true)",
          "bare sh -c true",
          "without",
          "first task's bookkeeping (verify worktree add)",
          "verify worktree removal",
          "CPU per task: bookkeeping / one check alone",
          "git processes per task: with / without / per check in the verify worktree",
        ],
        costs.map((c) => [
          c.files.toLocaleString("en-US"),
          `${fmt(c.bookkeepingMs)} ms`,
          `${fmt(c.withMs)} ms`,
          `${fmt(c.checkMs)} ms`,
          `${fmt(c.bareCheckMs)} ms`,
          `${fmt(c.withoutMs)} ms`,
          `${fmt(c.coldBookkeepingMs)} ms`,
          `${fmt(c.releaseMs)} ms`,
          c.cpuBookkeepingMs === null || c.cpuCheckMs === null
            ? "n/a"
            : `${fmt(c.cpuBookkeepingMs)} ms / ${fmt(c.cpuCheckMs)} ms`,
          `${fmt(c.gitPerTaskWith, 1)} / ${fmt(c.gitPerTaskWithout, 1)} / ${fmt(c.gitPerCheck, 1)}`,
        ]),
      ),
  );
}
