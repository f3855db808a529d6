/**
 * GitVerifier and the check runner (src/adapters/workspace/verify-worktrees.ts, verify-process.ts; docs/VERIFY.md) on
 * a real git repository with real processes: a command that cannot be started is reported as such (`startFailed`),
 * and the verifier then throws (no verdict on the candidate) instead of returning a red check; the sweep of stale
 * verify folders removes only those whose owner is provably dead.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCheckCommand } from "../../../src/adapters/workspace/verify-process.js";
import { GitVerifier } from "../../../src/adapters/workspace/verify-worktrees.js";
import { sweepStaleVerifyDirs, verifyRoot } from "../../../src/adapters/workspace/verify-owner.js";
import { ProcessLiveness } from "../../../src/adapters/system/process-liveness.js";
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

describe("sweepStaleVerifyDirs: only a dead owner's verify folder goes", () => {
  it("removes a dead owner's folder and its git registration, keeps alive, unknown and unowned ones", async () => {
    const repo = makeRepo({ "README.md": "# app\n" });
    const common = join(repo, ".git");
    const root = verifyRoot(common);
    const me = new ProcessLiveness();
    const { host, scope } = me.identity;
    // A pid that is not running (a finished child's), with a start time: provably dead on this host.
    const gone = spawnSync(process.execPath, ["-e", "0"]).pid as number;
    const owners: Record<string, string | null> = {
      dead: `${host}:${gone}:12345:${scope}`,
      alive: me.ownerId,
      elsewhere: `other-host:${gone}:12345:${scope}`,
      unowned: null,
    };
    for (const [name, owner] of Object.entries(owners)) {
      mkdirSync(join(root, name), { recursive: true });
      git(repo, "worktree", "add", "--detach", "-q", join(root, name, "slot-1"), "HEAD");
      if (owner !== null) writeFileSync(join(root, name, "owner"), `${owner}\n`);
    }
    expect(me.check(owners.dead as string)).toBe("dead");
    expect(await sweepStaleVerifyDirs(repo, common, me)).toEqual(["dead"]);
    expect(existsSync(join(root, "dead"))).toBe(false);
    const kept = worktreePaths(repo).filter((p) => p.startsWith(root));
    expect(kept.map((p) => p.slice(root.length + 1)).sort()).toEqual([
      "alive/slot-1",
      "elsewhere/slot-1",
      "unowned/slot-1",
    ]);
  });
});
