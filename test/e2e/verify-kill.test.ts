/**
 * kill -9 of the server while a verification check runs (issue 30, "Must show"; DESIGN.md guarantee 17), at 10 kill
 * points: a real Node project, a real check command (it logs `start <tree>` and `end <tree> <status>` around
 * `node --test`), scripted ACP workers, SQLite state. After each kill a new server resumes the product. Shown: a check
 * cut short runs again after the resume; the integration branch never points at a commit whose tree did not pass
 * (checked at every kill and over the branch's whole reflog, re-running the tests on each); no tree's checks ever ran
 * to their end twice, and each tree has at most one `verified` event; a rollback run forward verifies nothing again.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git } from "../support/git-repo.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";
import { BROKEN, GOOD, nodeProject, reflog, scriptedConfig, testsPass, write } from "../support/verify-project.js";

/** How long after a check started each round kills the server (ms); the check itself takes ≥ 400 ms plus `node --test`. */
const KILL_AFTER_MS = [0, 150, 300, 50, 250, 100, 350, 200, 20, 120];

interface LogLine {
  kind: "start" | "end";
  tree: string;
  status?: number;
}

function readLog(path: string): LogLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      const [kind, tree, status] = l.split(" ");
      return { kind: kind as "start" | "end", tree: tree as string, ...(status ? { status: Number(status) } : {}) };
    });
}

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const tasks = [
  { taskId: "t1", title: "One", description: "Write one.", instanceId: "w1", dependsOn: [] },
  { taskId: "t2", title: "Two", description: "Rewrite add.", instanceId: "w2", dependsOn: [], maxAttempts: 9 },
  { taskId: "t3", title: "Three", description: "Write three.", instanceId: "w1", dependsOn: ["t1", "t2"] },
  { taskId: "t4", title: "Four", description: "Write four.", instanceId: "w2", dependsOn: ["t3"] },
];

describe("kill -9 during a running verification check", () => {
  it("re-runs the cut check after resume, never integrates an unverified tree, never verifies a tree twice", async () => {
    const repo = nodeProject();
    const base = tempDir("acp-orch-verify-kill-");
    const checkLog = join(base, "checks.log");
    const check = join(base, "check.sh");
    writeFileSync(
      check,
      [
        "#!/bin/sh",
        't=$(git rev-parse "HEAD^{tree}")',
        `echo "start $t" >> '${checkLog}'`,
        "sleep 0.4",
        "node --test",
        "s=$?",
        `echo "end $t $s" >> '${checkLog}'`,
        "exit $s",
        "",
      ].join("\n"),
    );
    chmodSync(check, 0o755);
    const { config } = scriptedConfig(base, {
      worker: {
        tasks: {
          t1: write("one.txt", "one\n"),
          t2: [write("math.js", BROKEN), write("math.js", GOOD.replace("a + b", "(a) + (b)"))],
          t3: write("three.txt", "three\n"),
          t4: write("four.txt", "four\n"),
        },
      },
    });
    const statePath = join(base, "state.db");
    const env = { ACP_ORCHESTRATOR_OWNER_ID: "verify-kill" };
    const start = () => startServer({ cwd: base, statePath, env, args: ["--config", config] });
    const branchTree = (ref: string): string | null => {
      try {
        return git(repo, "rev-parse", `${ref}^{tree}`);
      } catch {
        return null;
      }
    };

    let server: ServerHandle = await start();
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Improve calc",
      cwd: repo,
      verify: { commands: [{ name: "unit tests", run: `'${check}'`, timeoutMs: 60_000 }], maxParallel: 2 },
    });
    const branch = `acp/${productId}`;
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    await server.request("product.confirm", {
      productId,
      instances: ["w1", "w2"].map((id) => ({ instanceId: id, agentId: "scripted", role: "worker" })),
      tasks,
    });
    const baseTree = branchTree("HEAD") as string;
    const cut: string[] = [];
    for (const [round, delay] of KILL_AFTER_MS.entries()) {
      if (round > 0) {
        server = await start();
        await server.request("product.resume", { productId });
      }
      const seen = readLog(checkLog).filter((l) => l.kind === "start").length;
      await until(`a check to start (round ${round})`, () =>
        readLog(checkLog).filter((l) => l.kind === "start").length > seen ? true : undefined,
      );
      await new Promise((r) => setTimeout(r, delay));
      await server.kill();
      // At the kill: every check that started and did not end was cut short; the branch is at a green tree.
      const log = readLog(checkLog);
      const ended = new Set(log.filter((l) => l.kind === "end").map((l) => l.tree));
      const open = log.filter((l) => l.kind === "start" && !ended.has(l.tree)).map((l) => l.tree);
      expect(open.length, `round ${round}: a check was running at the kill`).toBeGreaterThan(0);
      cut.push(...open.map((t) => `${t}@${log.length}`));
      const head = branchTree(branch);
      if (head !== null && head !== baseTree) expect(log).toContainEqual({ kind: "end", tree: head, status: 0 });
    }

    server = await start();
    try {
      const completed = server.waitFor(
        (n) => n.method === "product.completed" && n.params.productId === productId,
        60_000,
      );
      await server.request("product.resume", { productId });
      expect((await completed).params.phase).toBe("completed");
      const log = readLog(checkLog);

      // No tree ran to its end twice; one `verified` event per tree.
      const ends = log.filter((l) => l.kind === "end").map((l) => l.tree);
      expect(new Set(ends).size).toBe(ends.length);
      const events = await server.request<{
        tasks: { workspace?: { commit?: string } }[];
        verification?: { results: { tree: string; ok: boolean }[] };
      }>("product.status", { productId });
      const trees = (events.verification?.results ?? []).map((r) => r.tree);
      expect(new Set(trees).size).toBe(trees.length);

      // A check cut short is run again, never assumed. A kill also interrupts the attempt, which runs again as a new
      // attempt; the scripted worker picks its step by attempt number, so t2's first (broken) tree may never come
      // again. So: every cut tree a task finally produced started again after the kill that cut it, and a cut tree
      // that never ran again was never verified nor integrated.
      const finalTrees = new Set(
        events.tasks.flatMap((t) =>
          t.workspace?.commit ? [git(repo, "rev-parse", `${t.workspace.commit}^{tree}`)] : [],
        ),
      );
      const branchTrees = new Set(reflog(repo, branch).map((c) => git(repo, "rev-parse", `${c}^{tree}`)));
      let reran = 0;
      for (const c of cut) {
        const [tree, at] = c.split("@") as [string, string];
        const again = log.slice(Number(at)).some((l) => l.kind === "start" && l.tree === tree);
        if (again) reran++;
        if (finalTrees.has(tree)) expect(again, `check of ${tree} re-ran`).toBe(true);
        if (!again) {
          expect(trees, `cut tree ${tree} assumed verified`).not.toContain(tree);
          expect(branchTrees.has(tree), `cut tree ${tree} integrated`).toBe(false);
        }
      }
      expect(reran).toBeGreaterThan(0);

      // Every commit the branch ever pointed at is green (re-run here), and was verified green before.
      const green = new Set(log.filter((l) => l.kind === "end" && l.status === 0).map((l) => l.tree));
      const moves = reflog(repo, branch).slice(1);
      expect(moves.length).toBeGreaterThanOrEqual(4);
      for (const commit of moves) {
        expect(green.has(git(repo, "rev-parse", `${commit}^{tree}`))).toBe(true);
        expect(testsPass(repo, commit)).toBe(true);
      }

      // Rollback run forward: the same trees come again and none is verified again.
      const { checkpoints } = await server.request<{ checkpoints: { checkpointId: string; completed: number }[] }>(
        "product.checkpoints",
        { productId },
      );
      const two = checkpoints.find((c) => c.completed === 2);
      expect(two).toBeDefined();
      const again = server.waitFor(
        (n) =>
          n.method === "product.completed" &&
          n.params.productId === productId &&
          server.notifications.filter((m) => m.method === "product.completed").length >= 2,
        60_000,
      );
      await server.request("product.rollback", { productId, checkpointId: two?.checkpointId });
      const phase = (await server.request<{ phase: string }>("product.status", { productId })).phase;
      if (phase !== "executing") await server.request("product.resume", { productId });
      expect((await again).params.phase).toBe("completed");
      expect(readLog(checkLog).length).toBe(log.length);
    } finally {
      await server.close();
    }
  }, 240_000);
});
