/**
 * A fleet across machines (issue 33, "Must show"; docs/FLEET.md, "Code through a git remote"): two servers on one
 * PostgreSQL store share nothing but the store and a bare git repository as the products' remote. Each "machine" is
 * a directory of its own holding the server's working directory (its agent registry, the products' `cwd`), its
 * workspace root (mirror and worktrees) and its HOME; each server has a distinct host id (`ACP_ORCHESTRATOR_OWNER_ID`,
 * so process liveness cannot read the other's owner id: only the liveness lock through PostgreSQL tells it is gone).
 * The only shared files are the logging agent's program (the same installed tool on every machine) and its execution
 * log (the test's witness, outside both servers).
 *
 * 10 rounds: a fresh victim server starts two remote-backed products (a → b → c, each task writing
 * `tasks/<taskId>.txt`), is stopped (SIGSTOP, with every process it started) once both products pushed their first
 * task, has its whole machine directory deleted (so nothing the survivor does can depend on the dead server's disk),
 * and is killed -9 with all its processes. The
 * survivor (`--recover`) takes every product over from the run state and the remote alone and finishes it. Asserted:
 * every product completed; the remote's `acp/<productId>` is the recorded head and carries each task's change exactly
 * once; the remote's `reference-transaction` hook log shows no ref of the remote ever moved backwards; in every
 * product's stream no task ran again after its completion was persisted (a task completed before the kill never ran
 * again) and none completed twice; the survivor's worker finished no task twice; the survivor ran tasks of every
 * product (a real takeover each round).
 *
 * Runs only with ACP_ORCHESTRATOR_TEST_PG (see test/support/postgres.ts). The rounds run five at a time; it is a long
 * test: 519 s for the 10 rounds on a 2-core machine at load average ~30 (2026-12-05), where one task of the survivor
 * took ~30 s of wall time and kill -9 → the survivor's first task start had a median of 105 s.
 */
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import type { Task } from "../../protocol/common.js";
import { PostgresAuthority } from "../../src/adapters/persistence/postgres-authority.js";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import { changesOn, makeBareRemote, type BareRemote } from "../support/git-remote.js";
import { INSTANCES, dropAfterAll, projectOf, readLog, streamProblems } from "../support/liveness-fleet.js";
import { describePostgres, eventually, freshSchema, urlWithSchema } from "../support/postgres.js";
import { freezeTree, killTree } from "../support/process-tree.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";

const { schemas } = dropAfterAll();

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

const CHAIN3: Task[] = [
  { taskId: "a", title: "First", description: "First.", instanceId: "w1", dependsOn: [] },
  { taskId: "b", title: "Second", description: "Second.", instanceId: "w1", dependsOn: ["a"] },
  { taskId: "c", title: "Third", description: "Third.", instanceId: "w1", dependsOn: ["b"] },
];
const ROUNDS = 10;
const PER_ROUND = 2;
/** Rounds run this many at a time (each its own victim and machine), so takeovers overlap live victims. */
const CONCURRENT = 5;

/** One simulated machine: its own directory with the server's cwd (registry), workspace root and HOME. */
interface Machine {
  dir: string;
  cwd: string;
  root: string;
  home: string;
}

describePostgres("a fleet across machines: the code travels through a git remote", () => {
  it(`kill -9 of the owner, ${ROUNDS} rounds, its disk deleted: the survivor finishes from the run state and the remote alone`, async () => {
    const schema = freshSchema();
    schemas.push(schema);
    const url = urlWithSchema(schema);
    const tools = tempDir("acp-orch-tools-");
    const agentFile = compileLoggingAgent(tools);
    const logPath = join(tools, "executions.jsonl");
    writeFileSync(logPath, "");
    // A remote per round (each its own mirror on the survivor, so the takeovers do not queue on one mirror's lock).
    const remotes = Array.from({ length: ROUNDS }, () => makeBareRemote());
    const remoteOf = new Map<string, BareRemote>();
    const agents = [
      {
        agentId: "logger",
        command: process.execPath,
        args: [agentFile],
        env: {
          LOGGING_AGENT_LOG: logPath,
          LOGGING_AGENT_MIN_MS: "300",
          LOGGING_AGENT_MAX_MS: "500",
          LOGGING_AGENT_WRITE: "1",
        },
      },
    ];
    const machine = (name: string): Machine => {
      const dir = tempDir(`acp-orch-machine-${name}-`);
      const m = { dir, cwd: join(dir, "work"), root: join(dir, "workspaces"), home: join(dir, "home") };
      for (const d of [m.cwd, m.root, m.home]) mkdirSync(d);
      writeFileSync(join(m.cwd, "acp-orchestrator.json"), JSON.stringify({ agents, maxParallelTasks: 2 }));
      return m;
    };
    const start = (m: Machine, hostId: string, recover: boolean): Promise<ServerHandle> =>
      startServer({
        statePath: url,
        cwd: m.cwd,
        env: { HOME: m.home, ACP_ORCHESTRATOR_OWNER_ID: `${hostId}-${randomUUID()}` },
        // A generous fence bound: on a loaded machine a starved victim must not fence itself before its kill (the
        // fence plays no part in noticing a killed server: its liveness lock is released the moment it dies).
        args: [
          "--log-level",
          "warn",
          "--workspace-root",
          m.root,
          "--liveness-fence-ms",
          "30000",
          ...(recover ? ["--recover"] : []),
        ],
      });
    const survivorMachine = machine("b");
    const survivor = await start(survivorMachine, "host-b", true);
    const authority = await PostgresAuthority.open(url, { maxConnections: 2 });
    const productIds: string[] = [];
    const victimPids = new Set<number>();
    const killedAt = new Map<string, number>();
    const launch = async (victim: ServerHandle, m: Machine, remote: BareRemote, goal: string): Promise<string> => {
      const { productId } = await victim.request<{ productId: string }>("product.plan", {
        goal,
        cwd: m.cwd,
        workspace: { remote: remote.dir },
      });
      await victim.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId, 60_000);
      await victim.request("product.confirm", { productId, instances: INSTANCES, tasks: CHAIN3 });
      remoteOf.set(productId, remote);
      return productId;
    };
    try {
      /** One round: a fresh victim on a machine of its own starts its products and goes away mid-run. */
      const round = async (r: number): Promise<void> => {
        const m = machine(`a${r}`);
        const victim = await start(m, `host-a${r}`, false);
        victimPids.add(victim.child.pid ?? -1);
        const ids = await Promise.all(
          Array.from({ length: PER_ROUND }, (_, i) => launch(victim, m, remotes[r] as BareRemote, `Round ${r}-${i}`)),
        );
        productIds.push(...ids);
        // Mid-run: each product's first task is pushed, the next one is running or being prepared.
        await Promise.all(
          ids.map((id) =>
            victim.waitFor(
              (n) => n.method === "product.taskIntegrated" && n.params.productId === id && n.params.taskId === "a",
              120_000,
            ),
          ),
        );
        // The machine goes away with its disk: every process on it frozen (the server, its watchdogs and agents:
        // an agent left running would go on writing under the machine's directory and make it again), its
        // directory gone, then every process killed.
        const tree = freezeTree(victim.child.pid as number);
        const gone = `${m.dir}.gone`;
        renameSync(m.dir, gone);
        rmSync(gone, { recursive: true, force: true, maxRetries: 5 });
        killTree(tree);
        await victim.kill();
        for (const id of ids) killedAt.set(id, Date.now());
        expect(existsSync(m.dir)).toBe(false);
      };
      for (let first = 0; first < ROUNDS; first += CONCURRENT)
        await Promise.all(Array.from({ length: Math.min(CONCURRENT, ROUNDS - first) }, (_, i) => round(first + i)));

      const phases = async (): Promise<Map<string, string>> => {
        const { products } = await survivor.request<{ products: { productId: string; phase: string }[] }>(
          "product.list",
          {},
        );
        return new Map(products.map((p) => [p.productId, p.phase]));
      };
      await eventually(
        async () => {
          const now = await phases();
          return productIds.every((id) => now.get(id) === "completed");
        },
        // Generous: on a 2-core machine shared by many, one task of the survivor took ~30 s of wall time.
        400_000,
        `${productIds.length} completed products`,
      ).catch(async (err: unknown) => {
        const now = await phases();
        const stuck = productIds.filter((id) => now.get(id) !== "completed");
        const views = await Promise.all(stuck.map((id) => survivor.request("product.status", { productId: id })));
        throw new Error(`${String(err)} Not completed: ${JSON.stringify(views).slice(0, 4000)}`);
      });

      const problems: string[] = [];
      const log = readLog(logPath);
      const resumedMs: number[] = [];
      for (const id of productIds) {
        const remote = remoteOf.get(id) as BareRemote;
        const st = await survivor.request<{ integration?: { head: string } }>("product.status", { productId: id });
        const branch = `refs/heads/acp/${id}`;
        if (remote.read(branch) !== st.integration?.head) problems.push(`${id}: the remote's branch is not the head`);
        const changes = changesOn(remote.dir, branch);
        if (JSON.stringify(changes) !== JSON.stringify(["tasks/a.txt", "tasks/b.txt", "tasks/c.txt"]))
          problems.push(`${id}: the remote's branch carries ${changes.join(", ")}`);
        problems.push(...(await streamProblems(authority, await projectOf(authority, id), id, CHAIN3)));
        const mine = log.filter((l) => l.productId === id);
        for (const task of CHAIN3) {
          const done = mine.filter((l) => l.taskId === task.taskId && l.event === "done" && !victimPids.has(l.ppid));
          if (done.length > 1) problems.push(`${id}/${task.taskId}: finished ${done.length} times by the survivor`);
        }
        const firstBySurvivor = mine.find((l) => l.ppid === survivor.child.pid && l.event === "start");
        if (!firstBySurvivor) problems.push(`${id}: the survivor ran none of it`);
        else resumedMs.push(Date.parse(firstBySurvivor.at) - (killedAt.get(id) ?? NaN));
      }
      const updates = remotes.flatMap((r) => r.updates());
      process.stderr.write(
        `remote fleet: ${ROUNDS} kill -9 rounds, ${productIds.length} products taken over; the remotes logged ` +
          `${updates.length} ref updates (${updates.filter((u) => u.ref.startsWith("refs/heads/acp/")).length} of ` +
          `integration branches) in ${remotes.reduce((n, r) => n + r.pushes(), 0)} pushes; kill -9 → the survivor's ` +
          `first task start: median ${median(resumedMs)} ms, max ${Math.max(...resumedMs)} ms\n`,
      );
      expect({
        problems,
        backwardMoves: remotes.flatMap((r) => r.backwardMoves("refs/")),
        mainUntouched: updates.every((u) => u.ref !== "refs/heads/main"),
      }).toEqual({ problems: [], backwardMoves: [], mainUntouched: true });
    } finally {
      await authority.close();
      await survivor.close();
    }
  }, 900_000);
});
