/**
 * Replaying a journal always equals the live state (issue 27, "Must show": the replay-equals-live property test,
 * at least 1,000 random sequences per run). `evolve` (src/core/product/evolve.ts) is the one meaning of a product's
 * events: the live model (what `ProductStore.append` leaves after each write, compacted at random moments), a pure
 * fold of `evolve` over the journal, a fresh `load` from the authority (snapshot + tail: resume after a restart), a
 * `catchUp` of a second reader that loaded half-way, and `stateAtCheckpoint` of every kept checkpoint (rollback) must
 * all give the same state.
 *
 * The sequences come from a small seeded generator (mulberry32; `EVOLVE_SEED` and `EVOLVE_RUNS` override) that draws
 * every kind of product event with schema-valid fields, mostly about the plan's own tasks; every drawn event is parsed
 * with `ProductEvent` first, so an invalid draw fails the test instead of being silently skipped by a load.
 */
import { describe, expect, it } from "vitest";
import type { Plan, TaskState, TaskStatus } from "../../../protocol/common.js";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { evolve } from "../../../src/core/product/evolve.js";
import { ProductEvent } from "../../../src/core/product/records.js";
import { emptyState, modelOf, type ProductModel } from "../../../src/core/product/state.js";
import { ProductStore } from "../../../src/core/product/store.js";
import { seededRandom as rng } from "../../support/seeded-random.js";

const RUNS = Number(process.env.EVOLVE_RUNS ?? 1_000);
const SEED = Number(process.env.EVOLVE_SEED ?? 27_2026);
const PRODUCT = "prd_prop";
const PROJECT = "proj";
const STATUSES: TaskStatus[] = ["pending", "running", "waiting", "completed", "failed", "skipped", "cancelled"];

class Draw {
  constructor(readonly next: () => number) {}
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  hex(): string {
    let out = "";
    for (let i = 0; i < 40; i++) out += "0123456789abcdef"[this.int(16)];
    return out;
  }
}

type Raw = Record<string, unknown> & { type: string };

/** Draws a plan of 1-6 tasks (a DAG: a task depends only on earlier ones) on 1-2 instances. */
function drawPlan(d: Draw, version: number, extra = 0): Plan {
  const n = 1 + d.int(6) + extra;
  const tasks = Array.from({ length: n }, (_, i) => ({
    taskId: `t${i}`,
    title: `Task ${i}`,
    description: `Do ${i}.`,
    instanceId: d.pick(["i1", "i2"]),
    dependsOn: i === 0 ? [] : [`t${d.int(i)}`].filter(() => d.chance(0.6)),
    ...(d.chance(0.2) ? { maxAttempts: 1 + d.int(3) } : {}),
  }));
  return {
    productId: PRODUCT,
    version,
    name: "Prop plan",
    summary: "Drawn.",
    instances: [
      { instanceId: "i1", agentId: "coder", role: "coder" },
      { instanceId: "i2", agentId: "coder", role: "coder" },
    ],
    tasks,
    ...(d.chance(0.3) ? { budget: { maxTotalTokens: 1 + d.int(10_000) } } : {}),
  };
}

function drawTask(d: Draw, plan: Plan): TaskState {
  const def = d.pick(plan.tasks);
  const status = d.pick(STATUSES);
  return {
    ...def,
    dependsOn: [...def.dependsOn],
    status,
    attempts: d.int(4),
    ...(status === "completed" ? { output: `out ${d.int(100)}` } : {}),
    ...(status === "failed" ? { error: "broke" } : {}),
    ...(status === "waiting" ? { question: "which?" } : {}),
    ...(status === "pending" && d.chance(0.5) ? { interruption: "interrupted" } : {}),
  };
}

/**
 * A wave's starts (issue 34): 1-3 entries, mostly tasks of the plan (sometimes one it does not have, which evolve
 * adds as a task the plan does not have, for the whole-state check to refuse), some with a worktree.
 */
function drawStarted(d: Draw, plan: Plan): Raw {
  const tasks = Array.from({ length: 1 + d.int(3) }, () => ({
    taskId: d.chance(0.9) ? d.pick(plan.tasks).taskId : "t_unknown",
    attempt: 1 + d.int(4),
    ...(d.chance(0.4)
      ? { workspace: { path: `/w/.wt/${d.int(9)}`, branch: `refs/acp/a/${d.int(9)}`, baseCommit: d.hex() } }
      : {}),
  }));
  return { type: "started", tasks };
}

/** One event of a drawn kind, given the plan drawn so far (or none). */
function drawEvent(d: Draw, plan: Plan | undefined, version: number): Raw {
  const kinds = plan
    ? [
        "task",
        "task",
        "task",
        "task",
        "started",
        "started",
        "usage",
        "elapsed",
        "checkpoint",
        "phase",
        "mutated",
        "restored",
        "budgetAdded",
        "budgetWarned",
        "dialogue",
        "fingerprint",
        "workspace",
        "confirmed",
      ]
    : ["dialogue", "planProposed", "planFailed", "asked", "confirmed", "phase"];
  const kind = d.pick(kinds);
  switch (kind) {
    case "task": {
      const task = drawTask(d, plan as Plan);
      return {
        type: "task",
        task,
        ...(task.status === "completed" && d.chance(0.7) ? { inputHash: `ti1:${d.int(9)}` } : {}),
        // A settled attempt's usage and automatic checkpoint on its task event (issue 34).
        ...(d.chance(0.3)
          ? { usage: { inputTokens: d.int(500), outputTokens: d.int(500), estimated: d.chance(0.5) } }
          : {}),
        ...(d.chance(0.3)
          ? { checkpoint: { checkpointId: `ckp_${d.int(1_000_000)}`, completed: d.int(5), total: 5 } }
          : {}),
      };
    }
    case "started":
      return drawStarted(d, plan as Plan);
    case "usage":
      return {
        type: "usage",
        taskId: "t0",
        inputTokens: d.int(500),
        outputTokens: d.int(500),
        estimated: d.chance(0.5),
      };
    case "elapsed":
      return { type: "elapsed", elapsedMs: d.int(100_000) };
    case "checkpoint":
      return { type: "checkpoint", checkpointId: `ckp_${d.int(1_000_000)}`, completed: d.int(5), total: 5 };
    case "phase": {
      const phase = d.pick(["executing", "paused", "completed", "failed", "planning"]);
      return {
        type: "phase",
        phase,
        recovery: phase === "paused" ? { cause: "c", resumable: true, remediation: "r" } : null,
      };
    }
    case "mutated":
      return { type: "mutated", mutations: [], by: d.pick(["leader", "user"]), plan: drawPlan(d, version + 1) };
    case "restored": {
      const p = plan as Plan;
      const tasks = p.tasks.map(() => drawTask(d, p));
      const unique = [...new Map(tasks.map((t) => [t.taskId, t])).values()];
      const done = unique.filter((t) => t.status === "completed");
      return {
        type: "restored",
        checkpointId: `ckp_${d.int(100)}`,
        ...(d.chance(0.8) ? { plan: p } : {}),
        tasks: unique,
        ...(done.length > 0 ? { inputHashes: Object.fromEntries(done.map((t) => [t.taskId, `ti1:${d.int(9)}`])) } : {}),
      };
    }
    case "budgetAdded":
      return {
        type: "budgetAdded",
        budget: d.chance(0.5) ? { maxTotalTokens: 1 + d.int(1_000) } : { maxDurationMs: 1 + d.int(1_000) },
      };
    case "budgetWarned":
      return { type: "budgetWarned", reason: "80 %" };
    case "dialogue":
      return {
        type: "dialogue",
        role: d.pick(["user", "leader"]),
        text: `said ${d.int(100)}`,
        ...(d.chance(0.3) ? { outcome: true } : {}),
      };
    case "fingerprint":
      return {
        type: "fingerprint",
        fingerprint: {
          promptVersion: "p1",
          planHash: `pl1:${d.int(9)}`,
          gitHead: d.chance(0.5) ? null : d.hex(),
          agentsHash: "ag1:x",
        },
      };
    case "workspace":
      return drawWorkspaceEvent(d, plan as Plan);
    case "planProposed":
      return { type: "planProposed", plan: drawPlan(d, version + 1) };
    case "planFailed":
      return { type: "planFailed", error: "no plan" };
    case "asked":
      return { type: "asked", askId: `ask_${d.int(100)}`, questions: [{ question: "Which?", options: ["a", "b"] }] };
    default:
      return {
        type: "confirmed",
        plan: drawPlan(d, version + 1),
        ...(d.chance(0.5)
          ? { fingerprint: { promptVersion: "p1", planHash: "pl1:a", gitHead: null, agentsHash: "ag1:x" } }
          : {}),
      };
  }
}

function drawWorkspaceEvent(d: Draw, plan: Plan): Raw {
  const taskId = d.pick(plan.tasks).taskId;
  const kind = d.pick([
    "workspaceChosen",
    "workspaceChosen",
    "integrating",
    "taskIntegrated",
    "attemptKept",
    "branchMoved",
    "integrationEnded",
  ]);
  if (kind === "workspaceChosen") {
    return d.chance(0.7)
      ? {
          type: "workspaceChosen",
          isolation: "worktree",
          integration: { mode: d.pick(["branch", "merge"]), branch: `acp/${PRODUCT}`, base: d.hex() },
        }
      : { type: "workspaceChosen", isolation: "shared", reason: "not git" };
  }
  if (kind === "integrating") {
    const pending = {
      taskId,
      attempt: 1,
      commit: d.hex(),
      changedFiles: ["a.txt"],
      ref: "refs/x",
      from: d.hex(),
      to: d.hex(),
      output: "o",
      inputHash: "ti1:1",
    };
    return { type: "integrating", pending };
  }
  if (kind === "taskIntegrated")
    return { type: "taskIntegrated", taskId, attempt: 1, commit: d.hex(), head: d.hex(), changedFiles: [] };
  if (kind === "attemptKept")
    return {
      type: "attemptKept",
      taskId,
      attempt: 1,
      commit: d.hex(),
      ref: "refs/k",
      files: d.chance(0.5) ? ["f"] : [],
    };
  if (kind === "branchMoved")
    return { type: "branchMoved", from: d.hex(), to: d.hex(), keptAs: "refs/kept/1", merged: [taskId] };
  const state = d.pick(["integrating", "integrated", "conflict", "pending"]);
  return { type: "integrationEnded", state, ...(state === "conflict" ? { files: ["c.txt"] } : {}) };
}

/** A drawn journal: the `created` event, then 4-28 events, as valid `ProductEvent`s stamped one second apart. */
function drawJournal(d: Draw): ProductEvent[] {
  const raws: Raw[] = [
    {
      type: "created",
      productId: PRODUCT,
      projectId: PROJECT,
      name: "Prop",
      goal: "g",
      cwd: "/w",
      ...(d.chance(0.3) ? { budget: { maxDurationMs: 60_000 } } : {}),
    },
  ];
  let plan: Plan | undefined;
  let version = 0;
  const n = 4 + d.int(25);
  for (let i = 0; i < n; i++) {
    const raw = drawEvent(d, plan, version);
    if (
      raw.type === "confirmed" ||
      raw.type === "planProposed" ||
      raw.type === "mutated" ||
      (raw.type === "restored" && raw.plan)
    ) {
      plan = raw.plan as Plan;
      version = plan.version;
    }
    raws.push(raw);
  }
  return raws.map((raw, i) =>
    ProductEvent.parse({ v: 1, at: new Date(Date.UTC(2030, 0, 1, 0, 0, i)).toISOString(), ...raw }),
  );
}

/** The state of a model as plain data (JSON), with its derived index and counts. */
function plain(model: ProductModel): unknown {
  return JSON.parse(JSON.stringify({ state: model.state, index: [...model.index], counts: model.counts }));
}

/** A pure fold of `evolve` over `events` (copied: the live model must not share objects with it). */
function fold(events: readonly ProductEvent[], history: number, upTo = events.length): ProductModel {
  const model = modelOf(emptyState(), history);
  structuredClone(events.slice(0, upTo)).forEach((e, i) => evolve(model, e, i + 1));
  return model;
}

async function checkOne(d: Draw): Promise<void> {
  const journal = drawJournal(d);
  const history = 1 + d.int(4);
  const authority = new MemoryAuthority();
  const store = new ProductStore(authority, history);
  const copy = structuredClone(journal);
  const live = await store.create(PROJECT, PRODUCT, [copy[0] as ProductEvent]);
  const half = 1 + d.int(journal.length - 1);
  let reader: ProductModel | undefined;
  let i = 1;
  while (i < copy.length) {
    const size = 1 + d.int(4);
    await store.append(live, copy.slice(i, i + size));
    i += size;
    if (d.chance(0.2)) await store.writeSnapshot(live);
    if (reader === undefined && i >= half) reader = (await new ProductStore(authority, history).load(PRODUCT)).model;
  }
  const expected = plain(live);
  expect(plain(fold(journal, history)), "a pure fold of evolve over the journal").toEqual(expected);
  const loaded = await new ProductStore(authority, history).load(PRODUCT);
  expect(loaded.lost, "events lost on load").toBe(0);
  expect(plain(loaded.model), "a fresh load (snapshot + tail)").toEqual(expected);
  if (reader) {
    const catchingUp = new ProductStore(authority, history);
    await catchingUp.catchUp(reader);
    expect(plain(reader), "a reader that loaded half-way and caught up").toEqual(expected);
  }
  // Rollback: the newest kept checkpoint and one other (each rebuild reads what its checkpoint needs).
  const refs = live.state.checkpoints;
  for (const ref of new Set([refs[refs.length - 1], refs[d.int(refs.length)]].filter((r) => r !== undefined))) {
    const past = await new ProductStore(authority, history).stateAtCheckpoint(PROJECT, PRODUCT, ref);
    expect(past.dropped, `events missing for checkpoint at seq ${ref.seq}`).toBe(0);
    expect(plain(past.model), `the state at the checkpoint at seq ${ref.seq}`).toEqual(
      plain(fold(journal, history, ref.seq)),
    );
  }
}

describe("evolve: replaying a journal equals the live state", () => {
  it(`holds for ${RUNS} random journals (seed ${SEED})`, async () => {
    const d = new Draw(rng(SEED));
    for (let run = 0; run < RUNS; run++) {
      try {
        await checkOne(d);
      } catch (err) {
        throw new Error(`journal ${run} of seed ${SEED}: ${err instanceof Error ? err.message : String(err)}`, {
          cause: err,
        });
      }
    }
  }, 120_000);

  it("counts tasks by status as the tasks say, after any journal", () => {
    const d = new Draw(rng(SEED + 1));
    for (let run = 0; run < 200; run++) {
      const model = fold(drawJournal(d), 20);
      const counts = Object.fromEntries(
        STATUSES.map((s) => [s, model.state.tasks.filter((t) => t.status === s).length]),
      );
      expect(model.counts).toEqual(counts);
      expect([...model.index.keys()]).toEqual(model.state.tasks.map((t) => t.taskId));
    }
  });
});

describe("evolve: a settled attempt in one event (issue 34)", () => {
  it("gives the state the older task, usage and checkpoint events gave, the checkpoint at its own event", () => {
    const d = new Draw(rng(SEED + 2));
    for (let run = 0; run < 200; run++) {
      const journal = drawJournal(d);
      const plan = [...journal].reverse().find((e) => "plan" in e && e.plan !== undefined) as
        | { plan?: Plan }
        | undefined;
      if (!plan?.plan || plan.plan.tasks.length === 0) continue;
      const task = { ...drawTask(d, plan.plan), status: "completed" as const, output: "done" };
      const usage = { inputTokens: d.int(500), outputTokens: d.int(500), estimated: d.chance(0.5) };
      const checkpoint = { checkpointId: `ckp_new_${run}`, completed: d.int(5), total: 5 };
      const at = "2031-01-01T00:00:00.000Z";
      const older = [
        ...journal,
        ...[
          { type: "task", task, inputHash: "ti1:1" },
          { type: "usage", taskId: task.taskId, ...usage },
          { type: "checkpoint", ...checkpoint },
        ].map((raw) => ProductEvent.parse({ v: 1, at, ...raw })),
      ];
      const fused = [
        ...journal,
        ProductEvent.parse({ v: 1, at, type: "task", task, inputHash: "ti1:1", usage, checkpoint }),
      ];
      const history = 1 + d.int(4);
      const before = plain(fold(older, history)) as { state: { seq: number; checkpoints: { seq: number }[] } };
      const after = plain(fold(fused, history)) as { state: { seq: number; checkpoints: { seq: number }[] } };
      // Only the sequence numbers differ: the state's own, and the new checkpoint's (the event that took it).
      expect(after.state.seq).toBe(fused.length);
      expect(after.state.checkpoints.at(-1)).toMatchObject({
        checkpointId: checkpoint.checkpointId,
        seq: fused.length,
      });
      before.state.seq = after.state.seq;
      const last = before.state.checkpoints.at(-1);
      if (last) last.seq = fused.length;
      expect(after).toEqual(before);
    }
  });
});

describe("evolve: a wave's starts in one event (issue 34)", () => {
  it("gives the state the older task events of the same started tasks gave", () => {
    const d = new Draw(rng(SEED + 3));
    let compared = 0;
    for (let run = 0; run < 200; run++) {
      const journal = drawJournal(d);
      const live = fold(journal, 3);
      const known = live.state.tasks;
      if (live.state.plan === undefined || known.length === 0) continue;
      const picked = [...new Set(Array.from({ length: 1 + d.int(3) }, () => d.pick(known).taskId))];
      const at = "2031-01-01T00:00:00.000Z";
      const entries = picked.map((taskId) => ({
        taskId,
        attempt: (known.find((t) => t.taskId === taskId)?.attempts ?? 0) + 1,
        ...(d.chance(0.5)
          ? { workspace: { path: `/w/.wt/${taskId}`, branch: `refs/acp/${taskId}/1`, baseCommit: d.hex() } }
          : {}),
      }));
      // What decide wrote before: one `task` event per task, its started state (the task as the journal left it).
      const older = [
        ...journal,
        ...entries.map((entry) => {
          const current = known.find((t) => t.taskId === entry.taskId) as TaskState;
          const task = { ...current, status: "running", attempts: entry.attempt, startedAt: at } as TaskState;
          delete task.endedAt;
          delete task.question;
          delete task.output;
          if (entry.workspace) task.workspace = entry.workspace;
          else delete task.workspace;
          return ProductEvent.parse({ v: 1, at, type: "task", task });
        }),
      ];
      const batched = [...journal, ProductEvent.parse({ v: 1, at, type: "started", tasks: entries })];
      const before = plain(fold(older, 3)) as { state: { seq: number } };
      const after = plain(fold(batched, 3)) as { state: { seq: number } };
      // Only the state's sequence number differs: one event instead of one per task.
      expect(after.state.seq).toBe(batched.length);
      before.state.seq = after.state.seq;
      expect(after).toEqual(before);
      compared += 1;
    }
    expect(compared).toBeGreaterThan(100);
  });
});
