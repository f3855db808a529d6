/**
 * The pure parts behind the demo's lanes and the dashboard's graph (issue 15): `assignLanes` puts tasks that ran at
 * the same time in different lanes and reuses a lane once it is free; `layoutDag` (dagre) draws every task once,
 * places a dependency above its dependents, and routes one edge per dependency.
 */
import { describe, expect, it } from "vitest";
import { assignLanes, laneTimeline } from "../../src/operator/lanes.js";
import { layoutDag } from "../../src/ui/graph-layout.js";

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();

describe("assignLanes", () => {
  it("separates overlapping tasks and reuses a freed lane", () => {
    const tasks = [
      { taskId: "t1", startedAt: at(0), endedAt: at(4) },
      { taskId: "t2", startedAt: at(1), endedAt: at(2) },
      { taskId: "t3", startedAt: at(2), endedAt: at(6) },
      { taskId: "t4", startedAt: at(3), endedAt: at(5) },
      { taskId: "t5" },
    ];
    const a = assignLanes(tasks, Date.parse(at(10)));
    expect(Object.fromEntries(a.lanes)).toEqual({ t1: 1, t2: 2, t3: 2, t4: 3 });
    expect(a.count).toBe(3);
    const text = laneTimeline(tasks, Date.parse(at(10)), 30);
    expect(text.split("\n")[0]).toMatch(/^lane 1 \|\[t1=+\] +\|$/);
    expect(text.split("\n")[1]).toMatch(/^lane 2 \| +\[t2=*\]\[t3=+\]\|$/);
    expect(text).toContain("6.0 s");
  });

  it("counts a running task until now, and nothing when nothing ran", () => {
    expect(assignLanes([{ taskId: "t1" }], 0).count).toBe(0);
    expect(laneTimeline([{ taskId: "t1" }], 0)).toBe("");
    const a = assignLanes(
      [
        { taskId: "t1", startedAt: at(0) },
        { taskId: "t2", startedAt: at(5), endedAt: at(6) },
      ],
      Date.parse(at(8)),
    );
    expect(a.count).toBe(2);
  });
});

describe("layoutDag", () => {
  it("places each dependency above its dependents, one edge per dependency, inside the bounds", () => {
    const tasks = [
      { taskId: "t1", title: "a", dependsOn: [] },
      { taskId: "t2", title: "b", dependsOn: [] },
      { taskId: "t3", title: "c", dependsOn: ["t1", "t2"] },
      { taskId: "t4", title: "d", dependsOn: ["t3", "gone"] },
    ];
    const l = layoutDag(tasks);
    expect(l.nodes.map((n) => n.taskId)).toEqual(["t1", "t2", "t3", "t4"]);
    const y = Object.fromEntries(l.nodes.map((n) => [n.taskId, n.y]));
    expect(y.t1).toBe(y.t2);
    expect(y.t3).toBeGreaterThan(y.t1 as number);
    expect(y.t4).toBeGreaterThan(y.t3 as number);
    expect(l.edges.map((e) => `${e.from}->${e.to}`).sort()).toEqual(["t1->t3", "t2->t3", "t3->t4"]);
    for (const n of l.nodes) {
      expect(n.x).toBeGreaterThanOrEqual(0);
      expect(n.x + n.width).toBeLessThanOrEqual(l.width);
      expect(n.y + n.height).toBeLessThanOrEqual(l.height);
    }
    for (const e of l.edges) expect(e.points.length).toBeGreaterThanOrEqual(2);
  });
});
