/**
 * The host authors' kit over real processes (issue 14, "Must show"): `acp-orchestrator check-host` (the built CLI)
 * against the example JSON-file host (examples/json-file-host.mjs) passes every rule; the same example broken to
 * reuse revisions, or to lose events, fails with the rules named. The broken hosts are the example's own source with
 * one line changed, so they differ from a passing host by exactly that defect.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { hostRules } from "../../src/host-kit/check-host.js";
import { CLI, REPO_ROOT, tempDir } from "../support/server-process.js";

const EXAMPLE = join(REPO_ROOT, "examples", "json-file-host.mjs");

/**
 * Runs `check-host [options] -- node HOST` in a fresh directory; resolves with the exit code and stdout. `env` is
 * added to the environment (default: RUNSTATE_FILE in that directory).
 */
function checkHost(
  host: string,
  options: string[] = [],
  cwd = tempDir("acp-orch-check-host-"),
  env: NodeJS.ProcessEnv = { RUNSTATE_FILE: join(cwd, "runstate.json") },
): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [CLI, "check-host", ...options, "--", process.execPath, host], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "ignore"],
  });
  let out = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (d: string) => (out += d));
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, out })));
}

/** The example with `from` replaced by `to` (which must occur exactly once), written to a temporary file. */
function brokenExample(from: string, to: string): string {
  const source = readFileSync(EXAMPLE, "utf8");
  if (source.split(from).length !== 2) throw new Error(`the example no longer contains ${from} exactly once`);
  const file = join(tempDir("acp-orch-broken-host-"), "host.mjs");
  writeFileSync(file, source.replace(from, to));
  return file;
}

describe("acp-orchestrator check-host", () => {
  it("passes every rule on the example JSON-file host, which is under 100 lines", async () => {
    const { code, out } = await checkHost(EXAMPLE);
    const total = hostRules({ P: "a", Q: "b" }).length;
    expect({
      code,
      last: out.trim().split("\n").at(-1),
      lines: readFileSync(EXAMPLE, "utf8").trimEnd().split("\n").length < 100,
    }).toEqual({ code: 0, last: `${total} passed, 0 failed`, lines: true });
  }, 240_000);

  // Regression (issue 35): run as the README says, the example host left its data (6 MB) in the user's folder.
  it("leaves nothing behind: the host's data goes to a scratch directory that check-host removes", async () => {
    const cwd = tempDir("acp-orch-check-host-cwd-");
    const tmp = tempDir("acp-orch-check-host-tmp-");
    const { code, out } = await checkHost(EXAMPLE, ["--only", "put,get"], cwd, { TMPDIR: tmp });
    expect({ code, summary: out.trim().split("\n").at(-1), cwd: readdirSync(cwd), tmp: readdirSync(tmp) }).toEqual({
      code: 0,
      summary: expect.stringMatching(/^\d+ passed, 0 failed$/),
      cwd: [],
      tmp: [],
    });
  }, 120_000);

  it("fails a host that reuses revisions, naming the rules it breaks", async () => {
    const host = brokenExample(
      "const revision = (current?.revision ?? 0) + 1;",
      "const revision = current?.revision ?? 1;",
    );
    const { code, out } = await checkHost(host, ["--only", "put,get"]);
    expect({
      code,
      named: out.includes("FAIL put: increments the revision by one on each update"),
      summary: /^\d+ passed, [1-9]\d* failed$/m.test(out),
    }).toEqual({ code: 1, named: true, summary: true });
  }, 120_000);

  it("fails a host that loses events, naming the rules it breaks", async () => {
    const host = brokenExample(
      "db.streams[key(projectId, stream)] = [...list, ...events];",
      "db.streams[key(projectId, stream)] = [...list, ...events.slice(0, 1)];",
    );
    const { code, out } = await checkHost(host, ["--only", "appendEvents,readEvents"]);
    expect({
      code,
      named: out.includes("FAIL readEvents: returns every event oldest first with seq 1, 2, … after 0"),
      summary: /^\d+ passed, [1-9]\d* failed$/m.test(out),
    }).toEqual({ code: 1, named: true, summary: true });
  }, 120_000);
  it("refuses --only with a method the kit does not check (exit 2, nothing run)", async () => {
    expect(await checkHost(EXAMPLE, ["--only", "bogus"])).toEqual({ code: 2, out: "" });
    const some = await checkHost(EXAMPLE, ["--only", "deleteStream"]);
    expect(some.code).toBe(0);
    expect(some.out).toMatch(/^9 passed, 0 failed$/m);
  });
});
