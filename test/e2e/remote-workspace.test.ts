/**
 * Remote-backed products through the built server (issue 33), with a bare repository as the remote and the logging
 * agent writing each task's change (`tasks/<taskId>.txt`) in its worktree:
 *
 * - `product.plan` refuses a remote URL with credentials and integration mode `merge` with a remote (-32602).
 * - A remote that is unreachable for 30 s (its folder renamed away and back), then one whose hook refuses pushes:
 *   each time the product pauses with a recovery naming the remote (a resume while it is still away is refused,
 *   naming it), and the resume after it is back pushes the recorded merge and continues. Nothing is lost or done twice: every task ran once, the
 *   remote's `acp/<id>` has each task's change exactly once, and no ref of the remote ever moved backwards.
 * - A `git://` remote that turns silent (accepts connections, never answers): within the deadline
 *   (`--remote-timeout-ms`) of each git call the product pauses with a recovery naming the remote and the timeout, the
 *   hung git processes are gone, and the resume once it answers again finishes every task once.
 * The product's `cwd` is a plain folder: no git repository is made there.
 */
import { existsSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { dirname, join } from "node:path";
import { expect, it } from "vitest";
import type { Task } from "../../protocol/common.js";
import { INSTANCES, readLog, workspace } from "../support/liveness-fleet.js";
import { changesOn, makeBareRemote } from "../support/git-remote.js";
import { startGitDaemon } from "../support/git-daemon.js";
import { eventually } from "../support/postgres.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";

const CHAIN3: Task[] = [
  { taskId: "a", title: "First", description: "First.", instanceId: "w1", dependsOn: [] },
  { taskId: "b", title: "Second", description: "Second.", instanceId: "w1", dependsOn: ["a"] },
  { taskId: "c", title: "Third", description: "Third.", instanceId: "w1", dependsOn: ["b"] },
];

interface Status {
  phase: string;
  recovery?: { cause: string; remediation: string };
  integration?: { head: string; merged: string[] };
}

const status = (s: ServerHandle, productId: string) => s.request<Status>("product.status", { productId });

async function pausedNaming(s: ServerHandle, productId: string, remote: string): Promise<Status> {
  await eventually(async () => (await status(s, productId)).phase === "paused", 60_000, "the product to pause");
  const st = await status(s, productId);
  expect(st.recovery?.cause).toContain(`The git remote ${remote}`);
  expect(st.recovery?.remediation).toContain("git remote");
  return st;
}

it("plan refuses a remote with credentials, and merge with a remote (-32602)", async () => {
  const server = await startServer({ cwd: tempDir(), args: ["--workspace-root", tempDir()] });
  try {
    const cwd = tempDir();
    const refused = async (params: Record<string, unknown>) =>
      server.request("product.plan", { goal: "Refuse", cwd, ...params }).then(
        () => "accepted",
        (err: { code?: number; message?: string; data?: unknown }) => ({ code: err.code, text: JSON.stringify(err) }),
      );
    const creds = await refused({ workspace: { remote: "https://user:secret@example.com/r.git" } });
    expect(creds).toMatchObject({ code: -32602 });
    expect((creds as { text: string }).text).toContain("must not carry credentials");
    expect((creds as { text: string }).text).not.toContain("secret@");
    const merge = await refused({ workspace: { remote: "/srv/r.git" }, integration: { mode: "merge" } });
    expect(merge).toMatchObject({ code: -32602 });
    expect((merge as { text: string }).text).toContain(
      "Integration mode merge applies to products in a local cwd only",
    );
  } finally {
    await server.close();
  }
}, 60_000);

it("an unreachable, then a refusing remote pauses the product naming it; it resumes once back, nothing lost", async () => {
  const remote = makeBareRemote();
  const logPath = join(tempDir(), "executions.jsonl");
  const cwd = workspace(logPath, 300, 500);
  const home = tempDir("acp-orch-home-");
  const root = tempDir("acp-orch-root-");
  const server = await startServer({
    cwd,
    env: { HOME: home, LOGGING_AGENT_WRITE: "1" },
    args: ["--workspace-root", root],
  });
  try {
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Remote",
      cwd,
      workspace: { remote: remote.dir },
    });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId, 60_000);
    await server.request("product.confirm", { productId, instances: INSTANCES, tasks: CHAIN3 });
    const integrated = (taskId: string) =>
      server.waitFor(
        (n) => n.method === "product.taskIntegrated" && n.params.productId === productId && n.params.taskId === taskId,
        60_000,
      );
    // a is pushed; then the remote goes away while b runs: b's push fails and the product pauses naming it.
    await integrated("a");
    const awayAt = Date.now();
    renameSync(remote.dir, `${remote.dir}.away`);
    await pausedNaming(server, productId, remote.dir);
    const early = await server.request("product.resume", { productId }).then(
      () => "resumed",
      (err: { code?: number; message?: string }) => `${err.code} ${err.message}`,
    );
    expect(early).toContain(`cannot resume yet: The git remote ${remote.dir}`);
    expect((await status(server, productId)).phase).toBe("paused");
    await new Promise((done) => setTimeout(done, Math.max(0, 30_000 - (Date.now() - awayAt))));
    renameSync(`${remote.dir}.away`, remote.dir);
    // Back: the resume pushes b's recorded merge (b does not run again), then c runs; its push is refused by a hook.
    await server.request("product.resume", { productId });
    await server.waitFor(
      (n) =>
        n.method === "product.taskStatus" &&
        n.params.productId === productId &&
        n.params.taskId === "c" &&
        n.params.status === "running",
      60_000,
    );
    remote.refuse(true);
    const paused = await pausedNaming(server, productId, remote.dir);
    expect(paused.integration?.merged).toEqual(["a", "b"]);
    remote.refuse(false);
    await server.request("product.resume", { productId });
    await server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 60_000);
    const final = await status(server, productId);
    expect(final.phase).toBe("completed");
    const branch = `refs/heads/acp/${productId}`;
    expect(remote.read(branch)).toBe(final.integration?.head);
    expect(changesOn(remote.dir, branch)).toEqual(["tasks/a.txt", "tasks/b.txt", "tasks/c.txt"]);
    expect(remote.backwardMoves("refs/")).toEqual([]);
    const done = readLog(logPath).filter((l) => l.productId === productId && l.event === "done");
    expect(done.map((l) => l.taskId).sort()).toEqual(["a", "b", "c"]);
    expect(existsSync(join(cwd, ".git"))).toBe(false);
    expect(readFileSync(remote.log, "utf8")).not.toContain(" refs/heads/main");
  } finally {
    if (existsSync(`${remote.dir}.away`)) renameSync(`${remote.dir}.away`, remote.dir);
    await server.close();
  }
}, 180_000);

/** Live processes whose command line mentions `text` (a hung git left behind would). */
function processesWith(text: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
      if (cmd.includes(text)) found.push(`${pid}: ${cmd}`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

it("a remote that accepts and never answers pauses the product within the deadline, naming it; resumed, nothing lost", async () => {
  const remote = makeBareRemote();
  const daemon = await startGitDaemon(dirname(remote.dir));
  const url = daemon.url("remote.git");
  const logPath = join(tempDir(), "executions.jsonl");
  const cwd = workspace(logPath, 300, 500);
  // 5 s: the first clone (before the remote turns silent) must fit in it on a loaded 2-core machine (2 s did not).
  const timeoutMs = 5_000;
  const server = await startServer({
    cwd,
    env: { HOME: tempDir("acp-orch-home-"), LOGGING_AGENT_WRITE: "1" },
    args: ["--workspace-root", tempDir("acp-orch-root-"), "--remote-timeout-ms", String(timeoutMs)],
  });
  try {
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Silent remote",
      cwd,
      workspace: { remote: url },
    });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId, 60_000);
    await server.request("product.confirm", { productId, instances: INSTANCES, tasks: CHAIN3 });
    await server.waitFor(
      (n) => n.method === "product.taskIntegrated" && n.params.productId === productId && n.params.taskId === "a",
      60_000,
    );
    daemon.hang(true);
    const silentAt = Date.now();
    const paused = await pausedNaming(server, productId, url);
    // b's prepare fetch (tolerated: its base is in the mirror) and its push each wait one deadline, then it pauses.
    const waited = Date.now() - silentAt;
    expect(waited).toBeGreaterThanOrEqual(timeoutMs);
    expect(waited).toBeLessThan(4 * timeoutMs + 20_000);
    expect(paused.recovery?.cause).toContain(`no answer within ${timeoutMs} ms (git push was stopped)`);
    expect(paused.integration?.merged).toEqual(["a"]);
    expect(daemon.hung()).toBeGreaterThanOrEqual(1);
    await eventually(async () => daemon.held() === 0, 10_000, "the hung git connections to close");
    expect(processesWith(url)).toEqual([]);
    daemon.hang(false);
    await server.request("product.resume", { productId });
    await server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 60_000);
    const final = await status(server, productId);
    const branch = `refs/heads/acp/${productId}`;
    expect(remote.read(branch)).toBe(final.integration?.head);
    expect(changesOn(remote.dir, branch)).toEqual(["tasks/a.txt", "tasks/b.txt", "tasks/c.txt"]);
    expect(remote.backwardMoves("refs/")).toEqual([]);
    const done = readLog(logPath).filter((l) => l.productId === productId && l.event === "done");
    expect(done.map((l) => l.taskId).sort()).toEqual(["a", "b", "c"]);
  } finally {
    await server.close();
    await daemon.close();
  }
}, 180_000);
