/**
 * The built-in heuristic leader (DESIGN.md, Agents): plans, answers and handles failures without any model.
 *
 * Owns the text heuristics: splitting a goal into work items (bullets, numbered items, sentences, clauses), reading
 * ordering words as dependencies, round-robin assignment over the roster, replaying the user's revision messages on
 * the draft, turning execution-time messages into mutations, and the fix-up-task failure policy. Everything is
 * deterministic (same goal + dialogue → same plan): no clock, no randomness, no I/O, no `node:` imports.
 */
import type { Instance, Mutation, Plan, Task, TaskState } from "../../../protocol/common.js";
import { validatePlanGraph } from "../dag/graph.js";
import { applyMutations } from "../dag/mutations.js";
import type {
  AcceptanceCriterion,
  AgentInfo,
  AssessRequest,
  AssessResult,
  ChecklistRequest,
  ChecklistResult,
  DialogueEntry,
  DraftPlan,
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

/** Longest title the heuristic leader writes (the schema allows 500). */
const MAX_TITLE = 80;
/** More work items than this are grouped so a plan stays readable. */
const MAX_TASKS = 40;
/** How much of the goal is repeated in each task description as context. */
const MAX_GOAL_CONTEXT = 2_000;
const MAX_DESCRIPTION = 20_000;
/** The instance used when the roster is empty: the leader works alone. */
const LEADER_INSTANCE: Instance = { instanceId: "leader", agentId: "leader", role: "leader" };

/**
 * The built-in leader that needs no model. Stateless: every call derives its answer from the request alone, so one
 * instance can serve every product.
 *
 * - `plan` splits the goal into items, derives dependencies from ordering words, assigns tasks round-robin over the
 *   roster, then replays the user's revision messages from the dialogue. Never asks questions.
 * - `message` turns "add task: …", "remove task N", "rename …", "make N depend on M", "assign N to …" into mutations
 *   that pass `applyMutations`; anything else is acknowledged.
 * - `consultOnFailure` adds one fix-up task per failed task, re-points its pending dependents and removes the failed
 *   task when nothing else depends on it (the fix-up replaces it); gives up when the
 *   failed task is itself a fix-up or already had one.
 *
 * Every method rejects with the signal's reason if `signal` is already aborted, and never rejects otherwise.
 */
/**
 * The leader id that names the built-in heuristic leader (an ACP session's `leader` config option, PROTOCOL.md
 * section 4); a leader resolver gives the heuristic leader for it even when a default leader agent is configured.
 */
export const HEURISTIC_LEADER_ID = "heuristic";

export class HeuristicLeader implements LeaderPort {
  /**
   * Makes a plan from `request.goal` plus the revision messages in `request.dialogue` (every user entry except the
   * first one equal to the goal). Ignores `previousPlan` and `answers` so the result depends only on goal, dialogue
   * and roster. Streams the message through `onText` in a few chunks. The plan always passes `validatePlanGraph`.
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
    const plan = finishDraft(request.goal, draft, request.roster, constraints);
    const message = planMessage(plan, notes, constraints);
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
    lines.push(progressLine(request.tasks));
    const response = lines.join("\n");
    stream(response, request.onText);
    return kept.length > 0 ? { response, mutations: kept } : { response };
  }

  /**
   * Deterministic failure policy: a failed task that is not a fix-up (id ending in `-fix`) and has no fix-up yet gets
   * one — `<id>-fix`, "Fix: <title>", same instance and dependencies — and its pending dependents are re-pointed from
   * the failed task to the fix-up, so the run can go on. Otherwise, or if the mutations would not apply, gives up.
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
      instanceId: failed.instanceId,
      dependsOn: [...failed.dependsOn],
      ...(failed.acceptance !== undefined ? { acceptance: failed.acceptance } : {}),
    };
    const mutations: Mutation[] = [{ op: "addTask", task: fix }];
    const repointed: string[] = [];
    for (const state of request.tasks) {
      if (state.status !== "pending" || !state.dependsOn.includes(failed.taskId)) continue;
      mutations.push({ op: "removeDependency", taskId: state.taskId, dependsOn: failed.taskId });
      mutations.push({ op: "addDependency", taskId: state.taskId, dependsOn: fixId });
      repointed.push(state.taskId);
    }
    // The fix-up replaces the failed task (its failure stays in the dialogue), so a successful fix can complete the
    // product. Only possible when no other task still depends on the failed one.
    const stillDepended = request.tasks.some(
      (t) => t.dependsOn.includes(failed.taskId) && !repointed.includes(t.taskId),
    );
    if (!stillDepended) mutations.push({ op: "removeTask", taskId: failed.taskId });
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
        `${label} failed after ${attempts}${error}. I added a fix-up task ${fixId} "${fix.title}" on the same instance` +
        `${stillDepended ? "" : ` to replace it`}; ${after}`,
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
    const plan = finishDraft(request.goal, phaseDraft, request.roster, request.messages);
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

/** The goal's draft tasks and, for each, the acceptance criterion it serves (one per item; one for a 1-item goal). */
function goalCriteria(goal: string): {
  draft: DraftTask[];
  criteria: AcceptanceCriterion[];
  criterionOf: Map<DraftTask, string>;
} {
  const draft = draftFromGoal(goal);
  const criterionOf = new Map<DraftTask, string>();
  if (splitGoal(goal).length <= 1) {
    for (const t of draft) criterionOf.set(t, "c1");
    const text = oneLine(goal, 1_000) || "The goal is done.";
    return { draft, criteria: [{ id: "c1", text }], criterionOf };
  }
  const criteria = draft.map((t, i) => {
    criterionOf.set(t, `c${i + 1}`);
    return { id: `c${i + 1}`, text: clip(oneLine(t.text, 1_000) || t.title, 1_000) };
  });
  return { draft, criteria, criterionOf };
}

// ===============================================================================================================
// Goal → draft

/** One task of the draft, before ids and instances are assigned. Dependencies are object references. */
interface DraftTask {
  title: string;
  text: string;
  deps: DraftTask[];
  /** Roster index chosen by an "assign" revision; otherwise round-robin. */
  agent?: number;
}

/** One work item of the goal text. */
export interface GoalItem {
  text: string;
  /** The list number the user wrote (`3.` / `Step 3:`), if any. */
  number?: number;
}

/** Splits the goal into items and dependencies and returns the draft tasks (≥ 1, ≤ MAX_TASKS). */
function draftFromGoal(goal: string): DraftTask[] {
  const items = splitGoal(goal);
  if (items.length <= 1) return smallPlan(goal);
  const words = items.map((item) => ({ title: keywords(makeTitle(item.text, "")), text: keywords(item.text) }));
  const byNumber = new Map<number, number>();
  for (const [i, item] of items.entries()) {
    if (item.number !== undefined && !byNumber.has(item.number)) byNumber.set(item.number, i);
  }
  const deps = items.map((item, i) => itemDependencies(item, i, byNumber, items.length, words));
  return groupItems(items, deps);
}

const BULLET = /^(\s*)(?:[-*+•‣◦▪]|\[[ xX]\])\s+(?:\[[ xX]\]\s+)?(.*)$/u;
const NUMBERED = /^(\s*)(?:\(?(\d{1,4})[.)]|(?:step|phase|stage|part|task)\s*(\d{1,4})\s*[:.)\-–—]?)\s+(.*)$/iu;

/**
 * Splits a goal into work items: markdown bullets (`-`, `*`, `+`, checkboxes) and numbered lines (`1.`, `1)`,
 * `Step 1:`) when there are any (nested points join their parent, wrapped lines continue it, other prose is context),
 * else sentences, `;` parts and ordering clauses. Items without a letter or digit are dropped. Pure; never throws.
 */
export function splitGoal(goal: string): GoalItem[] {
  const lines = goal.replace(/\r\n?/gu, "\n").split("\n");
  const items: GoalItem[] = [];
  let baseIndent = -1;
  let current: GoalItem | undefined;
  let blank = false;
  for (const line of lines) {
    if (line.trim() === "") {
      blank = true;
      continue;
    }
    const numbered = NUMBERED.exec(line);
    const bullet = numbered ? null : BULLET.exec(line);
    const match = numbered ?? bullet;
    if (match) {
      const indent = (match[1] ?? "").replace(/\t/gu, "    ").length;
      const text = ((numbered ? numbered[4] : bullet?.[2]) ?? "").trim();
      if (baseIndent < 0) baseIndent = indent;
      if (current && indent > baseIndent + 1) {
        current.text = `${current.text}; ${text}`; // a nested point belongs to its parent item
      } else {
        const n = numbered ? Number(numbered[2] ?? numbered[3]) : undefined;
        current = n !== undefined ? { text, number: n } : { text };
        items.push(current);
      }
    } else if (current && (!blank || /^\s/u.test(line))) {
      current.text = `${current.text} ${line.trim()}`; // wrapped continuation of the item
    } else if (current) {
      current = undefined; // prose after the list is context, not an item
    }
    blank = false;
  }
  const listed = items.filter((i) => hasWords(i.text));
  if (listed.length > 0) return listed;
  return splitProse(goal).map((text) => ({ text }));
}

/** Sentences, `;` parts and ordering clauses (", then …", " and then …", ", finally …") of a prose goal. */
function splitProse(goal: string): string[] {
  const sentences = goal
    .replace(/\r\n?/gu, "\n")
    .replace(/[^\S\n]+/gu, " ")
    .split(/\n+|;\s*|(?<=[.!?])\s+(?=[^\p{Ll}\s])|(?<=[。！？])/u)
    .map((s) => s.trim());
  const clauses: string[] = [];
  for (const sentence of sentences) {
    const parts = sentence.split(
      /\s*,\s*(?=(?:and\s+)?(?:then|after that|afterwards|finally|lastly|next)\b)|\s+(?=and\s+(?:then|finally|afterwards|after that)\b)/iu,
    );
    for (const part of parts) {
      const text = part.trim();
      if (!hasWords(text)) continue;
      const previous = clauses[clauses.length - 1];
      // A fragment of one or two characters is glued to the previous clause rather than made a task.
      if (previous !== undefined && letterCount(text) < 3) clauses[clauses.length - 1] = `${previous} ${text}`;
      else clauses.push(text);
    }
  }
  return clauses;
}

/** A goal with at most one item becomes analyse → implement → review of the whole goal. */
function smallPlan(goal: string): DraftTask[] {
  const clean = goal.trim();
  const subject = hasWords(clean) ? planName(clean) : "the goal";
  const work = hasWords(clean) ? clean : "the goal";
  const analyse: DraftTask = {
    title: prefixTitle("Analyse", subject),
    text:
      "Study the request and the relevant files in the workspace, and write down a short approach: what to change, " +
      `the risks, and how to check the result.\n\nRequest: ${work}`,
    deps: [],
  };
  const implement: DraftTask = {
    title: prefixTitle("Implement", subject),
    text: `Carry out the request, following the approach from the analysis.\n\nRequest: ${work}`,
    deps: [analyse],
  };
  const review: DraftTask = {
    title: prefixTitle("Review", subject),
    text:
      "Review and test the result against the request; fix small problems and report anything that is left." +
      `\n\nRequest: ${work}`,
    deps: [implement],
  };
  return [analyse, implement, review];
}

// ---------------------------------------------------------------------------------------------------------------
// Ordering words → dependencies

/** End of a lead word: not followed by a letter/digit, nor by `.js`-style punctuation glued to one. */
const END = String.raw`(?![\p{L}\p{N}]|[.\-/][\p{L}\p{N}])[,:]?\s*`;
const FINAL_LEAD = new RegExp(
  String.raw`^(?:and\s+)?(?:finally|lastly|last of all|last(?=\s*[,:])|at the (?:very )?end|in the end|to (?:finish|wrap up|conclude)|when (?:everything|all) (?:else )?is (?:done|finished|complete|completed))` +
    END,
  "iu",
);
const SEQ_LEAD = new RegExp(
  String.raw`^(?:and\s+)?(?:then|after that|after this|afterwards?|next|subsequently|following that|once (?:that|this|it|these|those)(?: (?:is|are|has been|have been))? (?:done|finished|complete|completed|ready|in place)|once done|when (?:that|this|it)(?: is)? (?:done|finished|complete|completed))` +
    END,
  "iu",
);
const PAR_LEAD = new RegExp(
  String.raw`^(?:and\s+)?(?:also|in parallel|meanwhile|in the meantime|at the same time|simultaneously|independently|separately|additionally)` +
    END,
  "iu",
);
const FIRST_LEAD = new RegExp(String.raw`^(?:first(?:ly)?|to (?:start|begin)(?: with)?|initially)` + END, "iu");
/** A few Chinese/Japanese ordering words; scripts without spaces need no word end. */
const CJK_FINAL_LEAD = /^(?:最后|最終的に|最後に)[，,、：:]?\s*/u;
const CJK_SEQ_LEAD = /^(?:然后|接着|之后|随后|次に|その後)[，,、：:]?\s*/u;
const CJK_PAR_LEAD = /^(?:同时|另外|并行|同時に)[，,、：:]?\s*/u;
const CJK_FIRST_LEAD = /^(?:首先|まず)[，,、：:]?\s*/u;
const STEP_REF_LEAD = /^after\s+(?:steps?|items?|tasks?|points?|#)\s*#?\d+(?:\s*(?:,|and|&|\+)\s*#?\d+)*\s*[,:]?\s*/iu;
const CLAUSE_LEAD =
  /^(?:once|after|based on|building on|using the (?:results?|output|findings) of|when\s+[^,]{1,80}?\s+(?:is|are)\s+(?:done|finished|complete|completed|ready))\s*[^,]{0,80},\s*/iu;

const PARALLEL_ANYWHERE = /\b(?:in parallel|meanwhile|concurrently|independently|at the same time|simultaneously)\b/iu;
const STEP_REFS = /\bafter\s+(?:steps?|items?|tasks?|points?|#)\s*#?(\d{1,4})((?:\s*(?:,|and|&|\+)\s*#?\d{1,4})*)/giu;
const ALL_REF =
  /\b(?:once|when|after)\s+(?:everything|all\s+(?:the\s+)?(?:other\s+|previous\s+|above\s+)?(?:steps|tasks|items|work))\b/iu;
const ONCE_REF =
  /\b(?:once|when)\s+(?:the\s+)?(.{3,60}?)\s+(?:is|are|has been|have been)\s+(?:done|finished|complete|completed|ready|in place|written|merged|implemented|built|fixed)\b/iu;
const BASED_REF =
  /\b(?:based on|building on|using the (?:results?|output|findings) (?:of|from))\s+(?:the\s+)?([^,.;]{3,60})/iu;
const AFTER_REF = /\bafter\s+(?!steps?\b|items?\b|tasks?\b|points?\b|that\b|this\b|#)(?:the\s+)?([^,.;]{3,60})/iu;

/** Keywords of one goal item, computed once (title words weigh double in `bestMatch`). */
interface ItemWords {
  title: Set<string>;
  text: Set<string>;
}

/** Marker in an item's dependency list: "every previous item" (kept symbolic so huge goals stay linear). */
const ALL_PREVIOUS = -1;
/** How many preceding items a word reference ("once the parser is done") is matched against. */
const MATCH_WINDOW = 200;

/**
 * The indices of the items `items[index]` depends on, from its ordering words: "finally"/"lastly" → every previous
 * item (`ALL_PREVIOUS`); "then"/"next"/"after that"/"once that is done" → the previous item; "after step N" → that
 * item; "once the X is done"/"based on X" → the preceding item whose words best match X, else the previous item;
 * "after X" → the best match only; "in parallel"/"meanwhile"/"also" → only explicit step references. No ordering
 * word → no dependency (numbered lists are not sequential by themselves).
 */
function itemDependencies(
  item: GoalItem,
  index: number,
  byNumber: ReadonlyMap<number, number>,
  count: number,
  words: readonly ItemWords[],
): number[] {
  const text = item.text;
  const deps = new Set<number>();
  for (const match of text.matchAll(STEP_REFS)) {
    const numbers = [match[1] ?? "", ...(match[2] ?? "").split(/\D+/u)].filter((s) => s !== "").map(Number);
    for (const n of numbers) {
      const target = byNumber.get(n) ?? (n >= 1 && n <= count ? n - 1 : undefined);
      if (target !== undefined && target !== index) deps.add(target);
    }
  }
  if (index === 0 || PAR_LEAD.test(text) || CJK_PAR_LEAD.test(text) || PARALLEL_ANYWHERE.test(text)) return [...deps];
  if (FINAL_LEAD.test(text) || CJK_FINAL_LEAD.test(text) || ALL_REF.test(text)) return [...deps, ALL_PREVIOUS];
  const window = Math.max(0, index - MATCH_WINDOW);
  const near = (phrase: string): number | undefined => {
    const hit = bestMatchWords(phrase, words.slice(window, index));
    return hit === undefined ? undefined : hit + window;
  };
  if (SEQ_LEAD.test(text) || CJK_SEQ_LEAD.test(text)) deps.add(index - 1);
  else {
    const once = ONCE_REF.exec(text) ?? BASED_REF.exec(text);
    if (once) deps.add(near(once[1] ?? "") ?? index - 1);
  }
  const after = AFTER_REF.exec(text);
  if (after && deps.size === 0) {
    const target = near(after[1] ?? "");
    if (target !== undefined) deps.add(target);
  }
  return [...deps];
}

/** True when the edges (with `ALL_PREVIOUS` expanded) contain a cycle; only forward edges can close one. */
function hasCycle(deps: readonly number[][]): boolean {
  const tasks = deps.map((d, i) => ({
    taskId: String(i),
    instanceId: "x",
    dependsOn: d.includes(ALL_PREVIOUS)
      ? [...new Set([...d.filter((j) => j >= 0), ...range(i)])].map(String)
      : d.map(String),
  }));
  return !validatePlanGraph([{ instanceId: "x" }], tasks).ok;
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/**
 * Items become draft tasks. More than MAX_TASKS items are grouped into consecutive runs first, and dependencies are
 * lifted to the groups. If forward references ("after step 5" in item 2) close a cycle, every forward edge is dropped.
 */
function groupItems(items: readonly GoalItem[], itemDeps: readonly number[][]): DraftTask[] {
  const size = Math.ceil(items.length / MAX_TASKS);
  const groupOf = (i: number): number => Math.floor(i / size);
  const drafts: DraftTask[] = [];
  for (let start = 0; start < items.length; start += size) {
    const members = items.slice(start, start + size);
    const first = members[0] as GoalItem;
    const title =
      members.length === 1
        ? makeTitle(first.text, `Step ${drafts.length + 1}`)
        : withSuffix(makeTitle(first.text, `Step ${drafts.length + 1}`), ` (+${members.length - 1} more)`);
    const text = members.length === 1 ? first.text : members.map((m) => `- ${m.text}`).join("\n");
    drafts.push({ title, text, deps: [] });
  }
  const groupDeps = drafts.map(() => new Set<number>());
  for (const [i, d] of itemDeps.entries()) {
    const g = groupOf(i);
    const set = groupDeps[g] as Set<number>;
    for (const j of d) {
      if (j === ALL_PREVIOUS) set.add(ALL_PREVIOUS);
      else if (groupOf(j) !== g) set.add(groupOf(j));
    }
  }
  let lists = groupDeps.map((set, g) => (set.has(ALL_PREVIOUS) && g === 0 ? [] : [...set].sort((a, b) => a - b)));
  if (hasCycle(lists)) lists = lists.map((list, g) => list.filter((j) => j < g));
  for (const [g, list] of lists.entries()) {
    const targets = list.includes(ALL_PREVIOUS) ? range(g) : list;
    (drafts[g] as DraftTask).deps = [...new Set(targets)].map((j) => drafts[j] as DraftTask);
  }
  return drafts;
}

// ===============================================================================================================
// Revision / message commands

/** A reference to a task in a user's words: "task 3", "t3", "the last one", or title words. */
type Ref = { kind: "number"; n: number } | { kind: "last" } | { kind: "words"; text: string };

type Command =
  | { kind: "add"; text: string; full: string; after: Ref[]; atEnd: boolean; atStart: boolean; source: string }
  | { kind: "remove"; refs: Ref[]; source: string }
  | { kind: "rename"; ref: Ref; title: string; source: string }
  | { kind: "split"; ref: Ref; parts: string[]; source: string }
  | { kind: "depend"; ref: Ref; on: Ref[]; source: string }
  | { kind: "undepend"; ref: Ref; on: Ref[] | "all"; source: string }
  | { kind: "assign"; ref: Ref; agent: string; source: string }
  | { kind: "sequential"; source: string }
  | { kind: "parallel"; source: string }
  | { kind: "constraint"; text: string };

const POLITE =
  /^(?:please|pls|kindly|can you|could you|would you|i want you to|i'd like you to|let's|lets|ok(?:ay)?,?|and)\s+/iu;
const TASK_MENTION = /\b(?:task|step|item)\s*#?\d+|\bt\d+\b|#\d+/iu;
const SEQUENTIAL_WORDS =
  /\b(?:sequential(?:ly)?|in order(?!\s+to\b)|in sequence|one (?:after|by) (?:another|the other|one)|one at a time|step by step|serially|in series|chain (?:them|all|everything|the tasks))\b/iu;
const PARALLEL_WORDS =
  /\b(?:in parallel|parallel(?:i[sz]e)?|concurrently|at the same time|simultaneously|no dependencies|independent(?:ly)?)\b/iu;
const DEPEND_VERBS =
  "(?:depends? on|waits? for|comes? after|runs? after|follows?|goes after|be after|be done after|starts? after|after)";

/** Splits a user message into clauses and parses each into a command (unknown clauses become constraints). */
function parseCommands(message: string): Command[] {
  const clauses = message
    .replace(/\r\n?/gu, "\n")
    .split(/\n+|(?<=[.!?])\s+(?=[^\p{Ll}\s])/u)
    .map((c) => c.trim())
    .filter(hasWords);
  return clauses.map(parseCommand);
}

/** Clauses longer than this are never commands; they are kept as constraints (and the regexes stay cheap). */
const MAX_COMMAND_LENGTH = 500;

function parseCommand(clause: string): Command {
  const source = clause;
  if (clause.length > MAX_COMMAND_LENGTH) return { kind: "constraint", text: source };
  let c = clause.replace(/[\s.!?]+$/u, "");
  for (let k = 0; k < 3 && POLITE.test(c); k += 1) c = c.replace(POLITE, "");
  c = c.replace(/,?\s+please$/iu, "").trim();
  let m: RegExpExecArray | null;

  if ((m = new RegExp(`^(?:make|let|have)\\s+(.+?)\\s+${DEPEND_VERBS}\\s+(.+)$`, "iu").exec(c))) {
    return { kind: "depend", ref: parseRef(m[1] ?? ""), on: parseRefList(m[2] ?? ""), source };
  }
  if (
    (m =
      /^(?:make\s+)?(.+?)\s+(?:should\s+|must\s+)?(?:not|no longer|doesn't|does not|don't|do not|shouldn't|should not|needn't)\s+(?:depend on|wait for|come after|run after)\s+(.+)$/iu.exec(
        c,
      ))
  ) {
    return { kind: "undepend", ref: parseRef(m[1] ?? ""), on: parseRefList(m[2] ?? ""), source };
  }
  if ((m = /^remove (?:the )?dependency (?:of|from) (.+?) on (.+)$/iu.exec(c))) {
    return { kind: "undepend", ref: parseRef(m[1] ?? ""), on: parseRefList(m[2] ?? ""), source };
  }
  if (
    (m = /^(?:run|do|start)\s+(.+?)\s+(?:after|once)\s+(.+?)(?:\s+is\s+(?:done|finished|complete|completed))?$/iu.exec(
      c,
    )) &&
    TASK_MENTION.test(m[1] ?? "")
  ) {
    return { kind: "depend", ref: parseRef(m[1] ?? ""), on: parseRefList(m[2] ?? ""), source };
  }
  if ((m = /^(?:run|do)\s+(.+?)\s+before\s+(.+)$/iu.exec(c)) && TASK_MENTION.test(m[1] ?? "")) {
    return { kind: "depend", ref: parseRef(m[2] ?? ""), on: [parseRef(m[1] ?? "")], source };
  }
  if (
    (m = new RegExp(
      `^((?:task|step|item)\\s*#?\\d+|t\\d+|#\\d+)\\s+(?:should\\s+|must\\s+|has to\\s+|needs to\\s+|can\\s+)?${DEPEND_VERBS}\\s+(.+)$`,
      "iu",
    ).exec(c))
  ) {
    return { kind: "depend", ref: parseRef(m[1] ?? ""), on: parseRefList(m[2] ?? ""), source };
  }
  if (
    (m =
      /^((?:task|step|item)\s*#?\d+|t\d+|#\d+)\s+(?:should\s+|must\s+)?(?:come|run|go|be done|happen)?\s*before\s+(.+)$/iu.exec(
        c,
      ))
  ) {
    return { kind: "depend", ref: parseRef(m[2] ?? ""), on: [parseRef(m[1] ?? "")], source };
  }
  if (
    (m = /^(?:rename|retitle)\s+(.+?)\s+(?:to|as|into)\s+(.+)$/iu.exec(c)) ||
    (m = /^change the (?:title|name) of (.+?) to (.+)$/iu.exec(c))
  ) {
    return { kind: "rename", ref: parseRef(m[1] ?? ""), title: unquote(m[2] ?? ""), source };
  }
  if ((m = /^(?:call|name)\s+((?:task|step|item)\s*#?\d+|t\d+|#\d+)\s+(.+)$/iu.exec(c))) {
    return { kind: "rename", ref: parseRef(m[1] ?? ""), title: unquote(m[2] ?? ""), source };
  }
  if ((m = /^(?:split|break(?: up| down)?|divide)\s+(.+?)(?:\s+(?:into|in)\s+(.+))?$/iu.exec(c))) {
    const partsText = m[2] ?? "";
    const counted =
      /^(?:two|2|three|3|four|4|several|multiple|smaller)?\s*(?:parts?|pieces|tasks|steps|subtasks)?$/iu.test(
        partsText,
      );
    const parts = counted
      ? []
      : partsText
          .split(/\s*,\s*(?:and\s+)?|\s+and\s+|\s*;\s*/u)
          .map((p) => p.trim())
          .filter(hasWords);
    return { kind: "split", ref: parseRef(m[1] ?? ""), parts, source };
  }
  if ((m = /^(?:assign|give|move|hand(?: over)?|reassign)\s+(.+?)\s+to\s+(?:the\s+)?(.+?)(?:\s+agent)?$/iu.exec(c))) {
    return { kind: "assign", ref: parseRef(m[1] ?? ""), agent: m[2] ?? "", source };
  }
  if ((m = /^(?:remove|drop|delete|skip|cut|omit|scrap|get rid of)\s+(.+)$/iu.exec(c))) {
    const what = m[1] ?? "";
    const several =
      /^(?:the\s+)?(?:(?:tasks?|steps?|items?)\s*)?(?:#?t?\d+)(?:\s*(?:,|and|&)\s*(?:(?:tasks?|steps?|items?)\s*)?#?t?\d+)+$/iu;
    return { kind: "remove", refs: several.test(what) ? parseRefList(what) : [parseRef(what)], source };
  }
  if ((m = /^(?:add|also|plus|insert|append|we also need|also need)\b[\s:,-]*(.*)$/iu.exec(c))) {
    const add = parseAdd(m[1] ?? "", source);
    if (add) return add;
  }
  if (
    (m =
      /^(?:make\s+|let\s+)?((?:task|step|item)\s*#?\d+|t\d+|#\d+)\s+(?:can\s+|should\s+)?(?:run\s+|be\s+)?(?:in parallel|independent(?:ly)?|parallel|without dependencies|on its own)\b/iu.exec(
        c,
      ))
  ) {
    return { kind: "undepend", ref: parseRef(m[1] ?? ""), on: "all", source };
  }
  if (SEQUENTIAL_WORDS.test(c) && !TASK_MENTION.test(c)) return { kind: "sequential", source };
  if (PARALLEL_WORDS.test(c) && !TASK_MENTION.test(c)) return { kind: "parallel", source };
  return { kind: "constraint", text: source };
}

/** "a task to write docs after task 2" → add "Write docs" depending on task 2. Returns undefined for an empty add. */
function parseAdd(rest: string, source: string): Command | undefined {
  let text = rest
    .replace(/^(?:(?:a|an|one more|another|new|extra|separate|final|last|first)\s+)*/iu, "")
    .replace(/^(?:(?:task|step|item|phase)s?\b\s*)?(?:(?:to|for|that|which|where we|:|-|–)\s*)?/iu, "")
    .trim();
  const atEnd =
    /^(?:a\s+|one\s+)?(?:final|last)\b/iu.test(rest) || /\b(?:at the (?:very )?end|finally|lastly|last)$/iu.test(text);
  const atStart =
    !atEnd &&
    (/^(?:a\s+)?first\b/iu.test(rest) ||
      /\b(?:at the (?:very )?(?:start|beginning)|before everything(?: else)?|first)$/iu.test(text));
  text = text
    .replace(
      /,?\s+(?:at the (?:very )?(?:end|start|beginning)|before everything(?: else)?|finally|lastly|last|first)$/iu,
      "",
    )
    .trim();
  const full = text;
  let after: Ref[] = [];
  const afterMatch = /,?\s+(?:after|once|following)\s+(.+?)(?:\s+is\s+(?:done|finished|complete|completed))?$/iu.exec(
    text,
  );
  if (afterMatch && afterMatch.index > 0) {
    after = parseRefList(afterMatch[1] ?? "");
    text = text.slice(0, afterMatch.index).trim();
  }
  if (!hasWords(text)) return undefined;
  return { kind: "add", text, full, after, atEnd, atStart, source };
}

const ORDINALS: Readonly<Record<string, number>> = {
  first: 1,
  second: 2,
  third: 3,
  fourth: 4,
  fifth: 5,
  sixth: 6,
  seventh: 7,
  eighth: 8,
  ninth: 9,
  tenth: 10,
};

function parseRef(raw: string): Ref {
  const text = unquote(raw)
    .trim()
    .replace(/^(?:the|a)\s+/iu, "")
    .replace(/\s+(?:task|step|item|one)$/iu, "")
    .trim();
  const id = /^(?:tasks?|steps?|items?)\s+(\S+)$/iu.exec(text)?.[1];
  if (id !== undefined && !/^\d+$/u.test(id) && /\d/u.test(id)) return { kind: "words", text: id };
  let m: RegExpExecArray | null;
  if ((m = /^(?:(?:tasks?|steps?|items?|number|no\.?)\s*)?#?(\d{1,6})$/iu.exec(text)))
    return { kind: "number", n: Number(m[1]) };
  if ((m = /^t(\d{1,6})$/iu.exec(text))) return { kind: "number", n: Number(m[1]) };
  if (
    (m = /^(?:(?:task|step|item)\s+)?(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last)$/iu.exec(
      text,
    ))
  ) {
    const word = (m[1] ?? "").toLowerCase();
    return word === "last" ? { kind: "last" } : { kind: "number", n: ORDINALS[word] ?? 1 };
  }
  return { kind: "words", text };
}

function parseRefList(raw: string): Ref[] {
  return raw
    .split(/\s*(?:,|\band\b|&|\+)\s*/iu)
    .map((s) => s.trim())
    .filter(hasWords)
    .map(parseRef);
}

/** Resolves a reference against tasks (id `t<n>` first, then position, then exact id, then best title words). */
function resolveRef(ref: Ref, tasks: readonly { id: string; title: string; text: string }[]): number | undefined {
  if (ref.kind === "last") return tasks.length > 0 ? tasks.length - 1 : undefined;
  if (ref.kind === "number") {
    const byId = tasks.findIndex((t) => t.id === `t${ref.n}`);
    if (byId >= 0) return byId;
    return ref.n >= 1 && ref.n <= tasks.length ? ref.n - 1 : undefined;
  }
  const exact = tasks.findIndex((t) => t.id.toLowerCase() === ref.text.toLowerCase());
  if (exact >= 0) return exact;
  return bestMatch(ref.text, tasks);
}

function describeRef(ref: Ref): string {
  if (ref.kind === "last") return "the last task";
  if (ref.kind === "number") return `task ${ref.n}`;
  return `"${ref.text}"`;
}

// ---------------------------------------------------------------------------------------------------------------
// Commands on the draft (planning)

/** Applies one revision command to the draft; returns the new draft and records a note or a constraint. */
function applyToDraft(
  draft: DraftTask[],
  command: Command,
  roster: readonly AgentInfo[],
  notes: string[],
  constraints: string[],
): DraftTask[] {
  const view = () => draft.map((t, i) => ({ id: `t${i + 1}`, title: t.title, text: t.text }));
  const find = (ref: Ref): DraftTask | undefined => {
    const i = resolveRef(ref, view());
    return i === undefined ? undefined : draft[i];
  };
  const name = (t: DraftTask): string => `t${draft.indexOf(t) + 1} "${t.title}"`;
  const asConstraint = (text: string, why: string): DraftTask[] => {
    constraints.push(text);
    notes.push(`${why}, so I added "${oneLine(text, 200)}" as a constraint to every task.`);
    return draft;
  };

  switch (command.kind) {
    case "constraint":
      return asConstraint(command.text, "I did not read that as a change to the plan");
    case "sequential": {
      draft.forEach((t, i) => (t.deps = i === 0 ? [] : [draft[i - 1] as DraftTask]));
      notes.push("Made the tasks run one after another, in order.");
      return draft;
    }
    case "parallel": {
      for (const t of draft) t.deps = [];
      notes.push("Removed every dependency, so the tasks can run in parallel.");
      return draft;
    }
    case "add": {
      const task: DraftTask = {
        title: makeTitle(command.text, `Step ${draft.length + 1}`),
        text: command.full,
        deps: [],
      };
      const unresolved: string[] = [];
      for (const ref of command.after) {
        const target = find(ref);
        if (target) task.deps.push(target);
        else unresolved.push(describeRef(ref));
      }
      if (command.atEnd) task.deps = [...draft];
      task.deps = [...new Set(task.deps)];
      let next: DraftTask[];
      if (command.atStart) {
        for (const t of draft) if (t.deps.length === 0) t.deps = [task];
        next = [task, ...draft];
      } else {
        next = [...draft, task];
      }
      const where = command.atStart
        ? " first"
        : task.deps.length > 0
          ? ` after ${task.deps.map((d) => `t${next.indexOf(d) + 1}`).join(", ")}`
          : "";
      notes.push(
        `Added t${next.indexOf(task) + 1} "${task.title}"${where}.` +
          (unresolved.length > 0 ? ` I could not find ${unresolved.join(", ")}, so it does not wait for them.` : ""),
      );
      return next;
    }
    case "remove": {
      const targets: DraftTask[] = [];
      for (const ref of command.refs) {
        const target = find(ref);
        if (!target) return asConstraint(command.source, `I found no task matching ${describeRef(ref)}`);
        if (!targets.includes(target)) targets.push(target);
      }
      if (targets.length >= draft.length) {
        return asConstraint(command.source, "I kept the tasks because a plan needs at least one");
      }
      let next = draft;
      for (const target of targets) {
        notes.push(`Removed ${name(target)}.`);
        next = next.filter((t) => t !== target);
        for (const t of next) {
          // Dependents inherit the removed task's dependencies, so the order around it is kept.
          if (t.deps.includes(target)) t.deps = [...new Set([...t.deps.filter((d) => d !== target), ...target.deps])];
        }
      }
      return next;
    }
    case "rename": {
      const target = find(command.ref);
      if (!target || !hasWords(command.title)) {
        return asConstraint(command.source, `I found no task matching ${describeRef(command.ref)}`);
      }
      const before = name(target);
      target.title = makeTitle(command.title, target.title);
      notes.push(`Renamed ${before} to "${target.title}".`);
      return draft;
    }
    case "split": {
      const target = find(command.ref);
      if (!target) return asConstraint(command.source, `I found no task matching ${describeRef(command.ref)}`);
      let parts = command.parts;
      if (parts.length < 2) {
        const own = target.text.split(/\s*;\s*|\s*,\s*(?:and\s+)?|\s+and\s+(?:then\s+)?/u).filter(hasWords);
        parts = own.length >= 2 && own.length <= 6 ? own : [`Implement: ${target.title}`, `Verify: ${target.title}`];
      }
      const before = name(target);
      const pieces: DraftTask[] = [];
      for (const [k, part] of parts.entries()) {
        pieces.push({
          title: makeTitle(part, `${target.title} (part ${k + 1})`),
          text: `${part}\n\n(Part ${k + 1} of ${parts.length} of: ${target.text})`,
          deps: k === 0 ? [...target.deps] : [pieces[k - 1] as DraftTask],
          ...(target.agent !== undefined ? { agent: target.agent } : {}),
        });
      }
      const lastPiece = pieces[pieces.length - 1] as DraftTask;
      const at = draft.indexOf(target);
      const next = [...draft.slice(0, at), ...pieces, ...draft.slice(at + 1)];
      for (const t of next) if (t.deps.includes(target)) t.deps = t.deps.map((d) => (d === target ? lastPiece : d));
      notes.push(`Split ${before} into ${pieces.map((p) => `"${p.title}"`).join(", ")}, one after another.`);
      return next;
    }
    case "depend": {
      const target = find(command.ref);
      if (!target) return asConstraint(command.source, `I found no task matching ${describeRef(command.ref)}`);
      for (const ref of command.on) {
        const on = find(ref);
        if (!on) notes.push(`I found no task matching ${describeRef(ref)} for ${name(target)} to depend on.`);
        else if (on === target) notes.push(`Task ${name(target)} cannot depend on itself.`);
        else if (target.deps.includes(on)) notes.push(`Task ${name(target)} already depends on ${name(on)}.`);
        else if (draftReaches(on, target)) {
          notes.push(
            `I did not make ${name(target)} depend on ${name(on)}: ${name(on)} already depends on it, which would be a cycle.`,
          );
        } else {
          target.deps.push(on);
          notes.push(`Task ${name(target)} now depends on ${name(on)}.`);
        }
      }
      return draft;
    }
    case "undepend": {
      const target = find(command.ref);
      if (!target) return asConstraint(command.source, `I found no task matching ${describeRef(command.ref)}`);
      if (command.on === "all") {
        target.deps = [];
        notes.push(`Task ${name(target)} no longer depends on anything.`);
        return draft;
      }
      for (const ref of command.on) {
        const on = find(ref);
        if (on && target.deps.includes(on)) {
          target.deps = target.deps.filter((d) => d !== on);
          notes.push(`Task ${name(target)} no longer depends on ${name(on)}.`);
        } else {
          notes.push(`Task ${name(target)} did not depend on ${on ? name(on) : describeRef(ref)}.`);
        }
      }
      return draft;
    }
    case "assign": {
      const target = find(command.ref);
      const agent = matchAgent(command.agent, roster);
      if (!target || agent === undefined) {
        return asConstraint(
          command.source,
          target
            ? `No agent in the team matches "${command.agent}"`
            : `I found no task matching ${describeRef(command.ref)}`,
        );
      }
      target.agent = agent;
      const info = roster[agent] as AgentInfo;
      notes.push(`Assigned ${name(target)} to ${info.name || info.agentId} (${info.role}).`);
      return draft;
    }
  }
}

/** True when `from` depends (transitively) on `to` in the draft. */
function draftReaches(from: DraftTask, to: DraftTask): boolean {
  const seen = new Set<DraftTask>([from]);
  const stack = [from];
  while (stack.length > 0) {
    const t = stack.pop() as DraftTask;
    if (t === to) return true;
    for (const d of t.deps) {
      if (!seen.has(d)) {
        seen.add(d);
        stack.push(d);
      }
    }
  }
  return false;
}

/** The roster index whose agentId, name or role matches the user's words (exact first, then containment). */
function matchAgent(words: string, roster: readonly AgentInfo[]): number | undefined {
  const w = words.trim().toLowerCase();
  if (w === "") return undefined;
  const fields = (a: AgentInfo): string[] => [a.agentId, a.name, a.role].map((f) => f.toLowerCase());
  const exact = roster.findIndex((a) => fields(a).includes(w));
  if (exact >= 0) return exact;
  const partial = roster.findIndex((a) => fields(a).some((f) => f !== "" && (f.includes(w) || w.includes(f))));
  return partial >= 0 ? partial : undefined;
}

/** Assigns ids `t1…`, instances round-robin (or as pinned), descriptions with goal context and constraints. */
/** At least this many instances (seats) when the roster is smaller and the plan has enough tasks. */
const MIN_PARALLEL_SEATS = 3;

function finishDraft(
  goal: string,
  draft: readonly DraftTask[],
  roster: readonly AgentInfo[],
  constraints: string[],
): DraftPlan {
  const id = new Map(draft.map((t, i) => [t, `t${i + 1}`]));
  // Seats: one instance per roster agent, plus extra instances of the same agents (round-robin) up to
  // MIN_PARALLEL_SEATS, so independent tasks can run side by side even with a single agent.
  const seatCount = roster.length === 0 ? 0 : Math.max(roster.length, Math.min(MIN_PARALLEL_SEATS, draft.length));
  const used = new Set<number>();
  const seatOf = draft.map((t, i) => {
    if (seatCount === 0) return -1;
    const seat = t.agent !== undefined && t.agent < roster.length ? t.agent : i % seatCount;
    used.add(seat);
    return seat;
  });
  const order = [...used].sort((a, b) => a - b);
  const instanceIdOf = new Map(order.map((seat, k) => [seat, `i${k + 1}`]));
  const instances: Instance[] =
    roster.length === 0
      ? [{ ...LEADER_INSTANCE }]
      : order.map((seat) => {
          const info = roster[seat % roster.length] as AgentInfo;
          const copy = Math.floor(seat / roster.length);
          const name = info.name ? (copy === 0 ? info.name : `${info.name} #${copy + 1}`) : undefined;
          return {
            instanceId: instanceIdOf.get(seat) as string,
            agentId: info.agentId,
            role: clip(info.role || "worker", 200),
            ...(name ? { name: clip(name, 200) } : {}),
          };
        });
  const context = goalContext(goal, constraints);
  const tasks: Task[] = draft.map((t, i) => ({
    taskId: id.get(t) as string,
    title: clip(t.title, 500) || `Step ${i + 1}`,
    description: clip(`${t.text.trim()}${context}`, MAX_DESCRIPTION),
    instanceId: roster.length === 0 ? LEADER_INSTANCE.instanceId : (instanceIdOf.get(seatOf[i] as number) as string),
    dependsOn: [...new Set(t.deps)].filter((d) => id.has(d)).map((d) => id.get(d) as string),
  }));
  if (!validatePlanGraph(instances, tasks).ok) {
    // Unreachable by construction (every revision keeps the draft acyclic); keep only backward edges to be safe.
    const position = new Map(tasks.map((t, i) => [t.taskId, i]));
    tasks.forEach((t, i) => (t.dependsOn = t.dependsOn.filter((d) => (position.get(d) ?? i) < i)));
  }
  const name = planName(goal);
  const summary = clip(`${teamPhrase(tasks.length, instances)} for: ${oneLine(goal, 1_000) || name}`, 20_000);
  return { name, summary, instances, tasks };
}

/** "3 tasks on 2 agents". */
function teamPhrase(tasks: number, instances: readonly Instance[]): string {
  const agents = new Set(instances.map((i) => i.agentId)).size;
  const taskWord = `${tasks} ${tasks === 1 ? "task" : "tasks"}`;
  const agentWord = `${agents} ${agents === 1 ? "agent" : "agents"}`;
  if (instances.length === agents) return `${taskWord} on ${agentWord}`;
  return `${taskWord} on ${instances.length} instances of ${agentWord}`;
}

function goalContext(goal: string, constraints: readonly string[]): string {
  const g = goal.trim();
  let text = g === "" ? "" : `\n\nOverall goal:\n${clip(g, MAX_GOAL_CONTEXT)}`;
  if (constraints.length > 0)
    text += `\n\nConstraints from the user:\n${constraints.map((c) => `- ${oneLine(c, 1_000)}`).join("\n")}`;
  return text;
}

/** The plan's name: the first sentence of the goal's first line with words, as a title. */
function planName(goal: string): string {
  const first = goal
    .split(/\r?\n/u)
    .map((l) => l.replace(/^\s*(?:#+|[-*+•]|\d+[.)])\s*/u, "").trim())
    .find(hasWords);
  if (first === undefined) return "Untitled goal";
  const sentence = first.split(/(?<=[.!?])\s+(?=[^\p{Ll}\s])|(?<=[。！？])/u)[0] ?? first;
  return makeTitle(sentence, "Untitled goal");
}

/** The leader's message about a plan: one line per task, then what changed and the constraints. */
function planMessage(plan: DraftPlan, notes: readonly string[], constraints: readonly string[]): string {
  const roleOf = new Map(plan.instances.map((i) => [i.instanceId, i.name ? `${i.name}, ${i.role}` : i.role]));
  const lines = [`Here is the plan "${plan.name}": ${teamPhrase(plan.tasks.length, plan.instances)}.`, ""];
  for (const t of plan.tasks) {
    const after = t.dependsOn.length > 0 ? ` (after ${t.dependsOn.join(", ")})` : "";
    lines.push(`${t.taskId}. ${t.title} — ${roleOf.get(t.instanceId) ?? t.instanceId}${after}`);
  }
  if (notes.length > 0) lines.push("", "Changes from your messages:", ...notes.map((n) => `- ${n}`));
  if (constraints.length > 0)
    lines.push("", "Every task also follows:", ...constraints.map((c) => `- ${oneLine(c, 300)}`));
  lines.push(
    "",
    'Confirm to start, or tell me what to change (e.g. "add a task to write docs", "remove task 2", ' +
      '"make t3 depend on t1", "run them in order", "split task 2").',
  );
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------------------------
// Commands on a live plan (execution)

type Proposal =
  | { kind: "text"; text: string }
  | { kind: "mutations"; mutations: Mutation[]; summary: string; done: string };

/** Translates one command into mutations against the live plan, or into a plain answer. */
function mutationsFor(
  command: Command,
  plan: Plan,
  states: readonly TaskState[],
  goal: string,
  roster: readonly AgentInfo[],
): Proposal {
  const view = plan.tasks.map((t) => ({ id: t.taskId, title: t.title, text: t.description }));
  const find = (ref: Ref): Task | undefined => {
    const i = resolveRef(ref, view);
    return i === undefined ? undefined : plan.tasks[i];
  };
  const label = (t: Task): string => `${t.taskId} "${t.title}"`;
  const notFound = (ref: Ref): Proposal => ({ kind: "text", text: `I found no task matching ${describeRef(ref)}.` });

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
    case "add": {
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
      const instance = plan.instances[plan.tasks.length % plan.instances.length] as Instance;
      const task: Task = {
        taskId,
        title: makeTitle(command.text, `Task ${taskId}`),
        description: clip(`${command.full.trim()}${goalContext(goal, [])}`, MAX_DESCRIPTION),
        instanceId: instance.instanceId,
        dependsOn: [...new Set(deps)],
      };
      const after = task.dependsOn.length > 0 ? ` after ${joinList(task.dependsOn)}` : "";
      const missing = unresolved.length > 0 ? ` (I found no task matching ${unresolved.join(", ")} to wait for)` : "";
      return {
        kind: "mutations",
        mutations: [{ op: "addTask", task }],
        summary: `add "${task.title}"`,
        done: `added ${label(task)}${after}${missing}`,
      };
    }
    case "remove": {
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
    case "depend": {
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
    case "undepend": {
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

function matchInstance(
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
function nextTaskId(plan: Plan): string {
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
function withStates(plan: Plan, states: readonly TaskState[]): TaskState[] {
  const byId = new Map(states.map((s) => [s.taskId, s]));
  return plan.tasks.map((t) => {
    const s = byId.get(t.taskId);
    return s ? { ...s, ...t } : { ...t, status: "pending", attempts: 0 };
  });
}

function progressLine(tasks: readonly TaskState[]): string {
  const count = (status: TaskState["status"]): number => tasks.filter((t) => t.status === status).length;
  const parts = [`${count("completed")} of ${tasks.length} tasks completed`];
  for (const s of ["running", "waiting", "failed", "skipped"] as const)
    if (count(s) > 0) parts.push(`${count(s)} ${s}`);
  return `Progress: ${parts.join(", ")}.`;
}

// ===============================================================================================================
// Dialogue and text helpers

/** Every user entry of the dialogue except the first one whose text is the goal itself. */
function revisionMessages(goal: string, dialogue: readonly DialogueEntry[]): string[] {
  const out: string[] = [];
  let goalSeen = false;
  for (const entry of dialogue) {
    if (entry.role !== "user") continue;
    if (!goalSeen && entry.text.trim() === goal.trim()) {
      goalSeen = true;
      continue;
    }
    if (hasWords(entry.text)) out.push(entry.text);
  }
  return out;
}

/** Calls `onText` with the text in up to four chunks split at line boundaries; the chunks join to `text`. */
function stream(text: string, onText: (text: string) => void): void {
  const lines = text.split(/(?<=\n)/u);
  const size = Math.ceil(lines.length / Math.min(4, lines.length));
  for (let i = 0; i < lines.length; i += size) onText(lines.slice(i, i + size).join(""));
}

const ORDER_LEADS = [
  FINAL_LEAD,
  SEQ_LEAD,
  PAR_LEAD,
  FIRST_LEAD,
  STEP_REF_LEAD,
  CLAUSE_LEAD,
  CJK_FINAL_LEAD,
  CJK_SEQ_LEAD,
  CJK_PAR_LEAD,
  CJK_FIRST_LEAD,
];

/**
 * A short title (≤ 80 characters) from item text: ordering words and leading clauses stripped, first letter capital,
 * the whole text if it fits, else its first clause, else cut at a word boundary with "…". `fallback` if nothing is left.
 */
export function makeTitle(text: string, fallback: string): string {
  let t = text
    .replace(/\s+/gu, " ")
    .replace(/\*\*|__/gu, "")
    .trim();
  for (let k = 0; k < 4; k += 1) {
    const before = t;
    for (const lead of ORDER_LEADS) t = t.replace(lead, "");
    t = t.replace(POLITE, "");
    if (t === before) break;
  }
  t = t.replace(/[\s.;:,!?。！？…]+$/u, "").trim();
  if (!hasWords(t)) t = fallback;
  const chars = Array.from(t);
  if (chars.length === 0) return fallback;
  chars[0] = (chars[0] as string).toUpperCase();
  t = chars.join("");
  if (chars.length <= MAX_TITLE) return t;
  const clause = t.split(/[,;:]\s|\s[-–—]\s|\s\(/u)[0] ?? "";
  const clauseLength = Array.from(clause).length;
  if (clauseLength >= 8 && clauseLength <= MAX_TITLE) return clause.trim();
  return clipTitle(t);
}

/** "Analyse: <subject>" within MAX_TITLE. */
function prefixTitle(verb: string, subject: string): string {
  return clipTitle(`${verb}: ${subject}`);
}

/** Cuts a title to MAX_TITLE code points at a word boundary, marking the cut with "…". */
function clipTitle(title: string): string {
  const chars = Array.from(title);
  if (chars.length <= MAX_TITLE) return title;
  const cut = chars.slice(0, MAX_TITLE - 1).join("");
  const space = cut.lastIndexOf(" ");
  return `${(space >= 40 ? cut.slice(0, space) : cut).replace(/[\s,;:.]+$/u, "")}…`;
}

/** Appends `suffix` to `title`, shortening the title so the whole stays within MAX_TITLE. */
function withSuffix(title: string, suffix: string): string {
  const room = MAX_TITLE - Array.from(suffix).length;
  const chars = Array.from(title);
  return `${
    chars.length <= room
      ? title
      : `${chars
          .slice(0, room - 1)
          .join("")
          .trimEnd()}…`
  }${suffix}`;
}

const STOPWORDS = new Set(
  (
    "a an the and or but to of for in on at by with from into onto as is are be been was were it its this that these " +
    "those then than once after before when done finished complete completed ready task tasks step steps item items " +
    "part make do does please all some any one also new we our you your should must can will need needs to of in on " +
    "at by as is it be do we or an up so if no my me us"
  ).split(" "),
);

/** Significant, lightly stemmed words of a text (Unicode letters and digits). */
function keywords(text: string): Set<string> {
  const out = new Set<string>();
  for (const raw of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    if (raw.length < 2 || STOPWORDS.has(raw)) continue;
    out.add(stem(raw));
  }
  return out;
}

function stem(word: string): string {
  if (word.length > 5 && word.endsWith("ing")) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith("ed")) return word.slice(0, -2);
  if (word.length > 4 && word.endsWith("es")) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith("s")) return word.slice(0, -1);
  return word;
}

/** The index of the candidate whose title (weight 2) and text share most keywords with `words`; ties → earliest. */
function bestMatch(words: string, candidates: readonly { title: string; text: string }[]): number | undefined {
  return bestMatchWords(
    words,
    candidates.map((c) => ({ title: keywords(c.title), text: keywords(c.text) })),
  );
}

/** `bestMatch` over precomputed keyword sets. Undefined when no candidate shares a keyword. */
function bestMatchWords(words: string, candidates: readonly ItemWords[]): number | undefined {
  const wanted = keywords(words);
  if (wanted.size === 0) return undefined;
  let best: number | undefined;
  let bestScore = 0;
  for (const [i, c] of candidates.entries()) {
    let score = 0;
    for (const w of wanted) score += (c.title.has(w) ? 2 : 0) + (c.text.has(w) ? 1 : 0);
    if (score > bestScore) {
      best = i;
      bestScore = score;
    }
  }
  return best;
}

function hasWords(text: string): boolean {
  return /[\p{L}\p{N}]/u.test(text);
}

function letterCount(text: string): number {
  return (text.match(/[\p{L}\p{N}]/gu) ?? []).length;
}

function unquote(text: string): string {
  return text
    .trim()
    .replace(/^["'“”‘’`«]+|["'“”‘’`»]+$/gu, "")
    .trim();
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Collapses whitespace and clips to `max` characters with "…". */
function oneLine(text: string, max: number): string {
  return clip(text.replace(/\s+/gu, " ").trim(), max);
}

/** Clips to at most `max` UTF-16 units without splitting a surrogate pair, marking the cut with "…". */
function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}

function joinList(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1] ?? ""}`;
}
