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

export const PARALLEL_ANYWHERE =
  /\b(?:in parallel|meanwhile|concurrently|independently|at the same time|simultaneously)\b/iu;
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

/** Marker in an item's dependency list: "every previous item" (kept symbolic so huge goals stay linear). */
export const ALL_PREVIOUS = -1;
/** How many preceding items a word reference ("once the parser is done") is matched against. */
export const MATCH_WINDOW = 200;

/**
 * The indices of the items `items[index]` depends on, from its ordering words: "finally"/"lastly" → every previous
 * item (`ALL_PREVIOUS`); "then"/"next"/"after that"/"once that is done" → the previous item; "after step N" → that
 * item; "once the X is done"/"based on X" → the preceding item whose words best match X, else the previous item;
 * "after X" → the best match only; "in parallel"/"meanwhile"/"also" → only explicit step references. No ordering
 * word → no dependency (numbered lists are not sequential by themselves).
 */
export function itemDependencies(
  text: string,
  index: number,
  byNumber: ReadonlyMap<number, number>,
  count: number,
  words: readonly ItemWords[],
): number[] {
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
