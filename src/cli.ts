#!/usr/bin/env node
/**
 * The executable (`bin`; what an IDE or an agent host spawns): runs the command dispatcher (src/main.ts).
 *
 * Compiled, it loads the dispatcher from the bundle `npm run build` makes (dist/bundle/main.js, scripts/bundle.ts):
 * one file for most of the modules instead of about 150 files through Node's module loader (issue 16, cold start).
 * When that bundle is missing or older than the compiled dispatcher beside this file (a `tsc` run without the bundle
 * step), it runs the compiled modules unbundled instead, so a stale bundle never runs. From sources (tsx) it runs
 * src/main.ts. Owns that choice only; must never do anything else before the dispatcher runs.
 */
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { runCli } from "./main.js";

/** The compiled dispatcher's bundle, relative to this file; a `string` so that tsc does not look for it. */
const BUNDLED_MAIN: string = "../bundle/main.js";

/** Modification time of `url`'s file in ms, or undefined when it does not exist. */
function modifiedMs(url: URL): number | undefined {
  return statSync(fileURLToPath(url), { throwIfNoEntry: false })?.mtimeMs;
}

/** The dispatcher module to run: the bundle when it is at least as new as the compiled dispatcher, else main.js. */
function dispatcherUrl(): URL {
  const unbundled = new URL("./main.js", import.meta.url);
  if (import.meta.url.endsWith(".ts")) return unbundled; // tsx maps ./main.js to main.ts
  const bundled = new URL(BUNDLED_MAIN, import.meta.url);
  const bundledAt = modifiedMs(bundled);
  const compiledAt = modifiedMs(unbundled);
  return bundledAt !== undefined && (compiledAt === undefined || bundledAt >= compiledAt) ? bundled : unbundled;
}

const dispatcher = (await import(dispatcherUrl().href)) as { runCli: typeof runCli };
await dispatcher.runCli(process.argv.slice(2));
