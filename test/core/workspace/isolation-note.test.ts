// The shared-folder warning of product.status (integration.ts `isolationNote`): only when two tasks may really run at
// once (a new user saw it on a strict chain and on a demo whose tasks ran one after another).
import { describe, expect, it } from "vitest";
import type { ProductState } from "../../../src/core/product/records.js";
import { isolationNote } from "../../../src/core/workspace/integration.js";

const task = (taskId: string, dependsOn: string[]) => ({ taskId, dependsOn, status: "pending", attempts: 0 });
const shared = (tasks: ReturnType<typeof task>[]) =>
  ({
    isolation: "shared",
    isolationReason: "The folder is not inside a git working tree.",
    tasks,
  }) as unknown as ProductState;

describe("isolationNote", () => {
  it("warns about parallel edits only when two tasks depend on neither of each other and more than one may run", () => {
    const chain = shared([task("t3", ["t2"]), task("t1", []), task("t2", ["t1"])]);
    expect(isolationNote(chain, 4)).toBe("The folder is not inside a git working tree.");
    const fan = shared([task("t1", []), task("t2", []), task("t3", ["t1", "t2"])]);
    expect(isolationNote(fan, 4)).toMatch(/Up to 4 tasks run at once in the same folder/);
    expect(isolationNote(fan, 1)).toBe("The folder is not inside a git working tree.");
    // t1 → t2 → t3 plus a shortcut t1 → t3 is still a chain; t1 → t3 alone beside t2 is not.
    expect(isolationNote(shared([task("t1", []), task("t2", ["t1"]), task("t3", ["t1", "t2"])]), 4)).not.toMatch(
      /once/,
    );
    expect(isolationNote(shared([task("t1", []), task("t2", ["t1"]), task("t3", ["t1"])]), 4)).toMatch(/once/);
  });

  it("counts the plan's instances: two seats run at most two tasks at once, whatever maxParallelTasks says", () => {
    // A new user's demo said "Up to 4 tasks run at once" for a plan of 2 instances that ran 2 at a time.
    const fan = shared([task("t1", []), task("t2", []), task("t3", [])]);
    const withSeats = (n: number) =>
      ({
        ...fan,
        plan: { instances: Array.from({ length: n }, (_, i) => ({ instanceId: `i${i + 1}` })) },
      }) as unknown as ProductState;
    expect(isolationNote(withSeats(2), 4)).toMatch(/Up to 2 tasks run at once in the same folder/);
    expect(isolationNote(withSeats(6), 4)).toMatch(/Up to 4 tasks run at once in the same folder/);
    expect(isolationNote(withSeats(1), 4)).toBe("The folder is not inside a git working tree.");
  });
});
