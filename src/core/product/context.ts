/**
 * What a product orchestrator needs from the outside, bundled once by the composition root.
 * This file holds only types and small defaults; it must never perform I/O.
 */
import type {
  AgentDirectory,
  Clock,
  IdGenerator,
  LeaderResolver,
  Logger,
  Notifier,
  WorkerPort,
} from "../ports.js";
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
}

export const DEFAULT_PRODUCT_OPTIONS: ProductOptions = {
  maxParallelTasks: 4,
  defaultMaxAttempts: 2,
  checkpointHistory: 20,
  safetyCheckpointMs: 5 * 60_000,
  longRunSafetyCheckpointMs: 30 * 60_000,
  budgetWarningRatio: 0.8,
  fallbackWorkerAgentId: "builtin-worker",
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
}
