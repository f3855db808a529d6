/**
 * Shared plumbing of the real-agent suite's test files: the fake model started once per file (Anthropic Messages and
 * OpenAI Responses, `ROUTES`), the built server started with a config file naming suite agents, and
 * the safety net that SIGKILLs every process an agent of this file left behind when the file ends (a test that left
 * one has already failed on it; the net only keeps the machine clean for the next file).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll } from "vitest";
import {
  startServer,
  tempDir,
  type Notification,
  type ServerHandle,
  type StartOptions,
} from "../../support/server-process.js";
import type { SuiteAgent } from "./agents.js";
import { anthropicMessages } from "./anthropic-messages.js";
import { openaiResponses } from "./openai-responses.js";
import { startFakeModel, type ApiRoute, type FakeModel, type ModelScript } from "./fake-model.js";
import { markedProcesses } from "./processes.js";

/** Every API the fake model serves in the suite. */
export const ROUTES: ApiRoute[] = [anthropicMessages, openaiResponses];

const allMarks: string[] = [];
const models: FakeModel[] = [];
afterAll(async () => {
  for (const p of markedProcesses(allMarks)) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  await Promise.all(models.map((m) => m.close()));
});

/** Starts the fake model with every suite route (closed when the test file ends). */
export async function suiteModel(script: ModelScript): Promise<FakeModel> {
  const model = await startFakeModel({ routes: ROUTES, script });
  models.push(model);
  return model;
}

/** Remembers agents so the file's safety net can clean up after them. */
export function track(...agents: SuiteAgent[]): SuiteAgent[] {
  for (const a of agents) allMarks.push(a.mark);
  return agents;
}

/** Writes `acp-orchestrator.json` naming `agents` (plus `extra` keys) in a fresh folder; returns its path. */
export function writeSuiteConfig(agents: readonly SuiteAgent[], extra: Record<string, unknown> = {}): string {
  const file = join(tempDir("agents-config-"), "acp-orchestrator.json");
  writeFileSync(file, JSON.stringify({ agents: agents.map((a) => a.entry), ...extra }, null, 2));
  return file;
}

/** Starts the built server with `--config` for `agents` (tracked for the safety net). */
export async function startSuiteServer(
  agents: readonly SuiteAgent[],
  config: Record<string, unknown> = {},
  options: StartOptions = {},
): Promise<ServerHandle> {
  track(...agents);
  const file = writeSuiteConfig(agents, config);
  return startServer({ ...options, args: ["--config", file, ...(options.args ?? [])] });
}

/** The first `product.taskStatus` of `taskId` in `productId` with `status` (waits for it). */
export function taskStatus(
  server: ServerHandle,
  productId: string,
  taskId: string,
  status: string,
  timeoutMs = 120_000,
): Promise<Notification> {
  return server.waitFor(
    (n) =>
      n.method === "product.taskStatus" &&
      n.params.productId === productId &&
      n.params.taskId === taskId &&
      n.params.status === status,
    timeoutMs,
  );
}

/** `product.completed` of `productId` (waits for it). */
export function productCompleted(server: ServerHandle, productId: string, timeoutMs = 180_000): Promise<Notification> {
  return server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, timeoutMs);
}

/** Prints one figure of the suite on stderr, in a form the CI log shows plainly. */
export function report(line: string): void {
  process.stderr.write(`[agents suite] ${line}\n`);
}

/** One task of `runTasks`: `taskId` t1, t2… in order; `agentId` of a suite agent; `dependsOn` task ids. */
export interface SuiteTask {
  taskId: string;
  agentId: string;
  title: string;
  description?: string;
  dependsOn?: string[];
  maxAttempts?: number;
}

/**
 * Starts a product in `cwd` (the built-in heuristic leader plans it) and confirms it with exactly `tasks`, one
 * instance per task (`w-<taskId>`), so the test decides who does what. Resolves with the productId once confirmed.
 */
export async function runTasks(
  server: ServerHandle,
  cwd: string,
  tasks: readonly SuiteTask[],
  options: { isolation?: "worktree" | "shared"; goal?: string } = {},
): Promise<string> {
  const { productId } = await server.request<{ productId: string }>("product.plan", {
    goal: options.goal ?? tasks.map((t) => `- ${t.title}`).join("\n"),
    cwd,
    leaderAgentId: "heuristic",
    ...(options.isolation !== undefined ? { isolation: options.isolation } : {}),
  });
  await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId, 60_000);
  await server.request("product.confirm", {
    productId,
    instances: tasks.map((t) => ({ instanceId: `w-${t.taskId}`, agentId: t.agentId, role: "worker" })),
    tasks: tasks.map((t) => ({
      taskId: t.taskId,
      title: t.title,
      description: t.description ?? t.title,
      instanceId: `w-${t.taskId}`,
      dependsOn: t.dependsOn ?? [],
      ...(t.maxAttempts !== undefined ? { maxAttempts: t.maxAttempts } : {}),
    })),
  });
  return productId;
}
