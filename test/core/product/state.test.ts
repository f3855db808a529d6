/** The product reducer's helpers (issue 16, memory: no second copy of each task's dependency list at confirm). */
import { describe, expect, it } from "vitest";
import type { Plan } from "../../../protocol/common.js";
import { initialTaskStates } from "../../../src/core/product/state.js";

describe("initialTaskStates", () => {
  it("makes every task pending with no attempts, sharing the plan's dependency lists", () => {
    const plan = {
      version: 1,
      instances: [{ instanceId: "i1", agentId: "builtin", role: "worker" }],
      tasks: [
        { taskId: "a", title: "A", description: "first", instanceId: "i1", dependsOn: [] },
        { taskId: "b", title: "B", description: "second", instanceId: "i1", dependsOn: ["a"], maxAttempts: 3 },
      ],
    } as unknown as Plan;
    const states = initialTaskStates(plan);
    expect(states).toEqual([
      { ...plan.tasks[0], status: "pending", attempts: 0 },
      { ...plan.tasks[1], status: "pending", attempts: 0 },
    ]);
    expect(states[1]?.dependsOn).toBe(plan.tasks[1]?.dependsOn);
    expect(states[1]).not.toBe(plan.tasks[1]);
  });
});
