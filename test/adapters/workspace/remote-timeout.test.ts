/**
 * The deadline of git calls that talk to a workspace remote (issue 33), against a real `git://` server
 * (test/support/git-daemon.ts) that can turn into a remote that accepts connections and never answers: a clone, a
 * fetch and a push each throw `RemoteWorkspaceError` naming the remote within the deadline (plus slack for a loaded
 * machine), with `timedOut`; the client git is killed (the hung connection closes, no git process for the URL is
 * left) and no ref moves on either side; once the remote answers again, the same push goes through.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterEach, expect, it } from "vitest";
import { RemoteWorkspace, RemoteWorkspaceError } from "../../../src/adapters/workspace/remote-mirror.js";
import { integrationRef } from "../../../src/core/workspace/integration.js";
import { makeBareRemote } from "../../support/git-remote.js";
import { startGitDaemon, type GitDaemon } from "../../support/git-daemon.js";
import { git } from "../../support/git-repo.js";
import { eventually } from "../../support/postgres.js";
import { tempDir } from "../../support/server-process.js";

const TIMEOUT_MS = 1_500;
const BRANCH = integrationRef("prd_timeout");
let daemon: GitDaemon | undefined;
afterEach(async () => daemon?.close());

/** Command lines of live processes that mention `text`. */
function processesWith(text: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
      if (cmd.includes(text) && !cmd.includes("vitest")) found.push(`${pid}: ${cmd}`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** Runs `call`, which must fail on the deadline; returns the error and how long it took. */
async function timesOut(call: () => Promise<unknown>): Promise<{ error: RemoteWorkspaceError; ms: number }> {
  const started = Date.now();
  const error = await call().then(
    () => new Error("it did not fail"),
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(RemoteWorkspaceError);
  return { error: error as RemoteWorkspaceError, ms: Date.now() - started };
}

it("a remote that never answers fails a clone, a fetch and a push within the deadline, git killed, no ref moved", async () => {
  const remote = makeBareRemote();
  daemon = await startGitDaemon(dirname(remote.dir));
  const url = daemon.url("remote.git");
  const port = new RemoteWorkspace(tempDir("acp-orch-root-"), undefined, { timeoutMs: TIMEOUT_MS });
  const info = await port.inspect(url);
  expect(info).toMatchObject({ kind: "git", head: remote.read("refs/heads/main") });
  const base = (info as { head: string }).head;
  expect(await port.moveRef(url, BRANCH, base, null)).toBe(true);
  expect(remote.read(BRANCH)).toBe(base);
  const mirror = port.mirrorPath(url);
  const next = git(mirror, "commit-tree", "-p", base, "-m", "next", `${base}^{tree}`);

  daemon.hang(true);
  const fetch = await timesOut(() => port.refresh(url));
  const push = await timesOut(() => port.moveRef(url, BRANCH, next, base));
  for (const { error, ms } of [fetch, push]) {
    expect(error.timedOut).toBe(true);
    expect(error.message).toContain(`The git remote ${url}`);
    expect(error.message).toContain(`no answer within ${TIMEOUT_MS} ms`);
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(ms).toBeLessThan(TIMEOUT_MS + 10_000);
  }
  expect(push.error.message).toContain("git push was stopped");
  // A clone by another server (a first use) fails the same way: inspect answers none, naming the remote.
  const other = new RemoteWorkspace(tempDir("acp-orch-root-b-"), undefined, { timeoutMs: TIMEOUT_MS });
  const started = Date.now();
  const none = await other.inspect(url);
  expect(none).toMatchObject({ kind: "none" });
  expect((none as { reason: string }).reason).toContain(`The git remote ${url} could not be cloned: no answer within`);
  expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 10_000);
  // Every hung connection was closed by its client's death; no git for the URL is left running.
  expect(daemon.hung()).toBeGreaterThanOrEqual(3);
  await eventually(async () => daemon?.held() === 0, 10_000, "the hung connections to close");
  expect(processesWith(url)).toEqual([]);
  expect([remote.read(BRANCH), await port.readRef(url, BRANCH)]).toEqual([base, base]);

  daemon.hang(false);
  expect(await port.moveRef(url, BRANCH, next, base)).toBe(true);
  expect([remote.read(BRANCH), await port.readRef(url, BRANCH)]).toEqual([next, next]);
}, 60_000);
