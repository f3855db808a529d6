/**
 * The prompt templates of the model-backed leader (issue 3 item 2, issue 5 item 1), all in one file and versioned.
 *
 * Owns: the text of every leader turn (plan, repair, message during execution, failure consultation, and the goal-run
 * turns deriveChecklist / planPhase / assess), the exact JSON shapes each turn asks for, and the size limits of the
 * context they quote. Every function is pure (strings in, string out): this file must never start a process, never
 * parse an answer (leader-answers.ts does that) and never import `node:` modules.
 *
 * `LEADER_PROMPT_VERSION` names this set of templates. Change it whenever any template text or shape changes: it is
 * sent to the agent with every turn (`_meta["acp-orchestrator"].leaderTurn.promptVersion`) and belongs in the plan
 * fingerprint (issue 3 item 2).
 *
 * Every prompt starts with the line `# acp-orchestrator leader turn: <kind>` so a test agent (or a log reader) can tell
 * the turns apart without the `_meta` mirror.
 */
import type { Plan, TaskState } from "../../../protocol/common.js";
import type { AcceptanceCriterion, AgentInfo, DialogueEntry } from "../../core/ports.js";

/** Version of the templates below. Bump on ANY change of a template or of a requested JSON shape. */
export const LEADER_PROMPT_VERSION = "leader-prompts/1";

/**
 * The prompt version a server records in a plan's fingerprint (drift detection): the heuristic leader's and the ACP
 * leader's prompt templates together, since a plan may come from either. Every process that compares fingerprints
 * (the server, the operator views) must use this one, or an unchanged run reads as drifted.
 */
export const SERVER_LEADER_PROMPT_VERSION = `heuristic-1+${LEADER_PROMPT_VERSION}`;

/** The kinds of leader turn. A repair turn keeps the kind of the turn it repairs. */
export type LeaderTurnKind = "plan" | "message" | "consult" | "checklist" | "phase" | "assess";

/** First line of every leader prompt; the kind follows it. */
export const LEADER_PROMPT_HEADER = "# acp-orchestrator leader turn:";

/** At most this many characters of one dialogue entry are quoted. */
export const MAX_DIALOGUE_ENTRY_CHARS = 4_000;
/** At most this many characters of the whole dialogue are quoted (the oldest entries are dropped first, never the goal). */
export const MAX_DIALOGUE_CHARS = 40_000;
/** At most this many characters of one task's output or error are quoted in a DAG progress listing. */
export const MAX_TASK_EXCERPT_CHARS = 600;
/** At most this many characters of the goal are quoted. */
export const MAX_GOAL_CHARS = 20_000;

// ---------------------------------------------------------------------------------------------------------------
// Shared pieces

function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)} […${text.length - max} more characters]`;
}

function oneLine(text: string, max: number): string {
  return clip(text.replace(/\s+/gu, " ").trim(), max);
}

function header(kind: LeaderTurnKind): string {
  return `${LEADER_PROMPT_HEADER} ${kind}`;
}

const ROLE_INTRO =
  "You are the leader of a team of coding agents run by acp-orchestrator. You plan the work as a DAG of tasks, " +
  "assign every task to a worker instance, and answer the user. You do not do the work yourself in this turn: " +
  "do not edit files and do not run commands; reading the workspace to plan better is fine.";

function fenced(value: unknown): string {
  return ["```json", JSON.stringify(value, null, 2), "```"].join("\n");
}

/** The roster as a bullet list; an empty roster means the leader works alone (instance agentId `leader`). */
function rosterSection(roster: readonly AgentInfo[]): string {
  if (roster.length === 0) {
    return [
      "## Team",
      "",
      'No worker agent is available: you work alone. Use exactly one instance with `"agentId": "leader"`.',
    ].join("\n");
  }
  const lines = roster.map((a) => {
    const strengths = a.strengths.length > 0 ? a.strengths.join(", ") : "none listed";
    return `- agentId \`${a.agentId}\` — ${a.name}; role: ${a.role}; strengths: ${strengths}`;
  });
  return [
    "## Team",
    "",
    "These agents can be given work (use their agentId exactly; several instances may use the same agent and run in parallel):",
    "",
    ...lines,
  ].join("\n");
}

/** The dialogue, oldest first, each entry clipped; when too long, the oldest entries after the first are dropped. */
function dialogueSection(dialogue: readonly DialogueEntry[]): string {
  if (dialogue.length === 0) return "## Dialogue so far\n\n(none)";
  const rendered = dialogue.map((d) => `**${d.role}** (${d.at}):\n${clip(d.text.trim(), MAX_DIALOGUE_ENTRY_CHARS)}`);
  let total = rendered.reduce((n, r) => n + r.length + 2, 0);
  let dropped = 0;
  while (total > MAX_DIALOGUE_CHARS && rendered.length - dropped > 2) {
    total -= (rendered[1 + dropped] ?? "").length + 2;
    dropped += 1;
  }
  const kept =
    dropped === 0
      ? rendered
      : [rendered[0] ?? "", `[… ${dropped} older entries omitted]`, ...rendered.slice(1 + dropped)];
  return ["## Dialogue so far (oldest first)", "", kept.join("\n\n")].join("\n");
}

/** One line per task with status, assignee, dependencies, attempts, and an excerpt of its output or error. */
function progressSection(plan: Plan, tasks: readonly TaskState[], title = "## DAG progress"): string {
  const byId = new Map(tasks.map((t) => [t.taskId, t]));
  const counts = new Map<string, number>();
  const lines = plan.tasks.map((task) => {
    const state = byId.get(task.taskId);
    const status = state?.status ?? "pending";
    counts.set(status, (counts.get(status) ?? 0) + 1);
    const deps = task.dependsOn.length > 0 ? task.dependsOn.join(", ") : "none";
    const parts = [
      `- \`${task.taskId}\` [${status}] ${oneLine(task.title, 200)} — instance ${task.instanceId}; depends on: ${deps}; attempts: ${state?.attempts ?? 0}`,
    ];
    if (state?.error) parts.push(`  error: ${oneLine(state.error, MAX_TASK_EXCERPT_CHARS)}`);
    if (state?.question) parts.push(`  waiting for an answer to: ${oneLine(state.question, MAX_TASK_EXCERPT_CHARS)}`);
    if (state?.output) parts.push(`  output: ${oneLine(state.output, MAX_TASK_EXCERPT_CHARS)}`);
    return parts.join("\n");
  });
  const summary = [...counts.entries()].map(([s, n]) => `${n} ${s}`).join(", ");
  const instances = plan.instances
    .map((i) => `- instance \`${i.instanceId}\`: agent ${i.agentId}, role ${i.role}${i.name ? ` (${i.name})` : ""}`)
    .join("\n");
  return [
    title,
    "",
    `Plan "${oneLine(plan.name, 200)}" version ${plan.version}: ${plan.tasks.length} tasks (${summary || "none"}).`,
    "",
    "Instances:",
    instances || "(none)",
    "",
    "Tasks:",
    lines.join("\n") || "(none)",
  ].join("\n");
}

const PLAN_EXAMPLE = {
  name: "Short name of the plan",
  summary: "Two or three sentences on the approach.",
  instances: [{ instanceId: "w1", agentId: "<agentId from the team>", role: "worker", name: "optional display name" }],
  tasks: [
    {
      taskId: "t1",
      title: "Short imperative title",
      description: "Everything the worker needs to know to do this task alone.",
      instanceId: "w1",
      dependsOn: [],
      acceptance: "optional: how to tell the task is done",
      maxAttempts: 2,
    },
  ],
  budget: { maxTotalTokens: 200000, maxDurationMs: 3600000 },
};

const PLAN_RULES = [
  "- `instances`: at least one; `instanceId` unique; `agentId` one of the team's agent ids.",
  "- `tasks`: at least one; `taskId` unique; `instanceId` one of your instances; `dependsOn` lists task ids of this plan",
  "  that must complete first (no cycles, no repeats); `maxAttempts` (1-20) and `acceptance` are optional.",
  "- `budget` is optional (integers: tokens, milliseconds); leave it out unless the user asked for a limit.",
  "- A task's `description` is all its worker sees besides the outputs of its dependencies: make it self-contained.",
].join("\n");

const PLAN_SHAPE = [
  "The JSON shape of a plan (fields marked optional in the rules may be left out):",
  "",
  fenced(PLAN_EXAMPLE),
  "",
  "Rules:",
  PLAN_RULES,
].join("\n");

const ANSWER_FORMAT =
  "Answer with a short message for the user in plain prose, then exactly ONE fenced code block tagged `json` " +
  "holding the JSON object described below. No other fenced code block. The prose is shown to the user; the JSON is read by a program.";

// ---------------------------------------------------------------------------------------------------------------
// Planning

/** Inputs of the planning prompt (ports.ts `PlanRequest` without the callbacks). */
export interface PlanPromptInput {
  goal: string;
  cwd: string;
  roster: readonly AgentInfo[];
  dialogue: readonly DialogueEntry[];
  previousPlan?: Plan;
  answers?: { askId: string; content: string };
}

/**
 * The planning prompt: goal, workspace, team, dialogue so far, the previous plan (when revising) and the answers to
 * the leader's questions (when given), then the exact JSON shape wanted: a plan, or `{"questions": [...]}` to ask.
 */
export function planPrompt(input: PlanPromptInput): string {
  const parts = [
    header("plan"),
    "",
    ROLE_INTRO,
    "",
    "## Goal",
    "",
    clip(input.goal.trim(), MAX_GOAL_CHARS),
    "",
    "## Workspace",
    "",
    `All work happens in ${input.cwd}.`,
    "",
    rosterSection(input.roster),
    "",
    dialogueSection(input.dialogue),
  ];
  if (input.previousPlan !== undefined) {
    const { productId: _p, version, ...draft } = input.previousPlan;
    parts.push(
      "",
      `## Your previous plan (version ${version})`,
      "",
      "The user's messages after it are revision requests: produce a complete revised plan (not a diff).",
      "",
      fenced(draft),
    );
  }
  if (input.answers !== undefined) {
    parts.push(
      "",
      "## Answers to your questions",
      "",
      `The user answered your questions (ask ${input.answers.askId}):`,
      "",
      clip(input.answers.content.trim(), MAX_DIALOGUE_ENTRY_CHARS),
    );
  }
  parts.push(
    "",
    "## Your answer",
    "",
    ANSWER_FORMAT,
    "",
    PLAN_SHAPE,
    "",
    "If, and only if, you cannot make a sensible plan without more information, ask instead: the JSON block is then",
    "",
    fenced({ questions: [{ question: "Which database should the service use?", options: ["PostgreSQL", "SQLite"] }] }),
    "",
    "(`options` is optional; ask at most a few questions, and never ask again about something already answered.)",
  );
  return parts.join("\n");
}

// ---------------------------------------------------------------------------------------------------------------
// Repair

/** Inputs of the repair prompt: the kind of the turn being repaired and what was wrong with the previous answer. */
export interface RepairPromptInput {
  kind: LeaderTurnKind;
  /** One sentence per problem, e.g. `tasks[0].instanceId: instance w9 is not in the plan`. */
  errors: readonly string[];
  /** 1-based number of the answer being asked for now (2 or 3 with the default of 3 attempts). */
  attempt: number;
  maxAttempts: number;
}

const SHAPE_REMINDER: Record<LeaderTurnKind, string> = {
  plan: 'a plan object ({"name", "summary", "instances", "tasks", "budget"?}) or {"questions": [...]}',
  message: '{"mutations": [...]} (or no JSON block at all when you propose no change)',
  consult: '{"decision": "mutate", "mutations": [...]} or {"decision": "giveUp"}',
  checklist: '{"criteria": [{"id", "text"}, ...]}',
  phase: 'a plan object with an extra "targets": [criterion ids]',
  assess: '{"passed": [criterion ids]}',
};

/** The repair prompt: the validation errors of the previous answer and the shape wanted, same turn kind. */
export function repairPrompt(input: RepairPromptInput): string {
  const errors = input.errors.slice(0, 20).map((e) => `- ${oneLine(e, 500)}`);
  if (input.errors.length > 20) errors.push(`- … and ${input.errors.length - 20} more`);
  return [
    header(input.kind),
    "",
    `Your previous answer could not be used. This is attempt ${input.attempt} of ${input.maxAttempts}; after the last one the turn fails.`,
    "",
    "## What was wrong",
    "",
    ...errors,
    "",
    "## Your answer",
    "",
    `Answer again in full, following the instructions of the previous prompt: a short message, then exactly ONE fenced \`json\` block holding ${SHAPE_REMINDER[input.kind]}.`,
    "Fix every problem listed above; keep everything else as it was.",
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------------------------
// During execution

/** Inputs of the execution-time message prompt (ports.ts `MessageRequest` without the callbacks). */
export interface MessagePromptInput {
  goal: string;
  content: string;
  plan: Plan;
  tasks: readonly TaskState[];
  roster: readonly AgentInfo[];
}

const MUTATION_SHAPE = [
  "Mutations (each one object; applied in order, all or nothing):",
  "",
  fenced({
    mutations: [
      {
        op: "addTask",
        task: { taskId: "t9", title: "…", description: "…", instanceId: "w1", dependsOn: ["t1"] },
      },
      { op: "removeTask", taskId: "t3" },
      { op: "updateTask", taskId: "t4", patch: { title: "…", description: "…", acceptance: "…" } },
      { op: "reassign", taskId: "t4", instanceId: "w2" },
      { op: "addDependency", taskId: "t4", dependsOn: "t2" },
      { op: "removeDependency", taskId: "t4", dependsOn: "t1" },
    ],
  }),
  "",
  "Rules: ids must exist (instances cannot be added; reassign to an existing instance); a task that is running, waiting or",
  "completed cannot be removed, updated, reassigned or given/cleared dependencies; depending ON a completed task is fine;",
  "no cycles; a task others still depend on cannot be removed.",
].join("\n");

/** The prompt for a user message while the product executes or is paused; mutations are optional. */
export function messagePrompt(input: MessagePromptInput): string {
  return [
    header("message"),
    "",
    ROLE_INTRO,
    "",
    "## Goal",
    "",
    clip(input.goal.trim(), MAX_GOAL_CHARS),
    "",
    rosterSection(input.roster),
    "",
    progressSection(input.plan, input.tasks),
    "",
    "## The user says",
    "",
    clip(input.content.trim(), MAX_DIALOGUE_ENTRY_CHARS),
    "",
    "## Your answer",
    "",
    "Answer the user in plain prose. If the message asks for a change of the plan, also add exactly ONE fenced code block",
    "tagged `json` holding the changes; if no change is needed, add no JSON block at all.",
    "",
    MUTATION_SHAPE,
  ].join("\n");
}

/** Inputs of the failure consultation prompt (ports.ts `FailureConsultation` without the signal). */
export interface ConsultPromptInput {
  goal: string;
  failedTask: TaskState;
  plan: Plan;
  tasks: readonly TaskState[];
  roster: readonly AgentInfo[];
}

/** The prompt after a task failed its final attempt: mutate the DAG (e.g. a fix-up task) or give up. */
export function consultPrompt(input: ConsultPromptInput): string {
  const f = input.failedTask;
  const dependents = input.plan.tasks.filter((t) => t.dependsOn.includes(f.taskId)).map((t) => t.taskId);
  return [
    header("consult"),
    "",
    ROLE_INTRO,
    "",
    "## Goal",
    "",
    clip(input.goal.trim(), MAX_GOAL_CHARS),
    "",
    "## The failed task",
    "",
    `Task \`${f.taskId}\` "${oneLine(f.title, 200)}" (instance ${f.instanceId}) failed its last attempt (${f.attempts} attempt${f.attempts === 1 ? "" : "s"}).`,
    "",
    "Description:",
    clip(f.description.trim() || "(none)", MAX_DIALOGUE_ENTRY_CHARS),
    "",
    "Error:",
    clip((f.error ?? "(no error message)").trim(), MAX_DIALOGUE_ENTRY_CHARS),
    "",
    dependents.length > 0
      ? `Tasks that depend on it (skipped if you give up): ${dependents.join(", ")}.`
      : "No task depends on it.",
    "",
    rosterSection(input.roster),
    "",
    progressSection(input.plan, input.tasks),
    "",
    "## Your answer",
    "",
    ANSWER_FORMAT,
    "",
    "Either change the DAG so the work can go on (for example add a fix-up task and re-point the pending dependents",
    "to it; the failed task itself cannot be changed, but it can be removed once nothing depends on it):",
    "",
    fenced({
      decision: "mutate",
      mutations: [
        {
          op: "addTask",
          task: { taskId: `${f.taskId}-fix`, title: "…", description: "…", instanceId: f.instanceId, dependsOn: [] },
        },
      ],
    }),
    "",
    "or give up on this branch (its dependents are skipped):",
    "",
    fenced({ decision: "giveUp" }),
    "",
    MUTATION_SHAPE,
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------------------------
// Goal runs (PROTOCOL.md section 6)

/** Inputs of the checklist prompt (ports.ts `ChecklistRequest` without the signal). */
export interface ChecklistPromptInput {
  goal: string;
  cwd: string;
  roster: readonly AgentInfo[];
}

/** The prompt that derives acceptance criteria from a goal: `{"criteria": [{id, text}]}`. */
export function checklistPrompt(input: ChecklistPromptInput): string {
  return [
    header("checklist"),
    "",
    ROLE_INTRO,
    "",
    "This is the start of a goal run: the goal is reached over several phases, and after each phase you judge which",
    "acceptance criteria pass. First, derive the acceptance criteria.",
    "",
    "## Goal",
    "",
    clip(input.goal.trim(), MAX_GOAL_CHARS),
    "",
    "## Workspace",
    "",
    `All work happens in ${input.cwd}.`,
    "",
    rosterSection(input.roster),
    "",
    "## Your answer",
    "",
    ANSWER_FORMAT,
    "",
    fenced({ criteria: [{ id: "c1", text: "One checkable statement that is true when part of the goal is done." }] }),
    "",
    "Rules: at least one and at most 50 criteria; ids unique (use c1, c2, …); each text one checkable statement.",
  ].join("\n");
}

/** Inputs of the phase planning prompt (ports.ts `PhasePlanRequest` without the callbacks). */
export interface PhasePromptInput {
  goal: string;
  cwd: string;
  phaseIndex: number;
  criteria: readonly (AcceptanceCriterion & { passed: boolean })[];
  progressSummary: string;
  messages: readonly string[];
  roster: readonly AgentInfo[];
}

function criteriaSection(criteria: readonly (AcceptanceCriterion & { passed: boolean })[]): string {
  const lines = criteria.map((c) => `- [${c.passed ? "x" : " "}] \`${c.id}\`: ${oneLine(c.text, 1_000)}`);
  const passed = criteria.filter((c) => c.passed).length;
  return ["## Acceptance criteria", "", `${passed} of ${criteria.length} pass.`, "", ...lines].join("\n");
}

/** The prompt that plans one phase of a goal run: a plan plus `targets` (the criterion ids it works towards). */
export function phasePrompt(input: PhasePromptInput): string {
  const messages =
    input.messages.length === 0
      ? "(none)"
      : input.messages.map((m, i) => `${i + 1}. ${clip(m.trim(), MAX_DIALOGUE_ENTRY_CHARS)}`).join("\n");
  return [
    header("phase"),
    "",
    ROLE_INTRO,
    "",
    `Plan phase ${input.phaseIndex + 1} of a goal run. The phase runs without asking the user; afterwards you assess which criteria pass.`,
    "",
    "## Goal",
    "",
    clip(input.goal.trim(), MAX_GOAL_CHARS),
    "",
    "## Workspace",
    "",
    `All work happens in ${input.cwd}.`,
    "",
    criteriaSection(input.criteria),
    "",
    "## Progress so far",
    "",
    clip(input.progressSummary.trim() || "(nothing yet)", MAX_DIALOGUE_CHARS),
    "",
    "## Messages from the user since the last phase (apply them)",
    "",
    messages,
    "",
    rosterSection(input.roster),
    "",
    "## Your answer",
    "",
    ANSWER_FORMAT,
    "",
    PLAN_SHAPE,
    "",
    'Add `"targets": ["c1", …]` to the plan object: the ids of the criteria this phase works towards (criteria that do',
    "not pass yet). Questions are not possible in a goal run.",
  ].join("\n");
}

/** Inputs of the assessment prompt (ports.ts `AssessRequest` without the signal). */
export interface AssessPromptInput {
  goal: string;
  phaseIndex: number;
  criteria: readonly (AcceptanceCriterion & { passed: boolean })[];
  plan: Plan;
  tasks: readonly TaskState[];
  targets: readonly string[];
}

/** The prompt that assesses a phase: `{"passed": [ids of every criterion that passes now]}`. */
export function assessPrompt(input: AssessPromptInput): string {
  return [
    header("assess"),
    "",
    ROLE_INTRO,
    "",
    `Phase ${input.phaseIndex + 1} of the goal run has ended. Judge which acceptance criteria pass now; you may read the workspace to check.`,
    "",
    "## Goal",
    "",
    clip(input.goal.trim(), MAX_GOAL_CHARS),
    "",
    criteriaSection(input.criteria),
    "",
    `The phase targeted: ${input.targets.length > 0 ? input.targets.join(", ") : "(no criterion named)"}.`,
    "",
    progressSection(input.plan, input.tasks, "## What the phase did"),
    "",
    "## Your answer",
    "",
    ANSWER_FORMAT,
    "",
    fenced({ passed: ["c1"] }),
    "",
    "List the ids of EVERY criterion that passes now, including those that passed before and still pass; leave out",
    "a criterion that passed before but no longer does. Only ids from the list above.",
  ].join("\n");
}
