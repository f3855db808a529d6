/**
 * A store written before the core was restructured resumes after it (issue 27, "Must keep": wire format and stored
 * records unchanged). `test/fixtures/stores/products-v1.sqlite` was written by the code of that day (main at
 * 7314467, `make-products-store.ts`): a completed product, a product whose server died mid-run (a task running, its
 * lease left behind) and a failed one. On a copy of it today's code must read every product, resume, roll back and
 * replay exactly as that code did (`products-v1.expected.json`: statuses, list, checkpoints, executions).
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { ProductEvent } from "../../../src/core/product/records.js";
import { actOnFixture, type FixtureIds } from "../../fixtures/stores/fixture-harness.js";

const FIXTURE = new URL("../../fixtures/stores/products-v1.sqlite", import.meta.url);
const EXPECTED = JSON.parse(
  readFileSync(new URL("../../fixtures/stores/products-v1.expected.json", import.meta.url), "utf8"),
) as { ids: FixtureIds; answers: Record<string, unknown> };

/**
 * Fields that later issues added to the answers as strict-superset extensions (docs/PROTOCOL.md): the code that wrote
 * the fixture did not send them, so they are taken out of today's answers before comparing. Every field that code
 * sent must still be there with the same value.
 */
const ADDED_SINCE_FIXTURE: Record<string, string> = {
  waitingFor: "issue 28: what a pending task waits for",
  waiting: "issue 28: the wait's text",
  supersededBy: "issue 28: the fix-up that replaced a failed task",
  supersedes: "issue 28: the failed task a fix-up replaces",
  verification: "issue 30: the task's checks",
  renewedAt: "issue 28: the owner's last lease renewal",
};

function withoutAddedFields(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutAddedFields);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) if (!(key in ADDED_SINCE_FIXTURE)) out[key] = withoutAddedFields(v);
  return out;
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function copyOfFixture(): string {
  const dir = mkdtempSync(join(tmpdir(), "fixture-store-test-"));
  dirs.push(dir);
  const path = join(dir, "products.sqlite");
  copyFileSync(FIXTURE, path);
  return path;
}

describe("the committed fixture store (written before the core was restructured)", () => {
  it("holds only events that parse with today's schemas", () => {
    const db = new Database(copyOfFixture(), { readonly: true });
    try {
      const rows = db.prepare("SELECT event FROM events").pluck().all() as string[];
      expect(rows.length).toBeGreaterThan(20);
      const failed = rows.filter((json) => !ProductEvent.safeParse(JSON.parse(json)).success);
      expect(failed).toEqual([]);
    } finally {
      db.close();
    }
  });

  it("reads, resumes, rolls back and replays as the code that wrote it did", async () => {
    const answers = await actOnFixture(copyOfFixture(), EXPECTED.ids);
    for (const key of Object.keys(EXPECTED.answers)) expect(withoutAddedFields(answers[key]), key).toEqual(EXPECTED.answers[key]);
    expect(Object.keys(answers).sort()).toEqual(Object.keys(EXPECTED.answers).sort());
  });
});
