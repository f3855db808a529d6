/**
 * Validating a model-backed leader's answers (issue 3 item 2, issue 5 item 1): one parser per turn kind (plan,
 * message, consultation, checklist, phase plan, assessment) built on the zod shapes of protocol/common.ts,
 * `validatePlanGraph` and `applyMutations`. A parser either returns the value the core expects or the problems to send
 * back in a repair prompt.
 *
 * Owns: answer validation. Pure: no I/O, never throws; never hands back a value that did not validate.
 */
import * as z from "zod";
import { Id, Mutation, Plan } from "../../../protocol/common.js";
import type { Mutation as MutationT, TaskState } from "../../../protocol/common.js";
import { validatePlanGraph } from "../../core/dag/graph.js";
import { applyMutations } from "../../core/dag/mutations.js";
import type {
  AcceptanceCriterion,
  AgentInfo,
  AssessResult,
  ChecklistResult,
  DraftPlan,
  FailureDecision,
  MessageResult,
  PhasePlanResult,
  PlanResult,
} from "../../core/ports.js";
import { extractJsonBlock, issuesOf } from "./leader-json.js";
import type { ExtractedJson } from "./leader-json.js";
import { lazySchema } from "../../../protocol/lazy-schema.js";

/** A validated answer, or the problems to send back. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; errors: string[] };

/** A plan as the leader writes it: protocol/common.ts `Plan` without the server-owned `productId` and `version`. */
const DraftPlanSchema = lazySchema(() => Plan.omit({ productId: true, version: true }), "DraftPlanSchema");

const QuestionsSchema = lazySchema(
  () =>
    z.object({
      questions: z
        .array(
          z.object({
            question: z.string().trim().min(1).max(2_000),
            options: z.array(z.string().min(1).max(500)).max(20).optional(),
          }),
        )
        .min(1)
        .max(20),
    }),
  "QuestionsSchema",
);

const MutationsSchema = lazySchema(
  () => z.object({ mutations: z.array(Mutation).min(1).max(1_000) }),
  "MutationsSchema",
);

const DecisionSchema = lazySchema(
  () =>
    z.discriminatedUnion("decision", [
      z.object({ decision: z.literal("mutate"), mutations: z.array(Mutation).min(1).max(1_000) }),
      z.object({ decision: z.literal("giveUp") }),
    ]),
  "DecisionSchema",
);

const ChecklistSchema = lazySchema(
  () =>
    z.object({
      criteria: z
        .array(z.object({ id: Id, text: z.string().trim().min(1).max(2_000) }))
        .min(1)
        .max(50),
    }),
  "ChecklistSchema",
);

const AssessSchema = lazySchema(() => z.object({ passed: z.array(Id).max(1_000) }), "AssessSchema");

function draftOf(value: unknown, roster: readonly AgentInfo[]): Parsed<DraftPlan> {
  const parsed = DraftPlanSchema.safeParse(value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  const draft = parsed.data;
  const errors: string[] = [];
  if (draft.instances.length === 0) errors.push("instances: the plan needs at least one instance");
  if (draft.tasks.length === 0) errors.push("tasks: the plan needs at least one task");
  const allowed = roster.length === 0 ? new Set(["leader"]) : new Set(roster.map((a) => a.agentId));
  draft.instances.forEach((instance, index) => {
    if (!allowed.has(instance.agentId)) {
      errors.push(
        `instances[${index}].agentId: "${instance.agentId}" is not one of the team's agents (${[...allowed].join(", ")})`,
      );
    }
  });
  const graph = validatePlanGraph(draft.instances, draft.tasks);
  if (!graph.ok) errors.push(`${graph.list}[${graph.index}]: ${graph.reason}`);
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: draft };
}

function needOne(extracted: ExtractedJson): Parsed<unknown> {
  if (extracted.kind === "invalid") return { ok: false, errors: extracted.errors };
  if (extracted.kind === "none") {
    return { ok: false, errors: ["the answer holds no fenced ```json block; end it with exactly one"] };
  }
  return { ok: true, value: extracted.value };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Validates a planning answer: a plan that passes zod, the roster check and `validatePlanGraph`, or questions. */
export function parsePlanAnswer(text: string, roster: readonly AgentInfo[]): Parsed<PlanResult> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  const prose = extracted.prose;
  if (isObject(one.value) && "questions" in one.value) {
    if ("tasks" in one.value) return { ok: false, errors: ["answer with either a plan or questions, not both"] };
    const asked = QuestionsSchema.safeParse(one.value);
    if (!asked.success) return { ok: false, errors: issuesOf(asked.error) };
    const questions = asked.data.questions.map((q) =>
      q.options ? { question: q.question, options: q.options } : { question: q.question },
    );
    return {
      ok: true,
      value: { kind: "ask", message: prose || "I need a few answers before I can plan.", questions },
    };
  }
  const draft = draftOf(one.value, roster);
  if (!draft.ok) return draft;
  const plan = draft.value;
  const message =
    prose || `Here is the plan "${plan.name}": ${plan.tasks.length} tasks on ${plan.instances.length} instances.`;
  return { ok: true, value: { kind: "plan", plan, message } };
}

/**
 * Validates an answer to an execution-time message: prose, plus optionally one JSON block `{"mutations": [...]}` that
 * must pass `applyMutations` against the current plan and task states.
 */
export function parseMessageAnswer(text: string, plan: Plan, tasks: readonly TaskState[]): Parsed<MessageResult> {
  const extracted = extractJsonBlock(text);
  if (extracted.kind === "invalid") return { ok: false, errors: extracted.errors };
  if (extracted.kind === "none") return { ok: true, value: { response: extracted.prose || "Noted." } };
  const parsed = MutationsSchema.safeParse(extracted.value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  const mutations: MutationT[] = parsed.data.mutations;
  const outcome = applyMutations(plan, tasks, mutations);
  if (!outcome.ok) return { ok: false, errors: [`mutations[${outcome.index}]: ${outcome.reason}`] };
  const response =
    extracted.prose || `I changed the plan (${mutations.length} change${mutations.length === 1 ? "" : "s"}).`;
  return { ok: true, value: { response, mutations } };
}

/** Validates a failure consultation answer: `{"decision": "mutate", mutations}` (must apply) or `{"decision": "giveUp"}`. */
export function parseConsultAnswer(
  text: string,
  failed: TaskState,
  plan: Plan,
  tasks: readonly TaskState[],
): Parsed<FailureDecision> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  const parsed = DecisionSchema.safeParse(one.value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  if (parsed.data.decision === "giveUp") {
    return {
      ok: true,
      value: { kind: "giveUp", message: extracted.prose || `I am giving up on the branch of task ${failed.taskId}.` },
    };
  }
  const mutations: MutationT[] = parsed.data.mutations;
  const outcome = applyMutations(plan, tasks, mutations);
  if (!outcome.ok) return { ok: false, errors: [`mutations[${outcome.index}]: ${outcome.reason}`] };
  const message = extracted.prose || `I changed the plan to recover from the failure of task ${failed.taskId}.`;
  return { ok: true, value: { kind: "mutate", mutations, message } };
}

/** Validates a checklist answer: 1-50 criteria with unique ids. */
export function parseChecklistAnswer(text: string): Parsed<ChecklistResult> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  const parsed = ChecklistSchema.safeParse(one.value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  const criteria: AcceptanceCriterion[] = parsed.data.criteria;
  const seen = new Set<string>();
  const errors: string[] = [];
  criteria.forEach((c, i) => {
    if (seen.has(c.id)) errors.push(`criteria[${i}].id: "${c.id}" is used twice`);
    seen.add(c.id);
  });
  if (errors.length > 0) return { ok: false, errors };
  const message =
    extracted.prose ||
    `I will work towards ${criteria.length} acceptance criteria:\n${criteria.map((c) => `${c.id}. ${c.text}`).join("\n")}`;
  return { ok: true, value: { criteria, message } };
}

/**
 * Validates a phase plan answer: a plan (as for `parsePlanAnswer`, questions not allowed) with `targets`, ids of known
 * criteria. Without `targets` the phase targets every criterion that does not pass yet.
 */
export function parsePhaseAnswer(
  text: string,
  roster: readonly AgentInfo[],
  criteria: readonly (AcceptanceCriterion & { passed: boolean })[],
  phaseIndex: number,
): Parsed<PhasePlanResult> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  if (!isObject(one.value)) return { ok: false, errors: ["the JSON block must hold a plan object"] };
  if ("questions" in one.value) return { ok: false, errors: ["questions are not possible in a goal run: send a plan"] };
  const { targets: rawTargets, ...rest } = one.value;
  const targetsParsed = z.array(Id).max(1_000).optional().safeParse(rawTargets);
  const errors: string[] = targetsParsed.success ? [] : issuesOf(targetsParsed.error, "targets");
  const known = new Set(criteria.map((c) => c.id));
  const targets = targetsParsed.success
    ? (targetsParsed.data ?? criteria.filter((c) => !c.passed).map((c) => c.id))
    : [];
  for (const t of targets)
    if (!known.has(t)) errors.push(`targets: "${t}" is not a criterion id (${[...known].join(", ")})`);
  const draft = draftOf(rest, roster);
  if (!draft.ok) errors.push(...draft.errors);
  if (errors.length > 0 || !draft.ok) return { ok: false, errors };
  const plan = draft.value;
  const message =
    extracted.prose ||
    `Phase ${phaseIndex + 1}: ${plan.tasks.length} tasks towards ${targets.join(", ") || "the goal"}.`;
  return { ok: true, value: { plan, message, targets: [...new Set(targets)] } };
}

/** Validates an assessment answer: `{"passed": [ids]}`, every id a known criterion; result in criteria order. */
export function parseAssessAnswer(
  text: string,
  criteria: readonly (AcceptanceCriterion & { passed: boolean })[],
): Parsed<AssessResult> {
  const extracted = extractJsonBlock(text);
  const one = needOne(extracted);
  if (!one.ok) return one;
  const parsed = AssessSchema.safeParse(one.value);
  if (!parsed.success) return { ok: false, errors: issuesOf(parsed.error) };
  const known = new Set(criteria.map((c) => c.id));
  const errors = parsed.data.passed
    .filter((id) => !known.has(id))
    .map((id) => `passed: "${id}" is not a criterion id (${[...known].join(", ")})`);
  if (errors.length > 0) return { ok: false, errors };
  const given = new Set(parsed.data.passed);
  const passed = criteria.filter((c) => given.has(c.id)).map((c) => c.id);
  const message = extracted.prose || `${passed.length} of ${criteria.length} criteria pass.`;
  return { ok: true, value: { passed, message } };
}
