/**
 * Word helpers of the heuristic leader: keywords with light stemming, best keyword match, clipping. Pure.
 */

export const MAX_DESCRIPTION = 20_000;
/** Keywords of one goal item, computed once (title words weigh double in `bestMatch`). */
export interface ItemWords {
  title: Set<string>;
  text: Set<string>;
}

export const STOPWORDS = new Set(
  (
    "a an the and or but to of for in on at by with from into onto as is are be been was were it its this that these " +
    "those then than once after before when done finished complete completed ready task tasks step steps item items " +
    "part make do does please all some any one also new we our you your should must can will need needs to of in on " +
    "at by as is it be do we or an up so if no my me us"
  ).split(" "),
);

/** Significant, lightly stemmed words of a text (Unicode letters and digits). */
export function keywords(text: string): Set<string> {
  const out = new Set<string>();
  for (const raw of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    if (raw.length < 2 || STOPWORDS.has(raw)) continue;
    out.add(stem(raw));
  }
  return out;
}

export function stem(word: string): string {
  if (word.length > 5 && word.endsWith("ing")) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith("ed")) return word.slice(0, -2);
  if (word.length > 4 && word.endsWith("es")) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith("s")) return word.slice(0, -1);
  return word;
}

/** The index of the candidate whose title (weight 2) and text share most keywords with `words`; ties → earliest. */
export function bestMatch(words: string, candidates: readonly { title: string; text: string }[]): number | undefined {
  return bestMatchWords(
    words,
    candidates.map((c) => ({ title: keywords(c.title), text: keywords(c.text) })),
  );
}

/** `bestMatch` over precomputed keyword sets. Undefined when no candidate shares a keyword. */
export function bestMatchWords(words: string, candidates: readonly ItemWords[]): number | undefined {
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

export function hasWords(text: string): boolean {
  return /[\p{L}\p{N}]/u.test(text);
}

export function letterCount(text: string): number {
  return (text.match(/[\p{L}\p{N}]/gu) ?? []).length;
}

export function unquote(text: string): string {
  return text
    .trim()
    .replace(/^["'“”‘’`«]+|["'“”‘’`»]+$/gu, "")
    .trim();
}

export function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Collapses whitespace and clips to `max` characters with "…". */
export function oneLine(text: string, max: number): string {
  return clip(text.replace(/\s+/gu, " ").trim(), max);
}

/** Clips to at most `max` UTF-16 units without splitting a surrogate pair, marking the cut with "…". */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}

export function joinList(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1] ?? ""}`;
}
