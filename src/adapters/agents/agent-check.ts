/**
 * Checking configured agents before they are given work (issue 11, `acp-orchestrator check-agents`): each agent is
 * started (behind its watchdog), initialized, authenticated when configured, and asked for a session in a temporary
 * folder; then it is stopped. The result says ok, or the error with its fix, plus what the agent advertised.
 *
 * Owns: one probe per agent and the table that shows the probes. Never writes to stdout itself (the command prints
 * the table), never leaves a process or the temporary folder behind.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { Readable } from "node:stream";
import { client, methods, ndJsonStream, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import type { InitializeResponse } from "@agentclientprotocol/sdk";
import { AgentProcess, delay } from "./agent-process.js";
import {
  AgentConfigurationError,
  handshakeConfigurationError,
  protocolConfigurationError,
  spawnConfigurationError,
  unknownAuthMethodError,
} from "./agent-errors.js";
import type { AdvertisedAuthMethod, StartStage } from "./agent-errors.js";
import { BUILTIN_WORKER_AGENT_ID, builtinWorkerOnTeam, type AgentRegistry } from "./registry.js";

/** What one probe found. */
export interface AgentCheck {
  agentId: string;
  ok: boolean;
  /** The stage that failed (absent when ok). */
  stage?: StartStage;
  error?: string;
  remediation?: string;
  /** Advertised capabilities, in short words (`loadSession`, `image`, `audio`, `embeddedContext`, `mcp:http`, …). */
  capabilities: string[];
  authMethods: string[];
  /** `agentInfo.name version` when the agent gave it. */
  agentInfo?: string;
  elapsedMs: number;
}

function capabilitiesOf(init: InitializeResponse): string[] {
  const caps = init.agentCapabilities ?? {};
  const out: string[] = [];
  if (caps.loadSession === true) out.push("loadSession");
  const prompt = caps.promptCapabilities ?? {};
  if (prompt.image === true) out.push("image");
  if (prompt.audio === true) out.push("audio");
  if (prompt.embeddedContext === true) out.push("embeddedContext");
  const mcp = caps.mcpCapabilities ?? {};
  if (mcp.http === true) out.push("mcp:http");
  if (mcp.sse === true) out.push("mcp:sse");
  return out;
}

type Outcome = { kind: "ok" } | { kind: "error"; error: unknown } | { kind: "timeout" } | { kind: "exited" };

/** What a failed check saw: how the start ended, the process, its launch spec, the stage reached, stderr's tail. */
interface Failure {
  outcome: Exclude<Outcome, { kind: "ok" }>;
  proc: AgentProcess;
  spec: ReturnType<AgentRegistry["launchSpec"]>;
  stage: StartStage;
  authMethods: AdvertisedAuthMethod[];
  stderr: () => string;
  timeoutMs: number;
}

/** Names the stage that failed and the error and fix of a failed check, in `result`. Never rejects. */
async function explainFailure(result: AgentCheck, f: Failure): Promise<void> {
  const agentId = result.agentId;
  // A command that cannot start makes the watchdog report it on its control pipe and exit, while the agent's
  // stdout closes too: under load the handshake can fail first. Let the report arrive before naming the stage.
  if (f.outcome.kind !== "timeout") await Promise.race([f.proc.exited, f.proc.spawnFailed, delay(500)]);
  result.stage = f.proc.spawnFailure !== undefined ? "spawn" : f.stage;
  let error: unknown = f.outcome.kind === "error" ? f.outcome.error : undefined;
  if (f.proc.spawnFailure !== undefined) error = spawnConfigurationError(agentId, f.spec.command, f.proc.spawnFailure);
  const configuration =
    error instanceof AgentConfigurationError
      ? error
      : handshakeConfigurationError(agentId, result.stage, error, f.authMethods);
  if (configuration !== undefined) {
    result.error = configuration.message;
    result.remediation = configuration.remediation;
  } else if (f.outcome.kind === "timeout") {
    result.error = `Agent "${agentId}" did not finish ${result.stage} within ${f.timeoutMs} ms.`;
    result.remediation = `Check that "${f.spec.command}" is an ACP agent (it must speak ACP on stdin/stdout) and that it can reach its model.`;
  } else {
    await Promise.race([f.proc.closed, delay(500)]);
    const tail = f.stderr().trim().split("\n").slice(-3).join(" | ");
    result.error =
      f.outcome.kind === "exited"
        ? `Agent "${agentId}" exited during ${result.stage}${tail ? ` (stderr: ${tail})` : ""}.`
        : `Agent "${agentId}" failed during ${result.stage}: ${error instanceof RequestError ? `error ${error.code}: ${error.message}` : String(error)}.`;
    result.remediation = `Run "${f.spec.command}" by hand to see why it stops; check its "args" and "env".`;
  }
}

/**
 * Starts `agentId` in a fresh temporary folder, runs `initialize` → `authenticate` (when configured and advertised)
 * → `session/new`, and stops it. Resolves with the finding; never rejects. `timeoutMs` bounds the whole start.
 */
export async function checkAgent(registry: AgentRegistry, agentId: string, timeoutMs: number): Promise<AgentCheck> {
  const started = Date.now();
  const result: AgentCheck = { agentId, ok: false, capabilities: [], authMethods: [], elapsedMs: 0 };
  const folder = await mkdtemp(join(tmpdir(), "acp-check-agents-"));
  let stage: StartStage = "spawn";
  let authMethods: AdvertisedAuthMethod[] = [];
  let agent: AgentProcess | undefined;
  let stderr = "";
  try {
    const spec = registry.launchSpec(agentId);
    agent = AgentProcess.spawn({ command: spec.command, args: spec.args, cwd: spec.cwd ?? folder, env: spec.env });
    const proc = agent;
    proc.stderr.setEncoding("utf8");
    proc.stderr.on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-1_000);
    });
    proc.stdin.on("error", () => undefined);
    const handshake = client({ name: "acp-orchestrator check-agents" })
      .onRequest(methods.client.session.requestPermission, () => ({ outcome: { outcome: "cancelled" as const } }))
      .connectWith(
        ndJsonStream(
          Writable.toWeb(proc.stdin) as WritableStream<Uint8Array>,
          Readable.toWeb(proc.stdout) as ReadableStream<Uint8Array>,
        ),
        async (ctx) => {
          stage = "initialize";
          const init = await ctx.request(methods.agent.initialize, {
            protocolVersion: PROTOCOL_VERSION,
            clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
            clientInfo: { name: "acp-orchestrator", version: "check-agents" },
          });
          if (init.protocolVersion !== PROTOCOL_VERSION) {
            throw protocolConfigurationError(agentId, init.protocolVersion, PROTOCOL_VERSION);
          }
          result.capabilities = capabilitiesOf(init);
          authMethods = (init.authMethods ?? []).map((m) => ({ id: m.id, name: m.name }));
          result.authMethods = authMethods.map((m) => m.id);
          if (init.agentInfo) result.agentInfo = `${init.agentInfo.name} ${init.agentInfo.version}`;
          if (spec.auth !== undefined && authMethods.length > 0) {
            if (!authMethods.some((m) => m.id === spec.auth?.methodId)) {
              throw unknownAuthMethodError(agentId, spec.auth.methodId, authMethods);
            }
            stage = "authenticate";
            await ctx.request(methods.agent.authenticate, { methodId: spec.auth.methodId });
          }
          stage = "session/new";
          await ctx.request(methods.agent.session.new, { cwd: folder, mcpServers: [] });
        },
      );
    const outcome: Outcome = await Promise.race([
      handshake.then(
        (): Outcome => ({ kind: "ok" }),
        (error: unknown): Outcome => ({ kind: "error", error }),
      ),
      proc.spawnFailed.then(
        (failure): Outcome => ({
          kind: "error",
          error: spawnConfigurationError(agentId, spec.command, failure),
        }),
      ),
      proc.exited.then((): Outcome => ({ kind: "exited" })),
      delay(timeoutMs).then((): Outcome => ({ kind: "timeout" })),
    ]);
    if (outcome.kind === "ok") result.ok = true;
    else await explainFailure(result, { outcome, proc, spec, stage, authMethods, stderr: () => stderr, timeoutMs });
  } catch (error) {
    result.error = error instanceof Error ? error.message : String(error);
    result.remediation = "Fix the agent configuration.";
  } finally {
    if (agent !== undefined) await agent.stop(500);
    await rm(folder, { recursive: true, force: true }).catch(() => undefined);
  }
  result.elapsedMs = Date.now() - started;
  return result;
}

/** Checks every agent of the registry (in registry order, two at a time). Never rejects. */
export async function checkAgents(registry: AgentRegistry, timeoutMs: number): Promise<AgentCheck[]> {
  // The built-in worker only when it is on the team (issue 28: no agent configured, builtinWorker true, or
  // allowedAgents names it); a new user's trial saw it checked beside a team that never uses it.
  const onTeam = builtinWorkerOnTeam(registry.config);
  const ids = registry
    .all()
    .map((a) => a.agentId)
    .filter((id) => id !== BUILTIN_WORKER_AGENT_ID || onTeam);
  const results: AgentCheck[] = new Array<AgentCheck>(ids.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < ids.length) {
      const index = next++;
      results[index] = await checkAgent(registry, ids[index] as string, timeoutMs);
    }
  };
  await Promise.all([lane(), lane()]);
  return results;
}

/** The findings as a plain-text table (one row per agent), followed by one line per failure with its fix. Pure. */
export function formatAgentChecks(checks: AgentCheck[]): string {
  const rows = [
    ["agent", "status", "capabilities", "auth methods"],
    ...checks.map((c) => [
      c.agentId,
      c.ok ? "ok" : `error (${c.stage ?? "start"})`,
      c.capabilities.join(",") || "-",
      c.authMethods.join(",") || "-",
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  const lines = rows.map((r) =>
    r
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd(),
  );
  for (const c of checks) {
    if (c.ok) continue;
    lines.push("", `${c.agentId}: ${c.error ?? "failed"}`, `  fix: ${c.remediation ?? "-"}`);
  }
  return `${lines.join("\n")}\n`;
}
