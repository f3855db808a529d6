/**
 * Guarantee 14 on a real SQLite file (issue 10, finding 6): storage stays proportional to live data.
 * - 30 products created, run and deleted leave no row behind (records and events counted in the file);
 * - 500 rollbacks of a 40-task product keep the state file's size flat: each rollback is a compaction point, so the
 *   events it appends are pruned once a snapshot covers them (before: every rollback appended the whole task list
 *   for good and replayed the stream from 0), and the state a snapshot holds does not grow with the number of runs
 *   (before: one outcome summary per run in the dialogue). Sizes after the first, a fifth and the last rollback and
 *   times per rollback (first 10, last 10) are printed for the record; times are not asserted (STYLE.md: performance
 *   is measured by benchmarks).
 * Runs the in-process harness (test/support/fakes.ts) over a `SqliteAuthority`; no server process.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import type { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { SqliteAuthority } from "../../../src/adapters/persistence/sqlite-authority.js";
import { createHarness, draftPlan, type TaskSpec } from "../../support/fakes.js";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function openState(): { authority: SqliteAuthority; path: string } {
  const dir = mkdtempSync(join(tmpdir(), "acp-compaction-"));
  dirs.push(dir);
  const path = join(dir, "state.db");
  return { authority: SqliteAuthority.open(path), path };
}

/** Rows of each table, read through a second connection (WAL: it sees every committed write). */
function rows(path: string): { records: number; events: number } {
  const db = new Database(path, { readonly: true });
  try {
    const count = (table: string) => Number(db.prepare(`SELECT COUNT(*) FROM ${table}`).pluck().get());
    return { records: count("records"), events: count("events") };
  } finally {
    db.close();
  }
}

/** Bytes of the state file and its WAL, after a checkpoint of the WAL into the file. */
function fileBytes(path: string): number {
  const db = new Database(path);
  try {
    db.pragma("wal_checkpoint(TRUNCATE)");
  } finally {
    db.close();
  }
  return statSync(path).size;
}

/** Bytes of the product's snapshot record(s) as stored (JSON text). */
function snapshotBytes(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return Number(
      db.prepare("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM records WHERE kind = 'snapshot'").pluck().get(),
    );
  } finally {
    db.close();
  }
}

const chain = (n: number): TaskSpec[] =>
  Array.from({ length: n }, (_, i) => ({ id: `t${i}`, deps: i > 0 ? [`t${i - 1}`] : [], instance: `i${(i % 4) + 1}` }));

describe("guarantee 14 on SQLite", () => {
  it("30 products created, run and deleted leave no row behind", async () => {
    const { authority, path } = openState();
    const h = createHarness({ plan: draftPlan(chain(3)), authority: authority as unknown as MemoryAuthority });
    const ids: string[] = [];
    for (let i = 0; i < 30; i += 1) {
      const productId = await h.started();
      await h.finished(productId);
      await h.service.checkpoint(productId);
      ids.push(productId);
    }
    const before = rows(path);
    for (const productId of ids) expect(await h.service.delete(productId)).toEqual({ deleted: true });
    expect({ before: before.records > 0 && before.events > 0, after: rows(path) }).toEqual({
      before: true,
      after: { records: 0, events: 0 },
    });
    await authority.close();
  }, 120_000);

  // 100 rollbacks by default (CI time); `ROLLBACKS=500` for the figure.
  const rollbacks = Number(process.env.ROLLBACKS ?? 100);
  it(`${rollbacks} rollbacks of a 40-task product keep the state file flat`, async () => {
    const { authority, path } = openState();
    const h = createHarness({ plan: draftPlan(chain(40)), authority: authority as unknown as MemoryAuthority });
    const productId = await h.started();
    await h.finished(productId);
    const at: { rollback: number; file: number; snapshot: number; dialogue: number }[] = [];
    const times: number[] = [];
    for (let i = 1; i <= rollbacks; i += 1) {
      const t0 = performance.now();
      await h.service.rollback(productId);
      await h.finished(productId, i + 1);
      times.push(performance.now() - t0);
      if (i === 1 || i === rollbacks / 5 || i === rollbacks) {
        const dialogue = (await h.service.get(productId)).model.state.dialogue.length;
        at.push({ rollback: i, file: fileBytes(path), snapshot: snapshotBytes(path), dialogue });
      }
    }
    const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const [first, early, last] = at as [(typeof at)[0], (typeof at)[0], (typeof at)[0]];
    process.stderr.write(
      `${rollbacks} rollbacks of a 40-task product: state file ${first.file} bytes after rollback 1, ` +
        `${early.file} after ${early.rollback}, ${last.file} after ${last.rollback}; snapshot record ${first.snapshot} ` +
        `then ${last.snapshot} bytes; ms per rollback (rollback + run to completion): first 10 ` +
        `${avg(times.slice(0, 10)).toFixed(1)}, last 10 ${avg(times.slice(-10)).toFixed(1)}\n`,
    );
    // What stays: the run's events up to its newest checkpoint (the kept checkpoints need them) and the last few.
    expect(rows(path).events, "events left in the stream").toBeLessThan(300);
    // Flat. Before: every completion appended its summary to the dialogue, which every snapshot carries whole, so the
    // snapshot grew ~83 bytes per rollback (18.7 KB after 1, 60 KB after 500) and the file 40 % from rollback 100 to
    // 500 (164 KB, 229 KB). Now a run's outcome supersedes the previous one (state.ts): measured 147,456 bytes from
    // rollback 20 to 500, the snapshot the same size throughout. One page (4 KiB) of slack for SQLite's page reuse.
    expect(
      {
        dialogueEntries: last.dialogue,
        // A few bytes for sequence numbers gaining a digit.
        snapshotGrowthUnder64Bytes: last.snapshot - first.snapshot < 64,
        stateFileGrowthUnderOnePage: last.file - early.file <= 4096,
      },
      JSON.stringify(at),
    ).toEqual({ dialogueEntries: first.dialogue, snapshotGrowthUnder64Bytes: true, stateFileGrowthUnderOnePage: true });
    await authority.close();
  }, 300_000);
});
