/**
 * What `run` and `status` say when a `merge`-mode product's merge into the checkout was deferred (a new user's trial:
 * an untracked file of theirs was where the merge writes; `run` printed "(merge into main), integration deferred" and
 * `status` "merged into main", with the reason only in `--json`, and after `merge ID` it still said deferred). Now
 * both say it was not merged and why, and print the command that finishes it; once it ran, `status` says so.
 */
import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { makeRepo } from "../support/git-repo.js";
import { writeScriptedAgentConfig } from "../support/scripted-agent-config.js";
import { tempDir } from "../support/server-process.js";

it("a deferred merge is never called merged; run and status give the reason and the merge command", async () => {
  const dir = tempDir("acp-orch-deferred-");
  const repo = makeRepo({ "README.md": "# repo\n" });
  const show = (spec: string) => spawnSync("git", ["show", spec], { cwd: repo, encoding: "utf8" });
  const scriptFile = join(dir, "script.json");
  const actions = [{ write: { path: "GUIDE.md", content: "# Guide\n" } }];
  writeFileSync(scriptFile, JSON.stringify({ worker: { default: { actions } } }));
  const configFile = join(dir, "agents.json");
  writeScriptedAgentConfig(configFile, "writer", scriptFile);
  // The user's own untracked file where the merge would write.
  writeFileSync(join(repo, "GUIDE.md"), "mine\n");
  const state = join(dir, "state.db");

  const run = await runCli(
    ["run", "--state", state, "--config", configFile, "--yes", "--integration", "merge", "--goal", "- Write a guide"],
    repo,
  );
  expect(run.code, run.stdout + run.stderr).toBe(0);
  const id = /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";
  expect(run.stdout).toMatch(new RegExp(`^result: branch acp/${id}, not merged into main: .*GUIDE\\.md`, "m"));
  expect(run.stdout).not.toContain("merged into main,");
  const hint = /merge it when the checkout is ready: (acp-orchestrator merge .+)$/m.exec(run.stdout)?.[1] ?? "";
  expect(hint).toBe(`acp-orchestrator merge ${id} --state ${state} --cwd ${repo}`);
  expect(show("main:GUIDE.md").status).not.toBe(0);

  const before = await runCli(["status", id, "--state", state], dir);
  expect(before.code, before.stderr).toBe(0);
  expect(before.stdout).toMatch(
    /^integration: deferred on branch acp\/\S+, head \w+\n +not merged into main: .*GUIDE\.md/m,
  );
  expect(before.stdout).toContain(`merge it when the checkout is ready: ${hint}`);

  // The user moves their file away and runs the printed command (from elsewhere: it names the checkout).
  rmSync(join(repo, "GUIDE.md"));
  const merge = await runCli(hint.split(" ").slice(1), dir);
  expect(merge.code, merge.stderr).toBe(0);
  expect(show("main:GUIDE.md").stdout).toBe("# Guide\n");
  const after = await runCli(["status", id, "--state", state], dir);
  expect(after.stdout).toMatch(/^integration: deferred on branch acp\/\S+, head \w+\n +merged into main since/m);
  expect(after.stdout).not.toContain("merge it when the checkout is ready");
}, 180_000);
