/**
 * Benchmark support: where things are. The benchmark runs compiled (`tsc -p test/bench/tsconfig.json` writes
 * `dist/bench/`), so every process it starts — the server, the echo floor, the fixture agent, the scale cases — is
 * plain `node` on JavaScript, with no TypeScript loader in its time or memory.
 *
 * Owns path resolution only; never touches the filesystem except to find the repository root.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** The repository root: the nearest folder upwards holding the `acp-orchestrator` package.json. */
export const REPO_ROOT: string = (() => {
  let dir = import.meta.dirname;
  for (;;) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, "utf8")) as { name?: string }).name === "acp-orchestrator") {
      return dir;
    }
    const up = dirname(dir);
    if (up === dir) throw new Error("cannot find the acp-orchestrator repository root");
    dir = up;
  }
})();

/** The built server (`npm run build`). */
export const SERVER_CLI = join(REPO_ROOT, "dist", "src", "cli.js");

/** The compiled benchmark folder (`dist/bench/test/bench`); `.js` siblings of this module's folder. */
export const BENCH_DIR = dirname(import.meta.dirname);

/** True when this code runs compiled (from `dist/bench`), as `npm run bench` runs it. */
export const COMPILED = import.meta.url.endsWith(".js");

/** A compiled benchmark script by its path under test/bench without extension, e.g. `echo-server`. */
export function benchScript(name: string): string {
  return join(BENCH_DIR, `${name}.js`);
}

/**
 * Extra `node` flags for the server processes the benchmark starts, from `BENCH_SERVER_NODE_ARGS` (space-separated),
 * e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the server under a figure's load. Empty by default.
 */
export function serverNodeArgs(): string[] {
  return (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter((a) => a !== "");
}
