/**
 * The model-backed leader end to end (issue 3 item 2, "Must show"): the built server as a subprocess, a config file
 * whose `leader` is the scripted test agent, and the scripted agent as worker too. Covers plan (after one invalid
 * answer) → planReady → confirm → completed; three invalid answers → product.planFailed with the reason; a leaderAsk
 * answered through product.message {askId} → plan; an unknown leaderAgentId → planFailed; and no leader process left
 * after the server exits.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isAlive, sleep } from "../fixtures/agents/pool-helpers.js";
import { isJsonRpcLine, startServer, tempDir } from "../support/server-process.js";
import type { ServerHandle } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

const PLAN = {
  name: "Docs",
  summary: "Write the docs, then review them.",
  instances: [
    { instanceId: "w1", agentId: "coder", role: "worker" },
    { instanceId: "w2", agentId: "coder", role: "reviewer" },
  ],
  tasks: [
    { taskId: "t1", title: "Write the docs", description: "Write docs/api.md.", instanceId: "w1", dependsOn: [] },
    { taskId: "t2", title: "Review the docs", description: "Check docs/api.md.", instanceId: "w2", dependsOn: ["t1"] },
  ],
};

interface LogLine {
  pid: number;
  event: string;
  role?: string;
  kind?: string;
  attempt?: number;
  text?: string;
}

let workspace: string;
let server: ServerHandle;
const logs: Record<string, string> = {};

/** Writes one script per agent and a config whose default leader is `lead`. */
function writeConfig(dir: string): void {
  const agents = Object.entries({
    lead: {
      leader: {
        plan: [
          { text: "Let me think.", raw: '```json\n{"name": "Docs", "tasks": [\n```\n' },
          { text: "Two tasks: write, then review.", json: PLAN },
        ],
      },
    },
    "bad-lead": {
      leader: { plan: [{ text: "No JSON here." }, { raw: "```json\n[1]\n```" }, { json: { name: "x" } }] },
    },
    "asking-lead": {
      leader: {
        plan: [
          {
            text: "One question first.",
            json: { questions: [{ question: "Which format?", options: ["markdown", "html"] }] },
          },
          { text: "Markdown it is.", json: PLAN },
        ],
      },
    },
    coder: {
      worker: {
        default: {
          actions: [{ toolCall: { title: "Edit docs/api.md", kind: "edit" } }, { say: "working… " }],
          text: "done",
          usage: { inputTokens: 120, outputTokens: 30 },
        },
      },
    },
  }).map(([agentId, script]) => {
    const log = join(dir, `${agentId}.jsonl`);
    logs[agentId] = log;
    const file = join(dir, `${agentId}.script.json`);
    writeFileSync(file, JSON.stringify({ ...script, log }));
    return {
      agentId,
      role: agentId === "coder" ? "worker" : "leader",
      command: process.execPath,
      args: [...SCRIPTED_AGENT_ARGS],
      env: { SCRIPTED_AGENT_SCRIPT: file },
      strengths: agentId === "coder" ? ["docs"] : [],
    };
  });
  writeFileSync(join(dir, "acp-orchestrator.json"), JSON.stringify({ agents, leader: "lead" }));
}

function agentLog(agentId: string): LogLine[] {
  const file = logs[agentId] as string;
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as LogLine);
}

async function plan(params: Record<string, unknown>): Promise<string> {
  const result = await server.request<{ productId: string; phase: string }>("product.plan", {
    goal: "Document the API, then review the docs.",
    cwd: workspace,
    ...params,
  });
  expect(result.phase).toBe("planning");
  return result.productId;
}

const about = (productId: string, method: string) => (n: { method: string; params: Record<string, unknown> }) =>
  n.method === method && n.params.productId === productId;

beforeAll(async () => {
  workspace = tempDir("acp-orch-leader-");
  writeConfig(workspace);
  server = await startServer({ cwd: workspace });
});

afterAll(async () => {
  if (server.child.exitCode === null) await server.close();
});

describe("a model-backed leader over real stdio", () => {
  it("plans with the configured leader after one repaired answer, confirms, and completes on scripted workers", async () => {
    const productId = await plan({});
    const ready = await server.waitFor(about(productId, "product.planReady"));
    const readyPlan = ready.params.plan as typeof PLAN & { productId: string; version: number };
    expect(readyPlan).toMatchObject({ ...PLAN, productId, version: 1 });
    const prompts = agentLog("lead").filter((l) => l.event === "prompt");
    expect(prompts.map((p) => `${p.kind}:${p.attempt}`)).toEqual(["plan:1", "plan:2"]);
    expect(prompts[0]!.text).toContain("agentId `coder`");
    expect(prompts[1]!.text).toContain("the fenced block is not valid JSON");
    const streamed = server.notifications
      .filter(about(productId, "product.planningDelta"))
      .map((n) => n.params.text)
      .join("");
    expect(streamed).toContain("Two tasks: write, then review.");
    expect(streamed).not.toContain("```");
    const said = server.notifications.find(about(productId, "product.leaderMessage"));
    expect(said?.params.message).toBe("Two tasks: write, then review.");

    const completed = server.waitFor(about(productId, "product.completed"), 30_000);
    await server.request("product.confirm", { productId });
    expect((await completed).params.phase).toBe("completed");
    const status = await server.request<{ tasks: { taskId: string; status: string; output?: string }[] }>(
      "product.status",
      { productId },
    );
    expect(status.tasks.map((t) => `${t.taskId}:${t.status}`)).toEqual(["t1:completed", "t2:completed"]);
    expect(status.tasks.every((t) => (t.output ?? "").includes("working… done"))).toBe(true);
    expect(
      agentLog("coder")
        .filter((l) => l.event === "prompt")
        .map((p) => p.role),
    ).toEqual(["worker", "worker"]);
  });

  it("reports product.planFailed with the reasons after three invalid answers", async () => {
    const productId = await plan({ leaderAgentId: "bad-lead" });
    const failed = await server.waitFor(about(productId, "product.planFailed"));
    const error = String(failed.params.error);
    expect(error).toMatch(/^The leader could not plan: the leader agent "bad-lead" gave no valid plan in 3 answers/);
    expect(error).toContain("answer 1: the answer holds no fenced ```json block");
    expect(error).toContain("answer 2: the fenced JSON block must hold a JSON object");
    expect(error).toContain("answer 3: summary:");
    expect(server.notifications.some(about(productId, "product.planReady"))).toBe(false);
    const status = await server.request<{ phase: string; recovery?: { cause: string } }>("product.status", {
      productId,
    });
    expect(status.phase).toBe("planning");
    expect(status.recovery?.cause).toBe(error);
  });

  it("asks through product.leaderAsk and plans once product.message answers with the askId", async () => {
    const productId = await plan({ leaderAgentId: "asking-lead" });
    const ask = await server.waitFor(about(productId, "product.leaderAsk"));
    expect(ask.params.questions).toEqual([{ question: "Which format?", options: ["markdown", "html"] }]);
    const answered = await server.request<{ response: string; plan?: { version: number; tasks: unknown[] } }>(
      "product.message",
      { productId, content: "markdown", askId: ask.params.askId },
    );
    expect(answered.response).toBe("Markdown it is.");
    expect(answered.plan?.tasks).toHaveLength(2);
    await server.waitFor(about(productId, "product.planReady"));
    const second = agentLog("asking-lead").filter((l) => l.event === "prompt")[1]!;
    expect(second.text).toContain(`The user answered your questions (ask ${String(ask.params.askId)}):\n\nmarkdown`);
  });

  it("fails planning with a clear reason for an unknown leaderAgentId", async () => {
    const productId = await plan({ leaderAgentId: "ghost" });
    const failed = await server.waitFor(about(productId, "product.planFailed"));
    expect(failed.params.error).toBe(
      'The leader could not plan: unknown leader agent "ghost": it is not in the agent registry (configured agents: lead, bad-lead, asking-lead, coder)',
    );
  });

  it("leaves no leader process behind when the server exits, and stdout carried JSON-RPC only", async () => {
    const pids = ["lead", "bad-lead", "asking-lead"].flatMap((id) =>
      agentLog(id)
        .filter((l) => l.event === "start")
        .map((l) => l.pid),
    );
    expect(pids).toHaveLength(3);
    expect(pids.every(isAlive)).toBe(true); // each product keeps its leader session between turns
    expect(await server.close()).toBe(0);
    for (let i = 0; i < 40 && pids.some(isAlive); i++) await sleep(50);
    expect(pids.filter(isAlive)).toEqual([]);
    expect(server.stdoutLines.every(isJsonRpcLine)).toBe(true);
  });
});
