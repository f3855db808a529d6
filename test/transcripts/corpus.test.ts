/**
 * Replays the whole transcript corpus (protocol/transcripts/*.jsonl) against fresh built servers, two at a time, and
 * fails with every failing transcript's report. This is the conformance guard of PROTOCOL.md sections 1-5; the
 * coverage of the corpus is checked by coverage.test.ts. Budget: well under 60 s on two cores.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatResult, replayFiles, summaryLine } from "../../src/transcripts/replayer.js";

const REPO = join(import.meta.dirname, "..", "..");
const CORPUS = join(REPO, "protocol", "transcripts");

describe("the transcript corpus", () => {
  const files = readdirSync(CORPUS)
    .filter((f) => f.endsWith(".jsonl"))
    .sort()
    .map((f) => join("protocol", "transcripts", f));

  it("holds transcripts", () => {
    expect(files.length).toBeGreaterThanOrEqual(20);
  });

  // The test's own limit is far above the per-line wait times the corpus size over the two jobs, so that a corpus that
  // drifted from the server ends in the report of every failing line, not in vitest's bare timeout (stop 39's CI).
  it("replays every transcript against a fresh server", { timeout: 600_000 }, async () => {
    expect(existsSync(join(REPO, "dist", "src", "cli.js")), "run `npm run build` first (npm test does)").toBe(true);
    const started = Date.now();
    const { results, passed, failed } = await replayFiles(
      files.map((f) => join(REPO, f)),
      // Generous per-line wait: it only matters when something is wrong, and CI machines are shared.
      { jobs: 2, timeoutMs: 30_000 },
    );
    const report = results
      .filter((r) => !r.ok)
      .map(formatResult)
      .join("\n\n");
    expect(report, `${summaryLine(passed, failed)} in ${Date.now() - started} ms`).toBe("");
    expect(passed).toBe(files.length);
  });
});
