/**
 * The `product.*` schemas of the method table (PROTOCOL.md section 5): for every method, a valid example is accepted,
 * a missing required field, an unknown key and (where there is one) a relative `cwd` are rejected, and the result
 * shapes accept what PROTOCOL.md says the server answers.
 */
import { describe, expect, it } from "vitest";
import { findServerMethod, productNotifications, type ProductMethodName } from "../../protocol/methods.js";
import { CWD, instance, plan, progress, task, taskState } from "./fixtures.js";

interface ParamsCase {
  valid: Record<string, unknown>;
  /** A required key to delete; absent when the method has none (then `invalid` is checked instead). */
  required?: string;
  invalid?: Record<string, unknown>;
  result: Record<string, unknown>;
}

const cases: Record<ProductMethodName, ParamsCase> = {
  "product.plan": {
    valid: { goal: "Build a CLI", cwd: CWD, projectId: "proj", allowedAgents: [], budget: { maxTotalTokens: 1000 } },
    required: "goal",
    result: { productId: "prd_1", phase: "planning" },
  },
  "product.message": {
    valid: { productId: "prd_1", content: "Use Rust", askId: "ask_1" },
    required: "content",
    result: { response: "OK", plan, mutations: [{ op: "removeTask", taskId: "t1" }] },
  },
  "product.confirm": {
    valid: { productId: "prd_1", instances: [instance], tasks: [task], budget: { maxDurationMs: 60_000 } },
    required: "productId",
    result: { productId: "prd_1", ok: true, phase: "executing" },
  },
  "product.status": {
    valid: { productId: "prd_1" },
    required: "productId",
    result: {
      productId: "prd_1",
      projectId: "proj",
      name: "Parser",
      phase: "paused",
      plan,
      tasks: [taskState],
      progress,
      budget: { usedTokens: 10, inputTokens: 6, outputTokens: 4, elapsedMs: 1200 },
      checkpoints: 2,
      lastCheckpointAt: "2025-01-01T00:00:00.000Z",
      dropped: 0,
      recovery: { cause: "Budget exceeded.", resumable: true, remediation: "Resume with more budget." },
    },
  },
  "product.list": {
    valid: { projectId: "proj", phase: "executing" },
    invalid: { phase: "running" },
    result: {
      products: [
        {
          productId: "prd_1",
          projectId: "proj",
          name: "Parser",
          phase: "executing",
          progress,
          updatedAt: "2025-01-01T00:00:00.000Z",
        },
      ],
      dropped: 0,
    },
  },
  "product.pause": {
    valid: { productId: "prd_1" },
    required: "productId",
    result: { productId: "prd_1", phase: "paused" },
  },
  "product.resume": {
    valid: { productId: "prd_1", additionalBudget: { maxTotalTokens: 5000 } },
    required: "productId",
    result: { productId: "prd_1", phase: "executing" },
  },
  "product.cancel": {
    valid: { productId: "prd_1" },
    required: "productId",
    result: { productId: "prd_1", phase: "cancelled" },
  },
  "product.checkpoint": {
    valid: { productId: "prd_1" },
    required: "productId",
    result: { checkpointId: "ckp_1", at: "2025-01-01T00:00:00.000Z" },
  },
  "product.checkpoints": {
    valid: { productId: "prd_1" },
    required: "productId",
    result: { checkpoints: [{ checkpointId: "ckp_1", at: "2025-01-01T00:00:00.000Z", completed: 1, total: 3 }] },
  },
  "product.rollback": {
    valid: { productId: "prd_1" },
    required: "productId",
    result: { productId: "prd_1", checkpointId: "ckp_1", phase: "executing" },
  },
  "product.replayTask": {
    valid: { productId: "prd_1", taskId: "t1" },
    required: "taskId",
    result: { productId: "prd_1", reset: ["t1", "t2"] },
  },
  "product.mutate": {
    valid: {
      productId: "prd_1",
      mutations: [
        { op: "addTask", task: { ...task, taskId: "t2", dependsOn: ["t1"] } },
        { op: "updateTask", taskId: "t1", patch: { title: "Parse" } },
        { op: "reassign", taskId: "t1", instanceId: "i2" },
        { op: "addDependency", taskId: "t2", dependsOn: "t1" },
        { op: "removeDependency", taskId: "t2", dependsOn: "t1" },
        { op: "removeTask", taskId: "t2" },
      ],
    },
    required: "mutations",
    result: { productId: "prd_1", applied: 6, version: 3 },
  },
  "product.delete": {
    valid: { productId: "prd_1" },
    required: "productId",
    result: { deleted: true },
  },
};

function spec(name: ProductMethodName) {
  const found = findServerMethod(name);
  if (!found) throw new Error(`${name} is not in the method table`);
  return found;
}

describe.each(Object.keys(cases) as ProductMethodName[])("%s", (name) => {
  const c = cases[name];

  it("accepts a valid example", () => {
    expect(spec(name).params.safeParse(c.valid).success).toBe(true);
  });

  it("accepts an optional _meta object", () => {
    expect(spec(name).params.safeParse({ ...c.valid, _meta: { traceparent: "00-abc" } }).success).toBe(true);
  });

  it("rejects an unknown key", () => {
    const parsed = spec(name).params.safeParse({ ...c.valid, productID: "prd_1" });
    expect(parsed.error?.issues).toEqual([expect.objectContaining({ code: "unrecognized_keys", keys: ["productID"] })]);
  });

  if (c.required !== undefined) {
    const required = c.required;
    it(`rejects a missing required field (${required})`, () => {
      const { [required]: _removed, ...rest } = c.valid;
      const parsed = spec(name).params.safeParse(rest);
      expect(parsed.error?.issues.map((i) => i.path)).toEqual([[required]]);
    });
  } else {
    it("has no required field, and rejects a wrong value instead", () => {
      expect(spec(name).params.safeParse({}).success).toBe(true);
      expect(spec(name).params.safeParse(c.invalid).success).toBe(false);
    });
  }

  it("accepts the result PROTOCOL.md describes", () => {
    expect(spec(name).result.parse(c.result)).toEqual(c.result);
  });
});

describe("product.plan", () => {
  const params = spec("product.plan").params;

  it("rejects a relative cwd", () => {
    const parsed = params.safeParse({ goal: "Build a CLI", cwd: "project/src" });
    expect(parsed.error?.issues).toEqual([
      expect.objectContaining({ path: ["cwd"], message: "must be an absolute path" }),
    ]);
  });

  it("accepts a Windows drive path as cwd", () => {
    expect(params.safeParse({ goal: "Build a CLI", cwd: "C:\\work\\project" }).success).toBe(true);
  });

  it("rejects a blank goal", () => {
    expect(params.safeParse({ goal: "   ", cwd: CWD }).success).toBe(false);
  });

  it("rejects an unknown key inside budget (a typo of maxTotalTokens)", () => {
    const parsed = params.safeParse({ goal: "Build a CLI", cwd: CWD, budget: { maxTokens: 10 } });
    expect(parsed.error?.issues).toEqual([expect.objectContaining({ path: ["budget"], code: "unrecognized_keys" })]);
  });
});

describe("nested objects a client writes are strict", () => {
  it("rejects an unknown key inside an edited task of product.confirm", () => {
    const parsed = spec("product.confirm").params.safeParse({ productId: "p", tasks: [{ ...task, dependOn: ["x"] }] });
    expect(parsed.error?.issues).toEqual([expect.objectContaining({ path: ["tasks", 0], code: "unrecognized_keys" })]);
  });

  it("rejects an unknown key inside a mutation", () => {
    const parsed = spec("product.mutate").params.safeParse({
      productId: "p",
      mutations: [{ op: "removeTask", taskId: "t1", cascade: true }],
    });
    expect(parsed.error?.issues).toEqual([
      expect.objectContaining({ path: ["mutations", 0], code: "unrecognized_keys" }),
    ]);
  });

  it("rejects an unknown mutation op", () => {
    const parsed = spec("product.mutate").params.safeParse({ productId: "p", mutations: [{ op: "renameTask" }] });
    expect(parsed.success).toBe(false);
  });
});

describe("product notifications", () => {
  const examples: Record<string, Record<string, unknown>> = {
    "product.planningDelta": { text: "Thinking" },
    "product.leaderMessage": { message: "Here is the plan." },
    "product.leaderAsk": { askId: "ask_1", questions: [{ question: "Which language?", options: ["Rust", "Go"] }] },
    "product.planReady": { plan },
    "product.planFailed": { error: "The leader returned invalid JSON." },
    "product.teamRoster": { agents: [{ agentId: "claude", role: "coder", name: "Claude" }] },
    "product.dagTopology": { nodes: [{ id: "t1", title: "T", instanceId: "i1", dependsOn: [], status: "pending" }] },
    "product.taskStatus": { taskId: "t1", status: "waiting", attempt: 1, question: "Which port?" },
    "product.taskOutputDelta": { taskId: "t1", text: "compiling" },
    "product.agentActivity": { taskId: "t1", toolName: "edit" },
    "product.taskOverloaded": {
      taskId: "t1",
      attempt: 1,
      retry: 1,
      retryInMs: 20_000,
      message: "waiting: provider overloaded, retry in 20 s",
    },
    "product.dagMutated": { mutation: { op: "removeTask", taskId: "t1" }, by: "user" },
    "product.budgetUpdate": { inputTokens: 1, outputTokens: 2, elapsedMs: 3 },
    "product.budgetWarning": { usedTokens: 80, maxTotalTokens: 100, reason: "80 % of the token budget used" },
    "product.budgetExceeded": { usedTokens: 101, maxTotalTokens: 100, reason: "token budget exceeded" },
    "product.checkpoint": { checkpointId: "ckp_1", at: "2025-01-01T00:00:00.000Z" },
    "product.persistenceError": { projectId: "proj", error: "disk full" },
    "product.taskIntegrated": { taskId: "t1", commit: "a".repeat(40), changedFiles: ["notes/t1.md"] },
    "product.taskVerified": {
      taskId: "t1",
      tree: "c".repeat(40),
      commit: "a".repeat(40),
      ok: false,
      checks: [{ name: "unit", ok: false, exitCode: 1, durationMs: 812, outputTail: "not ok 1 - add" }],
    },
    "product.integrated": {
      integration: { mode: "branch", branch: "acp/prd_1", head: "b".repeat(40), state: "integrated", merged: ["t1"] },
    },
    "product.ownershipLost": { ownerId: "host:1:2:0a1b2c3d", error: "Another server process took the product over." },
    "product.completed": { projectId: "proj", phase: "completed", summary: "All 3 tasks completed." },
  };

  // Only names go through it.each: vitest formats its arguments, and a zod schema is a very large object graph.
  const names = productNotifications.map((n) => n.method);
  const paramsOf = (method: string) => {
    const n = productNotifications.find((x) => x.method === method);
    if (!n) throw new Error(`${method} is not declared`);
    return n.params;
  };

  it.each(names)("%s accepts an example with productId", (method) => {
    const example = examples[method];
    expect(example).toBeDefined();
    expect(paramsOf(method).safeParse({ productId: "prd_1", ...example }).success).toBe(true);
  });

  it.each(names)("%s requires productId", (method) => {
    expect(paramsOf(method).safeParse(examples[method]).success).toBe(false);
  });

  it("product.completed only reports completed or failed", () => {
    const n = productNotifications.find((x) => x.method === "product.completed");
    expect(n?.params.safeParse({ productId: "p", projectId: "q", phase: "cancelled", summary: "" }).success).toBe(
      false,
    );
  });
});
