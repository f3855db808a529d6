/**
 * `product.status` answer versions (issue 16, hosts polling status; status.ts `inspectVersioned`): an answer that
 * nothing outside the store and this instance can change gets a version; while the version is unchanged the same
 * answer is returned without reading the store again, and every change — this process's write, another server's
 * write on the same SQLite file, a run this process drives — gives another version or none, with a fresh answer.
 */
import { afterEach, describe, expect, it } from "vitest";
import { draftPlan, waitUntil } from "../../support/fakes.js";
import { twoServersOnOneFile } from "../../support/sqlite-connections.js";

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** A reader and a driver on one SQLite file, as two servers. */
const twoServers = () => twoServersOnOneFile(cleanup, PLAN);

const PLAN = draftPlan([{ id: "a" }, { id: "b", deps: ["a"] }]);

describe("product.status answer versions", () => {
  it("gives an unchanged product one version and the same answer, without reading the store again", async () => {
    const { a, reader: h } = twoServers();
    const productId = await h.planned();
    const first = await h.service.statusVersioned(productId);
    expect(first.version).toBeDefined();
    let reads = 0;
    const readEvents = a.readEvents.bind(a);
    a.readEvents = (...args) => {
      reads += 1;
      return readEvents(...args);
    };
    const second = await h.service.statusVersioned(productId);
    expect(second.version).toBe(first.version);
    expect(second.status).toBe(first.status);
    // The same answer is also there synchronously, for the request path.
    expect(h.service.keptStatus(productId)).toMatchObject({ version: first.version, status: first.status });
    expect(reads).toBe(0);
  });

  it("gives a new version and a fresh answer after this process writes", async () => {
    const { reader: h, driver: fresh } = twoServers();
    const productId = await h.planned();
    const before = await h.service.statusVersioned(productId);
    await h.service.message(productId, "Also keep the changelog short.");
    const after = await h.service.statusVersioned(productId);
    expect(after.version).not.toBe(before.version);
    // What a server that loads the product from the file now answers.
    const loaded = await fresh.service.status(productId);
    expect(after.status.budget).toEqual(loaded.budget);
    expect(after.status.plan).toEqual(loaded.plan);
    expect(after.status.tasks).toEqual(loaded.tasks);
  });

  it("gives no version while this process drives the run, and a new one once it completed", async () => {
    const { reader: h } = twoServers();
    const productId = await h.planned();
    const planned = await h.service.statusVersioned(productId);
    h.worker.script("a", { kind: "hang" });
    await h.service.confirm(productId, {});
    await waitUntil(() => h.worker.hasStarted("a"), "a to start");
    const running = await h.service.statusVersioned(productId);
    expect(running.version).toBeUndefined();
    expect(h.service.keptStatus(productId)).toBeUndefined();
    expect(running.status.phase).toBe("executing");
    await h.service.cancel(productId);
    const ended = await h.service.statusVersioned(productId);
    expect(ended.status.phase).toBe("cancelled");
    expect(ended.version).toBeDefined();
    expect(ended.version).not.toBe(planned.version);
    expect((await h.service.statusVersioned(productId)).version).toBe(ended.version);
  });

  it("gives a new version and a fresh answer after another server writes the same file", async () => {
    const { reader, driver } = twoServers();
    const productId = await reader.planned();
    const before = await reader.service.statusVersioned(productId);
    expect(before.version).toBeDefined();
    expect(reader.service.keptStatus(productId)?.version).toBe(before.version);
    await driver.service.confirm(productId, {});
    await driver.finished(productId);
    // The other connection's writes moved the change mark: nothing kept is handed out any more.
    expect(reader.service.keptStatus(productId)).toBeUndefined();
    const after = await reader.service.statusVersioned(productId);
    expect(after.version).not.toBe(before.version);
    expect(after.status.phase).toBe("completed");
    expect(after.status.progress).toMatchObject({ completed: 2, total: 2 });
    await driver.service.shutdown();
  });

  it("gives no version while another server holds the lease", async () => {
    const { reader, driver } = twoServers();
    const productId = await reader.planned();
    driver.worker.script("a", { kind: "hang" });
    await driver.service.confirm(productId, {});
    await waitUntil(() => driver.worker.hasStarted("a"), "a to start in B");
    const seen = await reader.service.statusVersioned(productId);
    expect(seen.status.owner).toMatchObject({ ownerId: "B", live: true });
    expect(seen.version).toBeUndefined();
    await driver.service.shutdown();
  });
});
