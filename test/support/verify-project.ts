/**
 * Shared pieces of the green-only integration tests (issue 30; DESIGN.md guarantee 17): a small real Node project
 * whose `node --test` fails when `add` is wrong, the scripted-agent config, and re-checks of recorded commits.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { git, makeRepo } from "./git-repo.js";
import { tempDir } from "./server-process.js";
import { SCRIPTED_AGENT_ARGS } from "./scripted-agent-program.js";

export const GOOD = "export function add(a, b) {\n  return a + b;\n}\n";
export const FIXED = "export function add(a, b) {\n  return b + a;\n}\n";
export const BROKEN = "export function add(a, b) {\n  return a - b;\n}\n";
const TEST = [
  'import { test } from "node:test";',
  'import assert from "node:assert/strict";',
  'import { add } from "../math.js";',
  'test("add sums two numbers", () => {',
  "  assert.equal(add(2, 3), 5);",
  "});",
  "",
].join("\n");

/** A git repository holding a Node project whose tests pass at its one commit. */
export function nodeProject(extra: Record<string, string> = {}): string {
  return makeRepo({
    "package.json": JSON.stringify({ name: "calc", type: "module", scripts: { test: "node --test" } }, null, 2),
    "math.js": GOOD,
    "test/math.test.js": TEST,
    ".gitignore": "*.pid\n",
    ...extra,
  });
}

/** A scripted worker step that writes one file. */
export const write = (path: string, content: string) => ({
  actions: [{ write: { path, content } }],
  text: `wrote ${path}`,
});

/** The commits `ref` ever pointed at, oldest first (its reflog). */
export function reflog(repo: string, ref: string): string[] {
  return git(repo, "reflog", "show", "--format=%H", ref).split("\n").filter(Boolean).reverse();
}

/** Re-runs the project's tests on `commit` in a scratch worktree; true when they pass. */
export function testsPass(repo: string, commit: string): boolean {
  const dir = join(tempDir("acp-orch-recheck-"), "wt");
  git(repo, "worktree", "add", "--detach", "-q", dir, commit);
  try {
    return spawnSync(process.execPath, ["--test"], { cwd: dir, encoding: "utf8" }).status === 0;
  } finally {
    execFileSync("git", ["worktree", "remove", "--force", dir], { cwd: repo });
  }
}

/**
 * Writes a config with one scripted agent (`scripted`, worker) whose script is `script` (written to `base`), plus
 * `extra` config keys. Returns the config path and the agent's event log path.
 */
export function scriptedConfig(
  base: string,
  script: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): { config: string; log: string; script: string } {
  const scriptPath = join(base, "workers.json");
  const log = join(base, "agent.jsonl");
  writeFileSync(scriptPath, JSON.stringify({ log, ...script }));
  const config = join(base, "acp-orchestrator.json");
  writeFileSync(
    config,
    JSON.stringify({
      agents: [
        {
          agentId: "scripted",
          role: "worker",
          command: process.execPath,
          args: [...SCRIPTED_AGENT_ARGS],
          env: { SCRIPTED_AGENT_SCRIPT: scriptPath },
        },
      ],
      ...extra,
    }),
  );
  return { config, log, script: scriptPath };
}

/** The prompts the scripted agent logged, in order. */
export function promptsOf(log: string): { event: string; taskId?: string; attempt?: number; text?: string }[] {
  return readFileSync(log, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { event: string; taskId?: string; attempt?: number; text?: string })
    .filter((p) => p.event === "prompt");
}
