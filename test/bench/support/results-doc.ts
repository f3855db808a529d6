/**
 * BENCHMARKS.md as `npm run bench` writes it (issue 27: the current results and how to reproduce them; earlier
 * results live in git, `git log -p BENCHMARKS.md`): the machine, then one section per figure with the load average
 * when that figure started, the command that measures it alone, one table of every measure beside its floor or peer
 * with the ratio, target and verdict, and how it is measured. A run of some sections (`--only … --update`) rewrites
 * only those sections of the page and its count of targets met (`updateBenchmarksDocument`). Owns the page's format
 * only; it measures nothing.
 */
import type { Machine } from "./stats.js";
import { markdownTable } from "./stats.js";

/** The sections `npm run bench -- --only …` takes, in the order they run. */
export const BENCH_SECTIONS = [
  "overhead",
  "streaming",
  "scale",
  "durability",
  "resume",
  "peer",
  "worktrees",
  "remote",
  "verify",
  "postgres",
  "pickup",
  "fleet",
] as const;
export type BenchSection = (typeof BENCH_SECTIONS)[number];

/** Each section's heading in BENCHMARKS.md. */
export const SECTION_TITLES: Readonly<Record<BenchSection, string>> = {
  overhead: "Figures 1–2: cold start and request overhead",
  streaming: "Figure 3: notification streaming",
  scale: "Figure 4: scheduler scale",
  durability: "Figure 5: durability cost",
  resume: "Figure 5: resume from disk",
  peer: "Figure 6: LangGraph.js on the identical DAG",
  worktrees: "Figure 7: worktree isolation cost per task",
  remote: "Figure 7b: the remote path (code through a git remote) per task",
  verify: "Figure 10: verification bookkeeping per task (green-only integration)",
  postgres: "Figure 8: PostgreSQL store and many servers on one database",
  pickup: "Control request pickup from a second process (SQLite and PostgreSQL)",
  fleet: "Figure 9: a fleet of servers on one PostgreSQL, and 100,000 stored products",
};

/** One measure of a figure: the row of its table. */
export interface ResultRow {
  figure: string;
  measure: string;
  value: string;
  baseline: string;
  ratio: string;
  target: string;
  met: "yes" | "no" | "—";
}

/** What one section measured: its rows, how it is measured (markdown), and the load average when it started. */
export interface SectionResult {
  section: BenchSection;
  loadAverage: string;
  rows: ResultRow[];
  details: string[];
}

/** The whole page: the machine, how long the run took, every section that ran (in run order). */
export interface BenchResults {
  machine: Machine;
  seconds: number;
  sections: SectionResult[];
  /** A `--quick` run (small sizes): its page says so, since its numbers are not the published ones. */
  quick?: boolean;
}

/** The table of some rows, in the page's columns. */
export function resultsTable(rows: readonly ResultRow[]): string {
  return markdownTable(
    ["figure", "measure", "acp-orchestrator", "floor / peer", "ratio", "target", "met"],
    rows.map((r) => [r.figure, r.measure, r.value, r.baseline, r.ratio, r.target, r.met]),
  );
}

function sectionText(s: SectionResult): string {
  const met = s.rows.filter((r) => r.met === "yes").length;
  const judged = s.rows.filter((r) => r.met !== "—").length;
  return [
    `## ${SECTION_TITLES[s.section]}`,
    "",
    `Reproduce: \`npm run bench -- --only ${s.section}\` (prints the table; \`--update\` rewrites this section). ` +
      `Load average when it started: ${s.loadAverage}. Targets met: ${met} of ${judged}.`,
    "",
    resultsTable(s.rows),
    "",
    "<details><summary>How it is measured, and the detailed figures</summary>",
    "",
    ...s.details.map((d) => d.replace(/^#{2,4} .*\n+/, "").trim()).flatMap((d) => [d, ""]),
    "</details>",
    "",
  ].join("\n");
}

/** BENCHMARKS.md for `results`. */
export function benchmarksDocument(results: BenchResults): string {
  const m = results.machine;
  const rows = results.sections.flatMap((s) => s.rows);
  const misses = rows.filter((r) => r.met === "no");
  return [
    "# Benchmarks",
    "",
    "Written by `npm run bench` (test/bench/run.ts, test/bench/support/results-doc.ts): the current results only;",
    "earlier ones are in git (`git log -p BENCHMARKS.md`). Every figure is measured in the same run as its floor (an",
    "echo server, an idle server, the in-memory store) or its peer (LangGraph.js), so the ratios are what count on this",
    "shared machine; absolute times move with its load. Do not edit by hand: run `npm run bench` on an idle machine.",
    "How to run and profile it: docs/DEVELOPING.md, Benchmarks.",
    "",
    `Machine: ${m.cpuModel}, ${m.cores} cores, ${m.memoryGb} GB memory, ${m.platform}, Node ${m.node}. ` +
      `Date: ${m.date}. Load average at start: ${m.loadAverage}. The run took ${results.seconds.toFixed(0)} s. ` +
      `Targets met: ${rows.filter((r) => r.met === "yes").length} of ${rows.filter((r) => r.met !== "—").length}` +
      (misses.length > 0 ? ` (missed: ${misses.map((r) => `${r.figure}, ${r.measure}`).join("; ")}).` : "."),
    ...(results.quick ? ["", "**A `--quick` run: small sizes, a smoke test of the benchmark, not its figures.**"] : []),
    "",
    ...results.sections.map(sectionText),
  ].join("\n");
}

/** The verdict cells of every results table of `page`: one entry per judged row, with its figure and measure. */
function judgedRows(page: string): { met: boolean; name: string }[] {
  const out: { met: boolean; name: string }[] = [];
  for (const line of page.split("\n")) {
    if (!line.startsWith("|")) continue;
    const cells = line.split("|").map((c) => c.trim());
    // | figure | measure | value | floor | ratio | target | met |  → 9 pieces with the empty ends.
    if (cells.length !== 9) continue;
    const met = cells[7];
    if (met === "yes" || met === "no") out.push({ met: met === "yes", name: `${cells[1]}, ${cells[2]}` });
  }
  return out;
}

/**
 * `existing` (a BENCHMARKS.md) with the sections of `results` put in place of the ones with the same heading (a
 * section the page lacks is added at the end), every other section kept as it was, and the header's count of targets
 * met recounted over the whole page; a line under the machine line names the sections rewritten, when, and the
 * machine (replacing the line of an earlier update of the same sections, keeping those of others). Throws when `existing` has no `Targets met:` header line (not a page this module wrote).
 */
export function updateBenchmarksDocument(existing: string, results: BenchResults): string {
  const lines = existing.replace(/\n+$/, "").split("\n");
  const firstSection = lines.findIndex((l) => l.startsWith("## "));
  const header = (firstSection < 0 ? lines : lines.slice(0, firstSection)).join("\n");
  const sections: { heading: string; text: string }[] = [];
  if (firstSection >= 0) {
    for (let i = firstSection; i < lines.length; ) {
      let end = i + 1;
      while (end < lines.length && !(lines[end] as string).startsWith("## ")) end += 1;
      sections.push({ heading: lines[i] as string, text: lines.slice(i, end).join("\n").replace(/\n+$/, "") });
      i = end;
    }
  }
  for (const s of results.sections) {
    const text = sectionText(s).replace(/\n+$/, "");
    const heading = `## ${SECTION_TITLES[s.section]}`;
    const at = sections.findIndex((x) => x.heading === heading);
    if (at >= 0) sections[at] = { heading, text };
    else sections.push({ heading, text });
  }
  const body = sections.map((s) => s.text).join("\n\n");
  const judged = judgedRows(body);
  const misses = judged.filter((r) => !r.met);
  const count =
    `Targets met: ${judged.length - misses.length} of ${judged.length}` +
    (misses.length > 0 ? ` (missed: ${misses.map((r) => r.name).join("; ")}).` : ".");
  if (!/Targets met: [^\n]*/.test(header)) throw new Error("BENCHMARKS.md has no 'Targets met:' line to update.");
  const m = results.machine;
  const updated =
    `Sections rewritten since by \`npm run bench -- --only ${results.sections.map((s) => s.section).join(",")} ` +
    `--update\`: ${m.date}, ${m.cpuModel}, ${m.cores} cores, Node ${m.node}, load average at start ${m.loadAverage}` +
    `${results.quick ? " (a --quick run: not the published sizes)" : ""}.`;
  const newHeader = header
    .replace(/Targets met: [^\n]*/, count)
    .split("\n")
    // An earlier line for the same sections gives way; lines naming other sections stay.
    .filter((l) => !l.startsWith(updated.slice(0, updated.indexOf("--update") + "--update".length)))
    .join("\n")
    .replace(/(Targets met: [^\n]*)/, `$1\n${updated}`);
  return `${newHeader.replace(/\n+$/, "")}\n\n${body}\n`;
}
