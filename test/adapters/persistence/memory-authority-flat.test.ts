// The memory authority keeps every event's JSON text for the life of the process; V8 returns a longer
// `JSON.stringify` result as a tree of concatenated parts, so the store must flatten what it keeps (issue 16: the
// trees made a 50,000-task run's heap 30 % larger). Counted in a child process (a small heap of its own) from two
// heap snapshots, before and after 4,000 appends: the concatenation nodes still live must not grow with the events.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const MODULE_PATH = fileURLToPath(new URL("../../../src/adapters/persistence/memory-authority.ts", import.meta.url));
const REPO_ROOT = fileURLToPath(new URL("../../..", import.meta.url));

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

const authority = new MemoryAuthority();
const before = await consStrings();
for (let i = 0; i < Number(count); i += 1) {
  const event = {
    v: 1,
    at: new Date(1_700_000_000_000 + i).toISOString(),
    type: "task",
    task: { taskId: "t" + i, title: "Task " + i, description: "Do thing " + i, output: "done t" + i, attempts: 1 },
  };
  await authority.appendEvents("p", "s", [event], i);
}
const after = await consStrings();
const read = await authority.readEvents("p", "s", 0);
process.stdout.write(JSON.stringify({ before, after, read: read.length, last: read.at(-1).event.task.output }));
`;

function runChild(count: number): Promise<{ before: number; after: number; read: number; last: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", CHILD_SOURCE, MODULE_PATH, String(count)],
      { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(JSON.parse(stdout)) : reject(new Error(`child exited with ${code}: ${stderr}`)),
    );
  });
}

describe("MemoryAuthority event texts", () => {
  it("keeps flat texts: 4,000 stored events leave no concatenation trees behind", async () => {
    const result = await runChild(4000);
    expect(result.read).toBe(4000);
    expect(result.last).toBe("done t3999");
    // Without flattening, every stored text keeps at least one concatenation node (4,000 or more).
    expect(result.after - result.before).toBeLessThan(400);
  }, 60_000);
});
