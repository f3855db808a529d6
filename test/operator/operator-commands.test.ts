/**
 * The operator commands (issue 15) against stores written by real server runs: `run --yes` drives a goal headless
 * (plain progress lines when stdout is not a terminal); `list`, `status`, `events`, `graph` read a store while a
 * second server is driving one of its products (its lease live, a task running) and change nothing (guarantee 3:
 * the file's bytes are the same after them); `resume` continues a product whose server was killed.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { planProduct } from "../support/plan-product.js";
import { scriptedWorkspace } from "../support/scripted-agent-config.js";
import { startServer, tempDir, type ServerHandle } from "../support/server-process.js";

/** t2 hangs (stays running) until the script is rewritten; the others say a line and finish. */
const workerScript = (hangT2: boolean) => ({
  worker: {
    default: { actions: [{ say: "working on it\n" }], text: "all written" },
    tasks: hangT2 ? { t2: { actions: [{ say: "started t2\n" }], end: "hang" } } : {},
  },
});
const { dir, workspace, statePath, scriptFile, configFile } = scriptedWorkspace(
  "acp-orch-operator-",
  "slow",
  workerScript(true),
  { script: "slow.script.json" },
);
/** Rewrites the worker script (re-read at every prompt). */
function script(hangT2: boolean) {
  writeFileSync(scriptFile, JSON.stringify(workerScript(hangT2)));
}

/** Runs the built CLI to completion (async, so the test's servers keep being served). */
function cli(args: string[], cwd = workspace) {
  return runCli(args, cwd);
}

/** The store's data: the database file and its write-ahead log (the -shm file is SQLite's shared-memory index). */
function fileHash(path: string): string {
  return ["", "-wal"]
    .map((s) =>
      existsSync(path + s)
        ? createHash("sha256")
            .update(readFileSync(path + s))
            .digest("hex")
        : "-",
    )
    .join(":");
}

const servers: ServerHandle[] = [];
afterAll(async () => {
  for (const s of servers) if (s.child.exitCode === null) await s.kill();
});

let completedId = "";
let drivenId = "";

describe("operator commands on a store written by real servers", () => {
  it("run --yes plans, confirms and drives a goal headless with plain progress lines", async () => {
    const run = await cli(["run", "--state", statePath, "--yes", "--goal", "- Write a README\n- Write a changelog"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^product (prd_\w+)$/m);
    completedId = /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";
    expect(run.stdout).toContain(`plan "README and changelog" (2 tasks):`);
    expect(run.stdout).toMatch(/✓ t1 +completed .*Write a README/);
    expect(run.stdout).toMatch(/✓ t2 +completed .*Write a changelog/);
    expect(run.stdout).toContain("phase: completed");
    expect(run.stdout).not.toContain("\x1b["); // not a terminal: no redraws
  }, 120_000);

  it("run resolves a relative --state and --config against the directory it was given in, not --cwd", async () => {
    // A new user's `run --cwd repo --config cfg.json` looked for repo/cfg.json (the server runs in the product folder).
    const other = join(dir, "elsewhere");
    mkdirSync(other);
    writeFileSync(join(dir, "relative-config.json"), JSON.stringify({ agents: [] }));
    const run = await cli(
      ["run", "--cwd", "elsewhere", "--state", "relative-state.db", "--config", "relative-config.json"].concat([
        "--yes",
        "--goal",
        "- Write a README",
      ]),
      dir,
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("phase: completed");
    expect(existsSync(join(dir, "relative-state.db"))).toBe(true);
    expect(existsSync(join(other, "relative-state.db"))).toBe(false);
  }, 120_000);

  it("list, status, events and graph read while a second server drives a product", async () => {
    // A short lease, so that `resume` below may take the product over once this server is gone.
    const server = await startServer({
      statePath,
      cwd: workspace,
      args: ["--config", configFile, "--log-level", "warn"],
      env: { ACP_ORCHESTRATOR_LEASE_TTL_MS: "3000" },
    });
    servers.push(server);
    const { productId } = await planProduct(server, {
      goal: "- Write the parser\n- Write the tests\n- Then write the docs",
      cwd: workspace,
      allowedAgents: ["slow"],
    });
    drivenId = productId;
    const t2Running = server.waitFor((n) => n.method === "product.taskOutputDelta" && n.params.taskId === "t2", 60_000);
    await server.request("product.confirm", { productId });
    await t2Running;

    const list = await cli(["list", "--state", statePath]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`${drivenId} +executing +\\d/3 +live `));
    expect(list.stdout).toMatch(new RegExp(`${completedId} +completed +2/2 `));
    const json = JSON.parse((await cli(["list", "--state", statePath, "--json"])).stdout) as {
      products: { productId: string; owner?: { live: boolean } }[];
    };
    expect(json.products.find((p) => p.productId === drivenId)?.owner?.live).toBe(true);

    const status = await cli(["status", drivenId, "--state", statePath]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain("phase:       executing");
    expect(status.stdout).toMatch(/t2 +running +- +1 /);
    // Issue 28 case 6: a renewing owner drives it; no recovery block.
    expect(status.stdout).toMatch(/owner: +driven by server \S+ \(renewed \d+(\.\d)? m?s ago\), lease until /);
    expect(status.stdout).not.toContain("recovery:");

    const events = await cli(["events", drivenId, "--state", statePath]);
    expect(events.code, events.stderr).toBe(0);
    expect(events.stdout).toMatch(/^ +1 +\S+ +created "/m);
    expect(events.stdout).toMatch(/plan v1 confirmed: 3 tasks/);
    // A wave's starts are one event (issue 34).
    expect(events.stdout).toMatch(/started \d+ tasks?: .*t2 \(attempt 1\)/);
    const jsonEvents = (await cli(["events", drivenId, "--json", "--state", statePath])).stdout.trim().split("\n");
    expect((JSON.parse(jsonEvents[0] as string) as { seq: number }).seq).toBe(1);

    const graph = await cli(["graph", drivenId, "--state", statePath]);
    expect(graph.stdout).toMatch(/^flowchart TD$/m);
    expect(graph.stdout).toContain("class n_t2 running");
    const dot = await cli(["graph", drivenId, "--format", "dot", "--state", statePath]);
    expect(dot.stdout).toMatch(/^digraph product \{/);
    expect(dot.stdout.match(/ -> /g)?.length).toBeGreaterThanOrEqual(1);
    // A goal run has no DAG of its own: said in one sentence (it used to say "Product goal_… was not found").
    const goalGraph = await cli(["graph", "goal_0123456789abcdef0123", "--state", statePath]);
    expect(goalGraph.code).toBe(2);
    expect(goalGraph.stderr).toContain(`"graph" draws a product's DAG, and goal_0123456789abcdef0123 is a goal run`);

    // The driving server was not disturbed: t2 still runs under its lease.
    const live = await server.request<{ phase: string; tasks: { taskId: string; status: string }[] }>(
      "product.status",
      { productId },
    );
    expect(live.phase).toBe("executing");
    expect(live.tasks.find((t) => t.taskId === "t2")?.status).toBe("running");
    await server.kill(); // dies with t2 running: the product is left executing, ownerless
  }, 180_000);

  it("status judges drift as the server did: same prompt version and agent definitions read as unchanged", async () => {
    // Run where the server's config is (acp-orchestrator.json in `dir`), as a server started there would load it.
    const status = await cli(["status", drivenId, "--state", statePath, "--json"], dir);
    expect(status.code, status.stderr).toBe(0);
    const parsed = JSON.parse(status.stdout) as {
      phase: string;
      recovery?: { cause: string; needsExplicitResume?: boolean; drift?: { what: string }[] };
    };
    expect(parsed.phase).toBe("executing");
    // The killed server's product is resumable at once; nothing it depends on changed, so no drift and no explicit
    // resume (the view used to compare the core's default prompt version, "heuristic-1", with the server's).
    expect(parsed.recovery?.cause).toMatch(/is gone/);
    expect(parsed.recovery?.drift).toBeUndefined();
    expect(parsed.recovery?.needsExplicitResume).toBeUndefined();
  }, 120_000);

  it("status read away from the server's config names the agents that differ, not a changed team (issue 28)", async () => {
    // `workspace` has no acp-orchestrator.json: this reader's registry is the built-in one, the server's had "slow".
    // It used to read "the agent definitions in the registry changed (f2b2… → 4f53…)" when nothing had changed.
    const json = await cli(["status", drivenId, "--state", statePath, "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const parsed = JSON.parse(json.stdout) as {
      recovery?: { cause: string; drift?: { what: string; agents?: { agentId: string; change: string }[] }[] };
    };
    expect(parsed.recovery?.drift).toEqual([
      expect.objectContaining({ what: "agents", agents: [{ agentId: "slow", change: "onlyRecorded" }] }),
    ]);
    const human = await cli(["status", drivenId, "--state", statePath]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain(
      'the agent registry read here differs from the one the server that drove this run recorded: "slow" not defined here',
    );
    expect(human.stdout).not.toContain("registry changed");
  }, 120_000);

  it("reading commands change no byte of the store", async () => {
    const before = fileHash(statePath);
    for (const args of [
      ["list"],
      ["status", drivenId],
      ["events", drivenId],
      ["graph", drivenId],
      ["status", completedId],
    ]) {
      const r = await cli([...args, "--state", statePath]);
      expect(r.code, r.stderr).toBe(0);
    }
    expect(fileHash(statePath)).toBe(before);
    const missing = join(dir, "nope", "state.db");
    const r = await cli(["list", "--state", missing]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^acp-orchestrator: There is no state file at .*nope.*state\.db \(given by --state\): nothing has run/,
    );
    expect(existsSync(join(dir, "nope"))).toBe(false);
    const unknown = await cli(["status", "prd_doesnotexist", "--state", statePath]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("prd_doesnotexist");
  }, 120_000);

  it("resume continues the product its killed server left, and follows it to completion", async () => {
    script(false);
    // `list` shows the killed server's lease expiring.
    for (;;) {
      const rows = JSON.parse((await cli(["list", "--state", statePath, "--json"])).stdout) as {
        products: { productId: string; owner?: { live: boolean } }[];
      };
      if (rows.products.find((p) => p.productId === drivenId)?.owner?.live !== true) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const resumed = await cli(["resume", drivenId, "--state", statePath, "--config", configFile]);
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain(`resumed ${drivenId}:`);
    expect(resumed.stdout).toContain("phase: completed");
    const status = await cli(["status", drivenId, "--state", statePath, "--json"]);
    const parsed = JSON.parse(status.stdout) as { phase: string; tasks: { taskId: string; attempts: number }[] };
    expect(parsed.phase).toBe("completed");
    expect(parsed.tasks.find((t) => t.taskId === "t2")?.attempts).toBe(2);
  }, 180_000);
});

describe("run in a git workspace", () => {
  it("names the integration branch that holds the result (the working tree stays as it was)", async () => {
    const repo = tempDir("acp-orch-operator-git-");
    const git = (...args: string[]) => spawnSync("git", args, { cwd: repo, encoding: "utf8" });
    git("init", "-q", "-b", "main");
    writeFileSync(join(repo, "README.md"), "# repo\n");
    git("add", "README.md");
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init");
    const run = await cli(
      ["run", "--state", join(repo, "..", "git-run-state.db"), "--yes", "--goal", "- Write a README"],
      repo,
    );
    expect(run.code, run.stderr).toBe(0);
    const id = /^product (prd_\w+)$/m.exec(run.stdout)?.[1];
    expect(run.stdout).toContain(`result: branch acp/${id}, integration integrated`);
    expect(git("status", "--porcelain").stdout).toBe("");
  }, 120_000);
});
