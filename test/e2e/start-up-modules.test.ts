/**
 * What the built server loads and builds before it answers `initialize` (issue 16, cold start). `serve` runs from the
 * bundle `npm run build` makes (dist/bundle/, scripts/bundle.ts) and loads its own part of it only: not the other
 * commands (the operator views, `run`'s ACP client, check-host, the transcript recorder), not the ACP SDK adapters
 * (loaded when an agent first starts), not the PostgreSQL store (a `postgres://` store only), and none of the
 * compiled one-file-per-module tree (dist/src/) or of zod's and vscode-jsonrpc's files (they are in the bundle). Of
 * the schemas (protocol/lazy-schema.ts) it builds those that validating `initialize` params needs, and no result,
 * notification or record schema.
 *
 * A module resolve hook, registered with `node --import`, writes every module URL the process resolves to a file,
 * and the names of the schemas built once the process exits; the test reads both once the server answered
 * `initialize` and exited.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CLI, startRawServer, tempDir } from "../support/server-process.js";

/** The resolve hook: appends each resolved URL to the file named by START_UP_MODULES_LOG (hooks run off-thread). */
const HOOKS = `import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.START_UP_MODULES_LOG, result.url + "\\n");
  return result;
}`;
/**
 * Registers the hook, logs what CommonJS code `require`s (`cjs:` lines: Node 20's resolve hooks do not see it), and
 * on exit writes the built schemas' names (lazy-schema.ts publishes them) as one line.
 */
const REGISTER = `import { register, Module } from "node:module"; import { appendFileSync } from "node:fs";
register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)});
const load = Module._load;
Module._load = function (request, ...rest) {
  appendFileSync(process.env.START_UP_MODULES_LOG, "cjs:" + request + "\\n");
  return load.call(this, request, ...rest);
};
process.on("exit", () => appendFileSync(process.env.START_UP_MODULES_LOG, "schemas:" +
  JSON.stringify(globalThis[Symbol.for("acp-orchestrator.builtSchemas")] ?? null) + "\\n"));`;

/**
 * What `serve` loaded before it exited: module URLs in resolve order, what CommonJS modules required, and the names
 * of the schemas it built.
 */
interface StartUp {
  urls: string[];
  required: string[];
  schemas: string[] | null;
}

/** Runs `serve`, sends `initialize`, ends stdin once it is answered; resolves with what it loaded. */
async function startUp(): Promise<StartUp> {
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
  const lines = readFileSync(log, "utf8")
    .split("\n")
    .filter((line) => line !== "");
  const schemaLine = lines.find((line) => line.startsWith("schemas:"));
  return {
    urls: lines.filter((line) => !line.startsWith("schemas:") && !line.startsWith("cjs:")),
    required: lines.filter((line) => line.startsWith("cjs:")).map((line) => line.slice("cjs:".length)),
    schemas: schemaLine === undefined ? null : (JSON.parse(schemaLine.slice("schemas:".length)) as string[] | null),
  };
}

/** The schemas validating `initialize` params builds (and `Phase`, whose values the method table lists). */
const INITIALIZE_SCHEMAS = [
  "InitializeParams",
  "ProtocolVersion",
  "ClientCapabilities",
  "FileSystemCapabilities",
  "Implementation",
  "AcpMeta",
  "Id",
  "Phase",
];

describe("server start-up (issue 16, cold start)", () => {
  it("serve answers initialize from the bundle, without the ACP SDK, pg or the other commands' modules", async () => {
    const { urls } = await startUp();
    // The hook saw the server's own graph (a broken hook would make the assertions below vacuous).
    expect(urls.some((u) => u.endsWith("/dist/bundle/main.js"))).toBe(true);
    expect(urls.some((u) => u.endsWith("/dist/bundle/commands/serve.js"))).toBe(true);
    // Of the compiled tree only the executable, which chose the bundle.
    expect(urls.filter((u) => u.includes("/dist/src/") && !u.endsWith("/dist/src/cli.js"))).toEqual([]);
    const forbidden = [
      "/node_modules/@agentclientprotocol/sdk/",
      "/node_modules/pg/",
      "/node_modules/zod/",
      "/node_modules/vscode-jsonrpc/",
      "/node_modules/pino/",
      "/dist/bundle/commands/index.js",
      "/dist/bundle/demo.js",
      "/dist/bundle/adapters/agents/acp-worker.js",
      "/dist/bundle/adapters/agents/leader-resolver.js",
      "/dist/bundle/adapters/persistence/postgres-authority.js",
    ];
    expect(urls.filter((u) => forbidden.some((f) => u.includes(f)))).toEqual([]);
  }, 60_000);

  it("serve opens its SQLite state file without better-sqlite3's addon search (the bindings package)", async () => {
    const { urls, required } = await startUp();
    expect(urls.some((u) => u.includes("/node_modules/better-sqlite3/"))).toBe(true);
    // The CommonJS log works: better-sqlite3's own modules are in it.
    expect(required).toContain("./database");
    expect(required.filter((r) => r === "bindings" || r.includes("/bindings/"))).toEqual([]);
  }, 60_000);

  it("serve builds only the schemas that validating initialize params needs", async () => {
    const { schemas } = await startUp();
    expect(schemas).not.toBeNull();
    expect(schemas).toContain("InitializeParams");
    expect(schemas!.filter((name) => !INITIALIZE_SCHEMAS.includes(name))).toEqual([]);
  }, 60_000);

  it("the bundled server's params errors carry zod's English messages", async () => {
    // zod sets its locale as a side effect of its entry module, which a bundler drops (zod declares no side
    // effects); protocol/lazy-schema.ts sets it. Without it the issue would read "Invalid input" only.
    const server = startRawServer();
    server.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "one" } });
    const answer = (await server.next((m) => m.id === 1)) as { error?: { code: number; data?: { issues?: unknown } } };
    expect(answer.error?.code).toBe(-32602);
    expect(answer.error?.data?.issues).toEqual([
      { path: ["protocolVersion"], message: "Invalid input: expected number, received string" },
    ]);
    server.child.stdin.end();
  }, 60_000);
});
