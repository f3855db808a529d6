/**
 * Worktree preparation under contention (issue 26, case 8): 12 concurrent `prepare`s on ONE repository, from two
 * processes (6 each, as two servers sharing a repository do), for 20 rounds, while CPU burners this test starts load
 * the machine. Each round every process prepares 6 fresh worktrees at once (`git worktree add`), checks each is the
 * base's checkout, then removes them at once (`git worktree remove`), racing the other process's adds; the user's checkout (HEAD,
 * branches, index, tree, operation) is byte-for-byte unchanged at the end. Not one
 * preparation may fail (a failure there would have been a failed task attempt): administration is serialised per
 * common dir across processes (worktree-lock.ts) and a failed try is retried with backoff (the retries are counted).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { git, makeRepo, worktreePaths } from "../../support/git-repo.js";
import { tempDir } from "../../support/server-process.js";
import { runTsxSource } from "../../support/tsx-child.js";
import { userState } from "../../support/worktree-safety.js";

const ROUNDS = 20;
const WIDTH = 6;
const PROCESSES = 2;

/** One process: `ROUNDS` rounds of `WIDTH` concurrent prepares then removals, in step with the others (barrier). */
const CHILD = `
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GitWorkspace } from "./src/adapters/workspace/git-workspace.ts";
const [repo, base, barrier, me, processes, rounds, width] = process.argv.slice(1);
let retries = 0;
const port = new GitWorkspace({ logger: { warn: () => retries++ } });
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
async function together(round) {
  writeFileSync(join(barrier, round + "-" + me), "");
  for (let p = 0; p < Number(processes); p++) while (!existsSync(join(barrier, round + "-" + p))) await sleep(2);
}
const failures = [];
for (let r = 0; r < Number(rounds); r++) {
  await together(r);
  const paths = await Promise.all(
    Array.from({ length: Number(width) }, (_, k) => port.attemptPath(repo, "prd_p" + me, "t" + k, r + 1)),
  );
  await Promise.all(paths.map((path) => port.prepare(repo, path, base).catch((err) => failures.push(String(err)))));
  for (const path of paths) {
    const file = join(path, "src", "m7.txt");
    if (!existsSync(file) || readFileSync(file, "utf8") !== "module 7\\n") failures.push("not checked out: " + path);
  }
  await Promise.all(paths.map((path) => port.release(repo, path)));
}
process.stdout.write(JSON.stringify({ failures, retries }));
`;

const burners: ChildProcess[] = [];
afterAll(() => {
  for (const b of burners) if (b.exitCode === null) b.kill("SIGKILL");
});

describe("worktree preparation, 12 at once on one repository from two processes, loaded machine", () => {
  it("case 8: 20 rounds, every preparation succeeds", async () => {
    // A small tree: the race is in git's worktree administration, not in checking files out.
    const repo = makeRepo({ "README.md": "# Project\n", "src/m7.txt": "module 7\n", "src/m8.txt": "module 8\n" });
    const base = git(repo, "rev-parse", "HEAD");
    const before = userState(repo);
    const barrier = tempDir("acp-orch-barrier-");
    writeFileSync(join(barrier, ".keep"), "");
    for (let i = 0; i < 2; i++) burners.push(spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
    const t0 = Date.now();
    try {
      const outs = await Promise.all(
        Array.from({ length: PROCESSES }, (_, me) =>
          runTsxSource(CHILD, [repo, base, barrier, String(me), String(PROCESSES), String(ROUNDS), String(WIDTH)]),
        ),
      );
      const results = outs.map((out) => JSON.parse(out) as { failures: string[]; retries: number });
      process.stderr.write(
        `case 8 (adapter): ${JSON.stringify({ prepares: PROCESSES * ROUNDS * WIDTH, retries: results.map((r) => r.retries), ms: Date.now() - t0 })}\n`,
      );
      expect(results.flatMap((r) => r.failures)).toEqual([]);
      // Every worktree was removed again, and git's administration is consistent (no half-made entry).
      expect(worktreePaths(repo)).toEqual([repo]);
      expect(git(repo, "worktree", "prune", "--dry-run", "-v")).toBe("");
      expect(userState(repo)).toEqual(before);
    } finally {
      for (const b of burners) b.kill("SIGKILL");
    }
  }, 240_000);
});
