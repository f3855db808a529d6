/**
 * The peer in the benchmark (issue 16): one LangGraph.js case on the identical random layered DAG the scheduler-scale
 * figure runs (support/dag.ts, same generator, same seed, same width), in its own process so its time and peak RSS are
 * its own. Started by peer.ts as `node langgraph-case.js <json options>`; prints one JSON line (`PeerResult`).
 *
 * How the DAG maps onto LangGraph: one graph node per task; a task with one dependency gets an edge from it, a task
 * with several gets one waiting edge from all of them (`addEdge([a, b], c)`: c runs once, after all of them), a
 * first-level task an edge from START. Each node is an instant task (a resolved promise, as the orchestrator's
 * benchmark workers) returning its output, `done <taskId>`, into one `outputs` channel whose reducer merges the
 * records ({...a, ...b}, the idiomatic LangGraph reducer). One channel per task was tried too and is slower (a
 * 1,000-task graph compiles in ~5.5 s instead of ~0.5 s and runs 2-3x slower), so the faster mapping is the peer.
 * `recursionLimit` is the number of levels plus 10 (every level is one super-step).
 *
 * Stores: `memory` is LangGraph's `MemorySaver`; `sqlite` is `SqliteSaver` (@langchain/langgraph-checkpoint-sqlite)
 * on its own better-sqlite3 connection with `synchronous=FULL` set (fsync on every commit, as the orchestrator's
 * SqliteAuthority), WAL as the saver sets it; `durability: "sync"` (each super-step's checkpoint is written before
 * the next step starts, as the orchestrator commits results before dependents start). The saver's own default
 * synchronous level is read and reported too.
 *
 * Modes mirror scale-case.ts: `run`; `crash` (SQLite, SIGKILLs its own process after `crashAfter` node starts);
 * `resume` (a fresh process: build and compile the same graph on the same file, read the latest checkpoint, invoke
 * with `null` input to continue the thread, and run to the end). It never writes anything but its SQLite file.
 * Must never be imported by src/.
 */
import { readFileSync, rmSync, statSync } from "node:fs";
import {
  Annotation,
  END,
  MemorySaver,
  START,
  Send,
  StateGraph,
  entrypoint,
  task,
  type BaseCheckpointSaver,
} from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import Database from "better-sqlite3";
import { randomDag } from "./support/dag.js";
import { processWriteBytes } from "./support/stats.js";

/**
 * How the DAG is written in LangGraph (issue 34: the peer's idiomatic graphs as well as the one-node-per-task graph):
 * `nodes`, one graph node per task (the file comment); `send`, map-reduce with `Send`: a `schedule` node whose
 * conditional edge sends every ready task (all dependencies in `outputs`, not itself) to one `task` node, which
 * returns to `schedule`, until nothing is left; `functional`, the Functional API: one `entrypoint` that calls a
 * `task` per DAG task as soon as the promises of its dependencies resolved (`Promise.all` of them).
 */
export type PeerGraph = "nodes" | "send" | "functional";

export interface PeerOptions {
  mode: "run" | "crash" | "resume";
  /** The LangGraph writing of the DAG (default `nodes`; crash and resume use `nodes`). */
  graph?: PeerGraph;
  tasks: number;
  store: "memory" | "sqlite";
  file?: string;
  width?: number;
  /** crash: SIGKILL after this many node starts. */
  crashAfter?: number;
}

export interface PeerResult {
  graph: PeerGraph;
  tasks: number;
  store: PeerOptions["store"];
  mode: PeerOptions["mode"];
  /** Building the StateGraph (nodes, edges) and `compile()`, ms. */
  compileMs: number;
  /** `invoke` → resolved (resume: the continuing invoke), ms. */
  runMs: number;
  /** CPU time of this process (user + system, all threads) from building the graph to the run's end, ms. */
  cpuMs: number;
  /** Node functions called in this process. */
  ran: number;
  /** Task outputs in the final state (must equal `tasks`). */
  outputs: number;
  peakRssMb: number;
  diskWriteBytes: number;
  /** SQLite file + WAL after the run, bytes (0 for memory). */
  fileBytes: number;
  /** sqlite: checkpoint rows and pending-write rows in the file, and the bytes of their serialised blobs. */
  checkpoints?: number;
  writeRows?: number;
  logicalBytes?: number;
  /** Largest single checkpoint blob, bytes (what one checkpoint holds at the end of the run). */
  largestCheckpointBytes?: number;
  /** sqlite: journal mode and synchronous level in force on the saver's connection (2 = FULL, 1 = NORMAL). */
  journalMode?: string;
  synchronous?: number;
  /** sqlite: the synchronous level a `SqliteSaver.fromConnString` connection has by default (before we set FULL). */
  defaultSynchronous?: number;
  /** resume only: load (build + compile + read the latest checkpoint), and time to the first node running again. */
  loadMs?: number;
  toExecutingMs?: number;
  completedBeforeResume?: number;
  rerunCompleted?: number;
}

type Outputs = Record<string, string>;

const State = Annotation.Root({
  outputs: Annotation<Outputs>({ reducer: (a, b) => ({ ...a, ...b }), default: () => ({}) }),
});

interface Hooks {
  onStart(taskId: string): void;
}

/** The runnable every variant compiles to: what `invoke` needs here. */
interface Runnable {
  invoke(input: unknown, config: Record<string, unknown>): Promise<{ outputs: Outputs }>;
}

/** The DAG as a compiled LangGraph graph on `checkpointer`. */
function buildNodesGraph(tasks: number, width: number, checkpointer: BaseCheckpointSaver, hooks: Hooks) {
  const dag = randomDag({ tasks, width });
  // StateGraph's node and edge names are typed from the literal names added; a DAG built at run time has string
  // names, so the builder is used through a string-keyed view of itself.
  const graph = new StateGraph(State) as unknown as {
    addNode(name: string, fn: () => Promise<{ outputs: Outputs }>): unknown;
    addEdge(from: string | string[], to: string): unknown;
    compile(o: { checkpointer: BaseCheckpointSaver }): {
      invoke(input: unknown, config: Record<string, unknown>): Promise<{ outputs: Outputs }>;
    };
  };
  for (const t of dag.tasks) {
    const id = t.taskId;
    graph.addNode(id, async () => {
      hooks.onStart(id);
      return { outputs: { [id]: `done ${id}` } };
    });
  }
  for (const t of dag.tasks) {
    const [first] = t.dependsOn;
    if (first === undefined) graph.addEdge(START, t.taskId);
    else if (t.dependsOn.length === 1) graph.addEdge(first, t.taskId);
    else graph.addEdge(t.dependsOn, t.taskId);
  }
  return graph.compile({ checkpointer });
}

/** The DAG as map-reduce with `Send`: `schedule` sends every ready task to the `task` node, super-step by super-step. */
function buildSendGraph(tasks: number, width: number, checkpointer: BaseCheckpointSaver, hooks: Hooks): Runnable {
  const dag = randomDag({ tasks, width });
  const graph = new StateGraph(State) as unknown as {
    addNode(name: string, fn: (input: { taskId?: string }) => Promise<{ outputs?: Outputs }>): unknown;
    addEdge(from: string, to: string): unknown;
    addConditionalEdges(from: string, route: (state: { outputs: Outputs }) => Send[] | string): unknown;
    compile(o: { checkpointer: BaseCheckpointSaver }): Runnable;
  };
  graph.addNode("schedule", () => Promise.resolve({}));
  graph.addNode("task", (input) => {
    const id = input.taskId as string;
    hooks.onStart(id);
    return Promise.resolve({ outputs: { [id]: `done ${id}` } });
  });
  graph.addEdge(START, "schedule");
  graph.addConditionalEdges("schedule", (state) => {
    const ready = dag.tasks.filter((t) => !(t.taskId in state.outputs) && t.dependsOn.every((d) => d in state.outputs));
    return ready.length === 0 ? END : ready.map((t) => new Send("task", { taskId: t.taskId }));
  });
  graph.addEdge("task", "schedule");
  return graph.compile({ checkpointer });
}

/** The DAG in the Functional API: an entrypoint calling one `task` per DAG task once its dependencies resolved. */
function buildFunctional(tasks: number, width: number, checkpointer: BaseCheckpointSaver, hooks: Hooks): Runnable {
  const dag = randomDag({ tasks, width });
  const runTask = task("runTask", (id: string) => {
    hooks.onStart(id);
    return Promise.resolve(`done ${id}`);
  });
  const workflow = entrypoint({ name: "dag", checkpointer }, async () => {
    const results = new Map<string, Promise<string>>();
    // Tasks come in level order, so every dependency's promise exists before its dependents are chained on it.
    for (const t of dag.tasks)
      results.set(
        t.taskId,
        Promise.all(t.dependsOn.map((d) => results.get(d))).then(async () => await runTask(t.taskId)),
      );
    const outputs: Outputs = {};
    for (const [id, result] of results) outputs[id] = await result;
    return { outputs };
  });
  return workflow as unknown as Runnable;
}

function buildGraph(
  graph: PeerGraph,
  tasks: number,
  width: number,
  checkpointer: BaseCheckpointSaver,
  hooks: Hooks,
): Runnable {
  if (graph === "send") return buildSendGraph(tasks, width, checkpointer, hooks);
  if (graph === "functional") return buildFunctional(tasks, width, checkpointer, hooks);
  return buildNodesGraph(tasks, width, checkpointer, hooks);
}

function vmHwmMb(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

function fileBytes(file: string | undefined): number {
  if (file === undefined) return 0;
  let total = 0;
  for (const f of [file, `${file}-wal`]) {
    try {
      total += statSync(f).size;
    } catch {
      // absent
    }
  }
  return total;
}

/** The saver's default synchronous level, on a throwaway connection to a scratch file beside `file`. */
async function defaultSynchronous(file: string): Promise<number> {
  const scratch = `${file}.default-probe`;
  const saver = SqliteSaver.fromConnString(scratch);
  await saver.getTuple({ configurable: { thread_id: "probe" } }); // runs the saver's own (protected) setup
  const level = Number(saver.db.pragma("synchronous", { simple: true }));
  saver.db.close();
  for (const f of [scratch, `${scratch}-wal`, `${scratch}-shm`]) rmSync(f, { force: true });
  return level;
}

async function runCase(o: PeerOptions): Promise<PeerResult> {
  const width = o.width ?? 100;
  const levels = Math.ceil(o.tasks / width);
  const graph = o.graph ?? "nodes";
  if (graph !== "nodes" && o.mode !== "run") throw new Error("crash and resume use the one-node-per-task graph");
  // One super-step per level; with Send two (schedule, then the level's tasks).
  const config = {
    configurable: { thread_id: "bench" },
    recursionLimit: (graph === "send" ? 2 * levels : levels) + 10,
    durability: "sync" as const,
  };
  const result: Partial<PeerResult> = { graph, tasks: o.tasks, store: o.store, mode: o.mode };
  let db: Database.Database | undefined;
  let checkpointer: BaseCheckpointSaver;
  if (o.store === "sqlite") {
    if (o.file === undefined) throw new Error("the sqlite store needs a file path");
    if (o.mode !== "resume") result.defaultSynchronous = await defaultSynchronous(o.file);
    db = new Database(o.file);
    const saver = new SqliteSaver(db);
    await saver.getTuple({ configurable: { thread_id: "bench" } }); // runs the saver's setup: WAL, tables
    db.pragma("synchronous = FULL");
    result.journalMode = String(db.pragma("journal_mode", { simple: true }));
    result.synchronous = Number(db.pragma("synchronous", { simple: true }));
    checkpointer = saver;
  } else {
    if (o.mode !== "run") throw new Error("crash and resume need the sqlite store");
    checkpointer = new MemorySaver();
  }

  let ran = 0;
  let firstStart: (() => void) | undefined;
  const ranIds: string[] = [];
  const crashAfter = o.mode === "crash" ? (o.crashAfter ?? Math.floor(o.tasks / 2)) : Infinity;
  const hooks: Hooks = {
    onStart(taskId) {
      ran += 1;
      if (o.mode === "resume") ranIds.push(taskId);
      firstStart?.();
      firstStart = undefined;
      if (ran >= crashAfter) process.kill(process.pid, "SIGKILL");
    },
  };

  const io0 = processWriteBytes("self");
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const app = buildGraph(graph, o.tasks, width, checkpointer, hooks);
  result.compileMs = performance.now() - t0;
  let final: { outputs: Outputs };
  if (o.mode === "resume") {
    // What is durable: the outputs in the latest checkpoint plus the pending writes of tasks that finished in the
    // super-step the crash interrupted (LangGraph applies those instead of running the tasks again).
    const tuple = await checkpointer.getTuple({ configurable: { thread_id: "bench" } });
    if (!tuple) throw new Error("no checkpoint to resume from");
    const done = new Set(Object.keys((tuple.checkpoint.channel_values.outputs ?? {}) as Outputs));
    for (const [, channel, value] of tuple.pendingWrites ?? []) {
      if (channel === "outputs") for (const k of Object.keys(value as Outputs)) done.add(k);
    }
    result.loadMs = performance.now() - t0;
    const running = new Promise<number>((resolve) => (firstStart = () => resolve(performance.now())));
    const t1 = performance.now();
    final = await app.invoke(null, config);
    result.runMs = performance.now() - t1;
    result.toExecutingMs = (await running) - t0;
    result.completedBeforeResume = done.size;
    result.rerunCompleted = ranIds.filter((id) => done.has(id)).length;
  } else {
    const t1 = performance.now();
    final = await app.invoke({}, config);
    result.runMs = performance.now() - t1;
  }
  const cpu = process.cpuUsage(cpu0);
  result.cpuMs = (cpu.user + cpu.system) / 1000;
  result.ran = ran;
  result.outputs = Object.keys(final.outputs).length;
  result.diskWriteBytes = processWriteBytes("self") - io0;
  if (db) {
    const c = db
      .prepare(
        "SELECT count(*) AS n, coalesce(sum(length(checkpoint) + length(metadata)), 0) AS bytes, coalesce(max(length(checkpoint)), 0) AS largest FROM checkpoints",
      )
      .get() as { n: number; bytes: number; largest: number };
    const w = db.prepare("SELECT count(*) AS n, coalesce(sum(length(value)), 0) AS bytes FROM writes").get() as {
      n: number;
      bytes: number;
    };
    result.checkpoints = c.n;
    result.writeRows = w.n;
    result.logicalBytes = c.bytes + w.bytes;
    result.largestCheckpointBytes = c.largest;
    db.close();
  }
  result.fileBytes = fileBytes(o.file);
  result.peakRssMb = vmHwmMb();
  return result as PeerResult;
}

const options = JSON.parse(process.argv[2] ?? "{}") as PeerOptions;
runCase(options).then(
  (r) => {
    process.stdout.write(`${JSON.stringify(r)}\n`, () => process.exit(0));
  },
  (err: unknown) => {
    process.stderr.write(`langgraph-case failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
