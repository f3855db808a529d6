/**
 * Human commands print human lines only, and a product has one title (issue 28, case 6), through the built CLI with
 * real server and agent subprocesses: `run` is killed under its server (SIGKILL, tasks running) and says so in one
 * line with the resume command (it printed the SDK's stack); `resume` at once takes the product over from the dead
 * owner, whose server logs a warning, shown as a plain `acp-orchestrator: warning: …` line (it was a raw pino JSON
 * line); `run`, `list`, `status`, `events` and the dashboard call the product by the plan's name, not by its first
 * task.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compileLoggingAgent } from "../fixtures/agents/compile-logging-agent.js";
import type { ExecutionLogLine } from "../fixtures/agents/logging-agent.js";
import { readExecutionLog } from "../fixtures/agents/execution-log.js";
import { runCli, startCli, type CliResult } from "../support/cli-run.js";
import { CLI, tempDir } from "../support/server-process.js";

const GOAL = "- Write note one\n- Write note two";
const TITLE = "Note one and note two";
/** Long enough that a dead owner's lease is still current when `resume` starts, on any machine. */
const LEASE_ENV = { ACP_ORCHESTRATOR_LEASE_TTL_MS: "300000" };

/** `run` as a subprocess, not awaited: its server is killed under it. */
function startRun(args: string[], cwd: string): Promise<CliResult> {
  return runCli(["run", ...args], cwd, LEASE_ENV);
}

/** Starts `acp-orchestrator ui`; resolves its origin once it prints its address, and a way to stop it. */
function startUi(args: string[], cwd: string): Promise<{ origin: string; stop: () => void }> {
  const child = spawn(process.execPath, [CLI, "ui", ...args], { cwd, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /dashboard: (http:\/\/\S+)/u.exec(out);
      if (m) resolve({ origin: new URL(m[1] as string).origin, stop: () => child.kill("SIGKILL") });
    });
    child.once("exit", (code) => reject(new Error(`ui exited ${String(code)}`)));
  });
}

function executions(log: string): ExecutionLogLine[] {
  return readExecutionLog(log);
}

/** Resolves once the execution log has `count` start lines (the agents write them as each task begins). */
async function startsLogged(log: string, count: number): Promise<ExecutionLogLine[]> {
  for (;;) {
    const starts = executions(log).filter((l) => l.event === "start");
    if (starts.length >= count) return starts;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Every line of a human command's output: none is a JSON object (a raw log line). */
function expectHumanLines(text: string): void {
  for (const line of text.split("\n").filter((l) => l.trim() !== "")) {
    expect(line, "a raw JSON line in human output").not.toMatch(/^\s*\{.*\}\s*$/u);
  }
}

/**
 * Writes `agents.json` in `dir`: one agent `notes`, the logging agent, whose first attempt of each task takes a minute
 * (`retryMs`: a later attempt's time). Returns the config's path and the execution log's.
 */
function notesAgent(dir: string, retryMs?: number): { config: string; log: string } {
  const agentFile = compileLoggingAgent(dir);
  const log = join(dir, "executions.jsonl");
  writeFileSync(log, "");
  const config = join(dir, "agents.json");
  const env = {
    LOGGING_AGENT_LOG: log,
    LOGGING_AGENT_MIN_MS: "60000",
    LOGGING_AGENT_MAX_MS: "60000",
    ...(retryMs !== undefined ? { LOGGING_AGENT_RETRY_MS: String(retryMs) } : {}),
  };
  writeFileSync(
    config,
    JSON.stringify({ agents: [{ agentId: "notes", command: process.execPath, args: [agentFile], env }] }),
  );
  return { config, log };
}

describe("human commands (issue 28)", () => {
  it("run killed under its server, then resume: human lines only; one title in run, list, status and events", async () => {
    const dir = tempDir("human-output-");
    // The first attempt of each task takes a minute (the server is killed during it); the resumed one 0.2 s.
    const { config, log } = notesAgent(dir, 200);
    const state = join(dir, "state.db");
    const common = ["--config", config, "--state", state];

    const run = startRun(["--goal", GOAL, "--yes", ...common, "--cwd", dir], dir);
    const starts = await startsLogged(log, 2);
    process.kill(starts[0]!.ppid, "SIGKILL");
    const killed = await run;
    expect(killed.code).toBe(1);
    expect(killed.stdout).toContain(`plan "${TITLE}" (2 tasks):`);
    const productId = /^product (prd_\w+)$/mu.exec(killed.stdout)?.[1] ?? "";
    expect(productId).not.toBe("");
    // One line, no stack: what happened and how to go on.
    expect(killed.stderr).toBe(
      `acp-orchestrator: the server stopped (killed by SIGKILL) while running ${productId} — resume with: ` +
        `acp-orchestrator resume ${productId} --state ${state} --config ${config}\n`,
    );
    expectHumanLines(killed.stdout);

    const resumed = await runCli(["resume", productId, ...common], dir, LEASE_ENV);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain("phase: completed");
    // The new server took over from the dead owner and said so as a person reads it.
    expect(resumed.stderr).toMatch(
      /^acp-orchestrator: warning: the lease's owner process is gone; taking the product over without waiting for the lease to expire \(productId prd_\w+, owner \S+\)$/mu,
    );
    expectHumanLines(resumed.stdout);
    // Nothing of the server's background work read the store after it was closed at the end (a user's finding).
    expect(resumed.stderr).not.toMatch(/is closed|not stored|could not/u);
    expectHumanLines(resumed.stderr);
    expect(
      resumed.stderr
        .split("\n")
        .filter((l) => l !== "")
        .every((l) => l.startsWith("acp-orchestrator: ")),
    ).toBe(true);

    // One title everywhere: the plan's name, not the first task's ("Write note one").
    const list = await runCli(["list", "--state", state, "--json"], dir);
    const listed = JSON.parse(list.stdout) as { products: { productId: string; name: string }[] };
    expect(listed.products.find((p) => p.productId === productId)?.name).toBe(TITLE);
    const table = await runCli(["list", "--state", state], dir);
    expect(table.stdout).toMatch(new RegExp(`^${productId} .* ${TITLE}$`, "mu"));
    const status = await runCli(["status", productId, "--state", state], dir);
    expect(status.stdout.split("\n")[0]).toBe(`${productId}  ${TITLE}`);
    const events = await runCli(["events", productId, "--state", state], dir);
    expect(events.stdout).toMatch(/created "Write note one" \(working name until the plan names it\)/u);
    expect(events.stdout).toContain(`plan v1 proposed "${TITLE}": 2 tasks`);
    for (const r of [list, table, status, events]) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toBe("");
    }
    // The dashboard's overview and product page read the same title.
    const { origin, stop } = await startUi(["--state", state, "--port", "0"], dir);
    try {
      const overview = (await (await fetch(`${origin}/api/overview`)).json()) as {
        products: { productId: string; name: string }[];
      };
      expect(overview.products.find((p) => p.productId === productId)?.name).toBe(TITLE);
      const page = (await (await fetch(`${origin}/api/products/${productId}`)).json()) as { status: { name: string } };
      expect(page.status.name).toBe(TITLE);
    } finally {
      stop();
    }
  }, 180_000);

  it("Ctrl-C to run alone pauses the product and says so, with no error after it", async () => {
    const dir = tempDir("human-output-sigint-");
    const { config, log } = notesAgent(dir);
    const state = join(dir, "state.db");
    const common = ["--config", config, "--state", state];
    const { child, result } = startCli(["run", "--goal", GOAL, "--yes", ...common, "--cwd", dir], dir, LEASE_ENV);
    await startsLogged(log, 2);
    // The signal a terminal's Ctrl-C sends, but to `run` alone (as `kill -INT` does): its server is not signalled.
    child.kill("SIGINT");
    const { code, stdout, stderr } = await result;
    const productId = /^product (prd_\w+)$/mu.exec(stdout)?.[1] ?? "";
    expect(productId).not.toBe("");
    expect(stdout).toContain(`pausing ${productId} (Ctrl-C again to leave it as it is)…`);
    expect(stdout).toContain(`paused ${productId} — resume with: acp-orchestrator resume ${productId}`);
    // Before: "could not pause …: ACP connection closed" and an EPIPE warning, after the product had paused.
    expect(stderr).toBe("");
    expect(code).not.toBe(130);
    const status = await runCli(["status", productId, "--state", state, "--json"], dir);
    expect((JSON.parse(status.stdout) as { phase: string }).phase).toBe("paused");
  }, 180_000);
});
