/**
 * Regression (issue 35): a recorded transcript's title kept the absolute `--state` path of the machine that recorded
 * it (`record --out f.jsonl -- node dist/src/cli.js serve --state /tmp/rec.db`). The title cuts every absolute path
 * to its last part; relative arguments stay as they are.
 */
import { describe, expect, it } from "vitest";
import { titleFor } from "../../src/transcripts/recorder.js";

describe("titleFor (a recorded transcript's title)", () => {
  it("keeps no absolute path of the recording machine, in separate or = arguments, POSIX or Windows", () => {
    const title = titleFor([
      "/usr/local/bin/node",
      "dist/src/cli.js",
      "serve",
      "--state",
      "/tmp/acp-rec-Xy12/rec.db",
      "--config=/home/ada/project/acp-orchestrator.json",
      "C:\\Users\\ada\\state.db",
    ]);
    expect(title).toBe(
      "Recorded from: …/node dist/src/cli.js serve --state …/rec.db --config=…/acp-orchestrator.json …/state.db",
    );
  });

  it("leaves a command of relative paths and words as it was", () => {
    expect(titleFor(["node", "dist/src/cli.js", "serve", "--log-level", "debug"])).toBe(
      "Recorded from: node dist/src/cli.js serve --log-level debug",
    );
  });
});
