/**
 * `--json` prints the outcome of the request, once (a new user's trial: `pause <completed product> --json` printed
 * `{"kind":"unclaimed"}`, the first attempt's outcome — no server owned it — while this command's own server then
 * refused it). Now the one JSON line is the refusal, in the shape of an owner's refusal.
 */
import { expect, it } from "vitest";
import { join } from "node:path";
import { runCli } from "../support/cli-run.js";
import { tempDir } from "../support/server-process.js";

it("a verb refused by this command's own server prints that refusal as its one JSON line", async () => {
  const dir = tempDir("acp-orch-json-refused-");
  const state = join(dir, "state.db");
  const run = await runCli(["run", "--state", state, "--yes", "--goal", "- Write a note"], dir);
  expect(run.code, run.stdout + run.stderr).toBe(0);
  const id = /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";

  const pause = await runCli(["pause", id, "--state", state, "--json"], dir);
  expect(pause.code).toBe(1);
  const lines = pause.stdout.trim().split("\n");
  expect(lines).toHaveLength(1);
  expect(JSON.parse(lines[0] ?? "")).toMatchObject({
    kind: "refused",
    error: { code: "invalid_phase", wireCode: -32010, details: { phase: "completed" } },
  });
  expect(pause.stderr).toContain(`Product ${id} is completed`);
}, 120_000);
