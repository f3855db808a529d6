/**
 * A worker's own git commands and files against the index the orchestrator captures from (guarantee 16; issue 34: the
 * prepared index copy, the skipped bit clearing of a reused worktree and the move of a parked worktree without git).
 * Whatever the worker did with `git update-index`, `git config`, `git sparse-checkout`, `touch -d` or symlinks in its
 * admin folder, a capture holds every change it made and a reused worktree holds exactly the base's tree, and nothing
 * outside the worktree and its admin folder is written.
 */
import { execFileSync } from "node:child_process";
import { lstatSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitWorkspace } from "../../../src/adapters/workspace/git-workspace.js";
import { PREPARED_INDEX } from "../../../src/adapters/workspace/prepared-index.js";
import { attemptMessage, integrationRef } from "../../../src/core/workspace/integration.js";
import { tempDir } from "../../support/server-process.js";
import { git, makeRepo } from "../../support/git-repo.js";

const PRODUCT = "prd_hostile";
const message = (taskId: string) => attemptMessage(PRODUCT, { taskId, title: taskId, description: "" }, 1);

/** Everything git sees in a worktree beyond its HEAD (empty = exactly HEAD). */
const extras = (path: string) => git(path, "status", "--porcelain", "--ignored", "--untracked-files=all");
/** True when no index entry of the worktree has a bit set (`ls-files -v` tags every entry `H`). */
const noBits = (path: string) =>
  git(path, "ls-files", "-v")
    .split("\n")
    .every((line) => line.startsWith("H "));

async function setup() {
  const repo = makeRepo({ "README.md": "# Project\n", "src/a.txt": "a\n", "docs/guide.md": "guide\n" });
  const initial = git(repo, "rev-parse", "HEAD");
  const port = new GitWorkspace();
  expect(await port.moveRef(repo, integrationRef(PRODUCT), initial, null)).toBe(true);
  const attempt = async (taskId: string, base = initial) => {
    const path = await port.attemptPath(repo, PRODUCT, taskId, 1);
    await port.prepare(repo, path, base);
    return path;
  };
  /** Captures `path` as task `taskId` from the initial commit: `file` alone changed, committed with `content`. */
  const capturesOnly = async (path: string, taskId: string, file: string, content: string) => {
    const captured = await port.capture(path, message(taskId), initial);
    expect(captured.changedFiles).toEqual([file]);
    expect(git(repo, "show", `${captured.commit}:${file}`)).toBe(content);
  };
  return { repo, initial, port, attempt, capturesOnly };
}

/** Resolves once the wall clock is in a later second than `ms` (plus a margin for the file system's coarse clock). */
async function nextSecondAfter(ms: number): Promise<void> {
  const due = (Math.floor(ms / 1000) + 1) * 1000 + 50;
  while (Date.now() < due) await new Promise((done) => setTimeout(done, due - Date.now()));
}

describe("GitWorkspace against a hostile worker's index", () => {
  it("clears a skip-worktree bit set together with assume-unchanged (ls-files -v tags it 's')", async () => {
    const { repo, initial, port, attempt, capturesOnly } = await setup();
    const p1 = await attempt("t1");
    // A re-prepare keeps the worktree as it is (no prepared copy): the capture stages from the worker's index.
    await port.prepare(repo, p1, initial);
    git(p1, "update-index", "--skip-worktree", "src/a.txt");
    git(p1, "update-index", "--assume-unchanged", "src/a.txt");
    expect(git(p1, "ls-files", "-v", "src/a.txt")).toBe("s src/a.txt");
    writeFileSync(join(p1, "src/a.txt"), "hidden by both bits\n");
    await capturesOnly(p1, "t1", "src/a.txt", "hidden by both bits");
    // After the capture both bits again, and an edit: the reused worktree must not keep it.
    git(p1, "update-index", "--skip-worktree", "README.md");
    git(p1, "update-index", "--assume-unchanged", "README.md");
    writeFileSync(join(p1, "README.md"), "stale\n");
    await port.release(repo, p1, { reuse: true });
    const p2 = await attempt("t2");
    expect(readFileSync(join(p2, "README.md"), "utf8")).toBe("# Project\n");
    expect(noBits(p2)).toBe(true);
    expect(extras(p2)).toBe("");
    await port.release(repo, p2);
  });

  it("sees every edit although a worker set core.ignoreStat (git would mark each file it writes assume-unchanged)", async () => {
    const { repo, initial, port, attempt } = await setup();
    const p1 = await attempt("t1");
    git(p1, "config", "core.ignoreStat", "true"); // the repository's config: every later attempt runs under it
    writeFileSync(join(p1, "src/a.txt"), "one\n");
    const first = await port.capture(p1, message("t1"), initial);
    expect(first.changedFiles).toEqual(["src/a.txt"]);
    await port.release(repo, p1, { reuse: true });
    // The next task starts from the captured commit in the reused worktree, then a fresh one.
    const p2 = await attempt("t2", first.commit ?? "");
    expect(noBits(p2)).toBe(true);
    writeFileSync(join(p2, "src/a.txt"), "two\n");
    writeFileSync(join(p2, "README.md"), "# Two\n");
    const second = await port.capture(p2, message("t2"), first.commit ?? "");
    expect(second.changedFiles).toEqual(["README.md", "src/a.txt"]);
    const p3 = await attempt("t3");
    writeFileSync(join(p3, "docs/guide.md"), "three\n");
    expect((await port.capture(p3, message("t3"), initial)).changedFiles).toEqual(["docs/guide.md"]);
    await port.release(repo, p2);
    await port.release(repo, p3);
  });

  it("gives a reused worktree the whole tree although the earlier worker made it sparse, and captures edits anywhere", async () => {
    const { repo, port, attempt, capturesOnly } = await setup();
    const p1 = await attempt("t1");
    const gitDir = git(p1, "rev-parse", "--absolute-git-dir");
    // Cone mode with a sparse index: docs/ leaves the worktree; the settings go to the worktree's own config.
    git(p1, "sparse-checkout", "set", "--sparse-index", "src");
    expect(() => statSync(join(p1, "docs/guide.md"))).toThrow();
    await port.release(repo, p1, { reuse: true });
    const p2 = await attempt("t2");
    expect(git(p2, "rev-parse", "--absolute-git-dir")).toBe(gitDir); // the parked worktree, moved
    expect(readFileSync(join(p2, "docs/guide.md"), "utf8")).toBe("guide\n");
    writeFileSync(join(p2, "docs/guide.md"), "edited outside the cone\n");
    await capturesOnly(p2, "t2", "docs/guide.md", "edited outside the cone");
    await port.release(repo, p2);
  });

  it("captures a same-size rewrite whose mtime was put back, with or without the worker's own stat settings", async () => {
    const { repo, initial, port, attempt, capturesOnly } = await setup();
    const file = (p: string) => join(p, "src/a.txt");
    /** Rewrites src/a.txt with content of the same size and sets its atime and mtime back (`touch -r`, to the ns). */
    const sneak = (p: string, content: string) => {
      const reference = join(p, "..", "times");
      const before = statSync(file(p), { bigint: true });
      execFileSync("touch", ["-r", file(p), reference]);
      writeFileSync(file(p), content);
      execFileSync("touch", ["-r", reference, file(p)]);
      const after = statSync(file(p), { bigint: true });
      expect([after.mtimeNs, after.size]).toEqual([before.mtimeNs, before.size]);
    };
    // Within the second the worktree was prepared (racy git: the prepared index is no older than the file).
    const p1 = await attempt("t1");
    sneak(p1, "b\n");
    expect((await port.capture(p1, message("t1"), initial)).changedFiles).toEqual(["src/a.txt"]);
    await port.release(repo, p1, { reuse: true });
    // A reused worktree keeps files that did not change, so src/a.txt is older than the index the next prepare
    // writes; the worker also tells git to ignore ctime and all but mtime seconds and size.
    const p2 = await attempt("t2");
    await nextSecondAfter(statSync(file(p2)).mtimeMs);
    await port.release(repo, p2, { reuse: true });
    const p3 = await attempt("t3");
    expect(
      Math.floor(statSync(join(git(p3, "rev-parse", "--absolute-git-dir"), "index")).mtimeMs / 1000),
    ).toBeGreaterThan(Math.floor(statSync(file(p3)).mtimeMs / 1000));
    git(p3, "config", "core.trustctime", "false");
    git(p3, "config", "core.checkStat", "minimal");
    sneak(p3, "c\n");
    await capturesOnly(p3, "t3", "src/a.txt", "c");
    await port.release(repo, p3);
  });

  it("writes nothing through symlinks a worker planted in its admin folder", async () => {
    const { repo, initial, port, attempt } = await setup();
    const outside = tempDir("acp-orch-victim-");
    const victim = (name: string) => {
      const path = join(outside, name);
      writeFileSync(path, "the user's file\n");
      return path;
    };
    const p1 = await attempt("t1");
    const gitDir = git(p1, "rev-parse", "--absolute-git-dir");
    // The moved worktree's new gitdir was once written at a name made of the server's pid alone.
    const asideVictim = victim("aside");
    symlinkSync(asideVictim, join(gitDir, `gitdir.acp-orchestrator-${process.pid}`));
    writeFileSync(join(p1, "src/a.txt"), "one\n");
    expect((await port.capture(p1, message("t1"), initial)).changedFiles).toEqual(["src/a.txt"]);
    // After the capture (the prepared copy became the index) the copy's name is free: a symlink goes there.
    const copyVictim = victim("copy");
    symlinkSync(copyVictim, join(gitDir, PREPARED_INDEX));
    await port.release(repo, p1, { reuse: true });
    const p2 = await attempt("t2");
    expect(git(p2, "rev-parse", "--absolute-git-dir")).toBe(gitDir); // moved without git, then prepared
    expect(readFileSync(asideVictim, "utf8")).toBe("the user's file\n");
    expect(readFileSync(copyVictim, "utf8")).toBe("the user's file\n");
    expect(lstatSync(join(gitDir, PREPARED_INDEX)).isFile()).toBe(true);
    expect(lstatSync(join(gitDir, "gitdir")).isFile()).toBe(true);
    expect(readFileSync(join(gitDir, "gitdir"), "utf8")).toBe(`${join(p2, ".git")}\n`);
    writeFileSync(join(p2, "README.md"), "# Two\n");
    expect((await port.capture(p2, message("t2"), initial)).changedFiles).toEqual(["README.md"]);
    await port.release(repo, p2);
  });
});
