/**
 * Figure 7 (issue 12): the added cost per task of worktree isolation, measured on the git adapter the server uses
 * (`GitWorkspace`) against real repositories of 100 and 10,000 files: prepare (create the attempt's worktree at the
 * integration head), commit (one changed file: `git add -A` + commit with trailers) and integrate (merge into the
 * integration branch by compare-and-swap, then release the worktree for reuse, as the server does while the product
 * runs). Tasks run in pairs from the same head, as parallel tasks do, so every second integration is a real merge
 * (merge-tree + commit-tree), not a fast-forward. The medians are the steady state (a parked worktree moved to the new
 * attempt, forced to its base and cleaned); the first attempts' full checkouts (`coldPrepareMs`) and the removal of
 * the parked worktrees when the product stops (`removeParkedMs`) are reported beside them.
 *
 * Owns its temporary repositories only (under the given folder); never prints (the caller logs).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GitWorkspace } from "../../src/adapters/workspace/git-workspace.js";
import { attemptMessage, attemptRef, integrationRef, mergeMessage } from "../../src/core/workspace/integration.js";
import { median } from "./support/stats.js";

export interface WorktreeCost {
  files: number;
  tasks: number;
  /** Medians in ms per task. */
  prepareMs: number;
  commitMs: number;
  integrateMs: number;
  totalMs: number;
  /** The slowest prepare of the first pair (no parked worktree yet: a full `git worktree add`), ms. */
  coldPrepareMs: number;
  /** Removing the parked worktrees at the end of the run (once per product, not per task), ms. */
  removeParkedMs: number;
  /**
   * CPU time per task of this process and the git processes it ran (user + system, from /proc/self/stat; 10 ms
   * ticks summed over the tasks after the first pair, i.e. with reuse), ms: the cost without the machine's load;
   * `null` where /proc is missing.
   */
  cpuMsPerTask: number | null;
}

/** User + system CPU time of this process and its waited-for children, ms (`null` without /proc). */
function cpuMs(): number | null {
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

function makeRepo(dir: string, files: number): string {
  mkdirSync(dir, { recursive: true });
  execFileSync("git", ["init", "-q", "-b", "main"], { cwd: dir, env: ENV });
  for (let i = 0; i < files; i++) {
    const sub = join(dir, `src/m${Math.floor(i / 100)}`);
    if (i % 100 === 0) mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `f${i}.ts`), `export const v${i} = ${i};\n// ${"x".repeat(200)}\n`);
  }
  execFileSync("git", ["add", "-A"], { cwd: dir, env: ENV });
  execFileSync("git", ["commit", "-q", "-m", "initial"], { cwd: dir, env: ENV });
  return execFileSync("git", ["rev-parse", "HEAD"], { cwd: dir, encoding: "utf8" }).trim();
}

/** Runs `tasks` task attempts (in pairs from one head) through prepare, commit and integrate; medians per step. */
export async function worktreeCost(dir: string, files: number, tasks: number): Promise<WorktreeCost> {
  const repo = join(dir, `repo-${files}`);
  const initial = makeRepo(repo, files);
  const port = new GitWorkspace();
  const productId = "prd_bench";
  const ref = integrationRef(productId);
  await port.moveRef(repo, ref, initial, null);
  let head = initial;
  let cpuBefore: number | null = null;
  const prepare: number[] = [];
  const commit: number[] = [];
  const integrate: number[] = [];
  for (let i = 0; i < tasks; i += 2) {
    if (i === 2) cpuBefore = cpuMs();
    const pair = [i, i + 1].filter((n) => n < tasks);
    const captured: { n: number; path: string; commit: string }[] = [];
    for (const n of pair) {
      const path = await port.attemptPath(repo, productId, `t${n}`, 1);
      let t = performance.now();
      await port.prepare(repo, path, head);
      prepare.push(performance.now() - t);
      writeFileSync(join(path, `task-${n}.md`), `# Task ${n}\n`);
      t = performance.now();
      const c = await port.capture(
        path,
        attemptMessage(productId, { taskId: `t${n}`, title: `Task ${n}`, description: "" }, 1),
        head,
      );
      commit.push(performance.now() - t);
      if (!c.commit) throw new Error("no commit");
      captured.push({ n, path, commit: c.commit });
    }
    for (const c of captured) {
      const t = performance.now();
      // As the server does: the attempt's commit is kept under its ref, then merged and the branch moved by CAS.
      if (!(await port.moveRef(repo, attemptRef(productId, `t${c.n}`, 1), c.commit, null)))
        throw new Error("attempt ref");
      const merge = await port.merge(repo, head, c.commit, mergeMessage(productId, `task t${c.n}`));
      if (merge.kind === "conflict") throw new Error("unexpected conflict");
      if (!(await port.moveRef(repo, ref, merge.commit, head))) throw new Error("CAS failed");
      head = merge.commit;
      await port.release(repo, c.path, { reuse: true });
      integrate.push(performance.now() - t);
    }
  }
  const cpuAfter = cpuMs();
  const cpuMsPerTask =
    cpuBefore !== null && cpuAfter !== null && tasks > 2 ? (cpuAfter - cpuBefore) / (tasks - 2) : null;
  const coldPrepareMs = Math.max(...prepare.slice(0, 2));
  const t = performance.now();
  for (const path of await port.leftovers(repo, productId)) await port.release(repo, path);
  const removeParkedMs = performance.now() - t;
  if ((await port.leftovers(repo, productId)).length > 0) throw new Error("parked worktrees were not removed");
  const prepareMs = median(prepare);
  const commitMs = median(commit);
  const integrateMs = median(integrate);
  return {
    files,
    tasks,
    prepareMs,
    commitMs,
    integrateMs,
    totalMs: prepareMs + commitMs + integrateMs,
    coldPrepareMs,
    removeParkedMs,
    cpuMsPerTask,
  };
}
