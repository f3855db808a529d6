/**
 * Crash-resume with nothing lost and nothing repeated (issue 4, first "Must show" item; DESIGN.md guarantees 1, 4
 * and 7), over the built server as a real subprocess on a real SQLite file with real worker subprocesses.
 *
 * A 36-task DAG (6 layers of 6, each task depending on 3-4 tasks of the layers before) runs on 4 instances of the
 * logging agent (test/fixtures/agents/logging-agent.ts), which logs every execution to a file outside the server.
 * Several lanes run at once, each with its own server, state file and log: the reference lane runs the DAG once
 * without interruption; every other lane `kill -9`s its server at random moments (seeded RNG), restarts it on the
 * same SQLite file, reads `product.status`, checks every stored record parses, calls `product.resume`, and repeats,
 * starting a new run of the DAG whenever one completes, until its share of the kill points is used up.
 *
 * Asserted: no task whose completion was persisted before a kill (completed in the status read right after the
 * restart) started again afterwards, and no task started twice under one server; no task is missing (every task
 * completed exactly once in the final status); every stored event and record parses with the schemas of
 * src/core/product/records.ts and every event stream is gap-free; the final outputs equal the uninterrupted run's
 * (and the outputs the DAG implies); no task logged more starts than its persisted attempts; every logging agent
 * running when its server was killed exits on its own (stdin EOF), and none is left 5 s after the run.
 *
 * A kill moment is drawn (seeded) as "after n task status changes since the server (re)started and resumed, n in
 * [0, 16), then 0-300 ms more": anchored to progress rather than to wall time, so the kills spread over the whole run
 * on a fast or a heavily loaded machine alike. A quarter of the kills instead hit the `product.resume` call itself
 * (0-40 ms after it was sent). Restarts alternate (seeded) between a fresh lease owner id, which waits for the dead
 * owner's 1.5 s lease to expire, and the lane's own owner id, which takes its lease back at once.
 *
 * CI mode: 50 kill points. Longer local mode: `CRASH_KILLS=500 npx vitest run test/e2e/crash-resume.test.ts` or
 * `npx tsx scripts/crash-soak.ts --kills 500`. Other knobs: CRASH_SEED, CRASH_LANES (kill lanes, default 2),
 * CRASH_MAX_STEPS (default 16), CRASH_TIMEOUT_MS, CRASH_DEBUG=1 (progress on stderr, server debug logs).
 *
 * The agent is transpiled once to a plain `.mjs` file (its only bare import rewritten to the SDK's absolute URL) and
 * started with plain `node`: through tsx every one of the few hundred agent starts costs twice the CPU.
 */
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { Instance, Task, TaskState } from "../../protocol/common.js";
import {
  LeaseRecord,
  ProductEvent,
  ProductHeaderRecord,
  ProductIndexRecord,
  SnapshotRecord,
} from "../../src/core/product/records.js";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import { outputFor, type ExecutionLogLine } from "../fixtures/agents/logging-agent.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";
import { seededRandom as rng } from "../support/seeded-random.js";

const KILLS = Number(process.env.CRASH_KILLS ?? 50);
const SEED = Number(process.env.CRASH_SEED ?? 20_260_401);
const KILL_LANES = Number(process.env.CRASH_LANES ?? 2);
/** A kill comes after up to this many task status changes since the (re)start, then up to 300 ms more. */
const MAX_STEPS = Number(process.env.CRASH_MAX_STEPS ?? 16);
/**
 * How long an agent orphaned by a kill may take to exit. It exits as soon as it reads stdin's EOF (~20 ms when idle or
 * mid-turn); one killed while still loading the SDK (~0.25 s of CPU) first finishes loading, which on a machine loaded
 * 10x over its cores took up to several seconds. The run-end check (nothing left 5 s after the run) stays strict.
 */
const ORPHAN_LIMIT_MS = 15_000;
const TIMEOUT_MS = Number(process.env.CRASH_TIMEOUT_MS ?? Math.max(600_000, KILLS * 8_000));

// ---------------------------------------------------------------------------------------------------------------
// The DAG

const LAYERS = 6;
const WIDTH = 6;
const INSTANCES: Instance[] = [1, 2, 3, 4].map((n) => ({ instanceId: `w${n}`, agentId: "logger", role: "worker" }));

const tid = (layer: number, k: number): string => `L${layer}-T${k}`;

/** 36 tasks in 6 layers of 6; each depends on 3 tasks of the layer before and, from layer 2 on, 1 of the one before that. */
function crashDag(): Task[] {
  const tasks: Task[] = [];
  for (let l = 0; l < LAYERS; l += 1) {
    for (let k = 0; k < WIDTH; k += 1) {
      const deps = new Set<string>();
      if (l > 0) for (const d of [0, 1, 3]) deps.add(tid(l - 1, (k + d) % WIDTH));
      if (l > 1) deps.add(tid(l - 2, (k + 2) % WIDTH));
      tasks.push({
        taskId: tid(l, k),
        title: `Step ${k + 1} of layer ${l + 1}`,
        description: `Combine the results of ${deps.size} earlier steps.`,
        instanceId: INSTANCES[(l * WIDTH + k) % INSTANCES.length]?.instanceId ?? "w1",
        dependsOn: [...deps],
      });
    }
  }
  return tasks;
}

const DAG = crashDag();

/** The outputs the DAG implies: each task's output from its dependencies' (what the logging agent answers). */
function impliedOutputs(): Map<string, string> {
  const out = new Map<string, string>();
  for (const t of DAG) {
    out.set(
      t.taskId,
      outputFor(
        t.taskId,
        t.dependsOn.map((d) => ({ taskId: d, excerpt: out.get(d) ?? "?" })),
      ),
    );
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `pred()` holds (polled every 20 ms); rejects after `timeoutMs` with `what`. */
async function until(pred: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** State letter and parent pid of a process from /proc/<pid>/stat, or `null` when it is gone. Linux only. */
function procStat(pid: number): { state: string; ppid: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: rest[0] ?? "?", ppid: Number(rest[1]) };
  } catch {
    return null;
  }
}

/** True while `pid` is a live process (a zombie counts as gone). */
const alive = (pid: number): boolean => {
  const st = procStat(pid);
  return st !== null && st.state !== "Z";
};

/** Pids of live processes whose command line contains `token` (and, when given, whose parent is `parent`). */
function processesWith(token: string, parent?: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(token)) continue;
    } catch {
      continue; // the process ended while we looked
    }
    const st = procStat(Number(entry));
    if (st && st.state !== "Z" && (parent === undefined || st.ppid === parent)) pids.push(Number(entry));
  }
  return pids;
}

interface Status {
  productId: string;
  phase: string;
  tasks: TaskState[];
  progress: { total: number; completed: number };
  dropped: number;
}

/**
 * Checks every stored row of the SQLite file (read-only connection, beside the running server): every event of a
 * product stream parses as a `ProductEvent` and streams have no gaps; every product header, snapshot, index and lease record
 * parses; any other record is a JSON object. Events are checked incrementally (`lastRowid`); `events` and `records`
 * count what was checked.
 */
class StoreChecker {
  private lastRowid = 0;
  private readonly lastSeq = new Map<string, number>();
  events = 0;
  records = 0;

  constructor(private readonly statePath: string) {}

  check(): void {
    const db = new Database(this.statePath, { readonly: true, fileMustExist: true });
    try {
      // One read transaction: the events and the records are seen as of one moment of the running server's writes.
      db.transaction(() => this.checkIn(db))();
    } finally {
      db.close();
    }
  }

  private checkIn(db: Database.Database): void {
    const rows = db
      .prepare("SELECT rowid AS r, project_id AS p, stream AS s, seq, event FROM events WHERE rowid > ? ORDER BY rowid")
      .all(this.lastRowid) as { r: number; p: string; s: string; seq: number; event: string }[];
    for (const row of rows) {
      const key = `${row.p}\u0000${row.s}`;
      expect(row.seq, `gap in ${row.s}`).toBe((this.lastSeq.get(key) ?? 0) + 1);
      this.lastSeq.set(key, row.seq);
      const value: unknown = JSON.parse(row.event);
      if (row.s.startsWith("product/")) {
        const parsed = ProductEvent.safeParse(value);
        expect(parsed.success, `${row.s}#${row.seq}: ${parsed.error?.message ?? ""}`).toBe(true);
      } else expect(typeof value).toBe("object");
      this.lastRowid = row.r;
      this.events += 1;
    }
    const records = db.prepare("SELECT project_id AS p, kind, id, value FROM records").all() as {
      p: string;
      kind: string;
      id: string;
      value: string;
    }[];
    for (const rec of records) {
      const value: unknown = JSON.parse(rec.value);
      const schema =
        rec.kind === "product"
          ? ProductHeaderRecord
          : rec.kind === "snapshot"
            ? SnapshotRecord
            : rec.kind === "product-index"
              ? ProductIndexRecord
              : rec.kind === "lease"
                ? LeaseRecord
                : null;
      if (schema) {
        const parsed = schema.safeParse(value);
        expect(parsed.success, `${rec.kind}/${rec.id}: ${parsed.error?.message ?? ""}`).toBe(true);
      } else expect(value !== null && typeof value === "object", `${rec.kind}/${rec.id}`).toBe(true);
      if (rec.kind === "snapshot") {
        const seq = (value as { state: { seq: number } }).state.seq;
        expect(seq).toBeLessThanOrEqual(this.lastSeq.get(`${rec.p}\u0000product/${rec.id}`) ?? 0);
      }
    }
    this.records = records.length;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One lane: a server, its state file, its execution log

/** One server process's life on a lane, with what was persisted when it started. */
interface Generation {
  pid: number;
  productId: string;
  /** Tasks `completed` in the status read right after this server started (persisted before the last kill). */
  completedAtStart: Set<string>;
}

/** One kill point: what the kill was anchored to and how far the run had got. */
interface KillPoint {
  /** `progress`: after `steps` task status changes and `ms` more; `resume`: `ms` after product.resume was sent. */
  kind: "progress" | "resume";
  steps: number;
  ms: number;
  /** Task completions persisted when the kill came. */
  completedBefore: number;
}

interface LaneResult {
  name: string;
  kills: KillPoint[];
  runs: { productId: string; tasks: TaskState[]; kills: number }[];
  generations: Generation[];
  log: ExecutionLogLine[];
  store: StoreChecker;
  token: string;
  /** Logging agents that were running when their server was killed: whether and how soon each exited. */
  orphans: { pid: number; exited: boolean; afterMs: number }[];
  ms: number;
}

class Lane {
  readonly dir = tempDir("acp-orch-crash-");
  readonly workspace = join(this.dir, "workspace");
  readonly statePath = join(this.dir, "state.db");
  readonly logPath = join(this.dir, "executions.jsonl");
  readonly token: string;
  readonly store = new StoreChecker(this.statePath);
  readonly generations: Generation[] = [];
  readonly kills: KillPoint[] = [];
  readonly runs: LaneResult["runs"] = [];
  private readonly orphanChecks: Promise<LaneResult["orphans"]>[] = [];
  private readonly random: () => number;

  constructor(
    readonly name: string,
    agentFile: string,
    private killsLeft: number,
    seed: number,
  ) {
    this.token = `--crash-lane=${name}-${process.pid}-${seed}`;
    this.random = rng(seed);
    mkdirSync(this.workspace);
    writeFileSync(this.logPath, "");
    writeFileSync(
      join(this.workspace, "acp-orchestrator.json"),
      JSON.stringify({
        agents: [
          {
            agentId: "logger",
            role: "worker",
            command: process.execPath,
            args: [agentFile, this.token],
            env: { LOGGING_AGENT_LOG: this.logPath, LOGGING_AGENT_SEED: String(seed) },
          },
        ],
        maxParallelTasks: 4,
      }),
    );
  }

  private debug(msg: string): void {
    if (process.env.CRASH_DEBUG) console.error(`[${new Date().toISOString()}] ${this.name}: ${msg}`);
  }

  /**
   * Starts a server on the lane's files. Leases live 1.5 s (renewed every 0.5 s), so a restart after a kill waits at
   * most that long for the dead owner's lease to expire (`product.resume` answers -32012 until then and is retried);
   * half of the restarts (seeded) reuse the lane's owner id instead, which may take its own lease back at once.
   */
  private start(): Promise<ServerHandle> {
    const env: Record<string, string> = { ACP_ORCHESTRATOR_LEASE_TTL_MS: "1500" };
    if (this.random() < 0.5) env.ACP_ORCHESTRATOR_OWNER_ID = `${this.name}-owner`;
    const level = process.env.CRASH_DEBUG ? "debug" : "warn";
    return startServer({ statePath: this.statePath, cwd: this.workspace, args: ["--log-level", level], env });
  }

  /** `product.plan`, waits for the leader's plan, then confirms the crash DAG in its place. */
  private async planAndConfirm(server: ServerHandle): Promise<string> {
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Run the crash-test DAG",
      cwd: this.workspace,
    });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    await server.request("product.confirm", { productId, instances: INSTANCES, tasks: DAG });
    return productId;
  }

  /** `product.resume`, retried while the dead owner's lease is still current (-32012), until `stop()` says so. */
  private async resume(server: ServerHandle, productId: string, stop: () => boolean): Promise<void> {
    for (;;) {
      try {
        await server.request("product.resume", { productId });
        return;
      } catch (err) {
        if (stop()) return;
        if ((err as { code?: number }).code !== -32012) throw err;
        await sleep(100);
      }
    }
  }

  private static done(server: ServerHandle, productId: string): boolean {
    return server.notifications.some((n) => n.method === "product.completed" && n.params.productId === productId);
  }

  private static steps(server: ServerHandle, productId: string): number {
    return server.notifications.filter((n) => n.method === "product.taskStatus" && n.params.productId === productId)
      .length;
  }

  /**
   * One kill point: SIGKILLs `server`, starts a new one on the same files, reads the product's status (what was
   * persisted), records the generation, checks that no completion was lost and that every stored record parses, and
   * starts watching that the killed server's logging agents exit within 5 s.
   */
  private async killAndRestart(
    server: ServerHandle,
    productId: string,
    point: Omit<KillPoint, "completedBefore">,
  ): Promise<{ server: ServerHandle; status: Status }> {
    const completedBefore = this.persistedCompletions(productId).size;
    const serverPid = server.child.pid ?? -1;
    const agents = processesWith(this.token, serverPid);
    await server.kill();
    this.killsLeft -= 1;
    this.kills.push({ ...point, completedBefore });
    this.debug(`killed (${JSON.stringify(point)}, ${completedBefore} completed, ${agents.length} agents running)`);
    const killedAt = Date.now();
    this.orphanChecks.push(
      Promise.all(
        agents.map(async (pid) => {
          const exited = await until(() => !alive(pid), "an orphaned agent to exit", ORPHAN_LIMIT_MS).then(
            () => true,
            () => false,
          );
          return { pid, exited, afterMs: Date.now() - killedAt };
        }),
      ),
    );
    const next = await this.start();
    const status = await next.request<Status>("product.status", { productId });
    this.debug(`restarted: ${status.phase}, ${status.progress.completed} completed`);
    const completed = new Set(status.tasks.filter((t) => t.status === "completed").map((t) => t.taskId));
    const previous = this.generations[this.generations.length - 1];
    for (const id of previous?.completedAtStart ?? [])
      expect(completed.has(id), `${id} lost its completion`).toBe(true);
    this.generations.push({ pid: next.child.pid ?? -1, productId, completedAtStart: completed });
    expect(status.dropped).toBe(0);
    this.store.check();
    return { server: next, status };
  }

  /** Runs the DAG again and again, killing the server at drawn moments, until this lane's kills are used up. */
  async run(): Promise<LaneResult> {
    const t0 = Date.now();
    let server = await this.start();
    for (;;) {
      const productId = await this.planAndConfirm(server);
      this.generations.push({ pid: server.child.pid ?? -1, productId, completedAtStart: new Set() });
      let killsThisRun = 0;
      let needsResume = false;
      for (;;) {
        if (needsResume && this.killsLeft > 0 && this.random() < 0.25) {
          // Kill while the resume is being served (its commit of interrupted tasks, the first wave).
          let killed = false;
          const resumed = this.resume(server, productId, () => killed).catch(() => undefined);
          const ms = Math.floor(this.random() * 40);
          await sleep(ms);
          killed = true;
          const restarted = await this.killAndRestart(server, productId, { kind: "resume", steps: 0, ms });
          await resumed;
          server = restarted.server;
          killsThisRun += 1;
          if (restarted.status.phase === "completed") break;
          expect(restarted.status.phase).toBe("executing");
          continue;
        }
        if (needsResume) await this.resume(server, productId, () => false);
        needsResume = false;
        const current = server;
        if (this.killsLeft === 0) {
          await until(() => Lane.done(current, productId), `${this.name}: ${productId} to complete`, 300_000);
          break;
        }
        const steps = Math.floor(this.random() * MAX_STEPS);
        const ms = Math.floor(this.random() * 300);
        await until(
          () => Lane.done(current, productId) || Lane.steps(current, productId) >= steps,
          `${this.name}: ${steps} task status changes`,
          300_000,
        );
        await sleep(ms);
        if (Lane.done(current, productId)) break;
        const restarted = await this.killAndRestart(current, productId, { kind: "progress", steps, ms });
        server = restarted.server;
        killsThisRun += 1;
        if (restarted.status.phase === "completed") break;
        expect(restarted.status.phase).toBe("executing");
        needsResume = true;
      }
      const final = await server.request<Status>("product.status", { productId });
      expect(final.phase, `${this.name}: ${productId}`).toBe("completed");
      expect(final.dropped).toBe(0);
      this.runs.push({ productId, tasks: final.tasks, kills: killsThisRun });
      if (this.killsLeft === 0) break;
    }
    expect(await server.close()).toBe(0);
    this.store.check();
    const log = readExecutionLog(this.logPath);
    return {
      name: this.name,
      kills: this.kills,
      runs: this.runs,
      generations: this.generations,
      log,
      store: this.store,
      token: this.token,
      orphans: (await Promise.all(this.orphanChecks)).flat(),
      ms: Date.now() - t0,
    };
  }

  /** Completed task ids as persisted right now (read-only connection beside the running server). */
  private persistedCompletions(productId: string): Set<string> {
    const db = new Database(this.statePath, { readonly: true, fileMustExist: true });
    try {
      const rows = db
        .prepare('SELECT event FROM events WHERE stream = ? AND event LIKE \'%"status":"completed"%\'')
        .all(`product/${productId}`) as { event: string }[];
      return new Set(rows.map((r) => (JSON.parse(r.event) as { task?: { taskId?: string } }).task?.taskId ?? ""));
    } finally {
      db.close();
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The test

/**
 * Per lane: within one product, maps every execution start to its server generation and checks that (1) no task
 * started twice under one server, (2) no task started under a server that found it already completed at its start,
 * or under any later server. Returns the number of starts.
 */
function checkNothingRepeated(lane: LaneResult): number {
  const key = (pid: number, productId: string): string => `${pid}/${productId}`;
  const genOf = new Map(lane.generations.map((g, i) => [key(g.pid, g.productId), i]));
  const starts = lane.log.filter((l) => l.event === "start");
  const seen = new Set<string>();
  for (const s of starts) {
    const g = genOf.get(key(s.ppid, s.productId));
    expect(g, `${lane.name}: start of ${s.taskId} by unknown server ${s.ppid} for ${s.productId}`).toBeDefined();
    const once = `${key(s.ppid, s.productId)}/${s.taskId}`;
    expect(seen.has(once), `${lane.name}: ${s.taskId} started twice under server ${s.ppid}`).toBe(false);
    seen.add(once);
    // Every generation from the first one that found the task completed (same product) must not have started it.
    const firstCompleted = lane.generations.findIndex(
      (gen) => gen.productId === s.productId && gen.completedAtStart.has(s.taskId),
    );
    if (firstCompleted >= 0) {
      expect(g ?? -1, `${lane.name}: ${s.taskId} ran again after its completion was persisted`).toBeLessThan(
        firstCompleted,
      );
    }
  }
  return starts.length;
}

describe("crash-resume under kill -9 (issue 4)", () => {
  it(
    `loses and repeats nothing across ${KILLS} kill points, and ends with the uninterrupted run's outputs`,
    async () => {
      const t0 = Date.now();
      const agentFile = compileLoggingAgent(tempDir("acp-orch-agent-"));
      const lanes = [new Lane("reference", agentFile, 0, SEED)];
      for (let i = 0; i < KILL_LANES; i += 1) {
        const share = Math.floor(KILLS / KILL_LANES) + (i < KILLS % KILL_LANES ? 1 : 0);
        lanes.push(new Lane(`kill-${i + 1}`, agentFile, share, SEED + i + 1));
      }
      const results = await Promise.all(lanes.map((l) => l.run()));
      const [reference, ...killed] = results as [LaneResult, ...LaneResult[]];

      // None missing: every task of every run completed exactly once in the final status.
      for (const lane of results) {
        for (const run of lane.runs) {
          expect(
            run.tasks.map((t) => [t.taskId, t.status]),
            `${lane.name} ${run.productId}`,
          ).toEqual(DAG.map((t) => [t.taskId, "completed"]));
        }
      }
      // The final result equals the uninterrupted run's, which is what the DAG implies.
      const outputs = (tasks: TaskState[]): Map<string, string> =>
        new Map(tasks.map((t) => [t.taskId, t.output ?? ""]));
      const implied = impliedOutputs();
      expect(reference.runs).toHaveLength(1);
      expect(outputs(reference.runs[0]?.tasks ?? [])).toEqual(implied);
      for (const lane of killed) {
        for (const run of lane.runs) expect(outputs(run.tasks), `${lane.name} ${run.productId}`).toEqual(implied);
      }

      // Nothing repeated: no completed task ran again, no task started twice under one server, and no task logged
      // more executions than its persisted attempts. The reference ran every task exactly once.
      let starts = 0;
      for (const lane of results) {
        starts += checkNothingRepeated(lane);
        for (const run of lane.runs) {
          for (const t of run.tasks) {
            const logged = lane.log.filter(
              (l) => l.event === "start" && l.productId === run.productId && l.taskId === t.taskId,
            );
            expect(logged.length, `${lane.name} ${t.taskId}`).toBeLessThanOrEqual(t.attempts);
            expect(logged.length, `${lane.name} ${t.taskId}`).toBeGreaterThanOrEqual(1);
          }
        }
      }
      expect(reference.log.filter((l) => l.event === "start")).toHaveLength(DAG.length);
      expect(reference.runs[0]?.tasks.every((t) => t.attempts === 1)).toBe(true);

      const killPoints = killed.reduce((n, l) => n + l.kills.length, 0);
      expect(killPoints).toBe(KILLS);
      // The kills landed at many different points of the runs, not only before the first completion.
      const moments = new Set(killed.flatMap((l) => l.kills.map((k) => k.completedBefore)));
      expect(moments.size).toBeGreaterThanOrEqual(Math.min(12, Math.floor(KILLS / 4)));

      // Workers do not outlive their killed server: every agent running at a kill exited on its own (stdin EOF), and
      // none of any lane is left 5 s after the run.
      const orphans = killed.flatMap((l) => l.orphans);
      expect(orphans.filter((o) => !o.exited)).toEqual([]);
      const slowestOrphanMs = Math.max(0, ...orphans.map((o) => o.afterMs));
      for (const lane of results) {
        await until(() => processesWith(lane.token).length === 0, `${lane.name}: logging agents to exit`, 5_000);
      }

      const runs = killed.reduce((n, l) => n + l.runs.length, 0);
      const rows = results.reduce((n, l) => n + l.store.events, 0);
      console.info(
        `crash-resume: ${killPoints} kill points (${killed.reduce((n, l) => n + l.kills.filter((k) => k.kind === "resume").length, 0)} during resume) ` +
          `over ${runs} runs of ${DAG.length} tasks in ${killed.length} lanes (seed ${SEED}), ${moments.size} distinct progress levels; ` +
          `${starts} worker starts for ${(runs + 1) * DAG.length} completions; ${orphans.length} orphaned agents all exited (slowest after ${slowestOrphanMs} ms); ` +
          `${rows} events checked; lanes ${results.map((l) => `${l.name} ${(l.ms / 1000).toFixed(1)} s`).join(", ")}; ` +
          `total ${((Date.now() - t0) / 1000).toFixed(1)} s`,
      );
    },
    TIMEOUT_MS,
  );
});
