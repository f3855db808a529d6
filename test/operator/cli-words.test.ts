/**
 * A new user's trial (item 3): the CLI names commands where the protocol's recovery and refusal texts name methods.
 * A product a real server paused because its time budget was spent: `status` says to run `acp-orchestrator resume ID
 * --add-tokens N` (or `--add-duration-ms N`), not "Call product.resume with additionalBudget"; `resume ID
 * --add-duration-ms N` then runs it to its end (the budget option is new); a refusal of a finished product names the
 * verb, not the method. The wire's own text is unchanged (status --json keeps the method).
 */
import { join } from "node:path";
import { expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { startServer, tempDir } from "../support/server-process.js";

it("status, resume and a refusal speak in CLI verbs; the wire keeps its methods", async () => {
  const dir = tempDir("acp-orch-words-");
  const state = join(dir, "state.db");
  const server = await startServer({ statePath: state, cwd: dir, args: ["--log-level", "warn"] });
  let productId: string;
  try {
    const ready = server.waitFor((n) => n.method === "product.planReady", 60_000);
    ({ productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "- Write a README\n- Write a changelog",
      cwd: dir,
      budget: { maxDurationMs: 1 },
    }));
    await ready;
    const spent = server.waitFor((n) => n.method === "product.budgetExceeded", 60_000);
    await server.request("product.confirm", { productId });
    await spent;
    // Paused by the budget already: pause keeps that recovery and answers once the workers stopped.
    await server.request("product.pause", { productId });
    const paused = await server.request<{ phase: string }>("product.status", { productId });
    expect(paused.phase).toBe("paused");
  } finally {
    await server.close();
  }

  const status = await runCli(["status", productId, "--state", state], dir);
  expect(status.code, status.stderr).toBe(0);
  expect(status.stdout).toContain(
    `resumable: Run "acp-orchestrator resume ${productId} --state ${state} --add-tokens N" (or --add-duration-ms N) ` +
      "to continue; work done so far is kept.",
  );
  expect(status.stdout).not.toMatch(/product\.\w+/u);
  const json = await runCli(["status", productId, "--state", state, "--json"], dir);
  expect((JSON.parse(json.stdout) as { recovery: { remediation: string } }).recovery.remediation).toBe(
    "Call product.resume with additionalBudget to continue; work done so far is kept.",
  );

  const resumed = await runCli(["resume", productId, "--state", state, "--add-duration-ms", "600000"], dir);
  expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
  expect(resumed.stdout).toMatch(/^phase: completed$/m);

  const again = await runCli(["pause", productId, "--state", state], dir);
  expect(again.code).toBe(1);
  expect(again.stderr).toBe(
    `acp-orchestrator: Product ${productId} is completed; "acp-orchestrator pause ${productId} --state ${state}" is ` +
      "allowed only while executing or paused.\n",
  );
}, 180_000);
