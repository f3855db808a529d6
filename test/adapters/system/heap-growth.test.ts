/**
 * `limitHeapGrowth` (issue 16, memory): with the growth bounded, a process that holds a steady live set while it
 * churns through long-lived garbage peaks close to the live set; with V8's own rule the same work peaks far above it.
 * Each case runs in its own process (the setting applies to the whole process), with the same workload.
 */
import { describe, expect, it } from "vitest";
import { runTsxSource } from "../../support/tsx-child.js";
import { startRawServer } from "../../support/server-process.js";
import { limitHeapGrowth } from "../../../src/adapters/system/heap-growth.js";

// Holds about 40 MB of small objects, then replaces the oldest of a 150,000-object window 2 million times: every
// object lives long enough to reach the old generation, so only full collections free them. Prints the live set after
// a forced full collection and the largest heap size seen.
const WORKLOAD = `
import { getHeapStatistics } from "node:v8";
const [modulePath, percent] = process.argv.slice(1);
const { limitHeapGrowth } = await import(modulePath);
if (percent !== "default") limitHeapGrowth(Number(percent));
const kept = [];
for (let i = 0; i < 400_000; i += 1) kept.push({ id: "k" + i, n: i, list: [i, i + 1] });
const window = new Array(150_000);
let peak = 0;
for (let i = 0; i < 2_000_000; i += 1) {
  window[i % window.length] = { id: "g" + i, n: i, list: [i] };
  if (i % 5_000 === 0) peak = Math.max(peak, getHeapStatistics().total_heap_size);
}
window.fill(undefined);
globalThis.gc();
const live = getHeapStatistics().used_heap_size;
process.stdout.write(JSON.stringify({ peakMb: peak / 1048576, liveMb: live / 1048576, kept: kept.length }));
`;

const MODULE = new URL("../../../src/adapters/system/heap-growth.ts", import.meta.url).href;

async function peakOf(percent: string): Promise<{ peakMb: number; liveMb: number }> {
  const out = await runTsxSource(WORKLOAD, [MODULE, percent], ["--expose-gc"]);
  return JSON.parse(out) as { peakMb: number; liveMb: number };
}

describe("limitHeapGrowth", () => {
  it("keeps a churning process's heap near its live set, where V8's own rule lets it grow far past it", async () => {
    const bounded = await peakOf("25");
    const own = await peakOf("default");
    expect(bounded.liveMb).toBeGreaterThan(30);
    expect(bounded.peakMb).toBeLessThan(own.peakMb * 0.8);
    expect(own.peakMb).toBeGreaterThan(bounded.liveMb * 2);
  }, 120_000);

  it("refuses a growth that is not a whole percentage of at least 0", () => {
    expect(() => limitHeapGrowth(-1)).toThrow(RangeError);
    expect(() => limitHeapGrowth(1.5)).toThrow(RangeError);
  });
});

describe("serve --heap-growth-percent", () => {
  it("refuses to start with a value that is not an integer of at least 0", async () => {
    const raw = startRawServer({ args: ["--heap-growth-percent", "-5"] });
    expect(await raw.close()).toBe(2);
    expect(raw.stderr()).toContain(
      'The value "-5" from --heap-growth-percent must be an integer of at least 0 percent.',
    );
  });
});
