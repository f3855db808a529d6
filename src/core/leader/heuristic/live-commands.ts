/**
 * Execution-time messages for the heuristic leader: a parsed command becomes mutations on the live plan. Pure.
 */
import type { Instance, Mutation, Plan, Task, TaskState } from "../../../../protocol/common.js";
import type { AgentInfo } from "../../ports.js";
import { goalContext } from "./draft-plan.js";
import { placeAddedTask } from "./placement.js";
import { describeRef, matchAgent, resolveRef } from "./revisions.js";
import type { Command, Ref } from "./revisions.js";
import { makeTitle } from "./titles.js";
import { MAX_DESCRIPTION, clip, joinList, oneLine } from "./words.js";

// ---------------------------------------------------------------------------------------------------------------
// Commands on a live plan (execution)

export type Proposal =
  | { kind: "text"; text: string }
  | { kind: "mutations"; mutations: Mutation[]; summary: string; done: string };

/** Translates one command into mutations against the live plan, or into a plain answer. */
export function mutationsFor(
  command: Command,
  plan: Plan,
  states: readonly TaskState[],
  goal: string,
  roster: readonly AgentInfo[],
): Proposal {
  const view = plan.tasks.map((t) => ({ id: t.taskId, title: t.title, text: t.description }));
  const v: LiveView = {
    plan,
    states,
    goal,
    roster,
    find: (ref) => {
      const i = resolveRef(ref, view);
      return i === undefined ? undefined : plan.tasks[i];
    },
    label: (t) => `${t.taskId} "${t.title}"`,
    notFound: (ref) => ({ kind: "text", text: `I found no task matching ${describeRef(ref)}.` }),
  };
  const { find, label, notFound } = v;

  switch (command.kind) {
    case "constraint":
      return { kind: "text", text: `Noted: "${oneLine(command.text, 200)}". That does not change the plan.` };
    case "sequential":
    case "parallel":
    case "split":
      return {
        kind: "text",
        text:
          `I do not restructure a running plan for "${oneLine(command.source, 120)}"; ` +
          "send explicit changes (add, remove, make N depend on M) or use product.mutate.",
      };
    case "add":
      return addProposal(v, command);
    case "remove":
      return removeProposal(v, command);
    case "rename": {
      const target = find(command.ref);
      if (!target) return notFound(command.ref);
      const title = makeTitle(command.title, target.title);
      return {
        kind: "mutations",
        mutations: [{ op: "updateTask", taskId: target.taskId, patch: { title } }],
        summary: `rename ${label(target)}`,
        done: `renamed ${target.taskId} to "${title}"`,
      };
    }
    case "depend":
      return dependProposal(v, command);
    case "undepend":
      return undependProposal(v, command);
    case "assign": {
      const target = find(command.ref);
      if (!target) return notFound(command.ref);
      const instance = matchInstance(command.agent, plan.instances, roster);
      if (!instance) return { kind: "text", text: `No instance in this plan matches "${command.agent}".` };
      return {
        kind: "mutations",
        mutations: [{ op: "reassign", taskId: target.taskId, instanceId: instance.instanceId }],
        summary: `reassign ${label(target)}`,
        done: `reassigned ${target.taskId} to ${instance.instanceId} (${instance.role})`,
      };
    }
  }
}

/** What a command is translated against: the live plan, its tasks' states, the goal, the team, and task lookup. */
interface LiveView {
  plan: Plan;
  states: readonly TaskState[];
  goal: string;
  roster: readonly AgentInfo[];
  find(ref: Ref): Task | undefined;
  label(t: Task): string;
  notFound(ref: Ref): Proposal;
}

/**
 * A new task after the tasks named (all live ones for "at the end"), on the least loaded instance able to take it
 * (placement.ts: an idle instance before a busy one, never the next one in turn behind a running task).
 */
function addProposal(v: LiveView, command: Extract<Command, { kind: "add" }>): Proposal {
  const { plan, states, goal, roster, find, label } = v;
  if (plan.instances.length === 0) return { kind: "text", text: "The plan has no instance to run a new task on." };
  const taskId = nextTaskId(plan);
  const deps: string[] = [];
  const unresolved: string[] = [];
  for (const ref of command.after) {
    const t = find(ref);
    if (t) deps.push(t.taskId);
    else unresolved.push(describeRef(ref));
  }
  if (command.atEnd) {
    const dead = new Set(
      states.filter((s) => ["failed", "skipped", "cancelled"].includes(s.status)).map((s) => s.taskId),
    );
    deps.push(...plan.tasks.filter((t) => !dead.has(t.taskId)).map((t) => t.taskId));
  }
  const title = makeTitle(command.text, `Task ${taskId}`);
  const placement = placeAddedTask(plan, states, roster, `${title} ${command.text}`);
  const task: Task = {
    taskId,
    title,
    description: clip(`${command.full.trim()}${goalContext(goal, [])}`, MAX_DESCRIPTION),
    instanceId: placement.instance.instanceId,
    dependsOn: [...new Set(deps)],
  };
  const where = placement.reason ? ` ${placement.reason}` : "";
  const after = task.dependsOn.length > 0 ? ` after ${joinList(task.dependsOn)}` : "";
  const missing = unresolved.length > 0 ? ` (I found no task matching ${unresolved.join(", ")} to wait for)` : "";
  return {
    kind: "mutations",
    mutations: [{ op: "addTask", task }],
    summary: `add "${task.title}"`,
    done: `added ${label(task)}${where}${after}${missing}`,
  };
}

/** Removes tasks; their dependents inherit their dependencies, so the order around them is kept. */
function removeProposal(v: LiveView, command: Extract<Command, { kind: "remove" }>): Proposal {
  const { plan, find, label, notFound } = v;
  const targets: Task[] = [];
  for (const ref of command.refs) {
    const target = find(ref);
    if (!target) return notFound(ref);
    if (!targets.includes(target)) targets.push(target);
  }
  // Work on a scratch copy of the edges so several removals in one command bridge correctly.
  const deps = new Map(plan.tasks.map((t) => [t.taskId, [...t.dependsOn]]));
  const mutations: Mutation[] = [];
  for (const target of targets) {
    const inherited = deps.get(target.taskId) ?? [];
    for (const [id, list] of deps) {
      if (!list.includes(target.taskId)) continue;
      mutations.push({ op: "removeDependency", taskId: id, dependsOn: target.taskId });
      list.splice(list.indexOf(target.taskId), 1);
      for (const d of inherited) {
        if (d === id || list.includes(d)) continue;
        mutations.push({ op: "addDependency", taskId: id, dependsOn: d });
        list.push(d);
      }
    }
    mutations.push({ op: "removeTask", taskId: target.taskId });
    deps.delete(target.taskId);
  }
  const names = joinList(targets.map(label));
  return { kind: "mutations", mutations, summary: `remove ${names}`, done: `removed ${names}` };
}

/** New dependencies of one task (those it has already are left out). */
function dependProposal(v: LiveView, command: Extract<Command, { kind: "depend" }>): Proposal {
  const { find, label, notFound } = v;
  const target = find(command.ref);
  if (!target) return notFound(command.ref);
  const ons: Task[] = [];
  for (const ref of command.on) {
    const on = find(ref);
    if (!on) return notFound(ref);
    if (!target.dependsOn.includes(on.taskId) && !ons.includes(on)) ons.push(on);
  }
  if (ons.length === 0) return { kind: "text", text: `Task ${label(target)} already has those dependencies.` };
  const names = joinList(ons.map((o) => o.taskId));
  return {
    kind: "mutations",
    mutations: ons.map((o) => ({ op: "addDependency", taskId: target.taskId, dependsOn: o.taskId })),
    summary: `make ${target.taskId} depend on ${names}`,
    done: `task ${target.taskId} now depends on ${names}`,
  };
}

/** Dependencies of one task removed (all of them for "on its own"). */
function undependProposal(v: LiveView, command: Extract<Command, { kind: "undepend" }>): Proposal {
  const { find, label, notFound } = v;
  const target = find(command.ref);
  if (!target) return notFound(command.ref);
  let ons: string[];
  if (command.on === "all") ons = [...target.dependsOn];
  else {
    ons = [];
    for (const ref of command.on) {
      const on = find(ref);
      if (!on) return notFound(ref);
      if (target.dependsOn.includes(on.taskId)) ons.push(on.taskId);
    }
  }
  if (ons.length === 0) return { kind: "text", text: `Task ${label(target)} has no such dependency.` };
  return {
    kind: "mutations",
    mutations: ons.map((d) => ({ op: "removeDependency", taskId: target.taskId, dependsOn: d })),
    summary: `remove dependencies of ${target.taskId}`,
    done: `task ${target.taskId} no longer depends on ${joinList(ons)}`,
  };
}

export function matchInstance(
  words: string,
  instances: readonly Instance[],
  roster: readonly AgentInfo[],
): Instance | undefined {
  const w = words.trim().toLowerCase();
  const byId = instances.find((i) => i.instanceId.toLowerCase() === w);
  if (byId) return byId;
  const asAgents: AgentInfo[] = instances.map((i) => {
    const info = roster.find((a) => a.agentId === i.agentId);
    return { agentId: i.agentId, name: i.name ?? info?.name ?? "", role: i.role, strengths: [] };
  });
  const k = matchAgent(words, asAgents);
  return k === undefined ? undefined : instances[k];
}

/** `t<n>` with n one above the highest `t<number>` id in the plan (never colliding with an existing id). */
export function nextTaskId(plan: Plan): string {
  const ids = new Set(plan.tasks.map((t) => t.taskId));
  let n = 0;
  for (const id of ids) {
    const m = /^t(\d{1,9})$/u.exec(id);
    if (m) n = Math.max(n, Number(m[1]));
  }
  let candidate = `t${n + 1}`;
  while (ids.has(candidate)) {
    n += 1;
    candidate = `t${n + 1}`;
  }
  return candidate;
}

/** The task states after a mutation: existing states kept, new tasks pending. */
export function withStates(plan: Plan, states: readonly TaskState[]): TaskState[] {
  const byId = new Map(states.map((s) => [s.taskId, s]));
  return plan.tasks.map((t) => {
    const s = byId.get(t.taskId);
    return s ? { ...s, ...t } : { ...t, status: "pending", attempts: 0 };
  });
}

export function progressLine(tasks: readonly TaskState[]): string {
  const count = (status: TaskState["status"]): number => tasks.filter((t) => t.status === status).length;
  const parts = [`${count("completed")} of ${tasks.length} tasks completed`];
  for (const s of ["running", "waiting", "failed", "skipped"] as const)
    if (count(s) > 0) parts.push(`${count(s)} ${s}`);
  return `Progress: ${parts.join(", ")}.`;
}
