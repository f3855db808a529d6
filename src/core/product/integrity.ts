/**
 * Whole-state validation of a product read back from the run-state authority (DESIGN.md guarantee 15).
 *
 * Every record is already parsed by its zod schema (guarantee 4); this file checks what no single record can: that
 * the state they reduce to obeys the domain's rules (unique task ids, dependencies on known tasks, no cycle, every
 * task state belongs to a task of the plan, checkpoints inside the stream). A state that breaks one is refused
 * fail-closed by the caller: it is never scheduled, so nothing read back can crash the process or be executed.
 * Pure and O(V+E); it never throws, never performs I/O and never changes the state it is given.
 */
import { sameGraph, validatePlanGraph, validatePlanLists } from "../dag/graph.js";
import type { ProductState } from "./records.js";

/**
 * The first rule `state` breaks, as one plain sentence naming the offending task or checkpoint, or `undefined` when
 * the state is whole. `productId` is the product the state was loaded for (a stream holding another product's
 * `created` event is refused too). Does NOT check what the schemas check (field shapes, bounded counters).
 */
export function checkProductState(state: ProductState, productId: string): string | undefined {
  if (state.productId !== productId) {
    return `The stored state names product ${state.productId}, not ${productId}.`;
  }
  const plan = state.plan;
  if (plan) {
    const check = validatePlanLists(plan);
    if (!check.ok) return `The stored plan is not a valid DAG: ${check.reason}`;
  }
  if (state.tasks.length > 0) {
    if (!plan) return `The stored state has ${state.tasks.length} task states but no plan.`;
    // A task the plan does not have first: its state may have no definition (a `started` event's, evolve.ts).
    const planned = new Set(plan.tasks.map((t) => t.taskId));
    const extra = state.tasks.find((t) => !planned.has(t.taskId));
    if (extra) return `A stored event is for task ${extra.taskId}, which the plan does not have.`;
    // Task states normally carry the plan's graph unchanged (same tasks, instances and dependencies in the same
    // order): then the plan's check above covers them, and a 10,000-task load does not validate the graph twice.
    if (!sameGraph(plan.tasks, state.tasks)) {
      const check = validatePlanGraph(plan.instances, state.tasks);
      if (!check.ok) return `The stored task states do not form a valid DAG: ${check.reason}`;
    }
    if (state.tasks.length !== planned.size) {
      const known = new Set(state.tasks.map((t) => t.taskId));
      const missing = plan.tasks.find((t) => !known.has(t.taskId));
      return `Task ${missing?.taskId ?? "?"} of the plan has no stored state.`;
    }
  }
  const checkpoints = new Set<string>();
  for (const ref of state.checkpoints) {
    if (checkpoints.has(ref.checkpointId)) return `Checkpoint ${ref.checkpointId} is recorded twice.`;
    checkpoints.add(ref.checkpointId);
    if (ref.seq > state.seq) {
      return `Checkpoint ${ref.checkpointId} is at event ${ref.seq}, after the last stored event (${state.seq}).`;
    }
  }
  return undefined;
}
