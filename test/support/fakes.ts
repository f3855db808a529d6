/**
 * In-process fakes of the core's ports (src/core/ports.ts), shared by the behaviour tests of the core.
 *
 * Owns: a manual `FakeClock`, deterministic ids, a recording `Notifier` and `Logger`, a `ScriptedLeader`, a
 * `FakeWorker` whose behaviour per task id is scripted per attempt, a static agent directory, small plan builders,
 * condition-based waiting helpers (never fixed sleeps) and `createHarness`, which wires all of them into a
 * `ProductService` over a `MemoryAuthority`. It must never spawn processes, touch the filesystem or read the real
 * wall clock for anything but the timeouts of `waitUntil`.
 */
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import { DEFAULT_PRODUCT_OPTIONS, type ProductContext, type ProductOptions } from "../../src/core/product/context.js";
import { ProductService } from "../../src/core/product/service.js";
import { ProductStore } from "../../src/core/product/store.js";
import type {
  AcceptanceCriterion,
  AgentDirectory,
  AgentInfo,
  AssessRequest,
  AssessResult,
  ChecklistRequest,
  ChecklistResult,
  Clock,
  DraftPlan,
  FailureConsultation,
  FailureDecision,
  IdGenerator,
  LeaderPort,
  Logger,
  MessageRequest,
  MessageResult,
  Notifier,
  OwnerLiveness,
  PhasePlanRequest,
  PhasePlanResult,
  PlanRequest,
  PlanResult,
  WorkerEvents,
  WorkerPort,
  WorkerRequest,
  WorkerResult,
  WorkerFailureKind,
  RefusedPermission,
} from "../../src/core/ports.js";
import type { Budget, Instance, Task } from "../../protocol/common.js";

// ---------------------------------------------------------------------------------------------------------------
// Waiting without sleeping

/** Yields one macrotask turn (lets setImmediate-deferred work and every queued microtask run). */
export const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Lets queued work run for `turns` macrotask turns. Everything the fakes do is in-process and promise-based, so a
 * few turns drain the orchestrator's queue; use it only to assert that something did NOT happen.
 */
export async function drain(turns = 25): Promise<void> {
  for (let i = 0; i < turns; i += 1) await tick();
}

/**
 * Resolves once `condition()` is true, polling every macrotask turn. Rejects after `timeoutMs` of real time with
 * `what` in the message (a wait, not a sleep: it returns as soon as the condition holds).
 */
export async function waitUntil(condition: () => boolean, what = "condition", timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}.`);
    await tick();
  }
}

/** A latch a test opens by hand; used to hold a fake worker or leader turn until the test says so. */
export class Gate {
  readonly promise: Promise<void>;
  #open!: () => void;
  #released = false;

  constructor() {
    this.promise = new Promise((resolve) => (this.#open = resolve));
  }

  /** Opens the gate; idempotent. */
  release(): void {
    this.#released = true;
    this.#open();
  }

  get released(): boolean {
    return this.#released;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Clock, ids, logger

/** A manual clock: time moves only through `advance`, which fires due timers in due order. */
export class FakeClock implements Clock {
  #now: number;
  #timers: { due: number; seq: number; fn: () => void }[] = [];
  #seq = 0;

  constructor(start = Date.parse("2030-01-01T00:00:00.000Z")) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(ms: number, fn: () => void): () => void {
    const timer = { due: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  /** Moves time forward by `ms` milliseconds, firing every timer that falls due (also ones set while firing). */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.due <= target).sort((a, b) => a.due - b.due || a.seq - b.seq)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = Math.max(this.#now, due.due);
      due.fn();
    }
    this.#now = target;
  }

  /** Number of armed timers. */
  get pendingTimers(): number {
    return this.#timers.length;
  }
}

/** Deterministic ids: `prd_1`, `prd_2`, `ckp_1`… one counter per prefix. Share one generator between "processes". */
export function sequentialIds(): IdGenerator {
  const counters = new Map<string, number>();
  return (prefix) => {
    const n = (counters.get(prefix) ?? 0) + 1;
    counters.set(prefix, n);
    return `${prefix}_${n}`;
  };
}

export interface LogEntry {
  level: "debug" | "info" | "warn" | "error";
  obj: object;
  msg?: string;
}

/** A logger that keeps every entry in memory (children share the parent's list). */
export class RecordingLogger implements Logger {
  constructor(readonly entries: LogEntry[] = []) {}
  debug(obj: object, msg?: string): void {
    this.entries.push({ level: "debug", obj, ...(msg !== undefined ? { msg } : {}) });
  }
  info(obj: object, msg?: string): void {
    this.entries.push({ level: "info", obj, ...(msg !== undefined ? { msg } : {}) });
  }
  warn(obj: object, msg?: string): void {
    this.entries.push({ level: "warn", obj, ...(msg !== undefined ? { msg } : {}) });
  }
  error(obj: object, msg?: string): void {
    this.entries.push({ level: "error", obj, ...(msg !== undefined ? { msg } : {}) });
  }
  child(): Logger {
    return this;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Notifier

export interface Sent {
  method: string;
  params: Record<string, unknown>;
}

/** Records every notification in order; `mark` inserts a labelled marker so tests can assert ordering. */
export class RecordingNotifier implements Notifier {
  readonly sent: Sent[] = [];

  notify(method: string, params: Record<string, unknown>): void {
    this.sent.push({ method, params: structuredClone(params) });
  }

  /** Inserts a marker entry (method `@mark`, `params.label`) at the current position. */
  mark(label: string): void {
    this.sent.push({ method: "@mark", params: { label } });
  }

  /** Notifications with this method, optionally of one product and matching `where`. */
  of(method: string, productId?: string, where?: (p: Record<string, unknown>) => boolean): Record<string, unknown>[] {
    return this.sent
      .filter((s) => s.method === method && (productId === undefined || s.params.productId === productId))
      .map((s) => s.params)
      .filter((p) => (where ? where(p) : true));
  }

  /** Index in `sent` of the first entry matching, or -1. */
  indexOf(method: string, where: (p: Record<string, unknown>) => boolean = () => true): number {
    return this.sent.findIndex((s) => s.method === method && where(s.params));
  }

  /** `product.taskStatus` notifications of one task, as `status@attempt` strings in order. */
  taskTrail(taskId: string): string[] {
    return this.of("product.taskStatus", undefined, (p) => p.taskId === taskId).map(
      (p) => `${String(p.status)}@${String(p.attempt)}`,
    );
  }

  /** Resolves with the first (or `nth`, 1-based) notification matching; see `waitUntil` for the timeout. */
  async next(
    method: string,
    where: (p: Record<string, unknown>) => boolean = () => true,
    nth = 1,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>> {
    await waitUntil(() => this.of(method, undefined, where).length >= nth, `notification ${method} #${nth}`, timeoutMs);
    return this.of(method, undefined, where)[nth - 1] as Record<string, unknown>;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Leader

/**
 * A leader whose answers are scripted. `plan` returns the given plan (or result); `message` returns the queued
 * answers in order (default `{response: "ok"}`); `consultOnFailure` returns the queued decisions in order (default
 * give up). Every call is recorded. `planGate` / `consultGate`, when set, hold `plan()` / `consultOnFailure()` until
 * released.
 */
export class ScriptedLeader implements LeaderPort {
  readonly planCalls: PlanRequest[] = [];
  readonly messageCalls: MessageRequest[] = [];
  readonly consultCalls: FailureConsultation[] = [];
  planGate: Gate | null = null;
  consultGate: Gate | null = null;
  readonly messageAnswers: MessageResult[] = [];
  readonly decisions: FailureDecision[] = [];

  constructor(public planResult: DraftPlan | PlanResult) {}

  async plan(request: PlanRequest): Promise<PlanResult> {
    this.planCalls.push(request);
    if (this.planGate) await this.planGate.promise;
    const r = this.planResult;
    return "kind" in r ? r : { kind: "plan", plan: structuredClone(r), message: "Here is the plan." };
  }

  async message(request: MessageRequest): Promise<MessageResult> {
    this.messageCalls.push(request);
    return this.messageAnswers.shift() ?? { response: "ok" };
  }

  async consultOnFailure(request: FailureConsultation): Promise<FailureDecision> {
    this.consultCalls.push({ ...request, failedTask: structuredClone(request.failedTask) });
    if (this.consultGate) await this.consultGate.promise;
    return this.decisions.shift() ?? { kind: "giveUp", message: "Giving up." };
  }

  // Goal runs: scripted criteria, phase plans (queued, the last one repeats) and assessments (queued; by default the
  // phase's targets pass when every task completed).
  readonly checklistCalls: ChecklistRequest[] = [];
  readonly phaseCalls: PhasePlanRequest[] = [];
  readonly assessCalls: AssessRequest[] = [];
  criteria: AcceptanceCriterion[] = [{ id: "c1", text: "The goal is done." }];
  readonly phasePlans: PhasePlanResult[] = [];
  readonly assessments: AssessResult[] = [];
  phaseGate: Gate | null = null;

  async deriveChecklist(request: ChecklistRequest): Promise<ChecklistResult> {
    this.checklistCalls.push(request);
    return { criteria: structuredClone(this.criteria), message: "Criteria derived." };
  }

  async planPhase(request: PhasePlanRequest): Promise<PhasePlanResult> {
    this.phaseCalls.push(
      structuredClone({ ...request, signal: undefined, onText: undefined }) as unknown as PhasePlanRequest,
    );
    if (this.phaseGate) await this.phaseGate.promise;
    const next = this.phasePlans.length > 1 ? this.phasePlans.shift() : this.phasePlans[0];
    if (next) return structuredClone(next);
    const r = this.planResult;
    const plan = "kind" in r ? (r.kind === "plan" ? r.plan : undefined) : r;
    if (!plan) throw new Error("ScriptedLeader has no phase plan");
    return {
      plan: structuredClone(plan),
      message: "Phase planned.",
      targets: request.criteria.filter((c) => !c.passed).map((c) => c.id),
    };
  }

  async assess(request: AssessRequest): Promise<AssessResult> {
    this.assessCalls.push(request);
    const scripted = this.assessments.shift();
    if (scripted) return scripted;
    const ok = request.tasks.length > 0 && request.tasks.every((t) => t.status === "completed");
    const passed = request.criteria.filter((c) => c.passed || (ok && request.targets.includes(c.id))).map((c) => c.id);
    return { passed, message: "Assessed." };
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Worker

/** What one execution of a task does. Every step honours `request.signal`: an abort settles it as `cancelled`. */
export type WorkerStep =
  | {
      kind: "complete";
      /** Default `out:<taskId>`. */
      output?: string;
      /** Reported through `onUsage` right before settling. */
      usage?: { inputTokens: number; outputTokens: number };
      /** Streamed through `onText` when the attempt starts. */
      text?: string[];
      /** Holds the attempt (task stays `running`) until the test releases it. */
      gate?: Gate;
      /** Settles after this many ms of the harness's FakeClock (advance it to finish). */
      afterMs?: number;
    }
  | {
      kind: "fail";
      error?: string;
      gate?: Gate;
      /** The failure's kind (a configuration error, a refusal by the permission policy). */
      failure?: WorkerFailureKind;
      remediation?: string;
      /** False: the attempt failed before it sent a prompt (nothing is charged). */
      prompted?: boolean;
      /** Reported through `onPermissionRefused` before settling. */
      refusals?: RefusedPermission[];
    }
  | { kind: "wait"; question: string }
  /** Never settles on its own; only an abort ends it (with `cancelled`). */
  | { kind: "hang" };

export interface Execution {
  taskId: string;
  attempt: number;
  request: WorkerRequest;
  /** Position in the worker's global start/end sequence. */
  startSeq: number;
  endSeq?: number;
  result?: WorkerResult;
}

/**
 * A worker whose behaviour per task id is scripted per execution (`script`): the nth execution of a task uses step n
 * (whatever attempt number the orchestrator gives it; rollback and replay restart attempts), the last step repeats;
 * unscripted tasks complete with `out:<taskId>`. Logs every execution with start/end sequence numbers.
 */
export class FakeWorker implements WorkerPort {
  readonly executions: Execution[] = [];
  readonly #scripts = new Map<string, WorkerStep[]>();
  #seq = 0;
  shutdownCalls = 0;
  /** Awaited at the start of every attempt, before the step runs (e.g. to read the authority). */
  onStart: ((request: WorkerRequest) => Promise<void> | void) | null = null;

  constructor(private readonly clock?: Clock) {}

  /** Scripts the executions of `taskId`, in order. */
  script(taskId: string, ...steps: WorkerStep[]): this {
    this.#scripts.set(taskId, steps);
    return this;
  }

  /** Task ids in the order their attempts started. */
  get started(): string[] {
    return this.executions.map((e) => e.taskId);
  }

  /** Executions of one task. */
  runsOf(taskId: string): Execution[] {
    return this.executions.filter((e) => e.taskId === taskId);
  }

  /** True once attempt `attempt` (default: any) of `taskId` has started. */
  hasStarted(taskId: string, attempt?: number): boolean {
    return this.executions.some((e) => e.taskId === taskId && (attempt === undefined || e.attempt === attempt));
  }

  async runTask(request: WorkerRequest, events: WorkerEvents): Promise<WorkerResult> {
    const taskId = request.task.taskId;
    const execution: Execution = { taskId, attempt: request.attempt, request, startSeq: this.#seq++ };
    this.executions.push(execution);
    if (this.onStart) await this.onStart(request);
    const steps = this.#scripts.get(taskId) ?? [];
    const nth = this.executions.filter((e) => e.taskId === taskId).length;
    const step: WorkerStep = steps[Math.min(nth, steps.length) - 1] ?? { kind: "complete" };
    const result = await this.#run(step, request, events);
    execution.endSeq = this.#seq++;
    execution.result = result;
    return result;
  }

  async #run(step: WorkerStep, request: WorkerRequest, events: WorkerEvents): Promise<WorkerResult> {
    const signal = request.signal;
    if (signal.aborted) return { outcome: "cancelled" };
    const aborted = new Promise<"aborted">((resolve) =>
      signal.addEventListener("abort", () => resolve("aborted"), { once: true }),
    );
    const hold = async (gate?: Gate, afterMs?: number): Promise<boolean> => {
      const waits: Promise<unknown>[] = [];
      if (gate) waits.push(gate.promise);
      if (afterMs !== undefined) {
        const clock = this.clock;
        if (!clock) throw new Error("FakeWorker needs a clock for afterMs");
        waits.push(new Promise<void>((resolve) => clock.setTimer(afterMs, resolve)));
      }
      if (waits.length === 0) return true;
      const outcome = await Promise.race([Promise.all(waits), aborted]);
      return outcome !== "aborted";
    };
    switch (step.kind) {
      case "complete": {
        for (const t of step.text ?? []) events.onText(t);
        if (!(await hold(step.gate, step.afterMs))) return { outcome: "cancelled" };
        if (step.usage) events.onUsage(step.usage);
        return { outcome: "completed", output: step.output ?? `out:${request.task.taskId}` };
      }
      case "fail":
        if (!(await hold(step.gate))) return { outcome: "cancelled" };
        for (const refusal of step.refusals ?? []) events.onPermissionRefused?.(refusal);
        return {
          outcome: "failed",
          error: step.error ?? `${request.task.taskId} failed`,
          ...(step.failure !== undefined ? { kind: step.failure } : {}),
          ...(step.remediation !== undefined ? { remediation: step.remediation } : {}),
          ...(step.prompted !== undefined ? { prompted: step.prompted } : {}),
        };
      case "wait":
        return { outcome: "waiting", question: step.question };
      case "hang":
        await aborted;
        return { outcome: "cancelled" };
    }
  }

  async shutdown(): Promise<void> {
    this.shutdownCalls += 1;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Agents and plans

export const AGENTS: AgentInfo[] = [
  { agentId: "coder", name: "Coder", role: "coder", strengths: ["code"] },
  { agentId: "tester", name: "Tester", role: "tester", strengths: ["tests"] },
];

/** A fixed agent directory. */
export class StaticAgents implements AgentDirectory {
  constructor(private readonly agents: AgentInfo[] = AGENTS) {}
  list(): AgentInfo[] {
    return [...this.agents];
  }
  get(agentId: string): AgentInfo | undefined {
    return this.agents.find((a) => a.agentId === agentId);
  }
}

export interface TaskSpec {
  id: string;
  deps?: string[];
  /** Default `i1`. */
  instance?: string;
  maxAttempts?: number;
  title?: string;
  description?: string;
}

/** A task definition from a spec (title = id, description `Do <id>.`). */
export function taskOf(spec: TaskSpec): Task {
  return {
    taskId: spec.id,
    title: spec.title ?? spec.id,
    description: spec.description ?? `Do ${spec.id}.`,
    instanceId: spec.instance ?? "i1",
    dependsOn: spec.deps ?? [],
    ...(spec.maxAttempts !== undefined ? { maxAttempts: spec.maxAttempts } : {}),
  };
}

/** A draft plan over the given tasks; one `coder` instance per instance id used. */
export function draftPlan(specs: TaskSpec[], budget?: Budget): DraftPlan {
  const tasks = specs.map(taskOf);
  const instanceIds = [...new Set(tasks.map((t) => t.instanceId))];
  const instances: Instance[] = instanceIds.map((instanceId) => ({ instanceId, agentId: "coder", role: "coder" }));
  return { name: "Test plan", summary: "A plan for tests.", instances, tasks, ...(budget ? { budget } : {}) };
}

// ---------------------------------------------------------------------------------------------------------------
// Harness

export interface Harness {
  authority: MemoryAuthority;
  store: ProductStore;
  leader: ScriptedLeader;
  worker: FakeWorker;
  notifier: RecordingNotifier;
  clock: FakeClock;
  ids: IdGenerator;
  logger: RecordingLogger;
  ctx: ProductContext;
  service: ProductService;
  /** `product.plan` (projectId `proj`, cwd `/work/proj`) and waits for `product.planReady`; returns the product id. */
  planned(params?: { budget?: Budget; goal?: string }): Promise<string>;
  /** `planned` + `confirm`; returns the product id (execution starts after the answer). */
  started(params?: { budget?: Budget }): Promise<string>;
  /** Waits for the `nth` `product.completed` of a product and returns its params. */
  finished(productId: string, nth?: number): Promise<Record<string, unknown>>;
  /** Task states of `product.status`. */
  tasks(productId: string): Promise<{ taskId: string; status: string; attempts: number; [k: string]: unknown }[]>;
}

export interface HarnessOptions {
  plan?: DraftPlan | PlanResult;
  authority?: MemoryAuthority;
  clock?: FakeClock;
  ids?: IdGenerator;
  options?: Partial<ProductOptions>;
  checkpointHistory?: number;
  /** The liveness port (guarantee 13); absent = no owner is ever provably dead. */
  liveness?: OwnerLiveness;
}

/** Wires the fakes into a `ProductService` (a "server process"); pass the same authority to simulate a restart. */
export function createHarness(opts: HarnessOptions = {}): Harness {
  const authority = opts.authority ?? new MemoryAuthority();
  const clock = opts.clock ?? new FakeClock();
  const ids = opts.ids ?? sequentialIds();
  const store = new ProductStore(authority, opts.checkpointHistory ?? 20);
  const leader = new ScriptedLeader(opts.plan ?? draftPlan([{ id: "a" }]));
  const worker = new FakeWorker(clock);
  const notifier = new RecordingNotifier();
  const logger = new RecordingLogger();
  const ctx: ProductContext = {
    store,
    leader: () => leader,
    workers: worker,
    agents: new StaticAgents(),
    notifier,
    clock,
    ids,
    logger,
    defer: (fn) => setImmediate(fn),
    options: { ...DEFAULT_PRODUCT_OPTIONS, ...(opts.options ?? {}) },
    ...(opts.liveness ? { liveness: opts.liveness } : {}),
  };
  const service = new ProductService(ctx);
  const h: Harness = {
    authority,
    store,
    leader,
    worker,
    notifier,
    clock,
    ids,
    logger,
    ctx,
    service,
    async planned(params = {}) {
      const { productId } = await service.plan({
        goal: params.goal ?? "Build the thing",
        cwd: "/work/proj",
        projectId: "proj",
        ...(params.budget ? { budget: params.budget } : {}),
      });
      await notifier.next("product.planReady", (p) => p.productId === productId);
      return productId;
    },
    async started(params = {}) {
      const productId = await h.planned(params);
      await service.confirm(productId, {});
      return productId;
    },
    finished(productId, nth = 1) {
      return notifier.next("product.completed", (p) => p.productId === productId, nth);
    },
    async tasks(productId) {
      const status = await service.status(productId);
      return status.tasks as { taskId: string; status: string; attempts: number }[];
    },
  };
  return h;
}

/** Awaits a promise that must reject and returns the reason; throws when it resolves. */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection, but the promise resolved");
}
