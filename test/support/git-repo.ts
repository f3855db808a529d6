/**
 * Real git repositories for tests (issue 12): made with the git CLI in a fresh temp folder, with a fixed identity so
 * they work on machines without a global git config.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { tempDir } from "./server-process.js";

const IDENTITY = {
  GIT_AUTHOR_NAME: "Test User",
  GIT_AUTHOR_EMAIL: "test@example.com",
  GIT_COMMITTER_NAME: "Test User",
  GIT_COMMITTER_EMAIL: "test@example.com",
};

/** Runs git in `cwd` and returns its trimmed stdout; throws on a non-zero exit. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, ...IDENTITY } }).trim();
}

/**
 * A new repository on branch `main` with the given files committed (none: no commit at all). Returns its path.
 */
export function makeRepo(files: Record<string, string> = { "README.md": "# Project\n" }): string {
  const dir = tempDir("acp-orch-repo-");
  git(dir, "init", "-q", "-b", "main");
  const names = Object.keys(files);
  if (names.length === 0) return dir;
  writeRepoFiles(dir, files);
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", "initial");
  return dir;
}

/** Writes files (relative paths) under `dir`, creating folders. */
export function writeRepoFiles(dir: string, files: Record<string, string>): void {
  for (const [name, content] of Object.entries(files)) {
    const path = join(dir, name);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  }
}

/** The paths of every worktree git knows for the repository at `dir` (the main one first). */
export function worktreePaths(dir: string): string[] {
  return git(dir, "worktree", "list", "--porcelain")
    .split("\n")
    .filter((l) => l.startsWith("worktree "))
    .map((l) => l.slice("worktree ".length));
}

/** Every ref name under `prefix` (e.g. `refs/acp-orchestrator/`). */
export function refsUnder(dir: string, prefix: string): string[] {
  const out = git(dir, "for-each-ref", "--format=%(refname)", prefix);
  return out ? out.split("\n") : [];
}
