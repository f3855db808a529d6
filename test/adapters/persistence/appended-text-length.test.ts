/**
 * `appendEvents` answers the summed length of the JSON texts it stored (issue 34), hidden from comparisons, so the
 * product store's compaction policy counts appended bytes without serialising each batch again; the count is the
 * length of the batch's JSON, as the store measured it before.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { SqliteAuthority } from "../../../src/adapters/persistence/sqlite-authority.js";
import { STORED_TEXT_LENGTH, type RunStateAuthority } from "../../../src/core/ports.js";

const dir = mkdtempSync(join(tmpdir(), "appended-text-length-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const EVENTS = [
  { v: 1, type: "task", task: { taskId: "t1", title: "Ünïcode ✓ \u2028", output: "done" } },
  { v: 1, type: "elapsed", elapsedMs: 12 },
  { v: 1, type: "usage", nested: { a: [1, 2, { b: null }] } },
];

describe.each<[string, () => RunStateAuthority]>([
  ["memory", () => new MemoryAuthority()],
  ["sqlite", () => SqliteAuthority.open(join(dir, "a.db"))],
])("%s authority", (_name, open) => {
  it("answers the stored texts' length with the last sequence number, invisible to comparisons", async () => {
    const authority = open();
    try {
      const first = await authority.appendEvents("p", "s", EVENTS, 0);
      expect(first).toEqual({ lastSeq: 3 });
      expect(Object.keys(first)).toEqual(["lastSeq"]);
      const texts = EVENTS.reduce((n, e) => n + JSON.stringify(e).length, 0);
      expect(first[STORED_TEXT_LENGTH]).toBe(texts);
      // What the store adds for the list's commas and brackets gives the batch's JSON length.
      expect(texts + EVENTS.length + 1).toBe(JSON.stringify(EVENTS).length);
      const second = await authority.appendEvents("p", "s", [EVENTS[1]!], 3);
      expect(second).toEqual({ lastSeq: 4 });
      expect(second[STORED_TEXT_LENGTH]).toBe(JSON.stringify(EVENTS[1]).length);
      const stored = await authority.readEvents("p", "s", 0);
      expect(stored.map((e) => e[STORED_TEXT_LENGTH])).toEqual(
        [...EVENTS, EVENTS[1]].map((e) => JSON.stringify(e).length),
      );
    } finally {
      await authority.close();
    }
  });
});
