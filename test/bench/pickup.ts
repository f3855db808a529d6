/**
 * Control request pickup (issue 29, "Must show": answered ≤ 1 s after filing, SQLite and PostgreSQL): a real server
 * (`serve`, on the store given: a SQLite file made here, or a PostgreSQL URL) owns a
 * confirmed product whose one task runs (a scripted worker waiting at a gate), and this process — not the owner —
 * files `product.checkpoint` control requests through the store as the CLI's `checkpoint ID` does
 * (operator/control-client.ts `requestControl`). Per sample: ms from filing to the owner accepting it (the owner saw
 * it) and to its answer, as the requester observes them.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { openStore, type StateLocation } from "../../src/adapters/persistence/open-store.js";
import { requestControl } from "../../src/operator/control-client.js";
import { INITIALIZE_PARAMS } from "./overhead.js";
import { NdjsonProcess } from "./support/ndjson-process.js";
import { REPO_ROOT, SERVER_CLI } from "./support/paths.js";
import { median } from "./support/stats.js";

const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const scripted = join(REPO_ROOT, "test", "fixtures", "agents", "scripted-agent.ts");

export interface PickupResult {
  store: StateLocation["kind"];
  samples: number;
  acceptedMs: number[];
  answeredMs: number[];
  medianAcceptedMs: number;
  maxAcceptedMs: number;
  medianAnsweredMs: number;
  maxAnsweredMs: number;
  /** Every answer within 1 000 ms of filing. */
  withinOneSecond: boolean;
}

/**
 * Runs `samples` checkpoint requests from this process against a product a running server owns, on SQLite (a file
 * made for the run) or on the PostgreSQL database at `postgresUrl`. Throws when a request does not end `done`.
 */
export async function controlPickup(samples: number, postgresUrl?: string): Promise<PickupResult> {
  const dir = mkdtempSync(join(tmpdir(), "acp-bench-pickup-"));
  const repo = join(dir, "repo");
  mkdirSync(repo);
  writeFileSync(join(repo, "README.md"), "# Project\n");
  const git = (...args: string[]) => execFileSync("git", args, { cwd: repo, stdio: "ignore" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-qm", "init");
  const gate = join(dir, "gate");
  const plan = {
    name: "Pickup",
    summary: "One task that runs until the bench ends.",
    instances: [{ instanceId: "w1", agentId: "gated", role: "worker" }],
    tasks: [{ taskId: "t1", title: "Wait", description: "Wait", instanceId: "w1", dependsOn: [] }],
  };
  const scriptFile = join(dir, "script.json");
  writeFileSync(
    scriptFile,
    JSON.stringify({
      worker: { tasks: { t1: { actions: [{ waitForFile: gate }], text: "done" } } },
      leader: { plan: [{ text: "The plan.", json: plan }] },
    }),
  );
  const agent = (agentId: string, role: string) => ({
    agentId,
    role,
    command: process.execPath,
    args: ["--import", tsxLoader, scripted],
    env: { SCRIPTED_AGENT_SCRIPT: scriptFile },
  });
  const configFile = join(dir, "acp-orchestrator.json");
  writeFileSync(
    configFile,
    JSON.stringify({ agents: [agent("lead", "leader"), agent("gated", "worker")], leader: "lead" }),
  );
  const location: StateLocation =
    postgresUrl === undefined ? { kind: "sqlite", path: join(dir, "state.db") } : { kind: "postgres", url: postgresUrl };
  const state = location.kind === "sqlite" ? location.path : location.url;
  let running: () => void = () => undefined;
  const taskRunning = new Promise<void>((r) => (running = r));
  let planned: () => void = () => undefined;
  const planReady = new Promise<void>((r) => (planned = r));
  const server = new NdjsonProcess({
    command: process.execPath,
    args: [SERVER_CLI, "serve", "--state", state, "--config", configFile, "--log-level", "warn"],
    cwd: repo,
    onNotification: (method, params) => {
      if (method === "product.planReady") planned();
      if (method === "product.taskStatus" && params.status === "running") running();
    },
  });
  const authority = await openStore(location);
  try {
    await server.request("initialize", INITIALIZE_PARAMS);
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Pickup",
      cwd: repo,
      allowedAgents: ["gated"],
    });
    await planReady;
    await server.request("product.confirm", { productId });
    await taskRunning;
    const acceptedMs: number[] = [];
    const answeredMs: number[] = [];
    for (let i = 0; i < samples; i++) {
      const outcome = await requestControl(authority, undefined, {
        productId,
        method: "product.checkpoint",
        by: "bench:pickup",
      });
      if (outcome.kind !== "done") throw new Error(`checkpoint request ${i} ended ${JSON.stringify(outcome)}`);
      acceptedMs.push(outcome.acceptedAfterMs);
      answeredMs.push(outcome.answeredAfterMs);
      // Requests arrive at random phases of the owner's catch-up tick.
      await new Promise((r) => setTimeout(r, 100 + Math.floor(Math.random() * 400)));
    }
    const maxAnsweredMs = Math.max(...answeredMs);
    return {
      store: location.kind,
      samples,
      acceptedMs,
      answeredMs,
      medianAcceptedMs: median(acceptedMs),
      maxAcceptedMs: Math.max(...acceptedMs),
      medianAnsweredMs: median(answeredMs),
      maxAnsweredMs,
      withinOneSecond: maxAnsweredMs <= 1_000,
    };
  } finally {
    await authority.close();
    writeFileSync(gate, "");
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
