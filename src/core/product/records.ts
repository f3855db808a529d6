/**
 * Persisted record schemas of a product (DESIGN.md guarantee 4: every record read back is validated against its
 * versioned schema; `v` is a literal, so a future-version record fails closed).
 *
 * Storage layout in the run-state authority (all under the product's `projectId` unless said otherwise):
 * - event stream `product/<productId>`: every state change, append-only, CAS on the sequence number (guarantee 6);
 * - record `product/<productId>`: the header used by `product.list` (phase, progress, updatedAt), an index only;
 * - records `snapshot/<productId>/<seq>`: the full state at a sequence number, so loading replays only the tail and
 *   a rollback only the events after the latest snapshot before its checkpoint; compaction (store.ts) deletes the
 *   snapshots and events no load and no kept checkpoint needs;
 * - record `product-index/<productId>` in project `_`: which project owns a product (lookups by id alone);
 * - record `lease/<productId>`: who executes the product now and until when (guarantee 6; lease.ts).
 *
 * This file must never contain logic beyond schemas: the reducer is evolve.ts.
 */
import * as z from "zod";
import {
  Budget,
  CommitId,
  Count,
  Id,
  Isolation,
  Mutation,
  Phase,
  Plan,
  Progress,
  Recovery,
  TaskState,
  TaskWorkspace,
  Timestamp,
} from "../../../protocol/common.js";
import { IntegrationRecord, IsolationRequest, workspaceEvents } from "../workspace/records.js";
import { VerificationState, VerifiedEvent, VerifyFixupEvent } from "../workspace/verification.js";
import { VerifyConfig } from "../../../protocol/verify.js";
import { WorkspaceRemote } from "../../../protocol/workspace-remote.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";
import { StoredMcpServers } from "./mcp-servers.js";
import { AttachmentRefs } from "./agent-inputs.js";

/** ACP `additionalDirectories` as a product keeps them (session/new bounds them to 32). */
const AdditionalDirectories = () => z.array(z.string().min(1).max(4_096)).max(64);

/** The authority project that holds cross-project indexes. */
export const INDEX_PROJECT = "_";

export const productStream = (productId: string): string => `product/${productId}`;

export const DialogueEntryRecord = lazySchema(
  () =>
    z.object({
      role: z.enum(["user", "leader"]),
      text: z.string(),
      at: Timestamp,
      /** True for the leader's summary of how a run ended (evolve.ts: an outcome supersedes the outcome just before it). */
      outcome: z.literal(true).optional(),
      /** A user message's images and binary resources, by reference (issue 31, agent-inputs.ts). */
      attachments: AttachmentRefs.optional(),
    }),
  "DialogueEntryRecord",
);

export const CheckpointRef = lazySchema(
  () =>
    z.object({
      checkpointId: Id,
      at: Timestamp,
      /** Sequence number of the event stream the checkpoint captures (state after applying events 1..seq). */
      seq: Count,
      completed: Count,
      total: Count,
      /** The integration branch's head when the checkpoint was taken (isolation `worktree`; guarantee 11). */
      integrationHead: CommitId.optional(),
      /** Task ids merged into the integration branch at that point, in merge order. */
      merged: z.array(Id).optional(),
    }),
  "CheckpointRef",
);
export type CheckpointRef = z.infer<typeof CheckpointRef>;

export const Usage = lazySchema(
  () =>
    z.object({
      inputTokens: Count,
      outputTokens: Count,
      /** Tokens that came from the 4-characters-per-token estimate rather than from worker reports. */
      estimatedTokens: Count,
      elapsedMs: Count,
      /**
       * When `elapsedMs` was last recorded (the `at` of its `elapsed` event). A process that does not drive the run
       * adds the time since then while a live owner drives it (StatusView), so its answer is not stale.
       */
      elapsedAt: Timestamp.optional(),
    }),
  "Usage",
);
export type Usage = z.infer<typeof Usage>;

/** A hash written by fingerprint.ts (`ti1:…`, `pl1:…`, `ag1:…`); bounded so a tampered record cannot bloat state. */
const Hash = lazySchema(() => z.string().min(1).max(200), "Hash");

/**
 * A map keyed by task id (`z.record(Id, value)` in meaning) that reads every id as an ordinary key. zod 4's record
 * refuses an object with an own key `constructor` ("expected record": a product with a task `constructor` could not
 * load its snapshots once compaction pruned the events they cover) and drops a key `__proto__` (its value assigned
 * to the prototype). The value read back has no prototype, as evolve.ts keeps these maps.
 */
function taskKeyed<V extends z.ZodType>(value: V) {
  return z
    .custom<Record<string, unknown>>(
      (input) => typeof input === "object" && input !== null && !Array.isArray(input),
      "expected an object keyed by task id",
    )
    .transform((input, ctx): Record<string, z.output<V>> => {
      const out = Object.create(null) as Record<string, z.output<V>>;
      for (const key of Object.keys(input)) {
        const id = Id.safeParse(key);
        const read = id.success ? value.safeParse(input[key]) : undefined;
        if (!read?.success) {
          ctx.addIssue({ code: "custom", path: [key], message: id.success ? "invalid value" : "invalid task id" });
          return z.NEVER;
        }
        out[key] = read.data;
      }
      return out;
    });
}

/** The most agents a fingerprint names one by one (a registry larger than this records only its overall hash). */
export const MAX_RECORDED_AGENTS = 200;

/**
 * What a run's progress depends on outside its own event stream (issue 4, drift detection): the plan fingerprint
 * (plan + leader prompt template version), the workspace git HEAD (`null` outside git) and the registry's agent
 * definitions. Recorded at confirmation, refreshed while the run is driven, acknowledged by an explicit resume.
 */
export const Fingerprint = lazySchema(
  () =>
    z.object({
      promptVersion: z.string().min(1).max(200),
      planHash: Hash,
      gitHead: z.string().min(1).max(200).nullable(),
      agentsHash: Hash,
      /** Per agent (`agentId` → hash of its definition; issue 28), so a reader can name which agents differ. */
      agentHashes: z
        .record(z.string().min(1).max(200), Hash)
        .refine((r) => Object.keys(r).length <= MAX_RECORDED_AGENTS, `at most ${MAX_RECORDED_AGENTS} agents`)
        .optional(),
      /**
       * The agent config file of the server that recorded it (absolute path; `ProductOptions.configPath`), so the
       * resume command `status` prints names the same agents; absent: none was loaded. Never part of drift.
       */
      configPath: z.string().min(1).max(4096).optional(),
    }),
  "Fingerprint",
);
export type Fingerprint = z.infer<typeof Fingerprint>;

/** The longest lease lifetime a reader believes (1 h): a larger `ttlMs` in a record is cut to this when read. */
export const MAX_LEASE_TTL_MS = 3_600_000;

/**
 * The lease of one product (DESIGN.md guarantees 6 and 13): who executes it and until when (ISO-8601 UTC), and the
 * lifetime the owner gives each renewal (`ttlMs`, absent in records of older servers). Written only by
 * compare-and-swap; an expired lease, or one whose owner is provably dead, may be taken over; a record that does not
 * parse proves no one is alive. Readers never trust `expiresAt` further than `ttlMs` past the moment they first saw
 * the record's revision (lease.ts), so a lease dated far in the future blocks nobody for longer than one lifetime.
 */
export const LeaseRecord = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      owner: Id,
      expiresAt: Timestamp.refine((t) => Number.isFinite(Date.parse(t)), "must be a date"),
      ttlMs: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
    }),
  "LeaseRecord",
);
export type LeaseRecord = z.infer<typeof LeaseRecord>;

const base = () => ({ v: z.literal(1), at: Timestamp });

export const ProductCreatedEvent = lazySchema(
  () =>
    z.object({
      ...base(),
      type: z.literal("created"),
      productId: Id,
      projectId: Id,
      name: z.string(),
      /**
       * `name` is provisional (issue 28, one title everywhere): the goal's first line, kept only until the leader's
       * first plan names the product; that plan's name is then its title for good. Absent: `name` is the title
       * already (given to `product.plan`, a goal run's phase, or a record written before titles).
       */
      provisionalName: z.literal(true).optional(),
      goal: z.string(),
      cwd: z.string(),
      /** At most this many tasks run at once (`product.plan` / the session's `parallelism`); else the server's default. */
      maxParallelTasks: z.number().int().min(1).max(1_000).optional(),
      sessionId: z.string().optional(),
      leaderAgentId: z.string().optional(),
      allowedAgents: z.array(z.string()).optional(),
      /** The session's MCP servers without their secrets (issue 28, mcp-servers.ts). */
      mcpServers: StoredMcpServers.optional(),
      /** The session's additional directories, absolute (issue 31, agent-inputs.ts). */
      additionalDirectories: AdditionalDirectories().optional(),
      budget: Budget.optional(),
      /** What `product.plan` asked for (isolation and integration); decided at confirmation. */
      isolation: IsolationRequest.shape.isolation,
      integration: IsolationRequest.shape.integration,
      /** The product's verification commands (guarantee 17): `product.plan`'s `verify`, else the config file's. */
      verify: VerifyConfig.optional(),
      /** A remote-backed product's git remote (no credentials) and base ref; absent: the repository at `cwd`. */
      workspace: WorkspaceRemote.optional(),
    }),
  "ProductCreatedEvent",
);

/**
 * A wave's starts in one event (issue 34: one event per wave instead of one `task` event per started task, the
 * `task` events written before it still mean what they did): each listed task becomes `running` at this event's
 * `at`, with `attempt` as its attempt count and `workspace` as its attempt's worktree (absent: none), its
 * `endedAt`, `question` and `output` cleared, its completed result's input hash forgotten — what `task` events
 * of the same started states did. A task id the state does not have makes the stored state refused as a whole
 * (guarantee 15, as a `task` event of it did).
 */
export const StartedEvent = lazySchema(
  () =>
    z.object({
      ...base(),
      type: z.literal("started"),
      tasks: z
        .array(
          z.object({
            taskId: Id,
            attempt: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
            workspace: TaskWorkspace.optional(),
          }),
        )
        .min(1),
    }),
  "StartedEvent",
);

export const ProductEvent = lazySchema(
  () =>
    z.discriminatedUnion("type", [
      ProductCreatedEvent,
      ...workspaceEvents(),
      VerifiedEvent,
      VerifyFixupEvent,
      z.object({
        ...base(),
        type: z.literal("dialogue"),
        role: z.enum(["user", "leader"]),
        text: z.string(),
        /** The summary of how a run ended (written when the product completes or fails). */
        outcome: z.literal(true).optional(),
        /** A user message's images and binary resources, by reference (issue 31). */
        attachments: AttachmentRefs.optional(),
      }),
      z.object({ ...base(), type: z.literal("planProposed"), plan: Plan }),
      z.object({ ...base(), type: z.literal("planFailed"), error: z.string() }),
      z.object({
        ...base(),
        type: z.literal("asked"),
        askId: Id,
        questions: z.array(z.object({ question: z.string(), options: z.array(z.string()).optional() })),
      }),
      z.object({ ...base(), type: z.literal("confirmed"), plan: Plan, fingerprint: Fingerprint.optional() }),
      z.object({ ...base(), type: z.literal("phase"), phase: Phase, recovery: Recovery.nullable() }),
      /**
       * `inputHash` (on a completion) binds the result to the input it was run with (guarantee 7; not on the wire).
       * A settled attempt's event also carries what separate `usage` and `checkpoint` events carried before (issue 34:
       * one event per settled attempt instead of three): `usage`, the attempt's estimated tokens, applied after the
       * task; `checkpoint`, the automatic checkpoint of a completion, applied after both, at this event's sequence
       * number. Events written before are read as before.
       */
      z.object({
        ...base(),
        type: z.literal("task"),
        task: TaskState,
        inputHash: Hash.optional(),
        usage: z.object({ inputTokens: Count, outputTokens: Count, estimated: z.boolean() }).optional(),
        checkpoint: z.object({ checkpointId: Id, completed: Count, total: Count }).optional(),
      }),
      StartedEvent,
      z.object({
        ...base(),
        type: z.literal("mutated"),
        mutations: z.array(Mutation),
        by: z.enum(["leader", "user"]),
        plan: Plan,
      }),
      z.object({
        ...base(),
        type: z.literal("usage"),
        taskId: Id,
        inputTokens: Count,
        outputTokens: Count,
        estimated: z.boolean(),
      }),
      z.object({ ...base(), type: z.literal("elapsed"), elapsedMs: Count }),
      z.object({ ...base(), type: z.literal("budgetAdded"), budget: Budget }),
      z.object({ ...base(), type: z.literal("budgetWarned"), reason: z.string() }),
      z.object({ ...base(), type: z.literal("checkpoint"), checkpointId: Id, completed: Count, total: Count }),
      z.object({
        ...base(),
        type: z.literal("restored"),
        checkpointId: Id,
        plan: Plan.optional(),
        tasks: z.array(TaskState),
        inputHashes: taskKeyed(Hash).optional(),
      }),
      /** A new fingerprint: refreshed while driving, or recorded by an explicit resume that acknowledged `acknowledged`. */
      z.object({
        ...base(),
        type: z.literal("fingerprint"),
        fingerprint: Fingerprint,
        acknowledged: z.array(z.string().max(2_000)).max(10).optional(),
      }),
    ]),
  "ProductEvent",
);
export type ProductEvent = z.infer<typeof ProductEvent>;
export type ProductEventType = ProductEvent["type"];

/** The full reduced state of a product; also the body of a snapshot record. */
export const ProductStateSchema = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      /** Sequence number of the last event applied. */
      seq: Count,
      productId: Id,
      projectId: Id,
      /** The product's title (issue 28): one name in every view; provisional while `provisionalName` is set. */
      name: z.string(),
      /** Set until the first proposed plan names the product (`created.provisionalName`). */
      provisionalName: z.literal(true).optional(),
      goal: z.string(),
      cwd: z.string(),
      maxParallelTasks: z.number().int().min(1).max(1_000).optional(),
      sessionId: z.string().optional(),
      leaderAgentId: z.string().optional(),
      allowedAgents: z.array(z.string()).optional(),
      mcpServers: StoredMcpServers.optional(),
      additionalDirectories: AdditionalDirectories().optional(),
      phase: Phase,
      recovery: Recovery.optional(),
      plan: Plan.optional(),
      /** Task states in plan order. */
      tasks: z.array(TaskState),
      dialogue: z.array(DialogueEntryRecord),
      pendingAsk: z
        .object({
          askId: Id,
          questions: z.array(z.object({ question: z.string(), options: z.array(z.string()).optional() })),
        })
        .optional(),
      planError: z.string().optional(),
      budget: Budget,
      usage: Usage,
      budgetWarned: z.boolean(),
      /** Newest last; pruned to the newest `checkpointHistory` entries. */
      checkpoints: z.array(CheckpointRef),
      /** taskId → input hash of its completed result (guarantee 7); only completed tasks have an entry. */
      inputHashes: taskKeyed(Hash).optional(),
      /**
       * taskId → attempts that were interrupted (pause, shutdown, crash) rather than failed. They are counted in
       * `attempts` (guarantee 7) but do not use up the task's retries (`maxAttempts` limits failed attempts).
       */
      interruptedAttempts: taskKeyed(Count).optional(),
      /** The latest recorded fingerprint (drift detection); absent for runs confirmed before fingerprints existed. */
      fingerprint: Fingerprint.optional(),
      /** Isolation asked for by `product.plan` (until confirmation decides). */
      isolationRequest: IsolationRequest.optional(),
      /** A remote-backed product's git remote and base ref (issue 33); absent: the repository at `cwd`. */
      workspace: WorkspaceRemote.optional(),
      /** Isolation decided at confirmation, and why `shared` when it is. */
      isolation: Isolation.optional(),
      isolationReason: z.string().optional(),
      /** The integration branch and its state (isolation `worktree`). */
      integration: IntegrationRecord.optional(),
      /** Verification commands and the trees verified so far (guarantee 17; workspace/verification.ts). */
      verification: VerificationState.optional(),
      createdAt: Timestamp,
      updatedAt: Timestamp,
    }),
  "ProductStateSchema",
);
export type ProductState = z.infer<typeof ProductStateSchema>;

export const SnapshotRecord = lazySchema(
  () => z.object({ v: z.literal(1), state: ProductStateSchema }),
  "SnapshotRecord",
);

export const ProductHeaderRecord = lazySchema(
  () =>
    z.object({
      v: z.literal(1),
      productId: Id,
      projectId: Id,
      name: z.string(),
      phase: Phase,
      progress: Progress,
      createdAt: Timestamp,
      updatedAt: Timestamp,
      sessionId: z.string().optional(),
    }),
  "ProductHeaderRecord",
);
export type ProductHeaderRecord = z.infer<typeof ProductHeaderRecord>;

export const ProductIndexRecord = lazySchema(() => z.object({ v: z.literal(1), projectId: Id }), "ProductIndexRecord");
