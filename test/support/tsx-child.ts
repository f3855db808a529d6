/**
 * Runs an ES module's source in a fresh `node` process with the tsx loader (so it can import the TypeScript sources),
 * from the repository root, and resolves with what it printed on stdout; rejects with its stderr when it exits
 * non-zero. For tests that need a process of their own: another SQLite connection, a small heap to snapshot.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** `source` sees `args` as `process.argv.slice(1)`; `nodeArgs` go to `node` itself (e.g. `--expose-gc`). */
export function runTsxSource(
  source: string,
  args: readonly string[],
  nodeArgs: readonly string[] = [],
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...nodeArgs, "--import", "tsx", "--input-type=module", "-e", source, ...args],
      {
        cwd: REPO_ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`child exited with ${code}: ${stderr}`)),
    );
  });
}
