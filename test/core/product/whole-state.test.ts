/**
 * Guarantee 15 (stored data is re-validated as a whole) and the rollback half of guarantee 4, as regressions of issue
 * 10 findings 1 and 2, over the in-process harness (test/support/fakes.ts):
 * - a stored plan that parses but breaks the DAG rules (a dependency on an unknown task, two tasks with one id, a
 *   cycle) or a task event for a task the plan does not have is refused fail-closed on resume, with a recovery cause,
 *   and nothing runs (before: resume threw inside the scheduler's start, outside any handler, and the process
 *   exited; a cycle stayed `executing` forever; the stray task was executed);
 * - an event before the latest snapshot that a checkpoint needs and that does not parse makes rollback refuse
 *   (counted in `dropped`) instead of running a completed task again.
 * The store is damaged through a wrapper of the harness's MemoryAuthority that rewrites events as they are read.
 */
import { describe, expect, it } from "vitest";
import type { TaskState } from "../../../protocol/common.js";
import type { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { productStream } from "../../../src/core/product/records.js";
import { FakeClock, createHarness, draftPlan, rejectionOf, type Harness, type TaskSpec } from "../../support/fakes.js";

type Rewrite = (event: Record<string, unknown>, seq: number) => unknown;

/** The harness's authority as a damaged store presents it: every event read goes through `rewrite` first. */
function damaged(inner: MemoryAuthority, rewrite: Rewrite): MemoryAuthority {
  const view = Object.create(inner) as MemoryAuthority;
  for (const name of [
    "get",
    "put",
    "delete",
    "list",
    "appendEvents",
    "deleteStream",
    "pruneEvents",
    "listProjects",
    "close",
  ] as const) {
    Object.defineProperty(view, name, { value: (inner[name] as (...a: unknown[]) => unknown).bind(inner) });
  }
  Object.defineProperty(view, "readEvents", {
    value: async (p: string, s: string, after: number, limit?: number) =>
      (await (limit === undefined ? inner.readEvents(p, s, after) : inner.readEvents(p, s, after, limit))).map((e) => ({
        seq: e.seq,
        event: rewrite(structuredClone(e.event) as Record<string, unknown>, e.seq),
      })),
  });
  return view;
}

/** A "server process" started an hour after `first`, on the same (possibly damaged) store. */
function restarted(first: Harness, authority: MemoryAuthority, plan: TaskSpec[]): Harness {
  return createHarness({
    plan: draftPlan(plan),
    authority,
    ids: first.ids,
    clock: new FakeClock(first.clock.now() + 3_600_000),
  });
}

const CHAIN: TaskSpec[] = [{ id: "a" }, { id: "b", deps: ["a"] }, { id: "c", deps: ["b"] }];

/** Runs CHAIN until `a` completed and `b` hangs, then abandons the process (a crash); returns the product id. */
async function crashedWhileRunning(): Promise<{ first: Harness; productId: string }> {
  const first = createHarness({ plan: draftPlan(CHAIN) });
  first.worker.script("b", { kind: "hang" });
  const productId = await first.started();
  const deadline = Date.now() + 20_000;
  while (!first.worker.hasStarted("b")) {
    if (Date.now() > deadline) throw new Error("task b never started");
    await new Promise((resolve) => setImmediate(resolve));
  }
  return { first, productId };
}

/** Rewrites the plan of the `confirmed` event. */
const planOf =
  (edit: (tasks: { taskId: string; dependsOn: string[] }[]) => void): Rewrite =>
  (event) => {
    if (event.type === "confirmed") edit((event.plan as { tasks: { taskId: string; dependsOn: string[] }[] }).tasks);
    return event;
  };

describe("guarantee 15: a stored state that breaks the DAG rules is refused fail-closed on resume", () => {
  const cases: [string, Rewrite, RegExp][] = [
    [
      "a dependency on an unknown task",
      planOf((tasks) => {
        tasks[1]!.dependsOn = ["ghost"];
      }),
      /depends on unknown task ghost/,
    ],
    [
      "two tasks with one id",
      planOf((tasks) => {
        tasks[2]!.taskId = "b";
        tasks[2]!.dependsOn = ["a"];
      }),
      /Task id b is used twice/,
    ],
    [
      "a cycle",
      planOf((tasks) => {
        tasks[0]!.dependsOn = ["c"];
      }),
      /dependency cycle/,
    ],
    [
      "a task event for a task the plan does not have",
      (event) => {
        const task = event.task as TaskState | undefined;
        if (event.type === "task" && task?.taskId === "a" && task.status === "completed") task.taskId = "intruder";
        return event;
      },
      /task intruder, which the plan does not have/,
    ],
    [
      // Issue 34: a wave's starts are one `started` event; one naming a task the plan does not have is refused too.
      "a started event for a task the plan does not have",
      (event) => {
        const tasks = event.tasks as { taskId: string }[] | undefined;
        if (event.type === "started") for (const t of tasks ?? []) if (t.taskId === "b") t.taskId = "intruder";
        return event;
      },
      /task intruder, which the plan does not have/,
    ],
    [
      // The plan is sound; only a stored task state changes the graph (the check of the task states is skipped only
      // when they carry the plan's graph unchanged, integrity.ts).
      "a task event whose dependencies make a cycle with the plan's",
      (event) => {
        const task = event.task as TaskState | undefined;
        if (event.type === "task" && task?.taskId === "a") task.dependsOn = ["c"];
        return event;
      },
      /task states do not form a valid DAG: Tasks form a dependency cycle/,
    ],
  ];
  for (const [title, rewrite, cause] of cases) {
    it(`refuses ${title}: resume answers invalid_phase with the cause and no worker runs`, async () => {
      const { first, productId } = await crashedWhileRunning();
      const second = restarted(first, damaged(first.authority, rewrite), CHAIN);
      const error = await rejectionOf(second.service.resume(productId));
      // Let anything the resume deferred run: before the fix the scheduler threw here, outside any handler.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const status = await second.service.status(productId);
      expect({
        code: (error as { code?: string }).code,
        message: (error as Error).message,
        recovery: status.recovery,
        runs: second.worker.executions.length,
      }).toEqual({
        code: "invalid_phase",
        message: expect.stringMatching(cause),
        recovery: { cause: expect.stringMatching(cause), resumable: false, remediation: expect.any(String) },
        runs: 0,
      });
    });
  }
});

describe("rollback fails closed when an event its checkpoint needs did not parse (issue 10, finding 2)", () => {
  it("refuses, counts the event in dropped, and never runs a completed task again", async () => {
    const first = createHarness({ plan: draftPlan(CHAIN) });
    const productId = await first.started();
    await first.finished(productId);
    // A snapshot after everything: a load reads only the tail, so only the rollback reads the damaged event.
    const { model } = await first.store.load(productId);
    await first.store.writeSnapshot(model);
    const events = await first.authority.readEvents("proj", productStream(productId), 0);
    const completionOfA = events.find((e) => {
      const event = e.event as { type?: string; task?: TaskState };
      return event.type === "task" && event.task?.taskId === "a" && event.task.status === "completed";
    })?.seq;
    expect(completionOfA).toBeDefined();
    const second = restarted(
      first,
      damaged(first.authority, (event, seq) => (seq === completionOfA ? { v: 99, garbage: true } : event)),
      CHAIN,
    );
    const { checkpoints } = await second.service.checkpoints(productId);
    const afterB = checkpoints[1]!.checkpointId;

    const error = await rejectionOf(second.service.rollback(productId, afterB));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const status = await second.service.status(productId);
    expect({
      code: (error as { code?: string }).code,
      message: (error as Error).message,
      dropped: status.dropped,
      phase: status.phase,
      runsOfA: second.worker.runsOf("a").length,
    }).toEqual({
      code: "invalid_phase",
      message: expect.stringMatching(/1 stored event that checkpoint .* needs failed validation/),
      dropped: 1,
      phase: "completed",
      runsOfA: 0,
    });
  });
});

describe("index and header records that do not parse (issue 10, finding 7)", () => {
  it("a corrupt index record is counted in product.list dropped and no longer makes an intact product not found", async () => {
    const first = createHarness({ plan: draftPlan([{ id: "a" }]) });
    const productId = await first.started();
    await first.finished(productId);
    const index = await first.authority.get("_", "product-index", productId);
    await first.authority.put("_", "product-index", productId, { v: 99 }, index!.revision);
    const second = restarted(first, first.authority, [{ id: "a" }]);
    const status = await second.service.status(productId);
    const list = await second.service.list();
    expect({ phase: status.phase, listed: list.products.map((p) => p.productId), dropped: list.dropped }).toEqual({
      phase: "completed",
      listed: [productId],
      dropped: 1,
    });
  });

  it("a corrupt header is counted in product.list dropped and the product stays reachable through its events", async () => {
    const first = createHarness({ plan: draftPlan([{ id: "a" }]) });
    const productId = await first.started();
    await first.finished(productId);
    const header = await first.authority.get("proj", "product", productId);
    await first.authority.put("proj", "product", productId, { v: 1, broken: true }, header!.revision);
    const second = restarted(first, first.authority, [{ id: "a" }]);
    const list = await second.service.list("proj");
    const status = await second.service.status(productId);
    expect({ listed: list.products.length, dropped: list.dropped, phase: status.phase }).toEqual({
      listed: 0,
      dropped: 1,
      phase: "completed",
    });
  });
});
