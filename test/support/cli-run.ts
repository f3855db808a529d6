/**
 * Test support: runs the built CLI (`dist/src/cli.js`) as a subprocess to completion and collects its output.
 * Asynchronous, so servers started by the same test keep being served meanwhile.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { CLI } from "./server-process.js";

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `node dist/src/cli.js ...args` in `cwd` with `env` added to the test's environment. */
export function runCli(args: string[], cwd: string, env: Record<string, string> = {}): Promise<CliResult> {
  return startCli(args, cwd, env).result;
}

/** `runCli`, with the child process itself (to signal it) beside the result it resolves with once it closed. */
export function startCli(
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): { child: ChildProcess; result: Promise<CliResult> } {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const result = new Promise<CliResult>((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
  return { child, result };
}
