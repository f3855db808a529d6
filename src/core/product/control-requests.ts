/**
 * Control requests (issue 29): a process that does not own a product — the CLI's `pause`, `retry`, … or the
 * dashboard's buttons — writes a request record through the run-state authority (kind `controlRequest`, id
 * `<productId>/<requestId>`); the server that owns the product picks it up, accepts it by compare-and-swap, executes
 * it through the same ProductService call as the JSON-RPC method of the same name, and writes the answer into the
 * same record (docs/PROTOCOL.md, "Control requests").
 *
 * Owns the record's schema, the executor (method → ProductService call) and the owner's pickup loop. Who picks up:
 * the server that drives the product (holds its lease), or, while nobody holds a live lease, the server that created
 * the product in this process (it planned it, or ran it before a pause). Pickup: the change feed when the authority
 * has one (PostgreSQL `LISTEN/NOTIFY`), else a poll of the store's change mark (SQLite: one `PRAGMA data_version`),
 * else a slow list. This file must never import I/O; it never bypasses ProductService.
 */
import * as z from "zod";
import { Id, Timestamp } from "../../../protocol/common.js";
import { safeParsePlain } from "../../../protocol/errors.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";
import * as wire from "../../../protocol/product.js";
import { DomainError, isDomainError } from "../errors.js";
import type { AuthorityChange, Clock, Logger, OwnerLiveness, RunStateAuthority } from "../ports.js";
import { AuthorityConflict } from "../ports.js";
import { WorkInFlight } from "../work-in-flight.js";
import type { ProductService } from "./service.js";

/** The record kind of control requests from any process (distinct from the fleet's server-to-server `control`). */
export const CONTROL_REQUEST_KIND = "controlRequest";

/** The JSON-RPC methods a control request may carry (PROTOCOL.md section 5; `product.mutate` included). */
export const CONTROL_METHODS = [
  "product.pause",
  "product.resume",
  "product.cancel",
  "product.checkpoint",
  "product.rollback",
  "product.replayTask",
  "product.confirm",
  "product.message",
  "product.mutate",
  "product.delete",
] as const;
export type ControlMethod = (typeof CONTROL_METHODS)[number];

/** Longest JSON text of one control request record, in UTF-16 code units (guarantee 14: checked before parsing). */
export const MAX_CONTROL_REQUEST_CHARS = 512 * 1024;

/**
 * How long an answered request record is kept, ms: a requester that repeats a request id within it gets the same
 * answer and nothing runs twice; afterwards the owner deletes the record (guarantee 14).
 */
export const ANSWER_TTL_MS = 10 * 60_000;

/** A request id: what makes a request idempotent (the same id is the same request). */
export const RequestId = lazySchema(() => z.string().regex(/^[A-Za-z0-9_.-]{1,100}$/u), "RequestId");

/** The error of a refused request: a domain error code (or `stale`, `internal`), one plain sentence, details. */
const ControlError = lazySchema(
  () => z.object({ code: z.string().min(1).max(100), message: z.string().max(10_000), details: z.unknown() }),
  "ControlError",
);

/** One control request and, once answered, its answer (docs/PROTOCOL.md, "Control requests"). */
export const ControlRequestRecord = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      requestId: RequestId,
      productId: Id,
      method: z.enum(CONTROL_METHODS),
      /** The method's params, validated by the method's own wire schema when executed. */
      params: z.record(z.string(), z.unknown()),
      /** `answer TASK`: the request is refused unless this task is the waiting task the message answers. */
      waitingTask: Id.optional(),
      /** Who wrote it (a free label: `cli:<host>:<pid>`, `dashboard:…`). */
      by: z.string().min(1).max(500),
      at: Timestamp,
      /** After this instant the request is stale: an owner refuses it instead of executing it. */
      expiresAt: Timestamp,
      state: z.enum(["pending", "accepted", "done", "refused"]),
      /** The lease owner id of the server that accepted it. */
      acceptedBy: z.string().min(1).max(500).optional(),
      answeredAt: Timestamp.optional(),
      result: z.record(z.string(), z.unknown()).optional(),
      error: ControlError.optional(),
    }),
  "ControlRequestRecord",
);
export type ControlRequestRecord = z.infer<typeof ControlRequestRecord>;

/** The answer an owner writes in place of a record that does not parse: nothing of it was executed (guarantee 4). */
export const InvalidControlAnswer = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      state: z.literal("refused"),
      invalid: z.literal(true),
      answeredAt: Timestamp,
      error: ControlError,
    }),
  "InvalidControlAnswer",
);
export type InvalidControlAnswer = z.infer<typeof InvalidControlAnswer>;

/** The record id of request `requestId` for `productId`. */
export function controlRequestId(productId: string, requestId: string): string {
  return `${productId}/${requestId}`;
}

/** One params issue as a refusal's reason says it: its path, then its message (`tasks.0.title is required`). */
function issueText(issue: { path: readonly PropertyKey[]; message: string }): string {
  const m = issue.message;
  return `${issue.path.map(String).join(".") || "params"} ${/^[A-Z][a-z]/u.test(m) ? m[0]?.toLowerCase() + m.slice(1) : m}`;
}

/** A refusal as a record carries it. */
export type ControlRefusal = { code: string; message: string; details: unknown };

/**
 * Executes `method` with `params` through the same ProductService call as the JSON-RPC handler (server.ts), with
 * `forward: false` (the owner answers locally). `params` is validated by the method's wire schema first; a failure is
 * a DomainError `invalid_input`. Throws what the service throws (DomainErrors are refusals).
 */
export async function executeControlMethod(
  service: ProductService,
  method: ControlMethod,
  params: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const local = { forward: false };
  const parse = <T>(schema: z.ZodType<T>): T => {
    // The same plain words as a JSON-RPC call's -32602 ("tasks.0.title is required"; protocol/errors.ts).
    const parsed = safeParsePlain(schema, params);
    if (!parsed.success) {
      const reason = parsed.error.issues.map(issueText).join("; ");
      throw new DomainError("invalid_input", `The ${method} request has invalid params (${reason}).`, { reason });
    }
    return parsed.data;
  };
  switch (method) {
    case "product.pause":
      return service.pause(parse(wire.PauseParams).productId, local);
    case "product.resume": {
      const p = parse(wire.ResumeParams);
      return service.resume(p.productId, p.additionalBudget);
    }
    case "product.cancel":
      return service.cancel(parse(wire.CancelParams).productId, local);
    case "product.checkpoint":
      return service.checkpoint(parse(wire.CheckpointParams).productId);
    case "product.rollback": {
      const p = parse(wire.RollbackParams);
      return service.rollback(p.productId, p.checkpointId);
    }
    case "product.replayTask": {
      const p = parse(wire.ReplayTaskParams);
      return service.replayTask(p.productId, p.taskId);
    }
    case "product.confirm": {
      const p = parse(wire.ConfirmParams);
      return service.confirm(p.productId, {
        ...(p.instances !== undefined ? { instances: p.instances } : {}),
        ...(p.tasks !== undefined ? { tasks: p.tasks } : {}),
        ...(p.budget !== undefined ? { budget: p.budget } : {}),
      });
    }
    case "product.message": {
      const p = parse(wire.MessageParams);
      return service.message(p.productId, p.content, p.askId);
    }
    case "product.mutate": {
      const p = parse(wire.MutateParams);
      return service.mutate(p.productId, p.mutations, local);
    }
    case "product.delete":
      return service.delete(parse(wire.DeleteParams).productId);
  }
}

export interface ControlPickupOptions {
  service: ProductService;
  authority: RunStateAuthority;
  clock: Clock;
  logger: Logger;
  /** This server's lease owner id (written as `acceptedBy`). */
  ownerId: string;
  liveness?: OwnerLiveness;
  /** How often the change mark is looked at (SQLite), ms. Default 200. */
  pollMs?: number;
  /** How often a store with neither a change mark nor a change feed is listed, ms (a host). Default 10 000. */
  slowPollMs?: number;
}

/**
 * The owner's side of control requests: finds pending requests addressed to products this server may execute them
 * for, accepts each once (compare-and-swap pending → accepted), executes it and writes the answer (accepted → done or
 * refused). Never executes a record that does not parse, is stale, or names another product or project.
 */
export class ControlRequestPickup {
  readonly #o: ControlPickupOptions;
  readonly #handling = new Set<string>();
  #unwatch: (() => void) | null = null;
  #cancelTimer: (() => void) | null = null;
  #lastMark: string | undefined;
  #lastListAt = 0;
  #stopped = false;
  #scanning = false;
  readonly #work = new WorkInFlight();

  constructor(options: ControlPickupOptions) {
    this.#o = options;
  }

  /** Subscribes to the change feed (when there is one) and starts the periodic look. Call once. */
  start(): void {
    const watch = this.#o.authority.watch;
    if (watch) this.#unwatch = watch.call(this.#o.authority, (change) => this.#onChange(change));
    this.#arm();
  }

  /**
   * Stops listening and polling. Resolves once the look and the requests being executed finished, so the authority
   * can be closed after it (nothing of this pickup reads it later). Idempotent; never rejects.
   */
  stop(): Promise<void> {
    this.#stopped = true;
    this.#unwatch?.();
    this.#unwatch = null;
    this.#cancelTimer?.();
    this.#cancelTimer = null;
    return this.#work.settled();
  }

  #arm(): void {
    if (this.#stopped) return;
    this.#cancelTimer = this.#o.clock.setTimer(this.#o.pollMs ?? 200, () => {
      this.#cancelTimer = null;
      void this.#work.track(this.scan()).finally(() => this.#arm());
    });
  }

  #onChange(change: AuthorityChange): void {
    if (this.#stopped || change.kind !== CONTROL_REQUEST_KIND) return;
    if (change.id === undefined) {
      void this.#work.track(this.scan(true));
      return;
    }
    const productId = change.id.slice(0, change.id.indexOf("/"));
    const orchestrator = this.#o.service.peek(productId);
    if (orchestrator) void this.#work.track(this.#handle(change.projectId, change.id));
  }

  /**
   * One look: when the store may have changed since the last look (its change mark moved, or it has none), the
   * pending requests of every product this server may execute requests for are handled. Never throws.
   */
  async scan(force = false): Promise<void> {
    if (this.#scanning || this.#stopped) return;
    this.#scanning = true;
    try {
      const candidates = this.#o.service.loaded().filter((o) => o.isDriving || (!o.loadedFromStore && !o.isFenced));
      if (candidates.length === 0) return;
      const a = this.#o.authority;
      if (!force) {
        if (a.changeMark) {
          const mark = a.changeMark();
          if (mark === this.#lastMark) return;
          this.#lastMark = mark;
        } else {
          const now = this.#o.clock.now();
          const period = a.watch ? 2_000 : (this.#o.slowPollMs ?? 10_000);
          if (now - this.#lastListAt < period) return;
          this.#lastListAt = now;
        }
      }
      for (const o of candidates) {
        const projectId = o.model.state.projectId;
        for (const { id } of await a.list(projectId, CONTROL_REQUEST_KIND, `${o.productId}/`)) {
          await this.#handle(projectId, id);
        }
      }
    } catch (err) {
      this.#o.logger.warn({ err }, "could not look for control requests; trying again at the next look");
    } finally {
      this.#scanning = false;
    }
  }

  /** Whether this server may execute a request for `productId` now (it drives it, or created it and nobody does). */
  async #mayExecute(projectId: string, productId: string): Promise<boolean> {
    const o = this.#o.service.peek(productId);
    if (!o || o.isFenced) return false;
    if (o.isDriving) return true;
    if (o.loadedFromStore) return false;
    const lease = await this.#o.authority.get(projectId, "lease", productId);
    const value = lease?.value as { owner?: unknown; expiresAt?: unknown } | undefined;
    if (!value || typeof value.owner !== "string" || typeof value.expiresAt !== "string") return true;
    if (value.owner === this.#o.ownerId) return true;
    const expired = Date.parse(value.expiresAt) <= this.#o.clock.now();
    return expired || this.#o.liveness?.check(value.owner) === "dead";
  }

  async #handle(projectId: string, id: string): Promise<void> {
    if (this.#handling.has(id)) return;
    this.#handling.add(id);
    try {
      const productId = id.slice(0, id.indexOf("/"));
      if (!(await this.#mayExecute(projectId, productId))) return;
      const stored = await this.#o.authority.get(projectId, CONTROL_REQUEST_KIND, id);
      if (!stored) return;
      const value = stored.value as { state?: unknown; answeredAt?: unknown };
      if (value?.state === "done" || value?.state === "refused") {
        // Answers stay for a while, so a repeated request id is answered again without running twice (idempotence).
        const answeredAt = typeof value.answeredAt === "string" ? Date.parse(value.answeredAt) : 0;
        if (!(this.#o.clock.now() - answeredAt < ANSWER_TTL_MS)) await this.#delete(projectId, id, stored.revision);
        return;
      }
      if (value?.state !== "pending") return;
      const text = JSON.stringify(stored.value);
      const parsed = text.length > MAX_CONTROL_REQUEST_CHARS ? undefined : ControlRequestRecord.safeParse(stored.value);
      if (!parsed?.success) {
        const reason = parsed ? (parsed.error.issues[0]?.message ?? "invalid") : "too large";
        await this.#answerInvalid(projectId, id, stored.revision, reason);
        return;
      }
      await this.#execute(projectId, id, stored.revision, parsed.data);
    } catch (err) {
      this.#o.logger.warn({ id, err }, "could not handle a control request");
    } finally {
      this.#handling.delete(id);
    }
  }

  async #answerInvalid(projectId: string, id: string, revision: number, reason: string): Promise<void> {
    const answer: InvalidControlAnswer = {
      v: 1,
      state: "refused",
      invalid: true,
      answeredAt: new Date(this.#o.clock.now()).toISOString(),
      error: {
        code: "invalid_input",
        message: `The control request ${id} is not a valid request record (${reason}); nothing of it was executed.`,
        details: { reason },
      },
    };
    await this.#put(projectId, id, answer, revision);
  }

  /** The refusal of a request that must not run at all, or `undefined` when it may run. */
  #precheck(projectId: string, id: string, r: ControlRequestRecord): ControlRefusal | undefined {
    if (id !== controlRequestId(r.productId, r.requestId) || r.params.productId !== r.productId) {
      return {
        code: "ownership",
        message: `The control request ${id} names product ${String(r.params.productId ?? r.productId)}, not the product it was filed under; it was not executed.`,
        details: { expected: id.slice(0, id.indexOf("/")), got: r.productId },
      };
    }
    const owned = this.#o.service.peek(r.productId)?.model.state.projectId;
    if (owned !== projectId) {
      return {
        code: "ownership",
        message: `The control request ${id} was filed under project ${projectId}, but product ${r.productId} belongs to ${owned ?? "another project"}; it was not executed.`,
        details: { expected: owned ?? "", got: projectId },
      };
    }
    const expires = Date.parse(r.expiresAt);
    if (!(expires > this.#o.clock.now())) {
      return {
        code: "stale",
        message: `The control request ${r.requestId} expired at ${r.expiresAt} before the owner saw it; it was not executed. Send it again.`,
        details: { expiresAt: r.expiresAt },
      };
    }
    return undefined;
  }

  async #execute(projectId: string, id: string, revision: number, r: ControlRequestRecord): Promise<void> {
    const refusal = this.#precheck(projectId, id, r);
    const accepted: ControlRequestRecord = { ...r, state: "accepted", acceptedBy: this.#o.ownerId };
    const acceptedRevision = await this.#put(
      projectId,
      id,
      refusal ? this.#answer(r, { refusal }) : accepted,
      revision,
    );
    if (refusal || acceptedRevision === undefined) return;
    let answer: ControlRequestRecord;
    try {
      await this.#checkWaitingTask(r);
      const result = await executeControlMethod(this.#o.service, r.method, r.params);
      answer = this.#answer(accepted, { result });
    } catch (err) {
      if (isDomainError(err)) {
        answer = this.#answer(accepted, { refusal: { code: err.code, message: err.message, details: err.details } });
      } else {
        this.#o.logger.error({ id, err }, "a control request failed");
        const message = "The owner could not execute the request because of an internal error (see its log).";
        answer = this.#answer(accepted, { refusal: { code: "internal", message, details: {} } });
      }
    }
    this.#o.logger.info(
      { productId: r.productId, method: r.method, by: r.by, state: answer.state },
      "executed a control request",
    );
    await this.#put(projectId, id, answer, acceptedRevision);
    if (r.method === "product.delete" && answer.state === "done") await this.#dropOthers(projectId, r.productId, id);
  }

  /** `answer TASK`: the message answers the first waiting task, so TASK must be it (guarantee 8). */
  async #checkWaitingTask(r: ControlRequestRecord): Promise<void> {
    if (r.waitingTask === undefined) return;
    const status = await this.#o.service.status(r.productId);
    const tasks = (status.tasks ?? []) as { taskId: string; status: string }[];
    const waiting = tasks.filter((t) => t.status === "waiting");
    if (waiting[0]?.taskId === r.waitingTask) return;
    const task = tasks.find((t) => t.taskId === r.waitingTask);
    if (!task)
      throw new DomainError("not_found", `Product ${r.productId} has no task ${r.waitingTask}.`, {
        kind: "task",
        id: r.waitingTask,
      });
    const message =
      task.status !== "waiting"
        ? `Task ${r.waitingTask} is ${task.status}, not waiting for an answer.`
        : `Task ${waiting[0]?.taskId ?? ""} waits for an answer before ${r.waitingTask}: answer it first.`;
    throw new DomainError("invalid_phase", message, { phase: task.status, allowed: ["waiting"] });
  }

  #answer(
    r: ControlRequestRecord,
    outcome: { result: Record<string, unknown> } | { refusal: ControlRefusal },
  ): ControlRequestRecord {
    const at = new Date(this.#o.clock.now()).toISOString();
    return "result" in outcome
      ? { ...r, state: "done", answeredAt: at, result: outcome.result }
      : { ...r, state: "refused", answeredAt: at, error: outcome.refusal };
  }

  /** Writes by CAS; `undefined` when someone else wrote first (the requester withdrew, or another server took it). */
  async #put(projectId: string, id: string, value: object, revision: number): Promise<number | undefined> {
    try {
      return (await this.#o.authority.put(projectId, CONTROL_REQUEST_KIND, id, value, revision)).revision;
    } catch (err) {
      if (err instanceof AuthorityConflict) return undefined;
      throw err;
    }
  }

  async #delete(projectId: string, id: string, revision: number): Promise<void> {
    await this.#o.authority.delete(projectId, CONTROL_REQUEST_KIND, id, revision).catch(() => false);
  }

  /** After a delete: the product's other control requests go too (guarantee 14); the answered one its requester takes. */
  async #dropOthers(projectId: string, productId: string, keep: string): Promise<void> {
    for (const { id } of await this.#o.authority.list(projectId, CONTROL_REQUEST_KIND, `${productId}/`)) {
      if (id !== keep) await this.#o.authority.delete(projectId, CONTROL_REQUEST_KIND, id).catch(() => false);
    }
  }
}
