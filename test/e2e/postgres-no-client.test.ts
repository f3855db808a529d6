/**
 * A fleet member with no client (`serve --recover --no-client`, issue 32; a new user's trial: `serve --recover` under
 * nohup, systemd or docker read an empty stdin and stopped at once): started with stdin from /dev/null it stays up,
 * writes nothing to stdout, takes over the product of a server killed -9 and completes it, and stops on SIGTERM with
 * exit code 0. Runs only with ACP_ORCHESTRATOR_TEST_PG (test/support/postgres.ts).
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { describePostgres, dropSchema, freshSchema, urlWithSchema } from "../support/postgres.js";
import { planProduct } from "../support/plan-product.js";
import { scriptedWorkspace } from "../support/scripted-agent-config.js";
import { CLI, startServer, type ServerHandle } from "../support/server-process.js";

describePostgres("serve --recover --no-client on PostgreSQL", () => {
  const schema = freshSchema();
  const state = urlWithSchema(schema);
  const { dir, workspace, configFile } = scriptedWorkspace("acp-orch-no-client-", "gated", (folder) => ({
    worker: {
      default: { actions: [{ say: "working on it\n" }], text: "all written" },
      tasks: { t2: { actions: [{ say: "started t2\n" }, { waitForFile: join(folder, "t2.gate") }], text: "t2 done" } },
    },
  }));
  const servers: ServerHandle[] = [];
  const members: ReturnType<typeof spawn>[] = [];
  afterAll(async () => {
    for (const s of servers) if (s.child.exitCode === null) await s.kill();
    for (const m of members) if (m.exitCode === null) m.kill("SIGKILL");
    await dropSchema(schema);
  });

  it("stays up with stdin at /dev/null, takes a killed server's product over, completes it, stops on SIGTERM", async () => {
    const member = spawn(
      process.execPath,
      [CLI, "serve", "--state", state, "--config", configFile, "--recover", "--no-client", "--log-level", "info"],
      { cwd: workspace, stdio: ["ignore", "pipe", "pipe"] },
    );
    members.push(member);
    let stdout = "";
    let stderr = "";
    member.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    const serving = new Promise<void>((resolve) =>
      member.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes("serving no client")) resolve();
      }),
    );
    const exited = new Promise<number | null>((resolve) => member.once("exit", resolve));
    await serving;

    const owner = await startServer({ statePath: state, cwd: workspace, args: ["--config", configFile] });
    servers.push(owner);
    const { productId } = await planProduct(owner, {
      goal: "- Write the parser\n- Write the tests\n- Then write the docs",
      cwd: workspace,
      allowedAgents: ["gated"],
    });
    const t2Running = owner.waitFor((n) => n.method === "product.taskOutputDelta" && n.params.taskId === "t2", 60_000);
    await owner.request("product.confirm", { productId });
    await t2Running;
    owner.child.kill("SIGKILL");
    writeFileSync(join(dir, "t2.gate"), "");

    // The member takes it over (its liveness lock is gone) and runs t2 again, then t3, to the end.
    let phase = "";
    for (let tries = 0; tries < 120 && phase !== "completed"; tries += 1) {
      const status = await runCli(["status", productId, "--state", state, "--json"], workspace);
      phase = (JSON.parse(status.stdout) as { phase: string }).phase;
      if (phase !== "completed") await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(phase).toBe("completed");
    expect(member.exitCode).toBeNull();
    expect(stdout).toBe("");

    member.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 180_000);
});
