/**
 * git-cli on a real repository (issue 26, case 3): input written to a git that exits before reading it fails that one
 * call with a clear error and never crashes the process (an unhandled `write EPIPE` took the whole server down), and
 * every call runs with fsmonitor and hooks off whatever the repository's configuration says.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git as runCli, GitError, runGit } from "../../../src/adapters/workspace/git-cli.js";
import { git, makeRepo } from "../../support/git-repo.js";
import { tempDir } from "../../support/server-process.js";

describe("git-cli", () => {
  it("fails one call, not the process, when git exits before reading its stdin (EPIPE)", async () => {
    const repo = makeRepo();
    const input = "x".repeat(16 * 1024 * 1024); // far more than a pipe holds: the write must meet a closed pipe
    for (let i = 0; i < 5; i++) {
      const r = await runGit(repo, ["rev-parse", "HEAD"], input);
      expect(r.code).toBeGreaterThanOrEqual(128);
      expect(r.stderr).toMatch(/git exited before reading its input \(EPIPE\)/);
    }
    await expect(runCli(repo, ["rev-parse", "HEAD"], input)).rejects.toThrow(GitError);
    await expect(runCli(repo, ["rev-parse", "HEAD"], input)).rejects.toThrow(/git rev-parse HEAD failed \(exit 128\)/);
    // The process is fine and git still answers.
    expect((await runGit(repo, ["rev-parse", "HEAD"])).stdout.trim()).toBe(git(repo, "rev-parse", "HEAD"));
  });

  it("runs no fsmonitor and no hook the repository configures, and ignores GIT_DIR of its own environment", async () => {
    const repo = makeRepo();
    const marker = join(tempDir("acp-orch-cli-"), "ran");
    git(repo, "config", "core.fsmonitor", `touch ${marker}; true`);
    git(repo, "config", "core.hooksPath", join(repo, "hooks"));
    const elsewhere = makeRepo({ "other.txt": "other\n" });
    const saved = process.env.GIT_DIR;
    process.env.GIT_DIR = join(elsewhere, ".git");
    try {
      expect((await runGit(repo, ["status", "--porcelain"])).code).toBe(0);
      expect((await runGit(repo, ["ls-files"])).stdout.trim()).toBe("README.md");
    } finally {
      if (saved === undefined) delete process.env.GIT_DIR;
      else process.env.GIT_DIR = saved;
    }
    expect(existsSync(marker)).toBe(false);
  });
});
