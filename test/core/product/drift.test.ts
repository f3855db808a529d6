/**
 * Drift detection (issue 4 item 4): the fingerprint recorded at confirmation (plan + leader prompt version, workspace
 * git HEAD, the registry's agent definitions), followed while the run is driven, compared when a product without a
 * live owner is inspected or resumed; drift is reported in plain words in `recovery` with `needsExplicitResume`, an
 * automatic resume refuses it, an explicit `product.resume` acknowledges it.
 */
import { describe, expect, it } from "vitest";
import {
  FakeClock,
  createHarness,
  draftPlan,
  drain,
  rejectionOf,
  waitUntil,
  type Harness,
} from "../../support/fakes.js";
import { isDomainError } from "../../../src/core/errors.js";
import type { ProductOptions } from "../../../src/core/product/context.js";
import { productStream } from "../../../src/core/product/records.js";
import type { WorkspaceProbe } from "../../../src/core/ports.js";

const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }, { id: "c", deps: ["b"] }]);
const T0 = Date.parse("2030-01-01T00:00:00.000Z");
const HEAD_1 = "1111111111111111111111111111111111111111";
const HEAD_2 = "2222222222222222222222222222222222222222";

/** A workspace whose git HEAD the test sets; counts reads. */
class FakeWorkspace implements WorkspaceProbe {
  head: string | null = HEAD_1;
  reads = 0;
  async gitHead(): Promise<string | null> {
    this.reads++;
    return this.head;
  }
}

function processOf(owner: string, workspace: FakeWorkspace, shared?: Harness, options: Partial<ProductOptions> = {}) {
  const h = createHarness({
    plan: PLAN,
    ...(shared ? { authority: shared.authority, ids: shared.ids } : {}),
    // A later process's clock is past the first one's lease: the first one "died".
    clock: new FakeClock(shared ? T0 + 60_000 : T0),
    options: { ownerId: owner, ...options },
  });
  h.ctx.workspace = workspace;
  return h;
}

/** Process A completes `a`, then dies while `b` runs; process B (a restart) is built with `options`. */
async function crashed(options: Partial<ProductOptions> = {}) {
  const workspace = new FakeWorkspace();
  const a = processOf("A", workspace);
  a.worker.script("b", { kind: "hang" });
  const productId = await a.started();
  await waitUntil(() => a.worker.hasStarted("b"), "b to start");
  await drain();
  const b = processOf("B", workspace, a, options);
  return { a, b, productId, workspace };
}

async function eventsOf(h: Harness, productId: string) {
  return (await h.authority.readEvents("proj", productStream(productId), 0)).map(
    (e) => e.event as Record<string, unknown>,
  );
}

describe("the recorded fingerprint", () => {
  it("is written with the confirmed plan: prompt version, plan hash, git HEAD, agents hash", async () => {
    const { a, productId } = await crashed();
    const confirmed = (await eventsOf(a, productId)).find((e) => e.type === "confirmed");

    expect(confirmed?.fingerprint).toEqual({
      promptVersion: "heuristic-1",
      planHash: expect.stringMatching(/^pl1:[0-9a-f]{64}$/),
      gitHead: HEAD_1,
      agentsHash: expect.stringMatching(/^ag1:[0-9a-f]{64}$/),
      agentHashes: expect.objectContaining({}),
    });
    // One hash per agent of the directory (issue 28), so a reader can name the agents that differ.
    const hashes = (confirmed?.fingerprint as { agentHashes: Record<string, string> }).agentHashes;
    expect(Object.keys(hashes).length).toBeGreaterThan(0);
    for (const hash of Object.values(hashes)) expect(hash).toMatch(/^ag1:[0-9a-f]{64}$/);
  });

  it("follows the workspace while the run is driven (a worker that commits moves HEAD)", async () => {
    const workspace = new FakeWorkspace();
    const a = processOf("A", workspace);
    a.worker.onStart = (request) => {
      if (request.task.taskId === "b") workspace.head = HEAD_2;
    };
    a.worker.script("c", { kind: "hang" });
    const productId = await a.started();
    await waitUntil(() => a.worker.hasStarted("c"), "c to start");
    await drain();
    const b = processOf("B", workspace, a);

    const recorded = (await eventsOf(a, productId)).filter((e) => e.type === "fingerprint");
    expect(recorded.map((e) => (e.fingerprint as { gitHead: string }).gitHead)).toEqual([HEAD_2]);
    const status = await b.service.status(productId);
    expect(status.recovery).toMatchObject({ cause: expect.stringContaining("No process is driving") });
    expect(status.recovery).not.toHaveProperty("needsExplicitResume");
  });

  it("follows recorded mutations, so a mutated plan is not drift", async () => {
    const workspace = new FakeWorkspace();
    const a = processOf("A", workspace);
    a.worker.script("a", { kind: "hang" });
    const productId = await a.started();
    await waitUntil(() => a.worker.hasStarted("a"), "a to start");
    await a.service.mutate(productId, [{ op: "updateTask", taskId: "c", patch: { description: "Do c well." } }]);
    const b = processOf("B", workspace, a);

    expect(await b.service.status(productId)).toMatchObject({
      recovery: { cause: expect.stringContaining("No process is driving") },
    });
    expect((await b.service.status(productId)).recovery).not.toHaveProperty("drift");
  });
});

describe("after a restart, product.status reports drift in plain words", () => {
  it("reports nothing when nothing changed", async () => {
    const { b, productId } = await crashed();
    const status = await b.service.status(productId);

    expect(status.recovery).toEqual({
      cause: "No process is driving this product (the server that ran it stopped).",
      resumable: true,
      remediation: "Call product.resume to continue; tasks that were running will run again.",
    });
  });

  it("names a moved git HEAD, old → new, and asks for an explicit resume", async () => {
    const { b, productId, workspace } = await crashed();
    workspace.head = HEAD_2;
    const status = await b.service.status(productId);

    expect(status.recovery).toEqual({
      cause:
        "No process is driving this product (the server that ran it stopped). Since its last checkpoint the workspace " +
        "git HEAD moved (111111111111 → 222222222222).",
      resumable: true,
      remediation: expect.stringMatching(
        /call product\.resume to continue explicitly.*automatic resume will not continue/,
      ),
      needsExplicitResume: true,
      drift: [{ what: "gitHead", from: HEAD_1, to: HEAD_2 }],
    });
  });

  it("names a workspace that is no longer a git checkout", async () => {
    const { b, productId, workspace } = await crashed();
    workspace.head = null;
    const recovery = (await b.service.status(productId)).recovery as { cause: string; drift: unknown[] };

    expect(recovery.cause).toContain("the workspace is no longer a git checkout (HEAD was 111111111111)");
    expect(recovery.drift).toEqual([{ what: "gitHead", from: HEAD_1, to: null }]);
  });

  it("names a changed leader prompt template version", async () => {
    const { b, productId } = await crashed({ leaderPromptVersion: "heuristic-2" });
    const recovery = (await b.service.status(productId)).recovery as { cause: string; drift: unknown[] };

    expect(recovery.cause).toContain("the leader prompt template changed (heuristic-1 → heuristic-2)");
    expect(recovery.drift).toEqual([{ what: "promptVersion", from: "heuristic-1", to: "heuristic-2" }]);
  });

  it("names changed agent definitions", async () => {
    const { b, productId } = await crashed({ agentsFingerprint: () => "ag1:ffffffffffffffffff" });
    const recovery = (await b.service.status(productId)).recovery as { cause: string; drift: { what: string }[] };

    expect(recovery.cause).toMatch(
      /the agent definitions in the registry changed since the run was recorded \([0-9a-f]{12} → ffffffffffff\)/,
    );
    expect(recovery.drift.map((d) => d.what)).toEqual(["agents"]);
  });

  it("names which agents changed, were removed or were added when both sides recorded them per agent (issue 28)", async () => {
    const { a, productId } = await crashed();
    const confirmed = (await eventsOf(a, productId)).find((e) => e.type === "confirmed");
    const recorded = (confirmed?.fingerprint as { agentHashes: Record<string, string> }).agentHashes;
    const [first, ...others] = Object.keys(recorded).sort();
    const now: Record<string, string> = { [first!]: "ag1:0123456789abcdef", fresh: "ag1:fedcba9876543210" };
    const b = processOf("B", new FakeWorkspace(), a, {
      agentsFingerprint: () => "ag1:ffffffffffffffffff",
      agentHashes: () => now,
    });
    const recovery = (await b.service.status(productId)).recovery as {
      cause: string;
      drift: { what: string; agents?: { agentId: string; change: string }[] }[];
    };

    expect(recovery.drift).toEqual([
      expect.objectContaining({
        what: "agents",
        agents: [
          { agentId: first!, change: "changed" },
          { agentId: "fresh", change: "onlyCurrent" },
          ...others.map((agentId) => ({ agentId, change: "onlyRecorded" })),
        ].sort((x, y) => (x.agentId < y.agentId ? -1 : 1)),
      }),
    ]);
    expect(recovery.cause).toContain(`"${first}" changed`);
    expect(recovery.cause).toContain(`"fresh" added`);
  });

  it("names a plan that changed without a recorded fingerprint (e.g. an edit of the stored plan)", async () => {
    const { a, b, productId } = await crashed();
    const stream = productStream(productId);
    const seq = (await a.authority.readEvents("proj", stream, 0)).length;
    const plan = (await a.service.status(productId)).plan as { tasks: { taskId: string; title: string }[] };
    const edited = { ...plan, tasks: plan.tasks.map((t) => (t.taskId === "c" ? { ...t, title: "C!" } : t)) };
    await a.authority.appendEvents(
      "proj",
      stream,
      [{ v: 1, at: "2030-01-01T00:00:01.000Z", type: "mutated", mutations: [], by: "user", plan: edited }],
      seq,
    );
    const recovery = (await b.service.status(productId)).recovery as { cause: string; drift: { what: string }[] };

    expect(recovery.cause).toMatch(
      /the plan differs from the one recorded with the checkpoint \([0-9a-f]{12} → [0-9a-f]{12}\)/,
    );
    expect(recovery.drift.map((d) => d.what)).toEqual(["plan"]);
  });

  it("is read-only: inspecting a drifted product writes nothing", async () => {
    const { b, productId, workspace } = await crashed();
    workspace.head = HEAD_2;
    const writes = b.authority.writeCount;
    await b.service.status(productId);
    await b.service.list("proj");
    await drain();

    expect(b.authority.writeCount).toBe(writes);
    expect(workspace.reads).toBeGreaterThan(0);
  });
});

describe("resuming a drifted run", () => {
  it("refuses an automatic resume, writing nothing", async () => {
    const { b, productId, workspace } = await crashed();
    workspace.head = HEAD_2;
    const writes = b.authority.writeCount;

    const err = await rejectionOf(b.service.resume(productId, undefined, { automatic: true }));
    expect(isDomainError(err, "invalid_phase")).toBe(true);
    expect((err as Error).message).toContain("needs an explicit product.resume");
    expect((err as Error).message).toContain("git HEAD moved");
    expect(b.authority.writeCount).toBe(writes);
    expect(b.worker.executions).toEqual([]);
  });

  it("lets an automatic resume continue when nothing drifted", async () => {
    const { b, productId } = await crashed();
    await b.service.resume(productId, undefined, { automatic: true });

    expect((await b.finished(productId)).phase).toBe("completed");
  });

  it("acknowledges drift on an explicit resume: records the new fingerprint, keeps completed work, completes", async () => {
    const { b, productId, workspace } = await crashed();
    workspace.head = HEAD_2;
    await b.service.resume(productId);
    const done = await b.finished(productId);

    expect(done.phase).toBe("completed");
    expect(b.worker.started).toEqual(["b", "c"]);
    const ack = (await eventsOf(b, productId)).find((e) => e.type === "fingerprint");
    expect(ack).toMatchObject({
      fingerprint: { gitHead: HEAD_2 },
      acknowledged: ["the workspace git HEAD moved (111111111111 → 222222222222)"],
    });
  });

  it("no longer reports the acknowledged drift afterwards", async () => {
    const { b, productId, workspace } = await crashed();
    b.worker.script("c", { kind: "hang" });
    workspace.head = HEAD_2;
    await b.service.resume(productId);
    await waitUntil(() => b.worker.hasStarted("c"), "c to start");
    await b.service.pause(productId);
    const status = await b.service.status(productId);

    expect(status.recovery).toEqual({
      cause: "The product was paused by the client.",
      resumable: true,
      remediation: "Call product.resume to continue.",
    });
  });
});

describe("drift and lost events together (regression: drift reported resumable over a fail-closed product)", () => {
  it("keeps the recovery not resumable when the product also lost an event", async () => {
    const { a, productId } = await crashed();
    const stream = productStream(productId);
    const seq = (await a.authority.readEvents("proj", stream, 0)).length;
    await a.authority.appendEvents("proj", stream, [{ v: 2, at: "2026-01-01T00:00:00.000Z", type: "phase" }], seq);
    const workspace = new FakeWorkspace();
    const b = processOf("B", workspace, a, { agentsFingerprint: () => "ag1:ffffffffffffffffff" });
    const status = await b.service.status(productId);

    expect(status.dropped).toBe(1);
    expect(status.recovery).toMatchObject({ resumable: false });
    expect((status.recovery as { needsExplicitResume?: boolean }).needsExplicitResume).toBeUndefined();
  });
});
