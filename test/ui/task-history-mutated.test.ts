/**
 * The dashboard's task history expands a `started` event (issue 34) from the task as the events before it left it,
 * mutations and rollbacks included: an attempt started after the task was reassigned (here while the product was
 * paused by a configuration error, the remedy its recovery suggests) runs on its new instance's seat, with its new
 * agent, as the running `task` event of older stores said. Real store (MemoryAuthority through ProductStore), the
 * reader the dashboard uses.
 */
import { describe, expect, it } from "vitest";
import type { Plan } from "../../protocol/common.js";
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import type { ProductEvent } from "../../src/core/product/records.js";
import { ProductStore } from "../../src/core/product/store.js";
import { RunStateReader } from "../../src/operator/run-state-reader.js";
import { attemptHistory, timeline } from "../../src/ui/task-history.js";

const PRODUCT = "prd_hist_mut";
const PROJECT = "proj";
const PLAN: Plan = {
  productId: PRODUCT,
  version: 1,
  name: "History",
  summary: "One task.",
  instances: [
    { instanceId: "i1", agentId: "broken", role: "coder" },
    { instanceId: "i2", agentId: "coder", role: "coder" },
  ],
  tasks: [{ taskId: "t1", title: "Write", description: "Write it.", instanceId: "i1", dependsOn: [] }],
};
const REASSIGNED: Plan = {
  ...PLAN,
  version: 2,
  tasks: [{ taskId: "t1", title: "Write", description: "Write it.", instanceId: "i2", dependsOn: [] }],
};

const at = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s)).toISOString();
const stamped = (s: number, raw: Record<string, unknown>) => ({ v: 1, at: at(s), ...raw }) as ProductEvent;

async function store(afterPause: Record<string, unknown>[]): Promise<RunStateReader> {
  const authority = new MemoryAuthority();
  const products = new ProductStore(authority, 5);
  const created = { type: "created", productId: PRODUCT, projectId: PROJECT, name: "History", goal: "g", cwd: "/w" };
  const model = await products.create(PROJECT, PRODUCT, [stamped(0, created)]);
  await products.append(model, [stamped(1, { type: "confirmed", plan: PLAN })]);
  await products.append(model, [stamped(2, { type: "started", tasks: [{ taskId: "t1", attempt: 1 }] })]);
  const running = model.state.tasks[0];
  const error = "Agent broken could not start.";
  await products.append(model, [
    stamped(3, {
      type: "task",
      task: { ...running, status: "pending", endedAt: at(3), error, interruption: `The attempt could not start: ${error}` },
    }),
    stamped(3, {
      type: "phase",
      phase: "paused",
      recovery: { cause: error, resumable: true, remediation: "Fix the agent configuration." },
    }),
  ]);
  for (const [k, raw] of afterPause.entries()) await products.append(model, [stamped(4 + k, raw)]);
  await products.append(model, [stamped(8, { type: "started", tasks: [{ taskId: "t1", attempt: 2 }] })]);
  return new RunStateReader({ authority });
}

describe("task history of an attempt started after a mutation (issue 34)", () => {
  it("shows the attempt on the instance the task was reassigned to", async () => {
    const reader = await store([
      {
        type: "mutated",
        by: "user",
        mutations: [{ op: "reassign", taskId: "t1", instanceId: "i2" }],
        plan: REASSIGNED,
      },
      { type: "phase", phase: "executing", recovery: null },
    ]);
    const attempts = await attemptHistory(reader, PRODUCT, "t1");
    expect(attempts.map((a) => [a.attempt, a.instanceId, a.agent, a.status])).toEqual([
      [1, "i1", "broken", "pending"],
      [2, "i2", "coder", "running"],
    ]);
    const view = await timeline(reader, PRODUCT, Date.UTC(2030, 0, 1, 0, 1));
    expect(view.seats.map((s) => [s.instanceId, s.bars.map((b) => [b.attempt, b.status])])).toEqual([
      ["i1", [[1, "pending"]]],
      ["i2", [[2, "running"]]],
    ]);
  });

  it("shows the attempt on the instance a rollback restored", async () => {
    const reassign = (instanceId: string) => [{ op: "reassign", taskId: "t1", instanceId }];
    const rolledBack = { ...REASSIGNED.tasks[0], status: "pending", attempts: 1 };
    const reader = await store([
      { type: "mutated", by: "user", mutations: reassign("i2"), plan: REASSIGNED },
      { type: "checkpoint", checkpointId: "ckp_x", completed: 0, total: 1 },
      { type: "mutated", by: "user", mutations: reassign("i1"), plan: { ...PLAN, version: 3 } },
      { type: "restored", checkpointId: "ckp_x", plan: REASSIGNED, tasks: [rolledBack] },
    ]);
    const attempts = await attemptHistory(reader, PRODUCT, "t1");
    expect(attempts.map((a) => [a.attempt, a.instanceId, a.agent])).toEqual([
      [1, "i1", "broken"],
      [2, "i2", "coder"],
    ]);
  });
});
