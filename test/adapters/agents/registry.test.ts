import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  AgentConfigError,
  AgentRegistry,
  BUILTIN_WORKER_AGENT_ID,
  builtinWorkerLaunchSpec,
  emptyAgentConfig,
  loadAgentConfig,
  parseAgentConfig,
} from "../../../src/adapters/agents/registry.js";

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "acp-registry-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function writeConfig(value: unknown, name = "acp-orchestrator.json"): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, typeof value === "string" ? value : JSON.stringify(value));
  return file;
}

async function loadError(options: { configPath?: string; cwd: string }): Promise<AgentConfigError> {
  const error: unknown = await loadAgentConfig(options).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AgentConfigError);
  return error as AgentConfigError;
}

describe("loadAgentConfig", () => {
  it("gives a workspace without a config file what the schema makes of an empty one (without building it)", () => {
    expect(emptyAgentConfig()).toEqual(parseAgentConfig({}, "acp-orchestrator.json"));
  });

  it("returns an empty config when the workspace has no acp-orchestrator.json", async () => {
    const loaded = await loadAgentConfig({ cwd: dir });
    expect(loaded).toEqual({ config: { agents: [] }, path: null });
  });

  it("reads <cwd>/acp-orchestrator.json and fills defaults", async () => {
    const file = await writeConfig({
      agents: [{ agentId: "claude", command: "claude-code-acp" }],
      leader: "claude",
      maxParallelTasks: 3,
      taskTimeoutMs: 60_000,
      permissions: "allow",
    });
    const loaded = await loadAgentConfig({ cwd: dir });
    expect(loaded.path).toBe(file);
    expect(loaded.config).toEqual({
      agents: [{ agentId: "claude", command: "claude-code-acp", role: "worker", args: [], env: {}, strengths: [] }],
      leader: "claude",
      maxParallelTasks: 3,
      taskTimeoutMs: 60_000,
      permissions: "allow",
    });
  });

  it("reads an explicit --config path relative to cwd and resolves ./commands against the file's folder", async () => {
    await mkdir(join(dir, "conf"));
    await writeConfig(
      { agents: [{ agentId: "local", command: "./bin/agent.js", args: ["--acp"] }] },
      "conf/agents.json",
    );
    const loaded = await loadAgentConfig({ configPath: "conf/agents.json", cwd: dir });
    expect(loaded.config.agents[0]?.command).toBe(join(dir, "conf", "bin", "agent.js"));
  });

  it("rejects an unknown top-level key, naming the key and the file", async () => {
    const file = await writeConfig({ agents: [], maxParalelTasks: 2 });
    const error = await loadError({ cwd: dir });
    expect(error.message).toContain('unknown key "maxParalelTasks"');
    expect(error.message).toContain(file);
    expect(error.file).toBe(file);
  });

  it("rejects an unknown key inside an agent entry with its path", async () => {
    await writeConfig({ agents: [{ agentId: "a", command: "x", cmd: "y" }] });
    const error = await loadError({ cwd: dir });
    expect(error.message).toMatch(/unknown key "cmd" at agents\[0\]/);
  });

  it("rejects an agent without a command", async () => {
    const file = await writeConfig({ agents: [{ agentId: "a", name: "A" }] });
    const error = await loadError({ cwd: dir });
    expect(error.message).toBe(`Invalid agent config ${file}: agents[0].command: required.`);
  });

  it("rejects bad JSON with the file name and the parser's reason", async () => {
    const file = await writeConfig('{"agents": [}');
    const error = await loadError({ cwd: dir });
    expect(error.message).toMatch(new RegExp(`^Invalid JSON in agent config ${file}: .+`));
  });

  it("rejects a missing explicit config file", async () => {
    const error = await loadError({ configPath: join(dir, "nope.json"), cwd: dir });
    expect(error.message).toBe(`Cannot read agent config ${join(dir, "nope.json")}: file not found.`);
  });

  it("rejects duplicate agent ids, the reserved built-in id, and wrongly typed settings", async () => {
    await writeConfig({
      agents: [
        { agentId: "a", command: "x" },
        { agentId: "a", command: "y" },
        { agentId: BUILTIN_WORKER_AGENT_ID, command: "z" },
      ],
      maxParallelTasks: 0,
      permissions: "sometimes",
    });
    const error = await loadError({ cwd: dir });
    expect(error.message).toContain('agents[1].agentId: duplicate agent id "a"');
    expect(error.message).toContain(`agents[2].agentId: "${BUILTIN_WORKER_AGENT_ID}" is reserved`);
    expect(error.message).toContain("maxParallelTasks:");
    expect(error.message).toContain("permissions:");
  });
});

describe("AgentRegistry", () => {
  it("knows the built-in worker after the configured agents, but its team is the configured agents (issue 28)", async () => {
    await writeConfig({
      agents: [
        {
          agentId: "coder",
          name: "Coder",
          role: "worker",
          command: "coder",
          args: ["acp"],
          env: { K: "v" },
          strengths: ["ts"],
        },
      ],
    });
    const registry = await AgentRegistry.load({ cwd: dir });
    expect(registry.list()).toEqual([{ agentId: "coder", name: "Coder", role: "worker", strengths: ["ts"] }]);
    expect(registry.all()).toEqual([
      { agentId: "coder", name: "Coder", role: "worker", strengths: ["ts"] },
      { agentId: "builtin-worker", name: "Built-in worker", role: "worker", strengths: ["notes", "documentation"] },
    ]);
    expect(registry.get("coder")?.name).toBe("Coder");
    expect(registry.get("nobody")).toBeUndefined();
    expect(registry.launchSpec("coder")).toEqual({ command: "coder", args: ["acp"], env: { K: "v" } });
    expect(() => registry.launchSpec("nobody")).toThrow(/Unknown agent "nobody"/);
  });

  it("puts the built-in worker on the team without agents, with builtinWorker: true, or when allowedAgents names it", () => {
    const agent = (agentId: string) => ({ agentId, command: agentId });
    const team = (config: unknown) =>
      new AgentRegistry(parseAgentConfig(config, "agents.json")).list().map((a) => a.agentId);
    expect(team({})).toEqual([BUILTIN_WORKER_AGENT_ID]);
    expect(team({ agents: [agent("a"), agent("b")] })).toEqual(["a", "b"]);
    expect(team({ agents: [agent("a")], builtinWorker: true })).toEqual(["a", BUILTIN_WORKER_AGENT_ID]);
    expect(team({ agents: [agent("a"), agent("b")], allowedAgents: ["b"] })).toEqual(["b"]);
    expect(team({ agents: [agent("a")], allowedAgents: ["a", BUILTIN_WORKER_AGENT_ID] })).toEqual([
      "a",
      BUILTIN_WORKER_AGENT_ID,
    ]);
    const registry = new AgentRegistry(
      parseAgentConfig({ agents: [agent("a"), { ...agent("b"), maxInstances: 2 }], defaultAgent: "b" }, "agents.json"),
    );
    expect(registry.list()).toEqual([
      { agentId: "a", name: "a", role: "worker", strengths: [] },
      { agentId: "b", name: "b", role: "worker", strengths: [], maxInstances: 2, default: true },
    ]);
    expect(() => parseAgentConfig({ agents: [agent("a")], allowedAgents: ["x"] }, "agents.json")).toThrow(
      /allowedAgents\[0\]: "x" is not one of "agents"/,
    );
    expect(() => parseAgentConfig({ agents: [agent("a")], defaultAgent: "x" }, "agents.json")).toThrow(
      /defaultAgent: "x" is not one of "agents"/,
    );
  });

  it("returns copies, so callers cannot change the registry", () => {
    const registry = new AgentRegistry();
    registry.list()[0]?.strengths.push("mutated");
    registry.launchSpec(BUILTIN_WORKER_AGENT_ID).args.push("mutated");
    expect(registry.get(BUILTIN_WORKER_AGENT_ID)?.strengths).toEqual(["notes", "documentation"]);
    expect(registry.launchSpec(BUILTIN_WORKER_AGENT_ID).args).not.toContain("mutated");
  });

  it("launches the built-in worker through tsx from sources and directly from compiled code", () => {
    const fromSource = new AgentRegistry().launchSpec(BUILTIN_WORKER_AGENT_ID);
    expect(fromSource.command).toBe(process.execPath);
    expect(fromSource.args[0]).toBe("--import");
    expect(fromSource.args[1]).toMatch(/^file:\/\/.*tsx.*\.mjs$/);
    expect(fromSource.args[2]).toMatch(/src\/adapters\/agents\/builtin-worker-agent\.ts$/);

    const compiled = builtinWorkerLaunchSpec("file:///opt/app/dist/src/adapters/agents/registry.js");
    expect(compiled).toEqual({
      command: process.execPath,
      args: ["/opt/app/dist/src/adapters/agents/builtin-worker-agent.js"],
      env: {},
    });
  });
});
