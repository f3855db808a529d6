/**
 * What a run depends on outside its stream: the input each task attempt is given (guarantee 7) and the fingerprint of
 * the run's inputs (plan and leader prompt version, workspace git HEAD, agent definitions) for drift detection. Owns
 * the git HEAD probe in flight while driving; reads the workspace only through the `WorkspaceProbe` port.
 *
 * This file must never import I/O.
 */
import type { Plan, TaskState } from "../../../protocol/common.js";
import { downstreamOf } from "../dag/graph.js";
import { instanceOf, taskOf, type NewEvent } from "./decide.js";
import {
  agentHashes,
  agentsHash,
  compareFingerprints,
  planHash,
  taskInputHash,
  type Drift,
  type TaskInput,
} from "./fingerprint.js";
import type { ProductParts } from "./parts.js";
import { MAX_RECORDED_AGENTS, type Fingerprint } from "./records.js";
import { inputHashOf } from "./state.js";

export class RunInputs {
  /** A git HEAD probe in flight while driving (the recorded fingerprint follows the workspace). */
  #headProbe: Promise<void> | null = null;

  constructor(private readonly p: ProductParts) {}

  /** True while a HEAD probe is in flight. */
  get probing(): boolean {
    return this.#headProbe !== null;
  }

  /** The input a task attempt is (or was) given: definition, assignee as planned, dependency outputs now. */
  inputOf(task: TaskState): TaskInput {
    const { model, ctx } = this.p;
    const plan = model.state.plan;
    const instance = plan && instanceOf(plan, task.instanceId);
    return {
      title: task.title,
      description: task.description,
      acceptance: task.acceptance,
      instanceId: task.instanceId,
      agentId: instance?.agentId ?? ctx.options.fallbackWorkerAgentId,
      dependencyOutputs: task.dependsOn.map((id) => ({ taskId: id, output: taskOf(model, id)?.output ?? "" })),
    };
  }

  private async gitHead(): Promise<string | null> {
    const probe = this.p.ctx.workspace;
    // A remote-backed product's code is not at cwd (issue 33): its refs are verified against the remote instead.
    if (!probe || this.p.model.state.workspace) return null;
    try {
      return await probe.gitHead(this.p.model.state.cwd);
    } catch {
      return null;
    }
  }

  private agentsFingerprint(): string {
    const { ctx } = this.p;
    const custom = ctx.options.agentsFingerprint;
    return custom ? custom() : agentsHash(ctx.agents.list(), ctx.digest);
  }

  /** Per agent (issue 28): the composition root's definitions when given, else what `AgentDirectory.list()` shows. */
  private agentHashes(): Record<string, string> | undefined {
    const { ctx } = this.p;
    const hashes = ctx.options.agentHashes ? ctx.options.agentHashes() : agentHashes(ctx.agents.list(), ctx.digest);
    return Object.keys(hashes).length <= MAX_RECORDED_AGENTS ? hashes : undefined;
  }

  /** The fingerprint of the run's inputs now (`plan` defaults to the current plan). Reads the workspace only. */
  async currentFingerprint(plan: Plan | undefined = this.p.model.state.plan): Promise<Fingerprint> {
    const { ctx } = this.p;
    const promptVersion = ctx.options.leaderPromptVersion ?? "heuristic-1";
    return {
      promptVersion,
      planHash: planHash(plan, promptVersion, ctx.digest),
      gitHead: await this.gitHead(),
      agentsHash: this.agentsFingerprint(),
      ...((hashes) => (hashes !== undefined ? { agentHashes: hashes } : {}))(this.agentHashes()),
      ...(ctx.options.configPath !== undefined ? { configPath: ctx.options.configPath } : {}),
    };
  }

  /**
   * What changed since the fingerprint recorded with the run (plan/prompt version, git HEAD, agent definitions), in
   * plain words; `[]` while this process drives it, before confirmation, or for runs recorded without a fingerprint.
   * Read-only.
   */
  async drift(): Promise<Drift[]> {
    const recorded = this.p.model.state.fingerprint;
    if (!recorded || this.p.run.driving) return [];
    return compareFingerprints(recorded, await this.currentFingerprint(), this.p.ctx.options.registryView ?? "server");
  }

  /** A `fingerprint` event when the current fingerprint differs from the recorded one; `acknowledged` says why. */
  async fingerprintEvents(plan: Plan | undefined, acknowledged: Drift[]): Promise<NewEvent[]> {
    const current = await this.currentFingerprint(plan);
    const recorded = this.p.model.state.fingerprint;
    if (
      recorded &&
      compareFingerprints(recorded, current).length === 0 &&
      recorded.planHash === current.planHash &&
      recorded.configPath === current.configPath
    )
      return [];
    return [
      {
        type: "fingerprint",
        fingerprint: current,
        ...(acknowledged.length > 0 ? { acknowledged: acknowledged.map((d) => d.text).slice(0, 10) } : {}),
      },
    ];
  }

  /**
   * Re-checks, on resume, that every completed task's result was made from the input it would get now (guarantee
   * 7). A task whose recorded input hash no longer matches goes back to pending with an interruption note, and so
   * does every task downstream of it that consumed its result. Tasks completed without a recorded hash are trusted.
   * Returns the changed task states keyed by id (applied over `base`, the states already being changed).
   */
  rebind(base: Map<string, TaskState>): Map<string, TaskState> {
    const { model, ctx } = this.p;
    const s = model.state;
    const out = new Map(base);
    const stale: string[] = [];
    for (const t of s.tasks) {
      if (t.status !== "completed") continue;
      const recorded = inputHashOf(s, t.taskId);
      if (recorded !== undefined && recorded !== taskInputHash(this.inputOf(t), ctx.digest)) stale.push(t.taskId);
    }
    for (const id of stale) {
      for (const d of downstreamOf(s.tasks, id)) {
        const t = out.get(d) ?? taskOf(model, d);
        if (!t || !["completed", "failed", "skipped", "running"].includes(t.status)) continue;
        const note =
          d === id
            ? "Its input changed since it completed (its description, assignee or a dependency's output differs); it will run again."
            : `Task ${id} it depends on will run again, so this task will run again too.`;
        const fresh: TaskState = { ...t, status: "pending", interruption: note };
        for (const k of ["output", "error", "endedAt", "question"] as const) delete fresh[k];
        out.set(d, fresh);
      }
    }
    return out;
  }

  /** While driving: records the workspace's git HEAD when it moved (workers may commit), off the execution path. */
  refreshHead(): void {
    const p = this.p;
    if (!p.ctx.workspace || this.#headProbe || !p.model.state.fingerprint) return;
    this.#headProbe = this.gitHead()
      .then((head) =>
        p.sections.run(async () => {
          const fp = p.model.state.fingerprint;
          if (!fp || fp.gitHead === head || !p.run.driving || p.journal.fenced) return;
          await p.journal.commit([{ type: "fingerprint", fingerprint: { ...fp, gitHead: head } }]);
        }),
      )
      .catch(() => undefined)
      .finally(() => {
        this.#headProbe = null;
      });
  }
}
