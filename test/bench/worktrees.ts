/**
 * Figure 7 (issue 12): the added cost per task of worktree isolation, measured on the git adapter the server uses
 * (`GitWorkspace`) against real repositories of 100 and 10,000 files: prepare (create the attempt's worktree at the
 * integration head), commit (one changed file: `git add -A` + commit with trailers) and integrate (merge into the
 * integration branch by compare-and-swap, then remove the worktree). Tasks run in pairs from the same head, as parallel
 * tasks do, so every second integration is a real merge (merge-tree + commit-tree), not a fast-forward.
 *
 * Owns its temporary repositories only (under the given folder); never prints (the caller logs).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GitWorkspace } from "../../src/adapters/workspace/git-workspace.js";
import { attemptMessage, integrationRef, mergeMessage } from "../../src/core/workspace/integration.js";
import { median } from "./support/stats.js";

export interface WorktreeCost {
  files: number;
  tasks: number;
  /** Medians in ms per task. */
  prepareMs: number;
  commitMs: number;
  integrateMs: number;
  totalMs: number;
}

const ENV = { ...process.env, GIT_AUTHOR_NAME: "bench", GIT_AUTHOR_EMAIL: "b@x", GIT_COMMITTER_NAME: "bench", GIT_COMMITTER_EMAIL: "b@x" };

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
  const prepare: number[] = [];
  const commit: number[] = [];
  const integrate: number[] = [];
  for (let i = 0; i < tasks; i += 2) {
    const pair = [i, i + 1].filter((n) => n < tasks);
    const captured: { n: number; path: string; commit: string }[] = [];
    for (const n of pair) {
      const path = await port.attemptPath(repo, productId, `t${n}`, 1);
      let t = performance.now();
      await port.prepare(repo, path, head);
      prepare.push(performance.now() - t);
      writeFileSync(join(path, `task-${n}.md`), `# Task ${n}\n`);
      t = performance.now();
      const c = await port.capture(path, attemptMessage(productId, { taskId: `t${n}`, title: `Task ${n}`, description: "" }, 1));
      commit.push(performance.now() - t);
      if (!c.commit) throw new Error("no commit");
      captured.push({ n, path, commit: c.commit });
    }
    for (const c of captured) {
      const t = performance.now();
      const merge = await port.merge(repo, head, c.commit, mergeMessage(productId, `task t${c.n}`));
      if (merge.kind === "conflict") throw new Error("unexpected conflict");
      if (!(await port.moveRef(repo, ref, merge.commit, head))) throw new Error("CAS failed");
      head = merge.commit;
      await port.release(repo, c.path);
      integrate.push(performance.now() - t);
    }
  }
  const prepareMs = median(prepare);
  const commitMs = median(commit);
  const integrateMs = median(integrate);
  return { files, tasks, prepareMs, commitMs, integrateMs, totalMs: prepareMs + commitMs + integrateMs };
}
