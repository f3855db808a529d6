/**
 * Titles and plan names of the heuristic leader: ordering words and list markers stripped, ≤ 80 characters. Pure.
 */
import { ORDER_LEADS, POLITE } from "./ordering.js";
import { hasWords } from "./words.js";

/** Longest title the heuristic leader writes (the schema allows 500). */
export const MAX_TITLE = 80;
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
export function prefixTitle(verb: string, subject: string): string {
  return clipTitle(`${verb}: ${subject}`);
}

/** Cuts a title to MAX_TITLE code points at a word boundary, marking the cut with "…". */
export function clipTitle(title: string): string {
  const chars = Array.from(title);
  if (chars.length <= MAX_TITLE) return title;
  const cut = chars.slice(0, MAX_TITLE - 1).join("");
  const space = cut.lastIndexOf(" ");
  return `${(space >= 40 ? cut.slice(0, space) : cut).replace(/[\s,;:.]+$/u, "")}…`;
}

/** Appends `suffix` to `title`, shortening the title so the whole stays within MAX_TITLE. */
export function withSuffix(title: string, suffix: string): string {
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

/** The plan's name: the first sentence of the goal's first line with words, as a title. */
export function planName(goal: string): string {
  const first = goal
    .split(/\r?\n/u)
    .map((l) => l.replace(/^\s*(?:#+|[-*+•]|\d+[.)])\s*/u, "").trim())
    .find(hasWords);
  if (first === undefined) return "Untitled goal";
  const sentence = first.split(/(?<=[.!?])\s+(?=[^\p{Ll}\s])|(?<=[。！？])/u)[0] ?? first;
  return makeTitle(sentence, "Untitled goal");
}
