/**
 * What the built server loads and builds before it answers `initialize` (issues 16 and 34, cold start). `serve` runs
 * from the one CommonJS bundle `npm run build` makes (dist/bundle/main.cjs, scripts/bundle.ts), compiled with the V8
 * code cache the build wrote (src/code-cache.ts): no ES module but the executable and that loader, none of the
 * compiled one-file-per-module tree (dist/src/), and of the packages left outside the bundle only better-sqlite3 (pg
 * and dagre are required on first use; the ACP SDK, the other commands and the adapters are in the bundle, each in a
 * wrapper that esbuild runs on first use). Of the schemas (protocol/lazy-schema.ts) it builds those that validating
 * `initialize` params needs, and no result, notification or record schema.
 *
 * A module resolve hook, registered with `node --import`, writes every module URL the process resolves to a file,
 * a patched `Module._load` every CommonJS `require`, and on exit the names of the schemas built and what became of
 * the code cache; the test reads them once the server answered `initialize` and exited.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { pathToFileURL } from "node:url";
import { CLI, startRawServer, tempDir } from "../support/server-process.js";

/** The ES modules a start of the built executable loads: itself and the bundle's loader (src/code-cache.ts). */
const CLI_URL = pathToFileURL(CLI).href;
const CODE_CACHE_URL = new URL("./code-cache.js", CLI_URL).href;

/** The resolve hook: appends each resolved URL to the file named by START_UP_MODULES_LOG (hooks run off-thread). */
const HOOKS = `import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.START_UP_MODULES_LOG, result.url + "\\n");
  return result;
}`;
/**
 * Registers the hook, logs what CommonJS code `require`s (`cjs:` lines: Node 20's resolve hooks do not see it) and
 * the first write to stdout (`answered`: the answer to `initialize`), and on exit writes the built schemas' names
 * (lazy-schema.ts publishes them) as one line.
 */
const REGISTER = `import { register, Module } from "node:module"; import { appendFileSync } from "node:fs";
register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)});
const load = Module._load;
Module._load = function (request, ...rest) {
  appendFileSync(process.env.START_UP_MODULES_LOG, "cjs:" + request + "\\n");
  return load.call(this, request, ...rest);
};
const write = process.stdout.write;
process.stdout.write = function (...args) {
  if (!globalThis.__answered) appendFileSync(process.env.START_UP_MODULES_LOG, "answered\\n");
  globalThis.__answered = true;
  return write.apply(this, args);
};
process.on("exit", () => appendFileSync(process.env.START_UP_MODULES_LOG, "schemas:" +
  JSON.stringify(globalThis[Symbol.for("acp-orchestrator.builtSchemas")] ?? null) + "\\n" + "codeCache:" +
  String(globalThis[Symbol.for("acp-orchestrator.codeCache")]) + "\\n"));`;

/**
 * What `serve` loaded before it exited: module URLs in resolve order, what CommonJS modules required, and the names
 * of the schemas it built.
 */
interface StartUp {
  urls: string[];
  required: string[];
  /** What CommonJS code required before the answer to `initialize` was written. */
  requiredBeforeAnswer: string[];
  schemas: string[] | null;
  /** What became of the bundle's code cache (src/code-cache.ts, CodeCacheState). */
  codeCache: string | undefined;
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
  const tagged = (line: string) =>
    ["schemas:", "cjs:", "codeCache:"].some((tag) => line.startsWith(tag)) || line === "answered";
  const answeredAt = lines.indexOf("answered");
  expect(answeredAt).toBeGreaterThan(0);
  return {
    requiredBeforeAnswer: lines
      .slice(0, answeredAt)
      .filter((line) => line.startsWith("cjs:"))
      .map((line) => line.slice("cjs:".length)),
    codeCache: lines.find((line) => line.startsWith("codeCache:"))?.slice("codeCache:".length),
    urls: lines.filter((line) => !tagged(line)),
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
  it("serve answers initialize from the bundle with its code cache, without pg, dagre or the compiled modules", async () => {
    const { urls, required, codeCache } = await startUp();
    // Of the ES modules only the executable and its bundle loader; the rest is the one CommonJS bundle.
    expect(urls.filter((u) => u.startsWith("file:"))).toEqual([CLI_URL, CODE_CACHE_URL]);
    // V8 took the code cache the build's training run wrote (same Node, same flags).
    expect(codeCache).toBe("accepted");
    // The CommonJS log works (the bundle requires Node's built-ins through it), and names no lazy package.
    expect(required).toContain("node:fs");
    expect(required.filter((r) => /^(pg|pg-.*|@dagrejs\/dagre|@agentclientprotocol\/sdk)$/.test(r))).toEqual([]);
  }, 60_000);

  it("the bundle is ASCII only, so V8 holds its source as a one-byte string (issue 34, scripts/bundle.ts)", () => {
    const bundle = readFileSync(join(dirname(dirname(CLI)), "bundle", "main.cjs"));
    expect(bundle.length).toBeGreaterThan(100_000);
    expect(bundle.findIndex((byte) => byte > 0x7f)).toBe(-1);
  });

  it("serve answers initialize before it loads better-sqlite3, crypto, child_process, assert, worker_threads or v8, then opens its state file (issue 34)", async () => {
    const { required, requiredBeforeAnswer } = await startUp();
    expect(requiredBeforeAnswer).toContain("node:fs");
    expect(requiredBeforeAnswer.filter((r) => r === "better-sqlite3" || r === "./database")).toEqual([]);
    // Nor crypto or child_process (adapters/system/node-builtins.ts, scripts/bundle.ts LAZY_REQUIRES).
    expect(requiredBeforeAnswer.filter((r) => /^(node:)?(crypto|child_process)$/.test(r))).toEqual([]);
    // Nor what pino and sonic-boom require for code the server never runs there (scripts/bundle.ts LAZY_REQUIRES),
    // nor node:v8 (serve bounds the heap growth after the answer).
    expect(requiredBeforeAnswer.filter((r) => /^(node:)?(assert|worker_threads|v8)$/.test(r))).toEqual([]);
    expect(required).toContain("better-sqlite3");
    // The default heap growth bound is still set, after the answer (node:v8 is loaded only to set it; heap-growth.ts).
    expect(required).toContain("node:v8");
  }, 60_000);

  it("serve opens its SQLite state file without better-sqlite3's addon search (the bindings package)", async () => {
    const { required } = await startUp();
    expect(required).toContain("better-sqlite3");
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
