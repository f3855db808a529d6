/**
 * What the built server loads before it answers `initialize` (issue 16, cold start): `serve` imports its own module
 * graph only. The other commands (the operator views, `run`'s ACP client, check-host, the transcript recorder), the
 * ACP SDK (loaded when an agent first starts) and pg (a `postgres://` store only) must not be on the start-up path.
 *
 * A module resolve hook, registered with `node --import`, writes every module URL the process resolves to a file;
 * the test reads it once the server answered `initialize` and exited.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CLI, tempDir } from "../support/server-process.js";

/** The resolve hook: appends each resolved URL to the file named by START_UP_MODULES_LOG (hooks run off-thread). */
const HOOKS = `import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.START_UP_MODULES_LOG, result.url + "\\n");
  return result;
}`;
const REGISTER = `import { register } from "node:module"; register(${JSON.stringify(
  `data:text/javascript,${encodeURIComponent(HOOKS)}`,
)});`;

/** Runs `serve`, sends `initialize`, ends stdin once it is answered; resolves with the URLs it loaded. */
async function modulesLoadedByServe(): Promise<string[]> {
  const dir = tempDir("acp-orch-start-up-");
  const log = join(dir, "modules.txt");
  const child = spawn(
    process.execPath,
    ["--import", `data:text/javascript,${encodeURIComponent(REGISTER)}`, CLI, "serve", "--state", join(dir, "s.db")],
    { cwd: dir, env: { ...process.env, START_UP_MODULES_LOG: log }, stdio: ["pipe", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const answered = new Promise<string>((resolve) => {
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d: string) => {
      out += d;
      if (out.includes("\n")) resolve(out);
    });
  });
  child.stdin.write(
    `${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } })}\n`,
  );
  const first = JSON.parse((await answered).split("\n")[0] as string) as { id: number; result?: unknown };
  expect(first.id).toBe(1);
  expect(first.result).toBeDefined();
  child.stdin.end();
  expect(await exited, stderr).toBe(0);
  return readFileSync(log, "utf8")
    .split("\n")
    .filter((line) => line !== "");
}

describe("server start-up (issue 16, cold start)", () => {
  it("serve answers initialize without loading the ACP SDK, pg or the other commands' modules", async () => {
    const urls = await modulesLoadedByServe();
    // The hook saw the server's own graph (a broken hook would make the assertions below vacuous).
    expect(urls.some((u) => u.endsWith("/dist/src/commands/serve.js"))).toBe(true);
    expect(urls.some((u) => u.endsWith("/dist/src/server/server.js"))).toBe(true);
    const forbidden = [
      "/node_modules/@agentclientprotocol/sdk/",
      "/node_modules/pg/",
      "/dist/src/commands/index.js",
      "/dist/src/commands/run.js",
      "/dist/src/commands/check-agents.js",
      "/dist/src/operator/",
      "/dist/src/transcripts/",
      "/dist/src/host-kit/",
      "/dist/src/adapters/agents/acp-worker.js",
      "/dist/src/adapters/agents/acp-leader.js",
    ];
    expect(urls.filter((u) => forbidden.some((f) => u.includes(f)))).toEqual([]);
  }, 60_000);
});
