/**
 * A small typed wrapper around the `git` command line: one call runs one git command through `execFile` (no shell,
 * arguments passed as an array, never interpolated), with a fixed environment so output is parseable and no prompt can
 * block (`LC_ALL=C`, `GIT_TERMINAL_PROMPT=0`, no pager, no editor), a fixed committer identity, so commits work in
 * repositories whose user has none configured, and none of the `GIT_DIR`-like variables of the server's own
 * environment (a server started from a git hook must not aim every call at the hook's repository).
 *
 * Every call runs with `core.fsmonitor`, hooks and commit signing off (guarantee 16: nothing the orchestrator runs may
 * start a command a worker planted); callers that work in a worktree add the repository explicitly and the filter
 * overrides (worktree-git.ts). Input written to git's stdin never crashes the process: a git that exits before reading
 * it (EPIPE) fails that one call.
 *
 * It owns nothing and decides nothing: callers (git-workspace.ts) say what to run. It must never run a shell.
 */
import { nodeChildProcess } from "../system/node-builtins.js";

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
    super(`git ${commandName(args)} failed (exit ${result.code}): ${line}`);
  }
}

/** The subcommand and its first argument, skipping the global options (`-c k=v`, `--git-dir=…`) in front. */
function commandName(args: readonly string[]): string {
  let i = 0;
  while (i < args.length) {
    const arg = args[i] as string;
    if (arg === "-c") i += 2;
    else if (arg.startsWith("--") && arg.includes("=")) i += 1;
    else break;
  }
  return args.slice(i, i + 2).join(" ");
}

const ENV: Record<string, string> = {
  LC_ALL: "C",
  GIT_TERMINAL_PROMPT: "0",
  GIT_PAGER: "cat",
  GIT_EDITOR: "true",
  GIT_OPTIONAL_LOCKS: "0",
  GIT_AUTHOR_NAME: ORCHESTRATOR_IDENTITY.name,
  GIT_AUTHOR_EMAIL: ORCHESTRATOR_IDENTITY.email,
  GIT_COMMITTER_NAME: ORCHESTRATOR_IDENTITY.name,
  GIT_COMMITTER_EMAIL: ORCHESTRATOR_IDENTITY.email,
};

/** Variables that would aim git at another repository, index or object store than the one a call names. */
const REPOSITORY_ENV = [
  "GIT_DIR",
  "GIT_WORK_TREE",
  "GIT_INDEX_FILE",
  "GIT_COMMON_DIR",
  "GIT_OBJECT_DIRECTORY",
  "GIT_ALTERNATE_OBJECT_DIRECTORIES",
  "GIT_NAMESPACE",
  "GIT_CEILING_DIRECTORIES",
  "GIT_DISCOVERY_ACROSS_FILESYSTEM",
  "GIT_CONFIG",
  "GIT_CONFIG_PARAMETERS",
  "GIT_CONFIG_COUNT",
  "GIT_EXTERNAL_DIFF",
  "GIT_SSH_COMMAND",
];

/** `git -c …` options of every call: no fsmonitor, no hook, no signature, no automatic gc (guarantee 16). */
export const SAFE_CONFIG: readonly string[] = [
  "-c",
  "core.fsmonitor=false",
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "commit.gpgsign=false",
  "-c",
  "tag.gpgsign=false",
  "-c",
  "gc.auto=0",
  "-c",
  "maintenance.auto=false",
  "-c",
  "advice.detachedHead=false",
];

function childEnv(extra?: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of REPOSITORY_ENV) delete env[name];
  return { ...env, ...ENV, ...extra };
}

/**
 * Runs `git <SAFE_CONFIG> <args>` in `cwd` and resolves with its exit code and output; never rejects for a non-zero
 * exit (callers decide what an exit code means). Rejects only when git cannot be started at all. Output is capped at
 * 64 MiB. `input` is written to git's stdin; a git that exits before reading all of it resolves with a non-zero code
 * (at least 128) and a stderr saying so, never an unhandled `EPIPE`.
 */
export function runGit(
  cwd: string,
  args: readonly string[],
  input?: string,
  env?: Record<string, string>,
): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    let stdinError: NodeJS.ErrnoException | undefined;
    const child = nodeChildProcess().execFile(
      "git",
      [...SAFE_CONFIG, ...args],
      { cwd, env: childEnv(env), maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (err && typeof (err as NodeJS.ErrnoException).code === "string") {
          const code = (err as NodeJS.ErrnoException).code;
          if (code !== "EPIPE") {
            reject(new Error(`git could not be started: ${err.message}`));
            return;
          }
          stdinError ??= err as NodeJS.ErrnoException;
        }
        let code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        if (stdinError) {
          code = Math.max(code, 128);
          stderr = `${stderr}${stderr.endsWith("\n") || stderr === "" ? "" : "\n"}git exited before reading its input (${stdinError.code ?? stdinError.message}).\n`;
        }
        resolve({ code, stdout, stderr });
      },
    );
    // A git that exits early closes its stdin: the write fails with EPIPE on this stream, not in the process.
    child.stdin?.on("error", (error: NodeJS.ErrnoException) => {
      stdinError ??= error;
    });
    if (input !== undefined) child.stdin?.end(input);
    else child.stdin?.end();
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

/** A remote git call that was stopped at its deadline (`runRemoteGit`). */
export interface RemoteGitResult extends GitResult {
  /** Set when the call outlived its deadline and its process group was killed. */
  timedOut?: true;
}

/** Output kept per stream of a remote call: enough for porcelain push lines and error messages. */
const REMOTE_OUTPUT_CAP = 4 * 1024 * 1024;

/**
 * Runs `git <SAFE_CONFIG> <args>` that talks to a remote (clone, fetch, push, ls-remote) with a deadline: git runs
 * as the leader of its own process group (so the ssh, remote helper or upload-pack it starts are in it too), and
 * when it has not exited after `timeoutMs` the whole group is killed (SIGKILL) and the call resolves with
 * `timedOut: true`, code 124 and a stderr saying so (issue 33: a remote that accepts and never answers must not hang
 * a product). Never rejects for a non-zero exit; rejects only when git cannot be started. Each stream keeps its first
 * 4 MiB. Stdin is closed at once (no prompt can block: GIT_TERMINAL_PROMPT=0).
 */
export function runRemoteGit(cwd: string, args: readonly string[], timeoutMs: number): Promise<RemoteGitResult> {
  return new Promise((resolve, reject) => {
    const child = nodeChildProcess().spawn("git", [...SAFE_CONFIG, ...args], {
      cwd,
      env: childEnv(),
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const sizes = { out: 0, err: 0 };
    child.stdout.on("data", (b: Buffer) => {
      if (sizes.out < REMOTE_OUTPUT_CAP) out.push(b);
      sizes.out += b.length;
    });
    child.stderr.on("data", (b: Buffer) => {
      if (sizes.err < REMOTE_OUTPUT_CAP) err.push(b);
      sizes.err += b.length;
    });
    let timedOut = false;
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`git could not be started: ${error.message}`));
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      // Whatever git started and left behind (a helper that outlived it) goes with it.
      if (!timedOut) killGroup();
      const stderr = Buffer.concat(err).toString("utf8");
      if (timedOut)
        resolve({
          code: 124,
          stdout: Buffer.concat(out).toString("utf8"),
          stderr: `${stderr}${stderr === "" || stderr.endsWith("\n") ? "" : "\n"}no answer within ${timeoutMs} ms (git ${commandName(args).split(" ")[0] ?? ""} was stopped)\n`,
          timedOut: true,
        });
      else resolve({ code: code ?? 128, stdout: Buffer.concat(out).toString("utf8"), stderr });
    });
  });
}
