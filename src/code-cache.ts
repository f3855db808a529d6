/**
 * Runs the bundle `npm run build` makes (dist/bundle/main.cjs, scripts/bundle.ts) with the V8 code cache the build's
 * training run wrote beside it (issue 34, cold start): with the cache V8 neither parses the bundle nor compiles the
 * functions a start of `serve` runs up to `initialize`; it deserialises them. Node 20 has no compile cache for modules
 * (`module.enableCompileCache` is Node 22), so the bundle is one CommonJS file compiled through `vm.Script`, which takes
 * `cachedData`.
 *
 * V8 checks a cache against its own version, its flags and the source's length, and ignores it (`rejected`) when one
 * differs: the bundle then compiles from source, as without a cache. The length check cannot tell two builds of the
 * same length apart, so a cache older than its bundle is never given to V8 (the build removes dist/bundle/ whole, then
 * writes the bundle, then the cache).
 *
 * Owns loading the bundle and the cache only; never writes a file except the cache, and that only when the training
 * run asks for it through CODE_CACHE_OUT_ENV. Imported by the executable (src/cli.ts) before anything else, so it
 * imports nothing but Node's built-ins.
 */
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { Script } from "node:vm";

/**
 * Set by the build's training run only (scripts/bundle.ts) to the file the code cache is written to when the process
 * exits; a run with it set reads no cache.
 */
export const CODE_CACHE_OUT_ENV = "ACP_ORCHESTRATOR_CODE_CACHE_OUT";

/**
 * What became of the code cache in this process: `accepted` by V8, `rejected` (another Node version or other V8
 * flags: compiled from source), `absent` (none, or older than the bundle), `training` (being written). Published on
 * `globalThis[CODE_CACHE_STATE]` for test/e2e/start-up-modules.test.ts.
 */
export type CodeCacheState = "accepted" | "rejected" | "absent" | "training";

/** The global symbol under which the state of this process's code cache is published. */
export const CODE_CACHE_STATE = Symbol.for("acp-orchestrator.codeCache");

/** Modification time of `file` in ms, or undefined when it does not exist. */
function modifiedMs(file: string): number | undefined {
  return statSync(file, { throwIfNoEntry: false })?.mtimeMs;
}

/** The cache for `bundle` when it exists and is at least as new as the bundle, else undefined. */
function freshCache(bundle: string, cache: string): Buffer | undefined {
  const cachedAt = modifiedMs(cache);
  const bundledAt = modifiedMs(bundle);
  if (cachedAt === undefined || bundledAt === undefined || cachedAt < bundledAt) return undefined;
  return readFileSync(cache);
}

/**
 * Evaluates the CommonJS bundle at `bundle` (an absolute path) with the code cache `${bundle}.cache` when there is a
 * fresh one, and returns its `module.exports`. Throws what reading or evaluating the bundle throws. With
 * CODE_CACHE_OUT_ENV set it reads no cache and writes one to that file when the process exits (the training run).
 */
export function runBundle(bundle: string): unknown {
  const out = process.env[CODE_CACHE_OUT_ENV];
  const cachedData = out ? undefined : freshCache(bundle, `${bundle}.cache`);
  // Latin-1, not UTF-8: the bundle is ASCII only (scripts/bundle.ts asciiOnly), where both read the same text, and
  // Latin-1 makes the one-byte string without decoding (issue 34, cold start: about 4 ms of CPU less per start).
  const source = readFileSync(bundle, "latin1");
  // Node's own CommonJS wrapper, so that the bundle sees what a required file sees.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: bundle,
    ...(cachedData !== undefined ? { cachedData } : {}),
  });
  const state: CodeCacheState = out
    ? "training"
    : cachedData === undefined
      ? "absent"
      : script.cachedDataRejected
        ? "rejected"
        : "accepted";
  (globalThis as Record<symbol, unknown>)[CODE_CACHE_STATE] = state;
  const wrapper = script.runInThisContext() as (...args: unknown[]) => void;
  const module = { exports: {} as unknown };
  wrapper.call(module.exports, module.exports, createRequire(bundle), module, bundle, dirname(bundle));
  // On exit: the cache then holds every function the run compiled, those up to `initialize` among them.
  if (out) process.once("exit", () => writeFileSync(out, script.createCachedData()));
  return module.exports;
}
