/**
 * A product retried from the CLI (fresh-user findings): `diff ID` still shows everything a merge would bring in (from
 * the commit the product started on, not from the retried task's new base), and every task's commit that `status`
 * names is held by the ref it names, with the first run's commits still under their own refs (guarantee 11).
 * Real CLI, real server over stdio, real git repository, built-in agents.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { tempDir } from "../support/server-process.js";

it("after retry, diff covers the whole product and status names the refs that hold the commits", async () => {
  const repo = tempDir("acp-orch-retry-");
  const git = (...args: string[]) => spawnSync("git", args, { cwd: repo, encoding: "utf8" });
  git("init", "-q", "-b", "main");
  git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "init");
  const statePath = join(repo, "..", `${repo.split("/").pop() ?? "x"}-state.db`);
  const cli = (...args: string[]) => runCli([...args, "--state", statePath], repo);

  const run = await cli("run", "--yes", "--goal", "- Write a README\n- then write a changelog");
  expect(run.code, run.stderr).toBe(0);
  const productId = /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";
  const firstRefs = git(
    "for-each-ref",
    "--format=%(objectname) %(refname)",
    `refs/acp-orchestrator/${productId}/attempts/`,
  ).stdout;
  expect(firstRefs.trim().split("\n")).toHaveLength(2);

  const retry = await cli("retry", productId, "t1");
  expect(retry.code, retry.stderr).toBe(0);

  const diff = await cli("diff", productId, "--stat");
  expect(diff.code, diff.stderr).toBe(0);
  const merged = git("diff", "--stat", "main", `acp/${productId}`).stdout;
  expect(merged).toMatch(/2 files changed, \d+ insertions/);
  expect(diff.stdout.trim()).toBe(merged.trim());

  const status = await cli("status", productId);
  expect(status.code, status.stderr).toBe(0);
  const named = [...status.stdout.matchAll(/^ {2}(t\d) {2}commit: ([0-9a-f]{40}) on (\S+)$/gm)];
  expect(named.map((m) => m[1])).toEqual(["t1", "t2"]);
  for (const [, , commit, ref] of named) expect(git("rev-parse", ref as string).stdout.trim()).toBe(commit);
  // The first run's commits are still where they were, each under its own ref.
  const now = git(
    "for-each-ref",
    "--format=%(objectname) %(refname)",
    `refs/acp-orchestrator/${productId}/attempts/`,
  ).stdout;
  for (const line of firstRefs.trim().split("\n")) expect(now).toContain(line);
  expect(now.trim().split("\n")).toHaveLength(4);
}, 240_000);
