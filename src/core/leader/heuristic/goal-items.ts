/**
 * Goal → draft tasks for the heuristic leader: items from bullets, numbers or prose, grouped to at most 40, with
 * the dependencies their ordering words give, and the acceptance criteria of a goal run. Pure.
 */
import { validatePlanGraph } from "../../dag/graph.js";
import type { AcceptanceCriterion } from "../../ports.js";
import { allBefore, itemDependencies, itemsBefore } from "./ordering.js";
import type { ItemOrder } from "./ordering.js";
import { makeTitle, plainItem, planName, prefixTitle, withSuffix } from "./titles.js";
import { clip, hasWords, keywords, letterCount, oneLine } from "./words.js";

/** More work items than this are grouped so a plan stays readable. */
export const MAX_TASKS = 40;
/** The goal's draft tasks and, for each, the acceptance criterion it serves (one per item; one for a 1-item goal). */
export function goalCriteria(goal: string): {
  draft: DraftTask[];
  criteria: AcceptanceCriterion[];
  criterionOf: Map<DraftTask, string>;
} {
  const draft = draftFromGoal(goal);
  const criterionOf = new Map<DraftTask, string>();
  if (splitGoal(goal).length <= 1) {
    for (const t of draft) criterionOf.set(t, "c1");
    const text = oneLine(plainItem(goal), 1_000) || "The goal is done.";
    return { draft, criteria: [{ id: "c1", text }], criterionOf };
  }
  const criteria = draft.map((t, i) => {
    criterionOf.set(t, `c${i + 1}`);
    return { id: `c${i + 1}`, text: clip(oneLine(plainItem(t.text), 1_000) || t.title, 1_000) };
  });
  return { draft, criteria, criterionOf };
}

// ===============================================================================================================
// Goal → draft

/** One task of the draft, before ids and instances are assigned. Dependencies are object references. */
export interface DraftTask {
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
export function draftFromGoal(goal: string): DraftTask[] {
  const items = splitGoal(goal);
  if (items.length <= 1) return smallPlan(goal);
  const words = items.map((item) => ({ title: keywords(makeTitle(item.text, "")), text: keywords(item.text) }));
  const byNumber = new Map<number, number>();
  for (const [i, item] of items.entries()) {
    if (item.number !== undefined && !byNumber.has(item.number)) byNumber.set(item.number, i);
  }
  const orders: ItemOrder[] = [];
  for (const [i, item] of items.entries()) {
    orders.push(itemDependencies(item.text, i, byNumber, items.length, words, orders));
  }
  return groupItems(
    items,
    orders.map((o) => o.deps),
  );
}

export const BULLET = /^(\s*)(?:[-*+•‣◦▪]|\[[ xX]\])\s+(?:\[[ xX]\]\s+)?(.*)$/u;
export const NUMBERED = /^(\s*)(?:\(?(\d{1,4})[.)]|(?:step|phase|stage|part|task)\s*(\d{1,4})\s*[:.)\-–—]?)\s+(.*)$/iu;

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
export function splitProse(goal: string): string[] {
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
export function smallPlan(goal: string): DraftTask[] {
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

/** True when the edges (with `allBefore` markers expanded) contain a cycle; only forward edges can close one. */
export function hasCycle(deps: readonly number[][]): boolean {
  const tasks = deps.map((d, i) => ({
    taskId: String(i),
    instanceId: "x",
    dependsOn: [...expand(d)].map(String),
  }));
  return !validatePlanGraph([{ instanceId: "x" }], tasks).ok;
}

/** A dependency list with its `allBefore` markers expanded to item indices. */
function expand(list: readonly number[]): Set<number> {
  const out = new Set<number>();
  for (const j of list) {
    const k = itemsBefore(j);
    if (k === undefined) out.add(j);
    else for (const i of range(k)) out.add(i);
  }
  return out;
}

export function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/**
 * Items become draft tasks. More than MAX_TASKS items are grouped into consecutive runs first, and dependencies are
 * lifted to the groups. If forward references ("after step 5" in item 2) close a cycle, every forward edge is dropped.
 */
export function groupItems(items: readonly GoalItem[], itemDeps: readonly number[][]): DraftTask[] {
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
      const k = itemsBefore(j);
      if (k === undefined) {
        if (groupOf(j) !== g) set.add(groupOf(j));
      } else if (k > 0) {
        // Every item before k: the groups wholly before this one, up to the group of item k - 1.
        set.add(allBefore(Math.min(g, groupOf(k - 1) + 1)));
      }
    }
  }
  let lists = groupDeps.map((set) => [...set].sort((a, b) => a - b));
  if (hasCycle(lists)) lists = lists.map((list, g) => list.filter((j) => j < g));
  for (const [g, list] of lists.entries()) {
    const targets = [...expand(list)].filter((j) => j !== g).sort((a, b) => a - b);
    (drafts[g] as DraftTask).deps = targets.map((j) => drafts[j] as DraftTask);
  }
  return drafts;
}
