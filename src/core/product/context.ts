/**
 * What a product orchestrator needs from the outside, bundled once by the composition root.
 * This file holds only types and small defaults; it must never perform I/O.
 */
import type { Phase } from "../../../protocol/common.js";
import type { WorkspaceRemote } from "../../../protocol/workspace-remote.js";
import type {
  AgentDirectory,
  Clock,
  Digest,
  IdGenerator,
  LeaderResolver,
  Logger,
  Notifier,
  OwnerLiveness,
  WorkerPort,
  WorkspacePort,
  WorkspaceProbe,
} from "../ports.js";
import type { VerifyConfig } from "../../../protocol/verify.js";
import type { VerifyPort } from "../workspace/verify-port.js";
import type { LiveOutputRecorder } from "./live-output.js";
import type { ProductStore } from "./store.js";

export interface ProductOptions {
  /** Upper bound of tasks running at once in one product (DESIGN.md, Execution model). */
  maxParallelTasks: number;
  /** Attempts per task when the task does not say (issue 2: default 2). */
  defaultMaxAttempts: number;
  /** Checkpoints kept per product (default 20). */
  checkpointHistory: number;
  /** Safety checkpoint period in ms while executing (default 5 min). */
  safetyCheckpointMs: number;
  /** Safety checkpoint period in ms once a run is older than 48 h (default 30 min). */
  longRunSafetyCheckpointMs: number;
  /** Fraction of a budget at which the one warning is sent (guarantee 9: 0.8). */
  budgetWarningRatio: number;
  /** The agent that runs tasks assigned to the leader when the leader is not itself an agent. */
  fallbackWorkerAgentId: string;
  /**
   * This process's owner id in product leases (DESIGN.md guarantee 6). Must be unique per live process: the
   * composition root makes a random one. Two processes with the same id are treated as one owner (a process restarted
   * with its old id may take its own lease back at once).
   */
  ownerId: string;
  /** How long a product lease lives without renewal, in ms (default 30 s). */
  leaseTtlMs: number;
  /** How often the owner renews its lease, in ms (default 10 s; must be well below `leaseTtlMs`). */
  leaseRenewMs: number;
  /**
   * The least time between two writes of a running product's header that differ only in progress, in ms (default
   * 1000, `DEFAULT_HEADER_PROGRESS_MS`; 0: every execution wave writes it). Phase changes are written at once
   * (header-pacing.ts, issue 32).
   */
  headerProgressMs?: number;
  /**
   * Version of the leader's prompt templates, part of the plan fingerprint (drift detection). The composition root
   * passes the adapter's constant (`leader-prompts.ts`); the core never imports adapters. Default `heuristic-1`.
   */
  leaderPromptVersion: string;
  /**
   * A fingerprint of the agent registry's definitions (commands, args, env, roles), part of the drift check. When
   * absent the core hashes what `AgentDirectory.list()` shows (ids, names, roles, strengths).
   */
  agentsFingerprint?: () => string;
  /**
   * The fingerprint of each agent definition by `agentId` (`agentHashes` of fingerprint.ts; issue 28), recorded with
   * the run so a reader can name which agents differ. Absent: each entry of `AgentDirectory.list()` is hashed.
   */
  agentHashes?: () => Record<string, string>;
  /**
   * Whose registry `agentsFingerprint` describes (issue 28): `server` (default), a server that would drive the run;
   * `reader`, an operator command, whose registry differing from the recorded one is said as such, never as the
   * run's agents having changed.
   */
  registryView?: "server" | "reader";
  /**
   * The agent config file this server loaded (absolute; `--config`, else the working directory's
   * acp-orchestrator.json), recorded in the run's fingerprint so the resume command an operator view prints names it;
   * absent: the server loaded none (built-in agents only).
   */
  configPath?: string;
  /** Isolation of products whose `product.plan` does not say (config file `isolation`); default by workspace. */
  isolation?: "worktree" | "shared";
  /** Integration of products whose `product.plan` does not say (config file `integration`); default `branch`. */
  integration?: { mode?: "branch" | "merge"; targetBranch?: string };
  /** Verification commands of products whose `product.plan` does not say (config file `verify`; guarantee 17). */
  verify?: VerifyConfig;
  /** The git remote of products whose `product.plan` names none (config file `workspace`); default: their `cwd`. */
  workspace?: WorkspaceRemote;
}

export const DEFAULT_PRODUCT_OPTIONS: ProductOptions = {
  maxParallelTasks: 4,
  defaultMaxAttempts: 2,
  checkpointHistory: 20,
  safetyCheckpointMs: 5 * 60_000,
  longRunSafetyCheckpointMs: 30 * 60_000,
  budgetWarningRatio: 0.8,
  fallbackWorkerAgentId: "builtin-worker",
  ownerId: "local",
  leaseTtlMs: 30_000,
  leaseRenewMs: 10_000,
  leaderPromptVersion: "heuristic-1",
};

export interface ProductContext {
  store: ProductStore;
  leader: LeaderResolver;
  workers: WorkerPort;
  agents: AgentDirectory;
  notifier: Notifier;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  /**
   * Runs `fn` after the current request has been answered (the server uses `setImmediate`), so that a result such as
   * `product.plan`'s always precedes the notifications about it (PROTOCOL.md section 5).
   */
  defer(fn: () => void): void;
  options: ProductOptions;
  /**
   * Tells whether the process behind a lease owner id still runs (guarantee 13): a same-host owner that is gone is
   * taken over at once. When absent, no owner is ever provably dead and every lease is respected until it expires.
   */
  liveness?: OwnerLiveness;
  /**
   * SHA-256 for task input hashes and fingerprints (guarantee 7); the core's pure implementation when absent. The
   * server passes `node:crypto`'s (same digests, many times faster).
   */
  digest?: Digest;
  /** Reads the workspace's git HEAD for drift detection; when absent every workspace counts as "not in git". */
  workspace?: WorkspaceProbe;
  /**
   * Worktrees and integration (guarantee 11). When absent every product runs `shared` (the reason says so): a core
   * without a git adapter still works, e.g. in unit tests.
   */
  workspaces?: WorkspacePort;
  /** Runs verification commands (guarantee 17). When absent, configured checks cannot run: candidates stay unverified. */
  verifier?: VerifyPort;
  /** Persists running attempts' output tails for readers in other processes (issue 29); none when absent. */
  liveOutput?: LiveOutputRecorder;
  /**
   * Worktrees and integration of remote-backed products (issue 33): the same port, where `cwd` is the product's
   * remote URL; the adapter keeps a mirror per remote and makes every ref move a push with an expected old value.
   * When absent, `product.plan` with a `workspace` is refused.
   */
  remoteWorkspaces?: WorkspacePort;
  /**
   * Called after a product's phase changed (persisted, or in memory after a persistence failure). Used by goal runs
   * to follow their phase's product. Must not throw and must not call back into the product synchronously.
   */
  onPhaseChange?: (productId: string, phase: Phase) => void;
}
