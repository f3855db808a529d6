/**
 * GitWorkspaceProbe reads the commit a checkout's HEAD points at from the repository files (issue 4, drift detection),
 * checked against `git rev-parse HEAD` on real repositories in temp directories: loose and packed refs, detached HEAD,
 * subdirectories, worktrees, and the cases that answer `null`.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitWorkspaceProbe } from "../../../src/adapters/workspace/git-probe.js";

const probe = new GitWorkspaceProbe();

function git(cwd: string, ...args: string[]): string {
  return execFileSync(
    "git",
    ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", ...args],
    {
      cwd,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    },
  ).trim();
}

function repo(): string {
  const dir = mkdtempSync(join(tmpdir(), "acp-orch-git-"));
  git(dir, "init", "-q");
  return dir;
}

function commit(dir: string, message: string): string {
  writeFileSync(join(dir, `${message}.txt`), message);
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", message);
  return git(dir, "rev-parse", "HEAD");
}

describe("GitWorkspaceProbe.gitHead", () => {
  it("answers null outside a git checkout", async () => {
    expect(await probe.gitHead(mkdtempSync(join(tmpdir(), "acp-orch-nogit-")))).toBeNull();
  });

  it("answers null for a repository without commits", async () => {
    expect(await probe.gitHead(repo())).toBeNull();
  });

  it("reads a branch's commit from a loose ref, also from a subdirectory, and follows new commits", async () => {
    const dir = repo();
    const first = commit(dir, "one");
    mkdirSync(join(dir, "src", "deep"), { recursive: true });
    expect(await probe.gitHead(dir)).toBe(first);
    expect(await probe.gitHead(join(dir, "src", "deep"))).toBe(first);
    const second = commit(dir, "two");
    expect(await probe.gitHead(dir)).toBe(second);
  });

  it("reads a packed ref and a detached HEAD", async () => {
    const dir = repo();
    const first = commit(dir, "one");
    const second = commit(dir, "two");
    git(dir, "pack-refs", "--all");
    expect(await probe.gitHead(dir)).toBe(second);
    git(dir, "checkout", "-q", "--detach", first);
    expect(await probe.gitHead(dir)).toBe(first);
  });

  it("reads a worktree's own HEAD through its .git file", async () => {
    const dir = repo();
    const first = commit(dir, "one");
    const tree = join(mkdtempSync(join(tmpdir(), "acp-orch-wt-")), "wt");
    git(dir, "worktree", "add", "-q", "-b", "side", tree);
    const side = commit(tree, "side");
    expect(await probe.gitHead(tree)).toBe(side);
    expect(await probe.gitHead(dir)).toBe(first);
  });
});
