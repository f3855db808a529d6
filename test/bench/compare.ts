/**
 * `npm run bench:compare -- --base REF` (issue 27, "Must keep": `npm run bench` figures stay within 10 % of the
 * earlier code's in one interleaved run, both printed): builds REF's tree in a scratch git worktree (sharing this
 * checkout's node_modules), then runs each benchmark section of both trees alternately — base then head in odd rounds,
 * head then base in even ones, so a load change on the shared machine falls on both — and prints one table: every
 * measure both trees print, the value of each (median over the rounds), head ÷ base and whether head is within 10 %
 * (direction from the measure's target, `≤` lower is better, `≥` higher; else from its unit).
 *
 *   node dist/bench/test/bench/compare.js --base 7314467 [--only overhead,scale] [--rounds 2] [--quick]
 *
 * Each run is the tree's own `run.js --only SECTION --no-write`: its stdout table is what is compared, matched by
 * figure and measure text (a measure renamed since REF shows on one side only). The PostgreSQL section runs only when
 * ACP_ORCHESTRATOR_TEST_PG is set (`bash scripts/pg-test-cluster.sh run -- …`). Never writes BENCHMARKS.md; removes its
 * scratch worktree at the end. Throws when REF does not resolve or a run exits non-zero.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { BENCH_SECTIONS } from "./support/results-doc.js";
import { REPO_ROOT } from "./support/paths.js";
import { fmt, markdownTable, median } from "./support/stats.js";

/** How far head may be behind base and still count as unchanged (issue 27). */
const TOLERANCE = 0.1;

/** One measure a tree printed: its target text and the first number of its value cell. */
interface Printed {
  target: string;
  value: number;
  unit: string;
}

type Side = "base" | "head";

/** The rows of the last markdown results table in a run's stdout, keyed by `figure · measure`. */
export function parseResultsTable(stdout: string): Map<string, Printed> {
  const lines = stdout.split("\n");
  const start = lines.findLastIndex((l) => /^\|\s*figure\s*\|/.test(l));
  const out = new Map<string, Printed>();
  if (start < 0) return out;
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    const cells = line
      .split("|")
      .slice(1, -1)
      .map((c) => c.trim());
    const [figure, measure, value, , , target] = cells;
    const m = /(-?[\d,]+(?:\.\d+)?)\s*([^\d\s/()]*)/.exec(value ?? "");
    if (!figure || !measure || !m?.[1]) continue;
    out.set(`${figure} · ${measure}`, {
      target: target ?? "",
      value: Number(m[1].replaceAll(",", "")),
      unit: m[2] ?? "",
    });
  }
  return out;
}

/** Whether a larger value of this measure is better, or `null` when neither its target, unit nor wording says. */
export function higherIsBetter(p: Printed, measure: string): boolean | null {
  if (p.target.includes("≥")) return true;
  if (p.target.includes("≤")) return false;
  if (/\/s$/.test(p.unit) || /req\/s|tasks\/s|per second|faster/.test(measure)) return true;
  if (/^(ms|s|B|KB|KiB|MB|MiB|GB)$/.test(p.unit)) return false;
  if (/\((ms|s|MB|MiB|B)\)|\bms\b|RSS|bytes|growth|stall|statements/.test(measure)) return false;
  return null;
}

/** A value with three significant digits (the medians compared are often below 1 ms). */
function num(n: number): string {
  return Math.abs(n) >= 100 ? fmt(n) : n.toPrecision(3);
}

function sh(cwd: string, command: string, args: string[], env: NodeJS.ProcessEnv = process.env): string {
  const r = spawnSync(command, args, { cwd, env, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} in ${cwd} exited ${r.status}: ${(r.stderr ?? "").slice(-2_000)}`);
  }
  return r.stdout;
}

/** Makes REF's tree at `dir` with this checkout's node_modules, and builds the server and the benchmark. */
function buildBase(ref: string, dir: string): void {
  execFileSync("git", ["worktree", "add", "--detach", "-f", dir, ref], { cwd: REPO_ROOT, stdio: "ignore" });
  symlinkSync(join(REPO_ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  sh(dir, "npm", ["run", "build", "--silent"]);
  sh(dir, "npx", ["tsc", "-p", "test/bench/tsconfig.json"]);
}

function runSection(root: string, section: string, quick: boolean): Map<string, Printed> {
  const script = join(root, "dist", "bench", "test", "bench", "run.js");
  const args = [script, "--only", section, "--no-write", ...(quick ? ["--quick"] : [])];
  process.stderr.write(`  ${root === REPO_ROOT ? "head" : "base"}: ${section}\n`);
  return parseResultsTable(sh(root, process.execPath, args));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: "string", default: "7314467" },
      only: { type: "string" },
      rounds: { type: "string", default: "2" },
      quick: { type: "boolean", default: false },
    },
  });
  const ref = execFileSync("git", ["rev-parse", "--verify", `${values.base}^{commit}`], { cwd: REPO_ROOT })
    .toString()
    .trim();
  const baseSections = execFileSync("git", ["show", `${ref}:test/bench/run.ts`], { cwd: REPO_ROOT }).toString();
  const wanted = values.only?.split(",").map((s) => s.trim()) ?? [...BENCH_SECTIONS];
  const sections = wanted.filter(
    (s) =>
      baseSections.includes(`only.has("${s}")`) &&
      (s !== "postgres" || process.env.ACP_ORCHESTRATOR_TEST_PG !== undefined),
  );
  const rounds = Math.max(1, Number(values.rounds));
  const dir = mkdtempSync(join(tmpdir(), "acp-bench-base-"));
  const baseRoot = join(dir, "tree");
  const samples = new Map<string, { printed: Printed; base: number[]; head: number[] }>();
  const load = loadavg()
    .map((n) => n.toFixed(2))
    .join(" ");
  try {
    process.stderr.write(`building ${ref.slice(0, 10)} in ${baseRoot}\n`);
    buildBase(ref, baseRoot);
    for (let round = 0; round < rounds; round++) {
      for (const section of sections) {
        const order: Side[] = round % 2 === 0 ? ["base", "head"] : ["head", "base"];
        for (const side of order) {
          for (const [key, printed] of runSection(side === "base" ? baseRoot : REPO_ROOT, section, values.quick)) {
            const entry = samples.get(key) ?? { printed, base: [], head: [] };
            entry[side].push(printed.value);
            samples.set(key, entry);
          }
        }
      }
    }
  } finally {
    execFileSync("git", ["worktree", "remove", "--force", baseRoot], { cwd: REPO_ROOT, stdio: "ignore" });
    rmSync(dir, { recursive: true, force: true });
  }
  let worse = 0;
  const rows: string[][] = [];
  for (const [key, { printed, base, head }] of samples) {
    if (base.length === 0 || head.length === 0) {
      rows.push([
        key,
        base.length ? fmt(median(base)) : "—",
        head.length ? fmt(median(head)) : "—",
        "—",
        "one side only",
      ]);
      continue;
    }
    const b = median(base);
    const h = median(head);
    const ratio = b === 0 ? (h === 0 ? 1 : Infinity) : h / b;
    const higher = higherIsBetter(printed, key);
    const within = higher === null ? null : higher ? ratio >= 1 - TOLERANCE : ratio <= 1 + TOLERANCE;
    if (within === false) worse++;
    const verdict = within === null ? "—" : within ? "yes" : "no";
    rows.push([
      key,
      `${num(b)} ${printed.unit}`.trim(),
      `${num(h)} ${printed.unit}`.trim(),
      `${ratio.toFixed(2)}×`,
      verdict,
    ]);
  }
  process.stdout.write(
    `\nbase ${ref.slice(0, 10)} vs head, ${rounds} interleaved round(s) of ${sections.join(", ")}` +
      `${values.quick ? " (quick sizes)" : ""}; load average at start ${load}\n\n` +
      markdownTable(["figure · measure", "base (median)", "head (median)", "head ÷ base", "within 10 %"], rows) +
      `\n\n${worse} measure(s) more than 10 % worse.\n`,
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`bench compare failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
