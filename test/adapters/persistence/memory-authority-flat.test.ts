// The memory authority keeps every event's JSON text for the life of the process; V8 returns a longer
// `JSON.stringify` result as a tree of concatenated parts, so the store must flatten what it keeps (issue 16: the
// trees made a 50,000-task run's heap 30 % larger). Counted in a child process (a small heap of its own) from heap
// snapshots around 4,000 appends and around the same 4,000 texts kept as JSON.stringify returns them: a relative
// measure, since how many emptied wrappers of flattened strings a collection leaves depends on the collector.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runTsxSource } from "../../support/tsx-child.js";

const MODULE_PATH = fileURLToPath(new URL("../../../src/adapters/persistence/memory-authority.ts", import.meta.url));

const CHILD_SOURCE = `
import { getHeapSnapshot } from "node:v8";
const [modulePath, count] = process.argv.slice(1);
const { MemoryAuthority } = await import(modulePath);

/** Live nodes of type "concatenated string" in a heap snapshot (taking one collects garbage first). */
async function consStrings() {
  let text = "";
  for await (const chunk of getHeapSnapshot()) text += chunk;
  const snap = JSON.parse(text);
  const meta = snap.snapshot.meta;
  const width = meta.node_fields.length;
  const typeField = meta.node_fields.indexOf("type");
  const cons = meta.node_types[0].indexOf("concatenated string");
  let n = 0;
  for (let i = 0; i < snap.nodes.length; i += width) if (snap.nodes[i + typeField] === cons) n += 1;
  return n;
}

const makeEvent = (i) => ({
  v: 1,
  at: new Date(1_700_000_000_000 + i).toISOString(),
  type: "task",
  task: { taskId: "t" + i, title: "Task " + i, description: "Do thing " + i, output: "done t" + i, attempts: 1 },
});
const authority = new MemoryAuthority();
const before = await consStrings();
for (let i = 0; i < Number(count); i += 1) await authority.appendEvents("p", "s", [makeEvent(i)], i);
const stored = await consStrings();
// The baseline, in the same process under the same collector: the same texts kept as JSON.stringify returns them.
const kept = [];
for (let i = 0; i < Number(count); i += 1) kept.push(JSON.stringify(makeEvent(i)));
const baseline = await consStrings();
const read = await authority.readEvents("p", "s", 0);
process.stdout.write(JSON.stringify({
  stored: stored - before,
  baseline: baseline - stored,
  kept: kept.length,
  read: read.length,
  last: read.at(-1).event.task.output,
}));
`;

async function runChild(
  count: number,
): Promise<{ stored: number; baseline: number; kept: number; read: number; last: string }> {
  return JSON.parse(await runTsxSource(CHILD_SOURCE, [MODULE_PATH, String(count)]));
}

describe("MemoryAuthority event texts", () => {
  it("keeps flat texts: far fewer concatenation nodes stay live than for the same texts kept unflattened", async () => {
    const result = await runChild(4000);
    expect(result.read).toBe(4000);
    expect(result.last).toBe("done t3999");
    expect(result.kept).toBe(4000);
    // The baseline shows the texts come back from JSON.stringify as trees (at least one node each), so the
    // comparison is not vacuous. A flattened text leaves at most the emptied wrapper V8 flattens it into, until a
    // collection drops it: at most one node per text against the baseline's two or more (without the change the two
    // counts are equal).
    expect(result.baseline).toBeGreaterThanOrEqual(4000);
    expect(result.stored).toBeLessThanOrEqual(result.baseline * 0.6);
  }, 60_000);
});
