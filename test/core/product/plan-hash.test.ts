/**
 * The plan fingerprint (fingerprint.ts `planHash`) without a zod parse of the plan (issue 34): unknown keys are left
 * out by walking the keys the schema declares (`PLAN_KEYS`, checked here against the schema itself), and the hash of every plan the schema accepts is the one recorded before (the
 * hash of the parsed plan), so runs recorded by earlier servers show no false plan drift.
 */
import { describe, expect, it } from "vitest";
import { Plan } from "../../../protocol/common.js";
import { hashOf, planHash, PLAN_KEYS, type DeclaredKeys } from "../../../src/core/product/fingerprint.js";

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
