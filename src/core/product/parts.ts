/**
 * The composition of one product's orchestrator (issue 27): the plain data every part reads (model, context, health)
 * and the collaborators, each owning its own state behind its own methods — sections (serialisation), journal
 * (persistence), ownership (lease), pool (workers), timers (clock and budgets), inputs (fingerprints and drift),
 * workspaces (isolation and integration), verification (guarantee 17: the gate and its verdicts), leader (the leader channel), run (the execution loop), access (what may
 * be done now), lifecycle (confirm, pause, resume, cancel, mutate) and history (checkpoints, rollback, replay). `ProductOrchestrator` (orchestrator.ts) builds it once; no part inherits from another. Types only.
 */
import type { ProductAccess } from "./access.js";
import type { ProductContext } from "./context.js";
import type { ExecutionLoop } from "./execution.js";
import type { ProductHistory } from "./history.js";
import type { ProductJournal } from "./journal.js";
import type { LeaderChannel } from "./leader-channel.js";
import type { Lifecycle } from "./lifecycle.js";
import type { Ownership } from "./ownership.js";
import type { RunInputs } from "./run-inputs.js";
import type { ExclusiveSections } from "./sections.js";
import type { ProductModel } from "./state.js";
import type { RunTimers } from "./timers.js";
import type { WorkerPool } from "./worker-pool.js";
import type { ProductVerification } from "./product-verification.js";
import type { WorkspaceCoordinator } from "./workspace-coordinator.js";

/** What loading and catching up found about the stored records (guarantees 4 and 15), and the status epoch. */
export interface ProductHealth {
  /** Records that failed validation when this product was loaded (guarantee 4). */
  dropped: number;
  /** Events lost when loading (invalid or missing): the product must not run again (guarantee 4). */
  lost: number;
  /** The domain rule the stored state breaks as a whole, when it does (guarantee 15): the product must not run again. */
  invalid: string | undefined;
  /** True when this orchestrator was built from stored state (not created in this process). */
  loadedFromStore: boolean;
  /** Set when catching up found that another process deleted the product: every later read or write is `not_found`. */
  deletedElsewhere: boolean;
  /** Bumped by every change of what `product.status` shows that no event records (status.ts answer versions). */
  statusEpoch: number;
}

export interface ProductParts {
  readonly model: ProductModel;
  readonly ctx: ProductContext;
  readonly health: ProductHealth;
  readonly sections: ExclusiveSections;
  readonly journal: ProductJournal;
  readonly ownership: Ownership;
  readonly pool: WorkerPool;
  readonly timers: RunTimers;
  readonly inputs: RunInputs;
  readonly workspaces: WorkspaceCoordinator;
  readonly verification: ProductVerification;
  readonly leader: LeaderChannel;
  readonly run: ExecutionLoop;
  readonly access: ProductAccess;
  readonly lifecycle: Lifecycle;
  readonly history: ProductHistory;
}
