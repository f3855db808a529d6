/**
 * The dashboard's task history reads a wave's starts written as one `started` event (issue 34) as it reads the
 * `task` events of older stores: the attempt running since the event's instant, on its instance's seat, with its
 * worktree, then its later states. Real store (MemoryAuthority through ProductStore), the reader the dashboard uses.
 */
import { describe, expect, it } from "vitest";
import type { Plan } from "../../protocol/common.js";
import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import type { ProductEvent } from "../../src/core/product/records.js";
import { ProductStore } from "../../src/core/product/store.js";
import { RunStateReader } from "../../src/operator/run-state-reader.js";
import { attemptHistory, timeline } from "../../src/ui/task-history.js";

const PRODUCT = "prd_hist";
const PROJECT = "proj";
const PLAN: Plan = {
  productId: PRODUCT,
  version: 1,
  name: "History",
  summary: "Two tasks.",
  instances: [
    { instanceId: "i1", agentId: "coder", role: "coder" },
    { instanceId: "i2", agentId: "reviewer", role: "reviewer" },
  ],
  tasks: [
    { taskId: "t1", title: "Write", description: "Write it.", instanceId: "i1", dependsOn: [] },
    { taskId: "t2", title: "Review", description: "Review it.", instanceId: "i2", dependsOn: [] },
  ],
};
const WORKSPACE = { path: "/w/.wt/t1-1", branch: "refs/acp/t1/1", baseCommit: "e".repeat(40) };

const at = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s)).toISOString();
const stamped = (s: number, raw: Record<string, unknown>) => ({ v: 1, at: at(s), ...raw }) as ProductEvent;

describe("task history from a wave's started event (issue 34)", () => {
  it("shows each started attempt running from the event's instant, then as its later task events say", async () => {
    const authority = new MemoryAuthority();
    const store = new ProductStore(authority, 5);
    const created = { type: "created", productId: PRODUCT, projectId: PROJECT, name: "History", goal: "g", cwd: "/w" };
    const model = await store.create(PROJECT, PRODUCT, [stamped(0, created)]);
    await store.append(model, [stamped(1, { type: "confirmed", plan: PLAN })]);
    await store.append(model, [
      stamped(2, {
        type: "started",
        tasks: [
          { taskId: "t1", attempt: 1, workspace: WORKSPACE },
          { taskId: "t2", attempt: 1 },
        ],
      }),
    ]);
    const t1 = model.state.tasks.find((t) => t.taskId === "t1");
    await store.append(model, [
      stamped(5, { type: "task", task: { ...t1, status: "completed", endedAt: at(4), output: "written" } }),
    ]);
    const reader = new RunStateReader({ authority });

    expect(await attemptHistory(reader, PRODUCT, "t1")).toEqual([
      {
        attempt: 1,
        agent: "coder",
        instanceId: "i1",
        status: "completed",
        startedAt: at(2),
        endedAt: at(4),
        outputTail: "written",
        outputLength: 7,
      },
    ]);
    // t2 is still running: only the started event says so.
    expect(await attemptHistory(reader, PRODUCT, "t2")).toEqual([
      {
        attempt: 1,
        agent: "reviewer",
        instanceId: "i2",
        status: "running",
        startedAt: at(2),
        outputTail: "",
        outputLength: 0,
      },
    ]);
    const view = await timeline(reader, PRODUCT, Date.UTC(2030, 0, 1, 0, 1));
    expect(view.seats).toEqual([
      {
        instanceId: "i1",
        agent: "coder",
        bars: [{ taskId: "t1", attempt: 1, kind: "run", from: at(2), to: at(4), status: "completed" }],
      },
      {
        instanceId: "i2",
        agent: "reviewer",
        bars: [{ taskId: "t2", attempt: 1, kind: "run", from: at(2), status: "running" }],
      },
    ]);
  });
});
