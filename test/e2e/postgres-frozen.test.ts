/**
 * A frozen server on PostgreSQL (issue 32; a new user's trial): SIGSTOP of the owner while its agent runs; the
 * database keeps its liveness lock (the kernel still answers TCP keepalives), so a survivor takes the product over
 * once the lease expires; SIGCONT: the woken owner fences itself, and its client hears `product.ownershipLost`
 * naming the new owner (guarantee 13), not only `product.persistenceError`. Runs only with ACP_ORCHESTRATOR_TEST_PG.
 */
import { afterAll, expect, it } from "vitest";
import { describePostgres, dropSchema, freshSchema, urlWithSchema } from "../support/postgres.js";
import { planProduct } from "../support/plan-product.js";
import { scriptedWorkspace } from "../support/scripted-agent-config.js";
import { startServer, type ServerHandle } from "../support/server-process.js";

describePostgres("a frozen owner on PostgreSQL", () => {
  const schema = freshSchema();
  const state = urlWithSchema(schema);
  const { workspace, configFile } = scriptedWorkspace("acp-orch-frozen-pg-", "slow", {
    worker: { default: { actions: [{ say: "working on it\n" }, { sleep: 4_000 }], text: "done" } },
  });
  const servers: ServerHandle[] = [];
  afterAll(async () => {
    for (const s of servers) {
      s.child.kill("SIGCONT");
      if (s.child.exitCode === null) await s.kill();
    }
    await dropSchema(schema);
  });

  it("woken after a takeover, the owner tells its client product.ownershipLost", async () => {
    const env = { ACP_ORCHESTRATOR_LEASE_TTL_MS: "3000" };
    const args = ["--config", configFile, "--log-level", "warn"];
    const owner = await startServer({ statePath: state, cwd: workspace, args, env });
    servers.push(owner);
    const survivor = await startServer({ statePath: state, cwd: workspace, args: [...args, "--recover"], env });
    servers.push(survivor);
    const { productId } = await planProduct(owner, { goal: "- Write one\n- Write two", cwd: workspace });
    const running = owner.waitFor((n) => n.method === "product.taskOutputDelta", 60_000);
    await owner.request("product.confirm", { productId });
    await running;
    type Owned = { owner?: { ownerId: string } };
    const first = (await owner.request<Owned>("product.status", { productId })).owner?.ownerId;
    expect(first).toBeDefined();
    owner.child.kill("SIGSTOP");
    // The survivor takes it over once the lease expired (the frozen owner's lock is still held).
    let taken = false;
    for (let i = 0; i < 200 && !taken; i += 1) {
      const s = await survivor.request<Owned>("product.status", { productId });
      taken = s.owner !== undefined && s.owner.ownerId !== first;
      if (!taken) await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(taken).toBe(true);
    owner.child.kill("SIGCONT");
    const lost = await owner.waitFor((n) => n.method === "product.ownershipLost", 30_000);
    expect(lost.params.productId).toBe(productId);
  }, 180_000);
});
