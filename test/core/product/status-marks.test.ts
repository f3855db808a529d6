/**
 * `product.status` keeps what it read while the store did not change (issue 16, request path): on a product this
 * process does not drive, a status at an unchanged `changeMark` reads neither the event tail nor the lease row again,
 * and a write by another connection (another server on the same SQLite file) is seen by the very next status.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { StoredEvent, StoredRecord } from "../../../src/core/ports.js";
import { draftPlan, waitUntil } from "../../support/fakes.js";
import { ForwardingAuthority, twoServersOnOneFile } from "../../support/sqlite-connections.js";

/** Forwards to a SQLite connection and counts the reads `product.status` may make. */
class CountingAuthority extends ForwardingAuthority {
  leaseReads = 0;
  eventReads = 0;
  override get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    if (kind === "lease") this.leaseReads++;
    return super.get(projectId, kind, id);
  }
  override readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    this.eventReads++;
    return super.readEvents(projectId, stream, afterSeq, limit);
  }
}

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** A reader (counting its reads) and a driver on one SQLite file. */
const twoServers = () => twoServersOnOneFile(cleanup, PLAN, (c) => new CountingAuthority(c));

const PLAN = draftPlan([{ id: "a" }]);

describe("product.status at an unchanged change mark", () => {
  it("reads neither the event tail nor the lease row again", async () => {
    const { a, reader: h } = twoServers();
    const productId = await h.planned();
    const first = await h.service.status(productId);
    const reads = { lease: a.leaseReads, events: a.eventReads };
    const second = await h.service.status(productId);
    expect({ lease: a.leaseReads, events: a.eventReads }).toEqual(reads);
    expect(second).toEqual(first);
  });

  it("sees a write by another connection in the very next status", async () => {
    const { reader, driver } = twoServers();
    const productId = await reader.planned();
    expect((await reader.service.status(productId)).owner).toBeUndefined();
    expect((await reader.service.status(productId)).phase).toBe("awaiting_confirmation");
    // Another server on the same file confirms it: it takes the lease and starts executing.
    driver.worker.script("a", { kind: "hang" });
    await driver.service.confirm(productId, {});
    await waitUntil(() => driver.worker.hasStarted("a"), "a to start in B");
    const status = await reader.service.status(productId);
    expect(status.phase).toBe("executing");
    expect(status.owner).toMatchObject({ ownerId: "B", live: true });
    await driver.service.shutdown();
  });
});
