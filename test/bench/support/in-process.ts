/**
 * Benchmark support: a `ProductService` wired in-process the way `test/support/fakes.ts` and the server wire it, with
 * the real clock, a real run-state authority (memory or a SQLite file), a leader that returns a given plan, workers
 * that complete instantly, a notifier that only counts, and an authority meter (calls, bytes, time).
 *
 * Owns the scheduler-scale and durability workloads' plumbing (issue 7, figures 4 and 5). It must never fake time,
 * never skip the authority, and never be imported by src/.
 */
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { SqliteAuthority } from "../../../src/adapters/persistence/sqlite-authority.js";
import { nodeSha256Hex } from "../../../src/adapters/system/digest.js";
import {
  DEFAULT_PRODUCT_OPTIONS,
  type ProductContext,
  type ProductOptions,
} from "../../../src/core/product/context.js";
import { ProductService } from "../../../src/core/product/service.js";
import { ProductStore } from "../../../src/core/product/store.js";
import type {
  DeleteOptions,
  AgentDirectory,
  AgentInfo,
  Clock,
  DraftPlan,
  LeaderPort,
  Logger,
  Notifier,
  OwnerLiveness,
  RecordInfo,
  RunStateAuthority,
  StoredEvent,
  StoredRecord,
  WorkerEvents,
  WorkerPort,
  WorkerRequest,
  WorkerResult,
} from "../../../src/core/ports.js";

/** The real clock, as the composition root builds it (timers unref'd so they never keep the process alive). */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, Math.min(Math.max(0, ms), 2_147_483_647));
    t.unref();
    return () => clearTimeout(t);
  },
};

/** A logger that drops everything except errors, which it keeps (a benchmark that logs errors is broken). */
export class QuietLogger implements Logger {
  readonly errors: { obj: object; msg?: string }[] = [];
  debug(): void {}
  info(): void {}
  warn(): void {}
  error(obj: object, msg?: string): void {
    this.errors.push({ obj, ...(msg !== undefined ? { msg } : {}) });
  }
  child(): Logger {
    return this;
  }
}

/**
 * Counts notifications by method and resolves waiters; keeps no payloads (a 50,000-task run must not be measured
 * with a recorder's memory on top).
 */
export class CountingNotifier implements Notifier {
  readonly counts = new Map<string, number>();
  private waiters: {
    method: string;
    pred: (p: Record<string, unknown>) => boolean;
    resolve: (p: Record<string, unknown>) => void;
  }[] = [];

  notify(method: string, params: Record<string, unknown>): void {
    this.counts.set(method, (this.counts.get(method) ?? 0) + 1);
    if (this.waiters.length === 0) return;
    this.waiters = this.waiters.filter((w) => {
      if (w.method !== method || !w.pred(params)) return true;
      w.resolve(params);
      return false;
    });
  }

  /** Resolves with the params of the next notification `method` matching `pred` (future ones only). */
  next(method: string, pred: (p: Record<string, unknown>) => boolean = () => true): Promise<Record<string, unknown>> {
    return new Promise((resolve) => this.waiters.push({ method, pred, resolve }));
  }

  count(method: string): number {
    return this.counts.get(method) ?? 0;
  }
}

/** A leader that returns one fixed plan; every other turn is an error (the benchmark never asks for one). */
export class FixedPlanLeader implements LeaderPort {
  constructor(private readonly draft: DraftPlan) {}
  async plan() {
    return { kind: "plan" as const, plan: this.draft, message: "Benchmark plan." };
  }
  async message() {
    return { response: "ok" };
  }
  async consultOnFailure() {
    return { kind: "giveUp" as const, message: "Benchmark: give up." };
  }
  async deriveChecklist(): Promise<never> {
    throw new Error("not used by the benchmark");
  }
  async planPhase(): Promise<never> {
    throw new Error("not used by the benchmark");
  }
  async assess(): Promise<never> {
    throw new Error("not used by the benchmark");
  }
}

/**
 * How an instant worker's result arrives: `instant` as an already resolved promise (the whole run can then proceed
 * in one turn of the event loop), `io` on a later turn (`setImmediate`), as a real agent's answer arrives through an
 * I/O callback, one per completion.
 */
export type Completion = "instant" | "io";

/**
 * Workers that complete every task at once with a short output, reporting no usage (so the core estimates it, as
 * with most agents). Counts executions per task id so at-most-once can be checked, and can run a hook after each
 * start (e.g. to crash the process mid-run).
 */
export class InstantWorker implements WorkerPort {
  started = 0;
  readonly runs = new Map<string, number>();
  afterEach: ((started: number) => void) | null = null;

  constructor(private readonly completion: Completion = "instant") {}

  async runTask(request: WorkerRequest, _events: WorkerEvents): Promise<WorkerResult> {
    this.started += 1;
    const id = request.task.taskId;
    this.runs.set(id, (this.runs.get(id) ?? 0) + 1);
    this.afterEach?.(this.started);
    if (this.completion === "io") await new Promise<void>((resolve) => setImmediate(resolve));
    if (request.signal.aborted) return { outcome: "cancelled" };
    return { outcome: "completed", output: `done ${id}` };
  }

  async shutdown(): Promise<void> {}
}

const BENCH_AGENT: AgentInfo = { agentId: "bench", name: "Bench worker", role: "worker", strengths: [] };

class OneAgent implements AgentDirectory {
  list(): AgentInfo[] {
    return [{ ...BENCH_AGENT }];
  }
  get(agentId: string): AgentInfo | undefined {
    return agentId === BENCH_AGENT.agentId ? { ...BENCH_AGENT } : undefined;
  }
}

/** What an `AuthorityMeter` counted: calls, JSON bytes handed to the authority, and time spent inside it. */
export interface MeterReading {
  writes: number;
  appends: number;
  puts: number;
  events: number;
  /** UTF-8 bytes of the JSON of every appended event and put value (the logical write volume; with `countBytes`). */
  bytes: number;
  /** Milliseconds spent inside write calls (SQLite does its work, fsync included, synchronously inside the call). */
  writeMs: number;
  reads: number;
  readMs: number;
  /** `bytes` split by event type (`event:task`…) and record kind (`record:snapshot`…). */
  bytesBy: Record<string, number>;
}

/**
 * Wraps an authority and meters it. Behaviour is unchanged: every call is passed through as is. Counting bytes costs
 * one extra `JSON.stringify` of everything written, so it is off unless `countBytes` (the timing runs leave it off).
 */
export class AuthorityMeter implements RunStateAuthority {
  readonly reading: MeterReading = {
    writes: 0,
    appends: 0,
    puts: 0,
    events: 0,
    bytes: 0,
    writeMs: 0,
    reads: 0,
    readMs: 0,
    bytesBy: {},
  };

  constructor(
    readonly inner: RunStateAuthority,
    private readonly countBytes = false,
  ) {}

  get name(): string {
    return this.inner.name;
  }

  private count(key: string, value: unknown): void {
    if (!this.countBytes) return;
    const bytes = Buffer.byteLength(JSON.stringify(value));
    this.reading.bytes += bytes;
    this.reading.bytesBy[key] = (this.reading.bytesBy[key] ?? 0) + bytes;
  }

  private async timed<T>(kind: "write" | "read", fn: () => Promise<T>): Promise<T> {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      const ms = performance.now() - t0;
      if (kind === "write") {
        this.reading.writes += 1;
        this.reading.writeMs += ms;
      } else {
        this.reading.reads += 1;
        this.reading.readMs += ms;
      }
    }
  }

  get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    return this.timed("read", () => this.inner.get(projectId, kind, id));
  }
  put(projectId: string, kind: string, id: string, value: object, expectedRevision: number | null) {
    this.reading.puts += 1;
    this.count(`record:${kind}`, value);
    return this.timed("write", () => this.inner.put(projectId, kind, id, value, expectedRevision));
  }
  delete(
    projectId: string,
    kind: string,
    id: string,
    expectedRevision?: number,
    options?: DeleteOptions,
  ): Promise<boolean> {
    return this.timed("write", () => this.inner.delete(projectId, kind, id, expectedRevision, options));
  }
  list(projectId: string, kind: string, prefix?: string): Promise<RecordInfo[]> {
    return this.timed("read", () => this.inner.list(projectId, kind, prefix));
  }
  appendEvents(projectId: string, stream: string, events: object[], expectedSeq: number) {
    this.reading.appends += 1;
    this.reading.events += events.length;
    for (const e of events) this.count(`event:${String((e as { type?: unknown }).type)}`, e);
    return this.timed("write", () => this.inner.appendEvents(projectId, stream, events, expectedSeq));
  }
  readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    return this.timed("read", () =>
      limit === undefined
        ? this.inner.readEvents(projectId, stream, afterSeq)
        : this.inner.readEvents(projectId, stream, afterSeq, limit),
    );
  }
  deleteStream(projectId: string, stream: string): Promise<boolean> {
    return this.timed("write", () => this.inner.deleteStream(projectId, stream));
  }
  get pruneEvents():
    | ((projectId: string, stream: string, beforeSeq: number, afterSeq?: number) => Promise<number>)
    | undefined {
    const prune = this.inner.pruneEvents;
    if (prune === undefined) return undefined;
    return (projectId, stream, beforeSeq, afterSeq) =>
      this.timed("write", () => prune.call(this.inner, projectId, stream, beforeSeq, afterSeq));
  }
  // The optional methods pass through as the inner authority has them (the store and the fleet choose their paths by
  // them: one-statement listings, change marks, the change feed), reads timed like the others.
  get listValues(): RunStateAuthority["listValues"] {
    const f = this.inner.listValues;
    return f && ((projectId, kind, prefix) => this.timed("read", () => f.call(this.inner, projectId, kind, prefix)));
  }
  get listAcrossProjects(): RunStateAuthority["listAcrossProjects"] {
    const f = this.inner.listAcrossProjects;
    return f && ((kind, options) => this.timed("read", () => f.call(this.inner, kind, options)));
  }
  get listByCreation(): RunStateAuthority["listByCreation"] {
    const f = this.inner.listByCreation;
    return f && ((kind, options) => this.timed("read", () => f.call(this.inner, kind, options)));
  }
  get listProjects(): RunStateAuthority["listProjects"] {
    const f = this.inner.listProjects;
    return f && (() => this.timed("read", () => f.call(this.inner)));
  }
  get changeMark(): RunStateAuthority["changeMark"] {
    return this.inner.changeMark?.bind(this.inner);
  }
  get shareChangeMarks(): RunStateAuthority["shareChangeMarks"] {
    return this.inner.shareChangeMarks?.bind(this.inner);
  }
  get watch(): RunStateAuthority["watch"] {
    return this.inner.watch?.bind(this.inner);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

export type AuthorityKind = "memory" | "sqlite";

/** Opens the authority of a benchmark case: a fresh `MemoryAuthority`, or a `SqliteAuthority` on `sqlitePath`. */
export function openAuthority(kind: AuthorityKind, sqlitePath?: string): RunStateAuthority {
  if (kind === "memory") return new MemoryAuthority();
  if (sqlitePath === undefined) throw new Error("the sqlite authority needs a file path");
  return SqliteAuthority.open(sqlitePath);
}

export interface BenchService {
  service: ProductService;
  /** The product store the service writes through (over `meter`). */
  store: ProductStore;
  notifier: CountingNotifier;
  worker: InstantWorker;
  meter: AuthorityMeter;
  logger: QuietLogger;
}

/** Ids issued by every bench service of this process: unique within the process, so services can share a store. */
let idsIssued = 0;

/**
 * Builds one "server process" worth of core: a `ProductService` over `authority` (metered), with the given plan,
 * instant workers and product options (`maxParallelTasks` etc. on top of the defaults), and the owner liveness the
 * leases consult when given (as the server passes its own).
 */
export function benchService(
  authority: RunStateAuthority,
  plan: DraftPlan,
  options: Partial<ProductOptions> = {},
  countBytes = false,
  completion: Completion = "instant",
  liveness?: OwnerLiveness,
): BenchService {
  const meter = new AuthorityMeter(authority, countBytes);
  const opts: ProductOptions = { ...DEFAULT_PRODUCT_OPTIONS, ...options };
  const notifier = new CountingNotifier();
  const worker = new InstantWorker(completion);
  const logger = new QuietLogger();
  const leader = new FixedPlanLeader(plan);
  const store = new ProductStore(meter, opts.checkpointHistory);
  const ctx: ProductContext = {
    store,
    leader: () => leader,
    workers: worker,
    agents: new OneAgent(),
    notifier,
    clock: realClock,
    ids: (prefix) => `${prefix}_${(idsIssued += 1)}_${process.pid}`,
    logger,
    defer: (fn) => setImmediate(fn),
    options: opts,
    digest: nodeSha256Hex,
    ...(liveness ? { liveness } : {}),
  };
  return { service: new ProductService(ctx), store, notifier, worker, meter, logger };
}
