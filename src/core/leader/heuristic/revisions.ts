/**
 * Revision messages for the heuristic leader: parses "add task …", "remove task N", "make t3 depend on t1", … and
 * applies them to the draft while planning. Pure.
 */
import type { AgentInfo, DialogueEntry } from "../../ports.js";
import type { DraftTask } from "./goal-items.js";
import { POLITE } from "./ordering.js";
import { makeTitle } from "./titles.js";
import { bestMatch, hasWords, oneLine, unquote } from "./words.js";

// ===============================================================================================================
// Revision / message commands

/** A reference to a task in a user's words: "task 3", "t3", "the last one", or title words. */
export type Ref = { kind: "number"; n: number } | { kind: "last" } | { kind: "words"; text: string };

export type Command =
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

export const TASK_MENTION = /\b(?:task|step|item)\s*#?\d+|\bt\d+\b|#\d+/iu;
export const SEQUENTIAL_WORDS =
  /\b(?:sequential(?:ly)?|in order(?!\s+to\b)|in sequence|one (?:after|by) (?:another|the other|one)|one at a time|step by step|serially|in series|chain (?:them|all|everything|the tasks))\b/iu;
export const PARALLEL_WORDS =
  /\b(?:in parallel|parallel(?:i[sz]e)?|concurrently|at the same time|simultaneously|no dependencies|independent(?:ly)?)\b/iu;
export const DEPEND_VERBS =
  "(?:depends? on|waits? for|comes? after|runs? after|follows?|goes after|be after|be done after|starts? after|after)";

/** Splits a user message into clauses and parses each into a command (unknown clauses become constraints). */
export function parseCommands(message: string): Command[] {
  const clauses = message
    .replace(/\r\n?/gu, "\n")
    .split(/\n+|(?<=[.!?])\s+(?=[^\p{Ll}\s])/u)
    .map((c) => c.trim())
    .filter(hasWords);
  return clauses.map(parseCommand);
}

/** Clauses longer than this are never commands; they are kept as constraints (and the regexes stay cheap). */
export const MAX_COMMAND_LENGTH = 500;

export function parseCommand(clause: string): Command {
  const source = clause;
  if (clause.length > MAX_COMMAND_LENGTH) return { kind: "constraint", text: source };
  let c = clause.replace(/[\s.!?]+$/u, "");
  for (let k = 0; k < 3 && POLITE.test(c); k += 1) c = c.replace(POLITE, "");
  c = c.replace(/,?\s+please$/iu, "").trim();
  return (
    parseOrdering(c, source) ?? parseEdit(c, source) ?? parseParallel(c, source) ?? { kind: "constraint", text: source }
  );
}

/** A command about the order of tasks: "make X depend on Y", "X should not wait for Y", "run X before Y". */
function parseOrdering(c: string, source: string): Command | undefined {
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
  return undefined;
}

/** A command that edits tasks: rename, split, assign, remove, add. */
function parseEdit(c: string, source: string): Command | undefined {
  let m: RegExpExecArray | null;
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
  return undefined;
}

/** A command about running in parallel or in sequence: one task on its own, or the whole plan. */
function parseParallel(c: string, source: string): Command | undefined {
  let m: RegExpExecArray | null;
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
  return undefined;
}

/** "a task to write docs after task 2" → add "Write docs" depending on task 2. Returns undefined for an empty add. */
export function parseAdd(rest: string, source: string): Command | undefined {
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

export const ORDINALS: Readonly<Record<string, number>> = {
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

export function parseRef(raw: string): Ref {
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

export function parseRefList(raw: string): Ref[] {
  return raw
    .split(/\s*(?:,|\band\b|&|\+)\s*/iu)
    .map((s) => s.trim())
    .filter(hasWords)
    .map(parseRef);
}

/** Resolves a reference against tasks (id `t<n>` first, then position, then exact id, then best title words). */
export function resolveRef(
  ref: Ref,
  tasks: readonly { id: string; title: string; text: string }[],
): number | undefined {
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

export function describeRef(ref: Ref): string {
  if (ref.kind === "last") return "the last task";
  if (ref.kind === "number") return `task ${ref.n}`;
  return `"${ref.text}"`;
}

// ---------------------------------------------------------------------------------------------------------------
// Commands on the draft (planning)

/** Applies one revision command to the draft; returns the new draft and records a note or a constraint. */
export function applyToDraft(
  draft: DraftTask[],
  command: Command,
  roster: readonly AgentInfo[],
  notes: string[],
  constraints: string[],
): DraftTask[] {
  const view = () => draft.map((t, i) => ({ id: `t${i + 1}`, title: t.title, text: t.text }));
  const edit: DraftEdit = {
    draft,
    roster,
    notes,
    find: (ref) => {
      const i = resolveRef(ref, view());
      return i === undefined ? undefined : draft[i];
    },
    name: (t) => `t${draft.indexOf(t) + 1} "${t.title}"`,
    asConstraint: (text, why) => {
      constraints.push(text);
      notes.push(`${why}, so I added "${oneLine(text, 200)}" as a constraint to every task.`);
      return draft;
    },
  };
  return (DRAFT_EDITS[command.kind] as (e: DraftEdit, c: Command) => DraftTask[])(edit, command);
}

/** What one command's edit works on: the draft, the team, the notes for the user, and how to find and name tasks. */
interface DraftEdit {
  draft: DraftTask[];
  roster: readonly AgentInfo[];
  notes: string[];
  find(ref: Ref): DraftTask | undefined;
  name(t: DraftTask): string;
  /** Keeps `text` as a constraint on every task instead, saying why; returns the draft unchanged. */
  asConstraint(text: string, why: string): DraftTask[];
}

type CommandOf<K extends Command["kind"]> = Extract<Command, { kind: K }>;

/** One edit per command kind; each returns the new draft. */
const DRAFT_EDITS: { [K in Command["kind"]]: (e: DraftEdit, command: CommandOf<K>) => DraftTask[] } = {
  constraint: (e, command) => e.asConstraint(command.text, "I did not read that as a change to the plan"),
  sequential: (e) => {
    e.draft.forEach((t, i) => (t.deps = i === 0 ? [] : [e.draft[i - 1] as DraftTask]));
    e.notes.push("Made the tasks run one after another, in order.");
    return e.draft;
  },
  parallel: (e) => {
    for (const t of e.draft) t.deps = [];
    e.notes.push("Removed every dependency, so the tasks can run in parallel.");
    return e.draft;
  },
  add: (e, command) => {
    const task: DraftTask = {
      title: makeTitle(command.text, `Step ${e.draft.length + 1}`),
      text: command.full,
      deps: [],
    };
    const unresolved: string[] = [];
    for (const ref of command.after) {
      const target = e.find(ref);
      if (target) task.deps.push(target);
      else unresolved.push(describeRef(ref));
    }
    if (command.atEnd) task.deps = [...e.draft];
    task.deps = [...new Set(task.deps)];
    let next: DraftTask[];
    if (command.atStart) {
      for (const t of e.draft) if (t.deps.length === 0) t.deps = [task];
      next = [task, ...e.draft];
    } else {
      next = [...e.draft, task];
    }
    const where = command.atStart
      ? " first"
      : task.deps.length > 0
        ? ` after ${task.deps.map((d) => `t${next.indexOf(d) + 1}`).join(", ")}`
        : "";
    e.notes.push(
      `Added t${next.indexOf(task) + 1} "${task.title}"${where}.` +
        (unresolved.length > 0 ? ` I could not find ${unresolved.join(", ")}, so it does not wait for them.` : ""),
    );
    return next;
  },
  remove: (e, command) => {
    const targets: DraftTask[] = [];
    for (const ref of command.refs) {
      const target = e.find(ref);
      if (!target) return e.asConstraint(command.source, `I found no task matching ${describeRef(ref)}`);
      if (!targets.includes(target)) targets.push(target);
    }
    if (targets.length >= e.draft.length) {
      return e.asConstraint(command.source, "I kept the tasks because a plan needs at least one");
    }
    let next = e.draft;
    for (const target of targets) {
      e.notes.push(`Removed ${e.name(target)}.`);
      next = next.filter((t) => t !== target);
      for (const t of next) {
        // Dependents inherit the removed task's dependencies, so the order around it is kept.
        if (t.deps.includes(target)) t.deps = [...new Set([...t.deps.filter((d) => d !== target), ...target.deps])];
      }
    }
    return next;
  },
  rename: (e, command) => {
    const target = e.find(command.ref);
    if (!target || !hasWords(command.title)) {
      return e.asConstraint(command.source, `I found no task matching ${describeRef(command.ref)}`);
    }
    const before = e.name(target);
    target.title = makeTitle(command.title, target.title);
    e.notes.push(`Renamed ${before} to "${target.title}".`);
    return e.draft;
  },
  split: (e, command) => {
    const target = e.find(command.ref);
    if (!target) return e.asConstraint(command.source, `I found no task matching ${describeRef(command.ref)}`);
    let parts = command.parts;
    if (parts.length < 2) {
      const own = target.text.split(/\s*;\s*|\s*,\s*(?:and\s+)?|\s+and\s+(?:then\s+)?/u).filter(hasWords);
      parts = own.length >= 2 && own.length <= 6 ? own : [`Implement: ${target.title}`, `Verify: ${target.title}`];
    }
    const before = e.name(target);
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
    const at = e.draft.indexOf(target);
    const next = [...e.draft.slice(0, at), ...pieces, ...e.draft.slice(at + 1)];
    for (const t of next) if (t.deps.includes(target)) t.deps = t.deps.map((d) => (d === target ? lastPiece : d));
    e.notes.push(`Split ${before} into ${pieces.map((p) => `"${p.title}"`).join(", ")}, one after another.`);
    return next;
  },
  depend: (e, command) => {
    const target = e.find(command.ref);
    if (!target) return e.asConstraint(command.source, `I found no task matching ${describeRef(command.ref)}`);
    for (const ref of command.on) {
      const on = e.find(ref);
      if (!on) e.notes.push(`I found no task matching ${describeRef(ref)} for ${e.name(target)} to depend on.`);
      else if (on === target) e.notes.push(`Task ${e.name(target)} cannot depend on itself.`);
      else if (target.deps.includes(on)) e.notes.push(`Task ${e.name(target)} already depends on ${e.name(on)}.`);
      else if (draftReaches(on, target)) {
        e.notes.push(
          `I did not make ${e.name(target)} depend on ${e.name(on)}: ${e.name(on)} already depends on it, which would be a cycle.`,
        );
      } else {
        target.deps.push(on);
        e.notes.push(`Task ${e.name(target)} now depends on ${e.name(on)}.`);
      }
    }
    return e.draft;
  },
  undepend: (e, command) => {
    const target = e.find(command.ref);
    if (!target) return e.asConstraint(command.source, `I found no task matching ${describeRef(command.ref)}`);
    if (command.on === "all") {
      target.deps = [];
      e.notes.push(`Task ${e.name(target)} no longer depends on anything.`);
      return e.draft;
    }
    for (const ref of command.on) {
      const on = e.find(ref);
      if (on && target.deps.includes(on)) {
        target.deps = target.deps.filter((d) => d !== on);
        e.notes.push(`Task ${e.name(target)} no longer depends on ${e.name(on)}.`);
      } else {
        e.notes.push(`Task ${e.name(target)} did not depend on ${on ? e.name(on) : describeRef(ref)}.`);
      }
    }
    return e.draft;
  },
  assign: (e, command) => {
    const target = e.find(command.ref);
    const agent = matchAgent(command.agent, e.roster);
    if (!target || agent === undefined) {
      return e.asConstraint(
        command.source,
        target
          ? `No agent in the team matches "${command.agent}"`
          : `I found no task matching ${describeRef(command.ref)}`,
      );
    }
    target.agent = agent;
    const info = e.roster[agent] as AgentInfo;
    e.notes.push(`Assigned ${e.name(target)} to ${info.name || info.agentId} (${info.role}).`);
    return e.draft;
  },
};

/** True when `from` depends (transitively) on `to` in the draft. */
export function draftReaches(from: DraftTask, to: DraftTask): boolean {
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
export function matchAgent(words: string, roster: readonly AgentInfo[]): number | undefined {
  const w = words.trim().toLowerCase();
  if (w === "") return undefined;
  const fields = (a: AgentInfo): string[] => [a.agentId, a.name, a.role].map((f) => f.toLowerCase());
  const exact = roster.findIndex((a) => fields(a).includes(w));
  if (exact >= 0) return exact;
  const partial = roster.findIndex((a) => fields(a).some((f) => f !== "" && (f.includes(w) || w.includes(f))));
  return partial >= 0 ? partial : undefined;
}

/** Every user entry of the dialogue except the first one whose text is the goal itself. */
export function revisionMessages(goal: string, dialogue: readonly DialogueEntry[]): string[] {
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
