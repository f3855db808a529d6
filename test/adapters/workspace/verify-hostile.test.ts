/**
 * A verify worktree is exactly the candidate's tree before each check, whatever the check before it did (DESIGN.md
 * guarantee 17; docs/VERIFY.md "Verify worktrees"), now that a preparation skips `clean` when no folder changed and
 * puts the index back from its own copy instead of reading it (src/adapters/workspace/verify-marks.ts; issue 30
 * bench). Real git repository, real `GitVerifier`, real check processes; each check after a hostile one compares the
 * whole worktree (every path, file content, executable bit, symlink target, empty folder) with the candidate's tree
 * extracted apart, and asks git for index bits. The verifier's own git processes are counted from git's trace.
 *
 * Hostile checks: one that changes files in place only (same size, mtime set back, a chmod, skip-worktree and
 * assume-unchanged bits hiding edits, the `.git` file rewritten, stat configuration turned off in the repository's
 * config: no folder changes, so the next preparation skips `clean` and must still undo all of it), and one that adds
 * and removes paths (untracked, ignored, an empty folder, a deep new folder, a deleted tracked file, `.git` replaced
 * by a symlink to a file outside, which must not be written through). The worktree's index in its git directory is
 * made a hard link (in place) and a symlink (add and remove) to that file outside: the index put back before the next
 * check must replace it, never write through it.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { GitVerifier } from "../../../src/adapters/workspace/verify-worktrees.js";
import type { CheckCommand } from "../../../src/core/workspace/verify-port.js";
import { git, makeRepo, writeRepoFiles } from "../../support/git-repo.js";
import { tempDir } from "../../support/server-process.js";

/** Every path under `.` but `.git`: folders, files with their executable bit and checksum, symlinks with targets. */
const MANIFEST =
  'find . -path ./.git -prune -o -print | LC_ALL=C sort | while IFS= read -r p; do if [ -L "$p" ]; then echo "L $p $(readlink "$p")"; ' +
  'elif [ -d "$p" ]; then echo "D $p"; else x=-; [ -x "$p" ] && x=x; echo "F $p $x $(cksum < "$p")"; fi; done';

/** Compares the worktree with the manifest in $EXPECTED and fails (printing the difference) when they differ. */
const SAME_AS_CANDIDATE: CheckCommand = {
  name: "same-as-candidate",
  run:
    `(${MANIFEST}) > "$SCRATCH/seen" && diff "$EXPECTED" "$SCRATCH/seen" && ` +
    // No index bit may hide anything: every entry is `H` (tracked, cached, no bits).
    `test -z "$(git ls-files -v | grep -v '^H ')" && test -z "$(git status --porcelain --ignored)"`,
  timeoutMs: 60_000,
};

/** Changes tracked files in place only: no folder of the worktree changes. */
const IN_PLACE: CheckCommand = {
  name: "in-place",
  run: [
    "t=$(stat -c %Y src/a.js)",
    "printf 'X(9876);\\n' > src/a.js", // the same size as before, and the mtime set back below
    'touch -d "@$t" src/a.js',
    "chmod +x src/lib/b.js",
    "git update-index --skip-worktree src/lib/c.js && echo hidden >> src/lib/c.js",
    "git update-index --assume-unchanged README.md && echo assumed >> README.md",
    "git config core.trustctime false && git config core.checkStat minimal && git config core.ignoreStat true",
    // The worktree's index made a hard link to a file outside ($VICTIM): putting the index back must not write it.
    'gd=$(git rev-parse --absolute-git-dir) && rm "$gd/index" && ln "$VICTIM" "$gd/index"',
    "printf 'gitdir: /nowhere\\n' > .git",
  ].join(" && "),
  timeoutMs: 60_000,
};

/** Adds and removes paths everywhere, and points `.git` at a file outside ($VICTIM). */
const ADD_REMOVE: CheckCommand = {
  name: "add-remove",
  run: [
    "echo stray > stray.txt",
    "mkdir -p build/deep && echo out > build/deep/out.js",
    "echo log > src/lib/run.log",
    "mkdir empty",
    "mkdir -p src/lib/new/deeper && echo x > src/lib/new/deeper/x.js",
    "rm src/a.js",
    // The index made a symlink to $VICTIM: not to be written through either.
    'gd=$(git rev-parse --absolute-git-dir) && rm "$gd/index" && ln -s "$VICTIM" "$gd/index"',
    'rm .git && ln -s "$VICTIM" .git',
  ].join(" && "),
  timeoutMs: 60_000,
};

const traces: string[] = [];
afterEach(() => {
  delete process.env.GIT_TRACE2_EVENT;
  for (const t of traces.splice(0)) rmSync(t, { force: true });
});

/** The subcommands of the verifier's own git processes in its verify worktree during `fn` (from git's trace). */
async function verifierGit(fn: () => Promise<unknown>): Promise<string[]> {
  const trace = join(tempDir("acp-orch-trace-"), "trace.json");
  traces.push(trace);
  process.env.GIT_TRACE2_EVENT = trace;
  try {
    await fn();
  } finally {
    delete process.env.GIT_TRACE2_EVENT;
  }
  const commands: string[] = [];
  let text = "";
  try {
    text = readFileSync(trace, "utf8");
  } catch {
    return commands;
  }
  for (const line of text.split("\n")) {
    if (!line) continue;
    const event = JSON.parse(line) as { event: string; argv?: string[] };
    if (event.event !== "start" || !event.argv) continue;
    const args = event.argv.slice(1);
    if (!args.some((a) => a.startsWith("--work-tree=") && a.includes("acp-orchestrator/verify"))) continue;
    let i = 0;
    while (i < args.length && (args[i] === "-c" || (args[i] as string).startsWith("--"))) i += args[i] === "-c" ? 2 : 1;
    commands.push(args[i] as string);
  }
  return commands;
}

describe("GitVerifier: a hostile check's leftovers never reach the next check", () => {
  it("undoes in-place edits without clean, removes added paths with it, never writes through .git", async () => {
    const repo = makeRepo({
      "README.md": "# app\n",
      ".gitignore": "build/\n*.log\n",
      "src/a.js": "a(1234);\n",
      "src/lib/b.js": "b();\n",
      "src/lib/c.js": "c();\n",
    });
    const first = git(repo, "rev-parse", "HEAD");
    writeRepoFiles(repo, { "src/lib/c.js": "c(2);\n", "docs/guide.md": "# guide\n" });
    git(repo, "rm", "-q", "src/lib/b.js");
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "second");
    const second = git(repo, "rev-parse", "HEAD");

    // Each candidate's tree extracted apart, and its manifest.
    const scratch = tempDir("acp-orch-hostile-");
    const expected = (commit: string): string => {
      const dir = join(scratch, `tree-${commit}`);
      mkdirSync(dir);
      execFileSync("sh", ["-c", `git -C "${repo}" archive ${commit} | tar -x -C "${dir}"`]);
      const file = join(scratch, `manifest-${commit}`);
      writeFileSync(file, execFileSync("sh", ["-c", MANIFEST], { cwd: dir }));
      return file;
    };
    const manifests = { [first]: expected(first), [second]: expected(second) };
    const victim = join(scratch, "victim");
    writeFileSync(victim, "untouched\n");

    const verifier = new GitVerifier();
    const check = (commit: string, commands: CheckCommand[]) =>
      verifier.run({
        cwd: repo,
        productId: "prd_hostile",
        commit,
        commands,
        env: { EXPECTED: manifests[commit] as string, SCRATCH: scratch, VICTIM: victim },
        parallel: 1,
        signal: new AbortController().signal,
      });
    const expectGreen = (run: Awaited<ReturnType<typeof check>>) => {
      expect(run?.checks.map((c) => [c.name, c.ok, c.ok ? "" : c.outputTail])).toEqual(
        run?.checks.map((c) => [c.name, true, ""]),
      );
    };

    // 1. First use: the worktree is made; the in-place hostile check runs after a clean comparison.
    const one = await check(first, [SAME_AS_CANDIDATE, IN_PLACE]);
    expectGreen(one);

    // 2. Nothing was added or removed, so no clean: the in-place edits, bits, .git and config must still be undone.
    let two: Awaited<ReturnType<typeof check>> = null;
    const gitTwo = await verifierGit(async () => (two = await check(second, [SAME_AS_CANDIDATE, ADD_REMOVE])));
    expectGreen(two);
    expect(gitTwo).toEqual(["checkout"]);
    expect(readFileSync(victim, "utf8")).toBe("untouched\n");

    // 3. Paths were added and removed (and .git is a symlink): clean runs, the victim is never written.
    let three: Awaited<ReturnType<typeof check>> = null;
    const gitThree = await verifierGit(async () => (three = await check(first, [SAME_AS_CANDIDATE])));
    expectGreen(three);
    expect(gitThree).toEqual(["checkout", "clean"]);
    expect(readFileSync(victim, "utf8")).toBe("untouched\n");

    // 4. A check that left nothing: one git process, and the tree is still exact.
    let four: Awaited<ReturnType<typeof check>> = null;
    const gitFour = await verifierGit(async () => (four = await check(second, [SAME_AS_CANDIDATE])));
    expectGreen(four);
    expect(gitFour).toEqual(["checkout"]);

    await verifier.release(repo, "prd_hostile");
  });

  it("marks a folder the candidate adds (the link-count proof of the folders falls back to reading them)", async () => {
    const repo = makeRepo({ "README.md": "# app\n", "src/a.js": "a();\n", "src/lib/b.js": "b();\n" });
    const first = git(repo, "rev-parse", "HEAD");
    writeRepoFiles(repo, { "src/new/x.js": "x();\n" });
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "a new folder");
    const second = git(repo, "rev-parse", "HEAD");
    const scratch = tempDir("acp-orch-hostile-");
    const manifests: Record<string, string> = {};
    for (const commit of [first, second]) {
      const dir = join(scratch, `tree-${commit}`);
      mkdirSync(dir);
      execFileSync("sh", ["-c", `git -C "${repo}" archive ${commit} | tar -x -C "${dir}"`]);
      manifests[commit] = join(scratch, `manifest-${commit}`);
      writeFileSync(manifests[commit], execFileSync("sh", ["-c", MANIFEST], { cwd: dir }));
    }
    const verifier = new GitVerifier();
    const check = (commit: string, commands: CheckCommand[]) =>
      verifier.run({
        cwd: repo,
        productId: "prd_new_folder",
        commit,
        commands,
        env: { EXPECTED: manifests[commit] as string, SCRATCH: scratch },
        parallel: 1,
        signal: new AbortController().signal,
      });
    const green = async (commit: string, commands: CheckCommand[]) => {
      const run = await check(commit, commands);
      expect(run?.checks.map((c) => [c.name, c.ok, c.ok ? "" : c.outputTail])).toEqual(
        run?.checks.map((c) => [c.name, true, ""]),
      );
    };
    // Folders proved by link counts while the candidates have the same folders; the second adds src/new.
    await green(first, [SAME_AS_CANDIDATE]);
    await green(first, [SAME_AS_CANDIDATE]);
    // A check that writes only inside the new folder changes no folder but it: src/new must be among the marks.
    const inNew: CheckCommand = {
      name: "in-new",
      run: "echo stray > src/new/stray.txt && mkdir src/new/sub && echo y > src/new/sub/y.js",
      timeoutMs: 60_000,
    };
    await green(second, [SAME_AS_CANDIDATE, inNew]);
    // Had src/new not been marked, nothing marked changed: clean skipped, src/new kept its stray files.
    const gitThree = await verifierGit(() => green(first, [SAME_AS_CANDIDATE]));
    expect(gitThree).toEqual(["checkout", "clean"]);
    await verifier.release(repo, "prd_new_folder");
  });
});
