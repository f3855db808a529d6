/**
 * GitWorkspace on real repositories (issue 12): a worktree released for reuse serves the product's next attempt with
 * exactly the base's tree (nothing of the earlier attempt survives: tracked edits, untracked, ignored or nested
 * files), parked worktrees are listed as leftovers and removed like any other, and a capture lists both names of a
 * rename.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitWorkspace } from "../../../src/adapters/workspace/git-workspace.js";
import { attemptMessage, integrationRef } from "../../../src/core/workspace/integration.js";
import { git, makeRepo, worktreePaths } from "../../support/git-repo.js";

const PRODUCT = "prd_reuse";
const message = (taskId: string) => attemptMessage(PRODUCT, { taskId, title: taskId, description: "" }, 1);

/** Everything git sees in a worktree beyond its HEAD: changes, untracked and ignored files (empty = exactly HEAD). */
const extras = (path: string) => git(path, "status", "--porcelain", "--ignored", "--untracked-files=all");

async function setup() {
  const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.log\nbuild/\n", "src/a.txt": "a\n" });
  const initial = git(repo, "rev-parse", "HEAD");
  const port = new GitWorkspace();
  expect(await port.moveRef(repo, integrationRef(PRODUCT), initial, null)).toBe(true);
  return { repo, initial, port };
}

describe("GitWorkspace", () => {
  it("gives a reused worktree exactly the base's tree, whatever the earlier attempt left", async () => {
    const { repo, initial, port } = await setup();
    const p1 = await port.attemptPath(repo, PRODUCT, "t1", 1);
    await port.prepare(repo, p1, initial);
    expect(extras(p1)).toBe("");
    // Attempt 1 edits, adds, deletes, and leaves ignored and nested files behind.
    writeFileSync(join(p1, "src/a.txt"), "changed by t1\n");
    writeFileSync(join(p1, "new.txt"), "new\n");
    rmSync(join(p1, "README.md"));
    mkdirSync(join(p1, "build/deep"), { recursive: true });
    writeFileSync(join(p1, "build/deep/out.bin"), "binary\n");
    writeFileSync(join(p1, "debug.log"), "log\n");
    mkdirSync(join(p1, "build/nested"), { recursive: true });
    git(join(p1, "build/nested"), "init", "-q"); // a repository inside an ignored folder: only `clean -ff` removes it
    const captured = await port.capture(p1, message("t1"), initial);
    expect(captured.changedFiles).toEqual(["README.md", "new.txt", "src/a.txt"]);
    expect(git(repo, "rev-parse", `${captured.commit}^`)).toBe(initial);
    expect(git(repo, "log", "-1", "--format=%(trailers:key=Task,valueonly)", captured.commit ?? "")).toBe("t1");

    // Released for reuse: parked out of the attempt's path, listed as a leftover of the product.
    await port.release(repo, p1, { reuse: true });
    expect(existsSync(p1)).toBe(false);
    const parked = await port.leftovers(repo, PRODUCT);
    expect(parked.map((p) => basename(p).replace(/\d+/g, "N"))).toEqual(["~spare-N-N"]);
    expect(worktreePaths(repo)).toHaveLength(2);

    // The next attempt takes it: at its base, with nothing of attempt 1.
    const p2 = await port.attemptPath(repo, PRODUCT, "t2", 1);
    await port.prepare(repo, p2, initial);
    expect(await port.leftovers(repo, PRODUCT)).toEqual([p2]);
    expect(git(p2, "rev-parse", "HEAD")).toBe(initial);
    expect(extras(p2)).toBe("");
    expect(readFileSync(join(p2, "src/a.txt"), "utf8")).toBe("a\n");
    expect(readFileSync(join(p2, "README.md"), "utf8")).toBe("# Project\n");
    for (const gone of ["new.txt", "build", "debug.log"]) expect(existsSync(join(p2, gone))).toBe(false);

    // An attempt that ended without a capture (failed, cancelled) leaves edits in place: still nothing survives.
    writeFileSync(join(p2, "src/a.txt"), "half-done by t2\n");
    writeFileSync(join(p2, "scratch.txt"), "scratch\n");
    await port.release(repo, p2, { reuse: true });
    const p3 = await port.attemptPath(repo, PRODUCT, "t3", 1);
    await port.prepare(repo, p3, captured.commit ?? "");
    expect(git(p3, "rev-parse", "HEAD")).toBe(captured.commit);
    expect(extras(p3)).toBe("");
    expect(readFileSync(join(p3, "src/a.txt"), "utf8")).toBe("changed by t1\n");
    expect(existsSync(join(p3, "scratch.txt"))).toBe(false);
    expect(existsSync(join(p3, "README.md"))).toBe(false);

    // Without reuse the worktree is removed; nothing of the product is left and the user's tree is untouched.
    await port.release(repo, p3);
    expect(await port.leftovers(repo, PRODUCT)).toEqual([]);
    expect(worktreePaths(repo)).toEqual([repo]);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(git(repo, "rev-parse", "HEAD")).toBe(initial);
  });

  it("removes parked worktrees through leftovers, then prepares afresh", async () => {
    const { repo, initial, port } = await setup();
    const paths = await Promise.all(["t1", "t2"].map((t) => port.attemptPath(repo, PRODUCT, t, 1)));
    await Promise.all(paths.map((p) => port.prepare(repo, p, initial)));
    for (const p of paths) await port.release(repo, p, { reuse: true });
    const parked = await port.leftovers(repo, PRODUCT);
    expect(parked).toHaveLength(2);
    // What the orchestrator does when the product stops: every leftover is released without reuse.
    for (const p of parked) await port.release(repo, p);
    expect(await port.leftovers(repo, PRODUCT)).toEqual([]);
    expect(worktreePaths(repo)).toEqual([repo]);
    // The pool forgot them: the next attempt gets a new worktree.
    const p3 = await port.attemptPath(repo, PRODUCT, "t3", 1);
    await port.prepare(repo, p3, initial);
    expect(git(p3, "rev-parse", "HEAD")).toBe(initial);
    expect(extras(p3)).toBe("");
    await port.release(repo, p3);
    expect(worktreePaths(repo)).toEqual([repo]);
  });

  it("removes the product's own folder of worktrees, and nothing that is not that folder", async () => {
    const { repo, initial, port } = await setup();
    const p1 = await port.attemptPath(repo, PRODUCT, "t1", 1);
    await port.prepare(repo, p1, initial);
    await port.release(repo, p1, { reuse: true }); // parked: still a registered worktree in the folder
    const folder = join(repo, ".git", "acp-orchestrator", "worktrees", PRODUCT);
    writeFileSync(join(folder, "stray.txt"), "left by a crash\n");
    // Names that are not a folder of the product's own, and a folder that is a symbolic link out of .git.
    const outside = join(repo, "..", `${basename(repo)}-outside`);
    mkdirSync(outside);
    writeFileSync(join(outside, "keep.txt"), "keep\n");
    symlinkSync(outside, join(repo, ".git", "acp-orchestrator", "worktrees", "prd_link"));
    for (const id of ["..", ".", "prd/../..", "prd_link"]) await port.removeProductFolder(repo, id);
    expect(existsSync(join(outside, "keep.txt"))).toBe(true);
    expect(existsSync(folder)).toBe(true);

    await port.removeProductFolder(repo, PRODUCT);
    expect(existsSync(folder)).toBe(false);
    expect(worktreePaths(repo)).toEqual([repo]);
    expect(readdirSync(join(repo, ".git", "acp-orchestrator", "worktrees")).sort()).toEqual(["prd_link"]);
    expect(existsSync(join(repo, ".git", "HEAD"))).toBe(true);
    await port.removeProductFolder(repo, PRODUCT); // missing is fine
  });

  it("lists both names of a renamed file among the changed files", async () => {
    const { repo, initial, port } = await setup();
    const p1 = await port.attemptPath(repo, PRODUCT, "t1", 1);
    await port.prepare(repo, p1, initial);
    renameSync(join(p1, "src/a.txt"), join(p1, "src/b.txt"));
    const captured = await port.capture(p1, message("t1"), initial);
    expect(captured.changedFiles).toEqual(["src/a.txt", "src/b.txt"]);
    await port.release(repo, p1, { reuse: true });
    // No change, no commit (also in a reused worktree).
    const p2 = await port.attemptPath(repo, PRODUCT, "t2", 1);
    await port.prepare(repo, p2, initial);
    expect(await port.capture(p2, message("t2"), initial)).toEqual({
      commit: null,
      changedFiles: [],
      changedFilesTotal: 0,
    });
    await port.release(repo, p2);
  });
  it("captures the same worktree again after a re-prepare and more edits (the stage is reset to the base)", async () => {
    // Seen around verify-candidate-reuse: the first capture leaves the worker's edit staged; a re-prepare of the same
    // path keeps the worktree as it is (a repeated prepare after a crash); the worker edits again; the second capture
    // failed in `git read-tree -m` with "Entry 'src/a.txt' not uptodate. Cannot merge." (the staged entry differs
    // from the base and from the file). An unmerged index the worker's own `git merge` left must not stop it either.
    const { repo, initial, port } = await setup();
    const p1 = await port.attemptPath(repo, PRODUCT, "t1", 1);
    await port.prepare(repo, p1, initial);
    writeFileSync(join(p1, "src/a.txt"), "one\n");
    const first = await port.capture(p1, message("t1"), initial);
    expect(git(repo, "show", `${first.commit}:src/a.txt`)).toBe("one");
    await port.prepare(repo, p1, initial);
    writeFileSync(join(p1, "src/a.txt"), "the second version\n");
    const second = await port.capture(p1, message("t1"), initial);
    expect(second.changedFiles).toEqual(["src/a.txt"]);
    expect(git(repo, "show", `${second.commit}:src/a.txt`)).toBe("the second version");
    expect(git(repo, "rev-parse", `${second.commit}^`)).toBe(initial);
    // The worker leaves src/a.txt unmerged in its index (stages 1-3), then edits it once more.
    const blob = git(repo, "rev-parse", `${initial}:src/a.txt`);
    const stages = [1, 2, 3].map((n) => `100644 ${blob} ${n}\tsrc/a.txt\n`).join("");
    execFileSync("git", ["update-index", "--index-info"], {
      cwd: p1,
      input: `0 ${"0".repeat(40)}\tsrc/a.txt\n${stages}`,
    });
    expect(git(p1, "ls-files", "-u")).not.toBe("");
    writeFileSync(join(p1, "src/a.txt"), "resolved by hand\n");
    const third = await port.capture(p1, message("t1"), initial);
    expect(git(repo, "show", `${third.commit}:src/a.txt`)).toBe("resolved by hand");
    await port.release(repo, p1);
    expect(worktreePaths(repo)).toEqual([repo]);
  });

  it("clears index flags and bisect state an earlier attempt's own git commands left, on the same base", async () => {
    const { repo, initial, port } = await setup();
    const p1 = await port.attemptPath(repo, PRODUCT, "t1", 1);
    await port.prepare(repo, p1, initial);
    // A worker with a shell hides an edit from git, marks a file unchanged and starts a bisect, then ends.
    git(p1, "update-index", "--skip-worktree", "src/a.txt");
    git(p1, "update-index", "--assume-unchanged", "README.md");
    writeFileSync(join(p1, "src/a.txt"), "EARLIER ATTEMPT\n");
    writeFileSync(join(p1, "README.md"), "EARLIER ATTEMPT\n");
    git(p1, "bisect", "start");
    await port.release(repo, p1, { reuse: true });
    // The retry (same base) gets the parked worktree: exactly the base, no flag, no bisect.
    const p2 = await port.attemptPath(repo, PRODUCT, "t1", 2);
    await port.prepare(repo, p2, initial);
    expect(readFileSync(join(p2, "src/a.txt"), "utf8")).toBe("a\n");
    expect(readFileSync(join(p2, "README.md"), "utf8")).toBe("# Project\n");
    expect(
      git(p2, "ls-files", "-v")
        .split("\n")
        .every((line) => line.startsWith("H ")),
    ).toBe(true);
    expect(git(p2, "for-each-ref", "refs/bisect/")).toBe("");
    expect(existsSync(join(git(p2, "rev-parse", "--absolute-git-dir"), "BISECT_START"))).toBe(false);
    expect(extras(p2)).toBe("");
    // A later edit of the once-hidden file is captured.
    writeFileSync(join(p2, "src/a.txt"), "changed by the retry\n");
    expect((await port.capture(p2, message("t1"), initial)).changedFiles).toEqual(["src/a.txt"]);
    await port.release(repo, p2);
  });
  it("stages a capture from the prepared index whatever the worker did to its own, and clears bits set after it", async () => {
    const { repo, initial, port } = await setup();
    const p1 = await port.attemptPath(repo, PRODUCT, "t1", 1);
    await port.prepare(repo, p1, initial);
    const gitDir = git(p1, "rev-parse", "--absolute-git-dir");
    // The worker hides its edits with index bits, stages an ignored file by force and unstages a tracked one.
    git(p1, "update-index", "--skip-worktree", "src/a.txt");
    git(p1, "update-index", "--assume-unchanged", "README.md");
    writeFileSync(join(p1, "src/a.txt"), "hidden edit\n");
    writeFileSync(join(p1, "README.md"), "hidden edit\n");
    writeFileSync(join(p1, "debug.log"), "ignored\n");
    git(p1, "add", "-f", "debug.log");
    git(p1, "rm", "-q", "--cached", ".gitignore");
    const first = await port.capture(p1, message("t1"), initial);
    expect([...first.changedFiles].sort()).toEqual(["README.md", "src/a.txt"]);
    expect(git(repo, "show", `${first.commit}:src/a.txt`)).toBe("hidden edit");
    // After the capture something sets a bit again: the next attempt's prepare sees an index it did not leave.
    git(p1, "update-index", "--skip-worktree", "src/a.txt");
    await port.release(repo, p1, { reuse: true });
    const p2 = await port.attemptPath(repo, PRODUCT, "t2", 1);
    await port.prepare(repo, p2, initial);
    expect(git(p2, "rev-parse", "--absolute-git-dir")).toBe(gitDir); // the parked worktree, moved
    expect(
      git(p2, "ls-files", "-v")
        .split("\n")
        .every((line) => line.startsWith("H ")),
    ).toBe(true);
    expect(extras(p2)).toBe("");
    // A prepared copy written by someone else is not used: the capture stages from the cleared worker index instead.
    writeFileSync(join(gitDir, "acp-orchestrator-prepared-index"), "not an index");
    writeFileSync(join(p2, "src/a.txt"), "second\n");
    const second = await port.capture(p2, message("t2"), initial);
    expect(second.changedFiles).toEqual(["src/a.txt"]);
    // A locked worktree is not moved behind git's back: git refuses, so it is removed and the next prepare is fresh.
    git(repo, "worktree", "lock", p2);
    await port.release(repo, p2, { reuse: true });
    expect(existsSync(p2)).toBe(false);
    const p3 = await port.attemptPath(repo, PRODUCT, "t3", 1);
    await port.prepare(repo, p3, initial);
    expect(git(p3, "rev-parse", "--absolute-git-dir")).not.toBe(gitDir);
    expect(extras(p3)).toBe("");
    await port.release(repo, p3);
  });
});
