/**
 * Operations in the wrong phase over the real stdio server (PROTOCOL.md section 5, "allowed in" column): each gets
 * -32010 with `data: {phase, allowed}` exactly as the table says, changes nothing, and the server keeps serving.
 * Also: pause is idempotent on paused, product.delete of an unknown or completed product, and product.list with a
 * phase filter. Products are held in a phase deterministically: planning by a record a stopped server left behind,
 * awaiting_confirmation after the heuristic leader's plan, executing by a second concurrent confirm, paused by a
 * pause sent with the confirm, completed/cancelled by running or cancelling them.
 *
 * Not covered: `product.message` during the initial planning turn (-32011). The heuristic leader and the embedded
 * SQLite store finish a planning turn within one event-loop turn after `product.plan` answers, so no request can
 * arrive while it runs; a test of it would be timing-dependent.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import { DEFAULT_PRODUCT_OPTIONS } from "../../src/core/product/context.js";
import { ProductStore } from "../../src/core/product/store.js";
import { isJsonRpcLine, startRawServer, tempDir, type RawServer } from "../support/server-process.js";

type Msg = Record<string, unknown>;
interface Status {
  productId: string;
  phase: string;
  plan?: { version: number; tasks: { taskId: string }[] };
  tasks: { taskId: string; status: string }[];
  checkpoints: number;
}

const INIT_PARAMS = { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "phase-tests", version: "1" } };
const GOAL = "- Write the parser\n- Then write the tests for the parser";

const ALL_NON_TERMINAL = ["planning", "awaiting_confirmation", "executing", "paused"];
const SETTLED_OR_RUNNING = ["executing", "paused", "completed", "failed"];

let raw: RawServer;
let workspace: string;
let nextId = 0;
const SEEDED_PRODUCT = "prd_seeded_in_planning";
const SEEDED_PROJECT = "prj_seeded";

async function call(method: string, params: unknown = {}): Promise<Msg> {
  const id = ++nextId;
  raw.send({ jsonrpc: "2.0", id, method, params });
  const res = await raw.next((m) => m.id === id && !("method" in m));
  expect(res.jsonrpc).toBe("2.0");
  return res;
}

function result<T = Msg>(res: Msg): T {
  expect(Object.keys(res).sort(), JSON.stringify(res)).toEqual(["id", "jsonrpc", "result"]);
  return res.result as T;
}

/** Asserts exactly `-32010 {phase, allowed}` with a one-sentence message (PROTOCOL.md section 3). */
function expectInvalidPhase(res: Msg, phase: string, allowed: string[]): void {
  expect(Object.keys(res).sort(), JSON.stringify(res)).toEqual(["error", "id", "jsonrpc"]);
  const error = res.error as { code: number; message: string; data: { phase: string; allowed: string[] } };
  expect(Object.keys(error).sort()).toEqual(["code", "data", "message"]);
  expect(error.code, JSON.stringify(error)).toBe(-32010);
  expect(Object.keys(error.data).sort()).toEqual(["allowed", "phase"]);
  expect(error.data.phase).toBe(phase);
  expect([...error.data.allowed].sort()).toEqual([...allowed].sort());
  expect(error.message).toMatch(/^[A-Z][^\n]*\.$/);
}

async function status(productId: string): Promise<Status> {
  return result<Status>(await call("product.status", { productId }));
}

function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => (made ??= make());
}

async function planned(goal = GOAL): Promise<string> {
  const { productId } = result<{ productId: string }>(await call("product.plan", { goal, cwd: workspace }));
  await raw.next((m) => m.method === "product.planReady" && (m.params as Msg).productId === productId);
  expect((await status(productId)).phase).toBe("awaiting_confirmation");
  return productId;
}

function completion(productId: string): Promise<Msg> {
  return raw.next((m) => m.method === "product.completed" && (m.params as Msg).productId === productId, 20_000);
}

/** Runs a one-task product to the end on the built-in worker. */
async function completed(): Promise<string> {
  const productId = await planned("Write the release notes");
  const done = completion(productId);
  expect(result(await call("product.confirm", { productId }))).toEqual({ productId, ok: true, phase: "executing" });
  expect(((await done).params as Msg).phase).toBe("completed");
  expect((await status(productId)).phase).toBe("completed");
  return productId;
}

const awaitingProduct = once(() => planned());
const completedProduct = once(completed);
const pausedProduct = once(async () => {
  const productId = await planned();
  const confirm = call("product.confirm", { productId });
  const pause = call("product.pause", { productId });
  expect(result(await confirm)).toEqual({ productId, ok: true, phase: "executing" });
  expect(result(await pause)).toEqual({ productId, phase: "paused" });
  return productId;
});
const cancelledProduct = once(async () => {
  const productId = await planned();
  expect(result(await call("product.cancel", { productId }))).toEqual({ productId, phase: "cancelled" });
  return productId;
});

beforeAll(async () => {
  workspace = tempDir("acp-orch-phases-ws-");
  // A product left in `planning` by a server that stopped before its leader answered: recorded exactly as
  // product.plan records it, through the same store, in the state file the server then opens.
  const statePath = join(tempDir(), "state.db");
  const authority = SqliteAuthority.open(statePath);
  const at = new Date().toISOString();
  const goal = "Plan a migration";
  await new ProductStore(authority, DEFAULT_PRODUCT_OPTIONS.checkpointHistory).create(SEEDED_PROJECT, SEEDED_PRODUCT, [
    {
      v: 1,
      at,
      type: "created",
      productId: SEEDED_PRODUCT,
      projectId: SEEDED_PROJECT,
      name: goal,
      goal,
      cwd: workspace,
    },
    { v: 1, at, type: "dialogue", role: "user", text: goal },
  ]);
  await authority.close();
  raw = startRawServer({ statePath });
  result(await call("initialize", INIT_PARAMS));
});

afterAll(async () => {
  expect(result(await call("product.list", {}))).toEqual({ products: expect.any(Array), dropped: 0 });
  expect(await raw.close()).toBe(0);
  for (const l of raw.stdoutLines) expect(isJsonRpcLine(l), l).toBe(true);
  expect(raw.stdoutLines.some((l) => l.includes('"code":-32603'))).toBe(false);
});

describe("-32010 invalid phase, per the PROTOCOL.md section 5 table", () => {
  it("product.confirm while planning", async () => {
    expect((await status(SEEDED_PRODUCT)).phase).toBe("planning");
    expectInvalidPhase(await call("product.confirm", { productId: SEEDED_PRODUCT }), "planning", [
      "awaiting_confirmation",
    ]);
    expect((await status(SEEDED_PRODUCT)).phase).toBe("planning");
  });

  it("product.confirm after confirm (executing, then completed)", async () => {
    const productId = await planned("Write the changelog");
    const done = completion(productId);
    const first = call("product.confirm", { productId });
    const second = call("product.confirm", { productId });
    expect(result(await first)).toEqual({ productId, ok: true, phase: "executing" });
    expectInvalidPhase(await second, "executing", ["awaiting_confirmation"]);
    await done;
    expectInvalidPhase(await call("product.confirm", { productId }), "completed", ["awaiting_confirmation"]);
    expect((await status(productId)).phase).toBe("completed");
  });

  it("product.pause while awaiting confirmation", async () => {
    const productId = await awaitingProduct();
    expectInvalidPhase(await call("product.pause", { productId }), "awaiting_confirmation", ["executing", "paused"]);
    expect((await status(productId)).phase).toBe("awaiting_confirmation");
  });

  it("product.checkpoint, product.rollback and product.replayTask while awaiting confirmation", async () => {
    const productId = await awaitingProduct();
    const before = await status(productId);
    const taskId = before.plan!.tasks[0]!.taskId;
    expectInvalidPhase(await call("product.checkpoint", { productId }), "awaiting_confirmation", SETTLED_OR_RUNNING);
    expectInvalidPhase(await call("product.rollback", { productId }), "awaiting_confirmation", SETTLED_OR_RUNNING);
    expectInvalidPhase(
      await call("product.rollback", { productId, checkpointId: "ckp_x" }),
      "awaiting_confirmation",
      SETTLED_OR_RUNNING,
    );
    expectInvalidPhase(
      await call("product.replayTask", { productId, taskId }),
      "awaiting_confirmation",
      SETTLED_OR_RUNNING,
    );
    const after = await status(productId);
    expect(after.phase).toBe("awaiting_confirmation");
    expect(after.checkpoints).toBe(0);
    expect(after.plan).toEqual(before.plan);
  });

  it("product.resume on a completed product", async () => {
    const productId = await completedProduct();
    expectInvalidPhase(await call("product.resume", { productId }), "completed", ["paused", "executing"]);
    expect((await status(productId)).phase).toBe("completed");
  });

  it("product.mutate on a completed product", async () => {
    const productId = await completedProduct();
    const before = await status(productId);
    const res = await call("product.mutate", {
      productId,
      mutations: [{ op: "updateTask", taskId: before.tasks[0]!.taskId, patch: { title: "Too late" } }],
    });
    expectInvalidPhase(res, "completed", ["awaiting_confirmation", "executing", "paused"]);
    const after = await status(productId);
    expect(after.phase).toBe("completed");
    expect(after.plan).toEqual(before.plan);
  });

  it("product.message and product.cancel on a cancelled product", async () => {
    const productId = await cancelledProduct();
    expectInvalidPhase(
      await call("product.message", { productId, content: "Add a task: write docs" }),
      "cancelled",
      ALL_NON_TERMINAL,
    );
    expectInvalidPhase(await call("product.cancel", { productId }), "cancelled", ALL_NON_TERMINAL);
    expectInvalidPhase(await call("product.pause", { productId }), "cancelled", ["executing", "paused"]);
    expect((await status(productId)).phase).toBe("cancelled");
  });
});

describe("allowed operations at the edges of the table", () => {
  it("product.pause is idempotent on a paused product", async () => {
    const productId = await pausedProduct();
    const before = await status(productId);
    expect(before.phase).toBe("paused");
    expect(result(await call("product.pause", { productId }))).toEqual({ productId, phase: "paused" });
    expect(result(await call("_product.pause", { productId }))).toEqual({ productId, phase: "paused" });
    const after = await status(productId);
    expect(after.phase).toBe("paused");
    expect(after.tasks).toEqual(before.tasks);
  });

  it("product.delete of an unknown product answers {deleted: false}", async () => {
    expect(result(await call("product.delete", { productId: "prd_never_existed" }))).toEqual({ deleted: false });
  });

  it("product.delete of a completed product answers {deleted: true}, then the product is not found", async () => {
    const productId = await completed();
    expect(result(await call("product.delete", { productId }))).toEqual({ deleted: true });
    const gone = await call("product.status", { productId });
    expect(gone).toEqual({
      jsonrpc: "2.0",
      id: nextId,
      error: {
        code: -32002,
        message: expect.stringMatching(/^[A-Z][^\n]*\.$/),
        data: { kind: "product", id: productId },
      },
    });
    expect(result(await call("product.delete", { productId }))).toEqual({ deleted: false });
    const list = result<{ products: { productId: string }[] }>(await call("product.list", {}));
    expect(list.products.map((p) => p.productId)).not.toContain(productId);
  });

  it("product.list filters by phase, persisted products included", async () => {
    const [awaiting, paused, done, cancelled] = await Promise.all([
      awaitingProduct(),
      pausedProduct(),
      completedProduct(),
      cancelledProduct(),
    ]);
    const byPhase = async (phase: string) => {
      const { products } = result<{ products: Msg[] }>(await call("product.list", { phase }));
      for (const p of products) {
        expect(Object.keys(p).sort()).toEqual(["name", "phase", "productId", "progress", "projectId", "updatedAt"]);
        expect(p.phase).toBe(phase);
      }
      return products.map((p) => p.productId);
    };
    expect(await byPhase("planning")).toEqual([SEEDED_PRODUCT]);
    expect(await byPhase("awaiting_confirmation")).toContain(awaiting);
    expect(await byPhase("paused")).toEqual([paused]);
    expect(await byPhase("completed")).toContain(done);
    expect(await byPhase("cancelled")).toEqual([cancelled]);
    expect(await byPhase("failed")).toEqual([]);
    const seeded = result<{ products: Msg[] }>(
      await call("product.list", { projectId: SEEDED_PROJECT, phase: "planning" }),
    );
    expect(seeded.products).toEqual([
      {
        productId: SEEDED_PRODUCT,
        projectId: SEEDED_PROJECT,
        name: "Plan a migration",
        phase: "planning",
        progress: { total: 0, completed: 0, running: 0, failed: 0, pending: 0 },
        updatedAt: expect.any(String),
      },
    ]);
    expect(
      result<{ products: Msg[] }>(await call("product.list", { projectId: SEEDED_PROJECT, phase: "paused" })).products,
    ).toEqual([]);
  });
});
