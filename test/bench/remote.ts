/**
 * The remote path's cost per task (issue 33, "Must show"; docs/FLEET.md, "Code through a git remote"): the same task
 * loop as figure 7 (worktrees.ts: prepare, commit one changed file, integrate; in pairs from one head, so every second
 * integration is a real merge), run on the adapter the server uses for remote-backed products (`RemoteWorkspace`: a
 * mirror clone under a workspace root, fetched before each prepare, every ref move a `git push --force-with-lease`)
 * against a local bare repository as the remote (a path URL: the transport's own latency is not in the figure, only
 * what the remote path adds: one fetch and the pushes per task), beside the local path (`GitWorkspace` on the
 * repository itself) on the same content in the same run.
 *
 * The integrate step of the remote path runs twice, on two products: batched as the server does (core
 * `keepAndMoveBranch` with the port's `moveRefs`: the attempt ref and the integration branch in ONE push) and
 * unbatched (two `moveRef` calls, attempt ref then branch: two pushes, what a port without `moveRefs` costs). The
 * remote's `pre-receive` hook counts the pushes that reached it, per product.
 *
 * Owns its temporary repositories only (under the given folder); never prints (the caller logs).
 */
import { execFileSync } from "node:child_process";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GitWorkspace } from "../../src/adapters/workspace/git-workspace.js";
import { RemoteWorkspace } from "../../src/adapters/workspace/remote-mirror.js";
import type { WorkspacePort } from "../../src/core/ports.js";
import { keepAndMoveBranch } from "../../src/core/product/remote-workspace.js";
import { attemptMessage, attemptRef, integrationRef, mergeMessage } from "../../src/core/workspace/integration.js";
import { median } from "./support/stats.js";
import { cloneRepo, cpuMs } from "./worktrees.js";

/** One way of running the task loop: medians in ms per task, and the pushes that reached the remote per task. */
export interface PathCost {
  prepareMs: number;
  commitMs: number;
  integrateMs: number;
  totalMs: number;
  /** Pushes the remote received per task (0 for the local path). */
  pushesPerTask: number;
  /**
   * CPU time per task of this process and the git processes it ran (user + system, 10 ms ticks, summed over the
   * whole loop), ms: the cost whatever the machine's load; `null` where /proc is missing.
   */
  cpuMsPerTask: number | null;
}

export interface RemoteCost {
  files: number;
  tasks: number;
  local: PathCost;
  /** The server's way: attempt ref and integration branch in one push (`moveRefs`). */
  batched: PathCost;
  /** Two pushes per task (attempt ref, then the branch). */
  unbatched: PathCost;
  /** The server's first use of the remote: `git clone --mirror` into its workspace root, ms. */
  cloneMs: number;
}

/** How a task's integration moves the refs: the server's batched call, or one push per ref. */
type Integrate = (
  port: WorkspacePort,
  repo: string,
  productId: string,
  n: number,
  commit: string,
  from: string,
  to: string,
) => Promise<boolean>;

const batched: Integrate = (port, repo, productId, n, commit, from, to) =>
  keepAndMoveBranch(port, repo, integrationRef(productId), {
    taskId: `t${n}`,
    attempt: 1,
    commit,
    changedFiles: [],
    output: "",
    ref: attemptRef(productId, `t${n}`, 1),
    from,
    to,
  });

const unbatched: Integrate = async (port, repo, productId, n, commit, from, to) => {
  await port.moveRef(repo, attemptRef(productId, `t${n}`, 1), commit, null);
  return port.moveRef(repo, integrationRef(productId), to, from);
};

/** A bare clone of `source` as the remote, with a pre-receive hook appending a line per push to the returned log. */
function bareRemote(source: string, dir: string): { url: string; pushes: () => number } {
  const url = join(dir, "remote.git");
  execFileSync("git", ["clone", "-q", "--bare", source, url]);
  const log = join(dir, "pushes.log");
  writeFileSync(log, "");
  const hook = join(url, "hooks", "pre-receive");
  writeFileSync(hook, `#!/bin/sh\ncat >/dev/null\necho push >> '${log}'\n`);
  chmodSync(hook, 0o755);
  return {
    url,
    pushes: () =>
      readFileSync(log, "utf8")
        .split("\n")
        .filter((l) => l !== "").length,
  };
}

/**
 * Runs `tasks` attempts of product `productId` on `repo` through `port` (prepare, commit, integrate with `integrate`),
 * in pairs from one head; medians per step. The integration branch is created first (not timed).
 */
async function taskLoop(
  port: WorkspacePort,
  repo: string,
  productId: string,
  initial: string,
  tasks: number,
  integrate: Integrate,
): Promise<Omit<PathCost, "pushesPerTask">> {
  const cpuBefore = cpuMs();
  if (!(await port.moveRef(repo, integrationRef(productId), initial, null))) throw new Error("branch");
  let head = initial;
  const prepare: number[] = [];
  const commit: number[] = [];
  const integration: number[] = [];
  for (let i = 0; i < tasks; i += 2) {
    const captured: { n: number; path: string; commit: string }[] = [];
    for (const n of [i, i + 1].filter((k) => k < tasks)) {
      const path = await port.attemptPath(repo, productId, `t${n}`, 1);
      let t = performance.now();
      await port.prepare(repo, path, head);
      prepare.push(performance.now() - t);
      writeFileSync(join(path, `task-${n}.md`), `# Task ${n}\n`);
      t = performance.now();
      const task = { taskId: `t${n}`, title: `Task ${n}`, description: "" };
      const c = await port.capture(path, attemptMessage(productId, task, 1), head);
      commit.push(performance.now() - t);
      if (!c.commit) throw new Error("no commit");
      captured.push({ n, path, commit: c.commit });
    }
    for (const c of captured) {
      const t = performance.now();
      const merge = await port.merge(repo, head, c.commit, mergeMessage(productId, `task t${c.n}`));
      if (merge.kind === "conflict") throw new Error("unexpected conflict");
      if (!(await integrate(port, repo, productId, c.n, c.commit, head, merge.commit))) throw new Error("CAS failed");
      head = merge.commit;
      await port.release(repo, c.path, { reuse: true });
      integration.push(performance.now() - t);
    }
  }
  for (const path of await port.leftovers(repo, productId)) await port.release(repo, path);
  const cpuAfter = cpuMs();
  const cpuMsPerTask = cpuBefore !== null && cpuAfter !== null ? (cpuAfter - cpuBefore) / tasks : null;
  const [prepareMs, commitMs, integrateMs] = [median(prepare), median(commit), median(integration)];
  return { prepareMs, commitMs, integrateMs, totalMs: prepareMs + commitMs + integrateMs, cpuMsPerTask };
}

/**
 * The local path, then the remote path batched and unbatched, on `files` files and `tasks` tasks each; the repository
 * is a clone of figure 7's cached one (`cacheDir`, worktrees.ts).
 */
export async function remoteCost(dir: string, cacheDir: string, files: number, tasks: number): Promise<RemoteCost> {
  const repo = join(dir, `repo-${files}`);
  const initial = cloneRepo(cacheDir, files, repo);
  const remote = bareRemote(repo, dir);
  const local = await taskLoop(new GitWorkspace(), repo, "prd_local", initial, tasks, batched);
  const port = new RemoteWorkspace(join(dir, `root-${files}`));
  const t = performance.now();
  await port.inspect(remote.url);
  const cloneMs = performance.now() - t;
  const paths: { cost: Omit<PathCost, "pushesPerTask">; pushes: number }[] = [];
  for (const [productId, integrate] of [
    ["prd_batched", batched],
    ["prd_unbatched", unbatched],
  ] as const) {
    const before = remote.pushes();
    const cost = await taskLoop(port, remote.url, productId, initial, tasks, integrate);
    // The branch's creation is one push of its own, not a task's.
    paths.push({ cost, pushes: remote.pushes() - before - 1 });
  }
  const [b, u] = paths as [(typeof paths)[number], (typeof paths)[number]];
  return {
    files,
    tasks,
    local: { ...local, pushesPerTask: 0 },
    batched: { ...b.cost, pushesPerTask: b.pushes / tasks },
    unbatched: { ...u.cost, pushesPerTask: u.pushes / tasks },
    cloneMs,
  };
}
