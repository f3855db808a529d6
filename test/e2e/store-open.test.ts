/**
 * A SQLite state file that cannot be used still stops the server loudly (issue 34, cold start): `serve` answers an
 * `initialize` waiting in its input before it opens its store (commands/serve.ts), then opens it; when that fails the
 * server ends by itself, without waiting for its input to close, with the one plain sentence on stderr and exit code 2
 * that it gave before it answered anything. A request sent after `initialize` waited for the store and is answered
 * -32013 with that cause.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { startRawServer, tempDir } from "../support/server-process.js";

/** Starts the server on `statePath`, sends `initialize` then `product.list`; resolves with what it did. */
async function serveOn(statePath: string) {
  const server = startRawServer({ statePath, args: ["--log-level", "silent"] });
  const exited = new Promise<number | null>((resolve) => {
    if (server.child.exitCode !== null) resolve(server.child.exitCode);
    else server.child.once("exit", (code) => resolve(code));
  });
  server.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } });
  server.send({ jsonrpc: "2.0", id: 2, method: "product.list", params: {} });
  const code = await exited; // stdin stays open: the server must end on its own
  const answers = server.stdoutLines.map(
    (line) => JSON.parse(line) as { id?: number; result?: unknown; error?: { code: number; message: string } },
  );
  server.child.stdin.end();
  return { code, answers, lastLine: server.stderr().trim().split("\n").at(-1) };
}

describe("serve on a state file it cannot open (issue 34)", () => {
  it("answers initialize, then exits 2 with one plain sentence when the file is not a database", async () => {
    const statePath = join(tempDir("acp-orch-store-open-"), "state.db");
    writeFileSync(statePath, "this is not a SQLite database\n".repeat(200));
    const { code, answers, lastLine } = await serveOn(statePath);
    expect(code).toBe(2);
    expect(lastLine).toBe(`acp-orchestrator: Cannot open the SQLite state file ${statePath}: file is not a database`);
    expect(answers.find((a) => a.id === 1)?.result).toMatchObject({ protocolVersion: 1 });
    const held = answers.find((a) => a.id === 2);
    expect(held?.error?.code).toBe(-32013);
    expect(held?.error?.message).toContain("file is not a database");
  }, 60_000);

  it("exits 2 naming both versions when the file was written by a newer acp-orchestrator", async () => {
    const statePath = join(tempDir("acp-orch-store-open-"), "state.db");
    const db = new Database(statePath);
    db.exec("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
    db.prepare("INSERT INTO meta (key, value) VALUES ('schema_version', '999')").run();
    db.close();
    const { code, lastLine } = await serveOn(statePath);
    expect(code).toBe(2);
    expect(lastLine).toMatch(
      /^acp-orchestrator: The state file has schema version 999, newer than this acp-orchestrator understands \(\d+\); upgrade acp-orchestrator\.$/,
    );
  }, 60_000);
});
