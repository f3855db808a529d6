/**
 * Test support: the scripted ACP agent (test/fixtures/agents/scripted-agent.ts) as a plain ESM program for `node`.
 *
 * Through the tsx loader every start of the agent costs about 0.7 s of CPU and 1.1-1.5 s of wall time on this 2-core
 * machine, against 0.3 s and 0.7 s for the same program already transpiled; the suite starts it several hundred
 * times (a leader and a worker per product of most e2e, operator and dashboard tests). It is the same agent: esbuild
 * only strips the types (no bundling), and its one bare import, the ACP SDK, is rewritten to the SDK's absolute URL
 * as resolved from this checkout, so the program runs from any directory.
 *
 * The program is written once per content (a hash of the source, the SDK's URL and esbuild's version names the
 * folder under the OS temp dir), atomically (a temp name, then rename), so concurrent test files share it.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { transformSync, version as esbuildVersion } from "esbuild";

const SOURCE = fileURLToPath(new URL("../fixtures/agents/scripted-agent.ts", import.meta.url));

/** Returns the path of the transpiled scripted agent (`…/scripted-agent.mjs`), writing it when absent. */
function scriptedAgentProgram(): string {
  const source = readFileSync(SOURCE, "utf8");
  const sdk = pathToFileURL(createRequire(import.meta.url).resolve("@agentclientprotocol/sdk")).href;
  const hash = createHash("sha256").update(`${esbuildVersion}\n${sdk}\n${source}`).digest("hex").slice(0, 16);
  const dir = join(tmpdir(), `acp-orch-scripted-agent-${hash}`);
  const file = join(dir, "scripted-agent.mjs");
  if (existsSync(file)) return file;
  const { code } = transformSync(source, { loader: "ts", format: "esm", target: "node20" });
  const js = code.replaceAll(/from "@agentclientprotocol\/sdk"/g, `from ${JSON.stringify(sdk)}`);
  const bare = [...js.matchAll(/(?:from|import) "([^"]+)"/g)]
    .map((m) => m[1] ?? "")
    .filter((s) => !/^(node:|file:)/.test(s));
  if (bare.length > 0)
    throw new Error(`scripted-agent.ts must import only node: modules and the SDK: ${bare.join(", ")}`);
  mkdirSync(dir, { recursive: true });
  const temp = `${file}.${process.pid}.${Date.now()}`;
  writeFileSync(temp, js);
  renameSync(temp, file);
  return file;
}

/** The transpiled scripted agent's path: run it as `node SCRIPTED_AGENT_PROGRAM [script.json]`. */
export const SCRIPTED_AGENT_PROGRAM = scriptedAgentProgram();

/** The `args` of an agents-config entry (command: `process.execPath`) that runs the scripted agent. */
export const SCRIPTED_AGENT_ARGS: readonly string[] = [SCRIPTED_AGENT_PROGRAM];
