/**
 * A small typed wrapper around the `git` command line: one call runs one git command through `execFile` (no shell,
 * arguments passed as an array, never interpolated), with a fixed environment so output is parseable and no prompt can
 * block (`LC_ALL=C`, `GIT_TERMINAL_PROMPT=0`, no pager, no editor) and a fixed committer identity, so commits work in
 * repositories whose user has none configured.
 *
 * It owns nothing and decides nothing: callers (git-workspace.ts) say what to run. It must never run a shell.
 */
import { execFile } from "node:child_process";

/** The committer and author of every commit the orchestrator makes. */
export const ORCHESTRATOR_IDENTITY = { name: "acp-orchestrator", email: "acp-orchestrator@localhost" };

export interface GitResult {
  /** The process exit code (0 = success). */
  code: number;
  stdout: string;
  stderr: string;
}

/** A git command that failed; `message` names the command and git's first error line. */
export class GitError extends Error {
  override readonly name = "GitError";
  constructor(
    readonly args: readonly string[],
    readonly result: GitResult,
  ) {
    const line = (result.stderr || result.stdout).trim().split("\n")[0] ?? "";
    super(`git ${args.slice(0, 2).join(" ")} failed (exit ${result.code}): ${line}`);
  }
}

const ENV: Record<string, string> = {
  LC_ALL: "C",
  GIT_TERMINAL_PROMPT: "0",
  GIT_PAGER: "cat",
  GIT_EDITOR: "true",
  GIT_AUTHOR_NAME: ORCHESTRATOR_IDENTITY.name,
  GIT_AUTHOR_EMAIL: ORCHESTRATOR_IDENTITY.email,
  GIT_COMMITTER_NAME: ORCHESTRATOR_IDENTITY.name,
  GIT_COMMITTER_EMAIL: ORCHESTRATOR_IDENTITY.email,
};

/**
 * Runs `git <args>` in `cwd` and resolves with its exit code and output; never rejects for a non-zero exit (callers
 * decide what an exit code means). Rejects only when git cannot be started at all. Output is capped at 64 MiB.
 */
export function runGit(
  cwd: string,
  args: readonly string[],
  input?: string,
  env?: Record<string, string>,
): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      "git",
      args,
      { cwd, env: { ...process.env, ...ENV, ...env }, maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (err && typeof (err as NodeJS.ErrnoException).code === "string") {
          reject(new Error(`git could not be started: ${err.message}`));
          return;
        }
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** Runs `git <args>` (with `env` added to git's environment) and returns its stdout; throws `GitError` on a non-zero exit. */
export async function git(
  cwd: string,
  args: readonly string[],
  input?: string,
  env?: Record<string, string>,
): Promise<string> {
  const result = await runGit(cwd, args, input, env);
  if (result.code !== 0) throw new GitError(args, result);
  return result.stdout;
}
