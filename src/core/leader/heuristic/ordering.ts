/**
 * Ordering words of the heuristic leader ("then", "finally", "in parallel", "based on X", "after step N") and the
 * dependencies they give a goal item (issue 15, Build 4). Pure.
 */
import { bestMatchWords } from "./words.js";
import type { ItemWords } from "./words.js";

// ---------------------------------------------------------------------------------------------------------------
// Ordering words → dependencies

/** End of a lead word: not followed by a letter/digit, nor by `.js`-style punctuation glued to one. */
export const END = String.raw`(?![\p{L}\p{N}]|[.\-/][\p{L}\p{N}])[,:]?\s*`;
export const FINAL_LEAD = new RegExp(
  String.raw`^(?:and\s+)?(?:finally|lastly|last of all|last(?=\s*[,:])|at the (?:very )?end|in the end|to (?:finish|wrap up|conclude)|when (?:everything|all) (?:else )?is (?:done|finished|complete|completed))` +
    END,
  "iu",
);
export const SEQ_LEAD = new RegExp(
  String.raw`^(?:and\s+)?(?:then|after that|after this|afterwards?|next|subsequently|following that|once (?:that|this|it|these|those)(?: (?:is|are|has been|have been))? (?:done|finished|complete|completed|ready|in place)|once done|when (?:that|this|it)(?: is)? (?:done|finished|complete|completed))` +
    END,
  "iu",
);
export const PAR_LEAD = new RegExp(
  String.raw`^(?:and\s+)?(?:also|in parallel|meanwhile|in the meantime|at the same time|simultaneously|independently|separately|additionally)` +
    END,
  "iu",
);
export const FIRST_LEAD = new RegExp(String.raw`^(?:first(?:ly)?|to (?:start|begin)(?: with)?|initially)` + END, "iu");
/** A few Chinese/Japanese ordering words; scripts without spaces need no word end. */
export const CJK_FINAL_LEAD = /^(?:最后|最終的に|最後に)[，,、：:]?\s*/u;
export const CJK_SEQ_LEAD = /^(?:然后|接着|之后|随后|次に|その後)[，,、：:]?\s*/u;
export const CJK_PAR_LEAD = /^(?:同时|另外|并行|同時に)[，,、：:]?\s*/u;
export const CJK_FIRST_LEAD = /^(?:首先|まず)[，,、：:]?\s*/u;
export const STEP_REF_LEAD =
  /^after\s+(?:steps?|items?|tasks?|points?|#)\s*#?\d+(?:\s*(?:,|and|&|\+)\s*#?\d+)*\s*[,:]?\s*/iu;
export const CLAUSE_LEAD =
  /^(?:once|after|based on|building on|using the (?:results?|output|findings) of|when\s+[^,]{1,80}?\s+(?:is|are)\s+(?:done|finished|complete|completed|ready))\s*[^,]{0,80},\s*/iu;

/** "… in parallel"/"… at the same time" anywhere in an item: it runs beside the previous item. */
export const PARALLEL_ANYWHERE_SHARED = /\b(?:in parallel|meanwhile|concurrently|at the same time|simultaneously)\b/iu;
/** "… independently" anywhere in an item: no dependency. */
export const PARALLEL_ANYWHERE = /\bindependently\b/iu;
export const STEP_REFS =
  /\bafter\s+(?:steps?|items?|tasks?|points?|#)\s*#?(\d{1,4})((?:\s*(?:,|and|&|\+)\s*#?\d{1,4})*)/giu;
export const ALL_REF =
  /\b(?:once|when|after)\s+(?:everything|all\s+(?:the\s+)?(?:other\s+|previous\s+|above\s+)?(?:steps|tasks|items|work))\b/iu;
export const ONCE_REF =
  /\b(?:once|when)\s+(?:the\s+)?(.{3,60}?)\s+(?:is|are|has been|have been)\s+(?:done|finished|complete|completed|ready|in place|written|merged|implemented|built|fixed)\b/iu;
export const BASED_REF =
  /\b(?:based on|building on|using the (?:results?|output|findings) (?:of|from))\s+(?:the\s+)?([^,.;]{3,60})/iu;
export const AFTER_REF =
  /\bafter\s+(?!steps?\b|items?\b|tasks?\b|points?\b|that\b|this\b|#)(?:the\s+)?([^,.;]{3,60})/iu;

/**
 * Marker in an item's dependency list for "every item before index k": the value `allBefore(k)` = `-(k + 1)` (kept
 * symbolic so huge goals stay linear); `itemsBefore` reads it back. Non-negative values are item indices.
 */
export function allBefore(k: number): number {
  return -(k + 1);
}

/** The `k` of an `allBefore(k)` marker; undefined for an item index. */
export function itemsBefore(marker: number): number | undefined {
  return marker < 0 ? -marker - 1 : undefined;
}

/** How many preceding items a word reference ("once the parser is done") is matched against. */
export const MATCH_WINDOW = 200;

/**
 * Leads of an item that runs beside the previous one and so shares its dependencies ("in parallel", "meanwhile",
 * "at the same time", …); "also", "separately", "independently", "additionally" mean no dependency at all.
 */
const SHARE_LEAD = new RegExp(
  String.raw`^(?:and\s+)?(?:in parallel|meanwhile|in the meantime|at the same time|simultaneously|concurrently)` + END,
  "iu",
);
const CJK_SHARE_LEAD = /^(?:同时|并行|同時に)[，,、：:]?\s*/u;

/** What the ordering words of one goal item say: its dependencies and whether it runs beside the previous item. */
export interface ItemOrder {
  /** Item indices, or an `allBefore(k)` marker. */
  deps: number[];
  /** True for "in parallel"/"meanwhile" items: they share the previous item's dependencies (issue 15, Build 4). */
  parallel: boolean;
}

/**
 * The dependencies of `items[index]` from its ordering words (issue 15, Build 4: ordering words attach to the item
 * they refer to), given the orders of the items before it:
 * - "after step N" → that item (added to anything below);
 * - "in parallel"/"meanwhile"/"at the same time" (leading, or anywhere in the item) → the previous item's
 *   dependencies (it runs beside that item); "also"/"separately"/"independently" → nothing more;
 * - "finally"/"lastly"/"once everything is done" → every previous item;
 * - "once the X is done"/"based on X" → the preceding item whose words best match X (the item it names wins over a
 *   "then" in the same item);
 * - otherwise "then"/"next"/"after that" → the previous item and, when that item ran in parallel, its whole parallel
 *   group (the group's first item and every "in parallel" item after it);
 * - "once …"/"based on …" naming nothing found → the previous item; "after X" → the best match only.
 * No ordering word → no dependency (numbered lists are not sequential by themselves). Pure.
 */
export function itemDependencies(
  text: string,
  index: number,
  byNumber: ReadonlyMap<number, number>,
  count: number,
  words: readonly ItemWords[],
  before: readonly ItemOrder[],
): ItemOrder {
  const deps = new Set<number>();
  for (const match of text.matchAll(STEP_REFS)) {
    const numbers = [match[1] ?? "", ...(match[2] ?? "").split(/\D+/u)].filter((s) => s !== "").map(Number);
    for (const n of numbers) {
      const target = byNumber.get(n) ?? (n >= 1 && n <= count ? n - 1 : undefined);
      if (target !== undefined && target !== index) deps.add(target);
    }
  }
  if (index === 0) return { deps: [...deps], parallel: false };
  if (SHARE_LEAD.test(text) || CJK_SHARE_LEAD.test(text) || PARALLEL_ANYWHERE_SHARED.test(text)) {
    for (const d of before[index - 1]?.deps ?? []) deps.add(d);
    return { deps: [...deps], parallel: true };
  }
  if (PAR_LEAD.test(text) || CJK_PAR_LEAD.test(text) || PARALLEL_ANYWHERE.test(text)) {
    return { deps: [...deps], parallel: false };
  }
  if (FINAL_LEAD.test(text) || CJK_FINAL_LEAD.test(text) || ALL_REF.test(text)) {
    return { deps: [...deps, allBefore(index)], parallel: false };
  }
  const window = Math.max(0, index - MATCH_WINDOW);
  const near = (phrase: string): number | undefined => {
    const hit = bestMatchWords(phrase, words.slice(window, index));
    return hit === undefined ? undefined : hit + window;
  };
  const once = ONCE_REF.exec(text) ?? BASED_REF.exec(text);
  const named = once ? near(once[1] ?? "") : undefined;
  if (named !== undefined) deps.add(named);
  else if (SEQ_LEAD.test(text) || CJK_SEQ_LEAD.test(text)) {
    for (const d of previousGroup(index, before)) deps.add(d);
  } else if (once) deps.add(index - 1);
  const after = AFTER_REF.exec(text);
  if (after && deps.size === 0) {
    const target = near(after[1] ?? "");
    if (target !== undefined) deps.add(target);
  }
  return { deps: [...deps], parallel: false };
}

/** The previous item and, when it ran in parallel, the items of its parallel group back to the group's first one. */
function previousGroup(index: number, before: readonly ItemOrder[]): number[] {
  const group = [index - 1];
  for (let j = index - 1; j > 0 && before[j]?.parallel === true; j -= 1) group.push(j - 1);
  return group;
}

export const ORDER_LEADS = [
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

/** Polite lead-ins ("please", "can you") that are not part of a title. */
export const POLITE =
  /^(?:please|pls|kindly|can you|could you|would you|i want you to|i'd like you to|let's|lets|ok(?:ay)?,?|and)\s+/iu;
