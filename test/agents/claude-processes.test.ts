/**
 * No orphans with the published Claude agents (issue 11 "Must show", DESIGN.md guarantee 12):
 * - kill -9 of the server while a claude-agent-acp worker (which has started a helper that ignores SIGTERM, in a
 *   session of its own), a claude-code-acp worker and a claude-agent-acp leader are mid-turn, their model replies held
 *   open: within 5 s no agent process and nothing they started remains, and the fake model sees no request after the
 *   kill;
 * - a worker that exits on its own after starting such a helper leaves nothing behind either.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isAlive, sleep } from "../fixtures/agents/pool-helpers.js";
import { tempDir } from "../support/server-process.js";
import { claudeAgent, type SuiteAgent } from "./support/agents.js";
import type { ModelRequest } from "./support/fake-model.js";
import { markedProcesses, waitUntilGone } from "./support/processes.js";
import { answerStep, bashStep, holdStep, routeScript, type WorkerStep } from "./support/scripts.js";
import { productCompleted, report, runTasks, startSuiteServer, suiteModel, taskStatus } from "./support/suite.js";

const FIXTURES = join(import.meta.dirname, "fixtures");
const POLICY = { default: "deny", rules: { read: "allow", edit: "allow", execute: "allow" } };

function startHelper(pidFile: string): WorkerStep {
  return bashStep(`sh ${join(FIXTURES, "start-stubborn-helper.sh")} ${pidFile}`, "Start the dev server");
}

async function helperPid(pidFile: string): Promise<number> {
  for (let i = 0; i < 1_200 && !(existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== ""); i++)
    await sleep(50);
  return Number(readFileSync(pidFile, "utf8").trim());
}

const from = (agent: SuiteAgent) => (r: ModelRequest) => r.client === agent.mark;

describe("Claude agents leave no process behind", () => {
  it("kill -9 of the server mid-turn: within 5 s no agent or helper remains, and the model hears nothing more", async () => {
    const workspace = tempDir("agents-kill-");
    const pidFile = join(workspace, "helper.pid");
    const model = await suiteModel(
      routeScript({
        leader: () => ({ text: "Let me look at this carefully.", hold: true }),
        worker: (brief) =>
          brief.taskId === "t1" ? [startHelper(pidFile), holdStep("Waiting for the server.")] : [holdStep()],
      }),
    );
    const lead = claudeAgent({ agentId: "lead", package: "claude-agent-acp", model, role: "leader" });
    const agentWorker = claudeAgent({ agentId: "claude-agent", package: "claude-agent-acp", model });
    const codeWorker = claudeAgent({ agentId: "claude-code", package: "claude-code-acp", model });
    const agents = [lead, agentWorker, codeWorker];
    const server = await startSuiteServer(agents, { permissions: POLICY });

    await runTasks(server, workspace, [{ taskId: "t1", agentId: "claude-agent", title: "Start the dev server" }], {
      isolation: "shared",
    });
    await runTasks(
      server,
      tempDir("agents-kill-code-"),
      [{ taskId: "t2", agentId: "claude-code", title: "Think hard" }],
      {
        isolation: "shared",
      },
    );
    await server.request("product.plan", {
      goal: "Plan something big",
      cwd: tempDir("agents-kill-lead-"),
      leaderAgentId: "lead",
      isolation: "shared",
    });

    // All three are mid-turn: each has a model reply held open; the claude-agent worker's helper runs.
    await Promise.all(agents.map((a) => model.waitForHeld(from(a), 180_000)));
    const helper = await helperPid(pidFile);
    expect(isAlive(helper)).toBe(true);
    const before = markedProcesses(agents.map((a) => a.mark));
    expect(before.length).toBeGreaterThanOrEqual(4);

    const killedAt = Date.now();
    await server.kill();
    const gone = await waitUntilGone(
      agents.map((a) => a.mark),
      5_000,
    );
    report(
      `kill -9 mid-turn: ${before.length} agent processes (helper included) gone ${gone.elapsedMs} ms after the kill`,
    );
    expect(gone.remaining).toEqual([]);
    expect(isAlive(helper)).toBe(false);
    // Nothing is left that could call the model; give a straggler request time to arrive anyway.
    await sleep(3_000);
    expect(model.requestsAfter(killedAt).map((r) => `${r.client} ${r.path}`)).toEqual([]);
  });

  it("a worker that exits on its own after starting a helper that ignores SIGTERM leaves nothing behind", async () => {
    const agentWs = tempDir("agents-exit-agent-");
    const codeWs = tempDir("agents-exit-code-");
    const exitOwn = (pattern: string): WorkerStep =>
      bashStep(`sh ${join(FIXTURES, "exit-own-agent.sh")} ${pattern}`, "Restart myself");
    const model = await suiteModel(
      routeScript({
        worker: (brief) =>
          brief.taskId === "t1"
            ? [startHelper(join(brief.workspace, "helper.pid")), exitOwn("claude-agent-acp/dist/index.js")]
            : brief.taskId === "t2"
              ? [startHelper(join(brief.workspace, "helper.pid")), exitOwn("claude-code-acp/dist/index.js")]
              : [answerStep("Nothing to do.")],
      }),
    );
    const agentWorker = claudeAgent({ agentId: "claude-agent", package: "claude-agent-acp", model });
    const codeWorker = claudeAgent({ agentId: "claude-code", package: "claude-code-acp", model });
    const server = await startSuiteServer([agentWorker, codeWorker], { permissions: POLICY });

    const products = [
      await runTasks(server, agentWs, [{ taskId: "t1", agentId: "claude-agent", title: "Serve", maxAttempts: 1 }], {
        isolation: "shared",
      }),
      await runTasks(server, codeWs, [{ taskId: "t2", agentId: "claude-code", title: "Serve", maxAttempts: 1 }], {
        isolation: "shared",
      }),
    ];
    for (const [i, [productId, ws, agent]] of (
      [
        [products[0]!, agentWs, agentWorker],
        [products[1]!, codeWs, codeWorker],
      ] as const
    ).entries()) {
      const taskId = `t${i + 1}`;
      const failed = await taskStatus(server, productId, taskId, "failed", 180_000);
      const helper = await helperPid(join(ws, "helper.pid"));
      // The attempt ended because its agent exited (not because the server stopped it).
      expect(String(failed.params.error), agent.packageName).toMatch(/exit|crash|killed by SIG/i);
      const started = Date.now();
      for (let j = 0; j < 100 && isAlive(helper); j++) await sleep(50);
      report(
        `${agent.packageName} exited on its own: its SIGTERM-proof helper gone ${Date.now() - started} ms after the task failed`,
      );
      expect(isAlive(helper)).toBe(false);
      await productCompleted(server, productId);
    }
    const gone = await waitUntilGone([agentWorker.mark, codeWorker.mark], 5_000);
    expect(gone.remaining).toEqual([]);
    expect(await server.close()).toBe(0);
  });
});
