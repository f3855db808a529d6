/**
 * The "A host on the official SDK" example of docs/HOSTS.md (it was the README's), extracted and run as written
 * (issue 15): it drives a product to completion and exits 0 on its own (it ends the server's stdin; SDK 2.4.0's
 * `connectWith` does not). Its server keeps its state in a temporary file (ACP_ORCHESTRATOR_STATE), not the user's.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { expect, it } from "vitest";
import { REPO_ROOT, tempDir } from "../support/server-process.js";

it("the host example of docs/HOSTS.md exits 0 after the product completed", () => {
  const readme = readFileSync(join(REPO_ROOT, "docs", "HOSTS.md"), "utf8");
  const section = readme.indexOf("**A host on the official SDK**");
  expect(section).toBeGreaterThan(0);
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(section));
  expect(block).not.toBeNull();
  // Beside the repository's node_modules, so its imports resolve as they would in a host's project.
  const file = join(REPO_ROOT, "dist", `readme-host-example-${process.pid}.ts`);
  writeFileSync(file, block?.[1] ?? "");
  try {
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
    const run = spawnSync(process.execPath, ["--import", tsx, file], {
      cwd: REPO_ROOT,
      encoding: "utf8",
      env: { ...process.env, ACP_ORCHESTRATOR_STATE: join(tempDir("acp-orch-readme-"), "state.db") },
      timeout: 120_000,
    });
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toContain("Write a README");
    expect(run.stdout).toContain("phase: 'completed'");
  } finally {
    rmSync(file, { force: true });
  }
}, 150_000);
