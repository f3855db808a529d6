/**
 * Figure 7 (issues 12 and 34): the cost per task of worktree isolation, measured on the git adapter the server uses
 * (`GitWorkspace`) beside the raw git floor doing the same job, interleaved pair by pair in one run on the same
 * repository sizes (100, 10,000 and 100,000 files), one changed file per task.
 *
 * Ours: prepare (a parked worktree moved to the attempt's path, forced to the integration head and cleaned), capture
 * (`add -A` against the prepared base, one commit with trailers), integrate (attempt ref, merge by compare-and-swap,
 * park). The floor: plain `git` in two long-lived linked worktrees, per task `checkout -f --detach <head>`,
 * `clean -ffdxq`, `add -A`, `write-tree`, `commit-tree`, then `update-ref` of the branch (a fast-forward), or
 * `merge-tree --write-tree` + `commit-tree` + `update-ref` when the head moved (a merge): the least git can do for one
 * isolated task, with none of the safety rules of guarantee 16. Tasks run in pairs from the same head, as parallel
 * tasks do, so every second integration is a real merge on both sides. The medians are the steady state (every pair
 * after the first on each side); ours' first attempts' full checkouts (`coldPrepareMs`) and the removal of the parked worktrees when the product stops
 * (`removeParkedMs`) are reported beside them.
 *
 * The repositories are generated with `git fast-import` once per size and kept (bare) in a cache folder that outlives
 * the run (`<cacheDir>/repo-<files>-v1.git`; /dev/shm when it exists, see `scratchRoot`); each side works in its own
 * local clone of it. Owns those folders only; never prints (the caller logs).
 */
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GitWorkspace } from "../../src/adapters/workspace/git-workspace.js";
import { keepAndMoveBranch } from "../../src/core/product/remote-workspace.js";
import { attemptMessage, attemptRef, integrationRef, mergeMessage } from "../../src/core/workspace/integration.js";
import type { PendingIntegration } from "../../src/core/workspace/records.js";
import { median } from "./support/stats.js";

/** Medians of one side, ms per task, and its CPU per task. */
export interface WorktreeSide {
  prepareMs: number;
  commitMs: number;
  integrateMs: number;
  totalMs: number;
  /**
   * CPU time per task of this process and the git processes the side ran (user + system from /proc/self/stat, 10 ms
   * ticks, summed over this side's tasks after the first pair), ms; `null` where /proc is missing.
   */
  cpuMsPerTask: number | null;
}

export interface WorktreeCost extends WorktreeSide {
  files: number;
  tasks: number;
  /** The slowest prepare of the first pair (no parked worktree yet: a full `git worktree add`), ms. */
  coldPrepareMs: number;
  /** Removing the parked worktrees at the end of the run (once per product, not per task), ms. */
  removeParkedMs: number;
  /** The raw git floor, measured interleaved with ours. */
  floor: WorktreeSide;
}

/** User + system CPU time of this process and its waited-for children, ms (`null` without /proc). */
export function cpuMs(): number | null {
  try {
    const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]?.split(" ") ?? [];
    // After "pid (comm) ": state is field 3, so utime/stime/cutime/cstime (fields 14-17) are at 11-14 here.
    const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
    return Number.isFinite(ticks) ? ticks * 10 : null;
  } catch {
    return null;
  }
}

const ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: "bench",
  GIT_AUTHOR_EMAIL: "b@x",
  GIT_COMMITTER_NAME: "bench",
  GIT_COMMITTER_EMAIL: "b@x",
};

/** Where the cached repositories and the clones live: /dev/shm when it exists (no disk in the figure), else tmpdir. */
export function scratchRoot(): string {
  return existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
}

/** The `git fast-import` stream of one commit holding `files` small files in folders of 100. */
function importStream(files: number): string {
  const parts = ["commit refs/heads/main\ncommitter bench <b@x> 1700000000 +0000\ndata 7\ninitial\n"];
  for (let i = 0; i < files; i++) {
    const body = `export const v${i} = ${i};\n// ${"x".repeat(200)}\n`;
    parts.push(`M 100644 inline src/m${Math.floor(i / 100)}/f${i}.ts\ndata ${Buffer.byteLength(body)}\n${body}\n`);
  }
  return parts.join("");
}

/** The cached bare repository of `files` files under `cacheDir`, generated when missing. */
function cachedRepo(cacheDir: string, files: number): string {
  const repo = join(cacheDir, `repo-${files}-v1.git`);
  if (existsSync(join(repo, "refs", "heads", "main")) || existsSync(join(repo, "packed-refs"))) return repo;
  const building = `${repo}.${process.pid}.tmp`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(building, { recursive: true });
  execFileSync("git", ["init", "-q", "--bare", "-b", "main"], { cwd: building, env: ENV });
  const r = spawnSync("git", ["fast-import", "--quiet"], {
    cwd: building,
    env: ENV,
    input: importStream(files),
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`git fast-import failed: ${r.stderr.toString()}`);
  rmSync(repo, { recursive: true, force: true });
  renameSync(building, repo);
  return repo;
}

/** A fresh local clone (objects hard-linked, nothing checked out) of the cached repository; returns its head. */
export function cloneRepo(cacheDir: string, files: number, dir: string): string {
  rmSync(dir, { recursive: true, force: true });
  execFileSync("git", ["clone", "-q", "--no-checkout", cachedRepo(cacheDir, files), dir], { env: ENV });
  return execFileSync("git", ["rev-parse", "HEAD"], { cwd: dir, encoding: "utf8" }).trim();
}

/** One side of the figure: runs a pair of tasks from the current head and integrates both, timing each step. */
interface Side {
  runPair(pair: number[]): Promise<void>;
  times: { prepare: number[]; commit: number[]; integrate: number[] };
  cpu: number | null;
}

function newTimes(): Side["times"] {
  return { prepare: [], commit: [], integrate: [] };
}

/** Ours: the server's `GitWorkspace`, step for step as the product runs a task. */
function oursSide(
  repo: string,
  initial: string,
): Side & { port: GitWorkspace; productId: string; kept: { ref: string; commit: string }[] } {
  const port = new GitWorkspace();
  /** Every attempt ref the side kept and its commit (checked after the run, outside the timings). */
  const kept: { ref: string; commit: string }[] = [];
  const productId = "prd_bench";
  const ref = integrationRef(productId);
  let head = initial;
  const times = newTimes();
  return {
    port,
    productId,
    kept,
    times,
    cpu: 0,
    async runPair(pair) {
      if (head === initial && !(await port.moveRef(repo, ref, initial, null))) throw new Error("integration ref");
      const captured: { n: number; path: string; commit: string }[] = [];
      for (const n of pair) {
        const path = await port.attemptPath(repo, productId, `t${n}`, 1);
        let t = performance.now();
        await port.prepare(repo, path, head);
        times.prepare.push(performance.now() - t);
        writeFileSync(join(path, `task-${n}.md`), `# Task ${n}\n`);
        t = performance.now();
        const task = { taskId: `t${n}`, title: `Task ${n}`, description: "" };
        const c = await port.capture(path, attemptMessage(productId, task, 1), head);
        times.commit.push(performance.now() - t);
        if (!c.commit) throw new Error("no commit");
        captured.push({ n, path, commit: c.commit });
      }
      for (const c of captured) {
        const t = performance.now();
        // As the server does (workspace-coordinator.ts integrateAttempt): merged as objects, then the attempt's commit
        // kept under its ref and the branch moved by compare-and-swap in one call (keepAndMoveBranch: moveRefs).
        const merge = await port.merge(repo, head, c.commit, mergeMessage(productId, `task t${c.n}`));
        if (merge.kind === "conflict") throw new Error("unexpected conflict");
        const pending = { ref: attemptRef(productId, `t${c.n}`, 1), commit: c.commit, from: head, to: merge.commit };
        if (!(await keepAndMoveBranch(port, repo, ref, pending as PendingIntegration))) throw new Error("CAS failed");
        kept.push({ ref: pending.ref, commit: c.commit });
        head = merge.commit;
        await port.release(repo, c.path, { reuse: true });
        times.integrate.push(performance.now() - t);
      }
    },
  };
}

/** Runs plain git (no option of ours) and returns its stdout; throws on a non-zero exit. */
function rawGit(cwd: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile("git", args, { cwd, env: ENV, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }, (e, out) =>
      e ? reject(e) : resolve(out),
    );
    // A git that exits before it reads its stdin (a quick command on a loaded machine) must not crash the run (EPIPE).
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(input ?? "");
  });
}

/** The raw git floor (see the file comment): two long-lived worktrees, the least git can do per task. */
async function floorSide(repo: string, initial: string): Promise<Side> {
  const trees = [join(repo, ".floor", "a"), join(repo, ".floor", "b")];
  for (const tree of trees) await rawGit(repo, ["worktree", "add", "-q", "--detach", tree, initial]);
  const ref = "refs/heads/floor";
  await rawGit(repo, ["update-ref", ref, initial]);
  let head = initial;
  const times = newTimes();
  return {
    times,
    cpu: 0,
    async runPair(pair) {
      const base = head;
      const captured: string[] = [];
      for (const n of pair) {
        const tree = trees[n % 2] as string;
        let t = performance.now();
        await rawGit(tree, ["checkout", "-q", "-f", "--detach", base]);
        await rawGit(tree, ["clean", "-ffdxq"]);
        times.prepare.push(performance.now() - t);
        writeFileSync(join(tree, `task-${n}.md`), `# Task ${n}\n`);
        t = performance.now();
        await rawGit(tree, ["add", "-A"]);
        const written = (await rawGit(tree, ["write-tree"])).trim();
        captured.push((await rawGit(tree, ["commit-tree", written, "-p", base, "-F", "-"], `task ${n}\n`)).trim());
        times.commit.push(performance.now() - t);
      }
      for (const commit of captured) {
        const t = performance.now();
        let next = commit;
        if (head !== base) {
          const merged = (await rawGit(repo, ["merge-tree", "--write-tree", head, commit])).split("\n")[0] as string;
          next = (await rawGit(repo, ["commit-tree", merged, "-p", head, "-p", commit, "-F", "-"], "merge\n")).trim();
        }
        await rawGit(repo, ["update-ref", ref, next, head]);
        head = next;
        times.integrate.push(performance.now() - t);
      }
    },
  };
}

function sideResult(side: Side, tasks: number): WorktreeSide {
  const prepareMs = median(side.times.prepare);
  const commitMs = median(side.times.commit);
  const integrateMs = median(side.times.integrate);
  return {
    prepareMs,
    commitMs,
    integrateMs,
    totalMs: prepareMs + commitMs + integrateMs,
    cpuMsPerTask: side.cpu === null || tasks <= 2 ? null : side.cpu / (tasks - 2),
  };
}

/** Runs one pair on `side`, adding its CPU time to the side's (from the second pair on). */
async function timedPair(side: Side, pair: number[], counted: boolean): Promise<void> {
  const before = cpuMs();
  await side.runPair(pair);
  const after = cpuMs();
  if (!counted) return;
  side.cpu = before === null || after === null || side.cpu === null ? null : side.cpu + after - before;
}

/**
 * Runs `tasks` task attempts (in pairs from one head) through prepare, commit and integrate on ours and on the raw
 * git floor, alternating pair by pair (and which side goes first), in clones under `dir` of the repository of
 * `files` files cached in `cacheDir`; medians per step.
 */
export async function worktreeCost(dir: string, cacheDir: string, files: number, tasks: number): Promise<WorktreeCost> {
  mkdirSync(cacheDir, { recursive: true });
  const oursRepo = join(dir, `ours-${files}`);
  const floorRepo = join(dir, `floor-${files}`);
  const ours = oursSide(oursRepo, cloneRepo(cacheDir, files, oursRepo));
  const floor = await floorSide(floorRepo, cloneRepo(cacheDir, files, floorRepo));
  try {
    for (let i = 0; i < tasks; i += 2) {
      const pair = [i, i + 1].filter((n) => n < tasks);
      const order = (i / 2) % 2 === 0 ? [ours, floor] : [floor, ours];
      for (const side of order) await timedPair(side, pair, i >= 2);
    }
    for (const k of ours.kept)
      if ((await ours.port.readRef(oursRepo, k.ref)) !== k.commit) throw new Error(`${k.ref} does not keep its commit`);
    const coldPrepareMs = Math.max(...ours.times.prepare.slice(0, 2));
    const t = performance.now();
    for (const path of await ours.port.leftovers(oursRepo, ours.productId)) await ours.port.release(oursRepo, path);
    const removeParkedMs = performance.now() - t;
    if ((await ours.port.leftovers(oursRepo, ours.productId)).length > 0)
      throw new Error("parked worktrees were not removed");
    // The medians are the steady state: the first pair of each side is left out (ours pays its full checkouts there).
    for (const side of [ours, floor]) for (const steps of Object.values(side.times)) steps.splice(0, 2);
    return {
      files,
      tasks,
      ...sideResult(ours, tasks),
      coldPrepareMs,
      removeParkedMs,
      floor: sideResult(floor, tasks),
    };
  } finally {
    rmSync(oursRepo, { recursive: true, force: true });
    rmSync(floorRepo, { recursive: true, force: true });
  }
}
