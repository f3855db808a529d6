/**
 * The operator commands (issue 15) on a PostgreSQL store written by real server runs: `run --yes` drives a goal
 * headless; `list`, `status`, `events` and `graph` read while a second server drives a product (its lease live, a
 * task running) and change no row (the tables' contents hash the same after them); `resume` continues the product
 * once its server was killed. Skipped loudly without ACP_ORCHESTRATOR_TEST_PG (`npm run test:postgres` and `.ci/run`
 * start a private cluster).
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { adminQuery, describePostgres, dropSchema, freshSchema, urlWithSchema } from "../support/postgres.js";
import { planProduct } from "../support/plan-product.js";
import { scriptedWorkspace } from "../support/scripted-agent-config.js";
import { startServer, type ServerHandle } from "../support/server-process.js";

describePostgres("operator commands on a PostgreSQL store written by real servers", () => {
  const schema = freshSchema();
  const state = urlWithSchema(schema);
  const { dir, workspace, configFile } = scriptedWorkspace("acp-orch-operator-pg-", "gated", (folder) => ({
    worker: {
      default: { actions: [{ say: "working on it\n" }], text: "all written" },
      tasks: { t2: { actions: [{ say: "started t2\n" }, { waitForFile: join(folder, "t2.gate") }], text: "t2 done" } },
    },
  }));
  const gate = join(dir, "t2.gate");
  const cli = (args: string[]) => runCli([...args, "--state", state], workspace);
  /** The contents of the store's tables, hashed by the database. */
  const tablesHash = async () => {
    const parts: string[] = [];
    for (const table of ["records", "streams", "events"]) {
      const r = await adminQuery<{ h: string | null }>(
        `SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) AS h FROM "${schema}".${table} t`,
      );
      parts.push(r.rows[0]?.h ?? "-");
    }
    return parts.join(":");
  };
  const servers: ServerHandle[] = [];
  afterAll(async () => {
    for (const s of servers) if (s.child.exitCode === null) await s.kill();
    await dropSchema(schema);
  });
  let completedId = "";
  let drivenId = "";

  it("run --yes drives a goal headless on PostgreSQL", async () => {
    writeFileSync(gate, "");
    const run = await cli(["run", "--yes", "--config", configFile, "--goal", "- Write a README\n- Write a changelog"]);
    expect(run.code, run.stderr).toBe(0);
    completedId = /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";
    expect(run.stdout).toContain("phase: completed");
  }, 120_000);

  it("list, status, events and graph read while a second server drives a product, and change no row", async () => {
    spawnSync("rm", ["-f", gate]);
    const server = await startServer({
      statePath: state,
      cwd: workspace,
      args: ["--config", configFile, "--log-level", "warn"],
      env: { ACP_ORCHESTRATOR_LEASE_TTL_MS: "3000" },
    });
    servers.push(server);
    const { productId } = await planProduct(server, {
      goal: "- Write the parser\n- Write the tests\n- Then write the docs",
      cwd: workspace,
      allowedAgents: ["gated"],
    });
    drivenId = productId;
    const t2Running = server.waitFor((n) => n.method === "product.taskOutputDelta" && n.params.taskId === "t2", 60_000);
    await server.request("product.confirm", { productId });
    await t2Running;

    const list = await cli(["list"]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`${drivenId} +executing +\\d/3 +live `));
    expect(list.stdout).toMatch(new RegExp(`${completedId} +completed +2/2 `));
    const status = await cli(["status", drivenId]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/t2 +running +- +1 /);
    // Issue 28 case 6: a renewing owner drives it; no recovery block.
    expect(status.stdout).toMatch(/owner: +driven by server \S+ \(renewed \d+(\.\d)? m?s ago\), lease until /);
    expect(status.stdout).not.toContain("recovery:");
    const events = await cli(["events", drivenId]);
    expect(events.code, events.stderr).toBe(0);
    expect(events.stdout).toMatch(/plan v1 confirmed: 3 tasks/);
    // A wave's starts are one event (issue 34, dca0af2).
    expect(events.stdout).toMatch(/started \d+ tasks?: .*t2 \(attempt 1\)/);
    const graph = await cli(["graph", drivenId]);
    expect(graph.stdout).toContain("class n_t2 running");
    const live = await server.request<{ tasks: { taskId: string; status: string }[] }>("product.status", { productId });
    expect(live.tasks.find((t) => t.taskId === "t2")?.status).toBe("running");
    await server.kill(); // dies with t2 running: the product is left executing, ownerless

    const before = await tablesHash();
    for (const args of [
      ["list"],
      ["status", drivenId],
      ["events", drivenId],
      ["graph", drivenId],
      ["status", completedId],
    ]) {
      const r = await cli(args);
      expect(r.code, r.stderr).toBe(0);
    }
    expect(await tablesHash()).toBe(before);
  }, 180_000);

  it("resume continues the product its killed server left, to completion", async () => {
    writeFileSync(gate, "");
    for (;;) {
      const rows = JSON.parse((await cli(["list", "--json"])).stdout) as {
        products: { productId: string; owner?: { live: boolean } }[];
      };
      if (rows.products.find((p) => p.productId === drivenId)?.owner?.live !== true) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    // The resume command status prints names the store without its password (a new user found it in clear here, in
    // refusals, in run's hint and in the dashboard's answer): node-postgres takes it from PGPASSWORD or ~/.pgpass.
    const shown = await cli(["status", drivenId]);
    expect(shown.stdout).toContain(`acp-orchestrator resume ${drivenId} --state`);
    const url = new URL(state);
    if (url.password !== "") {
      expect(shown.stdout).not.toContain(url.password);
      url.password = "";
      expect(shown.stdout).toContain(url.toString());
    }
    const resumed = await runCli(["resume", drivenId, "--state", state, "--config", configFile], workspace);
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain("phase: completed");
    const parsed = JSON.parse((await cli(["status", drivenId, "--json"])).stdout) as {
      phase: string;
      tasks: { taskId: string; attempts: number }[];
    };
    expect(parsed.phase).toBe("completed");
    expect(parsed.tasks.find((t) => t.taskId === "t2")?.attempts).toBe(2);
  }, 180_000);
});
