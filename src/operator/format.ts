/**
 * Plain-text views of products, goal runs, events and DAGs for the operator commands (issue 15): tables for `list`,
 * the `status` report, one line per event for `events`, and the DAG as Mermaid or Graphviz DOT for `graph`.
 *
 * Pure functions of their arguments: no I/O, no clock (times are passed in), no colours.
 */
import type { Integration, Mutation, Plan, TaskState } from "../../protocol/common.js";
import { finishMergeCommand, integrationClause } from "./integration-text.js";
import type { ProductEvent } from "../core/product/records.js";
import { inCliWords } from "./cli-verbs.js";
import type { GoalEvent } from "../core/goal/records.js";
import type { GoalEventRow, GoalRow, ProductEventRow, ProductRow } from "./run-state-reader.js";

/**
 * A duration in milliseconds (the protocol's unit for every duration, budgets included) as a person reads it:
 * `40 ms` under a second, `1.2 s` / `40.0 s` under a minute, `3 min 04 s` under an hour, `2 h 05 min` beyond.
 * `-` for a negative or non-finite value.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "-";
  if (ms < 999.5) return `${Math.round(ms)} ms`;
  if (ms < 59_950) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
}

/** How long a task ran (or has been running at `now`), or undefined when it never started. */
export function taskDurationMs(
  task: Pick<TaskState, "startedAt" | "endedAt" | "status">,
  now: number,
): number | undefined {
  if (!task.startedAt) return undefined;
  const start = Date.parse(task.startedAt);
  const end = task.endedAt ? Date.parse(task.endedAt) : task.status === "running" ? now : undefined;
  return end === undefined || !Number.isFinite(start) || !Number.isFinite(end) ? undefined : Math.max(0, end - start);
}

/** The last non-empty line of a text, clipped to `max` characters. */
export function lastLine(text: string | undefined, max = 100): string {
  const line =
    (text ?? "")
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l.length > 0)
      .at(-1) ?? "";
  return clip(line, max);
}

export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, Math.max(0, max - 1))}…` : text;
}

/** Left-aligned columns; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

/** "3 ago" style age of an ISO time at `now`. */
export function ago(iso: string, now: number): string {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return iso;
  return `${formatDuration(Math.max(0, now - t))} ago`;
}

/** The `list` view: products, then goal runs. */
export function formatList(products: ProductRow[], goals: GoalRow[], now: number): string {
  const out: string[] = [];
  if (products.length === 0) out.push("No products.");
  else {
    out.push(
      table(
        ["PRODUCT", "PHASE", "PROGRESS", "OWNER", "UPDATED", "NAME"],
        products.map((p) => [
          p.productId,
          p.phase,
          progressText(p.progress),
          p.owner ? `${ownerState(p.owner, now)} ${clip(p.owner.ownerId, 40)}` : "-",
          ago(p.updatedAt, now),
          clip(p.name, 60),
        ]),
      ),
    );
  }
  if (goals.length > 0) {
    out.push("");
    out.push(
      table(
        ["GOAL RUN", "STATUS", "PHASE", "GOAL"],
        goals.map((g) => [g.goalRunId, g.status, String(g.phaseIndex + 1), clip(g.goal.split("\n")[0] ?? "", 70)]),
      ),
    );
  }
  return `${out.join("\n")}\n`;
}

/** `2/3 (1 failed, 1 superseded)`: superseded tasks (a fix-up replaces them) are not counted as failed. */
function progressText(p: ProductRow["progress"] & { superseded?: number }): string {
  const superseded = p.superseded ?? 0;
  const failed = p.failed - superseded;
  const notes = [failed > 0 ? `${failed} failed` : "", superseded > 0 ? `${superseded} superseded` : ""].filter(
    Boolean,
  );
  return `${p.completed}/${p.total}${notes.length > 0 ? ` (${notes.join(", ")})` : ""}`;
}

interface StatusLike {
  productId: string;
  projectId: string;
  name: string;
  phase: string;
  plan?: Plan;
  tasks: TaskState[];
  progress: ProductRow["progress"];
  budget: {
    usedTokens: number;
    elapsedMs: number;
    maxTotalTokens?: number;
    maxDurationMs?: number;
    tokenSource: string;
  };
  checkpoints: number;
  lastCheckpointAt?: string;
  dropped: number;
  recovery?: { cause: string; resumable: boolean; remediation: string };
  cwd?: string;
  [extra: string]: unknown;
}

/** "2 failed" of a status's progress, with the superseded ones apart ("1 failed, 1 superseded"). */
function progressFailed(tasks: readonly TaskState[], failed: number): string {
  const superseded = tasks.filter((t) => shownStatus(t) === "superseded").length;
  return `${failed - superseded} failed${superseded > 0 ? `, ${superseded} superseded` : ""}`;
}

/** The `status` view of a product (`product.status` plus the checkpoints list). */
export function formatProductStatus(
  raw: Record<string, unknown>,
  checkpoints: { checkpointId: string; at: string; completed: number; total: number }[],
  now: number,
  /** What the commands the recovery names need after their arguments (`storeFlags`, cli-verbs.ts). */
  flags = "",
  /** The target branch holds the head of a merge the product deferred (`integrationClause`'s `mergedSince`). */
  mergedSince = false,
  /**
   * What the commands the recovery names (resume, retry, ...) need after their arguments: `flags` and the agent
   * config the run recorded (`--config`; `commandFlags`, drive.ts), as `run` prints them. Default: `flags`.
   */
  recoveryFlags = flags,
): string {
  const s = raw as StatusLike;
  const out: string[] = [];
  out.push(`${s.productId}  ${s.name}`);
  out.push(`phase:       ${s.phase}`);
  out.push(`project:     ${s.projectId}`);
  const planned = s.tasks.length === 0 && s.plan !== undefined && s.plan.tasks.length > 0;
  out.push(
    planned
      ? // Not confirmed: no task exists yet, so 0/0 would hide the plan (a new user's trial); its size is what counts.
        `progress:    planned: ${s.plan?.tasks.length} tasks, awaiting confirmation`
      : `progress:    ${s.progress.completed}/${s.progress.total} completed, ${s.progress.running} running, ${progressFailed(s.tasks, s.progress.failed)}, ${s.progress.pending} pending`,
  );
  const tokens = `${s.budget.usedTokens}${s.budget.maxTotalTokens !== undefined ? ` of ${s.budget.maxTotalTokens}` : ""} tokens (${s.budget.tokenSource})`;
  // Durations are milliseconds on the wire (PROTOCOL.md section 5); formatDuration says them in ms, s, min or h.
  const time = `${formatDuration(s.budget.elapsedMs)}${s.budget.maxDurationMs !== undefined ? ` of ${formatDuration(s.budget.maxDurationMs)}` : ""} elapsed`;
  out.push(`budget:      ${tokens}, ${time}`);
  if (s.dropped > 0) out.push(`dropped:     ${s.dropped} stored records failed validation`);
  out.push(...recoveryLines(s, recoveryFlags));
  out.push(...describeWhereItRuns(s, now, flags, mergedSince));
  const instances = new Map((s.plan?.instances ?? []).map((i) => [i.instanceId, i.agentId]));
  if (s.tasks.length === 0 && s.plan !== undefined && s.plan.tasks.length > 0) {
    // Planned, not confirmed yet: the proposed plan is what the user has to judge.
    out.push("");
    out.push(`plan v${s.plan.version} (${s.plan.tasks.length} tasks, not confirmed yet):`);
    out.push(
      table(
        ["TASK", "AGENT", "AFTER", "TITLE"],
        s.plan.tasks.map((t) => [
          t.taskId,
          instances.get(t.instanceId) ?? t.instanceId,
          t.dependsOn.join(",") || "-",
          clip(t.title, 80),
        ]),
      ),
    );
  }
  if (s.tasks.length > 0) {
    out.push("");
    out.push(
      table(
        ["TASK", "STATUS", "WAITING FOR", "ATTEMPTS", "DURATION", "AGENT", "AFTER", "TITLE"],
        s.tasks.map((t) => {
          const d = taskDurationMs(t, now);
          return [
            t.taskId,
            shownStatus(t),
            waitingForText(t, s.tasks),
            String(t.attempts),
            d === undefined ? "-" : formatDuration(d),
            instances.get(t.instanceId) ?? t.instanceId,
            t.dependsOn.join(",") || "-",
            clip(t.title, 60),
          ];
        }),
      ),
    );
    for (const t of s.tasks) for (const n of taskNotes(t)) out.push(`  ${t.taskId}  ${n}`);
  }
  out.push("");
  out.push(`checkpoints: ${s.checkpoints}${s.lastCheckpointAt ? ` (last ${ago(s.lastCheckpointAt, now)})` : ""}`);
  for (const c of checkpoints) out.push(`  ${c.checkpointId}  ${c.at}  ${c.completed}/${c.total} completed`);
  return `${out.join("\n")}\n`;
}

/** The lines under the `status` table about one task: supersession, error, interruption, question, commit, output. */
function taskNotes(t: TaskState): string[] {
  const notes: string[] = [];
  if (t.supersededBy) notes.push(`superseded by its fix-up ${t.supersededBy}`);
  if (t.supersedes) notes.push(`fix-up of ${t.supersedes}`);
  if (t.error) notes.push(`error: ${clip(t.error.replace(/\s+/g, " "), 200)}`);
  if (t.interruption) notes.push(`interrupted: ${clip(t.interruption, 200)}`);
  if (t.question) notes.push(`waiting: ${clip(t.question, 200)}`);
  if (t.waiting) notes.push(clip(t.waiting, 200));
  if (t.workspace?.commit) notes.push(`commit: ${t.workspace.commit} on ${t.workspace.branch}`);
  if (t.workspace?.changedFiles) notes.push(`changed: ${clip(t.workspace.changedFiles.join(", ") || "no files", 200)}`);
  const last = lastLine(t.output);
  if (last) notes.push(`output: ${last}`);
  return notes;
}

/**
 * What a pending task waits for, in the `status` table's WAITING FOR column (PROTOCOL.md section 5, "Waiting tasks":
 * `waitingFor` of `product.status`): `t1, t2` (the dependencies not completed yet), `seat (w1 runs t2)` (its instance
 * is busy; `seat` alone when the product's maxParallelTasks is), `budget`, `leader` (a leader turn runs), `merge of
 * t1` (a completed dependency's result is not on the integration branch yet); `-` when it waits for nothing.
 */
export function waitingForText(task: TaskState, tasks: readonly TaskState[]): string {
  const byId = new Map(tasks.map((t) => [t.taskId, t]));
  switch (task.waitingFor) {
    case undefined:
      return "-";
    case "dependencies": {
      const open = task.dependsOn.filter((d) => byId.get(d)?.status !== "completed");
      return clip(open.join(", ") || "dependencies", 30);
    }
    case "seat": {
      const busy = tasks.find((t) => t.instanceId === task.instanceId && t.status === "running");
      return busy ? `seat (${task.instanceId} runs ${busy.taskId})` : "seat";
    }
    case "workspace": {
      const waiting = task.dependsOn.filter((d) => byId.get(d)?.status === "completed");
      return clip(`merge of ${waiting.join(", ")}`, 30);
    }
    default:
      return task.waitingFor;
  }
}

/** The recovery of a product: the protocol's texts name methods, a person at a terminal gets the commands (cli-verbs.ts). */
function recoveryLines(s: StatusLike, flags: string): string[] {
  if (!s.recovery) return [];
  const { cause, resumable, remediation } = s.recovery;
  return [
    `recovery:    ${inCliWords(cause, s.productId, flags)}`,
    `             ${resumable ? "resumable" : "not resumable"}: ${inCliWords(remediation, s.productId, flags)}`,
  ];
}

/** Owner, isolation and integration of a product in words (`status` lines; absent fields give no line). */
function describeWhereItRuns(s: StatusLike, now: number, flags: string, mergedSince: boolean): string[] {
  const out: string[] = [];
  const owner = s.owner as { ownerId: string; expiresAt: string; live: boolean; renewedAt?: string } | undefined;
  if (owner && owner.live) {
    // A live owner drives the product (issue 28): who, and how fresh its renewal is; no recovery to show.
    const renewed = owner.renewedAt ? ` (renewed ${ago(owner.renewedAt, now)})` : "";
    out.push(`owner:       driven by server ${owner.ownerId}${renewed}, lease until ${owner.expiresAt}`);
  } else if (owner)
    out.push(
      `owner:       ${owner.ownerId} (${ownerState(owner, now) === "gone" ? "process gone" : "lease expired"}, lease until ${owner.expiresAt})`,
    );
  if (typeof s.isolation === "string") {
    const what =
      s.isolation === "worktree"
        ? "worktree (each task attempt in its own git worktree)"
        : "shared (tasks work in the product's folder)";
    out.push(`isolation:   ${what}`);
    if (typeof s.isolationNote === "string") out.push(`             ${s.isolationNote}`);
  }
  const integration = s.integration as Integration | undefined;
  if (integration) {
    // Nothing merged on a product that did not complete: "integrated" would claim what did not happen (a new
    // user's trial read "integration integrated" on a failed run).
    const nothing = integration.merged.length === 0 && s.phase !== "completed";
    const state = nothing ? "nothing integrated" : integration.state;
    out.push(`integration: ${state} on branch ${integration.branch}, head ${integration.head.slice(0, 12)}`);
    if (integration.mode === "merge" && !nothing)
      out.push(`             ${integrationClause(integration, mergedSince)}`);
    const finish = finishMergeCommand(integration, s.productId, s.phase, s.cwd, flags, mergedSince);
    if (finish) out.push(`             merge it when the checkout is ready: ${finish}`);
    if (integration.merged.length > 0) out.push(`             merged: ${integration.merged.join(", ")}`);
    if (integration.conflict) {
      const by = integration.conflict.taskId ? ` (task ${integration.conflict.taskId})` : "";
      out.push(`             conflict${by} in ${integration.conflict.files.join(", ") || "unknown files"}`);
    }
  }
  out.push(...describeVerification(s));
  return out;
}

/** The verification of a product (guarantee 17): its commands, then one line per check of its newest 10 results. */
function describeVerification(s: StatusLike): string[] {
  const v = s.verification as
    | { when: string; commands: string[]; note?: string; results: VerificationLike[] }
    | undefined;
  if (!v) return [];
  const out = [`verify:      ${v.when}: ${v.commands.join(", ")}`];
  if (v.note) out.push(`             ${v.note}`);
  for (const r of v.results.slice(-10)) {
    const who = r.taskId !== undefined ? `task ${r.taskId}` : r.scope;
    out.push(`             ${r.ok ? "green" : "red  "} ${who} tree ${r.tree.slice(0, 12)}: ${checksLine(r.checks)}`);
  }
  return out;
}

interface VerificationLike {
  tree: string;
  taskId?: string;
  scope: string;
  ok: boolean;
  checks: { name: string; ok: boolean; exitCode: number | null; timedOut?: boolean; durationMs: number }[];
}

function checksLine(checks: VerificationLike["checks"]): string {
  return checks
    .map((c) => `${c.name} ${c.ok ? "ok" : c.timedOut ? "timed out" : `exit ${String(c.exitCode)}`} ${c.durationMs} ms`)
    .join("; ");
}

/** The `status` view of a goal run (`x/goal.status`). */
export function formatGoalStatus(raw: Record<string, unknown>): string {
  const g = raw as {
    goalRunId: string;
    status: string;
    goal: string;
    phaseIndex: number;
    productId?: string;
    startedAt: string;
    progressSummary: string;
    acceptance: {
      passed: number;
      total: number;
      criteria: { criterionId?: string; text?: string; passed?: boolean }[];
    };
    usedTokens: number;
    endReason?: string;
    failedReason?: string;
  };
  const out = [
    `${g.goalRunId}  ${g.status}`,
    `goal:        ${g.goal.split("\n").join("\n             ")}`,
    `phase:       ${g.phaseIndex + 1}${g.productId ? ` (product ${g.productId})` : ""}`,
    `started:     ${g.startedAt}`,
    `tokens:      ${g.usedTokens}`,
  ];
  if (g.endReason) out.push(`ended:       ${g.endReason}`);
  if (g.failedReason) out.push(`reason:      ${g.failedReason}`);
  out.push(`criteria:    ${g.acceptance.passed}/${g.acceptance.total} pass`);
  for (const c of g.acceptance.criteria) out.push(`  [${c.passed ? "x" : " "}] ${c.text ?? JSON.stringify(c)}`);
  out.push("", g.progressSummary);
  return `${out.join("\n")}\n`;
}

/** One human-readable line per stored product event. */
export function formatEvent(row: ProductEventRow): string {
  const e = row.event;
  const seq = String(row.seq).padStart(5);
  if (!e) return `${seq}  (invalid record, skipped: guarantee 4) ${clip(JSON.stringify(row.raw), 120)}`;
  return `${seq}  ${e.at}  ${describeEvent(e)}`;
}

/** One human-readable line per stored goal-run event (`events` of a goal run). */
export function formatGoalEvent(row: GoalEventRow): string {
  const e = row.event;
  const seq = String(row.seq).padStart(5);
  if (!e) return `${seq}  (invalid record, skipped: guarantee 4) ${clip(JSON.stringify(row.raw), 120)}`;
  return `${seq}  ${e.at}  ${describeGoalEvent(e)}`;
}

function describeGoalEvent(e: GoalEvent): string {
  const one = (text: string, max: number) => clip(text.replace(/\s+/g, " "), max);
  switch (e.type) {
    case "goal_started":
      return `goal run started: ${one(e.goal, 100)}`;
    case "phase_planned":
      return `phase ${e.phaseIndex + 1} planned: ${one(e.message, 120)}`;
    case "phase_started":
      return `phase ${e.phaseIndex + 1} started: product ${e.productId}`;
    case "task_settled":
      return `phase ${e.phaseIndex + 1}: task ${e.taskId} ${e.status}`;
    case "phase_assessed":
      return `phase ${e.phaseIndex + 1} assessed (product ${e.productPhase}): ${e.passed.length} criteria pass; ${one(e.message, 100)}`;
    case "status":
      return `status ${e.status}${e.reason ? ` — ${one(e.reason, 120)}` : ""}`;
    case "ended":
      return `ended ${e.endReason}: ${one(e.failedReason ?? e.summary, 120)}`;
    case "message_queued":
      return `message queued: ${one(e.content, 120)}`;
    default:
      return otherEvent(e);
  }
}

/** An event kind without a line of its own: its type and its fields (less v, at, type) as clipped JSON. */
function otherEvent(e: { type: string }): string {
  const rest = { ...(e as Record<string, unknown>) };
  delete rest.v;
  delete rest.at;
  delete rest.type;
  return `${e.type} ${clip(JSON.stringify(rest), 120)}`;
}

function describeEvent(e: ProductEvent): string {
  switch (e.type) {
    case "created":
      // A provisional name is the goal's first line until the first plan names the product (issue 28).
      return `created "${e.name}"${e.provisionalName ? " (working name until the plan names it)" : ""} in ${e.cwd}`;
    case "dialogue":
      return `${e.role} said: ${clip(e.text.replace(/\s+/g, " "), 120)}`;
    case "planProposed":
      return `plan v${e.plan.version} proposed "${e.plan.name}": ${e.plan.tasks.length} tasks on ${e.plan.instances.length} instances`;
    case "confirmed":
      return `plan v${e.plan.version} confirmed: ${e.plan.tasks.length} tasks`;
    case "phase":
      return `phase ${e.phase}${e.recovery ? ` — ${e.recovery.cause}` : ""}`;
    case "task": {
      const t = e.task;
      const tail = t.error
        ? ` — ${clip(t.error.replace(/\s+/g, " "), 100)}`
        : t.status === "completed"
          ? ` — ${lastLine(t.output, 80)}`
          : "";
      return `task ${t.taskId} ${t.status} (attempt ${t.attempts}) ${clip(t.title, 60)}${tail}`;
    }
    case "started": {
      const first = e.tasks.slice(0, 5).map((t) => `${t.taskId} (attempt ${t.attempt})`);
      const more = e.tasks.length > first.length ? ` and ${e.tasks.length - first.length} more` : "";
      return `started ${e.tasks.length} ${e.tasks.length === 1 ? "task" : "tasks"}: ${first.join(", ")}${more}`;
    }
    case "checkpoint":
      return `checkpoint ${e.checkpointId} (${e.completed}/${e.total} completed)`;
    case "mutated":
      return `plan v${e.plan.version} changed by the ${e.by}: ${clip(e.mutations.map(describeMutation).join("; "), 200)}`;
    case "verified":
      return `verified ${e.ok ? "green" : "red"} tree ${e.tree.slice(0, 12)}${e.taskId !== undefined ? ` (task ${e.taskId})` : ` (${e.scope})`}: ${checksLine(e.checks)}`;
    default:
      return otherEvent(e);
  }
}

const STATUS_STYLE: Record<string, { fill: string; stroke: string }> = {
  pending: { fill: "#eeeeee", stroke: "#999999" },
  running: { fill: "#cfe2ff", stroke: "#0d6efd" },
  waiting: { fill: "#fff3cd", stroke: "#ffc107" },
  completed: { fill: "#d1e7dd", stroke: "#198754" },
  failed: { fill: "#f8d7da", stroke: "#dc3545" },
  skipped: { fill: "#e2e3e5", stroke: "#6c757d" },
  cancelled: { fill: "#e2e3e5", stroke: "#6c757d" },
  superseded: { fill: "#f1e4e6", stroke: "#a66a73" },
};

/**
 * The status a view shows: `superseded` for a failed task a fix-up replaces (`supersededBy`, issue 28), else the
 * stored status. The wire status stays `failed` (PROTOCOL.md section 5).
 */
export function shownStatus(t: { status?: string; supersededBy?: string | undefined }): string {
  return t.supersededBy !== undefined && t.status === "failed" ? "superseded" : (t.status ?? "pending");
}

/** One plan mutation in words (`events`). */
function describeMutation(m: Mutation): string {
  switch (m.op) {
    case "addTask":
      return `add ${m.task.taskId} on ${m.task.instanceId}${m.task.supersedes ? ` (fix-up superseding ${m.task.supersedes})` : ""}`;
    case "removeTask":
      return `remove ${m.taskId}`;
    case "updateTask":
      return `update ${m.taskId}`;
    case "reassign":
      return `reassign ${m.taskId} to ${m.instanceId}`;
    case "addDependency":
      return `${m.taskId} after ${m.dependsOn}`;
    case "removeDependency":
      return `${m.taskId} no longer after ${m.dependsOn}`;
  }
}

/** The colours a task status is drawn with (the dashboard uses the same). */
export function statusStyle(status: string): { fill: string; stroke: string } {
  return STATUS_STYLE[status] ?? { fill: "#ffffff", stroke: "#000000" };
}

/** A task as `graph` draws it. */
type GraphTask = Pick<TaskState, "taskId" | "title" | "dependsOn"> & { status?: string; supersededBy?: string };

/** A node's label: id and title, and for a superseded task the fix-up that replaces it. */
function nodeLabel(t: GraphTask): string {
  return `${t.taskId}: ${t.title}${t.supersededBy ? ` (superseded by ${t.supersededBy})` : ""}`;
}

/** A node id safe in Mermaid and DOT. */
function nodeId(taskId: string): string {
  return `n_${taskId.replace(/[^A-Za-z0-9_]/g, "_")}`;
}

/** The DAG as a Mermaid flowchart, one class per task status. */
export function toMermaid(tasks: readonly GraphTask[]): string {
  const lines = ["flowchart TD"];
  for (const t of tasks) lines.push(`  ${nodeId(t.taskId)}["${nodeLabel(t).replace(/["\\]/g, "'")}"]`);
  for (const t of tasks) for (const d of t.dependsOn) lines.push(`  ${nodeId(d)} --> ${nodeId(t.taskId)}`);
  for (const t of tasks)
    if (t.supersededBy) lines.push(`  ${nodeId(t.taskId)} -. fix-up .-> ${nodeId(t.supersededBy)}`);
  const used = new Set(tasks.map(shownStatus));
  for (const status of used) {
    const st = statusStyle(status);
    lines.push(`  classDef ${status} fill:${st.fill},stroke:${st.stroke}`);
  }
  for (const t of tasks) lines.push(`  class ${nodeId(t.taskId)} ${shownStatus(t)}`);
  return `${lines.join("\n")}\n`;
}

/** The DAG as Graphviz DOT, nodes filled by task status. */
export function toDot(tasks: readonly GraphTask[]): string {
  const q = (s: string) => `"${s.replace(/["\\]/g, (c) => `\\${c}`)}"`;
  const lines = ["digraph product {", "  rankdir=TB;", '  node [shape=box, style="rounded,filled"];'];
  for (const t of tasks) {
    const st = statusStyle(shownStatus(t));
    lines.push(`  ${nodeId(t.taskId)} [label=${q(nodeLabel(t))}, fillcolor=${q(st.fill)}, color=${q(st.stroke)}];`);
  }
  for (const t of tasks) for (const d of t.dependsOn) lines.push(`  ${nodeId(d)} -> ${nodeId(t.taskId)};`);
  for (const t of tasks) {
    if (t.supersededBy)
      lines.push(`  ${nodeId(t.taskId)} -> ${nodeId(t.supersededBy)} [style=dashed, label="fix-up"];`);
  }
  lines.push("}");
  return `${lines.join("\n")}\n`;
}

/**
 * `live`, `gone` (not live although its lease still runs: its process on this host died, guarantee 13) or `expired`.
 * A new user read "expired" beside a lease that ran for another 30 s after a kill -9.
 */
function ownerState(owner: { live: boolean; expiresAt: string }, now: number): "live" | "gone" | "expired" {
  if (owner.live) return "live";
  return Date.parse(owner.expiresAt) > now ? "gone" : "expired";
}
