import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NdjsonProcess } from "./support/ndjson-process.js";
import { REPO_ROOT, benchScript } from "./support/paths.js";
import { INITIALIZE_PARAMS, pipelined } from "./overhead.js";
import { processMemoryMb } from "./support/stats.js";
const clis = { old: join(REPO_ROOT, "dist/ab-old/src/cli.js"), new: join(REPO_ROOT, "dist/src/cli.js") };
async function pipe(cli: string) {
  const dir = mkdtempSync(join(tmpdir(), "ab-"));
  let ready: () => void = () => undefined; const planReady = new Promise<void>((r) => (ready = r));
  const p = new NdjsonProcess({ command: process.execPath, args: [cli, "serve", "--state", join(dir, "s.db")], cwd: dir, onNotification: (m) => { if (m === "product.planReady") ready(); } });
  await p.request("initialize", INITIALIZE_PARAMS);
  const { productId } = await p.request<{ productId: string }>("product.plan", { goal: "Write a short README for a command-line tool, then add a usage example and a changelog.", cwd: dir });
  await planReady;
  await pipelined(p, "product.status", { productId }, 1000);
  const r = await pipelined(p, "product.status", { productId }, 5000);
  await p.close();
  return r.perSecond;
}
async function stream(cli: string, chunks: number) {
  const dir = mkdtempSync(join(tmpdir(), "ab-"));
  writeFileSync(join(dir, "acp-orchestrator.json"), JSON.stringify({ agents: [{ agentId: "streamer", command: process.execPath, args: [benchScript("fixtures/streaming-agent")], env: { BENCH_CHUNKS: String(chunks) } }] }));
  let n = 0; let ready: () => void = () => undefined; let done: () => void = () => undefined;
  const planReady = new Promise<void>((r) => (ready = r)); const completed = new Promise<void>((r) => (done = r));
  const p = new NdjsonProcess({ command: process.execPath, args: [cli, "serve", "--state", join(dir, "s.db")], cwd: dir, onNotification: (m) => { if (m === "product.taskOutputDelta") n++; else if (m === "product.planReady") ready(); else if (m === "product.completed") done(); } });
  await p.request("initialize", INITIALIZE_PARAMS);
  const { productId } = await p.request<{ productId: string }>("product.plan", { goal: "Stream.", cwd: dir });
  await planReady;
  const t0 = performance.now();
  await p.request("product.confirm", { productId, instances: [{ instanceId: "s1", agentId: "streamer", role: "worker" }], tasks: [{ taskId: "s", title: "S", description: "S", instanceId: "s1", dependsOn: [] }] });
  await completed;
  const ms = performance.now() - t0; const peak = processMemoryMb(p.pid)?.peakMb;
  await p.close();
  return `${(n / ms * 1000).toFixed(0)}/s peak ${peak?.toFixed(0)}MB`;
}
for (let i = 0; i < 3; i++) for (const [k, cli] of Object.entries(clis)) console.log(k, "pipelined/s", (await pipe(cli)).toFixed(0));
for (let i = 0; i < 2; i++) for (const [k, cli] of Object.entries(clis)) console.log(k, "stream 50k", await stream(cli, 50000));
