/**
 * ProductOrchestrator: the life of one product — planning dialogue, confirmation, DAG execution on workers, retries,
 * leader consultation, mutations, budgets, pause/resume/cancel, checkpoints, rollback and replay.
 *
 * Every change is an event appended to the product's stream through the ProductStore BEFORE it is acted on or
 * announced (DESIGN.md guarantee 1). A failed write pauses the product and tells the client (guarantee 2); a refused
 * write (someone else owns the product) stops this owner for good (guarantee 6). Execution runs only under the
 * product's lease (lease.ts), taken before the first task starts and given back when execution stops; a completed
 * task is recorded with a hash of its input and drift of the run's inputs is detected from a fingerprint
 * (fingerprint.ts; guarantee 7 and issue 4). Operations on one product are
 * serialised through `exclusive`; workers and leader turns run outside it so a long turn never blocks pause/cancel.
 *
 * This file must never import I/O: time comes from the Clock, cancellation is AbortSignal, the rest are ports.
 */
import { OrchestratorStatus } from "./status.js";

export { estimateTokens } from "./execution.js";
export type { DriftRecovery } from "./status.js";

/**
 * The one public face of a product's orchestrator, built as layers by responsibility (each file extends the one
 * before): base.ts (state, serialisation, persistence, ownership, stopping workers), inputs.ts (task inputs,
 * fingerprints, drift), planning.ts (the leader dialogue), execution.ts (confirmation, waves, workers, budgets,
 * consultation, timers), control.ts (pause, resume, cancel, shutdown, mutations), history.ts (checkpoints, rollback,
 * replay) and status.ts (status, inspect, recovery). Construct it with `new ProductOrchestrator(model, ctx)`.
 */
export class ProductOrchestrator extends OrchestratorStatus {}
