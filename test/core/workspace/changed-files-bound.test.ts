/**
 * Writer and reader share one bound per change list (issue 26, case 6; protocol/common.ts `CHANGED_FILES_SAMPLE`):
 * main at 7314467 wrote the full list of a task's changed paths into three records (the task's `workspace`,
 * `integrating`'s pending merge, `taskIntegrated`) and read them back with a limit of 100,000, so a task that created
 * 100,091 files left a product its own server could not resume. Such records are read leniently today: cut to the
 * first 1,000 paths plus `changedFilesTotal`, never dropped. The store test puts one into the committed store written
 * by main at 7314467 (test/fixtures/stores/products-v1.sqlite) and resumes that product.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { CHANGED_FILES_SAMPLE } from "../../../protocol/common.js";
import { ProductEvent } from "../../../src/core/product/records.js";
import {
  fixtureServer,
  FIXTURE_START_MS,
  RESTART_GAP_MS,
  type FixtureIds,
} from "../../fixtures/stores/fixture-harness.js";

const OLD_COUNT = 100_091;
/** The paths an un-ignored dependency install adds, in git's order (sorted), as main at 7314467 recorded them. */
const PATHS = Array.from(
  { length: OLD_COUNT },
  (_, i) =>
    `node_modules/pkg-${String(Math.floor(i / 1_000)).padStart(3, "0")}/f${String(i % 1_000).padStart(3, "0")}.js`,
);
const BASE = "1".repeat(40);
const COMMIT = "2".repeat(40);
const HEAD = "3".repeat(40);
const AT = "2030-01-01T00:00:01.000Z";
const WORKSPACE = {
  path: "/work/proj/.git/acp-orchestrator/worktrees/prd_3/m1-1",
  branch: "refs/acp-orchestrator/prd_3/attempts/m1/1",
  baseCommit: BASE,
  commit: COMMIT,
  changedFiles: PATHS,
};

/** The three records main at 7314467 wrote for such a task, field for field (no `changedFilesTotal` existed). */
const OLD_RECORDS = {
  task: {
    v: 1,
    at: AT,
    type: "task",
    task: {
      taskId: "m1",
      title: "m1",
      description: "Do m1.",
      instanceId: "i1",
      dependsOn: [],
      status: "completed",
      attempts: 1,
      startedAt: AT,
      endedAt: AT,
      output: "out:m1",
      workspace: WORKSPACE,
    },
  },
  integrating: {
    v: 1,
    at: AT,
    type: "integrating",
    pending: {
      taskId: "m1",
      attempt: 1,
      commit: COMMIT,
      changedFiles: PATHS,
      ref: WORKSPACE.branch,
      from: BASE,
      to: HEAD,
      output: "out:m1",
    },
  },
  taskIntegrated: {
    v: 1,
    at: AT,
    type: "taskIntegrated",
    taskId: "m1",
    attempt: 1,
    commit: COMMIT,
    head: HEAD,
    changedFiles: PATHS,
  },
};

/** The change list and total of a parsed record, wherever the record keeps them. */
function listOf(event: Record<string, unknown>): { changedFiles?: unknown; changedFilesTotal?: unknown } {
  if (event.type === "task") return (event.task as { workspace: Record<string, unknown> }).workspace;
  if (event.type === "integrating") return event.pending as Record<string, unknown>;
  return event;
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("a change list written past the old read limit (main at 7314467)", () => {
  for (const [name, record] of Object.entries(OLD_RECORDS)) {
    it(`a ${name} record with ${OLD_COUNT} paths reads back as ${CHANGED_FILES_SAMPLE} plus changedFilesTotal`, () => {
      // Through the stored JSON text, as the store reads it.
      const parsed = ProductEvent.safeParse(JSON.parse(JSON.stringify(record)));
      expect(parsed.success, JSON.stringify(parsed.error?.issues.slice(0, 2))).toBe(true);
      const list = listOf(parsed.data as Record<string, unknown>);
      expect(list.changedFiles).toEqual(PATHS.slice(0, CHANGED_FILES_SAMPLE));
      expect(list.changedFilesTotal).toBe(OLD_COUNT);
      // What is written again from it (snapshots, later events) is the bounded form: it reads back the same.
      const again = ProductEvent.parse(JSON.parse(JSON.stringify(parsed.data)));
      expect(again).toEqual(parsed.data);
      expect(JSON.stringify(again).length).toBeLessThan(60_000);
    });
  }

  it("a product of the committed 7314467 store with such a record reads with nothing dropped and resumes", async () => {
    const expected = JSON.parse(
      readFileSync(new URL("../../fixtures/stores/products-v1.expected.json", import.meta.url), "utf8"),
    ) as { ids: FixtureIds };
    const dir = mkdtempSync(join(tmpdir(), "changed-files-bound-"));
    dirs.push(dir);
    const path = join(dir, "products.sqlite");
    copyFileSync(new URL("../../fixtures/stores/products-v1.sqlite", import.meta.url), path);
    // The mid-run product's completed task m1 gets the workspace main at 7314467 wrote for a 100,091-file change.
    const db = new Database(path);
    const stream = `product/${expected.ids.midRun}`;
    const rows = db.prepare("SELECT seq, event FROM events WHERE stream = ? ORDER BY seq").all(stream) as {
      seq: number;
      event: string;
    }[];
    const done = rows.find((r) => {
      const e = JSON.parse(r.event) as { type: string; task?: { taskId: string; status: string } };
      return e.type === "task" && e.task?.taskId === "m1" && e.task.status === "completed";
    });
    expect(done).toBeDefined();
    const event = JSON.parse(done?.event ?? "{}") as { task: Record<string, unknown> };
    event.task.workspace = WORKSPACE;
    db.prepare("UPDATE events SET event = ? WHERE stream = ? AND seq = ?").run(
      JSON.stringify(event),
      stream,
      done?.seq,
    );
    db.close();

    const server = fixtureServer(path, "bound-reader", FIXTURE_START_MS + RESTART_GAP_MS);
    try {
      const status = (await server.service.status(expected.ids.midRun)) as unknown as {
        dropped: number;
        tasks: { taskId: string; workspace?: { changedFiles?: string[]; changedFilesTotal?: number } }[];
      };
      expect(status.dropped).toBe(0);
      const m1 = status.tasks.find((t) => t.taskId === "m1");
      expect(m1?.workspace?.changedFiles).toEqual(PATHS.slice(0, CHANGED_FILES_SAMPLE));
      expect(m1?.workspace?.changedFilesTotal).toBe(OLD_COUNT);
      await server.service.resume(expected.ids.midRun);
      await server.notifier.next("product.completed", (p) => p.productId === expected.ids.midRun);
      const after = (await server.service.status(expected.ids.midRun)) as unknown as {
        phase: string;
        dropped: number;
      };
      expect(after).toMatchObject({ phase: "completed", dropped: 0 });
    } finally {
      await server.service.shutdown();
      await server.close();
    }
  });
});
