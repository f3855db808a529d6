// How `list` and `status` name a lease holder that is not live (format.ts): a killed server's lease still runs for a
// while, and "expired" beside it misled a new user.
import { describe, expect, it } from "vitest";
import { formatList, formatProductStatus } from "../../src/operator/format.js";
import type { ProductRow } from "../../src/operator/run-state-reader.js";

const now = Date.parse("2026-12-02T12:00:00.000Z");
const row = (live: boolean, expiresAt: string): ProductRow => ({
  productId: "prd_1",
  projectId: "p",
  name: "n",
  phase: "executing",
  progress: { total: 1, completed: 0, running: 1, failed: 0, pending: 0 },
  updatedAt: "2026-12-02T11:59:00.000Z",
  owner: { ownerId: "vm:1:2:3", expiresAt, live },
});

describe("owner state in list and status", () => {
  it("says live, gone (process dead, lease still running) or expired", () => {
    expect(formatList([row(true, "2026-12-02T12:00:30.000Z")], [], now)).toContain("live vm:1:2:3");
    expect(formatList([row(false, "2026-12-02T12:00:30.000Z")], [], now)).toContain("gone vm:1:2:3");
    expect(formatList([row(false, "2026-12-02T11:59:30.000Z")], [], now)).toContain("expired vm:1:2:3");
    const status = (live: boolean, expiresAt: string) =>
      formatProductStatus(
        {
          productId: "prd_1",
          name: "n",
          projectId: "p",
          phase: "executing",
          progress: { total: 1, completed: 0, running: 1, failed: 0, pending: 0 },
          budget: { usedTokens: 0, tokenSource: "reported", elapsedMs: 1000 },
          dropped: 0,
          checkpoints: 0,
          tasks: [],
          owner: { ownerId: "vm:1:2:3", expiresAt, live },
        },
        [],
        now,
      );
    expect(status(false, "2026-12-02T12:00:30.000Z")).toContain("(process gone, lease until");
    expect(status(false, "2026-12-02T11:59:30.000Z")).toContain("(lease expired, lease until");
  });
});
