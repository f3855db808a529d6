/**
 * GitVerifier and the check runner (src/adapters/workspace/verify-worktrees.ts, verify-process.ts; docs/VERIFY.md) on
 * a real git repository with real processes: a command that cannot be started is reported as such (`startFailed`),
 * and the verifier then throws (no verdict on the candidate) instead of returning a red check.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCheckCommand } from "../../../src/adapters/workspace/verify-process.js";
import { GitVerifier } from "../../../src/adapters/workspace/verify-worktrees.js";
import { git, makeRepo, worktreePaths } from "../../support/git-repo.js";
import { tempDir } from "../../support/server-process.js";

describe("GitVerifier: a check that cannot be started", () => {
  it("is startFailed in the runner, not an exit code of the command", async () => {
    const missing = join(tempDir("acp-orch-verify-cwd-"), "gone");
    const outcome = await runCheckCommand({
      run: "true",
      cwd: missing,
      env: {},
      timeoutMs: 60_000,
      signal: new AbortController().signal,
    });
    expect(outcome).toMatchObject({ ok: false, startFailed: true, aborted: false, timedOut: false });
    expect(outcome.outputTail).toContain("could not be started");
    const ran = await runCheckCommand({
      run: "exit 3",
      cwd: tempDir(),
      env: {},
      timeoutMs: 60_000,
      signal: new AbortController().signal,
    });
    expect(ran).toMatchObject({ ok: false, exitCode: 3, startFailed: false });
  });

  it("makes the verifier throw (no red verdict recorded for the candidate)", async () => {
    const repo = makeRepo({ "README.md": "# app\n" });
    const head = git(repo, "rev-parse", "HEAD");
    const verifier = new GitVerifier();
    // The first command removes the verify worktree it runs in, so the second cannot be started there.
    const run = verifier.run({
      cwd: repo,
      productId: "prd_start_fail",
      commit: head,
      commands: [
        { name: "vanish", run: 'rm -rf "$PWD"', timeoutMs: 60_000 },
        { name: "next", run: "true", timeoutMs: 60_000 },
      ],
      env: {},
      parallel: 1,
      signal: new AbortController().signal,
    });
    await expect(run).rejects.toThrow(/The check "next" could not be started/);
    await verifier.release(repo, "prd_start_fail");
    expect(worktreePaths(repo)).toEqual([repo]);
    expect(existsSync(join(repo, ".git", "acp-orchestrator", "verify", "prd_start_fail"))).toBe(false);
  });
});
