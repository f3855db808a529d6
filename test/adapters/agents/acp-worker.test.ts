import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  AcpWorkerPool,
  choosePermission,
  formatTaskBrief,
  MAX_DEPENDENCY_OUTPUT_CHARS,
  MAX_TOTAL_DEPENDENCY_CHARS,
  parseBriefHeader,
} from "../../../src/adapters/agents/acp-worker.js";
import type { AcpWorkerPoolOptions } from "../../../src/adapters/agents/acp-worker.js";
import { fixtureRegistry, memoryLogger, recorder, taskRequest } from "../../fixtures/agents/pool-helpers.js";

const GRACE_MS = 300;
let cwd: string;
let pool: AcpWorkerPool | undefined;

beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), "acp-worker-"));
});
afterEach(async () => {
  await pool?.shutdown();
  pool = undefined;
  await rm(cwd, { recursive: true, force: true });
});

function makePool(options: Partial<AcpWorkerPoolOptions> = {}): AcpWorkerPool {
  pool = new AcpWorkerPool({ registry: fixtureRegistry(), logger: memoryLogger(), graceMs: GRACE_MS, ...options });
  return pool;
}

describe("formatTaskBrief", () => {
  it("starts with a recognisable header and carries the task in _meta", () => {
    const { text, meta } = formatTaskBrief(taskRequest("x", cwd, { attempt: 2 }));
    expect(text.split("\n")[0]).toBe("# Task t1: Document the API");
    expect(parseBriefHeader(text)).toEqual({ taskId: "t1", title: "Document the API" });
    expect(text).toContain("attempt 2; earlier attempts failed");
    expect(text).toContain("## Description\n\nWrite down how the public API is called.");
    expect(text).toContain("## Acceptance criteria\n\nEvery exported function is listed.");
    expect(text).toContain("### Output of dependency t0: Survey the code\n\nFound 3 exported functions: a, b, c.");
    expect(meta).toMatchObject({ taskId: "t1", title: "Document the API", productId: "prd_1", attempt: 2 });
  });

  it("cuts each dependency output at the per-dependency limit, and omits outputs past the total limit", () => {
    const big = "y".repeat(MAX_DEPENDENCY_OUTPUT_CHARS + 5_000);
    const many = Math.ceil(MAX_TOTAL_DEPENDENCY_CHARS / MAX_DEPENDENCY_OUTPUT_CHARS) + 1;
    const deps = Array.from({ length: many }, (_, i) => ({ taskId: `d${i}`, title: `Dep ${i}`, output: big }));
    const { text, meta } = formatTaskBrief(taskRequest("x", cwd, { dependencyOutputs: deps }));
    expect(text).toContain(`${"y".repeat(MAX_DEPENDENCY_OUTPUT_CHARS)}\n[… truncated: 5000 more characters]`);
    expect(text).toContain(`### Output of dependency d${many - 1}: Dep ${many - 1}\n\n[output omitted`);
    expect(text.length).toBeLessThan(MAX_TOTAL_DEPENDENCY_CHARS + 10_000);
    expect(meta.dependencies.every((d) => d.excerpt.length < 600)).toBe(true);
  });
});

describe("choosePermission", () => {
  const options = [
    { optionId: "ok", name: "Allow", kind: "allow_once" as const },
    { optionId: "nope", name: "Reject", kind: "reject_always" as const },
  ];
  it("denies with the first reject option by default and allows when the policy says so", () => {
    expect(choosePermission(options, "deny")).toEqual({ outcome: { outcome: "selected", optionId: "nope" } });
    expect(choosePermission(options, "allow")).toEqual({ outcome: { outcome: "selected", optionId: "ok" } });
    expect(choosePermission(options.slice(0, 1), "deny")).toEqual({ outcome: { outcome: "cancelled" } });
  });
});

describe("AcpWorkerPool outcomes", () => {
  it("runs a task on the built-in worker: completed, note on disk, text and activity streamed", async () => {
    const rec = recorder();
    const result = await makePool().runTask(taskRequest("builtin-worker", cwd), rec.events);
    expect(result.outcome).toBe("completed");
    expect(await readdir(join(cwd, "notes"))).toEqual(["t1-document-the-api.md"]);
    const note = await readFile(join(cwd, "notes", "t1-document-the-api.md"), "utf8");
    expect(note).toContain("# Document the API");
    expect(note).toContain("Write down how the public API is called.");
    expect(note).toContain("Found 3 exported functions: a, b, c.");
    expect(rec.activities).toEqual(["Write notes/t1-document-the-api.md"]);
    expect(rec.texts.length).toBeGreaterThanOrEqual(2);
    expect(result).toEqual({ outcome: "completed", output: rec.texts.join("") });
    expect(rec.texts.join("")).toContain("notes/t1-document-the-api.md");
    expect(pool?.runningCount).toBe(0);
  });

  it("fails with the agent's error when the prompt is answered with a JSON-RPC error", async () => {
    const result = await makePool().runTask(taskRequest("failing", cwd), recorder().events);
    expect(result.outcome).toBe("failed");
    const error = result.outcome === "failed" ? result.error : "";
    expect(error).toMatch(/^agent "failing" answered with error -32603: /);
    expect(error).toContain("stderr tail: failing-agent: the model backend is unavailable");
  });

  it("fails with a reason on a refusal", async () => {
    const result = await makePool().runTask(taskRequest("refusing", cwd), recorder().events);
    expect(result.outcome === "failed" && result.error).toMatch(/^agent refused the task \(stop reason: refusal\)/);
  });

  it("fails with the exit code and the stderr tail when the agent crashes mid-turn", async () => {
    const rec = recorder();
    const result = await makePool().runTask(taskRequest("crashing", cwd), rec.events);
    expect(rec.texts).toEqual(["Starting work…\n"]);
    const error = result.outcome === "failed" ? result.error : "";
    expect(error).toMatch(/^agent "crashing" crashed \(exit code 3\) before the turn ended — stderr tail: /);
    expect(error).toContain("crashing-agent: FATAL segfault in tool runner");
    expect((error.split("stderr tail: ")[1] ?? "").length).toBeLessThanOrEqual(2_048);
  });

  it("fails, never throws, when the agent cannot be started or is not in the registry", async () => {
    const p = makePool();
    const missing = await p.runTask(taskRequest("missing", cwd), recorder().events);
    // A missing command is a configuration error: no retry helps, the remediation names the agent and the fix.
    expect(missing).toMatchObject({
      outcome: "failed",
      kind: "configuration",
      agentId: "missing",
      prompted: false,
      error: expect.stringMatching(/^Could not start agent "missing": the command ".*no-such-agent" was not found\.$/),
      remediation: expect.stringContaining('fix "command" of agent "missing"'),
    });
    const unknown = await p.runTask(taskRequest("nobody", cwd), recorder().events);
    // An agent the registry lacks (e.g. a server started without the product's --config) is a configuration error too.
    expect(unknown).toEqual({
      outcome: "failed",
      kind: "configuration",
      agentId: "nobody",
      prompted: false,
      error: expect.stringMatching(
        /^Unknown agent "nobody": it is not in the agent registry \(configured agents: .*\)\.$/,
      ),
      remediation: expect.stringContaining('add agent "nobody"'),
    });
  });

  it("reports tool calls and the response's usage, and a refusal by the default policy fails the task", async () => {
    const rec = recorder();
    const refusals: unknown[] = [];
    const result = await makePool().runTask(taskRequest("reporting", cwd), {
      ...rec.events,
      onPermissionRefused: (r) => refusals.push(r),
    });
    expect(rec.activities).toEqual([
      "Run tests",
      "search",
      'Edit config.json (edit): refused by the permission policy "deny"',
    ]);
    // usage_update (a context size) is not consumption: only the prompt response's totals count.
    expect(rec.usage).toEqual([{ inputTokens: 1_500, outputTokens: 300 }]);
    expect(refusals).toEqual([{ kind: "edit", title: "Edit config.json", by: "policy" }]);
    expect(result).toMatchObject({ outcome: "failed", kind: "permission", prompted: true });
    expect(result.outcome === "failed" && result.error).toMatch(
      /^The permission policy "deny" refused edit "Edit config.json" to agent "reporting"/,
    );
  });

  it("allows permission requests when built with permissions: allow", async () => {
    const result = await makePool({ permissions: "allow" }).runTask(taskRequest("reporting", cwd), recorder().events);
    expect(result).toEqual({ outcome: "completed", output: "permission: yes\nAll tests pass.\n" });
  });

  it("returns waiting with the agent's question", async () => {
    const rec = recorder();
    const result = await makePool().runTask(taskRequest("asking", cwd), rec.events);
    expect(result).toEqual({ outcome: "waiting", question: "Which database should the service use?" });
    expect(rec.texts).toEqual(["Before I start I need to know one thing.\n"]);
  });

  it("forwards agent stderr to the logger at debug level, tagged with agent and task", async () => {
    const logger = memoryLogger();
    pool = new AcpWorkerPool({ registry: fixtureRegistry(), logger, graceMs: GRACE_MS });
    await pool.runTask(taskRequest("failing", cwd), recorder().events);
    const lines = logger.entries.filter((e) => e.msg === "agent stderr");
    expect(lines.map((e) => e.level)).toEqual(lines.map(() => "debug"));
    expect(lines.map((e) => (e.obj as { stderr: string }).stderr)).toContain(
      "failing-agent: the model backend is unavailable",
    );
    expect(lines[0]?.obj).toMatchObject({ agentId: "failing", taskId: "t1", productId: "prd_1" });
  });

  it("answers cancelled without starting anything when the signal is already aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    const request = taskRequest("builtin-worker", cwd, { signal: controller.signal });
    expect(await makePool().runTask(request, recorder().events)).toEqual({ outcome: "cancelled" });
    expect(existsSync(join(cwd, "notes"))).toBe(false);
  });
});
