#!/usr/bin/env node
/**
 * The executable (`bin`; what an IDE or an agent host spawns): runs the command dispatcher (src/main.ts).
 *
 * Compiled, it runs the dispatcher from the bundle `npm run build` makes (dist/bundle/main.cjs, scripts/bundle.ts):
 * one CommonJS file instead of about 150 modules through Node's module loader (issue 16), compiled with the V8 code
 * cache the build wrote beside it (src/code-cache.ts; issue 34, cold start). When that bundle is missing or older than
 * the compiled dispatcher beside this file (a `tsc` run without the bundle step), it runs the compiled modules
 * unbundled instead, so a stale bundle never runs. From sources (tsx) it runs src/main.ts. Owns that choice only;
 * must never do anything else before the dispatcher runs.
 */
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { runBundle } from "./code-cache.js";
import type { runCli } from "./main.js";

type Dispatcher = { runCli: typeof runCli };

/** Modification time of `url`'s file in ms, or undefined when it does not exist. */
function modifiedMs(url: URL): number | undefined {
  return statSync(fileURLToPath(url), { throwIfNoEntry: false })?.mtimeMs;
}

/** The dispatcher: the bundle when it is at least as new as the compiled dispatcher, else main.js (or main.ts). */
async function dispatcher(): Promise<Dispatcher> {
  const unbundled = new URL("./main.js", import.meta.url);
  if (import.meta.url.endsWith(".ts")) return (await import(unbundled.href)) as Dispatcher; // tsx maps it to main.ts
  const bundled = new URL("../bundle/main.cjs", import.meta.url);
  const bundledAt = modifiedMs(bundled);
  const compiledAt = modifiedMs(unbundled);
  if (bundledAt !== undefined && (compiledAt === undefined || bundledAt >= compiledAt)) {
    return runBundle(fileURLToPath(bundled)) as Dispatcher;
  }
  return (await import(unbundled.href)) as Dispatcher;
}

await (await dispatcher()).runCli(process.argv.slice(2));
