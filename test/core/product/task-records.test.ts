/**
 * The per-task records of a product's state (`inputHashes`, `interruptedAttempts`) and the task input hash, as issue
 * 34 made them cheaper: the records are objects without prototype (evolve.ts `taskRecord`), so a task id such as
 * `__proto__` or `constructor` is an ordinary key live, after a snapshot is read back (JSON.parse gives plain objects)
 * and after events applied on top of it; the task input hash is written out without the generic canonical encoding
 * (fingerprint.ts `taskInputJson`) and must give the same text, hence the same hash, as that encoding.
 */
import { describe, expect, it } from "vitest";
import type { Plan, TaskState } from "../../../protocol/common.js";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { evolve } from "../../../src/core/product/evolve.js";
import { canonicalJson, sha256Hex, taskInputHash, type TaskInput } from "../../../src/core/product/fingerprint.js";
import { ProductEvent } from "../../../src/core/product/records.js";
import { attemptsUsed, emptyState, inputHashOf, modelOf, type ProductModel } from "../../../src/core/product/state.js";
import { ProductStore } from "../../../src/core/product/store.js";

const PRODUCT = "prd_records";
const PROJECT = "proj";
function planOf(ids: readonly string[]): Plan {
  return {
    productId: PRODUCT,
    version: 1,
    name: "Records",
    summary: "Task ids that may be names of Object.prototype.",
    instances: [{ instanceId: "i1", agentId: "coder", role: "coder" }],
    tasks: ids.map((taskId) => ({
      taskId,
      title: taskId,
      description: `Do ${taskId}.`,
      instanceId: "i1",
      dependsOn: [],
    })),
  };
}

let second = 0;
function event(raw: Record<string, unknown>): ProductEvent {
  second += 1;
  return ProductEvent.parse({ v: 1, at: new Date(Date.UTC(2030, 0, 1, 0, 0, second)).toISOString(), ...raw });
}

function task(
  ids: readonly string[],
  taskId: string,
  status: TaskState["status"],
  attempts: number,
  extra = {},
): TaskState {
  const def = planOf(ids).tasks.find((t) => t.taskId === taskId) as Plan["tasks"][number];
  return { ...def, dependsOn: [], status, attempts, ...extra };
}

const interrupted = (ids: readonly string[], taskId: string, attempts: number) =>
  event({ type: "task", task: task(ids, taskId, "pending", attempts, { interruption: "The server shut down." }) });
const completed = (ids: readonly string[], taskId: string, attempts: number) =>
  event({
    type: "task",
    task: task(ids, taskId, "completed", attempts, { output: "done" }),
    inputHash: `ti1:${taskId}`,
  });
const running = (ids: readonly string[], taskId: string, attempts: number) =>
  event({ type: "task", task: task(ids, taskId, "running", attempts) });

function plain(model: ProductModel): unknown {
  return JSON.parse(JSON.stringify(model.state));
}

/** The journal of a run over `ids` (three tasks), and a tail written after a reader loaded it. */
function journalOf(ids: readonly [string, string, string]): { journal: ProductEvent[]; tail: ProductEvent[] } {
  const [x, y, z] = ids;
  return {
    journal: [
      event({ type: "created", productId: PRODUCT, projectId: PROJECT, name: "Records", goal: "g", cwd: "/w" }),
      event({ type: "confirmed", plan: planOf(ids) }),
      ...ids.map((id) => running(ids, id, 1)),
      interrupted(ids, x, 1),
      interrupted(ids, y, 1),
      running(ids, x, 2),
      completed(ids, x, 2),
      completed(ids, y, 2),
      completed(ids, z, 1),
    ],
    tail: [running(ids, z, 2), interrupted(ids, z, 2), running(ids, y, 3), interrupted(ids, y, 3)],
  };
}

/** Checks what the journal of `ids` leaves in every model, and that they are one state. */
function expectRecords(ids: readonly [string, string, string], models: ProductModel[]): void {
  const [x, y, z] = ids;
  for (const model of models) {
    const s = model.state;
    // x completed and kept its hash; y and z completed, then ran again (their hashes are forgotten).
    expect(Object.keys(s.inputHashes ?? {})).toEqual([x]);
    expect(inputHashOf(s, x)).toBe(`ti1:${x}`);
    expect(inputHashOf(s, y)).toBeUndefined();
    expect(inputHashOf(s, z)).toBeUndefined();
    const counts: Record<string, number> = Object.create(null) as Record<string, number>;
    [counts[x], counts[y], counts[z]] = [1, 2, 1];
    expect(JSON.parse(JSON.stringify(s.interruptedAttempts))).toEqual(JSON.parse(JSON.stringify(counts)));
    expect(Object.keys(s.interruptedAttempts ?? {}).sort()).toEqual([x, y, z].sort());
    expect(attemptsUsed(s, { taskId: x, attempts: 2 })).toBe(1);
    expect(attemptsUsed(s, { taskId: y, attempts: 3 })).toBe(1);
    expect(attemptsUsed(s, { taskId: z, attempts: 2 })).toBe(1);
    expect(plain(model)).toEqual(plain(models[0] as ProductModel));
  }
  // Nothing reached Object.prototype.
  expect(Object.getPrototypeOf({})).toBe(Object.prototype);
  expect(({} as Record<string, unknown>).constructor).toBe(Object);
}

function fold(events: ProductEvent[]): ProductModel {
  const model = modelOf(emptyState(), 5);
  events.forEach((e, i) => evolve(model, structuredClone(e), i + 1));
  return model;
}

describe("per-task records of the state", () => {
  it("keep __proto__ and constructor as ordinary task ids, live, replayed and caught up", async () => {
    const ids = ["__proto__", "constructor", "a"] as const;
    const { journal, tail } = journalOf(ids);
    const authority = new MemoryAuthority();
    const store = new ProductStore(authority, 5);
    const live = await store.create(PROJECT, PRODUCT, [journal[0] as ProductEvent]);
    await store.append(live, journal.slice(1));
    const reader = (await new ProductStore(authority, 5).load(PRODUCT)).model;
    await store.append(live, tail);
    await new ProductStore(authority, 5).catchUp(reader);
    expectRecords(ids, [fold([...journal, ...tail]), live, reader]);
  });

  it("change a record read back from a snapshot (a plain object) as they change a live one", async () => {
    const ids = ["x", "y", "z"] as const;
    const { journal, tail } = journalOf(ids);
    const authority = new MemoryAuthority();
    const store = new ProductStore(authority, 5);
    const live = await store.create(PROJECT, PRODUCT, [journal[0] as ProductEvent]);
    await store.append(live, journal.slice(1));
    await store.writeSnapshot(live);
    const loaded = await new ProductStore(authority, 5).load(PRODUCT);
    expect(loaded.lost).toBe(0);
    const reader = loaded.model;
    // The snapshot's maps read back without a prototype (records.ts `taskKeyed`); one that is a plain object (as
    // JSON.parse gives it) must be changed the same way, so the reader's is made plain here.
    expect(Object.getPrototypeOf(reader.state.inputHashes)).toBe(null);
    reader.state.inputHashes = { ...reader.state.inputHashes };
    expect(Object.getPrototypeOf(reader.state.inputHashes)).toBe(Object.prototype);
    await store.append(live, tail);
    await new ProductStore(authority, 5).catchUp(reader);
    expectRecords(ids, [fold([...journal, ...tail]), live, reader]);
    // The snapshot after the tail reads back as the state it was written from.
    await store.writeSnapshot(live);
    expectRecords(ids, [live, (await new ProductStore(authority, 5).load(PRODUCT)).model]);
  });
});

describe("taskInputHash", () => {
  /** The hash as written before issue 34: the generic canonical encoding of the same fields. */
  const generic = (input: TaskInput): string =>
    `ti1:${sha256Hex(
      canonicalJson({
        title: input.title,
        description: input.description,
        acceptance: input.acceptance ?? null,
        instanceId: input.instanceId,
        agentId: input.agentId,
        deps: input.dependencyOutputs.map((d) => [d.taskId, d.output]),
      }),
    )}`;

  it("is the generic canonical encoding's hash, whatever the text holds", () => {
    const texts = [
      "",
      "plain",
      'quote " and \\ backslash',
      "line\nbreak\ttab",
      "é ✓ 𝄞",
      "lone \ud800 surrogate",
      "\u0000",
    ];
    const inputs: TaskInput[] = [];
    for (const [i, text] of texts.entries()) {
      inputs.push({
        title: text,
        description: `Do ${text}.`,
        ...(i % 2 === 0 ? { acceptance: text } : {}),
        instanceId: `i${i}`,
        agentId: text === "" ? "coder" : text,
        dependencyOutputs: texts.slice(0, i).map((o, k) => ({ taskId: k === 0 ? "__proto__" : `t${k}`, output: o })),
      });
    }
    inputs.push({
      title: "t",
      description: "d",
      acceptance: undefined,
      instanceId: "i",
      agentId: "a",
      dependencyOutputs: [],
    });
    // A value of another kind than the schema's takes the generic encoding (an object's keys are sorted there).
    inputs.push({
      title: "t",
      description: "d",
      instanceId: "i",
      agentId: "a",
      dependencyOutputs: [{ taskId: "x", output: { z: 1, a: 2 } as unknown as string }],
    });
    for (const input of inputs) expect(taskInputHash(input)).toBe(generic(input));
  });
});

describe("canonicalJson", () => {
  /** The encoding before issue 34: a replacer that copies every object with its keys sorted. */
  const replacer = (value: unknown): string =>
    JSON.stringify(value, (_key, v: unknown) => {
      if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
      const sorted: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
      return sorted;
    });

  it("gives the replacer's text for every kind of value", () => {
    const deep: unknown[] = [];
    let at = deep;
    for (let i = 0; i < 100; i++) at.push((at = [i]));
    const values: unknown[] = [
      null,
      'text with "quotes" and \u2028',
      0,
      -1.5e300,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      true,
      [],
      {},
      [1, undefined, () => 1, Symbol("s"), null, "x"],
      { b: 1, a: { d: [3, { z: 1, y: undefined }], c: null }, f: () => 1, s: Symbol("s") },
      { 10: "ten", 9: "nine", a: "a", "01": "zero-one", "-1": "minus" },
      JSON.parse('{"__proto__": {"x": 1}, "a": 2}'),
      { when: new Date(Date.UTC(2030, 0, 1)), inner: { toJSON: () => ({ b: 2, a: 1 }) } },
      Object.assign(Object.create(null) as object, { b: 2, a: 1 }),
      { plan: { tasks: [{ taskId: "t1", dependsOn: ["t0"], title: "é ✓ 𝄞" }], version: 3 }, promptVersion: "p" },
      deep,
    ];
    for (const value of values) expect(canonicalJson(value)).toBe(replacer(value));
  });
});
