/**
 * The operator's view of a store (issue 15): products and goal runs listed and inspected through the same
 * `RunStateAuthority` port and the same core code the server answers `product.list`, `product.status` and
 * `x/goal.status` with, so the CLI and the dashboard say what a client would be told.
 *
 * Owns read-side composition only. It never writes (guarantee 3): it is given a read-only authority
 * (open-store.ts `readOnly`), it never plans, runs or resumes anything (its leader and workers refuse to be used),
 * and it works while a server elsewhere owns and drives the products.
 */
import { randomUUID } from "node:crypto";
import { nodeSha256Hex } from "../adapters/system/digest.js";
import { encodeListCursor, type ListPosition } from "../../protocol/product.js";
import { DEFAULT_PRODUCT_OPTIONS } from "../core/product/context.js";
import type { ProductContext } from "../core/product/context.js";
import { GoalService } from "../core/goal/service.js";
import { GoalEvent, GoalIndexRecord, goalStream } from "../core/goal/records.js";
import { INDEX_PROJECT, ProductEvent, productStream } from "../core/product/records.js";
import { notFound } from "../core/errors.js";
import { ProductService } from "../core/product/service.js";
import { ProductStore } from "../core/product/store.js";
import {
  AuthorityFailure,
  type AgentDirectory,
  type Clock,
  type LeaderPort,
  type Logger,
  type OwnerLiveness,
  type RunStateAuthority,
  type WorkerPort,
  type WorkspaceProbe,
} from "../core/ports.js";

/** What `list` shows per product: the `product.list` entry plus who owns it. */
export interface ProductRow {
  productId: string;
  projectId: string;
  name: string;
  phase: string;
  progress: { total: number; completed: number; running: number; failed: number; pending: number; [k: string]: number };
  updatedAt: string;
  /** The lease holder, when there is one: `live` = its lease has not expired. */
  owner?: { ownerId: string; expiresAt: string; live: boolean };
}

/** What `list` shows per goal run (the `x/goal.list` entry). */
export interface GoalRow {
  goalRunId: string;
  status: string;
  goal: string;
  phaseIndex: number;
}

/** One product event as stored, validated (`event` is undefined when the record does not parse: guarantee 4). */
/** One stored goal-run event (`events` of a goal run). */
export interface GoalEventRow {
  seq: number;
  event: GoalEvent | undefined;
  raw: unknown;
}

export interface ProductEventRow {
  seq: number;
  event: ProductEvent | undefined;
  raw: unknown;
}

const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
};

const refused = (what: string) => () => Promise.reject(new AuthorityFailure(`The operator view does not ${what}.`));

/** A leader that is never asked: reading plans nothing. */
const noLeader: LeaderPort = {
  plan: refused("plan"),
  message: refused("talk to the leader"),
  consultOnFailure: refused("consult the leader"),
  deriveChecklist: refused("derive criteria"),
  planPhase: refused("plan a phase"),
  assess: refused("assess a phase"),
};

const noWorkers: WorkerPort = {
  runTask: refused("run tasks"),
  shutdown: () => Promise.resolve(),
};

const noAgents: AgentDirectory = { list: () => [], get: () => undefined };

const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, Math.min(Math.max(0, ms), 2_147_483_647));
    t.unref();
    return () => clearTimeout(t);
  },
};

export interface RunStateReaderOptions {
  /** The store, opened read-only (openStore(..., {readOnly: true})). The reader closes it on `close()`. */
  authority: RunStateAuthority;
  /** For drift in `status` (the workspace's git HEAD); without it drift by HEAD is not reported. */
  workspace?: WorkspaceProbe;
  /** Proves a same-host owner dead (guarantee 13) so `live` is false at once for a killed server. */
  liveness?: OwnerLiveness;
  clock?: Clock;
  /**
   * The leader prompt version the servers record (`SERVER_LEADER_PROMPT_VERSION`); without it the core's default is
   * compared, and every run reads as drifted in `status`.
   */
  leaderPromptVersion?: string;
  /** The agent definitions' fingerprint as a server with the same config computes it (`agentsHash`). */
  agentsFingerprint?: () => string;
  /** The same definitions per agent (`agentHashes`), so a difference names the agents (issue 28). */
  agentHashes?: () => Record<string, string>;
}

/** Read-only access to the products and goal runs of one store. Never writes. */
export class RunStateReader {
  readonly authority: RunStateAuthority;
  readonly store: ProductStore;
  readonly products: ProductService;
  readonly goals: GoalService;
  private readonly clock: Clock;

  constructor(options: RunStateReaderOptions) {
    this.authority = options.authority;
    this.clock = options.clock ?? systemClock;
    this.store = new ProductStore(this.authority, DEFAULT_PRODUCT_OPTIONS.checkpointHistory);
    const ctx: ProductContext = {
      store: this.store,
      leader: () => noLeader,
      workers: noWorkers,
      agents: noAgents,
      notifier: { notify: () => undefined },
      clock: this.clock,
      ids: (prefix) => `${prefix}_${randomUUID().replace(/-/g, "").slice(0, 20)}`,
      logger: silentLogger,
      defer: () => undefined,
      // A reader owns nothing: its owner id matches no lease.
      options: {
        ...DEFAULT_PRODUCT_OPTIONS,
        ownerId: `operator-view:${randomUUID()}`,
        ...(options.leaderPromptVersion !== undefined ? { leaderPromptVersion: options.leaderPromptVersion } : {}),
        ...(options.agentsFingerprint ? { agentsFingerprint: options.agentsFingerprint } : {}),
        ...(options.agentHashes ? { agentHashes: options.agentHashes } : {}),
        // A reader's registry is compared with the one the driving server recorded, never taken for a change.
        registryView: "reader",
      },
      ...(options.workspace ? { workspace: options.workspace } : {}),
      ...(options.liveness ? { liveness: options.liveness } : {}),
      digest: nodeSha256Hex,
    };
    this.products = new ProductService(ctx);
    this.goals = new GoalService({
      authority: this.authority,
      products: this.products,
      leader: () => noLeader,
      agents: noAgents,
      notifier: { notify: () => undefined },
      clock: this.clock,
      ids: ctx.ids,
      logger: silentLogger,
      defer: () => undefined,
    });
  }

  /** Every product of every project, newest first, with the owner of each executing one. */
  async listProducts(): Promise<ProductRow[]> {
    // product.list's own rows: the owner (guarantee 13) is there for executing products.
    const { products } = await this.products.list();
    const rows: ProductRow[] = products.map((p) => ({ ...p, progress: { ...(p.progress as ProductRow["progress"]) } }));
    // A failed task a fix-up replaces stays `failed` on the wire; the views show it superseded (a new user's trial:
    // list counted it as failed). Only products with a failed task are read in full.
    for (const row of rows) {
      if (row.progress.failed === 0) continue;
      const status = await this.products.status(row.productId).catch(() => undefined);
      const tasks = (status?.tasks ?? []) as { status: string; supersededBy?: string }[];
      const superseded = tasks.filter((t) => t.status === "failed" && t.supersededBy !== undefined).length;
      if (superseded > 0) row.progress.superseded = superseded;
    }
    return rows.sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0));
  }

  /**
   * One page of `product.list` (PROTOCOL.md section 5): at most `limit` products after `after`, oldest first, and the
   * cursor of the next page (`nextCursor`) when more remain.
   */
  async listProductsPage(limit: number, after?: ListPosition): Promise<{ rows: ProductRow[]; nextCursor?: string }> {
    const { products, next } = await this.products.list(undefined, undefined, { limit, ...(after ? { after } : {}) });
    const rows: ProductRow[] = products.map((p) => ({ ...p, progress: p.progress as ProductRow["progress"] }));
    return { rows, ...(next ? { nextCursor: encodeListCursor(next) } : {}) };
  }

  /** Every goal run of every project. */
  async listGoals(): Promise<GoalRow[]> {
    return (await this.goals.list()).goals;
  }

  /** Whether `id` names a goal run (`goal_…`) rather than a product. */
  isGoalId(id: string): boolean {
    return id.startsWith("goal_");
  }

  /** `product.status` as the server would answer it, brought up to date with the store. Throws not_found. */
  async productStatus(productId: string): Promise<Record<string, unknown>> {
    return this.products.status(productId);
  }

  /**
   * The commit a worktree-isolated product's integration branch was created from at confirmation (its
   * `workspaceChosen` base, kept in its state; `undefined` before confirmation or without isolation). A replay or a
   * rollback never changes it, unlike the bases of later attempts. Call after `productStatus` (which brings the
   * product up to date with the store). Throws not_found.
   */
  async integrationBase(productId: string): Promise<string | undefined> {
    return (await this.products.get(productId)).model.state.integration?.base;
  }

  /**
   * The agent config file (absolute path) the server that last recorded the run's fingerprint loaded, at confirmation
   * or an explicit resume (`Fingerprint.configPath`); `undefined` before confirmation or when it loaded none. Call
   * after `productStatus`. Throws not_found.
   */
  async recordedConfigPath(productId: string): Promise<string | undefined> {
    return (await this.products.get(productId)).model.state.fingerprint?.configPath;
  }

  /** The kept checkpoints of a product, oldest first. Throws not_found. */
  async checkpoints(productId: string) {
    return (await this.products.checkpoints(productId)).checkpoints;
  }

  /** `x/goal.status` as the server would answer it. Throws not_found (kind `goal run`). */
  async goalStatus(goalRunId: string): Promise<Record<string, unknown>> {
    return this.goals.status(goalRunId);
  }

  /**
   * A product's stored events with `seq > afterSeq`, oldest first, at most `limit` (default 1000) per call; each
   * validated by its schema (an invalid one has `event: undefined`). Throws not_found for an unknown product.
   */
  async productEvents(productId: string, afterSeq = 0, limit = 1000): Promise<ProductEventRow[]> {
    const projectId = await this.store.projectOf(productId);
    if (projectId === undefined) await this.products.get(productId); // throws not_found
    const events = await this.authority.readEvents(projectId ?? "", productStream(productId), afterSeq, limit);
    return events.map((e) => {
      const parsed = ProductEvent.safeParse(e.event);
      return { seq: e.seq, event: parsed.success ? parsed.data : undefined, raw: e.event };
    });
  }

  /**
   * A goal run's stored events with `seq > afterSeq`, oldest first, at most `limit` per call; each validated by its
   * schema (an invalid one has `event: undefined`). Throws not_found (kind `goal run`) for an unknown goal run.
   */
  async goalEvents(goalRunId: string, afterSeq = 0, limit = 1000): Promise<GoalEventRow[]> {
    const index = await this.authority.get(INDEX_PROJECT, "goal-index", goalRunId);
    const parsed = index ? GoalIndexRecord.safeParse(index.value) : undefined;
    if (!parsed?.success) throw notFound("goal run", goalRunId);
    const events = await this.authority.readEvents(parsed.data.projectId, goalStream(goalRunId), afterSeq, limit);
    return events.map((e) => {
      const event = GoalEvent.safeParse(e.event);
      return { seq: e.seq, event: event.success ? event.data : undefined, raw: e.event };
    });
  }

  /** Releases the store. */
  async close(): Promise<void> {
    await this.products.shutdown();
    await this.authority.close();
  }
}
