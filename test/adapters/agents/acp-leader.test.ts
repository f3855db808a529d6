/**
 * AcpLeader against the scripted test agent as a real ACP subprocess (`node --import tsx scripted-agent.ts`), plus the
 * pure answer readers (fenced JSON extraction, prose streaming, per-kind validation) and the leader resolver.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Plan, TaskState } from "../../../protocol/common.js";
import { AcpLeader, extractJsonBlock, parsePlanAnswer, ProseStream } from "../../../src/adapters/agents/acp-leader.js";
import { createLeaderResolver, UnavailableLeader } from "../../../src/adapters/agents/leader-resolver.js";
import type { AcpLeaderOptions } from "../../../src/adapters/agents/acp-leader.js";
import { LEADER_PROMPT_VERSION } from "../../../src/adapters/agents/leader-prompts.js";
import { AgentRegistry, parseAgentConfig } from "../../../src/adapters/agents/registry.js";
import { HeuristicLeader } from "../../../src/core/leader/heuristic-leader.js";
import { AgentConfigurationError } from "../../../src/core/ports.js";
import type { AgentInfo, PlanRequest } from "../../../src/core/ports.js";
import { isAlive, memoryLogger } from "../../fixtures/agents/pool-helpers.js";
import { eventually } from "../../support/eventually.js";
import { SCRIPTED_AGENT_ARGS } from "../../support/scripted-agent-program.js";

const dirs: string[] = [];
const leaders: AcpLeader[] = [];
afterAll(async () => {
  await Promise.allSettled(leaders.map((l) => l.close()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const ROSTER: AgentInfo[] = [
  { agentId: "coder", name: "Coder", role: "worker", strengths: ["typescript"] },
  { agentId: "writer", name: "Writer", role: "worker", strengths: ["docs"] },
];

const PLAN = {
  name: "Docs",
  summary: "Write the docs, then review them.",
  instances: [
    { instanceId: "w1", agentId: "writer", role: "worker" },
    { instanceId: "c1", agentId: "coder", role: "reviewer" },
  ],
  tasks: [
    { taskId: "t1", title: "Write the docs", description: "Write docs/api.md.", instanceId: "w1", dependsOn: [] },
    { taskId: "t2", title: "Review the docs", description: "Check docs/api.md.", instanceId: "c1", dependsOn: ["t1"] },
  ],
};

const CURRENT: Plan = { productId: "prd_x", version: 1, ...PLAN };
const STATES: TaskState[] = [
  { ...PLAN.tasks[0]!, status: "failed", attempts: 2, error: "disk full" },
  { ...PLAN.tasks[1]!, status: "pending", attempts: 0 },
];

interface LogLine {
  pid: number;
  event: string;
  text?: string;
  kind?: string;
  attempt?: number;
}

/** A workspace, a script file for the scripted agent, and a leader whose agent `lead` runs that script. */
function setup(script: Record<string, unknown>, options: Partial<AcpLeaderOptions> = {}) {
  const cwd = mkdtempSync(join(tmpdir(), "acp-leader-"));
  dirs.push(cwd);
  const logFile = join(cwd, "agent-log.jsonl");
  const scriptFile = join(cwd, "script.json");
  const writeScript = (s: Record<string, unknown>) => writeFileSync(scriptFile, JSON.stringify({ log: logFile, ...s }));
  writeScript(script);
  const registry = new AgentRegistry(
    parseAgentConfig(
      {
        agents: [
          {
            agentId: "lead",
            role: "leader",
            command: process.execPath,
            args: [...SCRIPTED_AGENT_ARGS],
            env: { SCRIPTED_AGENT_SCRIPT: scriptFile },
          },
        ],
      },
      join(cwd, "acp-orchestrator.json"),
    ),
  );
  const logger = memoryLogger();
  const leader = new AcpLeader({ agentId: "lead", registry, logger, graceMs: 300, defaultCwd: cwd, ...options });
  leaders.push(leader);
  const log = (): LogLine[] =>
    (existsSync(logFile) ? readFileSync(logFile, "utf8") : "")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as LogLine);
  const prompts = () => log().filter((l) => l.event === "prompt");
  return { cwd, leader, log, prompts, writeScript, logger };
}

function planRequest(cwd: string, overrides: Partial<PlanRequest> = {}): PlanRequest & { texts: string[] } {
  const texts: string[] = [];
  return {
    productId: "prd_1",
    goal: "Document the API and review it.",
    cwd,
    roster: ROSTER,
    dialogue: [{ role: "user", text: "Document the API and review it.", at: "2026-01-01T00:00:00.000Z" }],
    signal: new AbortController().signal,
    onText: (t) => texts.push(t),
    texts,
    ...overrides,
  };
}

// ---------------------------------------------------------------------------------------------------------------

describe("extractJsonBlock and ProseStream", () => {
  it("finds exactly one json block, keeps the prose, and explains every other case", () => {
    expect(extractJsonBlock('Here.\n\n```json\n{"a": 1}\n```\nBye.')).toEqual({
      kind: "one",
      value: { a: 1 },
      prose: "Here.\n\nBye.",
    });
    expect(extractJsonBlock('```\n{"a": 1}\n```')).toMatchObject({ kind: "one", value: { a: 1 } });
    expect(extractJsonBlock('{"bare": true}')).toEqual({ kind: "one", value: { bare: true }, prose: "" });
    expect(extractJsonBlock("Just words.\n```ts\nconst x = 1;\n```")).toEqual({
      kind: "none",
      prose: "Just words.\n```ts\nconst x = 1;\n```",
    });
    expect(extractJsonBlock('```json\n{"a":1}\n```\n```json\n{"b":2}\n```')).toMatchObject({
      kind: "invalid",
      errors: ["the answer holds 2 fenced JSON blocks; send exactly one"],
    });
    const broken = extractJsonBlock("```json\n{broken\n```");
    expect(broken.kind === "invalid" && broken.errors[0]).toMatch(/^the fenced block is not valid JSON: /);
    expect(extractJsonBlock("```json\n[1, 2]\n```")).toMatchObject({ kind: "invalid" });
    expect(extractJsonBlock('```json\n{"a": 1}')).toMatchObject({
      kind: "invalid",
      errors: [expect.stringContaining("not closed")],
    });
  });

  it("streams the prose and holds back json blocks even when fences are split across chunks", () => {
    const text = 'Plan below.\n```json\n{"a": 1}\n```\nShown ```inline``` too.\n```ts\ncode\n```\nEnd';
    for (const size of [1, 2, 3, 5, 7, 100]) {
      let out = "";
      const stream = new ProseStream((t) => (out += t));
      for (let i = 0; i < text.length; i += size) stream.push(text.slice(i, i + size));
      stream.end();
      expect(out, `chunk size ${size}`).toBe("Plan below.\nShown ```inline``` too.\n```ts\ncode\n```\nEnd");
    }
  });

  it("checks a plan against the roster and the DAG rules, and reads questions", () => {
    const ghost = { ...PLAN, instances: [{ instanceId: "w1", agentId: "ghost", role: "worker" }, PLAN.instances[1]] };
    const result = parsePlanAnswer(`\`\`\`json\n${JSON.stringify(ghost)}\n\`\`\``, ROSTER);
    expect(result).toEqual({
      ok: false,
      errors: ['instances[0].agentId: "ghost" is not one of the team\'s agents (coder, writer)'],
    });
    const missing = parsePlanAnswer('```json\n{"name": "x", "summary": "y", "instances": []}\n```', ROSTER);
    expect(missing.ok === false && missing.errors.join(" ")).toContain("tasks");
    const asked = parsePlanAnswer(
      'Hm.\n```json\n{"questions": [{"question": "Which DB?", "options": ["pg"]}]}\n```',
      ROSTER,
    );
    expect(asked).toEqual({
      ok: true,
      value: { kind: "ask", message: "Hm.", questions: [{ question: "Which DB?", options: ["pg"] }] },
    });
  });
});

describe.concurrent("AcpLeader with the scripted agent", () => {
  it("plans from one fenced JSON block, streams only the prose, and keeps one session per product", async ({
    expect,
  }) => {
    const revised = { ...PLAN, name: "Docs v2" };
    const { cwd, leader, prompts } = setup({
      leader: {
        plan: [
          { text: "Here is my plan.", json: PLAN, chunkSize: 7 },
          { text: "Revised.", json: revised },
        ],
      },
    });
    const request = planRequest(cwd);
    const result = await leader.plan(request);
    expect(result).toEqual({ kind: "plan", plan: PLAN, message: "Here is my plan." });
    expect(request.texts.join("")).toBe("Here is my plan.\n\n");
    const first = prompts()[0]!;
    expect(first.text).toMatch(/^# acp-orchestrator leader turn: plan\n/);
    expect(first.text).toContain("Document the API and review it.");
    expect(first.text).toContain("agentId `coder` — Coder; role: worker; strengths: typescript");
    expect(first.text).toContain(`All work happens in ${cwd}.`);
    expect(first.text).toContain('"tasks": [');

    const pid = leader.livePids()[0];
    const second = await leader.plan(
      planRequest(cwd, {
        previousPlan: { productId: "prd_1", version: 1, ...PLAN },
        dialogue: [
          { role: "user", text: "Document the API and review it.", at: "2026-01-01T00:00:00.000Z" },
          { role: "user", text: "Call it v2.", at: "2026-01-01T00:01:00.000Z" },
        ],
      }),
    );
    expect(second.kind === "plan" && second.plan.name).toBe("Docs v2");
    expect(leader.livePids()).toEqual([pid]);
    const again = prompts()[1]!;
    expect(again.pid).toBe(pid);
    expect(again.text).toContain("## Your previous plan (version 1)");
    expect(again.text).toContain("Call it v2.");

    await leader.close();
    expect(leader.livePids()).toEqual([]);
    expect(isAlive(pid!)).toBe(false);
    await expect(leader.plan(planRequest(cwd))).rejects.toThrow(/was closed/);
  });

  it("sends the validation errors back and accepts the second answer", async ({ expect }) => {
    const { cwd, leader, log, prompts } = setup({
      leader: { plan: [{ text: "Oops.", raw: '```json\n{"name": "Docs",\n```\n' }, { json: PLAN }] },
    });
    const request = planRequest(cwd);
    const result = await leader.plan(request);
    expect(result.kind === "plan" && result.plan).toEqual(PLAN);
    const [first, repair] = prompts();
    expect(repair!.pid).toBe(first!.pid);
    expect(repair!.attempt).toBe(2);
    expect(repair!.text).toMatch(/^# acp-orchestrator leader turn: plan\n/);
    expect(repair!.text).toContain("attempt 2 of 3");
    expect(repair!.text).toContain("- the fenced block is not valid JSON:");
    expect(log().filter((l) => l.event === "initialize")).toHaveLength(1);
    expect(request.texts.join("")).toBe("Oops.\n\n");
  });

  it("rejects after three invalid answers, naming each answer's problem", async ({ expect }) => {
    const ghost = { ...PLAN, instances: [{ instanceId: "w1", agentId: "ghost", role: "worker" }, PLAN.instances[1]] };
    const cycle = { ...PLAN, tasks: [{ ...PLAN.tasks[0], dependsOn: ["t2"] }, PLAN.tasks[1]] };
    const { cwd, leader, prompts } = setup({
      leader: { plan: [{ text: "No JSON at all." }, { json: ghost }, { json: cycle }, { json: PLAN }] },
    });
    const error = await leader.plan(planRequest(cwd)).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error).toBeInstanceOf(Error);
    expect(error!.message).toMatch(/^the leader agent "lead" gave no valid plan in 3 answers \(answer 1: /);
    expect(error!.message).toContain("answer 1: the answer holds no fenced ```json block");
    expect(error!.message).toContain('answer 2: instances[0].agentId: "ghost" is not one of the team\'s agents');
    expect(error!.message).toContain("answer 3: tasks[0]: Tasks form a dependency cycle");
    expect(prompts()).toHaveLength(3);
  });

  it("asks questions, then plans with the answers", async ({ expect }) => {
    const { cwd, leader, prompts } = setup({
      leader: {
        plan: [
          {
            text: "Before I plan:",
            json: { questions: [{ question: "Which format?", options: ["markdown", "html"] }] },
          },
          { json: PLAN },
        ],
      },
    });
    const asked = await leader.plan(planRequest(cwd));
    expect(asked).toEqual({
      kind: "ask",
      message: "Before I plan:",
      questions: [{ question: "Which format?", options: ["markdown", "html"] }],
    });
    const planned = await leader.plan(planRequest(cwd, { answers: { askId: "ask_1", content: "markdown please" } }));
    expect(planned.kind).toBe("plan");
    expect(prompts()[1]!.text).toContain(
      "## Answers to your questions\n\nThe user answered your questions (ask ask_1):\n\nmarkdown please",
    );
  });

  it("reads mutations from a message answer, repairs an invalid batch, and answers plain messages", async ({
    expect,
  }) => {
    const addTask = {
      op: "addTask",
      task: { taskId: "t3", title: "Add examples", description: "Examples.", instanceId: "w1", dependsOn: ["t1"] },
    };
    const { leader, prompts } = setup({
      leader: {
        message: [
          { text: "Sure.", json: { mutations: [{ op: "removeTask", taskId: "t9" }] } },
          { text: "Added the examples task.", json: { mutations: [addTask] } },
          { text: "All on track." },
        ],
      },
    });
    const texts: string[] = [];
    const base = {
      productId: "prd_m",
      goal: "Docs",
      plan: CURRENT,
      tasks: STATES,
      roster: ROSTER,
      signal: new AbortController().signal,
    };
    const answer = await leader.message({ ...base, content: "Add examples", onText: (t) => texts.push(t) });
    expect(answer).toEqual({ response: "Added the examples task.", mutations: [addTask] });
    expect(prompts().find((p) => p.kind === "message")!.text).toContain("`t1` [failed] Write the docs");
    expect(prompts().filter((p) => p.kind === "message")[1]!.text).toContain("mutations[0]: ");
    const plain = await leader.message({ ...base, content: "How is it going?", onText: () => undefined });
    expect(plain).toEqual({ response: "All on track." });
  });

  it("consults on a failure: mutate with a valid batch, or give up", async ({ expect }) => {
    const fix = {
      op: "addTask",
      task: {
        taskId: "t1-fix",
        title: "Fix: write the docs",
        description: "Free disk space first.",
        instanceId: "w1",
        dependsOn: [],
      },
    };
    const mutations = [
      fix,
      { op: "removeDependency", taskId: "t2", dependsOn: "t1" },
      { op: "addDependency", taskId: "t2", dependsOn: "t1-fix" },
    ];
    const { leader, prompts } = setup({
      leader: {
        consult: [
          { text: "Adding a fix-up.", json: { decision: "mutate", mutations } },
          { text: "No way.", json: { decision: "giveUp" } },
        ],
      },
    });
    const request = {
      productId: "prd_c",
      goal: "Docs",
      failedTask: STATES[0]!,
      plan: CURRENT,
      tasks: STATES,
      roster: ROSTER,
      signal: new AbortController().signal,
    };
    expect(await leader.consultOnFailure(request)).toEqual({ kind: "mutate", mutations, message: "Adding a fix-up." });
    expect(await leader.consultOnFailure(request)).toEqual({ kind: "giveUp", message: "No way." });
    const text = prompts()[0]!.text!;
    expect(text).toMatch(/^# acp-orchestrator leader turn: consult\n/);
    expect(text).toContain('Task `t1` "Write the docs" (instance w1) failed its last attempt (2 attempts).');
    expect(text).toContain("disk full");
    expect(text).toContain("Tasks that depend on it (skipped if you give up): t2.");
  });

  it("drives a goal run: derives the checklist, plans a phase with targets, assesses", async ({ expect }) => {
    const { cwd, leader, prompts } = setup({
      leader: {
        checklist: [
          {
            json: {
              criteria: [
                { id: "c1", text: "Docs exist" },
                { id: "c2", text: "Docs reviewed" },
              ],
            },
          },
        ],
        phase: [{ json: { targets: ["c9"], ...PLAN } }, { text: "Phase one.", json: { ...PLAN, targets: ["c1"] } }],
        assess: [{ text: "Docs are there.", json: { passed: ["c1"] } }],
      },
    });
    const signal = new AbortController().signal;
    const checklist = await leader.deriveChecklist({ goalRunId: "gr_1", goal: "Docs", cwd, roster: ROSTER, signal });
    expect(checklist.criteria).toEqual([
      { id: "c1", text: "Docs exist" },
      { id: "c2", text: "Docs reviewed" },
    ]);
    const criteria = checklist.criteria.map((c) => ({ ...c, passed: false }));
    const phase = await leader.planPhase({
      goalRunId: "gr_1",
      goal: "Docs",
      cwd,
      phaseIndex: 0,
      criteria,
      progressSummary: "",
      messages: ["Keep it short."],
      roster: ROSTER,
      signal,
      onText: () => undefined,
    });
    expect(phase).toEqual({ plan: PLAN, message: "Phase one.", targets: ["c1"] });
    const assessed = await leader.assess({
      goalRunId: "gr_1",
      goal: "Docs",
      phaseIndex: 0,
      criteria,
      plan: CURRENT,
      tasks: STATES,
      targets: ["c1"],
      signal,
    });
    expect(assessed).toEqual({ passed: ["c1"], message: "Docs are there." });
    const all = prompts();
    expect(all.map((p) => `${p.kind}:${p.attempt}`)).toEqual(["checklist:1", "phase:1", "phase:2", "assess:1"]);
    expect(new Set(all.map((p) => p.pid)).size).toBe(1);
    expect(all[2]!.text).toContain('targets: "c9" is not a criterion id (c1, c2)');
    expect(all[1]!.text).toContain("1. Keep it short.");
  });

  it("honours the signal with session/cancel and keeps the session; a crash is reported and the next turn starts afresh", async ({
    expect,
  }) => {
    const { cwd, leader, log, writeScript } = setup({ leader: { plan: [{ text: "Thinking…", end: "hang" }] } });
    const controller = new AbortController();
    const pending = leader.plan(planRequest(cwd, { signal: controller.signal }));
    await eventually(() => log().some((l) => l.event === "prompt"), 30_000, "the leader's prompt");
    controller.abort(new Error("product paused"));
    await expect(pending).rejects.toThrow("product paused");
    // The agent logs the session/cancel notification when it reads it, which may be after the turn rejected.
    await eventually(() => log().some((l) => l.event === "cancel"), 30_000, "the agent to log session/cancel");
    const [pid] = leader.livePids();
    expect(isAlive(pid!)).toBe(true);

    writeScript({ leader: { plan: [{ text: "bye", end: "crash", exitCode: 3 }] } });
    await expect(leader.plan(planRequest(cwd))).rejects.toThrow(
      /^the leader agent "lead" crashed \(exit code 3\) during its turn — stderr tail: .*crashing as scripted/s,
    );
    expect(leader.livePids()).toEqual([]);

    writeScript({ leader: { plan: [{ json: PLAN }] } });
    expect((await leader.plan(planRequest(cwd))).kind).toBe("plan");
    expect(leader.livePids()).toHaveLength(1);
    expect(leader.livePids()[0]).not.toBe(pid);
  });

  it("gives up on a turn past turnTimeoutMs and kills the process", async ({ expect }) => {
    const { cwd, leader, log } = setup({ leader: { plan: [{ end: "hang" }] } }, { turnTimeoutMs: 1_000 });
    await expect(leader.plan(planRequest(cwd))).rejects.toThrow(
      'the leader agent "lead" did not answer within 1000 ms',
    );
    const pid = log().find((l) => l.event === "start")!.pid;
    expect(isAlive(pid)).toBe(false);
    expect(leader.livePids()).toEqual([]);
  });
});

describe("AcpLeader start failures", () => {
  const registry = new AgentRegistry(
    parseAgentConfig(
      {
        agents: [
          { agentId: "mute", command: process.execPath, args: ["-e", "setInterval(() => {}, 1000)"] },
          { agentId: "missing", command: "/nonexistent/leader-agent" },
        ],
      },
      join(tmpdir(), "acp-orchestrator.json"),
    ),
  );

  it("kills an agent that never answers initialize after startTimeoutMs", async () => {
    const leader = new AcpLeader({
      agentId: "mute",
      registry,
      logger: memoryLogger(),
      graceMs: 200,
      startTimeoutMs: 300,
    });
    leaders.push(leader);
    const started = leader.plan(planRequest(tmpdir()));
    const pid = leader.livePids()[0];
    await expect(started).rejects.toThrow(
      'the leader agent "mute" did not start within 300 ms (stage initialize did not finish)',
    );
    expect(isAlive(pid!)).toBe(false);
    expect(leader.livePids()).toEqual([]);
  });

  it("rejects with a configuration error naming the command and the fix when the agent cannot be started", async () => {
    const leader = new AcpLeader({ agentId: "missing", registry, logger: memoryLogger(), graceMs: 200 });
    leaders.push(leader);
    const error = await leader.plan(planRequest(tmpdir())).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AgentConfigurationError);
    expect(error).toMatchObject({
      message: 'Could not start agent "missing": the command "/nonexistent/leader-agent" was not found.',
      agentId: "missing",
      remediation: expect.stringContaining('fix "command" of agent "missing"'),
    });
  });
});

describe("createLeaderResolver", () => {
  const registry = new AgentRegistry(
    parseAgentConfig({ agents: [{ agentId: "lead", command: "lead-acp" }] }, join(tmpdir(), "acp-orchestrator.json")),
  );
  const fallback = new HeuristicLeader();

  it("uses the fallback without a leader, one AcpLeader per agent, and explains unusable ids", async () => {
    const selection = createLeaderResolver({ registry, logger: memoryLogger(), fallback });
    expect(selection.resolve(undefined)).toBe(fallback);
    const lead = selection.resolve("lead");
    expect(lead).toBeInstanceOf(AcpLeader);
    expect(selection.resolve("lead")).toBe(lead);
    const unknown = selection.resolve("ghost");
    expect(unknown).toBeInstanceOf(UnavailableLeader);
    await expect(unknown.plan(planRequest("/tmp"))).rejects.toThrow(
      'unknown leader agent "ghost": it is not in the agent registry (configured agents: lead)',
    );
    await expect(selection.resolve("builtin-worker").plan(planRequest("/tmp"))).rejects.toThrow(/cannot lead/);
    await selection.close();
    expect(selection.resolve("lead")).toBeInstanceOf(UnavailableLeader);
  });

  it("names every configured agent for an unknown leader, not only the plans' team (allowedAgents)", async () => {
    const narrowed = new AgentRegistry(
      parseAgentConfig(
        {
          agents: [
            { agentId: "lead", command: "lead-acp" },
            { agentId: "coder", command: "coder-acp" },
          ],
          allowedAgents: ["coder"],
        },
        join(tmpdir(), "acp-orchestrator.json"),
      ),
    );
    const selection = createLeaderResolver({ registry: narrowed, logger: memoryLogger(), fallback });
    await expect(selection.resolve("ghost").plan(planRequest("/tmp"))).rejects.toThrow(
      'unknown leader agent "ghost": it is not in the agent registry (configured agents: lead, coder)',
    );
    await selection.close();
  });

  it("uses the configured default leader when the product names none", () => {
    const selection = createLeaderResolver({
      registry,
      logger: memoryLogger(),
      fallback,
      defaultLeaderAgentId: "lead",
    });
    expect(selection.resolve(undefined)).toBeInstanceOf(AcpLeader);
    expect((selection.resolve(undefined) as AcpLeader).agentId).toBe("lead");
    expect(LEADER_PROMPT_VERSION).toMatch(/^leader-prompts\/\d+$/);
  });
});
