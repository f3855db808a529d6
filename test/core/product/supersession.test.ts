import { describe, expect, it } from "vitest";
import type { TaskState } from "../../../protocol/common.js";
import { outcomeTasks, supersessions, withSupersededBy } from "../../../src/core/product/supersession.js";

const task = (taskId: string, status: TaskState["status"], supersedes?: string): TaskState => ({
  taskId,
  title: taskId,
  description: "",
  instanceId: "i1",
  dependsOn: [],
  status,
  attempts: 1,
  ...(supersedes !== undefined ? { supersedes } : {}),
});

describe("supersession (issue 28, fix-ups)", () => {
  it("links a failed task to the fix-up that supersedes it and leaves it out of the outcome", () => {
    const tasks = [task("t1", "failed"), task("t2", "completed"), task("t1-fix", "completed", "t1")];
    expect([...supersessions(tasks)]).toEqual([["t1", "t1-fix"]]);
    expect(withSupersededBy(tasks)[0]).toMatchObject({ taskId: "t1", status: "failed", supersededBy: "t1-fix" });
    expect(outcomeTasks(tasks).map((t) => t.taskId)).toEqual(["t2", "t1-fix"]);
  });

  it("links nothing for a task that is not failed, an unknown task or itself", () => {
    const tasks = [
      task("t1", "completed"),
      task("a", "pending", "t1"),
      task("b", "pending", "zz"),
      task("c", "failed", "c"),
    ];
    expect(supersessions(tasks).size).toBe(0);
    expect(withSupersededBy(tasks)).toBe(tasks);
  });
});
