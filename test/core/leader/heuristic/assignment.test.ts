import { describe, expect, it } from "vitest";
import { HeuristicLeader } from "../../../../src/core/leader/heuristic-leader.js";
import type { AgentInfo, PlanRequest } from "../../../../src/core/ports.js";
import { agentInfo } from "../../../support/agent-info.js";

const leader = new HeuristicLeader();
const TWELVE = Array.from({ length: 12 }, (_, i) => `- Write note number ${i + 1}`).join("\n");

async function plan(goal: string, roster: AgentInfo[], maxParallelTasks?: number) {
  const request: PlanRequest = {
    productId: "prd_1",
    goal,
    cwd: "/work",
    roster,
    ...(maxParallelTasks !== undefined ? { maxParallelTasks } : {}),
    dialogue: [{ role: "user", text: goal, at: "2026-01-01T00:00:00Z" }],
    signal: new AbortController().signal,
    onText: () => undefined,
  };
  const result = await leader.plan(request);
  if (result.kind !== "plan") throw new Error("expected a plan");
  const agentOf = new Map(result.plan.instances.map((i) => [i.instanceId, i.agentId]));
  return { ...result, agents: result.plan.tasks.map((t) => agentOf.get(t.instanceId)) };
}

describe("assignment to the configured team (issue 28)", () => {
  it("2 agents, maxParallelTasks 6, 12 independent tasks: 6 instances, 3 of each agent, 2 tasks each", async () => {
    const { plan: p, agents } = await plan(TWELVE, [agentInfo("alpha"), agentInfo("beta")], 6);
    expect(p.instances).toHaveLength(6);
    expect(p.instances.filter((i) => i.agentId === "alpha")).toHaveLength(3);
    for (const i of p.instances) expect(p.tasks.filter((t) => t.instanceId === i.instanceId)).toHaveLength(2);
    expect(agents.filter((a) => a === "alpha")).toHaveLength(6);
  });

  it("seats go past 3 up to maxParallelTasks, and no further", async () => {
    expect((await plan(TWELVE, [agentInfo("solo")], 12)).plan.instances).toHaveLength(12);
    expect((await plan(TWELVE, [agentInfo("solo")], 4)).plan.instances).toHaveLength(4);
    expect((await plan(TWELVE, [agentInfo("solo")])).plan.instances).toHaveLength(12);
  });

  it("an agent's maxInstances bounds its seats; the others take the rest", async () => {
    const { plan: p } = await plan(TWELVE, [agentInfo("alpha", { maxInstances: 1 }), agentInfo("beta")], 6);
    expect(p.instances.map((i) => i.agentId).sort()).toEqual(["alpha", "beta", "beta", "beta", "beta", "beta"]);
  });

  it("best strengths match, else the default agent, else round-robin — and the message says which", async () => {
    const roster = [agentInfo("coder", { strengths: ["tests"] }), agentInfo("writer", { default: true })];
    const { agents, message } = await plan("- Write the tests\n- Polish the landing page", roster, 4);
    expect(agents).toEqual(["coder", "writer"]);
    expect(message).toContain('[its strengths match "test"]');
    expect(message).toContain("[no agent's strengths match; the default agent]");
    const rr = await plan("- Polish the landing page\n- Polish the footer", [agentInfo("a"), agentInfo("b")], 4);
    expect(rr.agents).toEqual(["a", "b"]);
    expect(rr.message).toContain("[no agent's strengths match; round-robin]");
  });
});
