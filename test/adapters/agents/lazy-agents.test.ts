/**
 * The agent adapters loaded on first use (issue 16, cold start): the stand-ins hand every call to the real adapter
 * unchanged, and a server that never runs an agent never builds one.
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  LazyAcpWorkerPool,
  lazyHeuristicLeader,
  lazyLeaderResolver,
} from "../../../src/adapters/agents/lazy-agents.js";
import { AgentRegistry, parseAgentConfig } from "../../../src/adapters/agents/registry.js";
import { HeuristicLeader } from "../../../src/core/leader/heuristic-leader.js";
import type { PlanRequest, WorkerRequest } from "../../../src/core/ports.js";
import { memoryLogger } from "../../fixtures/agents/pool-helpers.js";

const registry = new AgentRegistry(
  parseAgentConfig({ agents: [{ agentId: "lead", command: "lead-acp" }] }, join(tmpdir(), "acp-orchestrator.json")),
);

function planRequest(): PlanRequest {
  return {
    productId: "prd_1",
    goal: "Document the API.",
    cwd: tmpdir(),
    roster: [],
    dialogue: [{ role: "user", text: "Document the API.", at: "2026-01-01T00:00:00.000Z" }],
    signal: new AbortController().signal,
    onText: () => {},
  };
}

describe("lazyHeuristicLeader", () => {
  it("answers as the heuristic leader itself, and rejects an aborted request as it does (issue 34)", async () => {
    const lazy = lazyHeuristicLeader();
    const chunks: string[] = [];
    const real: string[] = [];
    const answer = await lazy.plan({ ...planRequest(), onText: (t) => chunks.push(t) });
    expect(answer).toEqual(await new HeuristicLeader().plan({ ...planRequest(), onText: (t) => real.push(t) }));
    expect(answer.kind).toBe("plan");
    expect(chunks).toEqual(real);
    const aborted = new AbortController();
    aborted.abort(new Error("stopped"));
    await expect(lazy.plan({ ...planRequest(), signal: aborted.signal })).rejects.toThrow("stopped");
  });
});

describe("lazyLeaderResolver", () => {
  it("returns the fallback itself when no leader agent is chosen or configured", () => {
    const fallback = new HeuristicLeader();
    expect(lazyLeaderResolver({ registry, logger: memoryLogger(), fallback }).resolve(undefined)).toBe(fallback);
  });

  it("answers a chosen leader's turn with the real resolver's answer (an unknown agent is refused as before)", async () => {
    const selection = lazyLeaderResolver({ registry, logger: memoryLogger(), fallback: new HeuristicLeader() });
    await expect(selection.resolve("ghost").plan(planRequest())).rejects.toThrow(
      'unknown leader agent "ghost": it is not in the agent registry (configured agents: lead)',
    );
    await selection.close();
  });

  it("refuses turns after close, even when no leader was loaded before it", async () => {
    const selection = lazyLeaderResolver({ registry, logger: memoryLogger(), fallback: new HeuristicLeader() });
    const lead = selection.resolve("lead");
    await selection.close();
    await expect(lead.plan(planRequest())).rejects.toThrow(/shutting down/);
  });
});

describe("LazyAcpWorkerPool", () => {
  const request: WorkerRequest = {
    productId: "prd_1",
    task: { taskId: "t1", title: "T", description: "D", instanceId: "i1", dependsOn: [] },
    instance: { instanceId: "i1", agentId: "ghost", role: "worker" },
    cwd: tmpdir(),
    attempt: 1,
    dependencyOutputs: [],
    signal: new AbortController().signal,
  };
  const events = { onText: () => {}, onActivity: () => {}, onUsage: () => {} };

  it("runs a task through the real pool on first use", async () => {
    const pool = new LazyAcpWorkerPool({ registry, logger: memoryLogger() });
    const result = await pool.runTask(request, events);
    expect(result).toMatchObject({ outcome: "failed", error: expect.stringContaining("ghost") });
    await pool.shutdown();
  });

  it("has nothing to stop before a task ran, and refuses tasks after shutdown as the real pool does", async () => {
    const pool = new LazyAcpWorkerPool({ registry, logger: memoryLogger() });
    await pool.shutdown();
    expect(await pool.runTask(request, events)).toEqual({ outcome: "cancelled" });
  });
});
