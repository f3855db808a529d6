/**
 * The docs test (`npm run test:docs`, issue 35; the convention is in docs/DEVELOPING.md): runs every block of
 * README.md and docs/*.md marked `sh test` in a scratch copy of a fresh clone, in page order, each with a time limit,
 * checks the expected output a block states, fails when the clone is left with a file no block says it creates, and
 * checks that every relative link of those pages names a file of the clone.
 *
 * The clone is of what git knows here: HEAD plus tracked changes (`git stash create`; staged new files included,
 * untracked ones not). Its node_modules is a hard-linked copy of this checkout's (CI ran `npm ci` here), so a block's
 * `npm ci` is taken as done. `acp-orchestrator` is on PATH (a link to the clone's dist/src/cli.js, as `npm link` would
 * make), HOME is a fresh directory per page (the default state file lives under it), and blocks needing PostgreSQL
 * (`$ACP_ORCHESTRATOR_TEST_PG`) or Chromium run only where they are present, and are reported SKIPPED otherwise.
 * Prints one line per block and the counts run / skipped / failed; exits 1 on any failure. Removes the scratch copy.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { missingExpectedLine, normalizeOutput, parseDocsBlocks, relativeLinks, type DocsBlock } from "./docs-blocks.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Why a block cannot run here, or undefined when it can. */
function missingNeed(block: DocsBlock): string | undefined {
  for (const need of block.needs) {
    if (need === "postgres" && !process.env.ACP_ORCHESTRATOR_TEST_PG)
      return "needs PostgreSQL: set ACP_ORCHESTRATOR_TEST_PG";
    if (need === "chromium" && spawnSync("sh", ["-c", "command -v chromium"]).status !== 0)
      return "needs chromium on PATH";
    if (need !== "postgres" && need !== "chromium") return `needs ${need}, which the docs test does not provide`;
  }
  return undefined;
}

function git(args: string[], cwd: string): string {
  const run = spawnSync("git", args, { cwd, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`git ${args.join(" ")} failed: ${run.stderr}`);
  return run.stdout.trim();
}

/** Makes the scratch clone; returns its path. */
function freshClone(scratch: string): string {
  const revision = git(["stash", "create"], ROOT) || git(["rev-parse", "HEAD"], ROOT);
  const repo = join(scratch, "acp-orchestrator");
  git(["clone", "--quiet", "--shared", "--no-checkout", ROOT, repo], scratch);
  git(["checkout", "--quiet", "--detach", revision], repo);
  const copy = spawnSync("cp", ["-al", join(ROOT, "node_modules"), join(repo, "node_modules")]);
  if (copy.status !== 0) throw new Error(`cp -al node_modules failed: ${String(copy.stderr)}`);
  mkdirSync(join(scratch, "bin"));
  symlinkSync(join(repo, "dist", "src", "cli.js"), join(scratch, "bin", "acp-orchestrator"));
  return repo;
}

/** A block's script with `npm ci` taken as done (see the header). */
function scriptOf(block: DocsBlock): string {
  return block.script.replace(/^npm ci\s*&&\s*/gm, "").replace(/^npm ci\s*(#.*)?$/gm, ":");
}

/** Runs one block in `repo`; resolves with its exit code (null: timed out) and its output (stdout + stderr). */
function runBlock(
  block: DocsBlock,
  repo: string,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn("bash", ["-eo", "pipefail", "-c", scriptOf(block)], {
      cwd: repo,
      env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (out += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      process.kill(-child.pid!, "SIGKILL");
    }, block.timeoutMs);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code: timedOut ? null : code, out });
    });
  });
}

/** Files the clone holds that git did not put there, less the build's, node_modules and what blocks create. */
function strayFiles(repo: string, created: readonly string[]): string[] {
  const allowed = ["node_modules/", "dist/", ...created];
  return git(["status", "--porcelain", "-z", "--ignored", "--untracked-files=normal"], repo)
    .split("\0")
    .filter((l) => l !== "")
    .map((l) => l.slice(3))
    .filter((path) => !allowed.some((a) => path === a || (a.endsWith("/") && path.startsWith(a))));
}

/** Relative links of the pages whose file is not in the clone, as "page: target". */
function brokenLinks(repo: string, pages: readonly string[]): { checked: number; broken: string[] } {
  let checked = 0;
  const broken: string[] = [];
  for (const page of pages) {
    for (const target of relativeLinks(readFileSync(join(repo, page), "utf8"))) {
      checked += 1;
      if (!existsSync(join(repo, dirname(page), target))) broken.push(`${page}: ${target}`);
    }
  }
  return { checked, broken };
}

async function main(): Promise<number> {
  const pages = [
    "README.md",
    ...readdirSync(join(ROOT, "docs"))
      .filter((f) => f.endsWith(".md"))
      .sort()
      .map((f) => `docs/${f}`),
  ];
  const scratch = mkdtempSync(join(tmpdir(), "acp-orchestrator-docs-"));
  const counts = { run: 0, skipped: 0, failed: 0 };
  const created: string[] = [];
  const started = Date.now();
  try {
    const repo = freshClone(scratch);
    const paths = { [repo]: "<repo>", [scratch]: "<scratch>", [ROOT]: "<checkout>" };
    for (const [index, page] of pages.entries()) {
      const home = join(scratch, `home-${index}`);
      mkdirSync(home);
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        HOME: home,
        PATH: `${join(scratch, "bin")}:${process.env.PATH ?? ""}`,
      };
      env.npm_config_cache = process.env.npm_config_cache ?? join(process.env.HOME ?? home, ".npm");
      for (const name of ["ACP_ORCHESTRATOR_STATE", "XDG_STATE_HOME", "ACP_ORCHESTRATOR_CONFIG"]) delete env[name];
      for (const block of parseDocsBlocks(page, readFileSync(join(repo, page), "utf8"))) {
        const where = `${block.file}:${block.line}`;
        const skip = missingNeed(block);
        if (skip !== undefined) {
          counts.skipped += 1;
          process.stdout.write(`SKIPPED ${where} (${skip})\n`);
          continue;
        }
        created.push(...block.creates);
        const begun = Date.now();
        const { code, out } = await runBlock(block, repo, env);
        const seconds = ((Date.now() - begun) / 1000).toFixed(1);
        const missing =
          code === 0 && block.expected !== undefined
            ? missingExpectedLine(normalizeOutput(out, paths), normalizeOutput(block.expected, paths))
            : undefined;
        if (code === 0 && missing === undefined) {
          counts.run += 1;
          process.stdout.write(`ok ${where} (${seconds} s)\n`);
          continue;
        }
        counts.failed += 1;
        const why =
          code === null
            ? `timed out after ${block.timeoutMs / 1000} s`
            : code !== 0
              ? `exit code ${code}`
              : `output lacks: ${missing}`;
        process.stdout.write(
          `FAIL ${where}: ${why}\n${block.script.replace(/^/gm, "  $ ")}\n${out.replace(/^/gm, "  | ")}\n`,
        );
      }
    }
    const links = brokenLinks(repo, pages);
    process.stdout.write(`links: ${links.checked} relative links checked, ${links.broken.length} broken\n`);
    if (links.broken.length > 0) {
      counts.failed += 1;
      process.stdout.write(`FAIL links to files that do not exist: ${links.broken.join(", ")}\n`);
    }
    const stray = strayFiles(repo, created);
    if (stray.length > 0) {
      counts.failed += 1;
      process.stdout.write(`FAIL the blocks left files no block says it creates: ${stray.join(", ")}\n`);
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const total = ((Date.now() - started) / 1000).toFixed(0);
  process.stdout.write(
    `docs test: ${counts.run} blocks run, ${counts.skipped} skipped, ${counts.failed} failed (${pages.length} pages, ${total} s)\n`,
  );
  return counts.failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`docs test: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
