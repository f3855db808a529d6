/**
 * BENCHMARKS.md's writer (test/bench/support/results-doc.ts): a run of some sections (`npm run bench -- --only overhead
 * --update`, issue 34) rewrites those sections of the page and its count of targets met, and keeps every other
 * section as it was.
 */
import { describe, expect, it } from "vitest";
import {
  benchmarksDocument,
  updateBenchmarksDocument,
  type ResultRow,
  type SectionResult,
} from "./bench/support/results-doc.js";
import type { Machine } from "./bench/support/stats.js";

const machine = (date: string, loadAverage: string): Machine => ({
  cpuModel: "Test CPU",
  cores: 2,
  memoryGb: 1,
  node: "v20.0.0",
  platform: "linux x64",
  loadAverage,
  date,
});

const row = (figure: string, measure: string, met: ResultRow["met"]): ResultRow => ({
  figure,
  measure,
  value: "1",
  baseline: "1 (echo)",
  ratio: "1.00x",
  target: met === "—" ? "—" : "≤ 1x",
  met,
});

const section = (name: SectionResult["section"], rows: ResultRow[], detail: string): SectionResult => ({
  section: name,
  loadAverage: "1 1 1",
  rows,
  details: [detail],
});

describe("BENCHMARKS.md update from an --only run", () => {
  it("replaces the sections that ran, keeps the others and recounts the targets met", () => {
    const full = benchmarksDocument({
      machine: machine("2026-01-01T00:00:00.000Z", "0.5 0.5 0.5"),
      seconds: 100,
      sections: [
        section("overhead", [row("1 cold start", "old cold start", "yes")], "old overhead detail"),
        section("streaming", [row("3 streaming", "streamed", "yes"), row("3 streaming", "peak", "—")], "stream detail"),
      ],
    });
    expect(full).toContain("Targets met: 2 of 2.");
    const updated = updateBenchmarksDocument(full, {
      machine: machine("2026-02-02T00:00:00.000Z", "9 9 9"),
      seconds: 10,
      sections: [
        section(
          "overhead",
          [row("1 cold start", "new cold start", "no"), row("2 request overhead", "pipelined", "yes")],
          "new overhead detail",
        ),
      ],
    });
    expect(updated).toContain("new cold start");
    expect(updated).toContain("new overhead detail");
    expect(updated).not.toContain("old cold start");
    expect(updated).not.toContain("old overhead detail");
    // The streaming section is kept word for word, in its place after the overhead one.
    const streaming = full.slice(full.indexOf("## Figure 3"));
    expect(updated.endsWith(streaming)).toBe(true);
    expect(updated).toContain("Targets met: 2 of 3 (missed: 1 cold start, new cold start).");
    expect(updated).toContain("`npm run bench -- --only overhead --update`: 2026-02-02T00:00:00.000Z");
    // A second update replaces the line naming the rewritten sections instead of adding another.
    const again = updateBenchmarksDocument(updated, {
      machine: machine("2026-03-03T00:00:00.000Z", "1 1 1"),
      seconds: 10,
      sections: [section("overhead", [row("1 cold start", "third", "yes")], "third detail")],
    });
    expect(again.match(/Sections rewritten since by/g)).toHaveLength(1);
    // An update of other sections keeps that line and adds its own.
    const other = updateBenchmarksDocument(again, {
      machine: machine("2026-04-04T00:00:00.000Z", "1 1 1"),
      seconds: 10,
      sections: [section("streaming", [row("3 streaming", "streamed", "yes")], "stream detail")],
    });
    expect(other.match(/Sections rewritten since by/g)).toHaveLength(2);
    expect(again).toContain("Targets met: 2 of 2.");
  });

  it("refuses a page it did not write", () => {
    expect(() =>
      updateBenchmarksDocument("# Something else\n", { machine: machine("d", "l"), seconds: 1, sections: [] }),
    ).toThrow(/Targets met/);
  });
});
