/**
 * The plan fingerprint (fingerprint.ts `planHash`) without a zod parse of the plan (issue 34): unknown keys are left
 * out by walking the keys the schema declares (`PLAN_KEYS`, checked here against the schema itself), and the hash of every plan the schema accepts is the one recorded before (the
 * hash of the parsed plan), so runs recorded by earlier servers show no false plan drift.
 */
import { describe, expect, it } from "vitest";
import { Plan } from "../../../protocol/common.js";
import {
  hashOf,
  normalisedPlan,
  planHash,
  PLAN_KEYS,
  type DeclaredKeys,
} from "../../../src/core/product/fingerprint.js";
import { seededRandom as rng } from "../../support/seeded-random.js";

/** The hash as servers before issue 34 computed it: the plan parsed by its schema first. */
function parsedHash(plan: unknown, promptVersion: string): string {
  return `pl1:${hashOf({ plan: Plan.parse(plan), promptVersion })}`;
}

const PLAN: Plan = {
  productId: "prd_1",
  version: 2,
  name: "Plan",
  summary: "Two tasks.",
  instances: [
    { instanceId: "w0", agentId: "bench", role: "worker" },
    { instanceId: "w1", agentId: "bench", role: "worker", name: "Second" },
  ],
  tasks: [
    { taskId: "a", title: "A", description: "First.", instanceId: "w0", dependsOn: [] },
    {
      taskId: "b",
      title: "B",
      description: "Second.",
      instanceId: "w1",
      dependsOn: ["a"],
      acceptance: "B works.",
      maxAttempts: 3,
      supersedes: "a",
    },
  ],
  budget: { maxTotalTokens: 1000 },
};

/** The part of a zod 4 schema definition the derivation reads. */
interface Def {
  type: string;
  shape?: Record<string, { _zod: { def: Def } }>;
  catchall?: unknown;
  element?: { _zod: { def: Def } };
  innerType?: { _zod: { def: Def } };
}

/** The declared keys of a schema, read from its definition (throws on a kind `PLAN_KEYS` cannot describe). */
function declaredKeys(schema: { _zod: { def: Def } }): DeclaredKeys {
  const def = schema._zod.def;
  if (["string", "number", "boolean", "enum", "literal"].includes(def.type)) return "scalar";
  if ((def.type === "optional" || def.type === "nullable") && def.innerType)
    return { optional: declaredKeys(def.innerType) };
  if (def.type === "array" && def.element) return { array: declaredKeys(def.element) };
  if (def.type === "object" && def.shape && def.catchall === undefined)
    return { object: Object.fromEntries(Object.entries(def.shape).map(([k, v]) => [k, declaredKeys(v)])) };
  throw new Error(`a ${def.type} schema: planHash's PLAN_KEYS cannot describe it; parse the plan instead`);
}

describe("planHash", () => {
  it("strips exactly the keys the Plan schema does not declare (PLAN_KEYS is the schema's shape)", () => {
    expect(PLAN_KEYS).toEqual(declaredKeys(Plan as unknown as { _zod: { def: Def } }));
  });

  it("is the hash of the parsed plan for a plan the schema accepts", () => {
    expect(planHash({ ...PLAN }, "v1")).toBe(parsedHash(PLAN, "v1"));
    const { budget: _budget, ...withoutBudget } = PLAN;
    expect(planHash(withoutBudget, "v1")).toBe(parsedHash(withoutBudget, "v1"));
  });

  it("leaves out keys the schema does not declare, at every level, as a store that keeps only those would", () => {
    const extra = {
      ...PLAN,
      note: "not in the schema",
      instances: PLAN.instances.map((i) => ({ ...i, colour: "blue" })),
      tasks: PLAN.tasks.map((t) => ({ ...t, internal: { a: 1 } })),
      budget: { ...PLAN.budget, soft: true },
    } as unknown as Plan;
    const hash = planHash(extra, "v1");
    expect(hash).toBe(parsedHash(extra, "v1"));
    expect(hash).toBe(planHash({ ...PLAN }, "v1"));
    // The plan itself is not changed.
    expect((extra as unknown as { note: string }).note).toBe("not in the schema");
    expect((extra.tasks[0] as unknown as { internal: unknown }).internal).toEqual({ a: 1 });
  });

  it("differs when a declared field differs, and with the prompt version", () => {
    const base = planHash({ ...PLAN }, "v1");
    expect(planHash({ ...PLAN, tasks: [PLAN.tasks[0]!, { ...PLAN.tasks[1]!, maxAttempts: 4 }] }, "v1")).not.toBe(base);
    expect(planHash({ ...PLAN, instances: [PLAN.instances[0]!] }, "v1")).not.toBe(base);
    expect(planHash({ ...PLAN }, "v2")).not.toBe(base);
  });

  it("hashes a plan of the wrong shape as given, as the parse fallback did", () => {
    const wrong = { ...PLAN, tasks: "not a list" } as unknown as Plan;
    expect(planHash(wrong, "v1")).toBe(`pl1:${hashOf({ plan: wrong, promptVersion: "v1" })}`);
  });
});

/** The hash by the general path: declared keys kept (or the parse fallback), then `canonicalJson`. */
function generalHash(plan: Plan, promptVersion: string): string {
  return `pl1:${hashOf({ plan: normalisedPlan(plan), promptVersion })}`;
}

/** Texts that JSON escapes in every way: quotes, backslashes, controls, non-ASCII, a lone surrogate, empty. */
const TEXTS = [
  "a",
  'say "hi"',
  "back\\slash",
  "line\nbreak\t",
  "\u0001",
  "héllo ✓",
  "😀",
  "\ud800 lone",
  "",
  "</script>",
];

/**
 * A plan the schema accepts, drawn with its keys in random order, optional fields absent or undefined, objects with or
 * without prototype, and unknown keys at every level, some of them named like keys another level declares.
 */
function drawPlan(next: () => number): Plan {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  const text = (): string => pick(TEXTS) + String(Math.floor(next() * 100));
  const shape = (fields: [string, unknown][]): Record<string, unknown> => {
    const extra: [string, unknown][] = [
      ["note", text()],
      ["title", text()], // declared on tasks only
      ["name", text()], // declared on plans and instances only
      ["tasks", [1, 2]], // declared on plans only
      ["maxTotalTokens", 5], // declared on budgets only
      ["nested", { title: "x", deep: [{ a: 1 }] }],
    ];
    const all = fields.filter(([, v]) => v !== undefined || next() < 0.5);
    for (const e of extra) if (next() < 0.15 && !all.some(([k]) => k === e[0])) all.push(e);
    for (let i = all.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [all[i], all[j]] = [all[j]!, all[i]!];
    }
    const out: Record<string, unknown> = next() < 0.2 ? Object.create(null) : {};
    for (const [k, v] of all) out[k] = v;
    return out;
  };
  const instances = Array.from({ length: 1 + Math.floor(next() * 3) }, (_, i) =>
    shape([
      ["instanceId", `w${i}`],
      ["agentId", text()],
      ["role", pick(["worker", "leader"])],
      ["name", next() < 0.5 ? text() : undefined],
    ]),
  );
  const tasks = Array.from({ length: Math.floor(next() * 6) }, (_, i) =>
    shape([
      ["taskId", `t${i}`],
      ["title", text()],
      ["description", text()],
      ["instanceId", `w${Math.floor(next() * instances.length)}`],
      ["dependsOn", Array.from({ length: Math.floor(next() * i) }, (_, d) => `t${d}`)],
      ["acceptance", next() < 0.5 ? text() : undefined],
      ["maxAttempts", next() < 0.5 ? 1 + Math.floor(next() * 5) : undefined],
      ["supersedes", next() < 0.2 ? `t${i + 100}` : undefined],
    ]),
  );
  const budget =
    next() < 0.5
      ? shape([
          ["maxTotalTokens", next() < 0.7 ? Math.floor(next() * 1e6) : undefined],
          ["maxDurationMs", next() < 0.5 ? Math.floor(next() * 1e6) : undefined],
        ])
      : undefined;
  return shape([
    ["productId", "prd_1"],
    ["version", 1 + Math.floor(next() * 3)],
    ["name", text()],
    ["summary", text()],
    ["instances", instances],
    ["tasks", tasks],
    ["budget", budget],
  ]) as unknown as Plan;
}

describe("planHash, the plan written by one native serialisation (issue 34)", () => {
  it("gives the general path's hash, and the parsed plan's, for 300 drawn plans", () => {
    const next = rng(Number(process.env.PLAN_HASH_SEED ?? 34));
    for (let run = 0; run < 300; run++) {
      const plan = drawPlan(next);
      const version = run % 2 === 0 ? "v1" : 'v"2';
      const hash = planHash(plan, version);
      expect(hash, JSON.stringify(plan)).toBe(generalHash(plan, version));
      const parsed = Plan.safeParse(plan);
      if (parsed.success) expect(hash).toBe(parsedHash(plan, version));
    }
  });

  it("takes the general path for what the native serialisation would write differently", () => {
    const task = PLAN.tasks[1]!;
    const hidden = { ...task } as Record<string, unknown>;
    Object.defineProperty(hidden, "acceptance", { value: "hidden", enumerable: false });
    const odd: Plan[] = [
      { ...PLAN, tasks: [{ ...task, dependsOn: ["a", undefined as unknown as string] }] },
      { ...PLAN, tasks: [{ ...task, maxAttempts: Number.NaN }] },
      { ...PLAN, tasks: [{ ...task, toJSON: () => "x" } as unknown as Plan["tasks"][number]] },
      { ...PLAN, tasks: [Object.assign(new (class Task {})(), task)] },
      { ...PLAN, tasks: [hidden as unknown as Plan["tasks"][number]] },
      { ...PLAN, tasks: [{ ...task, title: { text: "an object" } as unknown as string }] },
      { ...PLAN, tasks: [{ ...task, name: "declared on plans, not tasks" } as unknown as Plan["tasks"][number]] },
      { ...PLAN, budget: [] as unknown as Plan["budget"] },
      { ...PLAN, instances: [null as unknown as Plan["instances"][number]] },
    ];
    for (const plan of odd) expect(planHash(plan, "v1"), JSON.stringify(plan)).toBe(generalHash(plan, "v1"));
    const proto = Object.prototype as Record<string, unknown>;
    proto.acceptance = "inherited";
    try {
      expect(planHash({ ...PLAN, tasks: [PLAN.tasks[0]!] }, "v1")).toBe(
        generalHash({ ...PLAN, tasks: [PLAN.tasks[0]!] }, "v1"),
      );
    } finally {
      delete proto.acceptance;
    }
  });
});
