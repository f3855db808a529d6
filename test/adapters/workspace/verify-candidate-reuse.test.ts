/**
 * Guarantee 17's cost (issue 30 bench, figure 9): the candidate `preVerify` captured and merged is handed to the
 * integration step (`VerificationGate.takeCandidate`), so a verified attempt's worktree is captured once and merged
 * once per head, not again at integration, and the verdict there needs no git; the tree ids come from the capture
 * and the merge that wrote them (no tree read at all). Real git repository, the server's
 * `GitWorkspace` and `GitVerifier`; the port is wrapped (composition) only to count the calls.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitWorkspace } from "../../../src/adapters/workspace/git-workspace.js";
import { GitVerifier } from "../../../src/adapters/workspace/verify-worktrees.js";
import type { WorkspacePort } from "../../../src/core/ports.js";
import { VerificationGate } from "../../../src/core/workspace/verification-gate.js";
import { applyVerified, type VerificationState } from "../../../src/core/workspace/verification.js";
import { git, makeRepo } from "../../support/git-repo.js";
import { RecordingLogger, RecordingNotifier } from "../../support/fakes.js";

describe("VerificationGate: the verified candidate is reused at integration", () => {
  it("captures once, merges again only on a moved head, and reads no tree id", async () => {
    const repo = makeRepo({ "README.md": "# app\n" });
    const base = git(repo, "rev-parse", "HEAD");
    const inner = new GitWorkspace();
    const calls = { capture: 0, merge: 0 };
    const port = {
      capture: (...a: Parameters<WorkspacePort["capture"]>) => (calls.capture++, inner.capture(...a)),
      merge: (...a: Parameters<WorkspacePort["merge"]>) => (calls.merge++, inner.merge(...a)),
    } as unknown as WorkspacePort;
    const verifier = new GitVerifier();
    let treeReads = 0;
    const countingVerifier = Object.assign(Object.create(verifier) as GitVerifier, {
      treeOf: (cwd: string, commit: string) => (treeReads++, verifier.treeOf(cwd, commit)),
    });
    const state: { verification: VerificationState } = {
      verification: { config: { commands: [{ name: "readme", run: "test -f README.md" }] }, results: [] },
    };
    const logger = new RecordingLogger();
    const gate = new VerificationGate({
      productId: "prd_reuse",
      cwd: () => repo,
      state: () => state,
      verifier: countingVerifier,
      notifier: new RecordingNotifier(),
      logger,
      now: () => new Date().toISOString(),
      record: async (event) => applyVerified(state, { ...event, v: 1, at: new Date().toISOString() }),
    });
    const path = await inner.attemptPath(repo, "prd_reuse", "t1", 1);
    await inner.prepare(repo, path, base);
    writeFileSync(join(path, "a.txt"), "a\n");
    const request = {
      workspaces: port,
      worktree: path,
      base,
      head: base,
      captureMessage: "t1\n",
      mergeMessage: "merge t1\n",
      taskId: "t1",
      attempt: 1,
      launch: "launch-1",
      signal: new AbortController().signal,
    };
    await gate.preVerify(request);
    expect(state.verification.results.map((r) => r.ok)).toEqual([true]);
    expect(calls).toEqual({ capture: 1, merge: 1 });
    const reads = treeReads;

    // The head moved meanwhile (another task integrated): verified again on the new head, the capture reused.
    writeFileSync(join(repo, "b.txt"), "b\n");
    git(repo, "add", "b.txt");
    git(repo, "commit", "-q", "-m", "other");
    const moved = git(repo, "rev-parse", "HEAD");
    git(repo, "reset", "-q", "--hard", base);
    await gate.preVerify({ ...request, head: moved });
    expect(calls).toEqual({ capture: 1, merge: 2 });
    expect(state.verification.results).toHaveLength(2);

    // Integration takes the candidate prepared on the head it merges onto: no capture, no merge, no tree read.
    const prepared = gate.takeCandidate("t1", 1, path, base, "launch-1");
    expect(prepared?.merged?.head).toBe(moved);
    const commit = prepared?.merged?.outcome.commit as string;
    const before = treeReads;
    expect((await gate.verdict(commit)).verdict.state).toBe("green");
    expect(treeReads).toBe(before);
    // No tree id was read at all: the capture's (fast-forward) and the merge's (moved head) came with them.
    expect(reads).toBe(0);
    expect(treeReads).toBe(0);
    // Taken once: a second integration of the same attempt (after a restart, say) captures afresh.
    expect(gate.takeCandidate("t1", 1, path, base, "launch-1")).toBeUndefined();
    // Another base (a retry prepared elsewhere) never gets it.
    await gate.preVerify({ ...request, attempt: 2 });
    expect(gate.takeCandidate("t1", 2, path, moved, "launch-1")).toBeUndefined();
    // The same attempt number in the same worktree on the same base, launched again (a replay or rollback reset the
    // task while its first launch was being verified; found by review): the earlier launch's capture, left in the gate,
    // is never reused for the new launch's work (nor then handed to its integration).
    await gate.preVerify({ ...request, launch: "launch-1" });
    writeFileSync(join(path, "a.txt"), "the second launch's work\n");
    const captures = calls.capture;
    await gate.preVerify({ ...request, launch: "launch-2" });
    // Captured afresh (it used to take launch-1's capture, whose base is the same, and integrate that).
    expect(calls.capture).toBe(captures + 1);
    await gate.releaseWorktrees(true);
    await inner.release(repo, path);
  }, 60_000);
});
