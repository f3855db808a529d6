/**
 * `diff` and `merge` (issue 29) on a product a real server ran with worktree isolation: `diff ID` shows the product's
 * change against its base and `diff ID TASK` one task's, from git (no colour when stdout is not a terminal, colour
 * with --color); `merge ID` brings the finished `branch`-mode product into the branch checked out here, and leaves the
 * branch and the checkout untouched while something of the user's is in the way.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { tempDir } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

/** 22 more files the task writes besides GUIDE.md (so a refusal that names them has to bound its list). */
const PAGES = Array.from({ length: 22 }, (_, i) => `pages/p${String(i + 1).padStart(2, "0")}.md`);

it("diff shows the product's and a task's change; merge brings it into the checked-out branch, never past the user", async () => {
  const dir = tempDir("acp-orch-diff-");
  const repo = join(dir, "repo");
  const git = (...args: string[]) => spawnSync("git", args, { cwd: repo, encoding: "utf8" });
  spawnSync("git", ["init", "-q", "-b", "main", repo]);
  writeFileSync(join(repo, "README.md"), "# repo\n");
  git("add", "README.md");
  git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init");
  const scriptFile = join(dir, "script.json");
  writeFileSync(
    scriptFile,
    JSON.stringify({
      worker: {
        default: {
          actions: [
            { write: { path: "GUIDE.md", content: "# Guide\n\nHow to use it.\n" } },
            ...PAGES.map((path) => ({ write: { path, content: `# ${path}\n` } })),
          ],
        },
      },
    }),
  );
  const configFile = join(dir, "agents.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      agents: [
        {
          agentId: "writer",
          role: "worker",
          command: process.execPath,
          args: [...SCRIPTED_AGENT_ARGS],
          env: { SCRIPTED_AGENT_SCRIPT: scriptFile },
        },
      ],
    }),
  );
  const state = join(dir, "state.db");
  const run = await runCli(
    ["run", "--state", state, "--config", configFile, "--yes", "--goal", "- Write a guide"],
    repo,
  );
  expect(run.code, run.stdout + run.stderr).toBe(0);
  const id = /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";

  const diff = await runCli(["diff", id, "--state", state], repo);
  expect(diff.code, diff.stderr).toBe(0);
  expect(diff.stdout).toMatch(/GUIDE\.md +\| +3 \+\+\+/);
  expect(diff.stdout).toContain("+How to use it.");
  expect(diff.stdout).not.toContain("\x1b[");
  const task = await runCli(["diff", id, "t1", "--state", state, "--color"], repo);
  expect(task.code, task.stderr).toBe(0);
  expect(task.stdout).toContain("\x1b[");
  expect(task.stdout).toContain("How to use it.");
  const missing = await runCli(["diff", id, "t9", "--state", state], repo);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toContain(`Product ${id} has no task t9.`);

  // Untracked files where the merge would write: nothing of the user's is touched, and the refusal names them (the
  // first 20, then how many more; a new user's trial: it named none).
  writeFileSync(join(repo, "GUIDE.md"), "mine\n");
  mkdirSync(join(repo, "pages"));
  for (const page of PAGES) writeFileSync(join(repo, page), "mine\n");
  const head = git("rev-parse", "HEAD").stdout;
  const blocked = await runCli(["merge", id, "--state", state], repo);
  expect(blocked.code).toBe(1);
  expect(blocked.stderr).toContain(
    `main was not changed: the checkout has untracked files where the merge writes (GUIDE.md, ` +
      `${PAGES.slice(0, 19).join(", ")} and 3 more); move or remove them and merge again.`,
  );
  expect(git("rev-parse", "HEAD").stdout).toBe(head);
  expect(readFileSync(join(repo, "GUIDE.md"), "utf8")).toBe("mine\n");
  rmSync(join(repo, "GUIDE.md"));
  rmSync(join(repo, "pages"), { recursive: true });

  const merged = await runCli(["merge", id, "--state", state], repo);
  expect(merged.code, merged.stderr).toBe(0);
  expect(merged.stdout).toMatch(new RegExp(`^merged acp/${id} into main \\(now at [0-9a-f]{12}\\)$`, "m"));
  expect(existsSync(join(repo, "GUIDE.md"))).toBe(true);
  expect(git("status", "--porcelain").stdout).toBe("");
  expect(git("log", "--format=%s", "-1").stdout).not.toBe("init\n");
}, 180_000);
