/**
 * `product.status` keeps what it read while the store did not change (issue 16, request path): on a product this
 * process does not drive, a status at an unchanged `changeMark` reads neither the event tail nor the lease row again,
 * and a write by another connection (another server on the same SQLite file) is seen by the very next status.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteAuthority } from "../../../src/adapters/persistence/sqlite-authority.js";
import type { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import type { RecordInfo, RunStateAuthority, StoredEvent, StoredRecord } from "../../../src/core/ports.js";
import { createHarness, draftPlan, waitUntil } from "../../support/fakes.js";

/** Forwards to a SQLite connection and counts the reads `product.status` may make. */
class CountingAuthority implements RunStateAuthority {
  readonly name = "sqlite";
  leaseReads = 0;
  eventReads = 0;
  constructor(private readonly inner: SqliteAuthority) {}
  changeMark(): string {
    return this.inner.changeMark();
  }
  get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    if (kind === "lease") this.leaseReads++;
    return this.inner.get(projectId, kind, id);
  }
  put(projectId: string, kind: string, id: string, value: object, expected: number | null) {
    return this.inner.put(projectId, kind, id, value, expected);
  }
  delete(projectId: string, kind: string, id: string, expected?: number): Promise<boolean> {
    return this.inner.delete(projectId, kind, id, expected);
  }
  list(projectId: string, kind: string, prefix?: string): Promise<RecordInfo[]> {
    return this.inner.list(projectId, kind, prefix);
  }
  appendEvents(projectId: string, stream: string, events: object[], expectedSeq: number) {
    return this.inner.appendEvents(projectId, stream, events, expectedSeq);
  }
  readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    this.eventReads++;
    return this.inner.readEvents(projectId, stream, afterSeq, limit);
  }
  deleteStream(projectId: string, stream: string): Promise<boolean> {
    return this.inner.deleteStream(projectId, stream);
  }
  pruneEvents(projectId: string, stream: string, beforeSeq: number, afterSeq?: number): Promise<number> {
    return this.inner.pruneEvents(projectId, stream, beforeSeq, afterSeq);
  }
  listProjects(): Promise<string[]> {
    return this.inner.listProjects();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

function twoConnections(): { a: CountingAuthority; b: SqliteAuthority } {
  const dir = mkdtempSync(join(tmpdir(), "status-marks-"));
  const file = join(dir, "state.db");
  const a = new CountingAuthority(SqliteAuthority.open(file));
  const b = SqliteAuthority.open(file);
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanup.push(
    () => a.close(),
    () => b.close(),
  );
  return { a, b };
}

const PLAN = draftPlan([{ id: "a" }]);

describe("product.status at an unchanged change mark", () => {
  it("reads neither the event tail nor the lease row again", async () => {
    const { a } = twoConnections();
    const h = createHarness({ plan: PLAN, authority: a as unknown as MemoryAuthority });
    const productId = await h.planned();
    const first = await h.service.status(productId);
    const reads = { lease: a.leaseReads, events: a.eventReads };
    const second = await h.service.status(productId);
    expect({ lease: a.leaseReads, events: a.eventReads }).toEqual(reads);
    expect(second).toEqual(first);
  });

  it("sees a write by another connection in the very next status", async () => {
    const { a, b } = twoConnections();
    const reader = createHarness({ plan: PLAN, authority: a as unknown as MemoryAuthority, options: { ownerId: "A" } });
    const productId = await reader.planned();
    expect((await reader.service.status(productId)).owner).toBeUndefined();
    expect((await reader.service.status(productId)).phase).toBe("awaiting_confirmation");
    // Another server on the same file confirms it: it takes the lease and starts executing.
    const driver = createHarness({
      plan: PLAN,
      authority: b as unknown as MemoryAuthority,
      clock: reader.clock,
      ids: reader.ids,
      options: { ownerId: "B" },
    });
    driver.worker.script("a", { kind: "hang" });
    await driver.service.confirm(productId, {});
    await waitUntil(() => driver.worker.hasStarted("a"), "a to start in B");
    const status = await reader.service.status(productId);
    expect(status.phase).toBe("executing");
    expect(status.owner).toMatchObject({ ownerId: "B", live: true });
    await driver.service.shutdown();
  });
});
