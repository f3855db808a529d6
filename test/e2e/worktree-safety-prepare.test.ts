/**
 * Worktree preparation never spends a task's attempts (issue 26, case 8; DESIGN.md guarantee 16), over real stdio:
 * two servers, each with its own SQLite store, share ONE user repository; each runs a product of rounds of 6 parallel
 * tasks (round r depends on every task of round r-1), so every round starts 12 worktree preparations on that
 * repository at about the same time, from two processes, while CPU burners this test starts load the machine. Two
 * rounds here (a round costs seconds of agent turns on a loaded machine); the 20 rounds of 12 are run against the
 * adapter itself from two processes in test/adapters/workspace/prepare-concurrency.test.ts.
 * A gate file holds each round's 12 tasks until all of them run, so the next round's preparations start together.
 * Counted from each product's stored events: every task ran exactly one attempt, none failed preparing, both products
 * completed and integrated every task; the retries the servers logged are reported. The user's HEAD, branches,
 * index, working tree and in-progress operation are byte-for-byte unchanged, and both servers stay alive.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { git, makeRepo, worktreePaths } from "../support/git-repo.js";
import { type ServerHandle, tempDir } from "../support/server-process.js";
import {
  expectAlive,
  GIVE_UP_LEADER,
  planProduct,
  type ScriptedServer,
  scriptedServer,
  settledPhase,
  userState,
} from "../support/worktree-safety.js";
import { recordedTasks } from "../support/task-events.js";

const ROUNDS = 2;
const WIDTH = 6;
const SERVERS = 2;

const taskId = (round: number, k: number) => `r${round}w${k}`;

const burners: ChildProcess[] = [];
afterAll(() => {
  for (const b of burners) if (b.exitCode === null) b.kill("SIGKILL");
});

/** One busy-looping process per core of this machine's two (stopped by pid when the test ends). */
function startBurners(n: number): void {
  for (let i = 0; i < n; i++) burners.push(spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
}

interface StoredTask {
  taskId: string;
  status: string;
  attempts: number;
  error?: string;
}

/** Every task state the product's events in the SQLite store at `statePath` (the server must be stopped). */
function storedTaskEvents(statePath: string, productId: string): StoredTask[] {
  const db = new Database(statePath, { readonly: true });
  try {
    return (
      db
        .prepare("SELECT event FROM events WHERE stream = ? ORDER BY seq")
        .pluck()
        .all(`product/${productId}`) as string[]
    ).flatMap((json) => recordedTasks(JSON.parse(json)));
  } finally {
    db.close();
  }
}

/** Lines of the server's pino log (stderr) with message `msg`. */
const logged = (server: ServerHandle, msg: string) =>
  server
    .stderr()
    .split("\n")
    .filter((l) => l.includes(`"msg":"${msg}"`));

describe("12 concurrent worktree preparations on one repository, from two servers, on a loaded machine", () => {
  it("case 8: two servers, 12 preparations per round, no attempt spent on preparation", async () => {
    const started = Date.now();
    const repo = makeRepo({ "README.md": "# Project\n", "src/app.txt": "app\n", ".gitignore": "*.pid\n" });
    const before = userState(repo);
    const gates = tempDir("acp-orch-gates-");
    const gate = (round: number) => join(gates, `round-${round}`);
    const tasks: Record<string, unknown> = {};
    for (let r = 0; r < ROUNDS; r++)
      for (let k = 0; k < WIDTH; k++)
        tasks[taskId(r, k)] = {
          actions: [{ waitForFile: gate(r) }, { write: { path: `out/${taskId(r, k)}.txt`, content: `${r} ${k}\n` } }],
        };
    const script = { leader: GIVE_UP_LEADER, worker: { tasks } };
    const instances = Array.from({ length: WIDTH }, (_, k) => ({
      instanceId: `w${k}`,
      agentId: "scripted",
      role: "worker",
    }));
    const plan: Record<string, unknown>[] = [];
    for (let r = 0; r < ROUNDS; r++)
      for (let k = 0; k < WIDTH; k++)
        plan.push({
          taskId: taskId(r, k),
          title: `Round ${r} task ${k}`,
          description: `Round ${r} task ${k}.`,
          instanceId: `w${k}`,
          dependsOn: r === 0 ? [] : Array.from({ length: WIDTH }, (_, j) => taskId(r - 1, j)),
          maxAttempts: 3,
        });

    const servers: ScriptedServer[] = [];
    try {
      for (let i = 0; i < SERVERS; i++)
        servers.push(await scriptedServer(script, { config: { maxParallelTasks: WIDTH } }));
      const ids = await Promise.all(servers.map((s) => planProduct(s.server, repo)));
      startBurners(2);
      const t0 = Date.now();
      await Promise.all(
        servers.map((s, i) => s.server.request("product.confirm", { productId: ids[i], instances, tasks: plan })),
      );
      for (let r = 0; r < ROUNDS; r++) {
        // All 12 tasks of the round run (their worktrees prepared), then the gate opens.
        await Promise.all(
          servers.flatMap((s, i) =>
            Array.from({ length: WIDTH }, (_, k) =>
              s.server.waitFor(
                (n) =>
                  n.method === "product.taskStatus" &&
                  n.params.productId === ids[i] &&
                  n.params.taskId === taskId(r, k) &&
                  n.params.status === "running",
                120_000,
              ),
            ),
          ),
        );
        writeFileSync(gate(r), "");
      }
      const phases = await Promise.all(servers.map((s, i) => settledPhase(s.server, ids[i] as string)));
      const runMs = Date.now() - t0;
      for (const b of burners) b.kill("SIGKILL");
      expect(phases).toEqual(["completed", "completed"]);
      const retries = servers.map((s) => logged(s.server, "worktree preparation failed; trying again").length);
      for (const [i, s] of servers.entries()) {
        const status = await s.server.request<{ integration?: { state: string; head: string; merged: string[] } }>(
          "product.status",
          { productId: ids[i] },
        );
        expect(status.integration?.state).toBe("integrated");
        expect(status.integration?.merged).toHaveLength(ROUNDS * WIDTH);
        expect(git(repo, "rev-parse", `acp/${ids[i]}`)).toBe(status.integration?.head);
        expect(git(repo, "ls-tree", "--name-only", `acp/${ids[i]}`, "out/").split("\n")).toHaveLength(ROUNDS * WIDTH);
        expect(await expectAlive(s.server)).toBe(true);
      }
      for (const s of servers) await s.server.close();

      // From the events: one attempt per task (each `running` record is one attempt), none failed in preparation.
      for (const [i, s] of servers.entries()) {
        const events = storedTaskEvents(s.server.statePath, ids[i] as string);
        const starts = new Map<string, number>();
        for (const t of events) if (t.status === "running") starts.set(t.taskId, (starts.get(t.taskId) ?? 0) + 1);
        expect(starts.size).toBe(ROUNDS * WIDTH);
        expect([...starts.values()].every((n) => n === 1)).toBe(true);
        expect(events.filter((t) => t.status === "failed" || /could not be prepared/.test(t.error ?? ""))).toEqual([]);
        expect(events.filter((t) => t.status === "completed").every((t) => t.attempts === 1)).toBe(true);
      }
      // Nothing of the products' worktrees is left, and the user's checkout is as it was.
      expect(worktreePaths(repo)).toEqual([repo]);
      expect(userState(repo)).toEqual(before);
      process.stderr.write(
        `case 8: ${JSON.stringify({ prepares: SERVERS * ROUNDS * WIDTH, retries, runMs, totalMs: Date.now() - started })}\n`,
      );
    } finally {
      for (const b of burners) b.kill("SIGKILL");
      for (const s of servers) if (s.server.child.exitCode === null) await s.server.kill();
    }
  }, 300_000);
});
