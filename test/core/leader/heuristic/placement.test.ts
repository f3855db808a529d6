/**
 * Where a task added to a live plan goes (issue 28): the least loaded instance able to take it, not the next one in
 * turn. Through `HeuristicLeader.message` (a user's "add task: …") and `consultOnFailure` (a fix-up), and
 * `placeAddedTask` directly for the rules of fit.
 */
import { describe, expect, it } from "vitest";
import type { Instance, Mutation, Plan, Task, TaskState, TaskStatus } from "../../../../protocol/common.js";
import { applyMutations } from "../../../../src/core/dag/mutations.js";
import { HeuristicLeader } from "../../../../src/core/leader/heuristic-leader.js";
import { placeAddedTask } from "../../../../src/core/leader/heuristic/placement.js";
import type { AgentInfo } from "../../../../src/core/ports.js";
import { agentInfo } from "../../../support/agent-info.js";

const leader = new HeuristicLeader();
const signal = new AbortController().signal;
const seat = (instanceId: string, agentId: string, role = "worker"): Instance => ({ instanceId, agentId, role });

/** One task of a live plan: [taskId, instanceId, status, dependsOn?]. */
type Row = [string, string, TaskStatus, string[]?];

/** A live plan of `instances` and the tasks of `rows`. */
function live(instances: Instance[], rows: Row[]): { plan: Plan; tasks: TaskState[] } {
  const tasks: Task[] = rows.map(([taskId, instanceId, , dependsOn]) => ({
    taskId,
    title: `Task ${taskId}`,
    description: `Task ${taskId}`,
    instanceId,
    dependsOn: dependsOn ?? [],
  }));
  const status = new Map(rows.map(([taskId, , s]) => [taskId, s]));
  return {
    plan: { productId: "prd_1", version: 2, name: "n", summary: "s", instances, tasks },
    tasks: tasks.map((t) => ({ ...t, status: status.get(t.taskId) ?? "pending", attempts: 1 })),
  };
}

async function added(content: string, state: { plan: Plan; tasks: TaskState[] }, roster: AgentInfo[]) {
  const result = await leader.message({
    productId: "prd_1",
    goal: "Notes",
    content,
    plan: state.plan,
    tasks: state.tasks,
    roster,
    signal,
    onText: () => undefined,
  });
  const mutations: Mutation[] = result.mutations ?? [];
  expect(applyMutations(state.plan, state.tasks, mutations).ok).toBe(true);
  const instances = mutations.flatMap((m) => (m.op === "addTask" ? [m.task.instanceId] : []));
  return { instances, response: result.response };
}

describe("a task added by a message goes to the least loaded instance able to take it", () => {
  it("an idle instance, not the busy one next in turn (the issue's case: 2 tasks, 2 instances, i1 running)", async () => {
    const state = live(
      [seat("i1", "alpha"), seat("i2", "alpha")],
      [
        ["t1", "i1", "running"],
        ["t2", "i2", "completed"],
      ],
    );
    const { instances, response } = await added("add task: write the changelog", state, [agentInfo("alpha")]);
    // Before the fix: i1 (2 tasks % 2 instances), behind the running t1.
    expect(instances).toEqual(["i2"]);
    expect(response).toContain('Added t3 "Write the changelog" on i2 (alpha, idle).');
  });

  it("two tasks added at once take two idle instances; the second sees the first as queued", async () => {
    const state = live(
      [seat("i1", "alpha"), seat("i2", "alpha"), seat("i3", "alpha")],
      [
        ["t1", "i1", "running"],
        ["t2", "i2", "completed"],
        ["t3", "i3", "completed"],
      ],
    );
    const { instances } = await added("add task: write note A\nadd task: write note B", state, [agentInfo("alpha")]);
    expect(instances).toEqual(["i2", "i3"]);
  });

  it("all busy: the fewest ready tasks, then the fewest pending, then plan order (the same answer every time)", async () => {
    const instances = [seat("i1", "alpha"), seat("i2", "alpha"), seat("i3", "alpha")];
    const placed = (rows: Row[]) => {
      const state = live(instances, rows);
      return placeAddedTask(state.plan, state.tasks, [agentInfo("alpha")], "notes").instance.instanceId;
    };
    const running: Row[] = [
      ["t1", "i1", "running"],
      ["t2", "i2", "running"],
      ["t3", "i3", "running"],
    ];
    // i1 has a ready task queued; i2 one pending task that is not ready, i3 two.
    const queued: Row[] = [
      ["t4", "i1", "pending"],
      ["t5", "i2", "pending", ["t2"]],
      ["t6", "i3", "pending", ["t3"]],
      ["t7", "i3", "pending", ["t3"]],
    ];
    expect(placed([...running, ...queued])).toBe("i2");
    for (let i = 0; i < 3; i++) expect(placed(running)).toBe("i1");
    // Nothing runs (a paused product): i2 has nothing queued, i3 a task that is not ready, i1 a ready one.
    expect(
      placed([
        ["t1", "i1", "pending"],
        ["t2", "i2", "completed"],
        ["t3", "i3", "pending", ["t1"]],
      ]),
    ).toBe("i2");
  });

  it("fit before load: an agent whose strengths match, then the default agent, never the leader's seat or an agent off the team", async () => {
    const roster = [
      agentInfo("writer", { strengths: ["docs"] }),
      agentInfo("tester", { strengths: ["tests"], default: true }),
    ];
    const instances = [seat("i1", "writer"), seat("i2", "tester"), seat("i3", "writer"), seat("i4", "tester")];
    const state = live(instances, [
      ["t1", "i1", "running"],
      ["t2", "i2", "running"],
      ["t3", "i3", "running"],
    ]);
    // Docs fit the writer: its busy i1 and i3 only (i4 is idle but its agent does not fit); i1 has nothing queued.
    const docs = placeAddedTask(state.plan, state.tasks, roster, "Write the docs");
    expect(docs.instance.instanceId).toBe("i1");
    expect(docs.reason).toBe('on i1 (writer, its strengths match "doc", busy, fewest queued)');
    // No strengths match: the default agent (tester), its idle i4.
    const other = placeAddedTask(state.plan, state.tasks, roster, "Polish the logo");
    expect(other.instance.instanceId).toBe("i4");
    expect(other.reason).toBe("on i4 (tester, the default agent, idle)");
    // The leader's own seat and an agent no longer on the team take nothing while a team worker can.
    const mixed = live(
      [seat("leader", "leader", "leader"), seat("i1", "gone"), seat("i2", "writer")],
      [["t1", "i2", "running"]],
    );
    expect(
      placeAddedTask(mixed.plan, mixed.tasks, [roster[0] as AgentInfo], "Polish the logo").instance.instanceId,
    ).toBe("i2");
  });

  it("names the instance and its agent when it is the only one able to take the task", () => {
    // A new user's trial: with one worker instance the answer said nowhere where the added task runs (docs/AGENTS.md).
    const one = live([seat("i1", "alpha")], [["t1", "i1", "running"]]);
    expect(placeAddedTask(one.plan, one.tasks, [agentInfo("alpha")], "Write the changelog").reason).toBe(
      "on i1 (alpha, the only instance able to take it)",
    );
  });
});

describe("a fix-up goes to the least loaded instance of another agent", () => {
  it("the idle instance of the other agent, not its first one while that one is busy", async () => {
    const roster = [agentInfo("claude"), agentInfo("gemini")];
    const state = live(
      [seat("i1", "claude"), seat("i2", "gemini"), seat("i3", "gemini")],
      [
        ["t1", "i1", "failed"],
        ["t2", "i2", "running"],
        ["t3", "i3", "completed"],
      ],
    );
    const failedTask = { ...(state.tasks[0] as TaskState), attempts: 2, error: "boom" };
    const decision = await leader.consultOnFailure({
      productId: "prd_1",
      goal: "g",
      failedTask,
      plan: state.plan,
      tasks: state.tasks,
      roster,
      signal,
    });
    if (decision.kind !== "mutate") throw new Error(decision.message);
    // Before: i2, the first instance of gemini, busy with t2.
    expect(decision.mutations[0]).toMatchObject({ op: "addTask", task: { taskId: "t1-fix", instanceId: "i3" } });
    expect(decision.message).toContain("on i3 (agent gemini, not claude)");
  });
});
