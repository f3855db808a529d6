/**
 * The ports of the core (DESIGN.md, Layers): everything the domain needs from the outside world.
 *
 * The core sees time only through `Clock`, cancellation only as `AbortSignal`, persistence only through
 * `RunStateAuthority`, agents only through `LeaderPort` / `WorkerPort`, and the client only through `Notifier`.
 * This file must never import a `node:` module, vscode-jsonrpc, pino or better-sqlite3.
 */
import type { Budget, Instance, Mutation, Plan, Task, TaskState } from "../../protocol/common.js";
import type { AgentInputs, AttachmentRef, SessionInputs } from "./product/agent-inputs.js";
import type { RefMove } from "./workspace/records.js";
import type { AgentDirectory, AgentInfo } from "./team.js";
import type { CreationPageOptions, CreationRecord, CreationTexts, CreationTextsSink } from "./creation-order.js";
import type { AppendedEvents, StoredEvent } from "./stored-event.js";
import type { AuthorityChange, DeleteOptions } from "./change-feed-port.js";

// ---------------------------------------------------------------------------------------------------------------
// Time, ids, logging

/** Wall-clock time and timers. Tests inject a fake. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Calls `fn` once after `ms` milliseconds; returns a function that cancels it. */
  setTimer(ms: number, fn: () => void): () => void;
}

/** Structured logger (pino-compatible subset). Never writes to stdout. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  child(bindings: object): Logger;
}

// Owner liveness (DESIGN.md guarantee 13, docs/FLEET.md): in liveness-port.ts, re-exported here.
export type { OwnerLiveness, OwnerLivenessEvent, OwnerLivenessVerdict } from "./liveness-port.js";

/** Generates a fresh unique id with a readable prefix, e.g. `prd_…`, `ckp_…`. */
export type IdGenerator = (prefix: string) => string;

/**
 * The SHA-256 digest of the UTF-8 encoding of `text`, as 64 lower-case hex digits: the hash behind task input binding
 * and drift fingerprints (guarantee 7). The core carries a pure implementation (`sha256Hex` in
 * product/fingerprint.ts); the composition root passes the platform's (`node:crypto`), which gives the same digests
 * many times faster. Must be pure: equal text, equal digest, in every process.
 */
export type Digest = (text: string) => string;

// ---------------------------------------------------------------------------------------------------------------
// Run-state authority (PROTOCOL.md section 7, DESIGN.md guarantees 1-6)

/** One stored record as the authority returns it; `value` is opaque to the authority and validated by the caller. */
export interface StoredRecord {
  value: unknown;
  /** Monotonic per record, starting at 1 on creation. */
  revision: number;
  updatedAt: string;
}

/** A record with its id, as `listValues` returns it. */
export interface ListedRecord extends StoredRecord {
  id: string;
}

/** A record with its project and id, as `listAcrossProjects` returns it. */
export type ProjectRecord = ListedRecord & { projectId: string };
/** Which records `listTexts` reads: one project's, or every project's but one (the index project). */
export type TextListOptions = ({ projectId: string } | { exceptProjectId: string }) & { containing?: string };

// A page in creation order (`listByCreation`), texts in that order (`listTextsByCreation`): in creation-order.ts.
export type { CreationPageOptions, CreationRecord, CreationTexts, CreationTextsSink };

export interface RecordInfo {
  id: string;
  revision: number;
  updatedAt: string;
}

// Stored events and appendEvents' answer (with their stored text length): in stored-event.ts, re-exported here.
export { STORED_TEXT_LENGTH, storedEvent, type AppendedEvents, type StoredEvent } from "./stored-event.js";

export type { AuthorityChange, DeleteOptions } from "./change-feed-port.js";

/**
 * The persistence port. Records are addressed by `{projectId, kind, id}`; event streams by `{projectId, stream}`.
 *
 * Contract shared by every backend (and checked by `test/authority/`):
 * - `put` is compare-and-swap: `expectedRevision: null` means "must not exist"; a mismatch throws `AuthorityConflict`.
 * - `appendEvents` succeeds only when the stream's last sequence number equals `expectedSeq` (0 for a new stream);
 *   otherwise it throws `AuthorityConflict`. The appended events get `expectedSeq + 1 …`.
 * - Reads never write (guarantee 3). Any other failure throws `AuthorityFailure` (guarantee 2 turns it into a pause).
 * - A write resolves only once it is durable (SQLite: committed with fsync; host: acknowledged).
 */
export interface RunStateAuthority {
  /** Short backend name for logs and status: `memory`, `sqlite`, `host`, `postgres`. */
  readonly name: string;
  get(projectId: string, kind: string, id: string): Promise<StoredRecord | null>;
  put(
    projectId: string,
    kind: string,
    id: string,
    value: object,
    expectedRevision: number | null,
  ): Promise<{ revision: number }>;
  /** Deletes a record (CAS on `expectedRevision` when given); `false` when it did not exist. See DeleteOptions. */
  delete(projectId: string, kind: string, id: string, expectedRevision?: number, o?: DeleteOptions): Promise<boolean>;
  /** Records of one kind in one project, ordered by id; `prefix` filters on the id. */
  list(projectId: string, kind: string, prefix?: string): Promise<RecordInfo[]>;
  /**
   * Optional: what `list` then `get` of each id returns, in one read (PostgreSQL: one statement instead of one round
   * trip per record; issue 32, 100,000 stored products). Same order and prefix rule as `list`; never writes.
   */
  listValues?(projectId: string, kind: string, prefix?: string): Promise<ListedRecord[]>;
  /**
   * Optional: `listValues(p, kind)` of every project `p` of `listProjects` in one read, in project order, each with
   * its `projectId` (issue 32: 100,000 stored products). With `containing`, records whose stored JSON text lacks that
   * text may be left out: a pre-filter (one holding it is always returned) the caller narrows further. Never writes.
   */
  listAcrossProjects?(kind: string, options?: { containing?: string }): Promise<ProjectRecord[]>;
  /** Optional, `product` records only (issue 32): a page in creation order, one indexed read. Never writes. */
  listByCreation?(kind: string, options: CreationPageOptions): Promise<CreationRecord[]>;
  /**
   * Optional (issue 32: `product.list` of 100,000 stored products): the stored JSON text of every record of `kind` in
   * `projectId`, or in every project but `exceptProjectId`, unparsed (a text that is not JSON comes back as it is), in
   * no particular order; with `containing`, texts lacking it may be left out (a pre-filter). One read. Never writes.
   */
  listTexts?(kind: string, options: TextListOptions): Promise<string[]>;
  /** Optional, `product` only (issue 32): what `listTexts` reads, in creation order, in batches (`CreationTexts`). */
  listTextsByCreation?(kind: string, options: TextListOptions, onBatch: CreationTextsSink): Promise<void>;
  appendEvents(projectId: string, stream: string, events: object[], expectedSeq: number): Promise<AppendedEvents>;
  /**
   * Events with `seq > afterSeq`, oldest first. With `limit` (a positive integer), the first `limit` of them, or all
   * of them when fewer remain: a result shorter than `limit` means the stream has nothing more after it. Events pruned
   * by `pruneEvents` are not returned, so after a prune the first event may have a `seq` above `afterSeq + 1`.
   * Throws `AuthorityFailure` on an invalid argument (negative `afterSeq`, `limit` not a positive integer).
   */
  readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]>;
  /**
   * Deletes a whole event stream (`product.delete`, guarantee 14). Returns `true` when the stream held at least one
   * event, `false` when it was empty or unknown. Afterwards the stream is empty: its last sequence number is 0 again.
   * Records are never touched.
   */
  deleteStream(projectId: string, stream: string): Promise<boolean>;
  /**
   * Compaction (guarantee 14): deletes the events with `afterSeq < seq < beforeSeq` (`afterSeq` defaults to 0: every
   * event before `beforeSeq`) and returns how many were deleted. The stream's numbering is unchanged (the next append
   * still expects the last sequence number), so the last event is never pruned: a `beforeSeq` above the last sequence
   * number is refused with `AuthorityFailure` and deletes nothing (0 and 1 are always accepted: there is nothing
   * before them). Only the stream's writer (the product's owner) prunes, and only events a snapshot already covers.
   * Optional: a host authority has no such request (PROTOCOL.md section 7), so its streams are never compacted.
   */
  pruneEvents?(projectId: string, stream: string, beforeSeq: number, afterSeq?: number): Promise<number>;
  /**
   * A value that changes whenever anything may have been committed to the store since it was last taken, by any
   * writer, this one included: two equal marks mean every read between them gives the same answer. Lets a reader
   * keep what it read (the lease row and the event-stream head behind `product.status`, issue 16) until the mark
   * moves. Cheap (SQLite: one `PRAGMA data_version`) and synchronous; throws `AuthorityFailure` when the store cannot
   * be read. Optional: without it callers read every time.
   */
  changeMark?(): string;
  /**
   * Lets `changeMark` reuse what it last read from the store while `epoch()` returns the same number (`NaN`: never
   * reuse, never keep); `epoch` must move whenever input that may carry a request was read, and be `NaN` whenever what
   * asks is not serving such input, so a reused mark was always taken after the requests that use it arrived (issue
   * 16). Optional: without it every `changeMark` reads.
   */
  shareChangeMarks?(epoch: () => number): void;
  /** Every project id with at least one record; used by `product.list` without a `projectId`. Optional for hosts. */
  listProjects?(): Promise<string[]>;
  /**
   * Subscribes to changes committed by OTHER writers (other servers on a shared store): a record's key, or a stream.
   * Optional: only backends with a change feed have it (PostgreSQL `LISTEN/NOTIFY`). Delivery is best effort and
   * prompt (milliseconds), never a replacement for reading: callers keep their periodic checks. Returns the
   * unsubscribe function.
   */
  watch?(listener: (change: AuthorityChange) => void): () => void;
  /** Releases resources. Does NOT delete data. */
  close(): Promise<void>;
}

/** Thrown by an authority when a revision/sequence or lease check fails (wire code -32012). */
export class AuthorityConflict extends Error {
  override readonly name = "AuthorityConflict";
  constructor(
    message: string,
    readonly details: { owner?: string; revision?: number } = {},
  ) {
    super(message);
  }
}

/** Thrown by an authority when a read or write fails for any reason other than a conflict (wire code -32013). */
export class AuthorityFailure extends Error {
  override readonly name = "AuthorityFailure";
  /**
   * Whether the failed call read or wrote (PROTOCOL.md section 3, `-32013` data). Set by the backend or by the
   * server's wrapper (`withFailureOperations`) on the way out; absent when nobody knew.
   */
  operation: "read" | "write" | undefined;
  constructor(message: string, options?: { cause?: unknown; operation?: "read" | "write" }) {
    super(message, options);
    this.operation = options?.operation;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Agents (their types live in team.ts) and the leader

export type { AgentDirectory, AgentInfo };
export interface DialogueEntry {
  role: "user" | "leader";
  text: string;
  at: string;
  /** True for the leader's summary of how a run ended (set only on such summaries). */
  outcome?: true;
  /** A user message's images and binary resources, by reference (issue 31, product/agent-inputs.ts). */
  attachments?: AttachmentRef[];
}
/** What the leader is given to plan. */
export interface PlanRequest extends SessionInputs {
  productId: string;
  goal: string;
  cwd: string;
  /** Agents the plan may assign work to (already filtered by `allowedAgents`). Empty = the leader works alone. */
  roster: AgentInfo[];
  /** At most this many tasks run at once, so the plan needs no more instances (issue 28). Absent: unbounded. */
  maxParallelTasks?: number;
  /** The product's title once set (issue 28): the plan is stored under it; absent, this plan's name becomes it. */
  title?: string;
  /** The conversation so far, oldest first; revision messages are the user entries after the first plan. */
  dialogue: DialogueEntry[];
  previousPlan?: Plan;
  /** Answers to a pending `leaderAsk`, when the user gave them. */
  answers?: { askId: string; content: string };
  signal: AbortSignal;
  /** Leader text as it streams (`product.planningDelta`). */
  onText(text: string): void;
}

/** The plan a leader returns: a Plan without the server-owned fields. */
export type DraftPlan = Omit<Plan, "productId" | "version">;

export type PlanResult =
  | { kind: "plan"; plan: DraftPlan; message: string }
  | { kind: "ask"; message: string; questions: { question: string; options?: string[] }[] };

/** A user message to the leader while the product executes or is paused. */
export interface MessageRequest extends SessionInputs {
  productId: string;
  goal: string;
  content: string;
  plan: Plan;
  tasks: TaskState[];
  roster: AgentInfo[];
  /** The message's images and binary resources, by reference (issue 31). */
  attachments?: AttachmentRef[];
  signal: AbortSignal;
  onText(text: string): void;
}

export interface MessageResult {
  response: string;
  mutations?: Mutation[];
}

/** The leader is consulted after a task failed its final attempt (DESIGN.md, Execution model). */
export interface FailureConsultation extends SessionInputs {
  productId: string;
  goal: string;
  failedTask: TaskState;
  plan: Plan;
  tasks: TaskState[];
  roster: AgentInfo[];
  signal: AbortSignal;
}

export type FailureDecision =
  | { kind: "mutate"; mutations: Mutation[]; message: string }
  | { kind: "giveUp"; message: string };

/** One checkable statement derived from a goal (DESIGN.md vocabulary: acceptance criterion). */
export interface AcceptanceCriterion {
  /** Stable id within a goal run, e.g. `c1`. */
  id: string;
  text: string;
}

/** Asks the leader to derive acceptance criteria from a goal (the start of a goal run, PROTOCOL.md section 6). */
export interface ChecklistRequest {
  goalRunId: string;
  goal: string;
  cwd: string;
  roster: AgentInfo[];
  signal: AbortSignal;
}

export interface ChecklistResult {
  /** At least one criterion; ids unique. */
  criteria: AcceptanceCriterion[];
  message: string;
}

/** Asks the leader to plan the next phase (one product) of a goal run. */
export interface PhasePlanRequest {
  goalRunId: string;
  /** The current goal (after edits). */
  goal: string;
  cwd: string;
  /** 0-based index of the phase being planned. */
  phaseIndex: number;
  criteria: (AcceptanceCriterion & { passed: boolean })[];
  /** Plain-words summary of what earlier phases did. */
  progressSummary: string;
  /** User messages queued since the last phase boundary, oldest first. */
  messages: string[];
  roster: AgentInfo[];
  signal: AbortSignal;
  onText(text: string): void;
}

export interface PhasePlanResult {
  plan: DraftPlan;
  message: string;
  /** Ids of the criteria this phase works towards (informational). */
  targets: string[];
}

/** Asks the leader which criteria pass after a phase ran. */
export interface AssessRequest {
  goalRunId: string;
  goal: string;
  phaseIndex: number;
  criteria: (AcceptanceCriterion & { passed: boolean })[];
  /** The phase's plan and final task states. */
  plan: Plan;
  tasks: TaskState[];
  /** The criteria the phase targeted (from `PhasePlanResult.targets`). */
  targets: string[];
  signal: AbortSignal;
}

export interface AssessResult {
  /** Ids of every criterion that passes now (not only the new ones). */
  passed: string[];
  message: string;
}

// AgentConfigurationError and remediationThen live in agent-errors.ts, re-exported here.
export { AgentConfigurationError, remediationThen } from "./agent-errors.js";

/**
 * The leader: plans, answers the user, decides what to do about a final failure, and drives goal runs
 * (derive a checklist, plan one phase, assess a phase). Every method rejects with an `AgentConfigurationError` when
 * the leader agent cannot be started for a reason retrying cannot fix, and with other errors for other failures.
 */
export interface LeaderPort {
  plan(request: PlanRequest): Promise<PlanResult>;
  message(request: MessageRequest): Promise<MessageResult>;
  consultOnFailure(request: FailureConsultation): Promise<FailureDecision>;
  deriveChecklist(request: ChecklistRequest): Promise<ChecklistResult>;
  planPhase(request: PhasePlanRequest): Promise<PhasePlanResult>;
  assess(request: AssessRequest): Promise<AssessResult>;
}

/** Chooses the leader for a product (`leaderAgentId` in `product.plan`, else the configured default). */
export type LeaderResolver = (leaderAgentId: string | undefined) => LeaderPort;

export interface DependencyOutput {
  taskId: string;
  title: string;
  output: string;
}

/** Also the product's `AgentInputs` (MCP servers, additional directories, attachments; product/agent-inputs.ts). */
export interface WorkerRequest extends AgentInputs {
  productId: string;
  task: Task;
  instance: Instance;
  /** Absolute workspace directory of the attempt: the product's `cwd`, or the attempt's own worktree. */
  cwd: string;
  /**
   * True when `cwd` is the attempt's own git worktree (isolation `worktree`): its edits reach the user only through
   * the orchestrator's merge, so the default permission policy may allow `read` and `edit` there (issue 12).
   */
  isolated?: boolean;
  /** With `isolated`: the product's own `cwd` (the user's checkout), which the attempt may reach only through its worktree. */
  checkout?: string;
  /** With `isolated`: the attempt's worktree, its fs root, when `cwd` is a folder of it (issue 31); else `cwd`. */
  root?: string;
  /** 1-based attempt number. */
  attempt: number;
  dependencyOutputs: DependencyOutput[];
  /** Why the previous attempt failed (a retry), e.g. a red verification check's output (guarantee 17). */
  previousError?: string;
  /** Aborted by pause, cancel, delete or shutdown; the worker must settle promptly with `cancelled`. */
  signal: AbortSignal;
}

/** A worker permission request that was refused (PROTOCOL.md section 5, `TaskState.refusedPermissions`). */
export interface RefusedPermission {
  /** ACP tool kind of the refused tool call (`other` when nobody said). */
  kind: string;
  /** One-line title of the refused tool call. */
  title: string;
  /** Who refused: the configured permission policy, or the client (the IDE of the product's ACP session). */
  by: "policy" | "client";
}

export interface WorkerEvents {
  /** Agent message text (`product.taskOutputDelta`). */
  onText(text: string): void;
  /**
   * A tool call the agent reported (`product.agentActivity`): `toolName` is its one-line title. Called once per tool
   * call, and again with the same `toolCallId` each time its title changes.
   */
  onActivity(toolName: string, toolCallId?: string): void;
  /**
   * Token usage the agent reported for a prompt it answered (integers, tokens). Without reports the core estimates
   * 4 characters per token (labelled `estimated`).
   */
  onUsage(usage: { inputTokens: number; outputTokens: number }): void;
  /** A permission request of the worker was refused (by the policy or by the client). Kept on the task. */
  onPermissionRefused?(refusal: RefusedPermission): void;
  /** The provider is overloaded (issue 28): the worker retries in `retryInMs`, same attempt; `message` in words,
   * `reason` its cause alone (`provider overloaded`), from which `product.status` counts the retry down. */
  onOverloaded?(wait: { message: string; reason: string; retryInMs: number; retry: number }): void;
}

/**
 * Why a failed attempt failed, when the core must treat it specially:
 * - `configuration`: retrying cannot help (missing command, authentication required, the agent refused `initialize`
 *   or `session/new`): the product pauses with a recovery naming the agent and the fix (DESIGN.md "Processes").
 * - `permission`: the turn ended after the permission policy refused an action: not retried under the same policy.
 */
export type WorkerFailureKind = "configuration" | "permission";

export type WorkerResult =
  | { outcome: "completed"; output: string }
  | {
      outcome: "failed";
      error: string;
      kind?: WorkerFailureKind;
      /** For `configuration`: what the operator should do, in plain words, naming the agent. */
      remediation?: string;
      /** The agent this attempt ran on. */
      agentId?: string;
      /** False when the attempt failed before a prompt was sent: nothing is charged for it. */
      prompted?: boolean;
    }
  /** `prompted: false`: stopped before a prompt was sent (nothing is charged). */
  | { outcome: "cancelled"; prompted?: boolean }
  /** The worker needs an answer before it can go on (DESIGN.md guarantee 8). */
  | { outcome: "waiting"; question: string };

/** Runs one task attempt on a worker agent. Implementations must never throw for agent failures: they return `failed`. */
export interface WorkerPort {
  runTask(request: WorkerRequest, events: WorkerEvents): Promise<WorkerResult>;
  /** Stops every running worker (session/cancel, then kill after a grace period). Resolves when none is left. */
  shutdown(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------------------
// Notifications to the client

/**
 * Sends a server-to-client notification by its bare name (`product.taskStatus`); the server adds the ACP `_` prefix
 * when the client asked for it (PROTOCOL.md section 2). Never throws; delivery failures are logged by the server.
 */
export interface Notifier {
  notify(method: string, params: Record<string, unknown>): void;
}

export type { Budget };

// ---------------------------------------------------------------------------------------------------------------
// Workspace

/**
 * Reads facts about a product's workspace that its progress depends on (issue 4, drift detection). Read-only: it
 * never changes the workspace.
 */
export interface WorkspaceProbe {
  /**
   * The commit the workspace's git HEAD points at (40 or 64 hex digits), or `null` when `cwd` is not inside a git
   * checkout (or the HEAD cannot be read). Never throws.
   */
  gitHead(cwd: string): Promise<string | null>;
}

/** What a product's `cwd` is, as far as isolation goes (PROTOCOL.md section 5, Isolation and integration). */
export type WorkspaceInfo =
  | {
      kind: "git";
      /** The commit checked out in `cwd` (hex). */
      head: string;
      /** The branch checked out in `cwd` (`main`, without `refs/heads/`), or `null` on a detached HEAD. */
      branch: string | null;
    }
  /** Not usable for worktrees; `reason` says why in one plain sentence (not a git checkout, no commit yet, …). */
  | { kind: "none"; reason: string };

/** What merging a task attempt's commit into the integration head would give (`tree`: the commit's, when known). */
export type MergeOutcome =
  | { kind: "fastForward"; commit: string; tree?: string }
  | { kind: "merge"; commit: string; tree?: string }
  | { kind: "conflict"; files: string[] };

/**
 * Isolated workspaces and integration over a repository (DESIGN.md, Workspaces and integration; guarantee 11). The
 * core decides what to do and records each step as an event BEFORE it calls a method that moves a ref; the adapter
 * does it (git) and must make every ref move a compare-and-swap on the expected head, so a step replayed after a crash
 * either finds the ref where it left it or refuses. `cwd` is always the product's workspace (any directory of the
 * repository); refs are full names (`refs/heads/acp/<productId>`). Methods throw an `Error` with a plain message on a
 * git failure; none of them touches the user's working tree or branches except `integrateInto`.
 */
export interface WorkspacePort {
  /** Whether `cwd` can host worktrees (a git checkout with at least one commit). Reads only; never throws. */
  inspect(cwd: string): Promise<WorkspaceInfo>;
  /** The absolute directory a task attempt's worktree will use, outside the user's working tree. Creates nothing. */
  attemptPath(cwd: string, productId: string, taskId: string, attempt: number): Promise<string>;
  /**
   * Issue 31: the agent's cwd, the folder of `worktree` where `cwd` lies in its repository (`<worktree>/pkg/sub` for a
   * cwd at `pkg/sub`; `worktree` at the top level; absent on a remote mirror: `worktree`). Creates nothing (`prepare` does).
   */
  attemptCwd?(cwd: string, worktree: string): Promise<string>;
  /** The commit a ref points at, or `null` when it does not exist. Reads only. */
  readRef(cwd: string, ref: string): Promise<string | null>;
  /**
   * Moves `ref` to `to` only if it now points at `expected` (`null`: only if it does not exist). Returns true when
   * the ref is at `to` afterwards (moved now, or already there); false when it is somewhere else (nothing moved).
   * `moveRefs` (optional): several such moves in one round trip (one push; issue 33), each its own swap and answer.
   */
  moveRef(cwd: string, ref: string, to: string, expected: string | null): Promise<boolean>;
  moveRefs?(cwd: string, moves: readonly RefMove[]): Promise<boolean[]>;
  /** Deletes every ref under `prefix` (`refs/acp-orchestrator/<productId>/`) and the given refs. Missing ones are fine. */
  deleteRefs(cwd: string, refs: string[], prefix?: string): Promise<void>;
  /**
   * Creates a detached worktree at `path` checked out at `base`, holding exactly the base's files, plus the folder
   * `attemptCwd` names, created empty when the base lacks it (issue 31). Idempotent: an existing worktree is kept.
   */
  prepare(cwd: string, path: string, base: string): Promise<void>;
  /**
   * Commits everything the worktree at `path` holds that differs from `base` (the commit the orchestrator prepared it
   * at; guarantee 16): the worker's loose edits and its own commits alike, as one commit whose only parent is `base`.
   * `commit: null` when nothing differs (no commit is made). `changedFiles` names at most a bounded sample of the
   * changed paths and `changedFilesTotal` counts them all. Throws when git fails, or when the worktree's `.git` was
   * tampered with (the message says what was found). No ref moves (the caller keeps the commit under a ref).
   */
  capture(path: string, message: string, base: string): Promise<CaptureResult>;
  /** What merging `commit` into `head` gives (fast-forward, a new merge commit object, or the conflicting files). */
  merge(cwd: string, head: string, commit: string, message: string): Promise<MergeOutcome>;
  /**
   * Ends the use of the worktree at `path`. Without `reuse` it is removed (and forgotten by git). With `reuse` (an
   * attempt ended while its product keeps running) the adapter may keep it, out of the attempt's path and listed by
   * `leftovers`, to make the product's next `prepare` cheaper; that `prepare` must still give exactly the base's tree
   * (no file of the earlier attempt, tracked, untracked or ignored). Missing is fine.
   */
  release(cwd: string, path: string, options?: { reuse?: boolean }): Promise<void>;
  /** Worktree directories of a product that still exist (leftovers of a dead owner, or running attempts). */
  leftovers(cwd: string, productId: string): Promise<string[]>;
  /**
   * Removes the product's own folder of worktrees with whatever is still in it (a worktree a release missed, a parked
   * one) and git's records of those worktrees (`product.delete`, after its attempts ended). Only that folder: nothing
   * is removed when `productId` does not name a folder of its own (a name the adapter would have to rewrite, which
   * another product could share), or when the folder is not where it should be (a symbolic link, not a folder).
   * Missing is fine.
   */
  removeProductFolder(cwd: string, productId: string): Promise<void>;
  /**
   * Brings `head` into the branch `target` (short name): fast-forward or merge commit, never a rewrite. When `target`
   * is checked out in `cwd` the user's working tree is fast-forwarded by git itself. Never touches an operation of the
   * user's: with a merge, rebase, cherry-pick, revert or bisect in progress, or uncommitted changes in files the merge
   * changes, nothing is changed and the answer is `deferred` with the reason. A conflict names every conflicting file
   * (nothing changed). Returns the target's new head otherwise.
   */
  integrateInto(cwd: string, target: string, head: string, message: string): Promise<TargetOutcome>;
  /** A remote-backed port (`cwd` = the remote URL) fetches the remote into its mirror; throws naming the remote. */
  refresh?(cwd: string): Promise<void>;
}

/** What `WorkspacePort.capture` gives: the task commit (`tree`: its tree id, when known), a sample of the changed paths. */
export interface CaptureResult {
  commit: string | null;
  tree?: string;
  changedFiles: string[];
  changedFilesTotal: number;
}

/** What `WorkspacePort.integrateInto` gives (PROTOCOL.md section 5, `integration.state`). */
export type TargetOutcome =
  | { state: "integrated"; head: string }
  | { state: "conflict"; files: string[] }
  | { state: "deferred"; reason: string };
