/**
 * Host-owned run state over real stdio (PROTOCOL.md section 7; issue 4, item 1): the built server as a subprocess,
 * its client a test host (official ACP SDK client backed by a MemoryAuthority) that declares `runStateAuthority: true`
 * in `initialize`. Every record — products, events, sessions — must land in the host's store and none in the server's
 * own SQLite file; a host that fails or never answers a write during execution pauses the product with a recovery
 * cause and a `product.persistenceError` (DESIGN.md guarantee 2).
 */
import { describe, expect, it } from "vitest";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import { isJsonRpcLine, startRawServer, tempDir } from "../support/server-process.js";
import { TestHost, startHostedServer, type HostCall, type HostedServer } from "../support/test-host.js";
import { recordedTasks } from "../support/task-events.js";

interface Status {
  productId: string;
  projectId: string;
  phase: string;
  tasks: { taskId: string; status: string }[];
  progress: { total: number; completed: number };
  recovery?: { cause: string; resumable: boolean; remediation: string };
}

const GOAL = "- Describe the architecture\n- Then document the public API";
/** Where the server keeps cross-project indexes and sessions (records.ts INDEX_PROJECT, acp-session.ts). */
const INDEX_PROJECT = "_";

/** The first append of a task going `running`: a write during execution, before its worker is called. */
const taskStartAppend = (call: HostCall): boolean =>
  call.op === "appendEvents" &&
  (call.params.events as unknown[]).some((e) => recordedTasks(e).some((t) => t.status === "running"));

/** Plans a product and waits for its plan; `n` prefixes notification names when the host asked for `_`. */
async function planned(server: HostedServer, workspace: string, n = ""): Promise<string> {
  const { productId } = await server.request<{ productId: string }>(`${n}product.plan`, { goal: GOAL, cwd: workspace });
  await server.waitFor((x) => x.method === `${n}product.planReady` && x.params.productId === productId);
  return productId;
}

/** What the server's own SQLite file holds: projects with records, and the product's event count. */
async function sqliteContents(statePath: string, projectId: string, productId: string) {
  const sqlite = SqliteAuthority.open(statePath);
  try {
    return {
      projects: await sqlite.listProjects(),
      events: (await sqlite.readEvents(projectId, `product/${productId}`, 0)).length,
      sessions: (await sqlite.list(INDEX_PROJECT, "session")).length,
    };
  } finally {
    await sqlite.close();
  }
}

describe("host run-state authority over stdio", () => {
  it("persists a whole product lifecycle and its session in the host, nothing in the server's SQLite", async () => {
    const host = new TestHost();
    const workspace = tempDir("acp-orch-ws-");
    const server = await startHostedServer(host, { cwd: workspace, prefix: "_" });

    const productId = await planned(server, workspace, "_");
    const completed = server.waitFor(
      (x) => x.method === "_product.completed" && x.params.productId === productId,
      30_000,
    );
    expect(await server.request("_product.confirm", { productId })).toEqual({
      productId,
      ok: true,
      phase: "executing",
    });
    expect((await completed).params.phase).toBe("completed");
    const status = await server.request<Status>("_product.status", { productId });
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", {
      cwd: workspace,
      mcpServers: [],
    });
    expect(await server.close()).toBe(0);

    expect(status.phase).toBe("completed");
    expect(status.tasks.map((t) => t.status)).toEqual(status.tasks.map(() => "completed"));
    // Every request used the spelling the host asked for.
    expect(host.calls.every((c) => c.method.startsWith("_runState/"))).toBe(true);
    expect(server.stdoutLines.filter((l) => l.trim() !== "").every(isJsonRpcLine)).toBe(true);

    // The host holds the index, the header, the event stream and the session.
    const index = await host.store.get(INDEX_PROJECT, "product-index", productId);
    expect(index?.value).toEqual({ v: 1, projectId: status.projectId });
    const header = await host.store.get(status.projectId, "product", productId);
    expect(header?.value).toMatchObject({ productId, phase: "completed" });
    const events = (await host.store.readEvents(status.projectId, `product/${productId}`, 0)).map(
      (e) => e.event as { type: string; task?: { taskId: string; status: string } },
    );
    expect(events.some((e) => e.type === "confirmed")).toBe(true);
    const completedTasks = events
      .filter((e) => e.type === "task" && e.task?.status === "completed")
      .map((e) => e.task?.taskId);
    expect(new Set(completedTasks)).toEqual(new Set(status.tasks.map((t) => t.taskId)));
    expect(await host.store.get(INDEX_PROJECT, "session", sessionId)).toMatchObject({ value: { sessionId } });

    // The server's own store stayed empty.
    expect(await sqliteContents(server.statePath, status.projectId, productId)).toEqual({
      projects: [],
      events: 0,
      sessions: 0,
    });

    // A new server process whose host has that store sees the product (the host owns the state).
    const again = await startHostedServer(new TestHost({ store: host.store }), { cwd: workspace });
    const list = await again.request<{ products: { productId: string; phase: string }[] }>("product.list", {});
    const reloaded = await again.request<Status>("product.status", { productId });
    expect(await again.close()).toBe(0);
    expect(list.products).toEqual([expect.objectContaining({ productId, phase: "completed" })]);
    expect(reloaded.progress).toEqual(
      expect.objectContaining({ total: status.tasks.length, completed: status.tasks.length }),
    );
  }, 90_000);

  it("pauses the product with a recovery cause and sends product.persistenceError when the host fails a write", async () => {
    const host = new TestHost();
    const workspace = tempDir("acp-orch-ws-");
    const server = await startHostedServer(host, { cwd: workspace });
    const productId = await planned(server, workspace);

    host.failNext(taskStartAppend, { code: -32603, message: "The host's disk is full" });
    const failure = server.waitFor((x) => x.method === "product.persistenceError" && x.params.productId === productId);
    await server.request("product.confirm", { productId });
    const notification = await failure;
    const status = await server.request<Status>("product.status", { productId });

    expect(notification.params).toEqual({
      productId,
      projectId: status.projectId,
      error: "The host failed runState/appendEvents (error -32603): The host's disk is full.",
    });
    expect(status.phase).toBe("paused");
    expect(status.recovery).toEqual(
      expect.objectContaining({ resumable: true, cause: expect.stringContaining("The host's disk is full") }),
    );
    expect(host.pendingFaults).toBe(0);

    // Once the host is healthy again, resume drives the product to the end.
    const completed = server.waitFor(
      (x) => x.method === "product.completed" && x.params.productId === productId,
      30_000,
    );
    expect(await server.request("product.resume", { productId })).toEqual({ productId, phase: "executing" });
    expect((await completed).params.phase).toBe("completed");
    expect(await server.close()).toBe(0);
    expect(await sqliteContents(server.statePath, status.projectId, productId)).toEqual({
      projects: [],
      events: 0,
      sessions: 0,
    });
  }, 90_000);

  it("treats a host that never answers as a persistence failure after --host-timeout-ms", async () => {
    const host = new TestHost();
    const workspace = tempDir("acp-orch-ws-");
    const server = await startHostedServer(host, { cwd: workspace, args: ["--host-timeout-ms", "300"] });
    const productId = await planned(server, workspace);

    host.hangNext(taskStartAppend);
    const failure = server.waitFor((x) => x.method === "product.persistenceError" && x.params.productId === productId);
    await server.request("product.confirm", { productId });
    const notification = await failure;
    const status = await server.request<Status>("product.status", { productId });
    expect(await server.close()).toBe(0);

    expect(notification.params.error).toBe("The host did not answer runState/appendEvents within 300 ms.");
    expect(status.phase).toBe("paused");
    expect(status.recovery).toEqual(
      expect.objectContaining({
        resumable: true,
        cause: expect.stringContaining("did not answer runState/appendEvents"),
      }),
    );
  }, 90_000);

  it("refuses to start with a --host-timeout-ms that is not a positive integer", async () => {
    const raw = startRawServer({ args: ["--host-timeout-ms", "soon"] });
    expect(await raw.close()).toBe(2);
    expect(raw.stderr()).toContain(
      'The value "soon" from --host-timeout-ms must be an integer of at least 1 milliseconds.',
    );
  });
});
