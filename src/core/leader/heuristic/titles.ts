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
  let t = stripLeads(text);
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

/** Whitespace collapsed, bold markers, list markers, ordering words, leading clauses and polite lead-ins dropped. */
function stripLeads(text: string): string {
  let t = text
    .replace(/\s+/gu, " ")
    .replace(/\*\*|__/gu, "")
    .trim()
    .replace(/^(?:[-*+•‣◦▪]|\[[ xX]\]|\(?\d{1,4}[.)])\s+/u, "");
  for (let k = 0; k < 4; k += 1) {
    const before = t;
    for (const lead of ORDER_LEADS) t = t.replace(lead, "");
    t = t.replace(POLITE, "");
    if (t === before) break;
  }
  return t;
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

/** A goal line that is a list item (bullet, checkbox or number), not a heading or prose. */
const LIST_LINE = /^\s*(?:[-*+•‣◦▪]|\[[ xX]\]|\(?\d{1,4}[.)]|(?:step|phase|stage|part|task)\s*\d{1,4}\b)/iu;

/**
 * The plan's name, which becomes the product's title (issue 15, Build 4: a name that summarises the goal; issue 28:
 * one title everywhere, so it must tell products apart, not repeat the first task). When the goal opens with a line
 * of its own (a heading or a sentence before a list), that line's first sentence, as a title. When `taskTitles` has
 * two or more titles and the goal opens straight with its list, or has no list at all (prose: its first sentence is
 * the first task), a summary of what the tasks work on: each title without its leading verb and ordering clauses
 * ("Write release notes based on the changelog" → "release notes"), joined ("Changelog, API reference and release
 * notes"), with "and N more" when they do not fit in 80 characters. Never empty.
 */
export function planName(goal: string, taskTitles: readonly string[] = []): string {
  const lines = goal.split(/\r?\n/u);
  const firstLine = lines.find(hasWords);
  if (firstLine === undefined) return "Untitled goal";
  const first = firstLine.replace(/^\s*(?:#+|[-*+•‣◦▪]|\[[ xX]\]|\d+[.)])\s*/u, "").trim();
  const sentence = first.split(/(?<=[.!?])\s+(?=[^\p{Ll}\s])|(?<=[。！？])/u)[0] ?? first;
  // Prose of one sentence ("Write the guide, then review it") names itself; more sentences or lines are a list.
  const prose = !lines.some((l) => LIST_LINE.test(l)) && sentence.trim() !== goal.trim();
  if ((prose || LIST_LINE.test(firstLine)) && taskTitles.length >= 2) {
    const summary = summaryName(taskTitles);
    if (summary !== undefined) return summary;
  }
  return makeTitle(sentence, "Untitled goal");
}

/** Imperative verbs a task title commonly starts with; the summary names what they act on. */
const LEADING_VERBS = new Set(
  (
    "add analyse analyze audit benchmark build check clean collect configure create debug define deploy describe " +
    "design document draft edit explain find fix generate implement improve install investigate measure merge " +
    "migrate move optimise optimize outline plan polish port prepare profile publish refactor release remove rename " +
    "research review rewrite run set ship sketch split summarise summarize support tag test translate update " +
    "upgrade validate verify write"
  ).split(" "),
);

const PRONOUN = /^(?:it|them|this|that|these|those)$/iu;

/** "Changelog, API reference and release notes" from task titles; undefined when no title names anything. */
function summaryName(titles: readonly string[]): string | undefined {
  const seen = new Set<string>();
  const objects: string[] = [];
  for (const title of titles) {
    const object = objectOf(title);
    // A pronoun ("review it") names nothing of its own.
    if (object === "" || PRONOUN.test(object) || seen.has(object.toLowerCase())) continue;
    seen.add(object.toLowerCase());
    objects.push(object);
  }
  if (objects.length === 0) return undefined;
  for (let shown = objects.length; shown >= 1; shown -= 1) {
    const rest = objects.length - shown;
    const list = rest === 0 ? objects : [...objects.slice(0, shown), `${rest} more`];
    const name = capitalise(joinWords(list));
    if (Array.from(name).length <= MAX_TITLE) return name;
  }
  return clipTitle(capitalise(joinWords(objects)));
}

/**
 * What a task title acts on: the leading verb ("set up" too), articles and trailing ordering clauses dropped. Two
 * joined verbs ("Add and remove functions") are the work itself: kept, the first in lower case.
 */
function objectOf(title: string): string {
  let t = title.replace(/\s*\(\+\d+ more\)$/u, "").trim();
  t = t.split(/\s+(?:based on|building on|using the|once|after|when|so that|because|before)\s|[,;:(]/iu)[0] ?? t;
  const words = t.trim().split(/\s+/u);
  const verb = (words[0] ?? "").toLowerCase();
  if (words.length >= 2 && LEADING_VERBS.has(verb)) {
    if (/^(?:and|or|&)$/iu.test(words[1] ?? "")) words[0] = verb;
    else {
      words.shift();
      if (/^up$/iu.test(words[0] ?? "") && words.length >= 2) words.shift();
    }
  }
  while (words.length >= 2 && /^(?:the|a|an|our|my|its|their)$/iu.test(words[0] ?? "")) words.shift();
  return words.join(" ").trim();
}

function capitalise(text: string): string {
  const chars = Array.from(text);
  if (chars.length === 0) return text;
  chars[0] = (chars[0] as string).toUpperCase();
  return chars.join("");
}

function joinWords(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1] ?? ""}`;
}

/**
 * An item's text without list markers, ordering words and leading clauses ("Then write a usage guide" → "Write a
 * usage guide"), whitespace collapsed, first letter capital, not shortened: an acceptance criterion's text.
 */
export function plainItem(text: string): string {
  return capitalise(stripLeads(text));
}
