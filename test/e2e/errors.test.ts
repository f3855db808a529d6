/**
 * Invalid params and domain errors over the real stdio server (PROTOCOL.md sections 3-5): one invalid-params case for
 * every method of sections 4 and 5, unknown products, checkpoints, tasks and sessions (-32002), a mutation batch that
 * closes a cycle (-32014) and an edited plan with a cycle in product.confirm (-32602). Every case checks the exact
 * code, `data` shape and echoed `id`, that the refused call changed nothing and the server keeps serving, and at the
 * end that stdout carried only JSON-RPC messages and the process exits 0 when stdin closes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isJsonRpcLine, startRawServer, tempDir, type RawServer } from "../support/server-process.js";

type Msg = Record<string, unknown>;
interface PlanTask {
  taskId: string;
  title: string;
  description: string;
  instanceId: string;
  dependsOn: string[];
}
interface Plan {
  version: number;
  instances: { instanceId: string; agentId: string; role: string }[];
  tasks: PlanTask[];
}

const INIT_PARAMS = { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "error-tests", version: "1" } };
/** The heuristic leader reads "Then" as a dependency: the second task depends on the first. */
const GOAL = "- Write the parser\n- Then write the tests for the parser";

let raw: RawServer;
let workspace: string;
let nextId = 0;

/** Sends a request (under a fresh id unless given) and resolves with the response echoing that id. */
async function call(method: string, params: unknown = {}, id: string | number = ++nextId): Promise<Msg> {
  raw.send({ jsonrpc: "2.0", id, method, params });
  const res = await raw.next((m) => m.id === id && !("method" in m));
  expect(res.jsonrpc).toBe("2.0");
  return res;
}

function result<T = Msg>(res: Msg): T {
  expect(Object.keys(res).sort(), JSON.stringify(res)).toEqual(["id", "jsonrpc", "result"]);
  return res.result as T;
}

/** One human sentence (PROTOCOL.md section 3): one line, starts upper-case, ends with a full stop. */
function expectOneSentence(message: unknown): void {
  expect(typeof message).toBe("string");
  const text = message as string;
  expect(text).toMatch(/^[A-Z]/);
  expect(text).toMatch(/\.$/);
  expect(text).not.toMatch(/\n/);
  expect(text).not.toMatch(/[.!?]\s+[A-Z]/);
}

/** Asserts `{jsonrpc, id, error: {code, message, data}}` exactly, with a one-sentence message; returns `data`. */
function expectError(res: Msg, code: number): Msg {
  expect(Object.keys(res).sort(), JSON.stringify(res)).toEqual(["error", "id", "jsonrpc"]);
  const error = res.error as Msg;
  expect(Object.keys(error).sort()).toEqual(["code", "data", "message"]);
  expect(error.code, JSON.stringify(error)).toBe(code);
  expectOneSentence(error.message);
  return error.data as Msg;
}

/** -32602 with `data: {issues: [{path, message}, ...]}` (non-empty); returns the issues. */
function expectInvalidParams(res: Msg): { path: (string | number)[]; message: string }[] {
  const data = expectError(res, -32602);
  expect(Object.keys(data)).toEqual(["issues"]);
  const issues = data.issues as { path: (string | number)[]; message: string }[];
  expect(Array.isArray(issues)).toBe(true);
  expect(issues.length).toBeGreaterThan(0);
  for (const issue of issues) {
    expect(Object.keys(issue).sort()).toEqual(["message", "path"]);
    expect(Array.isArray(issue.path)).toBe(true);
    for (const segment of issue.path) expect(["string", "number"]).toContain(typeof segment);
    expect(typeof issue.message).toBe("string");
    expect(issue.message.length).toBeGreaterThan(0);
  }
  return issues;
}

/** Plans a product and waits until the leader's plan is ready (phase awaiting_confirmation). */
async function planned(goal = GOAL): Promise<{ productId: string; plan: Plan }> {
  const { productId } = result<{ productId: string }>(await call("product.plan", { goal, cwd: workspace }));
  const ready = await raw.next((m) => m.method === "product.planReady" && (m.params as Msg).productId === productId);
  return { productId, plan: (ready.params as { plan: Plan }).plan };
}

/** A product confirmed and paused at once, so nothing of it runs (phase paused). */
async function paused(): Promise<{ productId: string; plan: Plan }> {
  const p = await planned();
  const [confirm, pause] = await Promise.all([
    call("product.confirm", { productId: p.productId }),
    call("product.pause", { productId: p.productId }),
  ]);
  expect(result(confirm)).toEqual({ productId: p.productId, ok: true, phase: "executing" });
  expect(result(pause)).toEqual({ productId: p.productId, phase: "paused" });
  return p;
}

async function status(
  productId: string,
): Promise<{ phase: string; plan?: Plan; checkpoints: number; tasks: { taskId: string; status: string }[] }> {
  return result(await call("product.status", { productId }));
}

beforeAll(async () => {
  workspace = tempDir("acp-orch-errors-ws-");
  raw = startRawServer();
  // A failed initialize does not initialize: the next request is still refused with -32600.
  expect(expectInvalidParams(await call("initialize", { protocolVersion: "1" }))[0]!.path).toEqual(["protocolVersion"]);
  const early = await call("product.list", {});
  expect(early).toEqual({ jsonrpc: "2.0", id: nextId, error: { code: -32600, message: expect.any(String) } });
  result(await call("initialize", INIT_PARAMS));
});

afterAll(async () => {
  // The server still serves after every refused call, then exits 0 on EOF with only JSON-RPC on stdout.
  expect(result(await call("product.list", {}))).toEqual({ products: expect.any(Array), dropped: 0 });
  expect(await raw.close()).toBe(0);
  expect(raw.stdoutLines.length).toBeGreaterThan(0);
  for (const l of raw.stdoutLines) expect(isJsonRpcLine(l), l).toBe(true);
  expect(raw.stdoutLines.some((l) => l.includes('"code":-32603'))).toBe(false);
});

describe("invalid params (-32602) for every method of PROTOCOL.md sections 4 and 5", () => {
  const abs = "/tmp/acp-orch-absolute";
  const cases: { method: string; params: unknown; path: (string | number)[]; what: string }[] = [
    {
      method: "initialize",
      params: { protocolVersion: "1", clientCapabilities: {} },
      path: ["protocolVersion"],
      what: "wrong type",
    },
    { method: "session/new", params: { cwd: "relative/dir", mcpServers: [] }, path: ["cwd"], what: "relative cwd" },
    { method: "session/load", params: { cwd: abs, mcpServers: [] }, path: ["sessionId"], what: "missing sessionId" },
    { method: "session/list", params: { cwd: "./here" }, path: ["cwd"], what: "relative cwd" },
    { method: "session/close", params: { sessionId: 42 }, path: ["sessionId"], what: "wrong type" },
    {
      method: "session/prompt",
      params: { sessionId: "ses_x", prompt: "hello" },
      path: ["prompt"],
      what: "prompt not an array",
    },
    { method: "product.plan", params: { goal: "Write docs", cwd: "docs" }, path: ["cwd"], what: "relative cwd" },
    {
      method: "_product.plan",
      params: { goal: "   ", cwd: abs },
      path: ["goal"],
      what: "blank goal (underscore spelling)",
    },
    { method: "product.message", params: { productId: "prd_x" }, path: ["content"], what: "missing content" },
    {
      method: "product.confirm",
      params: { productId: "prd_x", instances: "all" },
      path: ["instances"],
      what: "wrong type",
    },
    { method: "product.status", params: { productID: "prd_x" }, path: [], what: "unknown key productID" },
    { method: "product.list", params: { phase: "running" }, path: ["phase"], what: "unknown phase" },
    { method: "product.pause", params: {}, path: ["productId"], what: "missing productId" },
    {
      method: "product.resume",
      params: { productId: "prd_x", additionalBudget: { maxTotalTokens: 1.5 } },
      path: ["additionalBudget", "maxTotalTokens"],
      what: "non-integer tokens",
    },
    { method: "product.cancel", params: { productId: "" }, path: ["productId"], what: "empty id" },
    { method: "product.checkpoint", params: { productId: 7 }, path: ["productId"], what: "wrong type" },
    { method: "product.checkpoints", params: { productId: "prd_x", verbose: true }, path: [], what: "unknown key" },
    {
      method: "product.rollback",
      params: { productId: "prd_x", checkpointId: 3 },
      path: ["checkpointId"],
      what: "wrong type",
    },
    { method: "product.replayTask", params: { productId: "prd_x" }, path: ["taskId"], what: "missing taskId" },
    {
      method: "product.mutate",
      params: { productId: "prd_x", mutations: [{ op: "explode", taskId: "t1" }] },
      path: ["mutations", 0, "op"],
      what: "unknown op",
    },
    {
      method: "product.delete",
      params: { productId: "prd_\u0001" },
      path: ["productId"],
      what: "control character in id",
    },
  ];

  it.each(cases)("$method: $what", async ({ method, params, path }) => {
    const id = `invalid-${method}`;
    const res = await call(method, params, id);
    expect(res.id).toBe(id);
    const issues = expectInvalidParams(res);
    expect(issues.map((i) => i.path)).toContainEqual(path);
    expect((res.error as Msg).message).toMatch(/^Invalid params: /);
  });

  it("names an unknown key such as productID in its issue, and refuses params that are not an object", async () => {
    const issues = expectInvalidParams(await call("product.status", { productID: "prd_x" }));
    expect(issues).toContainEqual({ path: [], message: expect.stringContaining("productID") });
    expect(expectInvalidParams(await call("product.list", [1, 2]))).toEqual([
      { path: [], message: expect.any(String) },
    ]);
    expect(
      expectInvalidParams(await call("product.plan", { goal: "Write docs", cwd: workspace, budget: { maxTokens: 5 } })),
    ).toContainEqual({
      path: ["budget"],
      message: expect.stringContaining("maxTokens"),
    });
    // Nothing was created by the refused product.plan calls.
    const list = result<{ products: unknown[] }>(await call("product.list", { projectId: "prj_never_used" }));
    expect(list.products).toEqual([]);
  });
});

describe("not found (-32002)", () => {
  it("answers every product method on an unknown product with {kind: product, id}", async () => {
    const id = "prd_does_not_exist";
    const methods: [string, Msg][] = [
      ["product.message", { productId: id, content: "hello" }],
      ["product.confirm", { productId: id }],
      ["product.status", { productId: id }],
      ["product.pause", { productId: id }],
      ["product.resume", { productId: id }],
      ["product.cancel", { productId: id }],
      ["product.checkpoint", { productId: id }],
      ["product.checkpoints", { productId: id }],
      ["product.rollback", { productId: id }],
      ["product.replayTask", { productId: id, taskId: "t1" }],
      ["product.mutate", { productId: id, mutations: [{ op: "removeTask", taskId: "t1" }] }],
      ["_product.status", { productId: id }],
    ];
    for (const [method, params] of methods) {
      const res = await call(method, params, `nf-${method}`);
      expect(res.id).toBe(`nf-${method}`);
      expect(expectError(res, -32002), method).toEqual({ kind: "product", id });
    }
    expect(result(await call("product.delete", { productId: id }))).toEqual({ deleted: false });
  });

  it("answers an unknown checkpoint with {kind: checkpoint, id} and an unknown task with {kind: task, id}", async () => {
    const { productId } = await paused();
    expect(expectError(await call("product.rollback", { productId, checkpointId: "ckp_missing" }), -32002)).toEqual({
      kind: "checkpoint",
      id: "ckp_missing",
    });
    expect(expectError(await call("product.replayTask", { productId, taskId: "t-missing" }), -32002)).toEqual({
      kind: "task",
      id: "t-missing",
    });
    const after = await status(productId);
    expect(after.phase).toBe("paused");
    expect(after.tasks.every((t) => t.status === "pending")).toBe(true);
  });

  it("answers session/prompt, session/load and session/close on an unknown session with {kind: session, id}", async () => {
    const sessionId = "ses_does_not_exist";
    const prompt = await call("session/prompt", { sessionId, prompt: [{ type: "text", text: "hello" }] });
    expect(expectError(prompt, -32002)).toEqual({ kind: "session", id: sessionId });
    const load = await call("session/load", { sessionId, cwd: workspace, mcpServers: [] });
    expect(expectError(load, -32002)).toEqual({ kind: "session", id: sessionId });
    const close = await call("session/close", { sessionId });
    expect(expectError(close, -32002)).toEqual({ kind: "session", id: sessionId });
    // A real session still works afterwards.
    const created = result<{ sessionId: string }>(await call("session/new", { cwd: workspace, mcpServers: [] }));
    expect(result(await call("session/close", { sessionId: created.sessionId }))).toEqual({});
  });

  it("refuses a session/prompt without any text with -32602 instead of starting a product with a blank goal", async () => {
    const { sessionId } = result<{ sessionId: string }>(await call("session/new", { cwd: workspace, mcpServers: [] }));
    const before = result<{ products: unknown[] }>(await call("product.list", {})).products.length;
    for (const prompt of [[], [{ type: "text", text: "   \n" }]]) {
      const issues = expectInvalidParams(await call("session/prompt", { sessionId, prompt }));
      expect(issues).toEqual([{ path: ["prompt"], message: expect.any(String) }]);
    }
    expect(result<{ products: unknown[] }>(await call("product.list", {})).products).toHaveLength(before);
    expect(result(await call("session/close", { sessionId }))).toEqual({});
  });
});

describe("invalid DAGs", () => {
  it("refuses a mutation batch that closes a cycle with -32014 {index, reason} and applies none of it", async () => {
    const { productId, plan } = await planned();
    const dependent = plan.tasks.find((t) => t.dependsOn.length > 0);
    expect(dependent, JSON.stringify(plan.tasks)).toBeDefined();
    const upstream = dependent!.dependsOn[0]!;
    const res = await call("product.mutate", {
      productId,
      mutations: [
        { op: "updateTask", taskId: upstream, patch: { title: "Renamed by a batch that fails" } },
        { op: "addDependency", taskId: upstream, dependsOn: dependent!.taskId },
      ],
    });
    const data = expectError(res, -32014);
    expect(Object.keys(data).sort()).toEqual(["index", "reason"]);
    expect(data.index).toBe(1);
    expect(typeof data.reason).toBe("string");
    expect(data.reason).toMatch(/cycle/i);
    const after = await status(productId);
    expect(after.phase).toBe("awaiting_confirmation");
    expect(after.plan?.version).toBe(plan.version);
    expect(after.plan?.tasks).toEqual(plan.tasks);
    // An out-of-range reference is an invalid mutation too, at its own index.
    const unknown = await call("product.mutate", { productId, mutations: [{ op: "removeTask", taskId: "t-unknown" }] });
    expect(expectError(unknown, -32014)).toEqual({ index: 0, reason: expect.any(String) });
  });

  it("refuses an edited plan with a cycle in product.confirm with -32602 and stays awaiting confirmation", async () => {
    const { productId, plan } = await planned();
    const instanceId = plan.instances[0]!.instanceId;
    const tasks = [
      { taskId: "a", title: "A", description: "First", instanceId, dependsOn: ["b"] },
      { taskId: "b", title: "B", description: "Second", instanceId, dependsOn: ["a"] },
    ];
    const issues = expectInvalidParams(await call("product.confirm", { productId, tasks }));
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path[0]).toBe("tasks");
    expect(issues[0]!.message).toMatch(/cycle/i);
    const after = await status(productId);
    expect(after.phase).toBe("awaiting_confirmation");
    expect(after.plan?.tasks).toEqual(plan.tasks);
    // An edited plan whose problem is in `instances` (an id listed twice) points there, not at `tasks`.
    const twice = expectInvalidParams(
      await call("product.confirm", { productId, instances: [plan.instances[0], plan.instances[0]] }),
    );
    expect(twice).toEqual([{ path: ["instances", 1], message: expect.stringContaining("twice") }]);
    // The leader's own plan still confirms.
    const confirmed = result(await call("product.confirm", { productId }));
    expect(confirmed).toEqual({ productId, ok: true, phase: "executing" });
    expect(result(await call("product.pause", { productId }))).toEqual({ productId, phase: "paused" });
  });
});
