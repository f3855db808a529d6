/**
 * The built server on PostgreSQL over real stdio (issue 14): `--state postgres://…` runs a product end to end with
 * real worker subprocesses, and a second server on the same database reads it back. Runs only with
 * ACP_ORCHESTRATOR_TEST_PG (see test/support/postgres.ts).
 */
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, expect, it } from "vitest";
import type { Instance, Task, TaskState } from "../../protocol/common.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { describePostgres, dropSchema, freshSchema, urlWithSchema } from "../support/postgres.js";
import { startServer, tempDir } from "../support/server-process.js";

const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const AGENT = fileURLToPath(new URL("../fixtures/agents/logging-agent.ts", import.meta.url));
const WORKERS: Instance[] = [{ instanceId: "w1", agentId: "logger", role: "worker" }];
const chain = (...ids: string[]): Task[] =>
  ids.map((taskId, i) => ({
    taskId,
    title: `Step ${taskId}`,
    description: `Do ${taskId}.`,
    instanceId: "w1",
    dependsOn: i === 0 ? [] : [ids[i - 1] ?? ""],
  }));

/** A workspace whose registry has the logging agent, logging to `logPath`. */
function workspace(logPath: string): string {
  const dir = tempDir("acp-orch-pg-");
  const agents = [
    {
      agentId: "logger",
      command: process.execPath,
      args: ["--import", TSX, AGENT],
      env: {
        LOGGING_AGENT_LOG: logPath,
        LOGGING_AGENT_SEED: "pg",
        LOGGING_AGENT_MIN_MS: "20",
        LOGGING_AGENT_MAX_MS: "60",
      },
    },
  ];
  writeFileSync(join(dir, "acp-orchestrator.json"), JSON.stringify({ agents }));
  return dir;
}

function starts(logPath: string): string[] {
  return readExecutionLog(logPath)
    .filter((l) => l.event === "start")
    .map((l) => l.taskId);
}

const schema = freshSchema();
afterAll(() => (process.env.ACP_ORCHESTRATOR_TEST_PG ? dropSchema(schema) : undefined));

describePostgres("the server on PostgreSQL (--state postgres://)", () => {
  it("runs a product to completion and a second server reads the same state", async () => {
    const logPath = join(tempDir(), "executions.jsonl");
    writeFileSync(logPath, "");
    const cwd = workspace(logPath);
    const url = urlWithSchema(schema);
    const server = await startServer({ statePath: url, cwd, args: ["--log-level", "warn"] });
    const { productId } = await server.request<{ productId: string }>("product.plan", { goal: "On Postgres", cwd });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    const done = server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 60_000);
    await server.request("product.confirm", { productId, instances: WORKERS, tasks: chain("a", "b", "c") });
    expect((await done).params.phase).toBe("completed");
    expect(await server.close()).toBe(0);

    const reader = await startServer({
      statePath: url,
      cwd,
      env: { ACP_ORCHESTRATOR_STATE: "" },
      args: ["--log-level", "warn"],
    });
    const status = await reader.request<{ phase: string; tasks: TaskState[]; dropped: number }>("product.status", {
      productId,
    });
    const listed = await reader.request<{ products: { productId: string }[] }>("product.list", {});
    expect({
      phase: status.phase,
      tasks: status.tasks.map((t) => [t.taskId, t.status]),
      dropped: status.dropped,
      listed: listed.products.some((p) => p.productId === productId),
      starts: starts(logPath),
    }).toEqual({
      phase: "completed",
      tasks: [
        ["a", "completed"],
        ["b", "completed"],
        ["c", "completed"],
      ],
      dropped: 0,
      listed: true,
      starts: ["a", "b", "c"],
    });
    expect(await reader.close()).toBe(0);
  }, 90_000);

  it("refuses to start on an unreachable database with one plain sentence and exit code 2", async () => {
    const server = await startServer({
      statePath: "postgres://acp:pw@127.0.0.1:1/nowhere",
      noInitialize: true,
      args: ["--log-level", "silent"],
    });
    const code = await server.close();
    expect({ code, message: server.stderr().trim().split("\n").at(-1) }).toMatchObject({
      code: 2,
      message: expect.stringMatching(
        /^acp-orchestrator: Cannot open the PostgreSQL state store postgres:\/\/acp:\*\*\*@/,
      ),
    });
  }, 90_000);
});
