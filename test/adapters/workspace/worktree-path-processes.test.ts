/**
 * The worktree path runs no git process it can prove it does not need (issue 34), and every shortcut stays exact
 * (guarantee 16; e4d6c1a for the re-run commit), on real repositories, counting git processes from git's own trace
 * (trace2 events):
 * - the filter overrides are read once while the configuration files are unchanged, and again at the next operation
 *   after a worker's `git config` (repository or global) defined a filter: the filter never runs;
 * - a configuration with an include is read at every operation;
 * - a capture that writes the same tree on the same base in the same second as a commit some ref keeps (loose or
 *   packed) gets a new commit; a capture whose commit is new asks no ref;
 * - `moveRefs` moves an attempt ref and the branch in one git process, and answers each move on its own when one
 *   swap fails;
 * - a merge of two captures on one base is a merge commit without `merge-base`; one git cannot prove stays git's.
 */
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SETTLED_MS } from "../../../src/adapters/workspace/filter-overrides.js";
import { GitWorkspace } from "../../../src/adapters/workspace/git-workspace.js";
import { attemptMessage, attemptRef, integrationRef } from "../../../src/core/workspace/integration.js";
import { git, makeRepo } from "../../support/git-repo.js";
import { tempDir } from "../../support/server-process.js";

const PRODUCT = "prd_procs";
const message = (taskId: string) => attemptMessage(PRODUCT, { taskId, title: taskId, description: "" }, 1);
const saved = { HOME: process.env.HOME, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME };

afterEach(() => {
  vi.useRealTimers();
  delete process.env.GIT_TRACE2_EVENT;
  for (const [key, value] of Object.entries(saved))
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
});

/** Runs `work` with git's trace on; returns its result and the git commands it ran (subcommand names, in order). */
async function traced<T>(work: () => Promise<T>): Promise<{ result: T; commands: string[] }> {
  const file = join(tempDir("acp-orch-trace-"), "trace.json");
  process.env.GIT_TRACE2_EVENT = file;
  try {
    const result = await work();
    return { result, commands: commandsIn(file) };
  } finally {
    delete process.env.GIT_TRACE2_EVENT;
  }
}

/** The git commands a trace file shows (top-level processes only): `config` reads of ours as `config read`. */
function commandsIn(file: string): string[] {
  if (!existsSync(file)) return [];
  const names = new Map<string, string>();
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line === "") continue;
    const event = JSON.parse(line) as { event: string; sid: string; name?: string; argv?: string[] };
    if (event.sid.includes("/")) continue;
    if (event.event === "start" && event.argv?.includes("--get-regexp")) names.set(event.sid, "config read");
    if (event.event === "cmd_name" && !names.has(event.sid)) names.set(event.sid, event.name ?? "");
  }
  return [...names.values()];
}

/** Waits (polling the files' times) until every file in `paths` changed more than `SETTLED_MS` ago. */
async function settled(paths: string[]): Promise<void> {
  for (;;) {
    const newest = Math.max(...paths.filter(existsSync).map((p) => Math.max(statSync(p).ctimeMs, statSync(p).mtimeMs)));
    if (Date.now() - newest > SETTLED_MS + 200) return;
    await new Promise((done) => setTimeout(done, Math.max(50, SETTLED_MS + 250 - (Date.now() - newest))));
  }
}

async function setup() {
  const home = tempDir("acp-orch-home-");
  process.env.HOME = home;
  delete process.env.XDG_CONFIG_HOME;
  const repo = makeRepo({ "README.md": "# Project\n", "src/a.txt": "a\n" });
  const initial = git(repo, "rev-parse", "HEAD");
  const port = new GitWorkspace();
  expect(await port.moveRef(repo, integrationRef(PRODUCT), initial, null)).toBe(true);
  return { repo, initial, port, home, common: join(repo, ".git") };
}

describe("the worktree path's git processes", () => {
  /** One attempt on `initial` (a parked worktree when there is one): prepare, `work`, capture, park; traced. */
  const attempt = async (
    env: Awaited<ReturnType<typeof setup>>,
    taskId: string,
    work: (path: string) => void = () => undefined,
  ) => {
    const { repo, initial, port } = env;
    const path = await port.attemptPath(repo, PRODUCT, taskId, 1);
    const run = await traced(async () => {
      await port.prepare(repo, path, initial);
      work(path);
      return port.capture(path, message(taskId), initial);
    });
    await port.release(repo, path, { reuse: true });
    return { ...run, configReads: run.commands.filter((c) => c === "config read").length };
  };

  it("reads the filter configuration again after a worker's git config defines a filter, and runs no filter", async () => {
    const env = await setup();
    const marker = join(tempDir("acp-orch-marker-"), "ran");
    await attempt(env, "a0");
    await settled([join(env.common, "config"), join(env.common, "worktrees", "a0-1", "commondir")]);
    // Settled: the first operation reads the configuration, the next ones reuse what it read.
    expect((await attempt(env, "a1")).configReads).toBe(1);
    const reused = await attempt(env, "a2", (path) => writeFileSync(join(path, "new.txt"), "new\n"));
    expect(reused.result.changedFiles).toEqual(["new.txt"]);
    expect(reused.configReads).toBe(0);

    // The worker defines a filter in the repository's configuration (its own git, from its worktree) and names it.
    const afterRepo = await attempt(env, "a3", (path) => {
      git(path, "config", "filter.evil.clean", `touch ${marker}.repo; cat`);
      writeFileSync(join(path, ".gitattributes"), "* filter=evil\n");
      writeFileSync(join(path, "more.txt"), "more\n");
    });
    expect(afterRepo.configReads).toBe(1);
    expect(afterRepo.result.changedFiles).toEqual([".gitattributes", "more.txt"]);
    expect(existsSync(`${marker}.repo`)).toBe(false);
    expect(git(env.repo, "show", `${afterRepo.result.commit}:more.txt`)).toBe("more");

    // The same through the global configuration, once the repository's has settled again.
    await settled([join(env.common, "config")]);
    expect((await attempt(env, "a4")).configReads).toBe(1);
    const afterGlobal = await attempt(env, "a5", (path) => {
      writeFileSync(join(env.home, ".gitconfig"), `[filter "other"]\n\tclean = touch ${marker}.global; cat\n`);
      writeFileSync(join(path, ".gitattributes"), "* filter=other\n");
      writeFileSync(join(path, "global.txt"), "global\n");
    });
    expect(afterGlobal.configReads).toBe(1);
    expect(afterGlobal.result.changedFiles).toEqual([".gitattributes", "global.txt"]);
    expect(existsSync(`${marker}.global`)).toBe(false);
    expect(existsSync(`${marker}.repo`)).toBe(false);
  }, 60_000);

  it("reads a configuration with an include at every operation", async () => {
    const env = await setup();
    const included = join(tempDir("acp-orch-include-"), "extra.config");
    writeFileSync(included, "[core]\n\tquotePath = true\n");
    git(env.repo, "config", "include.path", included);
    await attempt(env, "a0");
    await settled([join(env.common, "config"), included, join(env.common, "worktrees", "a0-1", "commondir")]);
    for (const taskId of ["a1", "a2"]) expect((await attempt(env, taskId)).configReads).toBe(2);
  }, 60_000);

  it("gives a re-run in the same second a new commit when a ref keeps the earlier one, loose or packed", async () => {
    const { repo, initial, port } = await setup();
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now());
    const capture = async (taskId: string) => {
      const path = await port.attemptPath(repo, PRODUCT, taskId, 1);
      await port.prepare(repo, path, initial);
      writeFileSync(join(path, "same.txt"), "same\n");
      const c = await traced(() => port.capture(path, message("t1"), initial));
      await port.release(repo, path, { reuse: true });
      return c;
    };
    const first = await capture("a");
    // A new commit asks no ref.
    expect(first.commands).not.toContain("for-each-ref");
    const c1 = first.result.commit ?? "";
    git(repo, "update-ref", "refs/test/kept", c1);
    const again = await capture("b");
    expect(again.commands).toContain("for-each-ref");
    expect(again.result.commit).not.toBe(c1);
    expect(git(repo, "rev-parse", `${again.result.commit}^{tree}`)).toBe(git(repo, "rev-parse", `${c1}^{tree}`));
    expect(git(repo, "rev-parse", `${again.result.commit}^`)).toBe(initial);
    // Packed (no loose object left): git writes none for a packed object, so the refs are asked again.
    git(repo, "update-ref", "-d", "refs/test/kept");
    git(repo, "update-ref", "refs/test/packed", c1);
    git(repo, "gc", "-q", "--prune=now");
    expect(existsSync(join(repo, ".git", "objects", c1.slice(0, 2), c1.slice(2)))).toBe(false);
    const packed = await capture("c");
    expect(packed.commands).toContain("for-each-ref");
    expect(packed.result.commit).not.toBe(c1);
  }, 60_000);

  it("moves the attempt ref and the branch in one process, and answers each move when a swap fails", async () => {
    const { repo, initial, port } = await setup();
    const p1 = await port.attemptPath(repo, PRODUCT, "t1", 1);
    await port.prepare(repo, p1, initial);
    writeFileSync(join(p1, "x.txt"), "x\n");
    const c1 = (await port.capture(p1, message("t1"), initial)).commit ?? "";
    const branch = integrationRef(PRODUCT);
    const keep1 = attemptRef(PRODUCT, "t1", 1);
    const both = await traced(() =>
      port.moveRefs(repo, [
        { ref: keep1, to: c1, expected: null },
        { ref: branch, to: c1, expected: initial },
      ]),
    );
    expect(both.result).toEqual([true, true]);
    expect(both.commands).toEqual(["update-ref"]);
    expect([git(repo, "rev-parse", keep1), git(repo, "rev-parse", branch)]).toEqual([c1, c1]);
    // Replayed after a crash: both already there.
    expect(
      await port.moveRefs(repo, [
        { ref: keep1, to: c1, expected: null },
        { ref: branch, to: c1, expected: initial },
      ]),
    ).toEqual([true, true]);
    // The branch is not where the move expects it: the keep still happens, the branch is left alone.
    const keep2 = attemptRef(PRODUCT, "t2", 1);
    expect(
      await port.moveRefs(repo, [
        { ref: keep2, to: initial, expected: null },
        { ref: branch, to: initial, expected: initial },
      ]),
    ).toEqual([true, false]);
    expect([git(repo, "rev-parse", keep2), git(repo, "rev-parse", branch)]).toEqual([initial, c1]);
  }, 60_000);

  it("merges two captures of one base without merge-base, and leaves to git what it cannot prove", async () => {
    const { repo, initial, port } = await setup();
    const captureOn = async (taskId: string, base: string) => {
      const path = await port.attemptPath(repo, PRODUCT, taskId, 1);
      await port.prepare(repo, path, base);
      writeFileSync(join(path, `${taskId}.txt`), `${taskId}\n`);
      const commit = (await port.capture(path, message(taskId), base)).commit ?? "";
      await port.release(repo, path, { reuse: true });
      return commit;
    };
    const c1 = await captureOn("t1", initial);
    const c2 = await captureOn("t2", initial);
    expect(await port.merge(repo, initial, c1, "m")).toEqual({ kind: "fastForward", commit: c1 });
    const m = await traced(() => port.merge(repo, c1, c2, "merge t2"));
    expect(m.result.kind).toBe("merge");
    expect(m.commands).toEqual(["merge-tree", "commit-tree"]);
    const merged = m.result.kind === "merge" ? m.result.commit : "";
    expect(git(repo, "rev-parse", `${merged}^1`, `${merged}^2`)).toBe(`${c1}\n${c2}`);
    // A capture on an older base than the head: a merge too (the head descends from its base).
    const c3 = await captureOn("t3", c1);
    const m3 = await traced(() => port.merge(repo, merged, c3, "merge t3"));
    expect(m3.result.kind).toBe("merge");
    expect(m3.commands).not.toContain("merge-base");
    // Neither provable: git decides (the head already holds the commit; the commit is the head's ancestor).
    const back = await traced(() => port.merge(repo, merged, c1, "again"));
    expect(back.result).toEqual({ kind: "fastForward", commit: merged });
    expect(back.commands).toEqual(["merge-base"]);
    const ahead = await traced(() => port.merge(repo, initial, merged, "ahead"));
    expect(ahead.result).toEqual({ kind: "fastForward", commit: merged });
    expect(ahead.commands).toEqual(["merge-base"]);
  }, 60_000);
});
