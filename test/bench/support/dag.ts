/**
 * Benchmark support: deterministic random DAGs of a given size and width, as the draft plans a leader would return.
 *
 * Owns the shape of the scheduler-scale workload (issue 7, figure 4). Pure: no I/O, no clock, no Math.random (a
 * seeded generator, so every run of the benchmark schedules the same graph). Must never be imported by src/.
 */
import type { Instance, Task } from "../../../protocol/common.js";
import type { DraftPlan } from "../../../src/core/ports.js";
import { seededRandom } from "../../support/seeded-random.js";

export interface DagOptions {
  /** Number of tasks (≥ 1). */
  tasks: number;
  /** Tasks per level, i.e. the DAG's width (default 100). */
  width?: number;
  /** Most dependencies per task on the previous level (default 3; each task has 1..maxDeps). */
  maxDeps?: number;
  seed?: number;
}

/**
 * A random layered DAG: task `t<i>` sits on level `floor(i / width)`; every task off the first level depends on 1 to
 * `maxDeps` distinct random tasks of the level before, so the graph is `width` wide and `tasks / width` deep. Task
 * `i` is assigned to instance `w<i mod width>`, so a whole level can run at once when `maxParallelTasks ≥ width`.
 * Titles and descriptions are short, as a leader's would be. Returns a draft plan (no productId/version).
 */
export function randomDag(options: DagOptions): DraftPlan {
  const n = options.tasks;
  const width = options.width ?? 100;
  const maxDeps = options.maxDeps ?? 3;
  const random = seededRandom(options.seed ?? 7);
  const tasks: Task[] = [];
  for (let i = 0; i < n; i += 1) {
    const level = Math.floor(i / width);
    const dependsOn: string[] = [];
    if (level > 0) {
      const from = (level - 1) * width;
      const count = 1 + Math.floor(random() * maxDeps);
      const picked = new Set<number>();
      while (picked.size < Math.min(count, width)) picked.add(from + Math.floor(random() * width));
      for (const j of picked) dependsOn.push(`t${j}`);
    }
    tasks.push({
      taskId: `t${i}`,
      title: `Task ${i}`,
      description: `Benchmark task ${i} on level ${level}.`,
      instanceId: `w${i % width}`,
      dependsOn,
    });
  }
  const instances: Instance[] = [];
  for (let w = 0; w < Math.min(width, n); w += 1)
    instances.push({ instanceId: `w${w}`, agentId: "bench", role: "worker" });
  return {
    name: `Random DAG of ${n} tasks`,
    summary: `Width ${width}, ${Math.ceil(n / width)} levels.`,
    instances,
    tasks,
  };
}
