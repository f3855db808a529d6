/**
 * RemoteWorkspace on real repositories (issue 33): a bare repository is the remote, two adapters with their own
 * workspace roots are two servers. Worktrees come from the mirror; an integration is a push with an expected old
 * value, acknowledged before the mirror's ref moves; a push against a moved remote ref answers false (CAS failure);
 * a hook's refusal and an unreachable remote throw naming the remote and leave every ref where it was; a second server
 * sees the first one's pushes after a refresh and cannot push a commit only the first one had.
 */
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { remoteUrlProblem, WorkspaceRemote } from "../../../protocol/workspace-remote.js";
import { RemoteWorkspace, RemoteWorkspaceError } from "../../../src/adapters/workspace/remote-mirror.js";
import { attemptMessage, attemptRef, integrationRef } from "../../../src/core/workspace/integration.js";
import { makeBareRemote } from "../../support/git-remote.js";
import { git } from "../../support/git-repo.js";
import { tempDir } from "../../support/server-process.js";

const PRODUCT = "prd_remote";
const BRANCH = integrationRef(PRODUCT);
const message = (taskId: string) => attemptMessage(PRODUCT, { taskId, title: taskId, description: "" }, 1);

/** Prepares an attempt worktree at `base`, writes `file`, captures: the attempt's commit. */
async function attempt(port: RemoteWorkspace, url: string, taskId: string, base: string, file: string) {
  const path = await port.attemptPath(url, PRODUCT, taskId, 1);
  await port.prepare(url, path, base);
  writeFileSync(join(path, file), `${taskId}\n`);
  const captured = await port.capture(path, message(taskId), base);
  await port.release(url, path);
  return captured.commit as string;
}

describe("RemoteWorkspace", () => {
  it("integrates by pushing with a lease; a moved remote ref is a CAS failure, a refusal or an outage throws", async () => {
    const remote = makeBareRemote();
    const url = remote.dir;
    const port = new RemoteWorkspace(tempDir("acp-orch-root-a-"));
    const info = await port.inspect(url);
    expect(info).toEqual({ kind: "git", head: remote.read("refs/heads/main"), branch: "main" });
    const base = (info as { head: string }).head;
    expect(await port.moveRef(url, BRANCH, base, null)).toBe(true);
    expect(remote.read(BRANCH)).toBe(base);

    const c1 = await attempt(port, url, "t1", base, "one.txt");
    expect(await port.moveRef(url, attemptRef(PRODUCT, "t1", 1), c1, null)).toBe(true);
    expect(await port.moveRef(url, BRANCH, c1, base)).toBe(true);
    expect([remote.read(BRANCH), await port.readRef(url, BRANCH)]).toEqual([c1, c1]);
    // Repeated after a crash: already there counts as moved.
    expect(await port.moveRef(url, BRANCH, c1, base)).toBe(true);

    // Someone else moves the remote's branch: the lease refuses, the mirror learns the remote's head.
    const c2 = await attempt(port, url, "t2", c1, "two.txt");
    git(remote.dir, "update-ref", BRANCH, base, c1);
    expect(await port.moveRef(url, BRANCH, c2, c1)).toBe(false);
    expect([remote.read(BRANCH), await port.readRef(url, BRANCH)]).toEqual([base, base]);
    git(remote.dir, "update-ref", BRANCH, c1, base);
    await port.refresh(url);

    // A hook refuses: thrown, naming the remote; nothing moved on either side.
    remote.refuse(true);
    const refused = await port.moveRef(url, BRANCH, c2, c1).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(RemoteWorkspaceError);
    expect((refused as Error).message).toContain(`The git remote ${url} did not accept the update`);
    expect([remote.read(BRANCH), await port.readRef(url, BRANCH)]).toEqual([c1, c1]);
    remote.refuse(false);

    // Unreachable: thrown, naming the remote; back again, the same move goes through.
    renameSync(remote.dir, `${remote.dir}.away`);
    const down = await port.moveRef(url, BRANCH, c2, c1).catch((err: unknown) => err);
    expect((down as Error).message).toContain(`The git remote ${url}`);
    expect(await port.readRef(url, BRANCH)).toBe(c1);
    renameSync(`${remote.dir}.away`, remote.dir);
    expect(await port.moveRef(url, BRANCH, c2, c1)).toBe(true);
    expect(remote.read(BRANCH)).toBe(c2);
    expect(remote.backwardMoves("refs/heads/acp/")).toEqual([
      `${BRANCH}: ${c1} -> ${base} is not a fast-forward`, // the test's own move above, seen by the hook
    ]);
  }, 60_000);

  it("a second server sees the first one's pushes after a refresh and cannot push what only the first one had", async () => {
    const remote = makeBareRemote();
    const url = remote.dir;
    const a = new RemoteWorkspace(tempDir("acp-orch-root-a-"));
    const b = new RemoteWorkspace(tempDir("acp-orch-root-b-"));
    const base = ((await a.inspect(url)) as { head: string }).head;
    expect(a.mirrorPath(url)).not.toBe(b.mirrorPath(url));
    expect(await a.moveRef(url, BRANCH, base, null)).toBe(true);
    expect(await b.readRef(url, BRANCH)).toBe(base);
    const pushed = await attempt(a, url, "t1", base, "one.txt");
    expect(await a.moveRef(url, BRANCH, pushed, base)).toBe(true);
    const localOnly = await attempt(a, url, "t2", pushed, "two.txt");
    expect(await b.readRef(url, BRANCH)).toBe(base);
    await b.refresh(url);
    expect(await b.readRef(url, BRANCH)).toBe(pushed);
    // The dead server's unpushed commit does not exist for the survivor: not moved, nothing thrown.
    expect(await b.moveRef(url, BRANCH, localOnly, pushed)).toBe(false);
    // The survivor's worktree comes from its own mirror, at the pushed head.
    const path = await b.attemptPath(url, PRODUCT, "t2", 2);
    expect(path.startsWith(b.mirrorPath(url))).toBe(true);
    await b.prepare(url, path, pushed);
    expect(git(path, "rev-parse", "HEAD")).toBe(pushed);
    await b.release(url, path);
    expect(await b.leftovers(url, PRODUCT)).toEqual([]);
  }, 60_000);

  it("moveRefs pushes a task's attempt ref and the branch once; each lease decides for its own ref", async () => {
    const remote = makeBareRemote();
    const url = remote.dir;
    const port = new RemoteWorkspace(tempDir("acp-orch-root-"));
    const base = ((await port.inspect(url)) as { head: string }).head;
    expect(await port.moveRef(url, BRANCH, base, null)).toBe(true);
    const c1 = await attempt(port, url, "t1", base, "one.txt");
    const keep1 = attemptRef(PRODUCT, "t1", 1);
    const before = remote.pushes();
    const both = [
      { ref: keep1, to: c1, expected: null },
      { ref: BRANCH, to: c1, expected: base },
    ];
    expect(await port.moveRefs(url, both)).toEqual([true, true]);
    expect(remote.pushes() - before).toBe(1);
    expect([remote.read(keep1), remote.read(BRANCH), await port.readRef(url, BRANCH)]).toEqual([c1, c1, c1]);
    // Again (a resume after a crash): both already there, so nothing reaches the remote's hooks.
    expect(await port.moveRefs(url, both)).toEqual([true, true]);
    expect(remote.pushes() - before).toBe(1);

    // The branch moved on the remote: its lease fails, the attempt ref still goes, in the same single push.
    const c2 = await attempt(port, url, "t2", c1, "two.txt");
    const keep2 = attemptRef(PRODUCT, "t2", 1);
    git(remote.dir, "update-ref", BRANCH, base, c1);
    const answers = await port.moveRefs(url, [
      { ref: keep2, to: c2, expected: null },
      { ref: BRANCH, to: c2, expected: c1 },
    ]);
    expect(answers).toEqual([true, false]);
    expect(remote.pushes() - before).toBe(2);
    expect([remote.read(keep2), await port.readRef(url, keep2)]).toEqual([c2, c2]);
    expect([remote.read(BRANCH), await port.readRef(url, BRANCH)]).toEqual([base, base]);

    // A hook refuses: thrown naming the remote, and no mirror ref moved.
    remote.refuse(true);
    const c3 = await attempt(port, url, "t3", base, "three.txt");
    const keep3 = attemptRef(PRODUCT, "t3", 1);
    const refused = await port
      .moveRefs(url, [
        { ref: keep3, to: c3, expected: null },
        { ref: BRANCH, to: c3, expected: base },
      ])
      .catch((err: unknown) => err);
    expect((refused as Error).message).toContain(`The git remote ${url} did not accept the update`);
    expect([await port.readRef(url, keep3), await port.readRef(url, BRANCH)]).toEqual([null, base]);
    remote.refuse(false);
  }, 60_000);

  it("refuses remote URLs with credentials or that git would run as a command", () => {
    const ok = ["/srv/git/repo.git", "file:///srv/repo.git", "ssh://git@host/repo.git", "git@github.com:o/r.git"];
    for (const url of ok) expect([url, remoteUrlProblem(url)]).toEqual([url, null]);
    const refused = [
      "https://user:secret@example.com/r.git",
      "https://ghp_token@example.com/r.git",
      "https://example.com/r.git?access_token=x",
      "ssh://git:pw@host/r.git",
      "user:pw@host:r.git",
      "-uhelp",
      "ext::sh -c touch% /tmp/x",
      "relative/path",
    ];
    for (const url of refused) expect([url, remoteUrlProblem(url)]).not.toEqual([url, null]);
    const parsed = WorkspaceRemote.safeParse({ remote: "https://u:p@example.com/r.git" });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.message).toContain("must not carry credentials");
  });
});
