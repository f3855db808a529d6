/**
 * The built-in heuristic leader (DESIGN.md, Agents): plans, answers and handles failures without any model.
 *
 * This file is the `LeaderPort` face; the text heuristics live in `./heuristic/`: splitting a goal into work items
 * (`goal-items.ts`), reading ordering words as dependencies (`ordering.ts`), assignment by strengths and the plan's
 * shape (`draft-plan.ts`), replaying the user's revision messages (`revisions.ts`), execution-time messages as
 * mutations (`live-commands.ts`), titles and names (`titles.ts`) and word helpers (`words.ts`). Everything is
 * deterministic (same goal + dialogue → same plan): no clock, no randomness, no I/O, no `node:` imports.
 */
import type { Mutation, Task, TaskState } from "../../../protocol/common.js";
import { applyMutations } from "../dag/mutations.js";
import type {
  AssessRequest,
  AssessResult,
  ChecklistRequest,
  ChecklistResult,
  FailureConsultation,
  FailureDecision,
  LeaderPort,
  MessageRequest,
  MessageResult,
  PhasePlanRequest,
  PhasePlanResult,
  PlanRequest,
  PlanResult,
} from "../ports.js";
import { finishDraft, planMessage } from "./heuristic/draft-plan.js";
import { placeFixUp } from "./heuristic/fix-up.js";
import { draftFromGoal, goalCriteria } from "./heuristic/goal-items.js";
import type { DraftTask } from "./heuristic/goal-items.js";
import { mutationsFor, progressLine, withStates } from "./heuristic/live-commands.js";
import { applyToDraft, parseCommands, revisionMessages } from "./heuristic/revisions.js";
import { MAX_DESCRIPTION, capitalise, clip, joinList, oneLine } from "./heuristic/words.js";

export { splitGoal } from "./heuristic/goal-items.js";
export type { GoalItem } from "./heuristic/goal-items.js";
export { makeTitle } from "./heuristic/titles.js";

/**
 * The built-in leader that needs no model. Stateless: every call derives its answer from the request alone, so one
 * instance can serve every product.
 *
 * - `plan` splits the goal into items, derives dependencies from ordering words, replays the user's revision messages
 *   from the dialogue, then assigns every task to an agent of the roster (best strengths match, else the default
 *   agent, else round-robin; seats up to `maxParallelTasks`) and says why in its message. Never asks questions.
 * - `message` turns "add task: …", "remove task N", "rename …", "make N depend on M", "assign N to …" into mutations
 *   that pass `applyMutations`; anything else is acknowledged.
 * - `consultOnFailure` adds one fix-up task per failed task, on another instance (another agent where the plan has
 *   one), which supersedes the failed task (kept, shown as superseded) and takes over its pending dependents; gives
 *   up when the failed task is itself a fix-up or already had one.
 *
 * Every method rejects with the signal's reason if `signal` is already aborted, and never rejects otherwise.
 */
export { HEURISTIC_LEADER_ID } from "./heuristic-leader-id.js";

export class HeuristicLeader implements LeaderPort {
  /**
   * Makes a plan from `request.goal` plus the revision messages in `request.dialogue` (every user entry except the
   * first one equal to the goal). Ignores `previousPlan` and `answers` so the result depends only on goal, dialogue,
   * roster and the product's `title` (a named product's plan keeps that name; else the plan names it, titles.ts). Streams the message through `onText` in a few chunks. The plan always passes `validatePlanGraph`.
   */
  async plan(request: PlanRequest): Promise<PlanResult> {
    request.signal.throwIfAborted();
    const revisions = revisionMessages(request.goal, request.dialogue);
    let draft = draftFromGoal(request.goal);
    const notes: string[] = [];
    const constraints: string[] = [];
    for (const revision of revisions) {
      for (const command of parseCommands(revision)) {
        draft = applyToDraft(draft, command, request.roster, notes, constraints);
      }
    }
    const { plan, reasons } = finishDraft(
      request.goal,
      draft,
      request.roster,
      constraints,
      request.maxParallelTasks ?? Infinity,
    );
    // A named product keeps its title through revisions (issue 28: one title everywhere).
    if (request.title !== undefined) plan.name = request.title;
    const message = planMessage(plan, notes, constraints, reasons);
    stream(message, request.onText);
    return { kind: "plan", plan, message };
  }

  /**
   * Answers a user message during execution (or while paused). Understood commands become mutations, each checked
   * with `applyMutations` against the plan as changed by the previous ones; a command whose mutations are rejected is
   * dropped and the response says why. Returns `mutations` only when at least one was kept.
   */
  async message(request: MessageRequest): Promise<MessageResult> {
    request.signal.throwIfAborted();
    const lines: string[] = [];
    const kept: Mutation[] = [];
    let plan = request.plan;
    let states: readonly TaskState[] = request.tasks;
    for (const command of parseCommands(request.content)) {
      const proposal = mutationsFor(command, plan, states, request.goal, request.roster);
      if (proposal.kind === "text") {
        lines.push(proposal.text);
        continue;
      }
      const outcome = applyMutations(plan, states, proposal.mutations);
      if (!outcome.ok) {
        lines.push(`I did not ${proposal.summary}: ${outcome.reason}`);
        continue;
      }
      kept.push(...proposal.mutations);
      plan = outcome.plan;
      states = withStates(outcome.plan, states);
      lines.push(`${capitalise(proposal.done)}.`);
    }
    if (kept.length > 0 && !applyMutations(request.plan, request.tasks, kept).ok) {
      // Unreachable by construction (the batch was validated step by step); never hand back an invalid batch.
      kept.length = 0;
      lines.push("I dropped my changes because together they did not apply to the current plan.");
    }
    // The progress of the plan as this answer leaves it: an added task counts (a new user's trial read the count from
    // before the task was added).
    lines.push(progressLine(kept.length > 0 ? states : request.tasks));
    const response = lines.join("\n");
    stream(response, request.onText);
    return kept.length > 0 ? { response, mutations: kept } : { response };
  }

  /**
   * Deterministic failure policy: a failed task that is not a fix-up (id ending in `-fix`) and has no fix-up yet gets
   * one — `<id>-fix`, "Fix: <title>", same dependencies, `supersedes` the failed task, on another instance
   * (heuristic/fix-up.ts) — and its pending dependents are re-pointed from the failed task to the fix-up, so the run
   * can go on. Otherwise, or if the mutations would not apply, gives up.
   */
  async consultOnFailure(request: FailureConsultation): Promise<FailureDecision> {
    request.signal.throwIfAborted();
    const failed = request.failedTask;
    const label = `Task ${failed.taskId} "${failed.title}"`;
    const attempts = failed.attempts === 1 ? "1 attempt" : `${failed.attempts} attempts`;
    const error = failed.error ? ` (${oneLine(failed.error, 300)})` : "";
    if (/-fix$/u.test(failed.taskId)) {
      return {
        kind: "giveUp",
        message: `${label} was already a fix-up and failed after ${attempts}${error}; I am giving up on this branch.`,
      };
    }
    const fixId = `${failed.taskId.slice(0, 196)}-fix`;
    if (request.plan.tasks.some((t) => t.taskId === fixId)) {
      return {
        kind: "giveUp",
        message: `${label} failed again after ${attempts}${error} and already had a fix-up (${fixId}); I am giving up on this branch.`,
      };
    }
    const placement = placeFixUp(request.plan, request.roster, failed, request.tasks);
    const inPlan = request.tasks.some((t) => t.taskId === failed.taskId);
    const fix: Task = {
      taskId: fixId,
      title: clip(`Fix: ${failed.title}`, 500),
      description: clip(
        `Task ${failed.taskId} "${failed.title}" failed after ${attempts}` +
          (failed.error ? ` with this error:\n${failed.error}\n\n` : ".\n\n") +
          "Find the cause, fix it, and finish what the task was meant to do.\n\nOriginal task:\n" +
          failed.description,
        MAX_DESCRIPTION,
      ),
      instanceId: placement.instance.instanceId,
      dependsOn: [...failed.dependsOn],
      ...(failed.acceptance !== undefined ? { acceptance: failed.acceptance } : {}),
      // A failure presented as a task that is not in the plan (a red final head) has nothing to supersede.
      ...(inPlan ? { supersedes: failed.taskId } : {}),
    };
    const mutations: Mutation[] = [{ op: "addTask", task: fix }];
    const repointed: string[] = [];
    for (const state of request.tasks) {
      if (state.status !== "pending" || !state.dependsOn.includes(failed.taskId)) continue;
      mutations.push({ op: "removeDependency", taskId: state.taskId, dependsOn: failed.taskId });
      mutations.push({ op: "addDependency", taskId: state.taskId, dependsOn: fixId });
      repointed.push(state.taskId);
    }
    // The fix-up supersedes the failed task, which stays in the plan, shown as superseded (issue 28): a successful
    // fix completes the product.
    const outcome = applyMutations(request.plan, request.tasks, mutations);
    if (!outcome.ok) {
      return {
        kind: "giveUp",
        message: `${label} failed after ${attempts}${error}, and I could not add a fix-up task: ${outcome.reason}`,
      };
    }
    const after =
      repointed.length === 0
        ? "No pending task was waiting for it."
        : `${joinList(repointed)} now ${repointed.length === 1 ? "waits" : "wait"} for the fix-up instead.`;
    return {
      kind: "mutate",
      mutations,
      message:
        `${label} failed after ${attempts}${error}. I added a fix-up task ${fixId} "${fix.title}" ${placement.reason} ` +
        `to supersede it; ${after}`,
    };
  }

  // -------------------------------------------------------------------------------------------------------------
  // Goal runs (PROTOCOL.md section 6): criteria are the goal's items; a criterion passes when the tasks made for it
  // completed.

  /**
   * Derives acceptance criteria from the goal's items, one per task the goal would make; a goal with a single item
   * gets one criterion (the goal itself). Deterministic.
   */
  async deriveChecklist(request: ChecklistRequest): Promise<ChecklistResult> {
    request.signal.throwIfAborted();
    const criteria = goalCriteria(request.goal).criteria;
    const message = `I will work towards ${criteria.length} acceptance ${criteria.length === 1 ? "criterion" : "criteria"}:\n${criteria
      .map((c) => `${c.id}. ${c.text}`)
      .join("\n")}`;
    return { criteria, message };
  }

  /**
   * Plans one phase: the goal's tasks for every criterion that does not pass yet (dependencies on tasks of passed
   * criteria are dropped, they are done), with queued user messages as constraints. Each task's `acceptance` names
   * its criterion (`Criterion c2: …`), which is how `assess` finds it again.
   */
  async planPhase(request: PhasePlanRequest): Promise<PhasePlanResult> {
    request.signal.throwIfAborted();
    const { draft, criterionOf } = goalCriteria(request.goal);
    const open = new Set(request.criteria.filter((c) => !c.passed).map((c) => c.id));
    const text = new Map(request.criteria.map((c) => [c.id, c.text]));
    let kept = draft.filter((t) => open.has(criterionOf.get(t) ?? ""));
    if (kept.length === 0) kept = draft;
    const keptSet = new Set(kept);
    const phaseDraft = kept.map((t) => ({ ...t, deps: t.deps.filter((d) => keptSet.has(d)) }));
    const original = new Map(phaseDraft.map((t, i) => [t, kept[i] as DraftTask]));
    phaseDraft.forEach((t) => (t.deps = t.deps.map((d) => phaseDraft[kept.indexOf(d)] as DraftTask)));
    const { plan } = finishDraft(request.goal, phaseDraft, request.roster, request.messages);
    plan.tasks.forEach((task, i) => {
      const cid = criterionOf.get(original.get(phaseDraft[i] as DraftTask) as DraftTask) ?? "c1";
      task.acceptance = clip(`Criterion ${cid}: ${text.get(cid) ?? ""}`, 5_000);
    });
    plan.name = clip(`Phase ${request.phaseIndex + 1}: ${plan.name}`, 500);
    const targets = [...new Set(plan.tasks.map((t) => (t.acceptance ?? "").match(/^Criterion (\S+):/u)?.[1] ?? "c1"))];
    const message = `Phase ${request.phaseIndex + 1} works on ${targets.join(", ")} with ${plan.tasks.length} ${
      plan.tasks.length === 1 ? "task" : "tasks"
    }.`;
    stream(message, request.onText);
    return { plan, message, targets };
  }

  /**
   * A criterion passes when at least one task of the phase was made for it and every such task completed; criteria
   * that passed before stay passed (the heuristic leader cannot detect regressions).
   */
  async assess(request: AssessRequest): Promise<AssessResult> {
    request.signal.throwIfAborted();
    const byCriterion = new Map<string, TaskState[]>();
    for (const t of request.tasks) {
      const cid = (t.acceptance ?? "").match(/^Criterion (\S+):/u)?.[1];
      if (cid === undefined) continue;
      const list = byCriterion.get(cid) ?? [];
      list.push(t);
      byCriterion.set(cid, list);
    }
    const passed: string[] = [];
    const newly: string[] = [];
    for (const c of request.criteria) {
      const tasks = byCriterion.get(c.id) ?? [];
      const ok = tasks.length > 0 && tasks.every((t) => t.status === "completed");
      if (c.passed || ok) passed.push(c.id);
      if (!c.passed && ok) newly.push(c.id);
    }
    const message =
      newly.length === 0
        ? `Phase ${request.phaseIndex + 1} passed no new criterion (${passed.length} of ${request.criteria.length} pass).`
        : `Phase ${request.phaseIndex + 1} passed ${newly.join(", ")}; ${passed.length} of ${request.criteria.length} criteria pass.`;
    return { passed, message };
  }
}

/** Calls `onText` with the text in up to four chunks split at line boundaries; the chunks join to `text`. */
function stream(text: string, onText: (text: string) => void): void {
  const lines = text.split(/(?<=\n)/u);
  const size = Math.ceil(lines.length / Math.min(4, lines.length));
  for (let i = 0; i < lines.length; i += size) onText(lines.slice(i, i + size).join(""));
}
