/**
 * The long local mode of the crash-resume test (issue 4, "Must show": more kill points than CI's time budget allows):
 * runs test/e2e/crash-resume.test.ts with `CRASH_KILLS` and friends set, one round or several with different seeds.
 *
 *   npx tsx scripts/crash-soak.ts [--kills N] [--seed S] [--rounds R] [--lanes L]
 *   node dist/scripts/crash-soak.js …           (after `npm run build`)
 *
 * Defaults: 500 kill points per round, 1 round, seed from the clock (printed, so a failure can be replayed with
 * `--seed`), 2 kill lanes. Exits with the first failing round's code. It builds nothing itself: the test spawns the
 * built server, so run `npm run build` first. This script never writes to the state of any real run.
 */
import { spawnSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root, from scripts/ (tsx) or dist/scripts/ (compiled). */
const root = resolve(here, here.includes(join("dist", "scripts")) ? "../.." : "..");

const USAGE = `Usage: npx tsx scripts/crash-soak.ts [--kills N] [--seed S] [--rounds R] [--lanes L]

Runs test/e2e/crash-resume.test.ts with N kill points per round (default 500), R rounds (default 1) from seed S
(default: from the clock, printed) on L kill lanes (default 2). Run \`npm run build\` first. Exits with the first
failing round's code.
`;

let values: { kills?: string; seed?: string; rounds?: string; lanes?: string; help?: boolean };
try {
  ({ values } = parseArgs({
    options: {
      kills: { type: "string", default: "500" },
      seed: { type: "string" },
      rounds: { type: "string", default: "1" },
      lanes: { type: "string", default: "2" },
      help: { type: "boolean", short: "h" },
    },
  }));
} catch (err) {
  process.stderr.write(`crash-soak: ${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

/** Parses a positive integer flag or exits with a message. */
function positive(name: string, text: string | undefined): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) {
    process.stderr.write(`crash-soak: --${name} must be a positive integer, got "${String(text)}"\n`);
    process.exit(2);
  }
  return n;
}

const kills = positive("kills", values.kills);
const rounds = positive("rounds", values.rounds);
const lanes = positive("lanes", values.lanes);
const firstSeed = values.seed !== undefined ? positive("seed", values.seed) : Date.now() % 1_000_000_007;

for (let round = 0; round < rounds; round += 1) {
  const seed = firstSeed + round * 7_919;
  process.stderr.write(
    `crash-soak: round ${round + 1}/${rounds}: ${kills} kill points, seed ${seed}, ${lanes} lanes\n`,
  );
  const result = spawnSync(
    process.execPath,
    [join(root, "node_modules", "vitest", "vitest.mjs"), "run", "test/e2e/crash-resume.test.ts"],
    {
      cwd: root,
      stdio: "inherit",
      env: {
        ...process.env,
        CRASH_KILLS: String(kills),
        CRASH_SEED: String(seed),
        CRASH_LANES: String(lanes),
        CRASH_TIMEOUT_MS: String(Math.max(600_000, kills * 10_000)),
      },
    },
  );
  if (result.status !== 0) {
    process.stderr.write(
      `crash-soak: round ${round + 1} failed (seed ${seed}); replay with --seed ${seed} --rounds 1\n`,
    );
    process.exit(result.status ?? 1);
  }
}
process.stderr.write(`crash-soak: ${rounds} round(s) of ${kills} kill points passed\n`);
