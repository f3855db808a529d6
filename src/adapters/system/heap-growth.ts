/**
 * How far the JavaScript heap may grow past what the last full garbage collection kept (issue 16, memory). V8 lets
 * the old generation grow to up to 4 times the surviving size before its next full collection when the heap limit is
 * large (a machine with a few GB of memory), so a long run's peak RSS follows the garbage V8 allows, not what the
 * server holds: at 50,000 tasks the live set is 75-145 MB and the peak was 310-350 MB. Bounding the growth keeps the
 * peak close to the live set, at the price of more frequent (incremental, mostly concurrent) full collections.
 *
 * Owns this one setting of the process. Uses V8's `--heap-growing-percent`, which V8 reads each time it sets the
 * next collection's limit, so it takes effect from the next full collection when set after start. `node:v8` is loaded
 * only to set a flag (issue 34, cold start: it loads five more built-ins).
 */
import { nodeV8 } from "./node-builtins.js";

/**
 * What `serve` uses unless told otherwise: the old generation may grow by 30 % of what survived the last full
 * collection, the factor V8 itself uses when it saves memory. Measured at 50,000 tasks (findings.md,
 * change 22, in test/bench's git history): peak RSS 355/323 MB (memory/SQLite store) with V8's own rule, 295/263 MB
 * at 100, 269-282/234-240 MB at 50, 250-255/226-228 MB at 30; run times within the machine's noise.
 */
export const DEFAULT_HEAP_GROWTH_PERCENT = 30;

/**
 * Bounds the heap's growth between full collections to `percent` % of the surviving size (`1 + percent/100`
 * times it). 0 restores V8's own rule, and sets no flag at all while none was set before: a V8 flag set at run
 * time changes the flag hash V8 stamps on a code cache, which the build's training run must not (src/code-cache.ts).
 * Applies to the whole process; meant to be called once, at start (serve: right after its first answer). Throws `RangeError` for anything but a safe
 * integer >= 0.
 */
export function limitHeapGrowth(percent: number): void {
  if (!Number.isSafeInteger(percent) || percent < 0) {
    throw new RangeError(`The heap growth must be an integer percentage of at least 0, not ${String(percent)}.`);
  }
  if (percent === 0 && !flagSet) return; // V8's own rule is already in force
  nodeV8().setFlagsFromString(`--heap-growing-percent=${percent}`);
  flagSet = true;
}

/** Whether this process has set `--heap-growing-percent` (limitHeapGrowth). */
let flagSet = false;
